/*
** bert.core.F: the fused nn ops (their front-ends: core/nn.c) for Lua.
*/
#include <float.h>
#include <string.h>

#include "lbert.h"
#include "core/ag_ops.h"
#include "core/nn.h"
#include "cpu/cpu.h"

/* An optional tensor argument: nil/none -> NULL. */
static bert_tensor *opt_tensor(lua_State *L, int arg) {
  if (lua_isnoneornil(L, arg)) return NULL;
  return lbert_check_tensor(L, arg);
}

/* Field `name` of the options table at arg (nil when absent or no table). */
static int opt_field(lua_State *L, int arg, const char *name) {
  if (lua_isnoneornil(L, arg)) { lua_pushnil(L); return LUA_TNIL; }
  return lua_getfield(L, arg, name);
}

static double opt_number(lua_State *L, int arg, const char *fname, const char *name, double dflt) {
  int t = opt_field(L, arg, name);
  double v = dflt;
  if (t != LUA_TNIL) {
    if (!lua_isnumber(L, -1))
      luaL_error(L, "%s: option '%s' must be a number, got %s", fname, name, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static int opt_bool(lua_State *L, int arg, const char *name, int dflt) {
  int t = opt_field(L, arg, name);
  int v = t == LUA_TNIL ? dflt : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static void check_opts(lua_State *L, int arg, const char *fname) {
  if (!lua_isnoneornil(L, arg) && !lua_istable(L, arg))
    luaL_error(L, "%s: options (argument #%d) must be a table, got %s", fname, arg,
               luaL_typename(L, arg));
}

/* {====================================================== int8 */

#define QWEIGHT_MT "bert.QWeight"

static bert_qweight *check_qweight(lua_State *L, int arg) {
  bert_qweight **box = luaL_checkudata(L, arg, QWEIGHT_MT);
  if (*box == NULL) luaL_error(L, "int8 weight (argument #%d) was freed", arg);
  return *box;
}

/* Quantises w into a new QWeight userdata on the stack. */
static bert_qweight *push_quantized(lua_State *L, bert_tensor *w) {
  bert_qweight **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, QWEIGHT_MT);
  if ((*box = cpu_qweight_new(w)) == NULL) lbert_core_error(L, "quantize_int8");
  return *box;
}

/* F.quantize_int8(weight [out, in]) -> an int8 weight for F.linear_int8 */
static int l_quantize_int8(lua_State *L) {
  push_quantized(L, lbert_check_tensor(L, 1));
  return 1;
}

/* F.linear_int8(x, qweight[, bias]): x @ W^T + b through int8 (cpu/qlinear.c) */
static int l_linear_int8(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1);
  bert_qweight *q = check_qweight(L, 2);
  bert_tensor *b = opt_tensor(L, 3);
  return lbert_push_result(L, cpu_linear_int8(x, q, b), "linear_int8");
}

static int qw_gc(lua_State *L) {
  bert_qweight **box = luaL_checkudata(L, 1, QWEIGHT_MT);
  cpu_qweight_free(*box);
  *box = NULL;
  return 0;
}

/* q:shape() -> {out, in} */
static int qw_shape(lua_State *L) {
  bert_qweight *q = check_qweight(L, 1);
  lua_createtable(L, 2, 0);
  lua_pushinteger(L, q->out_features);
  lua_rawseti(L, -2, 1);
  lua_pushinteger(L, q->in_features);
  lua_rawseti(L, -2, 2);
  return 1;
}

/* q:nbytes(): the codes, scales and sums held */
static int qw_nbytes(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_qweight(L, 1)->nbytes);
  return 1;
}

/* q:scales() -> float32 [out]: each output channel's step */
static int qw_scales(lua_State *L) {
  bert_qweight *q = check_qweight(L, 1);
  bert_tensor *t = bert_tensor_empty(BERT_F32, 1, &q->out_features);
  if (t) memcpy(bert_f32(t), q->scale, (size_t)q->out_features * sizeof(float));
  return lbert_push_result(L, t, "scales");
}

/* q:dequantize() -> float32 [out, in]: the weight the int8 product uses */
static int qw_dequantize(lua_State *L) {
  return lbert_push_result(L, cpu_qweight_dequantize(check_qweight(L, 1)), "dequantize");
}

static int qw_tostring(lua_State *L) {
  bert_qweight *q = check_qweight(L, 1);
  lua_pushfstring(L, "bert.QWeight(int8 [%I x %I])", (lua_Integer)q->out_features, (lua_Integer)q->in_features);
  return 1;
}

/* Weights marked for int8 (F.set_int8): a table in the registry, weak keys
** (the weight tensors' userdata), values true (quantised on first use by
** F.linear) or their QWeight.  int8_marked: any weight ever was, so that
** F.linear looks only then. */
static const char int8_marks_key = 0;
static int int8_marked;

static void push_int8_marks(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &int8_marks_key) != LUA_TNIL) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &int8_marks_key);
}

/* F.set_int8(weight, on): on, F.linear with this weight (the same tensor
** object) runs int8 (quantised on first use); off, float32 again */
static int l_set_int8(lua_State *L) {
  bert_tensor *w = lbert_check_tensor(L, 1);
  luaL_checkany(L, 2);
  int on = lua_toboolean(L, 2);
  char s[160];
  if (on && (!bert_is_host(w) || w->dtype != BERT_F32 || w->ndim != 2))
    return luaL_error(L, "set_int8: expects a float32 [out x in] weight on the CPU, got %s %s on %s",
                      bert_dtype_name(w->dtype), bert_shape_str(s, sizeof s, w->ndim, w->shape),
                      bert_backend_of(w)->name);
  push_int8_marks(L);
  lua_pushvalue(L, 1);
  if (on) lua_pushboolean(L, 1); else lua_pushnil(L);
  lua_rawset(L, -3);
  int8_marked |= on;
  return 0;
}

/* F.int8_of(weight) -> its QWeight once F.linear quantised it, true while
** marked and unused, nil when not marked */
static int l_int8_of(lua_State *L) {
  lbert_check_tensor(L, 1);
  push_int8_marks(L);
  lua_pushvalue(L, 1);
  lua_rawget(L, -2);
  return 1;
}

/* F.int8_kernel([name]) -> the kernel in use, {the kernels this CPU has};
** name ("scalar", "avx2", "avxvnni", "avx512vnni" or "auto") forces one first */
static int l_int8_kernel(lua_State *L) {
  if (!lua_isnoneornil(L, 1) && cpu_int8_set_kernel(luaL_checkstring(L, 1)) != 0)
    return lbert_core_error(L, "int8_kernel");
  const char *names[8];
  int n = cpu_int8_kernels(names, 8);
  lua_pushstring(L, cpu_int8_kernel());
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 2;
}

/* The QWeight of the weight at arg when it is marked (quantising it on
** first use), else NULL; the stack is left as found. */
static bert_qweight *marked_int8(lua_State *L, int arg, bert_tensor *w) {
  if (!int8_marked) return NULL;
  push_int8_marks(L);
  lua_pushvalue(L, arg);
  int t = lua_rawget(L, -2);
  bert_qweight *q = NULL;
  if (t == LUA_TUSERDATA) q = check_qweight(L, -1);
  else if (t == LUA_TBOOLEAN) {
    q = push_quantized(L, w);
    lua_pushvalue(L, arg);
    lua_pushvalue(L, -2);
    lua_rawset(L, -5);   /* marks[w] = q */
    lua_pop(L, 1);
  }
  lua_pop(L, 2);   /* the marks table keeps q alive */
  return q;
}
/* }====================================================== */

/* F.linear(x, weight[, bias]); a weight marked by F.set_int8 runs int8 */
static int l_linear(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1), *w = lbert_check_tensor(L, 2);
  bert_tensor *b = opt_tensor(L, 3);
  bert_qweight *q = marked_int8(L, 2, w);
  if (q) return lbert_push_result(L, cpu_linear_int8(x, q, b), "linear");
  return lbert_push_result(L, bert_linear(x, w, b), "linear");
}

/* F.layer_norm(x, weight, bias[, eps = 1e-12][, residual]) */
static int l_layer_norm(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1);
  bert_tensor *g = opt_tensor(L, 2), *b = opt_tensor(L, 3);
  double eps = luaL_optnumber(L, 4, 1e-12);
  bert_tensor *r = opt_tensor(L, 5);
  return lbert_push_result(L, bert_layer_norm(x, g, b, eps, r), "layer_norm");
}

/* F.rms_norm(x, weight[, eps = 1e-6]) */
static int l_rms_norm(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1), *w = opt_tensor(L, 2);   /* nil: bert_rms_norm names it */
  double eps = luaL_optnumber(L, 3, 1e-6);
  return lbert_push_result(L, bert_rms_norm(x, w, eps), "rms_norm");
}

/* The tensor option `name` of the table at arg, or NULL when absent. */
static bert_tensor *opt_tensor_field(lua_State *L, int arg, const char *fname, const char *name) {
  bert_tensor *t = NULL;
  if (opt_field(L, arg, name) != LUA_TNIL && (t = lbert_test_tensor(L, -1)) == NULL)
    luaL_error(L, "%s: option '%s' must be a tensor, got %s", fname, name, luaL_typename(L, -1));
  lua_pop(L, 1);   /* the options table keeps it alive */
  return t;
}

/* F.lstm(x, h0, c0, w_ih, w_hh[, b][, {w_hr=, lengths=, reverse=false, clip=0, proj_clip=0}]) -> y, h_n, c_n;
** h0, c0 may be nil (zeros).  The op's one packed result is split into three views. */
static int l_lstm(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1), *h0 = opt_tensor(L, 2), *c0 = opt_tensor(L, 3);
  bert_tensor *w_ih = lbert_check_tensor(L, 4), *w_hh = lbert_check_tensor(L, 5), *b = opt_tensor(L, 6);
  check_opts(L, 7, "lstm");
  bert_tensor *w_hr = opt_tensor_field(L, 7, "lstm", "w_hr"), *len = opt_tensor_field(L, 7, "lstm", "lengths");
  bert_lstm_opts o = {opt_bool(L, 7, "reverse", 0), opt_number(L, 7, "lstm", "clip", 0.0),
                      opt_number(L, 7, "lstm", "proj_clip", 0.0)};
  bert_tensor *out = bert_lstm(x, h0, c0, w_ih, w_hh, b, w_hr, len, &o);
  if (out == NULL) return lbert_core_error(L, "lstm");
  const int64_t B = x->shape[0], T = x->shape[1], H = w_ih->shape[0] / 4, O = w_hr ? w_hr->shape[0] : H;
  const int64_t yshape[3] = {B, T, O}, start[3] = {0, T * O, T * O + O}, width[3] = {T * O, O, H};
  bert_tensor *parts[3] = {NULL};
  for (int i = 0; i < 3; i++) {
    bert_tensor *v = bert_ag_narrow(out, 1, start[i], width[i]);
    parts[i] = i == 0 && v ? bert_ag_reshape(v, 3, yshape) : v;
    if (i == 0) bert_tensor_release(v);
    if (parts[i] == NULL) break;
  }
  bert_tensor_release(out);
  for (int i = 0; i < 3; i++) lbert_push_result(L, parts[i], "lstm");
  return 3;
}

/* F.bias_gelu(x[, bias][, approximate = "none" | "tanh"]) */
static int l_bias_gelu(lua_State *L) {
  static const char *const modes[] = {"none", "tanh", NULL};
  bert_tensor *x = lbert_check_tensor(L, 1), *b = opt_tensor(L, 2);
  int mode = luaL_checkoption(L, 3, "none", modes);
  return lbert_push_result(L, bert_bias_gelu(x, b, mode), "bias_gelu");
}

/* F.dropout(x, p[, training = true]) */
static int l_dropout(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1);
  double p = luaL_checknumber(L, 2);
  int training = lua_isnoneornil(L, 3) ? 1 : lua_toboolean(L, 3);
  return lbert_push_result(L, bert_dropout(x, p, training), "dropout");
}

/* F.embedding(ids, weight) */
/* F.dropout_rows(x, p, training, rows, batch, seq): x [N, W] the packed rows
** rows (int32 [N], flat b * seq + j) of a [batch, seq, W] tensor; the masks
** are F.dropout's on that tensor */
static int l_dropout_rows(lua_State *L) {
  bert_tensor *x = lbert_check_tensor(L, 1);
  double p = luaL_checknumber(L, 2);
  int training = lua_toboolean(L, 3);
  bert_tensor *rows = lbert_check_tensor(L, 4);
  lua_Integer B = luaL_checkinteger(L, 5), T = luaL_checkinteger(L, 6);
  return lbert_push_result(L, bert_dropout_rows(x, p, training, rows, (int64_t)B, (int64_t)T), "dropout_rows");
}

static int l_embedding(lua_State *L) {
  bert_tensor *ids = lbert_check_tensor(L, 1), *w = lbert_check_tensor(L, 2);
  return lbert_push_result(L, bert_embedding(ids, w), "embedding");
}

/* The options of F.attention and F.attention_qkv, from the table at arg. */
static void attention_opts(lua_State *L, int arg, const char *fname, bert_attention_opts *o) {
  check_opts(L, arg, fname);
  memset(o, 0, sizeof *o);
  bert_tensor **targets[2] = {&o->mask, &o->cu_seqlens};
  const char *names[2] = {"mask", "cu_seqlens"};
  for (int i = 0; i < 2; i++) {
    if (opt_field(L, arg, names[i]) != LUA_TNIL) {
      *targets[i] = lbert_test_tensor(L, -1);
      if (*targets[i] == NULL)
        luaL_error(L, "%s: option '%s' must be a tensor, got %s", fname, names[i], luaL_typename(L, -1));
    }
    lua_pop(L, 1);   /* the options table keeps it alive */
  }
  o->mask_value = opt_number(L, arg, fname, "mask_value", -FLT_MAX);
  o->dropout_p = opt_number(L, arg, fname, "dropout", 0.0);
  o->training = opt_bool(L, arg, "training", 1);
  o->causal = opt_bool(L, arg, "causal", 0);
  o->scale = opt_number(L, arg, fname, "scale", 0.0);
  if (o->scale < 0) luaL_error(L, "%s: scale must be positive, got %g", fname, o->scale);
}

/* F.attention(q, k, v[, {mask=, mask_value=, causal=, cu_seqlens=, dropout=, training=, scale=}]) */
static int l_attention(lua_State *L) {
  bert_tensor *q = lbert_check_tensor(L, 1), *k = lbert_check_tensor(L, 2);
  bert_tensor *v = lbert_check_tensor(L, 3);
  bert_attention_opts o;
  attention_opts(L, 4, "attention", &o);
  return lbert_push_result(L, bert_attention(q, k, v, &o), "attention");
}

/* F.attention_qkv(qkv, heads[, opts as F.attention]): qkv [B, T, 3H] (or
** [total, 3H] with cu_seqlens), the fused Q, K, V projection */
static int l_attention_qkv(lua_State *L) {
  bert_tensor *qkv = lbert_check_tensor(L, 1);
  lua_Integer heads = luaL_checkinteger(L, 2);
  bert_attention_opts o;
  attention_opts(L, 3, "attention_qkv", &o);
  return lbert_push_result(L, bert_attention_qkv(qkv, (int64_t)heads, &o), "attention_qkv");
}

/* F.attention_rel(q, k, v, {rows =, kr =, qr =, mask =, causal =, dropout =, training =, scale =}):
** DeBERTa's disentangled attention (cpu/attention_rel.c) */
static int l_attention_rel(lua_State *L) {
  bert_tensor *q = lbert_check_tensor(L, 1), *k = lbert_check_tensor(L, 2);
  bert_tensor *v = lbert_check_tensor(L, 3);
  luaL_checktype(L, 4, LUA_TTABLE);
  bert_tensor *t[4] = {NULL, NULL, NULL, NULL};
  const char *names[4] = {"rows", "kr", "qr", "mask"};
  for (int i = 0; i < 4; i++) {
    if (opt_field(L, 4, names[i]) != LUA_TNIL) {
      t[i] = lbert_test_tensor(L, -1);
      if (t[i] == NULL)
        return luaL_error(L, "attention_rel: option '%s' must be a tensor, got %s", names[i], luaL_typename(L, -1));
    }
    lua_pop(L, 1);   /* the options table keeps it alive */
  }
  if (t[0] == NULL) return luaL_error(L, "attention_rel: option 'rows' (int32 [Tq x Tk]) is required");
  bert_attention_opts o;
  memset(&o, 0, sizeof o);
  o.mask = t[3];
  o.mask_value = opt_number(L, 4, "attention_rel", "mask_value", -FLT_MAX);
  o.dropout_p = opt_number(L, 4, "attention_rel", "dropout", 0.0);
  o.training = opt_bool(L, 4, "training", 1);
  o.causal = opt_bool(L, 4, "causal", 0);
  o.scale = opt_number(L, 4, "attention_rel", "scale", 0.0);
  if (o.scale < 0) return luaL_error(L, "attention_rel: scale must be positive, got %g", o.scale);
  return lbert_push_result(L, bert_attention_rel(q, k, v, t[1], t[2], t[0], &o), "attention_rel");
}

/* F.cross_entropy(logits, labels[, {ignore_index = -100, reduction = "mean"}]) */
static int l_cross_entropy(lua_State *L) {
  static const char *const reds[] = {"none", "mean", "sum", NULL};
  bert_tensor *logits = lbert_check_tensor(L, 1), *labels = lbert_check_tensor(L, 2);
  check_opts(L, 3, "cross_entropy");
  double ig = opt_number(L, 3, "cross_entropy", "ignore_index", -100);
  int red = BERT_REDUCE_MEAN;
  if (opt_field(L, 3, "reduction") != LUA_TNIL) {
    const char *s = lua_tostring(L, -1);
    red = -1;
    for (int i = 0; s && reds[i]; i++) if (strcmp(s, reds[i]) == 0) red = i;
    if (red < 0)
      return luaL_error(L, "cross_entropy: reduction must be \"mean\", \"sum\" or \"none\", got %s",
                        s ? s : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return lbert_push_result(L, bert_cross_entropy(logits, labels, (int64_t)ig, (bert_reduction)red),
                           "cross_entropy");
}

static const luaL_Reg F_funcs[] = {
  {"linear", l_linear},
  {"layer_norm", l_layer_norm},
  {"rms_norm", l_rms_norm},
  {"lstm", l_lstm},
  {"bias_gelu", l_bias_gelu},
  {"dropout", l_dropout},
  {"dropout_rows", l_dropout_rows},
  {"embedding", l_embedding},
  {"attention", l_attention},
  {"attention_qkv", l_attention_qkv},
  {"attention_rel", l_attention_rel},
  {"cross_entropy", l_cross_entropy},
  {"quantize_int8", l_quantize_int8},
  {"linear_int8", l_linear_int8},
  {"set_int8", l_set_int8},
  {"int8_of", l_int8_of},
  {"int8_kernel", l_int8_kernel},
  {NULL, NULL}
};

static const luaL_Reg qweight_methods[] = {
  {"shape", qw_shape},
  {"nbytes", qw_nbytes},
  {"scales", qw_scales},
  {"dequantize", qw_dequantize},
  {NULL, NULL}
};

void lbert_open_nn(lua_State *L) {
  if (luaL_newmetatable(L, QWEIGHT_MT)) {
    luaL_newlib(L, qweight_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, qw_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, qw_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_getfield(L, -1, "F");
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "F");
  }
  luaL_setfuncs(L, F_funcs, 0);
  lua_pop(L, 1);
}
