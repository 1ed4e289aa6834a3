/*
** Lua binding of bert.Tensor: a userdata box holding a pointer to a
** refcounted core tensor.  Dimensions and positions given as Lua numbers
** are 1-based, negative ones count from the end (-1 is the last); index
** tensors hold 0-based positions (like token ids).
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lbert.h"
#include "core/ag_ops.h"
#include "core/autograd.h"
#include "core/backend.h"

/* {====================================================== boxes */

/* The GC cannot see tensor memory (a box is 8 bytes to Lua), so it is
** paced here: every 16 MB of tensor allocations advance the incremental
** collector as if that much Lua memory had been allocated, which frees
** dead intermediate tensors at the rate they are made.  A full collection
** above a soft limit (twice the live bytes after the last one) is the
** backstop, as in torch7's heap tracking. */
#define GC_FLOOR ((size_t)256 << 20)
#define GC_PACE ((size_t)16 << 20)
static size_t gc_threshold = GC_FLOOR;
static size_t gc_paced;
static size_t gc_full_at;   /* bert_mem_allocated_total() at the last full collection */

static void gc_full(lua_State *L) {
  lua_gc(L, LUA_GCCOLLECT);
  gc_full_at = bert_mem_allocated_total();
  size_t used = bert_mem_in_use();
  gc_threshold = used * 2 > GC_FLOOR ? used * 2 : GC_FLOOR;
}

/* After a backward the step's intermediate tensors are dead, but their
** blocks go back to the allocator's cache only when the GC collects their
** boxes.  Collected here, once GC_FLOOR bytes were allocated since the last
** full collection, so the next forward reuses them instead of taking fresh
** pages: BERT-base at B 32 x T 256, 0.83M -> 0.53M page faults a step and a
** peak RSS of 15.4 GB instead of 19.0 (docs/speed.md). */
void lbert_gc_after_backward(lua_State *L) {
  if (bert_mem_allocated_total() - gc_full_at >= GC_FLOOR) gc_full(L);
}

static bert_tensor **newbox(lua_State *L) {
  size_t total = bert_mem_allocated_total();
  if (total - gc_paced >= GC_PACE) {
    lua_gc(L, LUA_GCSTEP, (int)((total - gc_paced) >> 10));
    gc_paced = total;
  }
  size_t used = bert_mem_in_use();
  if (used > gc_threshold) gc_full(L);
  bert_tensor **box = (bert_tensor **)lua_newuserdatauv(L, sizeof(bert_tensor *), 0);
  *box = NULL;   /* safe empty state before anything can fail */
  luaL_setmetatable(L, BERT_TENSOR_MT);
  return box;
}

void lbert_push_tensor(lua_State *L, bert_tensor *t) {
  bert_tensor **box = newbox(L);
  *box = t;
}

bert_tensor *lbert_test_tensor(lua_State *L, int arg) {
  bert_tensor **box = (bert_tensor **)luaL_testudata(L, arg, BERT_TENSOR_MT);
  if (box == NULL) return NULL;
  if (*box == NULL || (*box)->storage == NULL)
    luaL_argerror(L, arg, "tensor has been freed");
  return *box;
}

bert_tensor *lbert_check_tensor(lua_State *L, int arg) {
  bert_tensor *t = lbert_test_tensor(L, arg);
  if (t == NULL) luaL_typeerror(L, arg, BERT_TENSOR_MT);
  return t;
}

bert_tensor *lbert_check_host_copy(lua_State *L, int arg, const char *fname) {
  bert_tensor *t = lbert_check_tensor(L, arg);
  if (bert_is_host(t)) return t;
  arg = lua_absindex(L, arg);
  bert_tensor *h = bert_backend_of(t)->to_host(t);
  if (h == NULL) { lbert_core_error(L, fname); return NULL; }
  lbert_push_tensor(L, h);
  lua_replace(L, arg);
  return h;
}

bert_tensor *lbert_check_host(lua_State *L, int arg, const char *fname) {
  bert_tensor *t = lbert_check_tensor(L, arg);
  if (!bert_is_host(t))
    luaL_error(L, "%s: argument #%d is a %s tensor, but '%s' runs on the cpu only (move it with t:to(\"cpu\"))",
               fname, arg, bert_backend_of(t)->name, fname);
  return t;
}

int lbert_core_error(lua_State *L, const char *fname) {
  const char *msg = bert_last_error();
  /* the core may already name the op ("add: ..."); keep one prefix, the
  ** caller's, which is more precise ("add_") */
  const char *colon = strchr(msg, ':');
  size_t n = colon ? (size_t)(colon - msg) : 0;
  if (colon && n > 0 && strncmp(fname, msg, n) == 0 && strchr(fname, ' ') == NULL)
    return luaL_error(L, "%s:%s", fname, colon + 1);
  return luaL_error(L, "%s: %s", fname, msg);
}

/* Pushes a core result, or raises the core's error. */
int lbert_push_result(lua_State *L, bert_tensor *t, const char *fname) {
  if (t == NULL) return lbert_core_error(L, fname);
  lbert_push_tensor(L, t);
  return 1;
}

static const char *shape_s(char *buf, size_t n, const bert_tensor *t) {
  return bert_shape_str(buf, n, t->ndim, t->shape);
}
/* }====================================================== */

/* {====================================================== argument helpers */

/* A 1-based (or negative) Lua dim -> 0-based, for a tensor of ndim dims
** (+extra for unsqueeze, which may address one past the end). */
int lbert_check_dim(lua_State *L, int arg, int ndim, int extra) {
  lua_Integer d = luaL_checkinteger(L, arg);
  int n = ndim + extra;
  lua_Integer z = d < 0 ? d + n : d - 1;
  if (z < 0 || z >= n || n == 0)
    return luaL_argerror(L, arg, lua_pushfstring(L,
        "dimension %I out of range for a %dD tensor (dims are 1-based, -1 is the last)", d, ndim));
  return (int)z;
}

static int opt_dim(lua_State *L, int arg, int ndim, int def) {
  return lua_isnoneornil(L, arg) ? def : lbert_check_dim(L, arg, ndim, 0);
}

/* A shape from a table {2, 3} or from the integers at arg..top. */
static int check_shape(lua_State *L, int arg, int64_t *shape) {
  int n = 0;
  if (lua_istable(L, arg)) {
    n = (int)luaL_len(L, arg);
    if (n > BERT_MAX_DIMS)
      return luaL_argerror(L, arg, lua_pushfstring(L, "%d dimensions, at most %d supported", n, BERT_MAX_DIMS));
    for (int i = 0; i < n; i++) {
      lua_geti(L, arg, i + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok)
        return luaL_argerror(L, arg, lua_pushfstring(L, "size %d of the shape is %s, expected an integer",
                                                     i + 1, luaL_tolstring(L, -1, NULL)));
      shape[i] = v;
      lua_pop(L, 1);
    }
  } else {
    int top = lua_gettop(L);
    if (top < arg || !lua_isinteger(L, arg))
      return luaL_typeerror(L, arg, "shape table or integer sizes");
    for (int i = arg; i <= top && lua_isinteger(L, i); i++) {
      if (n >= BERT_MAX_DIMS)
        return luaL_argerror(L, i, lua_pushfstring(L, "at most %d dimensions supported", BERT_MAX_DIMS));
      shape[n++] = lua_tointeger(L, i);
    }
  }
  for (int i = 0; i < n; i++)
    if (shape[i] < 0) {
      char buf[160];
      return luaL_argerror(L, arg, lua_pushfstring(L, "size %I of dimension %d is negative in shape %s",
                           (lua_Integer)shape[i], i + 1, bert_shape_str(buf, sizeof buf, n, shape)));
    }
  return n;
}

/* Number of shape args consumed by check_shape at arg (for trailing options). */
static int shape_arg_count(lua_State *L, int arg) {
  if (lua_istable(L, arg)) return 1;
  int c = 0;
  while (lua_isinteger(L, arg + c)) c++;
  return c;
}

static bert_dtype check_dtype(lua_State *L, int arg, bert_dtype def) {
  if (lua_isnoneornil(L, arg)) return def;
  const char *name = luaL_checkstring(L, arg);
  bert_dtype dt;
  if (bert_dtype_from_name(name, &dt) != 0)
    luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (expected 'float32' or 'int32')", name));
  return dt;
}

void lbert_check_options(lua_State *L, int idx, const char *fname, const char *const known[]) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *k = lua_tostring(L, -1);
      int i = 0;
      while (known[i] && strcmp(k, known[i]) != 0) i++;
      if (known[i]) continue;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; known[i]; i++) {
      if (i) luaL_addstring(&b, ", ");
      luaL_addstring(&b, known[i]);
    }
    luaL_pushresult(&b);
    const char *names = lua_tostring(L, -1);
    const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_pushfstring(L, "'%s'", lua_tostring(L, -2))
                                                     : lua_pushfstring(L, "[%s]", luaL_tolstring(L, -2, NULL));
    luaL_error(L, "%s: unknown option %s (the options: %s)", fname, key, names);
  }
}

/* Options: a dtype string or a table {dtype = ..., seed = ...} whose keys
** known lists (fname's; a misspelt "sead" would draw unseeded numbers). */
static const char *const dtype_options[] = {"dtype", NULL};
static bert_dtype opt_dtype_field(lua_State *L, int arg, bert_dtype def, const char *fname,
                                  const char *const known[]) {
  if (lua_type(L, arg) == LUA_TSTRING) return check_dtype(L, arg, def);
  if (!lua_istable(L, arg)) {
    if (!lua_isnoneornil(L, arg)) luaL_typeerror(L, arg, "dtype string or options table");
    return def;
  }
  lbert_check_options(L, arg, fname, known);
  lua_getfield(L, arg, "dtype");
  bert_dtype dt = def;
  if (!lua_isnil(L, -1)) {
    const char *name = lua_tostring(L, -1);
    if (name == NULL || bert_dtype_from_name(name, &dt) != 0)
      luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (expected 'float32' or 'int32')",
                                            luaL_tolstring(L, -1, NULL)));
  }
  lua_pop(L, 1);
  return dt;
}

/* A tensor argument, or a number turned into a 0-d tensor (int32 for Lua
** integers, float32 otherwise).  The caller releases the result. */
static bert_tensor *tensor_or_scalar(lua_State *L, int arg, const char *fname) {
  bert_tensor *t = lbert_test_tensor(L, arg);
  if (t) { bert_tensor_retain(t); return t; }
  if (lua_type(L, arg) != LUA_TNUMBER)
    luaL_typeerror(L, arg, "bert.Tensor or number");
  int is_int = lua_isinteger(L, arg);
  lua_Integer iv = is_int ? lua_tointeger(L, arg) : 0;
  if (is_int && (iv > INT32_MAX || iv < INT32_MIN)) is_int = 0;
  bert_tensor *s = bert_tensor_empty(is_int ? BERT_I32 : BERT_F32, 0, NULL);
  if (s == NULL) lbert_core_error(L, fname);
  if (is_int) bert_i32(s)[0] = (int32_t)iv;
  else bert_f32(s)[0] = (float)lua_tonumber(L, arg);
  return s;
}
/* }====================================================== */

/* {====================================================== construction */

/* Walks the first elements to find the shape of a nested table. */
static int nested_shape(lua_State *L, int idx, int64_t *shape) {
  int n = 0;
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    if (n >= BERT_MAX_DIMS) luaL_error(L, "tensor: nested table deeper than %d levels", BERT_MAX_DIMS);
    shape[n++] = (int64_t)luaL_len(L, -1);
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
  return n;
}

static void path_str(char *buf, size_t size, const int64_t *path, int depth) {
  size_t k = (size_t)snprintf(buf, size, "{");
  for (int i = 0; i < depth && k < size; i++)
    k += (size_t)snprintf(buf + k, size - k, i ? ",%lld" : "%lld", (long long)path[i] + 1);
  if (k < size) snprintf(buf + k, size - k, "}");
}

/* Copies the nested table at the top of the stack into t, checking it is
** rectangular.  pos is the running flat index. */
static void fill_nested(lua_State *L, bert_tensor *t, int depth, int64_t *path, int64_t *pos) {
  char where[128];
  if (depth == t->ndim) {
    int ok;
    lua_Number v = lua_tonumberx(L, -1, &ok);
    if (!ok || lua_type(L, -1) != LUA_TNUMBER) {
      path_str(where, sizeof where, path, depth);
      luaL_error(L, "tensor: element at %s is a %s, expected a number", where, luaL_typename(L, -1));
    }
    if (t->dtype == BERT_F32) bert_f32(t)[*pos] = (float)v;
    else {
      if (!lua_isinteger(L, -1) && v != floor(v)) {
        path_str(where, sizeof where, path, depth);
        luaL_error(L, "tensor: element at %s is %f, not an integer, for an int32 tensor", where, v);
      }
      if (v > INT32_MAX || v < INT32_MIN) {
        path_str(where, sizeof where, path, depth);
        luaL_error(L, "tensor: element at %s (%f) does not fit int32", where, v);
      }
      bert_i32(t)[*pos] = (int32_t)v;
    }
    (*pos)++;
    return;
  }
  if (!lua_istable(L, -1)) {
    path_str(where, sizeof where, path, depth);
    luaL_error(L, "tensor: ragged nested table: element at %s is a %s, expected a table of %I",
               where, luaL_typename(L, -1), (lua_Integer)t->shape[depth]);
  }
  int64_t len = (int64_t)luaL_len(L, -1);
  if (len != t->shape[depth]) {
    path_str(where, sizeof where, path, depth);
    luaL_error(L, "tensor: ragged nested table: row at %s has %I elements, expected %I",
               where, (lua_Integer)len, (lua_Integer)t->shape[depth]);
  }
  luaL_checkstack(L, 4, "tensor: nesting too deep");
  for (int64_t i = 0; i < len; i++) {
    path[depth] = i;
    lua_geti(L, -1, (lua_Integer)i + 1);
    fill_nested(L, t, depth + 1, path, pos);
    lua_pop(L, 1);
  }
}

static int l_tensor(lua_State *L) {
  bert_dtype dt = check_dtype(L, 2, BERT_F32);
  int64_t shape[BERT_MAX_DIMS];
  int nd = 0;
  if (lua_type(L, 1) == LUA_TNUMBER) nd = 0;
  else if (lua_istable(L, 1)) nd = nested_shape(L, 1, shape);
  else return luaL_typeerror(L, 1, "nested table or number");
  bert_tensor **box = newbox(L);   /* owns the tensor even if filling raises */
  *box = bert_tensor_empty(dt, nd, shape);
  if (*box == NULL) return lbert_core_error(L, "tensor");
  int64_t path[BERT_MAX_DIMS] = {0}, pos = 0;
  lua_pushvalue(L, 1);
  fill_nested(L, *box, 0, path, &pos);
  lua_pop(L, 1);
  return 1;
}

/* zeros, ones, full(shape, value), empty: shape, then dtype or options */
typedef enum { FILL_ZEROS, FILL_ONES, FILL_VALUE, FILL_NONE } fill_kind;

static int filled(lua_State *L, const char *fname, fill_kind kind) {
  int64_t shape[BERT_MAX_DIMS];
  int nd = check_shape(L, 1, shape);
  int next = 1 + shape_arg_count(L, 1);
  double value = kind == FILL_ONES ? 1 : 0;
  if (kind == FILL_VALUE) value = luaL_checknumber(L, next++);
  bert_dtype dt = opt_dtype_field(L, next, BERT_F32, fname, dtype_options);
  bert_tensor **box = newbox(L);
  /* empty() is zeroed too: uninitialised memory would make results depend on luck */
  *box = (kind == FILL_ZEROS || kind == FILL_NONE) ? bert_tensor_new(dt, nd, shape)
                                                   : bert_tensor_empty(dt, nd, shape);
  if (*box == NULL) return lbert_core_error(L, fname);
  if (kind == FILL_ONES || kind == FILL_VALUE) bert_fill_(*box, value);
  return 1;
}

static int l_zeros(lua_State *L) { return filled(L, "zeros", FILL_ZEROS); }
static int l_ones(lua_State *L) { return filled(L, "ones", FILL_ONES); }
static int l_full(lua_State *L) { return filled(L, "full", FILL_VALUE); }
static int l_empty(lua_State *L) { return filled(L, "empty", FILL_NONE); }

static int l_arange(lua_State *L) {
  double start = 0, stop, step = 1;
  int n = 0;
  while (lua_type(L, n + 1) == LUA_TNUMBER) n++;
  if (n == 0) return luaL_typeerror(L, 1, "number");
  if (n == 1) stop = lua_tonumber(L, 1);
  else { start = lua_tonumber(L, 1); stop = lua_tonumber(L, 2); if (n >= 3) step = lua_tonumber(L, 3); }
  int all_int = 1;
  for (int i = 1; i <= n && i <= 3; i++) all_int &= lua_isinteger(L, i);
  bert_dtype dt = opt_dtype_field(L, (n > 3 ? 3 : n) + 1, all_int ? BERT_I32 : BERT_F32, "arange", dtype_options);
  return lbert_push_result(L, bert_arange(start, stop, step, dt), "arange");
}

static int l_eye(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  int next = 2;
  lua_Integer m = n;
  if (lua_isinteger(L, 2)) { m = lua_tointeger(L, 2); next = 3; }
  if (n < 0 || m < 0)
    return luaL_error(L, "eye: sizes must be non-negative, got %I x %I", n, m);
  bert_dtype dt = opt_dtype_field(L, next, BERT_F32, "eye", dtype_options);
  return lbert_push_result(L, bert_eye(n, m, dt), "eye");
}

/* The default generator (rng.c) advances with every unseeded draw, so
** successive calls give fresh numbers and manual_seed replays them. */
static int l_manual_seed(lua_State *L) {
  bert_rng_set_state((uint64_t)luaL_checkinteger(L, 1), 0);
  return 0;
}

/* bert.rng_state() -> seed, offset; bert.set_rng_state(seed, offset) */
static int l_rng_state(lua_State *L) {
  uint64_t seed, offset;
  bert_rng_get_state(&seed, &offset);
  lua_pushinteger(L, (lua_Integer)seed);
  lua_pushinteger(L, (lua_Integer)offset);
  return 2;
}

static int l_set_rng_state(lua_State *L) {
  bert_rng_set_state((uint64_t)luaL_checkinteger(L, 1), (uint64_t)luaL_checkinteger(L, 2));
  return 0;
}

static int random_fill(lua_State *L, const char *fname, bert_rand_kind kind, int shape_arg,
                       double a, double b, bert_dtype def) {
  int64_t shape[BERT_MAX_DIMS];
  int nd = check_shape(L, shape_arg, shape);
  int opt = shape_arg + shape_arg_count(L, shape_arg);
  static const char *const uniform_options[] = {"dtype", "seed", "low", "high", NULL};
  static const char *const normal_options[] = {"dtype", "seed", "mean", "std", NULL};
  static const char *const int_options[] = {"dtype", "seed", NULL};
  bert_dtype dt = opt_dtype_field(L, opt, def, fname, kind == BERT_RAND_NORMAL ? normal_options
                                  : kind == BERT_RAND_INT ? int_options : uniform_options);
  uint64_t seed, offset = 0;
  bert_rng_get_state(&seed, &offset);
  offset = 0;
  int seeded = 0;
  if (lua_istable(L, opt)) {
    if (lua_getfield(L, opt, "seed") != LUA_TNIL) {
      int ok;
      seed = (uint64_t)lua_tointegerx(L, -1, &ok);
      if (!ok) return luaL_argerror(L, opt, "seed must be an integer");
      seeded = 1;
    }
    lua_pop(L, 1);
    if (kind != BERT_RAND_INT) {
      const char *lo = kind == BERT_RAND_NORMAL ? "mean" : "low";
      const char *hi = kind == BERT_RAND_NORMAL ? "std" : "high";
      if (lua_getfield(L, opt, lo) != LUA_TNIL) a = luaL_checknumber(L, -1);
      if (lua_getfield(L, opt, hi) != LUA_TNIL) b = luaL_checknumber(L, -1);
      lua_pop(L, 2);
    }
  }
  bert_tensor **box = newbox(L);
  *box = bert_tensor_empty(dt, nd, shape);
  if (*box == NULL) return lbert_core_error(L, fname);
  if (!seeded) offset = bert_rng_reserve((uint64_t)bert_numel(*box));
  if (bert_fill_random(*box, kind, seed, offset, a, b) != 0) return lbert_core_error(L, fname);
  return 1;
}

/* In-place writes: refused on tensors that take part in autograd (their
** old values may be needed by backward), and versioned so backward can
** detect a saved tensor changed behind its back. */
static void check_inplace(lua_State *L, bert_tensor *t, const char *fname) {
  if (bert_grad_enabled() && t->requires_grad)
    luaL_error(L, "%s: in-place operation on a tensor that requires grad "
                  "(use bert.no_grad, or clone the tensor first)", fname);
  bert_bump_version(t);
}

/* t:normal_([mean, std]) and t:uniform_([low, high]): refill a contiguous
** tensor in place from the default generator. */
static int fill_random_(lua_State *L, bert_rand_kind kind, const char *fname, double a, double b) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  a = luaL_optnumber(L, 2, a);
  b = luaL_optnumber(L, 3, b);
  if (!bert_is_contiguous(t) || t->dtype != BERT_F32)
    return luaL_error(L, "%s: needs a contiguous float32 tensor", fname);
  check_inplace(L, t, fname);
  if (bert_fill_random(t, kind, bert_rng_get_seed(), bert_rng_reserve((uint64_t)bert_numel(t)), a, b) != 0)
    return lbert_core_error(L, fname);
  lua_settop(L, 1);
  return 1;
}
static int m_normal_(lua_State *L) { return fill_random_(L, BERT_RAND_NORMAL, "normal_", 0, 1); }
static int m_uniform_(lua_State *L) { return fill_random_(L, BERT_RAND_UNIFORM, "uniform_", 0, 1); }

static int l_rand(lua_State *L) { return random_fill(L, "rand", BERT_RAND_UNIFORM, 1, 0, 1, BERT_F32); }
static int l_randn(lua_State *L) { return random_fill(L, "randn", BERT_RAND_NORMAL, 1, 0, 1, BERT_F32); }

static int l_randint(lua_State *L) {
  lua_Integer lo = luaL_checkinteger(L, 1), hi = luaL_checkinteger(L, 2);
  if (hi <= lo)
    return luaL_error(L, "randint: empty range [%I, %I): high must exceed low", lo, hi);
  if (lo < INT32_MIN || hi - 1 > INT32_MAX)
    return luaL_error(L, "randint: range [%I, %I) does not fit int32", lo, hi);
  return random_fill(L, "randint", BERT_RAND_INT, 3, (double)lo, (double)hi, BERT_I32);
}
/* }====================================================== */

/* {====================================================== inspection */

static int m_shape(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) { lua_pushinteger(L, t->shape[i]); lua_rawseti(L, -2, i + 1); }
  return 1;
}

static int m_size(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) return m_shape(L);
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  lua_pushinteger(L, t->shape[d]);
  return 1;
}

static int m_stride(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  lua_createtable(L, t->ndim, 0);
  for (int i = 0; i < t->ndim; i++) { lua_pushinteger(L, t->stride[i]); lua_rawseti(L, -2, i + 1); }
  return 1;
}

static int m_dim(lua_State *L) { lua_pushinteger(L, lbert_check_tensor(L, 1)->ndim); return 1; }
static int m_numel(lua_State *L) { lua_pushinteger(L, bert_numel(lbert_check_tensor(L, 1))); return 1; }
static int m_dtype(lua_State *L) { lua_pushstring(L, bert_dtype_name(lbert_check_tensor(L, 1)->dtype)); return 1; }
static int m_device(lua_State *L) {
  lua_pushstring(L, bert_backend_of(lbert_check_tensor(L, 1))->name);
  return 1;
}
static int m_is_contiguous(lua_State *L) { lua_pushboolean(L, bert_is_contiguous(lbert_check_tensor(L, 1))); return 1; }

static void push_elem(lua_State *L, const bert_tensor *t, int64_t flat) {
  double v = bert_get_flat(t, flat);
  if (t->dtype == BERT_I32) lua_pushinteger(L, (lua_Integer)v);
  else lua_pushnumber(L, v);
}

static int m_item(lua_State *L) {
  char b[160];
  bert_tensor *t = lbert_check_host_copy(L, 1, "item");
  if (bert_numel(t) != 1)
    return luaL_error(L, "item: tensor %s has %I elements, expected exactly 1",
                      shape_s(b, sizeof b, t), (lua_Integer)bert_numel(t));
  push_elem(L, t, 0);
  return 1;
}

/* Element access with 1-based positions: t:get(i, j, ...) and t:set(v, i, j, ...). */
static int64_t element_offset(lua_State *L, bert_tensor *t, int first, const char *fname) {
  char b[160];
  int n = lua_gettop(L) - first + 1;
  if (n != t->ndim)
    return luaL_error(L, "%s: %d positions given for a %dD tensor %s", fname, n < 0 ? 0 : n,
                      t->ndim, shape_s(b, sizeof b, t));
  int64_t off = t->offset;
  for (int d = 0; d < t->ndim; d++) {
    lua_Integer i = luaL_checkinteger(L, first + d);
    if (i < 0) i += t->shape[d] + 1;
    if (i < 1 || i > t->shape[d])
      return luaL_error(L, "%s: position %I out of range 1..%I for dimension %d of %s", fname,
                        lua_tointeger(L, first + d), (lua_Integer)t->shape[d], d + 1, shape_s(b, sizeof b, t));
    off += (i - 1) * t->stride[d];
  }
  return off;
}

static int m_get(lua_State *L) {
  bert_tensor *t = lbert_check_host_copy(L, 1, "get");
  int64_t off = element_offset(L, t, 2, "get");
  if (t->dtype == BERT_F32) lua_pushnumber(L, ((float *)t->storage->data)[off]);
  else lua_pushinteger(L, ((int32_t *)t->storage->data)[off]);
  return 1;
}

static int m_set(lua_State *L) {
  bert_tensor *t = lbert_check_host(L, 1, "set");
  lua_Number v = luaL_checknumber(L, 2);
  int64_t off = element_offset(L, t, 3, "set");
  check_inplace(L, t, "set");
  if (t->dtype == BERT_F32) ((float *)t->storage->data)[off] = (float)v;
  else {
    if (v != floor(v) || v > INT32_MAX || v < INT32_MIN)
      return luaL_error(L, "set: value %f does not fit an int32 tensor", v);
    ((int32_t *)t->storage->data)[off] = (int32_t)v;
  }
  lua_settop(L, 1);
  return 1;
}

static void totable_rec(lua_State *L, const bert_tensor *t, int d, int64_t off) {
  luaL_checkstack(L, 3, "totable");
  lua_createtable(L, (int)t->shape[d], 0);
  for (int64_t i = 0; i < t->shape[d]; i++) {
    int64_t o = off + i * t->stride[d];
    if (d == t->ndim - 1) {
      if (t->dtype == BERT_F32) lua_pushnumber(L, ((float *)t->storage->data)[o]);
      else lua_pushinteger(L, ((int32_t *)t->storage->data)[o]);
    } else totable_rec(L, t, d + 1, o);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

static int m_totable(lua_State *L) {
  bert_tensor *t = lbert_check_host_copy(L, 1, "totable");
  if (t->ndim == 0) push_elem(L, t, 0);
  else totable_rec(L, t, 0, t->offset);
  return 1;
}

/* tostring: values (first and last 3 of each dim past 1000 elements),
** then shape and dtype. */
static void format_value(char *buf, size_t n, const bert_tensor *t, int64_t off, int ints) {
  if (t->dtype == BERT_I32) snprintf(buf, n, "%d", ((int32_t *)t->storage->data)[off]);
  else {
    float v = ((float *)t->storage->data)[off];
    if (ints) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.4f", v);
  }
}

typedef struct { luaL_Buffer *b; const bert_tensor *t; int summarize, width, ints; } printer;

static void print_rec(printer *p, int d, int64_t off, int indent) {
  const bert_tensor *t = p->t;
  int64_t n = t->shape[d];
  luaL_addchar(p->b, '[');
  for (int64_t i = 0; i < n; i++) {
    if (p->summarize && n > 6 && i == 3) {
      luaL_addstring(p->b, d == t->ndim - 1 ? "..., " : "...,\n");
      if (d < t->ndim - 1) for (int k = 0; k <= indent; k++) luaL_addchar(p->b, ' ');
      i = n - 3;
    }
    int64_t o = off + i * t->stride[d];
    if (d == t->ndim - 1) {
      char v[64];
      format_value(v, sizeof v, t, o, p->ints);
      char cell[80];
      snprintf(cell, sizeof cell, "%*s", p->width, v);
      luaL_addstring(p->b, cell);
    } else print_rec(p, d + 1, o, indent + 1);
    if (i + 1 < n) {
      luaL_addchar(p->b, ',');
      if (d == t->ndim - 1) luaL_addchar(p->b, ' ');
      else {
        luaL_addchar(p->b, '\n');
        for (int k = 0; k <= indent; k++) luaL_addchar(p->b, ' ');
      }
    }
  }
  luaL_addchar(p->b, ']');
}

static int m_tostring(lua_State *L) {
  bert_tensor **box = (bert_tensor **)luaL_checkudata(L, 1, BERT_TENSOR_MT);
  bert_tensor *t = *box;
  char sb[160];
  if (t == NULL || t->storage == NULL) { lua_pushliteral(L, "bert.Tensor (freed)"); return 1; }
  t = lbert_check_host_copy(L, 1, "tostring");
  int64_t numel = bert_numel(t);
  printer p = {NULL, t, numel > 1000, 1, 1};
  /* width of the widest shown value, and whether floats are all integral */
  for (int64_t i = 0; i < numel; i++) {
    if (p.summarize && i >= 2000) break;
    double v = bert_get_flat(t, i);
    if (t->dtype == BERT_F32 && (v != floor(v) || fabs(v) >= 1e7)) p.ints = 0;
  }
  for (int64_t i = 0; i < numel && i < 2000; i++) {
    char v[64];
    format_value(v, sizeof v, t, bert_flat_offset(t, i), p.ints);
    int w = (int)strlen(v);
    if (w > p.width) p.width = w;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  p.b = &b;
  if (t->ndim == 0) {
    char v[64];
    format_value(v, sizeof v, t, t->offset, p.ints);
    luaL_addstring(&b, v);
  } else if (numel > 0) print_rec(&p, 0, t->offset, 0);
  else luaL_addstring(&b, "[]");
  char tail[256];
  snprintf(tail, sizeof tail, "\nbert.Tensor %s %s", shape_s(sb, sizeof sb, t), bert_dtype_name(t->dtype));
  luaL_addstring(&b, tail);
  luaL_pushresult(&b);
  return 1;
}

static int m_len(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  lua_pushinteger(L, t->ndim ? t->shape[0] : 0);
  return 1;
}

/* One idempotent release for __gc, __close and t:free(). */
static int m_free(lua_State *L) {
  bert_tensor **box = (bert_tensor **)luaL_checkudata(L, 1, BERT_TENSOR_MT);
  if (*box) {
    bert_tensor_release(*box);
    *box = NULL;
  }
  return 0;
}
/* }====================================================== */

/* {====================================================== views */

/* Reads a shape from a table at 2 or the integers from 2 on; -1 allowed. */
static int view_shape(lua_State *L, int64_t *shape) {
  int nd;
  if (lua_istable(L, 2)) {
    nd = (int)luaL_len(L, 2);
    if (nd > BERT_MAX_DIMS) return luaL_argerror(L, 2, "too many dimensions");
    for (int i = 0; i < nd; i++) {
      lua_geti(L, 2, i + 1);
      int ok;
      shape[i] = lua_tointegerx(L, -1, &ok);
      if (!ok) return luaL_argerror(L, 2, "sizes must be integers");
      lua_pop(L, 1);
    }
  } else {
    nd = lua_gettop(L) - 1;
    if (nd > BERT_MAX_DIMS) return luaL_argerror(L, 2, "too many dimensions");
    for (int i = 0; i < nd; i++) shape[i] = luaL_checkinteger(L, i + 2);
  }
  return nd;
}

static int m_view(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int64_t shape[BERT_MAX_DIMS];
  int nd = view_shape(L, shape);
  return lbert_push_result(L, bert_ag_view(t, nd, shape), "view");
}

/* reshape: a view when the strides allow it, otherwise a copy. */
static int m_reshape(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int64_t shape[BERT_MAX_DIMS];
  int nd = view_shape(L, shape);
  return lbert_push_result(L, bert_ag_reshape(t, nd, shape), "reshape");
}

static int m_transpose(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d0, d1;
  if (lua_isnoneornil(L, 2) && t->ndim == 2) { d0 = 0; d1 = 1; }
  else { d0 = lbert_check_dim(L, 2, t->ndim, 0); d1 = lbert_check_dim(L, 3, t->ndim, 0); }
  return lbert_push_result(L, bert_ag_transpose(t, d0, d1), "transpose");
}

static int m_permute(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int perm[BERT_MAX_DIMS];
  int n = lua_istable(L, 2) ? (int)luaL_len(L, 2) : lua_gettop(L) - 1;
  if (n != t->ndim) {
    char b[160];
    return luaL_error(L, "permute: %d dims given for a %dD tensor %s", n, t->ndim, shape_s(b, sizeof b, t));
  }
  for (int i = 0; i < n; i++) {
    if (lua_istable(L, 2)) { lua_geti(L, 2, i + 1); perm[i] = lbert_check_dim(L, -1, t->ndim, 0); lua_pop(L, 1); }
    else perm[i] = lbert_check_dim(L, i + 2, t->ndim, 0);
  }
  return lbert_push_result(L, bert_ag_permute(t, perm), "permute");
}

static int m_narrow(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  lua_Integer start = luaL_checkinteger(L, 3), len = luaL_checkinteger(L, 4);
  if (start < 0) start += t->shape[d] + 1;
  return lbert_push_result(L, bert_ag_narrow(t, d, start - 1, len), "narrow");
}

static int m_select(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  lua_Integer i = luaL_checkinteger(L, 3);
  if (i < 0) i += t->shape[d] + 1;
  return lbert_push_result(L, bert_ag_select(t, d, i - 1), "select");
}

static int m_squeeze(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lua_isnoneornil(L, 2) ? -1 : lbert_check_dim(L, 2, t->ndim, 0);
  return lbert_push_result(L, bert_ag_squeeze(t, d), "squeeze");
}

static int m_unsqueeze(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lbert_check_dim(L, 2, t->ndim, 1);
  return lbert_push_result(L, bert_ag_unsqueeze(t, d), "unsqueeze");
}

static int m_expand(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int64_t shape[BERT_MAX_DIMS];
  int nd;
  if (lua_istable(L, 2)) {
    nd = (int)luaL_len(L, 2);
    if (nd > BERT_MAX_DIMS) return luaL_argerror(L, 2, "too many dimensions");
    for (int i = 0; i < nd; i++) { lua_geti(L, 2, i + 1); shape[i] = luaL_checkinteger(L, -1); lua_pop(L, 1); }
  } else {
    nd = lua_gettop(L) - 1;
    if (nd > BERT_MAX_DIMS) return luaL_argerror(L, 2, "too many dimensions");
    for (int i = 0; i < nd; i++) shape[i] = luaL_checkinteger(L, i + 2);
  }
  return lbert_push_result(L, bert_ag_expand(t, nd, shape), "expand");
}

static int m_contiguous(lua_State *L) {
  return lbert_push_result(L, bert_ag_contiguous(lbert_check_tensor(L, 1)), "contiguous");
}

static int m_clone(lua_State *L) { return lbert_push_result(L, bert_ag_clone(lbert_check_tensor(L, 1)), "clone"); }

static int m_copy_(lua_State *L) {
  bert_tensor *dst = lbert_check_tensor(L, 1), *src = lbert_check_tensor(L, 2);
  if (bert_has_overlap(dst)) return luaL_error(L, "copy_: cannot write into an expanded tensor");
  check_inplace(L, dst, "copy_");
  if (bert_copy_(dst, src) != 0) return lbert_core_error(L, "copy_");
  lua_settop(L, 1);
  return 1;
}

/* t into the memory of backend to: a host copy, or a device copy of the host copy. */
static bert_tensor *move_to(const bert_tensor *t, const bert_backend *to) {
  const bert_backend *from = bert_backend_of(t);
  if (to->is_host) return from->to_host(t);
  if (from->is_host) return to->from_host(t);
  bert_tensor *h = from->to_host(t), *d = h ? to->from_host(h) : NULL;
  bert_tensor_release(h);
  return d;
}

/* t:to(dtype) converts; t:to(device) moves ("cpu", "vulkan": a registered backend's name). */
static int m_to(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  const char *what = luaL_checkstring(L, 2);
  const bert_backend *be = bert_backend_find(what);
  bert_dtype dt;
  if (be) {
    if (be == bert_backend_of(t)) { lua_settop(L, 1); return 1; }
    return lbert_push_result(L, move_to(t, be), "to");
  }
  if (bert_dtype_from_name(what, &dt) == 0) {
    if (dt == t->dtype) { lua_settop(L, 1); return 1; }
    return lbert_push_result(L, bert_to_dtype(t, dt), "to");
  }
  return luaL_argerror(L, 2, lua_pushfstring(L, "unknown device or dtype '%s'", what));
}

static int m_float(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (t->dtype == BERT_F32) { lua_settop(L, 1); return 1; }
  return lbert_push_result(L, bert_to_dtype(t, BERT_F32), "float");
}

static int m_int(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (t->dtype == BERT_I32) { lua_settop(L, 1); return 1; }
  return lbert_push_result(L, bert_to_dtype(t, BERT_I32), "int");
}

/* split(size_or_sizes, dim): views of consecutive pieces along dim. */
static int m_split(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = opt_dim(L, 3, t->ndim, 0);
  if (t->ndim == 0) return luaL_error(L, "split: cannot split a 0-d tensor");
  int64_t total = t->shape[d];
  lua_newtable(L);
  int out = lua_gettop(L);
  int64_t at = 0;
  int k = 0;
  if (lua_istable(L, 2)) {
    lua_Integer n = luaL_len(L, 2), sum = 0;
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(L, 2, i);
      lua_Integer s = lua_tointeger(L, -1);
      lua_pop(L, 1);
      if (s < 0) return luaL_error(L, "split: size %I at position %I is negative", s, i);
      sum += s;
    }
    if (sum != total)
      return luaL_error(L, "split: sizes add up to %I but dimension %d has size %I", sum, d + 1,
                        (lua_Integer)total);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_geti(L, 2, i);
      int64_t s = lua_tointeger(L, -1);
      lua_pop(L, 1);
      bert_tensor *v = bert_ag_narrow(t, d, at, s);
      if (v == NULL) return lbert_core_error(L, "split");
      lbert_push_tensor(L, v);
      lua_rawseti(L, out, ++k);
      at += s;
    }
  } else {
    lua_Integer s = luaL_checkinteger(L, 2);
    if (s <= 0) return luaL_argerror(L, 2, lua_pushfstring(L, "split size must be positive, got %I", s));
    while (at < total || (total == 0 && k == 0)) {
      int64_t len = total - at < s ? total - at : s;
      bert_tensor *v = bert_ag_narrow(t, d, at, len);
      if (v == NULL) return lbert_core_error(L, "split");
      lbert_push_tensor(L, v);
      lua_rawseti(L, out, ++k);
      at += len;
      if (total == 0) break;
    }
  }
  return 1;
}
/* }====================================================== */

/* {====================================================== math */

static int binary(lua_State *L, bert_binop op, int inplace) {
  const char *name = bert_binop_name(op);
  char fname[32];
  snprintf(fname, sizeof fname, "%s%s", name, inplace ? "_" : "");
  /* operators may put the number first: 2 - t */
  if (!inplace && !lbert_test_tensor(L, 1) && !lbert_test_tensor(L, 2))
    return luaL_typeerror(L, 1, BERT_TENSOR_MT);
  bert_tensor *dst = inplace ? lbert_check_tensor(L, 1) : NULL;
  if (dst) check_inplace(L, dst, fname);
  double alpha = 1;
  if ((op == BERT_ADD || op == BERT_SUB) && !lua_isnoneornil(L, 3)) alpha = luaL_checknumber(L, 3);
  bert_tensor *a = tensor_or_scalar(L, 1, fname);
  if (lua_type(L, 2) != LUA_TNUMBER && !lbert_test_tensor(L, 2)) {
    bert_tensor_release(a);
    return luaL_typeerror(L, 2, "bert.Tensor or number");
  }
  bert_tensor *b = tensor_or_scalar(L, 2, fname);
  bert_tensor *r = dst ? bert_binary(op, a, b, alpha, dst) : bert_ag_binary(op, a, b, alpha);
  bert_tensor_release(a);
  bert_tensor_release(b);
  if (r == NULL) return lbert_core_error(L, fname);
  if (inplace) { bert_tensor_release(r); lua_settop(L, 1); return 1; }
  lbert_push_tensor(L, r);
  return 1;
}

/* t:add(u), t:add_(u), ... one pair per op of the list (core/op_list.h) */
#define X(ID, NAME, cmp) \
  static int m_##NAME(lua_State *L) { return binary(L, BERT_##ID, 0); } \
  static int m_##NAME##_(lua_State *L) { return binary(L, BERT_##ID, 1); }
BERT_BINARY_OPS(X)
#undef X

static int unary(lua_State *L, bert_unop op, int inplace) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  char fname[32];
  snprintf(fname, sizeof fname, "%s%s", bert_unop_name(op), inplace ? "_" : "");
  if (inplace) check_inplace(L, t, fname);
  bert_tensor *r = inplace ? bert_unary(op, t, t) : bert_ag_unary(op, t);
  if (r == NULL) return lbert_core_error(L, fname);
  if (inplace) { bert_tensor_release(r); lua_settop(L, 1); return 1; }
  lbert_push_tensor(L, r);
  return 1;
}

/* t:exp(), t:exp_(), ... one pair per op of the list */
#define X(ID, NAME, keeps_int) \
  static int m_##NAME(lua_State *L) { return unary(L, BERT_##ID, 0); } \
  static int m_##NAME##_(lua_State *L) { return unary(L, BERT_##ID, 1); }
BERT_UNARY_OPS(X)
#undef X

/* gelu(approximate): "none" (exact erf, BERT's) or "tanh" (gelu_new);
** registered after the list, so it replaces the plain t:gelu(). */
static int gelu(lua_State *L, int inplace) {
  static const char *const modes[] = {"none", "tanh", NULL};
  int mode = luaL_checkoption(L, 2, "none", modes);
  lua_settop(L, 1);
  return unary(L, mode ? BERT_GELU_TANH : BERT_GELU, inplace);
}
static int m_gelu_approx(lua_State *L) { return gelu(L, 0); }
static int m_gelu_approx_(lua_State *L) { return gelu(L, 1); }

static int m_unm(lua_State *L) { lua_settop(L, 1); return unary(L, BERT_NEG, 0); }

static int masked_fill(lua_State *L, int inplace) {
  bert_tensor *t = lbert_check_tensor(L, 1), *mask = lbert_check_tensor(L, 2);
  double v = luaL_checknumber(L, 3);
  const char *fname = inplace ? "masked_fill_" : "masked_fill";
  if (inplace) check_inplace(L, t, fname);
  bert_tensor *r = inplace ? bert_masked_fill(t, mask, v, t) : bert_ag_masked_fill(t, mask, v);
  if (r == NULL) return lbert_core_error(L, fname);
  if (inplace) { bert_tensor_release(r); lua_settop(L, 1); return 1; }
  lbert_push_tensor(L, r);
  return 1;
}
static int m_masked_fill(lua_State *L) { return masked_fill(L, 0); }
static int m_masked_fill_(lua_State *L) { return masked_fill(L, 1); }

static int m_fill_(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  double v = luaL_checknumber(L, 2);
  if (bert_has_overlap(t)) return luaL_error(L, "fill_: cannot write into an expanded tensor");
  check_inplace(L, t, "fill_");
  bert_fill_(t, v);
  lua_settop(L, 1);
  return 1;
}

static int m_zero_(lua_State *L) { lua_settop(L, 1); lua_pushinteger(L, 0); return m_fill_(L); }

static int l_where(lua_State *L) {
  bert_tensor *c = lbert_check_tensor(L, 1);
  bert_tensor *a = tensor_or_scalar(L, 2, "where");
  bert_tensor *b = tensor_or_scalar(L, 3, "where");
  bert_tensor *r = bert_ag_where(c, a, b);
  bert_tensor_release(a);
  bert_tensor_release(b);
  return lbert_push_result(L, r, "where");
}

/* reductions: t:sum([dim [, keepdim]]) */
static int reduce(lua_State *L, bert_redop op, const char *fname) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lua_isnoneornil(L, 2) ? -1 : lbert_check_dim(L, 2, t->ndim, 0);
  int keepdim = lua_toboolean(L, 3);
  int correction = 1;
  if (op == BERT_VAR && !lua_isnoneornil(L, 4)) correction = (int)luaL_checkinteger(L, 4);
  bert_tensor *idx = NULL;
  int want_idx = d >= 0 && (op == BERT_MAX || op == BERT_MIN);
  bert_tensor *r = bert_ag_reduce(op, t, d, keepdim, correction, want_idx ? &idx : NULL);
  if (r == NULL) return lbert_core_error(L, fname);
  lbert_push_tensor(L, r);
  if (want_idx) { lbert_push_tensor(L, idx); return 2; }
  return 1;
}
static int m_sum(lua_State *L) { return reduce(L, BERT_SUM, "sum"); }
static int m_mean(lua_State *L) { return reduce(L, BERT_MEAN, "mean"); }
static int m_max(lua_State *L) { return reduce(L, BERT_MAX, "max"); }
static int m_min(lua_State *L) { return reduce(L, BERT_MIN, "min"); }
static int m_argmax(lua_State *L) { return reduce(L, BERT_ARGMAX, "argmax"); }
static int m_argmin(lua_State *L) { return reduce(L, BERT_ARGMIN, "argmin"); }
static int m_var(lua_State *L) { return reduce(L, BERT_VAR, "var"); }

static int softmax(lua_State *L, int log_space) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  const char *fname = log_space ? "log_softmax" : "softmax";
  if (t->ndim == 0) return luaL_error(L, "%s: needs at least 1 dimension", fname);
  int d = opt_dim(L, 2, t->ndim, t->ndim - 1);
  return lbert_push_result(L, bert_ag_softmax(t, d, log_space), fname);
}
static int m_softmax(lua_State *L) { return softmax(L, 0); }
static int m_log_softmax(lua_State *L) { return softmax(L, 1); }

static int m_matmul(lua_State *L) {
  bert_tensor *a = lbert_check_tensor(L, 1), *b = lbert_check_tensor(L, 2);
  return lbert_push_result(L, bert_ag_matmul(a, b), "matmul");
}

static int m_index_select(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  return lbert_push_result(L, bert_ag_index_select(t, d, lbert_check_tensor(L, 3)), "index_select");
}

static int m_gather(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  return lbert_push_result(L, bert_ag_gather(t, d, lbert_check_tensor(L, 3)), "gather");
}

/* t:sort_indices([dim = -1[, k[, descending = true]]]): int32 positions (cpu/ops_sort.c);
** t:topk and t:sort (lua/bert/tensor.lua) gather the values with them. */
static int m_sort_indices(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lua_isnoneornil(L, 2) ? t->ndim - 1 : lbert_check_dim(L, 2, t->ndim, 0);
  lua_Integer k = luaL_optinteger(L, 3, t->ndim > 0 ? t->shape[d] : 0);
  int descending = lua_isnoneornil(L, 4) ? 1 : lua_toboolean(L, 4);
  return lbert_push_result(L, bert_sort_indices(t, d, (int64_t)k, descending), "sort_indices");
}

static int m_scatter_add_(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  check_inplace(L, t, "scatter_add_");
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  if (bert_scatter_add_(t, d, lbert_check_tensor(L, 3), lbert_check_tensor(L, 4)) != 0)
    return lbert_core_error(L, "scatter_add_");
  lua_settop(L, 1);
  return 1;
}

static int m_scatter_add(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  int d = lbert_check_dim(L, 2, t->ndim, 0);
  bert_tensor *idx = lbert_check_tensor(L, 3), *src = lbert_check_tensor(L, 4);
  bert_tensor **box = newbox(L);
  *box = bert_clone(t);
  if (*box == NULL || bert_scatter_add_(*box, d, idx, src) != 0) return lbert_core_error(L, "scatter_add");
  return 1;
}

/* t:nonzero() -> int32 [n] flat 0-based positions of non-zero elements;
** the result's size depends on the data: computed on the host */
static int m_nonzero(lua_State *L) {
  return lbert_push_result(L, bert_nonzero_flat(lbert_check_host_copy(L, 1, "nonzero")), "nonzero");
}

/* bert.cat(list, dim) and bert.stack(list, dim) */
static int join(lua_State *L, int stack) {
  const char *fname = stack ? "stack" : "cat";
  luaL_checktype(L, 1, LUA_TTABLE);
  int n = (int)luaL_len(L, 1);
  if (n == 0) return luaL_argerror(L, 1, "expected a non-empty list of tensors");
  if (n > 256) return luaL_argerror(L, 1, lua_pushfstring(L, "at most 256 tensors, got %d", n));
  bert_tensor *ts[256];
  for (int i = 0; i < n; i++) {
    lua_geti(L, 1, i + 1);
    ts[i] = lbert_test_tensor(L, -1);
    if (ts[i] == NULL)
      return luaL_argerror(L, 1, lua_pushfstring(L, "element %d is a %s, expected bert.Tensor",
                                                 i + 1, luaL_typename(L, -1)));
    lua_pop(L, 1);   /* the list keeps it alive */
  }
  int d = lua_isnoneornil(L, 2) ? 0 : lbert_check_dim(L, 2, ts[0]->ndim, stack);
  return lbert_push_result(L, stack ? bert_ag_stack(ts, n, d) : bert_ag_cat(ts, n, d), fname);
}
static int l_cat(lua_State *L) { return join(L, 0); }
static int l_stack(lua_State *L) { return join(L, 1); }
/* }====================================================== */

static const luaL_Reg tensor_methods[] = {
  {"shape", m_shape}, {"size", m_size}, {"stride", m_stride}, {"dim", m_dim},
  {"numel", m_numel}, {"dtype", m_dtype}, {"device", m_device},
  {"is_contiguous", m_is_contiguous}, {"item", m_item}, {"totable", m_totable},
  {"get", m_get}, {"set", m_set}, {"free", m_free},
  {"view", m_view}, {"reshape", m_reshape}, {"transpose", m_transpose}, {"t", m_transpose},
  {"permute", m_permute}, {"narrow", m_narrow}, {"select", m_select},
  {"squeeze", m_squeeze}, {"unsqueeze", m_unsqueeze}, {"expand", m_expand},
  {"contiguous", m_contiguous}, {"clone", m_clone}, {"copy_", m_copy_}, {"to", m_to},
  {"float", m_float}, {"int", m_int}, {"split", m_split},
#define X(ID, NAME, flag) {#NAME, m_##NAME}, {#NAME "_", m_##NAME##_},
  BERT_BINARY_OPS(X)
  BERT_UNARY_OPS(X)
#undef X
  {"gelu", m_gelu_approx}, {"gelu_", m_gelu_approx_},
  {"masked_fill", m_masked_fill}, {"masked_fill_", m_masked_fill_},
  {"fill_", m_fill_}, {"zero_", m_zero_}, {"normal_", m_normal_}, {"uniform_", m_uniform_},
  {"sum", m_sum}, {"mean", m_mean}, {"max", m_max}, {"min", m_min},
  {"argmax", m_argmax}, {"argmin", m_argmin}, {"var", m_var},
  {"softmax", m_softmax}, {"log_softmax", m_log_softmax}, {"matmul", m_matmul},
  {"index_select", m_index_select}, {"gather", m_gather},
  {"scatter_add", m_scatter_add}, {"scatter_add_", m_scatter_add_}, {"nonzero", m_nonzero},
  {"sort_indices", m_sort_indices},
  {NULL, NULL}
};

static const luaL_Reg tensor_meta[] = {
  {"__index", NULL}, {"__gc", m_free}, {"__close", m_free}, {"__tostring", m_tostring},
  {"__len", m_len}, {"__add", m_add}, {"__sub", m_sub}, {"__mul", m_mul}, {"__div", m_div},
  {"__pow", m_pow}, {"__unm", m_unm},
  {NULL, NULL}
};

static const luaL_Reg module_funcs[] = {
  {"tensor", l_tensor}, {"zeros", l_zeros}, {"ones", l_ones}, {"full", l_full},
  {"empty", l_empty}, {"arange", l_arange}, {"eye", l_eye},
  {"rand", l_rand}, {"randn", l_randn}, {"randint", l_randint}, {"manual_seed", l_manual_seed},
  {"rng_state", l_rng_state}, {"set_rng_state", l_set_rng_state},
  {"cat", l_cat}, {"stack", l_stack}, {"where", l_where}, {"matmul", m_matmul},
  {NULL, NULL}
};

void lbert_open_tensor(lua_State *L) {
  if (luaL_newmetatable(L, BERT_TENSOR_MT)) {   /* idempotent: busted reopens modules */
    luaL_setfuncs(L, tensor_meta, 0);
    luaL_newlibtable(L, tensor_methods);
    luaL_setfuncs(L, tensor_methods, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_getfield(L, -1, "__index");
  lua_setfield(L, -3, "Tensor");   /* core.Tensor: the method table, for extension */
  lua_pop(L, 1);
  luaL_setfuncs(L, module_funcs, 0);
}
