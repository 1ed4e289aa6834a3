/*
** Elementwise ops with NumPy broadcasting: binary arithmetic and
** comparisons, unary math, masked_fill, where, fill.
**
** Type rules: float32 op anything -> float32; int32 op int32 -> int32,
** except true division (float32); comparisons give int32 0/1 masks.
** Integer results computed in int64 and wrapped to int32, as C would;
** double -> int32 conversions saturate (no undefined behaviour).
*/
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "vulkan/vk.h"
#include "core/iter.h"
#include "core/ops.h"

static const char *const binop_names[] = {
  "add", "sub", "mul", "div", "pow", "maximum", "minimum",
  "eq", "ne", "lt", "le", "gt", "ge"
};
static const char *const unop_names[] = {
  "neg", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid",
  "relu", "gelu", "gelu_tanh", "abs", "erf"
};

const char *bert_binop_name(bert_binop op) { return binop_names[op]; }
const char *bert_unop_name(bert_unop op) { return unop_names[op]; }

int bert_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out) {
  char b1[160], b2[160];
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int ia = na - n + i, ib = nb - n + i;
    int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      bert_set_error("shapes %s and %s cannot be broadcast (dimension %d: %lld vs %lld)",
                     bert_shape_str(b1, sizeof b1, na, a), bert_shape_str(b2, sizeof b2, nb, b),
                     i + 1, (long long)sa, (long long)sb);
      return -1;
    }
    out[i] = sa == 1 ? sb : sa;
  }
  *nout = n;
  return 0;
}

static int32_t saturate_i32(double v) {
  if (v != v) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return (int32_t)v;
}

static int32_t wrap_i32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

/* Prepares dst (given or new) with the broadcast shape of the inputs. */
static bert_tensor *prepare_out(const char *fname, bert_tensor *dst, bert_dtype dt,
                                int n, const bert_tensor *const *ins) {
  char b1[160], b2[160];
  int nd = ins[0]->ndim;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, ins[0]->shape, sizeof shape);
  for (int i = 1; i < n; i++) {
    int64_t tmp[BERT_MAX_DIMS];
    int nt;
    if (bert_broadcast_shape(nd, shape, ins[i]->ndim, ins[i]->shape, &nt, tmp) != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s: %s", fname, bert_last_error());
      bert_set_error("%s", msg);
      return NULL;
    }
    nd = nt;
    memcpy(shape, tmp, sizeof tmp);
  }
  if (dst == NULL) return bert_tensor_empty(dt, nd, shape);
  int same = dst->ndim == nd;
  for (int i = 0; same && i < nd; i++) same = dst->shape[i] == shape[i];
  if (!same) {
    bert_set_error("%s: in-place result %s must have the broadcast shape %s", fname,
                   bert_shape_str(b1, sizeof b1, dst->ndim, dst->shape),
                   bert_shape_str(b2, sizeof b2, nd, shape));
    return NULL;
  }
  if (dst->dtype != dt) {
    bert_set_error("%s: in-place result is %s but the operation gives %s", fname,
                   bert_dtype_name(dst->dtype), bert_dtype_name(dt));
    return NULL;
  }
  if (bert_has_overlap(dst)) {
    bert_set_error("%s: cannot write in place into an expanded tensor", fname);
    return NULL;
  }
  bert_tensor_retain(dst);
  return dst;
}

/* {====================================================== binary */

typedef struct { bert_binop op; float alpha; double alpha_d; bert_dtype ta, tb, to; } binctx;

static void binary_f32(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const binctx *c = vctx;
  float *o = (float *)ptr[0];
  const float *a = (const float *)ptr[1], *b = (const float *)ptr[2];
  int64_t so = st[0], sa = st[1], sb = st[2];
  float alpha = c->alpha;
#define LOOP(EXPR) for (int64_t j = 0; j < n; j++) { float x = a[j * sa], y = b[j * sb]; o[j * so] = (EXPR); } break
  switch (c->op) {
    case BERT_ADD: if (alpha == 1.0f) { LOOP(x + y); } else { LOOP(x + alpha * y); }
    case BERT_SUB: if (alpha == 1.0f) { LOOP(x - y); } else { LOOP(x - alpha * y); }
    case BERT_MUL: LOOP(x * y);
    case BERT_DIV: LOOP(x / y);
    case BERT_POW: LOOP(y == 2.0f ? x * x : powf(x, y));
    case BERT_MAXIMUM: LOOP((x != x || x > y) ? x : y);
    case BERT_MINIMUM: LOOP((x != x || x < y) ? x : y);
    default: break;
  }
#undef LOOP
}

static double load(bert_dtype dt, const char *p) {
  return dt == BERT_F32 ? (double)*(const float *)p : (double)*(const int32_t *)p;
}

/* Mixed dtypes, integer arithmetic and comparisons. */
static void binary_generic(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const binctx *c = vctx;
  int64_t so = st[0] * 4, sa = st[1] * 4, sb = st[2] * 4;
  int ints = c->ta == BERT_I32 && c->tb == BERT_I32;
  for (int64_t j = 0; j < n; j++) {
    double x = load(c->ta, ptr[1] + j * sa), y = load(c->tb, ptr[2] + j * sb), r = 0;
    int64_t ri = 0;
    int is_int = 0;
    switch (c->op) {
      case BERT_ADD: if (ints) { ri = (int64_t)x + (int64_t)c->alpha_d * (int64_t)y; is_int = 1; } else r = x + c->alpha_d * y; break;
      case BERT_SUB: if (ints) { ri = (int64_t)x - (int64_t)c->alpha_d * (int64_t)y; is_int = 1; } else r = x - c->alpha_d * y; break;
      case BERT_MUL: if (ints) { ri = (int64_t)x * (int64_t)y; is_int = 1; } else r = x * y; break;
      case BERT_DIV: r = x / y; break;
      case BERT_POW: r = pow(x, y); break;
      case BERT_MAXIMUM: r = (x != x || x > y) ? x : y; break;
      case BERT_MINIMUM: r = (x != x || x < y) ? x : y; break;
      case BERT_EQ: r = x == y; break;
      case BERT_NE: r = x != y; break;
      case BERT_LT: r = x < y; break;
      case BERT_LE: r = x <= y; break;
      case BERT_GT: r = x > y; break;
      case BERT_GE: r = x >= y; break;
    }
    char *o = ptr[0] + j * so;
    if (c->to == BERT_F32) *(float *)o = is_int ? (float)ri : (float)r;
    else *(int32_t *)o = is_int ? wrap_i32(ri) : saturate_i32(r);
  }
}

bert_tensor *bert_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b,
                         double alpha, bert_tensor *dst) {
  if (bert_is_vk(a) || bert_is_vk(b) || bert_is_vk(dst)) return bert_vk_binary(op, a, b, alpha, dst);
  bert_dtype to;
  if (op >= BERT_EQ) to = BERT_I32;
  else if (op == BERT_DIV) to = BERT_F32;
  else to = (a->dtype == BERT_F32 || b->dtype == BERT_F32) ? BERT_F32 : BERT_I32;
  if (dst && op < BERT_EQ && dst->dtype == BERT_F32) to = BERT_F32;  /* int into float in place */
  const bert_tensor *ins[2] = {a, b};
  bert_tensor *out = prepare_out(binop_names[op], dst, to, 2, ins);
  if (out == NULL) return NULL;
  const bert_tensor *ops[3] = {out, a, b};
  bert_iter it;
  bert_iter_init(&it, 3, ops);
  binctx c = {op, (float)alpha, alpha, a->dtype, b->dtype, to};
  int fast = to == BERT_F32 && a->dtype == BERT_F32 && b->dtype == BERT_F32 && op < BERT_EQ;
  bert_iter_run(&it, fast ? binary_f32 : binary_generic, &c);
  return out;
}
/* }====================================================== */

/* {====================================================== unary */

typedef struct { bert_unop op; bert_dtype ta, to; } unctx;

static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
static inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
static inline float sigmoidf(float x) {
  /* split by sign so exp never overflows */
  if (x >= 0) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

static void unary_f32(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const unctx *c = vctx;
  float *o = (float *)ptr[0];
  const float *a = (const float *)ptr[1];
  int64_t so = st[0], sa = st[1];
#define LOOP(EXPR) for (int64_t j = 0; j < n; j++) { float x = a[j * sa]; o[j * so] = (EXPR); } break
  switch (c->op) {
    case BERT_NEG: LOOP(-x);
    case BERT_EXP: LOOP(expf(x));
    case BERT_LOG: LOOP(logf(x));
    case BERT_SQRT: LOOP(sqrtf(x));
    case BERT_RSQRT: LOOP(1.0f / sqrtf(x));
    case BERT_TANH: LOOP(tanhf(x));
    case BERT_SIGMOID: LOOP(sigmoidf(x));
    case BERT_RELU: LOOP(x > 0 ? x : 0.0f);
    case BERT_GELU: LOOP(gelu_erf(x));
    case BERT_GELU_TANH: LOOP(gelu_tanh(x));
    case BERT_ABS: LOOP(fabsf(x));
    case BERT_ERF: LOOP(erff(x));
  }
#undef LOOP
}

static void unary_i32(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const unctx *c = vctx;
  int32_t *o = (int32_t *)ptr[0];
  const int32_t *a = (const int32_t *)ptr[1];
  for (int64_t j = 0; j < n; j++) {
    int64_t x = a[j * st[1]];
    int64_t r = c->op == BERT_NEG ? -x : c->op == BERT_ABS ? (x < 0 ? -x : x) : (x > 0 ? x : 0);
    o[j * st[0]] = wrap_i32(r);
  }
}

bert_tensor *bert_unary(bert_unop op, const bert_tensor *a, bert_tensor *dst) {
  if (bert_is_vk(a) || bert_is_vk(dst)) return bert_vk_unary(op, a, dst);
  int keeps_int = op == BERT_NEG || op == BERT_ABS || op == BERT_RELU;
  bert_dtype to = (a->dtype == BERT_I32 && keeps_int) ? BERT_I32 : BERT_F32;
  bert_tensor *src = (bert_tensor *)a;
  if (to == BERT_F32 && a->dtype != BERT_F32) {   /* math on ints: convert first */
    src = bert_to_dtype(a, BERT_F32);
    if (src == NULL) return NULL;
  } else bert_tensor_retain(src);
  const bert_tensor *ins[1] = {src};
  bert_tensor *out = prepare_out(unop_names[op], dst, to, 1, ins);
  if (out != NULL) {
    const bert_tensor *ops[2] = {out, src};
    bert_iter it;
    bert_iter_init(&it, 2, ops);
    unctx c = {op, src->dtype, to};
    bert_iter_run(&it, to == BERT_F32 ? unary_f32 : unary_i32, &c);
  }
  bert_tensor_release(src);
  return out;
}
/* }====================================================== */

/* {====================================================== select-like */

typedef struct { double value; bert_dtype tm, ta, tb, to; } selctx;

static void masked_fill_row(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const selctx *c = vctx;
  for (int64_t j = 0; j < n; j++) {
    char *o = ptr[0] + j * st[0] * 4;
    double m = load(c->tm, ptr[2] + j * st[2] * 4);
    double v = m != 0 ? c->value : load(c->ta, ptr[1] + j * st[1] * 4);
    if (c->to == BERT_F32) *(float *)o = (float)v; else *(int32_t *)o = saturate_i32(v);
  }
}

bert_tensor *bert_masked_fill(const bert_tensor *a, const bert_tensor *mask, double value,
                              bert_tensor *dst) {
  char b1[160], b2[160];
  /* the mask broadcasts to a, never the other way round */
  int nd;
  int64_t shape[BERT_MAX_DIMS];
  if (bert_broadcast_shape(a->ndim, a->shape, mask->ndim, mask->shape, &nd, shape) != 0 ||
      nd != a->ndim || memcmp(shape, a->shape, (size_t)nd * sizeof(int64_t)) != 0) {
    bert_set_error("masked_fill: mask %s does not broadcast to the tensor %s",
                   bert_shape_str(b1, sizeof b1, mask->ndim, mask->shape),
                   bert_shape_str(b2, sizeof b2, a->ndim, a->shape));
    return NULL;
  }
  const bert_tensor *ins[2] = {a, mask};
  bert_tensor *out = prepare_out("masked_fill", dst, a->dtype, 2, ins);
  if (out == NULL) return NULL;
  const bert_tensor *ops[3] = {out, a, mask};
  bert_iter it;
  bert_iter_init(&it, 3, ops);
  selctx c = {value, mask->dtype, a->dtype, a->dtype, a->dtype};
  bert_iter_run(&it, masked_fill_row, &c);
  return out;
}

static void where_row(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const selctx *c = vctx;
  for (int64_t j = 0; j < n; j++) {
    char *o = ptr[0] + j * st[0] * 4;
    double m = load(c->tm, ptr[1] + j * st[1] * 4);
    double v = m != 0 ? load(c->ta, ptr[2] + j * st[2] * 4) : load(c->tb, ptr[3] + j * st[3] * 4);
    if (c->to == BERT_F32) *(float *)o = (float)v; else *(int32_t *)o = saturate_i32(v);
  }
}

bert_tensor *bert_where(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b) {
  bert_dtype to = (a->dtype == BERT_F32 || b->dtype == BERT_F32) ? BERT_F32 : BERT_I32;
  const bert_tensor *ins[3] = {cond, a, b};
  bert_tensor *out = prepare_out("where", NULL, to, 3, ins);
  if (out == NULL) return NULL;
  const bert_tensor *ops[4] = {out, cond, a, b};
  bert_iter it;
  bert_iter_init(&it, 4, ops);
  selctx c = {0, cond->dtype, a->dtype, b->dtype, to};
  bert_iter_run(&it, where_row, &c);
  return out;
}

static void fill_row(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const selctx *c = vctx;
  if (c->to == BERT_F32) {
    float v = (float)c->value, *o = (float *)ptr[0];
    for (int64_t j = 0; j < n; j++) o[j * st[0]] = v;
  } else {
    int32_t v = saturate_i32(c->value), *o = (int32_t *)ptr[0];
    for (int64_t j = 0; j < n; j++) o[j * st[0]] = v;
  }
}

int bert_fill_(bert_tensor *t, double value) {
  if (bert_is_vk(t)) return bert_vk_fill_(t, value);
  const bert_tensor *ops[1] = {t};
  bert_iter it;
  bert_iter_init(&it, 1, ops);
  selctx c = {value, t->dtype, t->dtype, t->dtype, t->dtype};
  bert_iter_run(&it, fill_row, &c);
  return 0;
}
/* }====================================================== */
