/*
** Lua binding of safetensors I/O: bert.core.load_safetensors,
** save_safetensors and safetensors_header; and lock_file, the one-writer
** lock of a run directory.  File problems return
** nil, message; misuse raises an error naming the function and argument.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "lbert.h"
#include "core/backend.h"
#include "io/safetensors.h"

/* {====================================================== helpers */

/* Pushes {d1, d2, ...} as a Lua sequence. */
static void push_int_list(lua_State *L, const int64_t *v, int n) {
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static void push_metadata(lua_State *L, const bert_st_header *h) {
  lua_createtable(L, 0, (int)h->nmeta);
  for (size_t i = 0; i < h->nmeta; i++) {
    lua_pushstring(L, h->meta_values[i]);
    lua_setfield(L, -2, h->meta_keys[i]);
  }
}

static int push_fail(lua_State *L) {
  luaL_pushfail(L);
  lua_pushstring(L, bert_last_error());
  return 2;
}

/* A short printable rendering of the value at idx for error messages. */
static const char *describe(lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    return lua_pushfstring(L, "'%s'", len > 60 ? "(long string)" : s);
  }
  if (lua_type(L, idx) == LUA_TNUMBER) return lua_pushfstring(L, "%s", lua_tostring(L, idx));
  return lua_pushfstring(L, "a %s", luaL_typename(L, idx));
}

/* A string key without NUL that is valid UTF-8 (the header is JSON). */
static const char *check_name(lua_State *L, int idx, const char *fname, const char *where) {
  if (lua_type(L, idx) != LUA_TSTRING) {
    const char *d = describe(L, idx);
    luaL_error(L, "%s: %s: key %s is not a string name", fname, where, d);
  }
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len) luaL_error(L, "%s: %s: name %s contains a NUL byte", fname, where, describe(L, idx));
  if (!bert_st_valid_utf8(s, len)) luaL_error(L, "%s: %s: name %s is not valid UTF-8", fname, where, describe(L, idx));
  return s;
}

static bert_st_dtype check_st_dtype(lua_State *L, int idx, const char *fname, const char *where) {
  bert_st_dtype dt;
  if (lua_type(L, idx) != LUA_TSTRING || bert_st_dtype_from_name(lua_tostring(L, idx), &dt) != 0 ||
      dt == BERT_ST_U8 || dt == BERT_ST_BOOL)
    luaL_error(L, "%s: %s: unknown dtype %s (expected \"F32\", \"F16\", \"BF16\", \"I32\" or \"I64\")",
               fname, where, describe(L, idx));
  return dt;
}

static int is_float_target(bert_st_dtype dt) {
  return dt == BERT_ST_F32 || dt == BERT_ST_F16 || dt == BERT_ST_BF16;
}
/* }====================================================== */

/* {====================================================== functions */

#define LOADED_MT "bert.safetensors.loaded"

/* The loaded file lives in a userdata until its tensors are handed to
** Lua, so a memory error raised meanwhile frees what is left. */
static int loaded_gc(lua_State *L) {
  bert_st_loaded_free(luaL_checkudata(L, 1, LOADED_MT));
  return 0;
}

/* load_safetensors(path) -> {name = Tensor}, {key = value} | nil, message */
static int l_load_safetensors(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  bert_st_loaded *f = lua_newuserdatauv(L, sizeof *f, 0);
  memset(f, 0, sizeof *f);
  luaL_setmetatable(L, LOADED_MT);
  if (bert_load_safetensors(path, f) != 0) return push_fail(L);
  lua_createtable(L, 0, (int)f->hdr.n);
  for (size_t i = 0; i < f->hdr.n; i++) {
    bert_tensor *t = f->tensors[i];
    f->tensors[i] = NULL;
    lbert_push_tensor(L, t);   /* owns t from here */
    lua_setfield(L, -2, f->hdr.entries[i].name);
  }
  push_metadata(L, &f->hdr);
  bert_st_loaded_free(f);
  return 2;
}

/* safetensors_header(path) -> {name = {dtype=, shape=, data_offsets=}}, metadata */
static int l_safetensors_header(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  bert_st_header h;
  if (bert_st_read_header(path, &h) != 0) return push_fail(L);
  lua_createtable(L, 0, (int)h.n);
  for (size_t i = 0; i < h.n; i++) {
    const bert_st_entry *e = &h.entries[i];
    lua_createtable(L, 0, 3);
    lua_pushstring(L, bert_st_dtype_name(e->dtype));
    lua_setfield(L, -2, "dtype");
    push_int_list(L, e->shape, e->ndim);
    lua_setfield(L, -2, "shape");
    int64_t off[2] = {(int64_t)e->begin, (int64_t)e->end};
    push_int_list(L, off, 2);
    lua_setfield(L, -2, "data_offsets");
    lua_setfield(L, -2, e->name);
  }
  push_metadata(L, &h);
  bert_st_header_free(&h);
  return 2;
}

/* save_safetensors(path, {name = Tensor}[, {metadata=, dtype=, dtypes=}])
** -> true | nil, message.  Arrays live in Lua userdata so that an error
** raised while checking the arguments frees them. */
static int l_save_safetensors(lua_State *L) {
  static const char *fname = "save_safetensors";
  const char *path = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  if (!lua_isnoneornil(L, 3)) luaL_checktype(L, 3, LUA_TTABLE);
  lua_settop(L, 3);

  /* options: 4 = metadata, 5 = dtype, 6 = dtypes */
  if (lua_istable(L, 3)) {
    static const char *const known[] = {"metadata", "dtype", "dtypes", NULL};
    lbert_check_options(L, 3, lua_pushfstring(L, "%s: argument #3", fname), known);
    lua_pop(L, 1);
    lua_getfield(L, 3, "metadata");
    lua_getfield(L, 3, "dtype");
    lua_getfield(L, 3, "dtypes");
    if (!lua_isnil(L, 4) && !lua_istable(L, 4))
      luaL_error(L, "%s: argument #3: opts.metadata is %s, not a table", fname, describe(L, 4));
    if (!lua_isnil(L, 6) && !lua_istable(L, 6))
      luaL_error(L, "%s: argument #3: opts.dtypes is %s, not a table", fname, describe(L, 6));
  } else {
    lua_pushnil(L); lua_pushnil(L); lua_pushnil(L);
  }
  int have_all = !lua_isnil(L, 5);
  bert_st_dtype all = BERT_ST_F32;
  if (have_all) all = check_st_dtype(L, 5, fname, "argument #3: opts.dtype");

  size_t n = 0, nmeta = 0;
  lua_pushnil(L);
  while (lua_next(L, 2)) { n++; lua_pop(L, 1); }
  if (lua_istable(L, 4)) {
    lua_pushnil(L);
    while (lua_next(L, 4)) { nmeta++; lua_pop(L, 1); }
  }
  const char **names = lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);                /* 7 */
  bert_tensor **ts = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ts, 0);                     /* 8 */
  bert_st_dtype *dts = lua_newuserdatauv(L, (n ? n : 1) * sizeof *dts, 0);                  /* 9 */
  const char **mkeys = lua_newuserdatauv(L, (nmeta ? nmeta : 1) * sizeof *mkeys, 0);        /* 10 */
  const char **mvals = lua_newuserdatauv(L, (nmeta ? nmeta : 1) * sizeof *mvals, 0);        /* 11 */
  lua_newtable(L);   /* 12: host copies of device tensors (a checkpoint of a model on the GPU) */

  /* The strings and tensors stay referenced by the argument tables,
  ** which sit on the stack until the call returns. */
  size_t i = 0;
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    if (i == n) luaL_error(L, "%s: argument #2: the table changed while being read", fname);
    const char *name = check_name(L, -2, fname, "argument #2");
    bert_tensor *t = lbert_test_tensor(L, -1);
    if (t == NULL)
      luaL_error(L, "%s: argument #2: value for '%s' is %s, not a bert.Tensor", fname, name, describe(L, -1));
    if (t->storage == NULL)
      luaL_error(L, "%s: argument #2: tensor '%s' has been freed", fname, name);
    if (strcmp(name, "__metadata__") == 0)
      luaL_error(L, "%s: argument #2: '__metadata__' is reserved and cannot name a tensor", fname);
    if (!bert_is_host(t)) {   /* written from a host copy, kept alive in table 12 */
      bert_tensor *h = t->storage->backend->to_host(t);
      if (h == NULL) return lbert_core_error(L, fname);
      lbert_push_tensor(L, h);
      lua_rawseti(L, 12, (lua_Integer)i + 1);
      t = h;
    }
    bert_st_dtype dt = t->dtype == BERT_F32 ? BERT_ST_F32 : BERT_ST_I32;
    if (have_all && is_float_target(all) == (t->dtype == BERT_F32)) dt = all;
    if (lua_istable(L, 6)) {
      lua_getfield(L, 6, name);
      if (!lua_isnil(L, -1)) {
        const char *where = lua_pushfstring(L, "argument #3: opts.dtypes['%s']", name);
        dt = check_st_dtype(L, -2, fname, where);
        if (is_float_target(dt) != (t->dtype == BERT_F32))
          luaL_error(L, "%s: %s: cannot store the %s tensor '%s' as %s", fname, where,
                     bert_dtype_name(t->dtype), name, bert_st_dtype_name(dt));
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    names[i] = name;
    ts[i] = t;
    dts[i] = dt;
    i++;
    lua_pop(L, 1);
  }
  n = i;
  if (lua_istable(L, 6)) {   /* every per-name dtype must name a tensor */
    lua_pushnil(L);
    while (lua_next(L, 6)) {
      const char *name = check_name(L, -2, fname, "argument #3: opts.dtypes");
      lua_pushvalue(L, -2);
      if (lua_rawget(L, 2) == LUA_TNIL)
        luaL_error(L, "%s: argument #3: opts.dtypes names '%s', which is not in the tensors table",
                   fname, name);
      lua_pop(L, 2);
    }
  }
  i = 0;
  if (lua_istable(L, 4)) {
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      if (i == nmeta) luaL_error(L, "%s: argument #3: opts.metadata changed while being read", fname);
      const char *key = check_name(L, -2, fname, "argument #3: opts.metadata");
      if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: argument #3: opts.metadata['%s'] is %s, not a string", fname, key, describe(L, -1));
      size_t len;
      const char *val = lua_tolstring(L, -1, &len);
      if (strlen(val) != len || !bert_st_valid_utf8(val, len))
        luaL_error(L, "%s: argument #3: opts.metadata['%s'] contains a NUL byte or invalid UTF-8", fname, key);
      mkeys[i] = key;
      mvals[i] = val;
      i++;
      lua_pop(L, 1);
    }
  }
  nmeta = i;
  if (bert_save_safetensors(path, names, ts, n, mkeys, mvals, nmeta, dts) != 0) return push_fail(L);
  lua_pushboolean(L, 1);
  return 1;
}
/* }====================================================== */

/* {====================================================== file locks */

/* bert.core.lock_file(path): an exclusive flock on path (created if
** missing), held until lock:release(), the lock's collection or the
** process's end (a process killed with -9 frees it: the kernel drops it
** with the descriptor).  The holder writes "pid N\nhost H\n" into the
** file.  Returns the lock; or nil, "locked", the holder's text when
** another process holds it; or nil, message when the file cannot be opened.
** The descriptor is close-on-exec, so a shell the holder starts never
** keeps the lock after the holder is gone. */
#define LOCK_MT "bert.lock"

static int lock_release(lua_State *L) {
  int *fd = luaL_checkudata(L, 1, LOCK_MT);
  if (*fd >= 0) {
    close(*fd);   /* closing drops the flock */
    *fd = -1;
  }
  return 0;
}

static int l_lock_file(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int *ud = lua_newuserdatauv(L, sizeof(int), 0);
  *ud = -1;
  luaL_setmetatable(L, LOCK_MT);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char holder[256];
    ssize_t n = err == EWOULDBLOCK ? pread(fd, holder, sizeof holder - 1, 0) : -1;
    close(fd);
    lua_pushnil(L);
    if (err != EWOULDBLOCK) {
      lua_pushfstring(L, "%s: %s", path, strerror(err));
      return 2;
    }
    lua_pushliteral(L, "locked");
    lua_pushlstring(L, holder, n > 0 ? (size_t)n : 0);
    return 3;
  }
  *ud = fd;
  /* who holds it, for the message another process prints (a full disk
  ** leaves the file empty: the lock holds all the same) */
  char host[256] = "?", text[320];
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  int len = snprintf(text, sizeof text, "pid %ld\nhost %s\n", (long)getpid(), host);
  if (ftruncate(fd, 0) == 0) {
    ssize_t written = pwrite(fd, text, (size_t)len, 0);
    (void)written;
  }
  return 1;
}
/* }====================================================== */

static const luaL_Reg io_funcs[] = {
  {"load_safetensors", l_load_safetensors},
  {"save_safetensors", l_save_safetensors},
  {"safetensors_header", l_safetensors_header},
  {"lock_file", l_lock_file},
  {NULL, NULL}
};

void lbert_open_io(lua_State *L) {
  if (luaL_newmetatable(L, LOADED_MT)) {
    lua_pushcfunction(L, loaded_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, LOCK_MT)) {
    lua_pushcfunction(L, lock_release);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, lock_release);
    lua_setfield(L, -2, "__close");
    lua_newtable(L);
    lua_pushcfunction(L, lock_release);
    lua_setfield(L, -2, "release");
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  luaL_setfuncs(L, io_funcs, 0);
}
