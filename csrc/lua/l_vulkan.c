/*
** The Vulkan backend for Lua: bert.vulkan.* (the device's state, device
** tensors made empty or zeroed, the fused GEMM, the sum of squares) and
** backend_info().vulkan.  Ops on device tensors go through their core
** front-ends (core/backend.h) and t:to("vulkan") through the backend
** registry (l_tensor.c): nothing here stands between them.
*/
#include "lbert.h"
#include "vulkan/vk.h"
#include "vulkan/vk_internal.h"

/* {====================================================== bert.vulkan */

static void push_info(lua_State *L) {
  const char *why;
  lua_newtable(L);
  int ok = bert_vk_available(&why);
  lua_pushboolean(L, ok);
  lua_setfield(L, -2, "available");
  if (!ok) {
    lua_pushstring(L, why);
    lua_setfield(L, -2, "reason");
    return;
  }
  const vkx_info *in = vkx_get_info();
  lua_pushstring(L, in->name); lua_setfield(L, -2, "device");
  lua_pushstring(L, in->type); lua_setfield(L, -2, "type");
  lua_pushinteger(L, in->index); lua_setfield(L, -2, "index");
  lua_pushinteger(L, in->ndevices); lua_setfield(L, -2, "devices");
  lua_pushfstring(L, "%d.%d.%d", (int)(in->api_version >> 22), (int)((in->api_version >> 12) & 0x3ff),
                  (int)(in->api_version & 0xfff));
  lua_setfield(L, -2, "api_version");
  lua_pushinteger(L, (lua_Integer)in->max_storage_range); lua_setfield(L, -2, "max_storage_buffer_range");
  lua_pushinteger(L, (lua_Integer)in->max_range); lua_setfield(L, -2, "split_range");
  lua_pushinteger(L, (lua_Integer)in->max_alloc); lua_setfield(L, -2, "max_memory_allocation_size");
  lua_pushinteger(L, in->max_shared); lua_setfield(L, -2, "max_shared_memory");
  lua_pushinteger(L, in->max_invocations); lua_setfield(L, -2, "max_workgroup_invocations");
  lua_pushinteger(L, in->subgroup_size); lua_setfield(L, -2, "subgroup_size");
  lua_pushinteger(L, in->offset_align); lua_setfield(L, -2, "storage_offset_alignment");
  lua_pushinteger(L, (lua_Integer)in->device_local_bytes); lua_setfield(L, -2, "device_local_bytes");
}

static int v_info(lua_State *L) { push_info(L); return 1; }

static int v_available(lua_State *L) {
  const char *why;
  int ok = bert_vk_available(&why);
  lua_pushboolean(L, ok);
  if (ok) return 1;
  lua_pushstring(L, why);
  return 2;
}

static int v_sync(lua_State *L) {
  if (bert_vk_sync() != 0) return lbert_core_error(L, "vulkan.sync");
  return 0;
}

/* bert.vulkan.set_max_range(bytes): the binding range ops split to (for
** tests of the split paths; nil or 0: the device's maxStorageBufferRange).
** Returns the range now in force. */
static int v_set_max_range(lua_State *L) {
  lua_Integer n = luaL_optinteger(L, 1, 0);
  if (!bert_vk_available(NULL)) return lbert_core_error(L, "vulkan.set_max_range");
  lua_pushinteger(L, (lua_Integer)vkx_set_max_range(n > 0 ? (uint64_t)n : 0));
  return 1;
}

static int v_dispatches(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)vkx_dispatch_count());
  return 1;
}

/* bert.vulkan.gemm(a, b[, {ta=, tb=, bias=, gelu=}]): op(a) @ op(b) (+bias, GELU).
** The binding is this entry's front-end: it checks what the kernel assumes. */
static int v_gemm(lua_State *L) {
  char s1[160], s2[160];
  bert_tensor *a = lbert_check_tensor(L, 1), *b = lbert_check_tensor(L, 2), *bias = NULL;
  int ta = 0, tb = 0, gelu = 0;
  if (lua_istable(L, 3)) {
    lua_getfield(L, 3, "ta"); ta = lua_toboolean(L, -1); lua_pop(L, 1);
    lua_getfield(L, 3, "tb"); tb = lua_toboolean(L, -1); lua_pop(L, 1);
    lua_getfield(L, 3, "gelu"); gelu = lua_toboolean(L, -1); lua_pop(L, 1);
    lua_getfield(L, 3, "bias");
    if (!lua_isnil(L, -1)) bias = lbert_check_tensor(L, -1);
    lua_pop(L, 1);
  }
  if (!bert_is_vk(a) || !bert_is_vk(b) || (bias && !bert_is_vk(bias)))
    return luaL_error(L, "vulkan.gemm: every operand must be a vulkan tensor (move it with t:to(\"vulkan\"))");
  if (a->ndim != 2 || b->ndim != 2 || a->dtype != BERT_F32 || b->dtype != BERT_F32)
    return luaL_error(L, "vulkan.gemm: expects 2-D float32 tensors, got %s %s and %s %s",
                      bert_shape_str(s1, sizeof s1, a->ndim, a->shape), bert_dtype_name(a->dtype),
                      bert_shape_str(s2, sizeof s2, b->ndim, b->shape), bert_dtype_name(b->dtype));
  int64_t K = a->shape[ta ? 0 : 1], Kb = b->shape[tb ? 1 : 0], N = b->shape[tb ? 0 : 1];
  if (K != Kb)
    return luaL_error(L, "vulkan.gemm: %s @ %s (ta %s, tb %s): inner dimensions differ (%I vs %I)",
                      bert_shape_str(s1, sizeof s1, a->ndim, a->shape), bert_shape_str(s2, sizeof s2, b->ndim, b->shape),
                      ta ? "true" : "false", tb ? "true" : "false", (lua_Integer)K, (lua_Integer)Kb);
  if (bias && (bias->ndim != 1 || bias->shape[0] != N || bias->dtype != BERT_F32))
    return luaL_error(L, "vulkan.gemm: bias %s %s must be float32 [%I]",
                      bert_shape_str(s1, sizeof s1, bias->ndim, bias->shape), bert_dtype_name(bias->dtype),
                      (lua_Integer)N);
  return lbert_push_result(L, bert_vk_gemm(a, ta, b, tb, bias, gelu), "vulkan.gemm");
}

/* bert.vulkan.empty(shape[, dtype]) / zeros */
static int make_tensor(lua_State *L, int zero) {
  luaL_checktype(L, 1, LUA_TTABLE);
  int64_t shape[BERT_MAX_DIMS];
  int nd = (int)luaL_len(L, 1);
  if (nd > BERT_MAX_DIMS) return luaL_argerror(L, 1, "too many dimensions");
  for (int i = 0; i < nd; i++) {
    lua_geti(L, 1, i + 1);
    shape[i] = (int64_t)luaL_checkinteger(L, -1);
    lua_pop(L, 1);
  }
  bert_dtype dt = BERT_F32;
  if (lua_isstring(L, 2) && bert_dtype_from_name(lua_tostring(L, 2), &dt) != 0)
    return luaL_argerror(L, 2, "unknown dtype");
  return lbert_push_result(L, zero ? bert_vk_zeros(dt, nd, shape) : bert_vk_empty(dt, nd, shape),
                           zero ? "vulkan.zeros" : "vulkan.empty");
}
static int v_empty(lua_State *L) { return make_tensor(L, 0); }
static int v_zeros(lua_State *L) { return make_tensor(L, 1); }

/* vulkan.sumsq(t | {t, ...}) -> the sum of squares of every element, in
** double: one reduction per tensor into a device vector, one read back
** (global-norm clipping of device gradients with a single host sync). */
static int v_sumsq(lua_State *L) {
  int n = lua_istable(L, 1) ? (int)luaL_len(L, 1) : 1;
  if (n == 0) { lua_pushnumber(L, 0); return 1; }
  int64_t nn = n;
  bert_tensor *parts = bert_vk_empty(BERT_F32, 1, &nn);
  if (parts == NULL) return lbert_core_error(L, "vulkan.sumsq");
  lbert_push_tensor(L, parts);   /* owned by Lua from here */
  for (int i = 0; i < n; i++) {
    bert_tensor *t;
    if (lua_istable(L, 1)) { lua_geti(L, 1, i + 1); t = lbert_check_tensor(L, -1); lua_pop(L, 1); }
    else t = lbert_check_tensor(L, 1);
    if (!bert_is_vk(t) || t->dtype != BERT_F32) return luaL_error(L, "vulkan.sumsq: tensor %d is not a float32 vulkan tensor", i + 1);
    if (bert_vk_sumsq_into(t, parts, i) != 0) return lbert_core_error(L, "vulkan.sumsq");
  }
  bert_tensor *h = bert_vk_download(parts);
  if (h == NULL) return lbert_core_error(L, "vulkan.sumsq");
  double total = 0;
  for (int i = 0; i < n; i++) total += bert_f32(h)[i];
  bert_tensor_release(h);
  lua_pushnumber(L, total);
  return 1;
}

static const luaL_Reg vk_funcs[] = {
  {"sumsq", v_sumsq},
  {"info", v_info}, {"available", v_available}, {"sync", v_sync}, {"dispatches", v_dispatches},
  {"set_max_range", v_set_max_range},
  {"gemm", v_gemm}, {"empty", v_empty}, {"zeros", v_zeros},
  {NULL, NULL}
};
/* }====================================================== */

/* backend_info() gains a `vulkan` field: wraps the core's function. */
static int l_backend_info(lua_State *L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_call(L, 0, 1);
  push_info(L);
  lua_setfield(L, -2, "vulkan");
  return 1;
}

void lbert_open_vulkan(lua_State *L) {
  int mod = lua_gettop(L);
  /* bert.vulkan */
  luaL_newlib(L, vk_funcs);
  lua_pushboolean(L,
#ifdef BERT_NO_VULKAN
                  0
#else
                  1
#endif
  );
  lua_setfield(L, -2, "built");
  lua_setfield(L, mod, "vulkan");
  /* backend_info wrapper (once: busted reopens modules) */
  lua_getfield(L, mod, "backend_info");
  if (lua_tocfunction(L, -1) != l_backend_info) {
    lua_pushcclosure(L, l_backend_info, 1);
    lua_setfield(L, mod, "backend_info");
  } else lua_pop(L, 1);
}
