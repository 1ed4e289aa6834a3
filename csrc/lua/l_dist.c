/*
** Lua binding of data parallelism (csrc/dist/) as bert.core.dist; the
** facade is lua/bert/distributed.lua.  Tensors are reduced in place and
** must be contiguous CPU tensors (the facade stages device tensors).
**
**   init() -> rank, size            rank(), size(), library() | nil, why
**   barrier()                       all_reduce(t, "sum" | "max" | "min")
**   broadcast(t, root)              all_gather(t) -> [size, ...t's shape]
**   all_reduce_numbers({x, ...}, op) -> {y, ...} (doubles)
**   set_timeout(s), timeout()       abort(message[, code])    finalize()
**   set_batch_shard(first, rows, total)   (dropout keyed by global sample)
**   checksum(t) -> integer < 2^48: the bits of t's elements, for comparing replicas
**   reducer(flat_grad, bucket_elements) -> r: r:arm(), r:finish() -> overlapped, wait_s, r:buckets()
*/
#include <string.h>

#include "lbert.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"
#include "dist/dist.h"

#define REDUCER_MT "bert.dist.Reducer"

static int dist_error(lua_State *L) { return luaL_error(L, "%s", bert_last_error()); }

static bert_dist_op check_op(lua_State *L, int arg, const char *fn) {
  static const char *const names[] = {"sum", "max", "min", NULL};
  const char *s = luaL_optstring(L, arg, "sum");
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) return (bert_dist_op)i;
  luaL_error(L, "distributed.%s: argument #%d (op) must be \"sum\", \"mean\", \"max\" or \"min\", got \"%s\"", fn,
             arg, s);
  return BERT_DIST_SUM;
}

/* A contiguous CPU tensor at arg, and its element type. */
static bert_tensor *check_buffer(lua_State *L, int arg, const char *fn, bert_dist_type *type) {
  bert_tensor *t = lbert_test_tensor(L, arg);
  if (t == NULL)
    luaL_error(L, "distributed.%s: argument #%d expected a bert.Tensor, got %s", fn, arg, luaL_typename(L, arg));
  if (!bert_is_host(t)) luaL_error(L, "distributed.%s: argument #%d is a device tensor; pass a CPU tensor", fn, arg);
  if (!bert_is_contiguous(t)) luaL_error(L, "distributed.%s: argument #%d must be contiguous", fn, arg);
  *type = t->dtype == BERT_I32 ? BERT_DIST_I32 : BERT_DIST_F32;
  return t;
}

static int l_init(lua_State *L) {
  if (bert_dist_init() != 0) return dist_error(L);
  lua_pushinteger(L, bert_dist_rank());
  lua_pushinteger(L, bert_dist_size());
  return 2;
}

static int l_rank(lua_State *L) { lua_pushinteger(L, bert_dist_rank()); return 1; }
static int l_size(lua_State *L) { lua_pushinteger(L, bert_dist_size()); return 1; }
static int l_initialized(lua_State *L) { lua_pushboolean(L, bert_dist_initialized()); return 1; }

static int l_library(lua_State *L) {
  const char *lib = bert_dist_library(), *why = NULL;
  if (lib) { lua_pushstring(L, lib); return 1; }
  lua_pushnil(L);
  lua_pushstring(L, bert_dist_loadable(&why) ? "MPI is not in use (not started by mpirun)" : why);
  return 2;
}

static int l_barrier(lua_State *L) {
  if (bert_dist_barrier() != 0) return dist_error(L);
  return 0;
}

static int l_all_reduce(lua_State *L) {
  bert_dist_type type;
  bert_tensor *t = check_buffer(L, 1, "all_reduce", &type);
  bert_dist_op op = check_op(L, 2, "all_reduce");
  if (bert_dist_all_reduce(bert_data(t), bert_numel(t), type, op) != 0) return dist_error(L);
  bert_bump_version(t);
  lua_settop(L, 1);
  return 1;
}

static int l_all_reduce_numbers(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  bert_dist_op op = check_op(L, 2, "all_reduce_numbers");
  lua_Integer n = luaL_len(L, 1);
  if (n < 0 || n > 4096) return luaL_error(L, "distributed.all_reduce_numbers: %d numbers, at most 4096", (int)n);
  double v[4096];
  for (lua_Integer i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    int ok = 0;
    v[i] = lua_tonumberx(L, -1, &ok);
    if (!ok)
      return luaL_error(L, "distributed.all_reduce_numbers: element %d expected a number, got %s", (int)i + 1,
                        luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  if (bert_dist_all_reduce(v, n, BERT_DIST_F64, op) != 0) return dist_error(L);
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 0; i < n; i++) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_broadcast(lua_State *L) {
  bert_dist_type type;
  bert_tensor *t = check_buffer(L, 1, "broadcast", &type);
  int root = (int)luaL_optinteger(L, 2, 0);
  if (bert_dist_broadcast(bert_data(t), bert_numel(t), type, root) != 0) return dist_error(L);
  bert_bump_version(t);
  lua_settop(L, 1);
  return 1;
}

static int l_all_gather(lua_State *L) {
  bert_dist_type type;
  bert_tensor *t = check_buffer(L, 1, "all_gather", &type);
  if (t->ndim + 1 > BERT_MAX_DIMS) return luaL_error(L, "distributed.all_gather: too many dimensions");
  int64_t shape[BERT_MAX_DIMS];
  shape[0] = bert_dist_size();
  memcpy(shape + 1, t->shape, (size_t)t->ndim * sizeof *shape);
  bert_tensor *out = bert_tensor_empty(t->dtype, t->ndim + 1, shape);
  if (out == NULL) return dist_error(L);
  lbert_push_tensor(L, out);
  if (bert_dist_all_gather(bert_data(t), bert_data(out), bert_numel(t), type) != 0) return dist_error(L);
  return 1;
}

static int l_set_timeout(lua_State *L) {
  double s = luaL_checknumber(L, 1);
  if (!(s > 0)) return luaL_error(L, "distributed.set_timeout: seconds must be positive, got %g", s);
  bert_dist_set_timeout(s);
  return 0;
}

static int l_timeout(lua_State *L) { lua_pushnumber(L, bert_dist_get_timeout()); return 1; }

static int l_abort(lua_State *L) {
  bert_dist_abort(luaL_optstring(L, 1, ""), (int)luaL_optinteger(L, 2, 1));
  return 0;
}

static int l_finalize(lua_State *L) {
  if (bert_dist_finalize() != 0) return dist_error(L);
  return 0;
}

static int l_set_batch_shard(lua_State *L) {
  lua_Integer first = luaL_checkinteger(L, 1), rows = luaL_checkinteger(L, 2), total = luaL_checkinteger(L, 3);
  if (rows > 0 && (first < 0 || rows > total || first + rows > total))
    return luaL_error(L, "distributed.set_batch_shard: rows [%d, %d) outside a batch of %d", (int)first,
                      (int)(first + rows), (int)total);
  bert_rng_set_batch_shard(first, rows, total);
  return 0;
}

/* The sum of t's 32-bit words, each weighted by its position, mod 2^48:
** equal bits give equal sums whatever the thread count (integer sums do
** not depend on order), and the result is exact as a double. */
static int l_checksum(lua_State *L) {
  bert_dist_type type;
  bert_tensor *t = check_buffer(L, 1, "checksum", &type);
  const uint32_t *w = (const uint32_t *)bert_data(t);
  int64_t n = bert_numel(t);
  uint64_t sum = 0;
  #pragma omp parallel for reduction(+:sum) if (n >= 65536)
  for (int64_t i = 0; i < n; i++) sum += (uint64_t)w[i] * (uint64_t)(2 * i + 1);
  lua_pushinteger(L, (lua_Integer)(sum & ((UINT64_C(1) << 48) - 1)));
  return 1;
}

/* ------------------------------------------------------------ reducer */

static bert_dist_reducer *check_reducer(lua_State *L) {
  bert_dist_reducer **box = luaL_checkudata(L, 1, REDUCER_MT);
  if (*box == NULL) luaL_error(L, "distributed reducer: already freed");
  return *box;
}

static int l_reducer(lua_State *L) {
  bert_tensor *g = lbert_test_tensor(L, 1);
  if (g == NULL) return luaL_error(L, "distributed.reducer: argument #1 expected the flat gradient tensor, got %s",
                                   luaL_typename(L, 1));
  lua_Integer bucket = luaL_checkinteger(L, 2);
  bert_dist_reducer **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, REDUCER_MT);
  *box = bert_dist_reducer_new(g, (int64_t)bucket);
  if (*box == NULL) return dist_error(L);
  return 1;
}

static int r_arm(lua_State *L) {
  if (bert_dist_reducer_arm(check_reducer(L)) != 0) return dist_error(L);
  return 0;
}

static int r_finish(lua_State *L) {
  int overlapped = 0;
  double waited = 0;
  if (bert_dist_reducer_finish(check_reducer(L), &overlapped, &waited) != 0) return dist_error(L);
  lua_pushinteger(L, overlapped);
  lua_pushnumber(L, waited);
  return 2;
}

static int r_buckets(lua_State *L) {
  lua_pushinteger(L, bert_dist_reducer_buckets(check_reducer(L)));
  return 1;
}

static int r_gc(lua_State *L) {
  bert_dist_reducer **box = luaL_checkudata(L, 1, REDUCER_MT);
  bert_dist_reducer_free(*box);
  *box = NULL;
  return 0;
}

static const luaL_Reg reducer_methods[] = {
  {"arm", r_arm}, {"finish", r_finish}, {"buckets", r_buckets}, {"free", r_gc}, {NULL, NULL}
};

static const luaL_Reg dist_funcs[] = {
  {"init", l_init}, {"rank", l_rank}, {"size", l_size}, {"initialized", l_initialized},
  {"library", l_library}, {"barrier", l_barrier}, {"all_reduce", l_all_reduce},
  {"all_reduce_numbers", l_all_reduce_numbers}, {"broadcast", l_broadcast}, {"all_gather", l_all_gather},
  {"set_timeout", l_set_timeout}, {"timeout", l_timeout}, {"abort", l_abort}, {"finalize", l_finalize},
  {"set_batch_shard", l_set_batch_shard}, {"checksum", l_checksum}, {"reducer", l_reducer}, {NULL, NULL}
};

/* backend_info().distributed: {available (libmpi loadable), in_use, mode,
** library (when in use) | reason (when not available), rank, size} */
void lbert_dist_info(lua_State *L) {
  lua_createtable(L, 0, 6);
  const char *lib = bert_dist_library(), *why = NULL;
  lua_pushboolean(L, bert_dist_loadable(&why));
  lua_setfield(L, -2, "available");
  lua_pushboolean(L, lib != NULL);
  lua_setfield(L, -2, "in_use");
  lua_pushliteral(L, "runtime: libmpi.so.40 (Open MPI) opened with dlopen when mpirun starts the process");
  lua_setfield(L, -2, "mode");
  if (lib) { lua_pushstring(L, lib); lua_setfield(L, -2, "library"); }
  if (why) { lua_pushstring(L, why); lua_setfield(L, -2, "reason"); }
  lua_pushinteger(L, bert_dist_rank());
  lua_setfield(L, -2, "rank");
  lua_pushinteger(L, bert_dist_size());
  lua_setfield(L, -2, "size");
}

void lbert_open_dist(lua_State *L) {
  if (luaL_newmetatable(L, REDUCER_MT)) {
    luaL_newlib(L, reducer_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, r_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  luaL_newlib(L, dist_funcs);
  lua_setfield(L, -2, "dist");
}
