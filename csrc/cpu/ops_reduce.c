/*
** CPU kernels of the reductions over one dimension (or all elements) and
** softmax (arguments checked by core/ops.c).
** The input is viewed as [outer, R, inner] with R the reduced dim; sums
** accumulate in double so long rows stay accurate.
*/
#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/cpu.h"

/* out shape for reducing `dim` of t (dim < 0: everything). */
static int reduced_shape(const bert_tensor *t, int dim, int keepdim, int64_t *shape) {
  int n = 0;
  for (int d = 0; d < t->ndim; d++) {
    if (dim < 0 || d == dim) { if (keepdim) shape[n++] = 1; }
    else shape[n++] = t->shape[d];
  }
  return n;
}

/* Element i as double.  (Not `xf ? xf[i] : xi[i]`: that conditional has
** type float, which rounds int32 values above 2^24.) */
static inline double elem(const float *xf, const int32_t *xi, int64_t i) {
  return xf ? (double)xf[i] : (double)xi[i];
}

typedef struct {
  bert_redop op;
  int is_ext, is_arg;
  bert_dtype to;
  int correction;
  int64_t R, inner;
  const float *xf;
  const int32_t *xi;
  bert_tensor *out, *idx;
} reduce_job;

static void reduce_range(void *ctx, int64_t lo, int64_t hi) {
  const reduce_job *j = ctx;
  const bert_redop op = j->op;
  const int is_ext = j->is_ext, is_arg = j->is_arg, correction = j->correction;
  const bert_dtype to = j->to;
  const int64_t R = j->R, inner = j->inner;
  const float *xf = j->xf;
  const int32_t *xi = j->xi;
  bert_tensor *out = j->out, *idx = j->idx;
  for (int64_t o = lo; o < hi; o++) {
    int64_t base = (o / inner) * R * inner + o % inner;
    double result = 0;
    int64_t best = 0;
    if (is_ext) {
      double bv = elem(xf, xi, base);
      int want_max = op == BERT_MAX || op == BERT_ARGMAX;
      for (int64_t r = 1; r < R && bv == bv; r++) {
        double v = elem(xf, xi, base + r * inner);
        if (v != v || (want_max ? v > bv : v < bv)) { bv = v; best = r; }
      }
      result = bv;
    } else {
      double s = 0;
      for (int64_t r = 0; r < R; r++) s += elem(xf, xi, base + r * inner);
      if (op == BERT_SUM) result = s;
      else if (op == BERT_MEAN) result = R ? s / (double)R : NAN;
      else {   /* variance, second pass around the mean */
        double mean = R ? s / (double)R : NAN, ss = 0;
        for (int64_t r = 0; r < R; r++) {
          double dv = elem(xf, xi, base + r * inner) - mean;
          ss += dv * dv;
        }
        result = R - correction > 0 ? ss / (double)(R - correction) : NAN;
      }
    }
    if (is_arg) bert_i32(out)[o] = (int32_t)best;
    else if (to == BERT_F32) bert_f32(out)[o] = (float)result;
    else   /* wrapped to int32 as the elementwise ops do; fmod first: a sum may pass 2^63 */
      bert_i32(out)[o] = (int32_t)(uint32_t)(int64_t)fmod(result, 4294967296.0);
    if (idx) bert_i32(idx)[o] = (int32_t)best;
  }
}

bert_tensor *cpu_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                        int correction, bert_tensor **indices) {
  int64_t outer, R, inner;
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  int is_arg = op == BERT_ARGMAX || op == BERT_ARGMIN;
  int is_ext = op == BERT_MAX || op == BERT_MIN || is_arg;
  bert_dtype to;
  if (is_arg) to = BERT_I32;
  else if (op == BERT_MEAN || op == BERT_VAR) to = BERT_F32;
  else to = t->dtype;

  int64_t shape[BERT_MAX_DIMS];
  int nd = reduced_shape(t, dim, keepdim, shape);
  bert_tensor *src = bert_contiguous((bert_tensor *)t);
  if (src == NULL) return NULL;
  bert_tensor *out = bert_tensor_empty(to, nd, shape);
  bert_tensor *idx = (indices && (op == BERT_MAX || op == BERT_MIN)) ?
                     bert_tensor_empty(BERT_I32, nd, shape) : NULL;
  if (out == NULL || (indices && (op == BERT_MAX || op == BERT_MIN) && idx == NULL)) {
    bert_tensor_release(out);
    bert_tensor_release(src);
    return NULL;
  }
  const float *xf = src->dtype == BERT_F32 ? bert_f32(src) : NULL;
  const int32_t *xi = src->dtype == BERT_I32 ? bert_i32(src) : NULL;
  int64_t nout = outer * inner;
  reduce_job job = {op, is_ext, is_arg, to, correction, R, inner, xf, xi, out, idx};
  bert_parallel_for(nout, bert_parallel_grain(R), reduce_range, &job);
  bert_tensor_release(src);
  if (indices) *indices = idx;
  return out;
}

typedef struct {
  int64_t R, inner;
  int log_space;
  const float *x;
  float *y;
} softmax_job;

static void softmax_range(void *ctx, int64_t lo, int64_t hi) {
  const softmax_job *j = ctx;
  const int64_t R = j->R, inner = j->inner;
  const int log_space = j->log_space;
  const float *x = j->x;
  float *y = j->y;
  for (int64_t o = lo; o < hi; o++) {
    int64_t base = (o / inner) * R * inner + o % inner;
    float mx = -INFINITY;
    for (int64_t r = 0; r < R; r++) { float v = x[base + r * inner]; if (v > mx) mx = v; }
    /* an all -inf row gives NaN, as in PyTorch: masks should use a large
    ** negative number, as Hugging Face does, not -inf */
    double sum = 0;
    for (int64_t r = 0; r < R; r++) sum += expf(x[base + r * inner] - mx);
    if (log_space) {
      float lse = mx + (float)log(sum);
      for (int64_t r = 0; r < R; r++) y[base + r * inner] = x[base + r * inner] - lse;
    } else {
      float inv = (float)(1.0 / sum);
      for (int64_t r = 0; r < R; r++) y[base + r * inner] = expf(x[base + r * inner] - mx) * inv;
    }
  }
}

bert_tensor *cpu_softmax(const bert_tensor *t, int dim, int log_space) {
  bert_tensor *src = t->dtype == BERT_F32 ? bert_contiguous((bert_tensor *)t)
                                          : bert_to_dtype(t, BERT_F32);
  if (src == NULL) return NULL;
  bert_tensor *out = bert_tensor_empty(BERT_F32, t->ndim, t->shape);
  if (out == NULL) { bert_tensor_release(src); return NULL; }
  int64_t outer, R, inner;
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  const float *x = bert_f32(src);
  float *y = bert_f32(out);
  int64_t nrows = outer * inner;
  softmax_job job = {R, inner, log_space, x, y};
  bert_parallel_for(nrows, bert_parallel_grain(R), softmax_range, &job);
  bert_tensor_release(src);
  return out;
}
