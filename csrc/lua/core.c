/*
** luaopen_bert_core: the C module behind require("bert").  Backend
** selection and introspection live here; each binding file registers its
** own functions.
*/
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <omp.h>
#include <cblas.h>

#include "core/parallel.h"
#include "lbert.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "vulkan/vk.h"

#define BERT_VERSION "0.1.0"

static int l_set_num_threads(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 1 || n > 1024)
    return luaL_argerror(L, 1, lua_pushfstring(L, "thread count must be in 1..1024, got %I", n));
  bert_set_num_threads((int)n);
  bert_gemm_set_num_threads((int)n);
  return 0;
}

static int l_get_num_threads(lua_State *L) {
  lua_pushinteger(L, bert_get_num_threads());
  return 1;
}

static int l_set_gemm(lua_State *L) {
  static const char *const names[] = {"openblas", "onednn", "bert", NULL};
  int p = luaL_checkoption(L, 1, NULL, names);
  if (bert_gemm_set_provider((bert_gemm_provider)p) != 0)
    return luaL_error(L, "set_gemm: %s", bert_last_error());
  return 0;
}

static int l_gemm_providers(lua_State *L) {
  lua_newtable(L);
  int n = 0;
  for (int p = 0; p < BERT_GEMM_NPROVIDERS; p++)
    if (bert_gemm_available((bert_gemm_provider)p)) {
      lua_pushstring(L, bert_gemm_provider_name((bert_gemm_provider)p));
      lua_rawseti(L, -2, ++n);
    }
  return 1;
}

/* Test only: core._sgemm_reference_diff(ta, tb, M, N, K, alpha, beta, ldpad, seed)
** runs bert_sgemm_packed and OpenBLAS on the same random operands (every
** leading dimension ldpad wider than its matrix, C NaN-filled when beta is
** 0) and returns the largest |difference|, the largest |reference| and
** whether both left C's padding columns alone. */
static float *gemm_test_buffer(lua_State *L, int64_t n) {
  return lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof(float), 0);
}

static int l_sgemm_reference_diff(lua_State *L) {
  int ta = lua_toboolean(L, 1), tb = lua_toboolean(L, 2);
  int64_t M = luaL_checkinteger(L, 3), N = luaL_checkinteger(L, 4), K = luaL_checkinteger(L, 5);
  float alpha = (float)luaL_checknumber(L, 6), beta = (float)luaL_checknumber(L, 7);
  int64_t pad = luaL_optinteger(L, 8, 0);
  uint32_t seed = (uint32_t)luaL_optinteger(L, 9, 1);
  luaL_argcheck(L, M >= 0 && M <= 4096 && N >= 0 && N <= 4096 && K >= 0 && K <= 4096, 3,
                "sizes must be in 0..4096");
  luaL_argcheck(L, pad >= 0 && pad <= 64, 8, "ldpad must be in 0..64");
  int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
  float *A = gemm_test_buffer(L, na), *B = gemm_test_buffer(L, nb);
  float *C = gemm_test_buffer(L, nc), *R = gemm_test_buffer(L, nc);
  for (int64_t i = 0; i < na + nb + nc; i++) {
    seed = seed * 1664525u + 1013904223u;
    float x = (float)(seed >> 8) / 8388608.0f - 1.0f;   /* uniform in [-1, 1) */
    if (i < na) A[i] = x;
    else if (i < na + nb) B[i - na] = x;
    else C[i - na - nb] = R[i - na - nb] = beta == 0.0f ? NAN : x;
  }
  bert_sgemm_packed(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (M > 0 && N > 0)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (blasint)M, (blasint)N, (blasint)K, alpha, A, (blasint)(lda > 0 ? lda : 1), B,
                (blasint)(ldb > 0 ? ldb : 1), beta, R, (blasint)(ldc > 0 ? ldc : 1));
  double diff = 0, mag = 0;
  int pad_ok = 1;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < ldc; j++) {
      float c = C[i * ldc + j], r = R[i * ldc + j];
      if (j >= N) { pad_ok = pad_ok && (c == r || (c != c && r != r)); continue; }
      double d = fabs((double)c - (double)r);
      if (!(d <= diff)) diff = d;     /* a NaN sticks */
      if (fabs((double)r) > mag) mag = fabs((double)r);
    }
  lua_pushnumber(L, diff);
  lua_pushnumber(L, mag);
  lua_pushboolean(L, pad_ok);
  return 3;
}

/* Test only: core._data_address(t) -> the address of t's first element, as
** an integer (the allocator's alignment is checked with it). */
static int l_data_address(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  luaL_argcheck(L, t->storage != NULL && t->storage->data != NULL, 1, "tensor has no host storage");
  lua_pushinteger(L, (lua_Integer)(uintptr_t)bert_data(t));
  return 1;
}

static int l_backend_info(lua_State *L) {
  lua_newtable(L);
  lua_pushstring(L, bert_gemm_provider_name(bert_gemm_get_provider()));
  lua_setfield(L, -2, "gemm");
  l_gemm_providers(L);
  lua_setfield(L, -2, "gemm_providers");
  lua_pushstring(L, bert_openblas_corename());
  lua_setfield(L, -2, "openblas_core");
  lua_pushinteger(L, bert_openblas_num_threads());
  lua_setfield(L, -2, "openblas_threads");
  lua_pushinteger(L, bert_get_num_threads());
  lua_setfield(L, -2, "threads");
  lua_pushinteger(L, omp_get_num_procs());
  lua_setfield(L, -2, "cpus");
  lua_pushliteral(L, "cpu");
  lua_setfield(L, -2, "devices");
  lbert_dist_info(L);
  lua_setfield(L, -2, "distributed");
  return 1;
}

static int l_memory_in_use(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)bert_mem_in_use());
  return 1;
}

/* Seconds on a monotonic clock, for timing (os.clock sums CPU over threads). */
static int l_wall_time(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
  return 1;
}

/* bert.mkdir(path): creates path and its parents (mkdir -p); true, or
** nil, message. */
static int l_mkdir(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  char *p = luaL_buffinitsize(L, &b, len + 1);
  memcpy(p, path, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char c = p[i];
    p[i] = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      lua_pushnil(L);
      lua_pushfstring(L, "mkdir: cannot create '%s': %s", p, strerror(errno));
      return 2;
    }
    p[i] = c;
  }
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    lua_pushnil(L);
    lua_pushfstring(L, "mkdir: '%s' exists and is not a directory", path);
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* bert.isdir(path) -> boolean */
static int l_isdir(lua_State *L) {
  struct stat st;
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode));
  return 1;
}

/* bert.listdir(path): the names in a directory (without . and ..), in no
** particular order; or nil, message. */
static int l_listdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  DIR *d = opendir(path);
  if (!d) {
    lua_pushnil(L);
    lua_pushfstring(L, "listdir: cannot open '%s': %s", path, strerror(errno));
    return 2;
  }
  lua_newtable(L);
  lua_Integer n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    lua_pushstring(L, e->d_name);
    lua_rawseti(L, -2, ++n);
  }
  closedir(d);
  return 1;
}

static int l_memory_cached(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)bert_mem_cached());
  return 1;
}

/* bert.set_cache_limit(bytes | "auto"): the most freed memory kept for
** reuse (0: none); "auto" (the default) follows the peak bytes in use,
** from 2 GB to half the machine's memory */
static int l_set_cache_limit(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING) {
    if (strcmp(lua_tostring(L, 1), "auto") != 0)
      return luaL_argerror(L, 1, lua_pushfstring(L, "expected a byte count or 'auto', got '%s'", lua_tostring(L, 1)));
    bert_set_cache_limit_auto();
    return 0;
  }
  lua_Integer n = luaL_checkinteger(L, 1);
  if (n < 0) return luaL_argerror(L, 1, lua_pushfstring(L, "cache limit must be non-negative, got %I", n));
  bert_set_cache_limit((size_t)n);
  return 0;
}

/* bert.cache_limit() -> the limit in force now, in bytes */
static int l_cache_limit(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)bert_cache_limit());
  return 1;
}

static int l_empty_cache(lua_State *L) {
  (void)L;
  bert_empty_cache();
  return 0;
}

static const luaL_Reg core_funcs[] = {
  {"memory_cached", l_memory_cached}, {"set_cache_limit", l_set_cache_limit}, {"cache_limit", l_cache_limit},
  {"empty_cache", l_empty_cache},
  {"mkdir", l_mkdir}, {"isdir", l_isdir}, {"listdir", l_listdir},
  {"wall_time", l_wall_time},
  {"set_num_threads", l_set_num_threads}, {"get_num_threads", l_get_num_threads},
  {"set_gemm", l_set_gemm}, {"gemm_providers", l_gemm_providers},
  {"_sgemm_reference_diff", l_sgemm_reference_diff},
  {"_data_address", l_data_address},
  {"backend_info", l_backend_info}, {"memory_in_use", l_memory_in_use},
  {NULL, NULL}
};

int luaopen_bert_core(lua_State *L);

__attribute__((visibility("default"))) int luaopen_bert_core(lua_State *L) {
  /* Lua dlcloses C modules at exit; idle OpenMP threads (and the loader's
  ** own helper threads) would then run unmapped libgomp code: pin it. */
  void *gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  (void)gomp;
  bert_gemm_init();
  /* the devices: the CPU serves host memory; the others are chosen by
  ** where a tensor lives (t:to("vulkan")) */
  bert_backend_register(&bert_cpu_backend);
  bert_backend_register(&bert_vulkan_backend);
  luaL_newlib(L, core_funcs);
  lua_pushliteral(L, BERT_VERSION);
  lua_setfield(L, -2, "version");
  lbert_open_tensor(L);
  lbert_open_io(L);
  lbert_open_tokenizer(L);
  lbert_open_autograd(L);
  lbert_open_nn(L);
  lbert_open_optim(L);
  lbert_open_data(L);
  lbert_open_vulkan(L);
  lbert_open_dist(L);
  return 1;
}
