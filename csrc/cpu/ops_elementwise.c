/*
** CPU kernels of the elementwise ops with NumPy broadcasting: binary
** arithmetic and comparisons, unary math and its derivatives, masked_fill,
** where, fill.  The front-ends (core/ops_elementwise.c) checked the
** arguments and prepared `out` (shape and dtype by the type rules).
** Integer results computed in int64 and wrapped to int32, as C would;
** double -> int32 conversions saturate (no undefined behaviour).
*/
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "core/iter.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

static int32_t saturate_i32(double v) {
  if (v != v) return 0;
  if (v >= 2147483647.0) return INT32_MAX;
  if (v <= -2147483648.0) return INT32_MIN;
  return (int32_t)v;
}

static int32_t wrap_i32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

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
      default: break;
    }
    char *o = ptr[0] + j * so;
    if (c->to == BERT_F32) *(float *)o = is_int ? (float)ri : (float)r;
    else *(int32_t *)o = is_int ? wrap_i32(ri) : saturate_i32(r);
  }
}

int cpu_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b, double alpha, bert_tensor *out) {
  bert_dtype to = out->dtype;
  const bert_tensor *ops[3] = {out, a, b};
  bert_iter it;
  bert_iter_init(&it, 3, ops);
  binctx c = {op, (float)alpha, alpha, a->dtype, b->dtype, to};
  int fast = to == BERT_F32 && a->dtype == BERT_F32 && b->dtype == BERT_F32 && !bert_binop_is_comparison(op);
  bert_iter_run(&it, fast ? binary_f32 : binary_generic, &c);
  return 0;
}
/* }====================================================== */

/* {====================================================== unary */

typedef struct { bert_unop op; bert_dtype ta, to; } unctx;

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
    case BERT_GELU: LOOP(nn_gelu(x, 0));
    case BERT_GELU_TANH: LOOP(nn_gelu(x, 1));
    case BERT_ABS: LOOP(fabsf(x));
    case BERT_ERF: LOOP(erff(x));
    case BERT_SILU: LOOP(x * sigmoidf(x));
    default: break;
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

int cpu_unary(bert_unop op, const bert_tensor *a, bert_tensor *out) {
  bert_dtype to = out->dtype;
  bert_tensor *src = (bert_tensor *)a;
  if (to == BERT_F32 && a->dtype != BERT_F32) {   /* math on ints: convert first */
    src = bert_to_dtype(a, BERT_F32);
    if (src == NULL) return -1;
  } else bert_tensor_retain(src);
  const bert_tensor *ops[2] = {out, src};
  bert_iter it;
  bert_iter_init(&it, 2, ops);
  unctx c = {op, src->dtype, to};
  bert_iter_run(&it, to == BERT_F32 ? unary_f32 : unary_i32, &c);
  bert_tensor_release(src);
  return 0;
}

/* dy * f'(x), elementwise; y = f(x) saves recomputing it. */
static float unary_grad(bert_unop op, float x, float y, float dy) {
  switch (op) {
    case BERT_NEG: return -dy;
    case BERT_EXP: return dy * y;
    case BERT_LOG: return dy / x;
    case BERT_SQRT: return dy * 0.5f / y;
    case BERT_RSQRT: return dy * -0.5f * y * y * y;
    case BERT_TANH: return dy * (1.0f - y * y);
    case BERT_SIGMOID: return dy * y * (1.0f - y);
    case BERT_RELU: return x > 0 ? dy : 0.0f;
    case BERT_GELU: return dy * nn_gelu_grad(x, 0);
    case BERT_GELU_TANH: return dy * nn_gelu_grad(x, 1);
    case BERT_ABS: return x > 0 ? dy : (x < 0 ? -dy : 0.0f);
    case BERT_ERF: return dy * 1.1283791670955126f * expf(-x * x);
    case BERT_SILU: {   /* d/dx x*s(x) = s + x*s*(1 - s) */
      float s = sigmoidf(x);
      return dy * s * (1.0f + x * (1.0f - s));
    }
    default: return 0.0f;
  }
}

typedef struct {
  bert_unop op;
  const float *X, *Y, *D;
  float *R;
} unary_grad_job;

static void unary_grad_range(void *ctx, int64_t lo, int64_t hi) {
  const unary_grad_job *j = ctx;
  for (int64_t k = lo; k < hi; k++) j->R[k] = unary_grad(j->op, j->X[k], j->Y[k], j->D[k]);
}

bert_tensor *cpu_unary_backward(bert_unop op, const bert_tensor *x_in, const bert_tensor *y_in,
                                const bert_tensor *dy_in) {
  bert_tensor *x = x_in->dtype == BERT_F32 ? bert_contiguous((bert_tensor *)x_in) : bert_to_dtype(x_in, BERT_F32);
  bert_tensor *y = bert_contiguous((bert_tensor *)y_in), *dy = bert_contiguous((bert_tensor *)dy_in);
  bert_tensor *dx = bert_tensor_empty(BERT_F32, dy_in->ndim, dy_in->shape);
  if (x == NULL || y == NULL || dy == NULL || dx == NULL) {
    bert_tensor_release(x); bert_tensor_release(y); bert_tensor_release(dy); bert_tensor_release(dx);
    return NULL;
  }
  const float *X = bert_f32(x), *Y = bert_f32(y), *D = bert_f32(dy);
  float *R = bert_f32(dx);
  int64_t n = bert_numel(dx);
  unary_grad_job job = {op, X, Y, D, R};
  bert_parallel_for(n, bert_parallel_grain(1), unary_grad_range, &job);
  bert_tensor_release(x); bert_tensor_release(y); bert_tensor_release(dy);
  return dx;
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

int cpu_masked_fill(const bert_tensor *a, const bert_tensor *mask, double value, bert_tensor *out) {
  const bert_tensor *ops[3] = {out, a, mask};
  bert_iter it;
  bert_iter_init(&it, 3, ops);
  selctx c = {value, mask->dtype, a->dtype, a->dtype, a->dtype};
  bert_iter_run(&it, masked_fill_row, &c);
  return 0;
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

int cpu_where(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b, bert_tensor *out) {
  bert_dtype to = out->dtype;
  const bert_tensor *ops[4] = {out, cond, a, b};
  bert_iter it;
  bert_iter_init(&it, 4, ops);
  selctx c = {0, cond->dtype, a->dtype, b->dtype, to};
  bert_iter_run(&it, where_row, &c);
  return 0;
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

int cpu_fill_(bert_tensor *t, double value) {
  const bert_tensor *ops[1] = {t};
  bert_iter it;
  bert_iter_init(&it, 1, ops);
  selctx c = {value, t->dtype, t->dtype, t->dtype, t->dtype};
  bert_iter_run(&it, fill_row, &c);
  return 0;
}
/* }====================================================== */
