/*
** Lua binding of autograd: requires_grad, grad, backward, detach, no_grad.
*/
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

static int m_backward(lua_State *L) {
  bert_tensor *t = lbert_check_tensor(L, 1);
  bert_tensor *g = lua_isnoneornil(L, 2) ? NULL : lbert_check_tensor(L, 2);
  int was = bert_grad_enabled();
  bert_set_grad_enabled(0);   /* backward itself records nothing */
  int rc = bert_backward(t, g);
  bert_set_grad_enabled(was);
  if (rc != 0) return lbert_core_error(L, "backward");
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

static const luaL_Reg methods[] = {
  {"requires_grad", m_requires_grad}, {"grad", m_grad}, {"set_grad", m_set_grad},
  {"zero_grad", m_zero_grad}, {"backward", m_backward}, {"detach", m_detach},
  {"is_leaf", m_is_leaf}, {"grad_fn", m_grad_fn},
  {NULL, NULL}
};

static const luaL_Reg funcs[] = {
  {"no_grad", l_no_grad}, {"grad_enabled", l_grad_enabled},
  {"set_grad_enabled", l_set_grad_enabled},
  {NULL, NULL}
};

void lbert_open_autograd(lua_State *L) {
  luaL_getmetatable(L, BERT_TENSOR_MT);
  lua_getfield(L, -1, "__index");
  luaL_setfuncs(L, methods, 0);
  lua_pop(L, 2);
  luaL_setfuncs(L, funcs, 0);
}
