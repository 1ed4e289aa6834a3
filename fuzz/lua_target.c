/*
** libFuzzer driver for targets written in Lua (fuzz/lua/NAME.lua): tokenizer
** files, encoding with random options, config.json -> model.  The C core
** and its binding are linked in (instrumented); the Lua code is covered
** through a line hook that feeds libFuzzer's extra counters, so the fuzzer
** is guided by the Lua branches too (the file readers are Lua).
**
** A target script returns function(data).  A Lua error raised by it is an
** ordinary rejection of bad input, unless its message holds "FUZZ FINDING"
** (the script found a broken invariant): then the driver aborts, and
** libFuzzer saves the input.  Crashes are caught by ASan/UBSan.
**
** Built once per target with -DFUZZ_SCRIPT="fuzz/lua/<name>.lua"; run from
** the repository root (package.path is ./lua).
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

int luaopen_bert_core(lua_State *L);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef FUZZ_SCRIPT
#error "build with -DFUZZ_SCRIPT=\"fuzz/lua/<target>.lua\""
#endif

/* Lua line coverage as edge counters: (previous line, this line) hashed. */
#define LUA_COV_SIZE (1 << 16)
__attribute__((used, section("__libfuzzer_extra_counters")))
static uint8_t lua_cov[LUA_COV_SIZE];
static uintptr_t prev_loc;

static void line_hook(lua_State *L, lua_Debug *ar) {
  if (!lua_getinfo(L, "S", ar)) return;
  uintptr_t loc = ((uintptr_t)ar->source * 0x9e3779b97f4a7c15u) ^ (uintptr_t)ar->currentline * 0x85ebca6bu;
  loc ^= loc >> 29;
  size_t i = (size_t)((loc ^ (prev_loc >> 1)) & (LUA_COV_SIZE - 1));
  if (lua_cov[i] < 255) lua_cov[i]++;
  prev_loc = loc;
}

static lua_State *L;
static int target_ref = LUA_NOREF;
static char workdir[] = "/tmp/bert-fuzz-XXXXXX";

static void remove_workdir(void) {
  char cmd[64];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
  if (system(cmd) != 0) { /* best effort */ }
}

static int traceback(lua_State *S) {
  const char *msg = lua_tostring(S, 1);
  luaL_traceback(S, S, msg ? msg : "(error object is not a string)", 1);
  return 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  setenv("OMP_NUM_THREADS", "1", 0);
  setenv("OMP_WAIT_POLICY", "passive", 0);
  if (mkdtemp(workdir) == NULL) { perror("mkdtemp"); abort(); }
  atexit(remove_workdir);
  L = luaL_newstate();
  luaL_openlibs(L);
  /* bert.core is linked into this binary; Lua modules come from ./lua */
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_bert_core);
  lua_setfield(L, -2, "bert.core");
  lua_pop(L, 1);
  lua_pushstring(L, workdir);
  lua_setglobal(L, "FUZZ_DIR");
  lua_pushcfunction(L, traceback);
  if (luaL_dostring(L, "package.path = './lua/?.lua;./lua/?/init.lua;./fuzz/lua/?.lua;' .. package.path") != 0 ||
      luaL_loadfile(L, FUZZ_SCRIPT) != 0 || lua_pcall(L, 0, 1, -2) != 0 || !lua_isfunction(L, -1)) {
    fprintf(stderr, "fuzz: cannot load %s: %s\n", FUZZ_SCRIPT,
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "the script must return a function");
    abort();
  }
  target_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned runs;
  lua_pushcfunction(L, traceback);
  lua_rawgeti(L, LUA_REGISTRYINDEX, target_ref);
  lua_pushlstring(L, (const char *)data, size);
  prev_loc = 0;
  lua_sethook(L, line_hook, LUA_MASKLINE, 0);
  int rc = lua_pcall(L, 1, 0, -3);
  lua_sethook(L, NULL, 0, 0);
  if (rc != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    if (msg && strstr(msg, "FUZZ FINDING")) {
      fprintf(stderr, "%s\n", msg);
      abort();
    }
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "rejected: %s\n", msg ? msg : "?");
  }
  lua_settop(L, 0);
  /* tensors and tokenizers are userdata: collect so memory stays flat */
  if (++runs % 32 == 0) lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
