/*
** Lua binding of autograd: requires_grad, grad, backward, detach, no_grad.
*/
#include <stdlib.h>
#include <string.h>

#include "lbert.h"
#include "core/autograd.h"
#include "core/ops.h"

/* t:requires_grad() -> boolean; t:requires_grad(flag) -> t */
static int m_requires_grad(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (lua_isnone(L, 2)) { lua_pushboolean(L, t->requires_grad); return 1; }
  int flag = lua_toboolean(L, 2);
  if (t->grad_fn && !flag)
    return luaL_error(L, "requires_grad: cannot turn off gradients of a non-leaf tensor "
                         "(produced by %s); use t:detach()", t->grad_fn->name);
  if (flag && t->dtype != BERT_F32)
    return luaL_error(L, "requires_grad: only float32 tensors can require gradients, got %s",
                      bert_dtype_name(t->dtype));
  t->requires_grad = flag;
  lua_settop(L, 1);
  return 1;
}

static int m_grad(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (t->grad == NULL) { lua_pushnil(L); return 1; }
  bert_tensor_retain(t->grad);
  lbert_push_tensor(L, t->grad);
  return 1;
}

/* t:set_grad(g): g becomes t's gradient buffer (e.g. a view into a flat
** gradient arena); backward accumulates into it.  set_grad(nil) drops it. */
static int m_set_grad(lua_State *L) {
  char b1[160], b2[160];
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) {
    bert_tensor_release(t->grad);
    t->grad = NULL;
    lua_settop(L, 1);
    return 1;
  }
  bert_tensor *g = lbert_check_tensor(L, 2);
  int same = g->ndim == t->ndim && memcmp(g->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)) == 0;
  if (!same || g->dtype != BERT_F32)
    return luaL_error(L, "set_grad: gradient %s %s does not match the tensor %s float32",
                      bert_shape_str(b1, sizeof b1, g->ndim, g->shape), bert_dtype_name(g->dtype),
                      bert_shape_str(b2, sizeof b2, t->ndim, t->shape));
  if (g == t) return luaL_error(L, "set_grad: a tensor cannot be its own gradient");
  bert_tensor_retain(g);
  bert_tensor_release(t->grad);
  t->grad = g;
  lua_settop(L, 1);
  return 1;
}

/* Zeroes the gradient in place (keeping its buffer). */
static int m_zero_grad(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (t->grad) bert_fill_(t->grad, 0);
  lua_settop(L, 1);
  return 1;
}

/* {====================================================== recomputation
** A "recompute" node (bert.recompute, lua/bert/recompute.lua): its output
** was computed without a graph; its backward calls back into Lua, which
** runs the function again with the graph on and backpropagates through it.
** The Lua side keeps the function and its inputs under the node's id; ids
** of nodes freed without a backward are queued for it to drop. */
typedef struct { lua_Integer id; } recompute_state;

static lua_State *backward_L;   /* the state running the current backward */
static lua_Integer *dead_ids;
static size_t ndead_ids, capdead_ids;

static void recompute_release(bert_node *node) {
  if (ndead_ids == capdead_ids) {
    size_t cap = capdead_ids ? 2 * capdead_ids : 64;
    lua_Integer *p = realloc(dead_ids, cap * sizeof *p);
    if (p == NULL) return;   /* the Lua entry then lives until the state closes */
    dead_ids = p;
    capdead_ids = cap;
  }
  dead_ids[ndead_ids++] = ((recompute_state *)node->state)->id;
}

static const char RECOMPUTE_KEY = 'r';   /* registry key of the Lua dispatcher */

static int recompute_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  lua_State *L = backward_L;
  (void)out;
  if (L == NULL) { bert_set_error("backward through recompute must be started from Lua"); return -1; }
  int top = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &RECOMPUTE_KEY);
  lua_pushinteger(L, ((recompute_state *)node->state)->id);
  bert_tensor_retain(g);
  lbert_push_tensor(L, g);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    bert_set_error("%s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "error in the recomputation");
    lua_settop(L, top);
    return -1;
  }
  /* a table: the gradient of input k at [k] (nil when it has none) */
  int rc = 0;
  for (int k = 0; k < node->ninputs && rc == 0; k++) {
    lua_rawgeti(L, -1, k + 1);
    bert_tensor *gk = lua_isnil(L, -1) ? NULL : luaL_testudata(L, -1, BERT_TENSOR_MT) ?
                      *(bert_tensor **)lua_touserdata(L, -1) : NULL;
    if (gk && bert_node_wants(node, k)) rc = bert_accumulate_grad(node->inputs[k], gk);
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  return rc;
}

static const bert_node_type recompute_node = {"recompute", recompute_backward, sizeof(recompute_state), 0};

/* core.recompute_attach(out, {inputs...}, id): out (computed without a
** graph) gets a recompute node over the inputs. */
static int l_recompute_attach(lua_State *L) {
  bert_tensor *out = lbert_check_tensor(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer id = luaL_checkinteger(L, 3);
  int n = (int)luaL_len(L, 2);
  if (n < 1 || n > BERT_NODE_MAX_INPUTS)
    return luaL_error(L, "recompute: 1 to %d tensor inputs requiring grad, got %d", BERT_NODE_MAX_INPUTS, n);
  if (out->grad_fn) return luaL_error(L, "recompute: the output already has a graph (%s)", out->grad_fn->name);
  bert_tensor *inputs[BERT_NODE_MAX_INPUTS];
  for (int k = 0; k < n; k++) {
    lua_rawgeti(L, 2, k + 1);
    inputs[k] = lbert_check_tensor(L, -1);
    lua_pop(L, 1);
  }
  bert_node *node = bert_node_new(&recompute_node, n, inputs);
  if (node == NULL) return lbert_core_error(L, "recompute");
  ((recompute_state *)node->state)->id = id;
  node->on_free = recompute_release;
  node->hidden_grads = 1;   /* the parameters inside get their gradients from the inner pass */
  bert_attach(out, node);
  return 0;
}

/* core.recompute_dispatcher(fn): fn(id, grad) -> {grads of the inputs} */
static int l_recompute_dispatcher(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &RECOMPUTE_KEY);
  return 0;
}

/* core.recompute_dead() -> ids of recompute nodes freed since the last call */
static int l_recompute_dead(lua_State *L) {
  lua_createtable(L, (int)ndead_ids, 0);
  for (size_t k = 0; k < ndead_ids; k++) {
    lua_pushinteger(L, dead_ids[k]);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  ndead_ids = 0;
  return 1;
}
/* }====================================================== */

static int m_backward(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  bert_tensor *g = lua_isnoneornil(L, 2) ? NULL : lbert_check_tensor(L, 2);
  int was = bert_grad_enabled();
  bert_set_grad_enabled(0);   /* backward itself records nothing */
  lua_State *outer = backward_L;
  backward_L = L;
  int rc = bert_backward(t, g);
  backward_L = outer;
  bert_set_grad_enabled(was);
  if (rc != 0) return lbert_core_error(L, "backward");
  if (outer == NULL) lbert_gc_after_backward(L);
  return 0;
}

static int m_detach(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  bert_tensor *d = bert_alias(t);   /* same storage, no grad_fn, no requires_grad */
  return lbert_push_result(L, d, "detach");
}

static int m_is_leaf(lua_State *L) {
  lua_pushboolean(L, lbert_check_tensor(L, 1)->grad_fn == NULL);
  return 1;
}

static int m_grad_fn(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  if (t->grad_fn) lua_pushstring(L, t->grad_fn->name); else lua_pushnil(L);
  return 1;
}

/* bert.no_grad(fn, ...) -> fn(...) with recording off, restored on error */
static int l_no_grad(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int was = bert_grad_enabled();
  bert_set_grad_enabled(0);
  int n = lua_gettop(L) - 1;
  int rc = lua_pcall(L, n, LUA_MULTRET, 0);
  bert_set_grad_enabled(was);
  if (rc != LUA_OK) return lua_error(L);
  return lua_gettop(L);
}

static int l_grad_enabled(lua_State *L) {
  lua_pushboolean(L, bert_grad_enabled());
  return 1;
}

static int l_set_grad_enabled(lua_State *L) {
  luaL_checkany(L, 1);
  bert_set_grad_enabled(lua_toboolean(L, 1));
  return 0;
}

/* bert.set_detect_anomaly(flag): backward notes the first op whose
** gradient goes NaN/Inf (bert.anomaly_report()); training stops there. */
static int l_set_detect_anomaly(lua_State *L) {
  luaL_checkany(L, 1);
  bert_set_detect_anomaly(lua_toboolean(L, 1));
  return 0;
}

static int l_is_anomaly_enabled(lua_State *L) {
  lua_pushboolean(L, bert_detect_anomaly());
  return 1;
}

static int l_anomaly_report(lua_State *L) {
  const char *m = bert_anomaly_report();
  if (m) lua_pushstring(L, m); else lua_pushnil(L);
  return 1;
}

/* t:nonfinite_origin() -> the first op of t's graph to turn finite inputs
** into NaN/Inf (a message), or nil. */
static int m_nonfinite_origin(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  char buf[400];
  if (bert_nonfinite_origin(t, buf, sizeof buf) != 0) return lbert_core_error(L, "nonfinite_origin");
  if (buf[0]) lua_pushstring(L, buf); else lua_pushnil(L);
  return 1;
}

/* bert.backward_profile([reset]) -> {[node kind] = {seconds =, calls =}}:
** the backward time per kind of node since the last reset (empty unless
** BERT_PROFILE is set); reset (default true) starts the sums again. */
static int l_backward_profile(lua_State *L) {
  bert_prof_entry e[128];
  int n = bert_backward_profile(e, 128, lua_isnoneornil(L, 1) || lua_toboolean(L, 1));
  lua_createtable(L, 0, n);
  for (int k = 0; k < n; k++) {
    lua_createtable(L, 0, 2);
    lua_pushnumber(L, e[k].seconds);
    lua_setfield(L, -2, "seconds");
    lua_pushinteger(L, e[k].calls);
    lua_setfield(L, -2, "calls");
    lua_setfield(L, -2, e[k].name);
  }
  return 1;
}

/* bert.set_backward_profiling(on): sum backward time per node kind as
** BERT_PROFILE does (tools that install bert.profile themselves). */
static int l_set_backward_profiling(lua_State *L) {
  luaL_checktype(L, 1, LUA_TBOOLEAN);
  bert_set_profiling(lua_toboolean(L, 1));
  return 0;
}

static const luaL_Reg methods[] = {
  {"nonfinite_origin", m_nonfinite_origin},
  {"requires_grad", m_requires_grad}, {"grad", m_grad}, {"set_grad", m_set_grad},
  {"zero_grad", m_zero_grad}, {"backward", m_backward}, {"detach", m_detach},
  {"is_leaf", m_is_leaf}, {"grad_fn", m_grad_fn},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"no_grad", l_no_grad}, {"grad_enabled", l_grad_enabled},
  {"set_grad_enabled", l_set_grad_enabled},
  {"recompute_attach", l_recompute_attach}, {"recompute_dispatcher", l_recompute_dispatcher},
  {"recompute_dead", l_recompute_dead},
  {"set_detect_anomaly", l_set_detect_anomaly},
  {"is_anomaly_enabled", l_is_anomaly_enabled}, {"anomaly_report", l_anomaly_report},
  {"backward_profile", l_backward_profile},
  {"set_backward_profiling", l_set_backward_profiling},
  {NULL, NULL}
};

void lbert_open_autograd(lua_State *L) {
  luaL_getmetatable(L, BERT_TENSOR_MT);
  lua_getfield(L, -1, "__index");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
  luaL_setfuncs(L, funcs, 0);
}
