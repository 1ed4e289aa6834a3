/*
** The Vulkan backend for Lua: bert.vulkan.*, t:to("vulkan" | "cpu"),
** backend_info().vulkan, and the argument guard that keeps device tensors
** out of CPU-only code.
**
** The guard: every binding fetches its tensors through lbert_test_tensor,
** which calls lbert_vk_check_arg for a device tensor.  The running C
** function is looked up (by pointer) in tables built here from the
** registered functions: metadata and view functions take device tensors
** as they are; device-aware ops too (their core entry points route to
** csrc/vk/); readers (item, totable, get, tostring) get a host copy in
** place of the argument; anything else raises an error naming the
** function.  Host tensors never reach this code, so the CPU paths pay one
** comparison.  Ops are not decided here: their C front-ends say whether the
** device runs them (core/backend.h); this guard only keeps device tensors
** out of C code that reads host memory directly (file I/O, data, t:set).
*/
#include <string.h>

#include "lbert.h"
#include "core/autograd.h"
#include "vulkan/vk.h"
#include "vulkan/vk_internal.h"

enum { CLS_UNKNOWN = 0, CLS_META, CLS_DEVICE, CLS_READER };

#define MAX_FUNCS 256
static struct { lua_CFunction f; int cls; } funcs[MAX_FUNCS];
static int nfuncs;

static int classify(lua_CFunction f) {
  for (int i = 0; i < nfuncs; i++)
    if (funcs[i].f == f) return funcs[i].cls;
  return CLS_UNKNOWN;
}

static void add_func(lua_CFunction f, int cls) {
  if (f == NULL) return;
  for (int i = 0; i < nfuncs; i++)
    if (funcs[i].f == f) { funcs[i].cls = cls; return; }
  if (nfuncs < MAX_FUNCS) { funcs[nfuncs].f = f; funcs[nfuncs].cls = cls; nfuncs++; }
}

/* Registers the C functions table[name] for each name (table at idx). */
static void add_named(lua_State *L, int idx, const char *const *names, int cls) {
  idx = lua_absindex(L, idx);
  for (; *names; names++) {
    lua_getfield(L, idx, *names);
    if (lua_iscfunction(L, -1)) add_func(lua_tocfunction(L, -1), cls);
    lua_pop(L, 1);
  }
}

bert_tensor *lbert_vk_check_arg(lua_State *L, int arg, bert_tensor *t) {
  lua_Debug ar;
  lua_CFunction f = NULL;
  const char *name = "?";
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "nf", &ar)) {
    f = lua_tocfunction(L, -1);
    lua_pop(L, 1);
    if (ar.name) name = ar.name;
  }
  int cls = classify(f);
  if (cls == CLS_READER) {   /* a host copy stands in for the argument */
    arg = lua_absindex(L, arg);
    bert_tensor *h = bert_vk_download(t);
    if (h == NULL) { lbert_core_error(L, name); return NULL; }
    lbert_push_tensor(L, h);
    lua_replace(L, arg);
    return h;
  }
  if (cls == CLS_UNKNOWN)
    luaL_error(L, "%s: argument #%d is a vulkan tensor, but '%s' runs on the cpu only "
               "(move it with t:to(\"cpu\"))", name, arg, name);
  return t;
}

/* t:to("vulkan") / t:to("cpu") (called from m_to for device names). */
int lbert_vk_to(lua_State *L, bert_tensor *t, const char *device) {
  if (strcmp(device, "cpu") == 0) {
    if (!bert_is_vk(t)) { lua_settop(L, 1); return 1; }
    return lbert_push_result(L, bert_vk_download(t), "to");
  }
  if (bert_is_vk(t)) { lua_settop(L, 1); return 1; }
  const char *why;
  if (!bert_vk_available(&why)) return luaL_error(L, "to: vulkan is not available: %s", why);
  bert_tensor *d = bert_vk_upload(t);
  if (d == NULL) return lbert_core_error(L, "to");
  lbert_push_tensor(L, d);
  return 1;
}

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

/* bert.vulkan.gemm(a, b[, {ta=, tb=, bias=, gelu=}]): op(a) @ op(b) (+bias, GELU) */
static int v_gemm(lua_State *L) {
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

/* kernel-level entries, for the specs and for backward passes */
static bert_tensor *opt_t(lua_State *L, int i) { return lua_isnoneornil(L, i) ? NULL : lbert_check_tensor(L, i); }

/* y, stats = vulkan.layer_norm(x, w, b, eps, residual) */
static int v_layer_norm(lua_State *L) {
  bert_tensor *st = NULL;
  bert_tensor *y = bert_vk_layer_norm_ex(lbert_check_tensor(L, 1), opt_t(L, 2), opt_t(L, 3), luaL_optnumber(L, 4, 1e-12),
                                         opt_t(L, 5), &st);
  if (y == NULL) return lbert_core_error(L, "vulkan.layer_norm");
  lbert_push_tensor(L, y);
  lbert_push_tensor(L, st);
  return 2;
}

/* dx, dgamma_dbeta[2 x H] = vulkan.layer_norm_backward(dy, x, residual, gamma, stats) */
static int v_layer_norm_backward(lua_State *L) {
  bert_tensor *dx, *dgb;
  if (bert_vk_layer_norm_backward(lbert_check_tensor(L, 1), lbert_check_tensor(L, 2), opt_t(L, 3), opt_t(L, 4),
                                  lbert_check_tensor(L, 5), &dx, &dgb) != 0)
    return lbert_core_error(L, "vulkan.layer_norm_backward");
  lbert_push_tensor(L, dx);
  lbert_push_tensor(L, dgb);
  return 2;
}

static int v_gelu_backward(lua_State *L) {
  return lbert_push_result(L, bert_vk_gelu_backward(lbert_check_tensor(L, 1), lbert_check_tensor(L, 2), opt_t(L, 3),
                                                    lua_toboolean(L, 4)), "vulkan.gelu_backward");
}

static int v_column_sums(lua_State *L) {
  return lbert_push_result(L, bert_vk_column_sums(lbert_check_tensor(L, 1)), "vulkan.column_sums");
}

/* vulkan.dropout(x, p, seed, offset): the mask of that Philox stream */
static int v_dropout(lua_State *L) {
  return lbert_push_result(L, bert_vk_dropout_mask(lbert_check_tensor(L, 1), luaL_checknumber(L, 2),
                                                   (uint64_t)luaL_checkinteger(L, 3), (uint64_t)luaL_checkinteger(L, 4)),
                           "vulkan.dropout");
}

/* vulkan.embedding_backward(dw, ids, dy): dw[ids[r]] += dy[r] in place */
static int v_embedding_backward(lua_State *L) {
  if (bert_vk_embedding_backward(lbert_check_tensor(L, 1), lbert_check_tensor(L, 2), lbert_check_tensor(L, 3)) != 0)
    return lbert_core_error(L, "vulkan.embedding_backward");
  lua_settop(L, 1);
  return 1;
}

/* vulkan.cross_entropy_backward(logits, labels, ignore_index, "mean" | "sum", g) */
static int v_ce_backward(lua_State *L) {
  static const char *const reds[] = {"none", "mean", "sum", NULL};
  int red = luaL_checkoption(L, 4, "mean", reds);
  bert_tensor *labels = lbert_check_tensor(L, 2);
  int64_t ignore = (int64_t)luaL_optinteger(L, 3, -100), count = 0;
  bert_tensor *h = bert_is_vk(labels) ? bert_vk_download(labels) : (bert_tensor_retain(labels), labels);
  if (h == NULL) return lbert_core_error(L, "vulkan.cross_entropy_backward");
  for (int64_t i = 0; i < bert_numel(h); i++) count += (int64_t)bert_get_flat(h, i) != ignore;
  bert_tensor_release(h);
  return lbert_push_result(L, bert_vk_cross_entropy_backward(lbert_check_tensor(L, 1), labels, ignore, red, count,
                                                             lbert_check_tensor(L, 5)), "vulkan.cross_entropy_backward");
}

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
  {"layer_norm", v_layer_norm}, {"layer_norm_backward", v_layer_norm_backward},
  {"gelu_backward", v_gelu_backward}, {"column_sums", v_column_sums}, {"dropout", v_dropout},
  {"embedding_backward", v_embedding_backward}, {"cross_entropy_backward", v_ce_backward},
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

static const char *const meta_methods[] = {
  "shape", "size", "stride", "dim", "numel", "dtype", "device", "is_contiguous", "free",
  "view", "transpose", "t", "permute", "narrow", "select", "squeeze", "unsqueeze", "expand",
  "split", "to", "requires_grad", "grad", "set_grad", "is_leaf", "grad_fn", "detach",
  "__gc", "__close", "__len", NULL
};
/* nonzero's result size depends on the data: it is computed on the host */
static const char *const reader_methods[] = {"item", "totable", "get", "__tostring", "nonzero", NULL};
/* Functions whose C entry runs through the backend table: a device that
** lacks the op refuses it there ("<op>: not supported on device vulkan"). */
static const char *const device_methods[] = {
  "reshape", "contiguous", "clone", "copy_", "float", "int",
  "fill_", "zero_", "sum", "mean", "max", "min", "var", "softmax", "log_softmax",
  "matmul", "__add", "__sub", "__mul", "__div", "__pow", "__unm",
  "argmax", "argmin", "index_select", "backward", "zero_grad",
  "masked_fill", "masked_fill_", "gather", "scatter_add", "scatter_add_", "normal_", "uniform_", NULL
};
/* the elementwise ops of the list (core/op_list.h), plain and in place */
static const char *const elementwise_methods[] = {
#define X(ID, NAME, flag) #NAME, #NAME "_",
  BERT_BINARY_OPS(X)
  BERT_UNARY_OPS(X)
#undef X
  NULL
};
static const char *const device_F[] = {
  "linear", "layer_norm", "bias_gelu", "dropout", "embedding", "attention", "attention_qkv", "cross_entropy", NULL
};
/* save_safetensors writes device tensors from host copies (l_io.c) */
static const char *const device_module[] = {"matmul", "where", "cat", "stack", "save_safetensors", NULL};
static const char *const device_kernels[] = {"adamw", "lamb", "zero_grad_", NULL};

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
  for (const luaL_Reg *r = vk_funcs; r->name; r++) add_func(r->func, CLS_DEVICE);
  add_func(v_info, CLS_META);
  lua_setfield(L, mod, "vulkan");
  /* backend_info wrapper (once: busted reopens modules) */
  lua_getfield(L, mod, "backend_info");
  if (lua_tocfunction(L, -1) != l_backend_info) {
    lua_pushcclosure(L, l_backend_info, 1);
    lua_setfield(L, mod, "backend_info");
  } else lua_pop(L, 1);
  /* the guard's tables, from the registered functions */
  luaL_getmetatable(L, BERT_TENSOR_MT);
  int mt = lua_gettop(L);
  lua_getfield(L, mt, "__index");
  int methods = lua_gettop(L);
  add_named(L, methods, meta_methods, CLS_META);
  add_named(L, mt, meta_methods, CLS_META);
  add_named(L, methods, reader_methods, CLS_READER);
  add_named(L, mt, reader_methods, CLS_READER);
  add_named(L, methods, device_methods, CLS_DEVICE);
  add_named(L, mt, device_methods, CLS_DEVICE);
  add_named(L, methods, elementwise_methods, CLS_DEVICE);
  lua_settop(L, mod);
  add_named(L, mod, device_module, CLS_DEVICE);
  if (lua_getfield(L, mod, "F") == LUA_TTABLE) add_named(L, -1, device_F, CLS_DEVICE);
  lua_settop(L, mod);
  if (lua_getfield(L, mod, "optim_kernels") == LUA_TTABLE) add_named(L, -1, device_kernels, CLS_DEVICE);
  lua_settop(L, mod);
}
