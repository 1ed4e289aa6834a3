/*
** bias_gelu: y = gelu(x + b), the FFN-up epilogue, in one pass; backward
** recomputes u = x + b and writes dx = dy * gelu'(u) with db as its column
** sums, accumulated per thread in the same pass.  GELU and its derivative
** are nn_gelu and nn_gelu_grad (cpu/nn_internal.h), which vectorise; each
** loop is compiled once per GELU form (the form is a constant inside it).
*/
/* GCC defaults to 256-bit vectors on AVX-512 machines; these loops are
** compute-bound (a division and an exp per element): use the full width */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <math.h>
#include <stdlib.h>

#include "core/autograd.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

/* The pool's share of a pass: rows [lo, hi) of an [R, N] matrix. */
typedef struct {
  int64_t N;
  const float *X, *B, *G;
  float *Y;          /* forward: y; backward: dx */
  float *partial;    /* backward: per-block column sums of dx [blocks, N], or NULL */
  int tanh_mode;
} gelu_job;

/* dx = dy * gelu'(x + b), with this block's share of db (column sums of
** dx) accumulated in the same pass while the row is in cache. */
static inline __attribute__((always_inline)) void gelu_backward_rows_mode(const gelu_job *j, int64_t block,
                                                                          int64_t lo, int64_t hi,
                                                                          const int tanh_mode) {
  const int64_t N = j->N;
  const float *B = j->B;
  float *db = j->partial ? j->partial + (size_t)block * (size_t)N : NULL;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = j->X + r * N, *gr = j->G + r * N;
    float *dr = j->Y + r * N;
    if (B) {
      #pragma omp simd
      for (int64_t k = 0; k < N; k++) dr[k] = gr[k] * nn_gelu_grad(xr[k] + B[k], tanh_mode);
    } else {
      #pragma omp simd
      for (int64_t k = 0; k < N; k++) dr[k] = gr[k] * nn_gelu_grad(xr[k], tanh_mode);
    }
    if (db) {
      #pragma omp simd
      for (int64_t k = 0; k < N; k++) db[k] += dr[k];
    }
  }
}

static inline __attribute__((always_inline)) void gelu_forward_rows_mode(const gelu_job *j, int64_t lo,
                                                                         int64_t hi, const int tanh_mode) {
  const int64_t N = j->N;
  const float *B = j->B;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = j->X + r * N;
    float *yr = j->Y + r * N;
    if (B) {
      #pragma omp simd
      for (int64_t k = 0; k < N; k++) yr[k] = nn_gelu(xr[k] + B[k], tanh_mode);
    } else {
      #pragma omp simd
      for (int64_t k = 0; k < N; k++) yr[k] = nn_gelu(xr[k], tanh_mode);
    }
  }
}

static void gelu_backward_rows(void *p, int64_t block, int64_t lo, int64_t hi) {
  const gelu_job *j = p;
  if (j->tanh_mode) gelu_backward_rows_mode(j, block, lo, hi, 1);
  else gelu_backward_rows_mode(j, block, lo, hi, 0);
}

static void gelu_forward_rows(void *p, int64_t lo, int64_t hi) {
  const gelu_job *j = p;
  if (j->tanh_mode) gelu_forward_rows_mode(j, lo, hi, 1);
  else gelu_forward_rows_mode(j, lo, hi, 0);
}

/* in = {x, b} as the caller passed them; x, b contiguous */
int cpu_bias_gelu_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b,
                           int tanh_mode, const bert_tensor *gout) {
  bert_tensor *xin = in[0], *bin = in[1];
  int64_t N = x->shape[x->ndim - 1], R = N > 0 ? bert_numel(x) / N : 0;
  bert_tensor *dx = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (dx == NULL) return -1;
  int want_db = bin && bin->requires_grad;
  int64_t blocks = bert_reduce_blocks(R, bert_parallel_grain(N));
  float *partial = NULL;
  if (want_db && (partial = calloc((size_t)blocks * (size_t)N, sizeof(float))) == NULL) {
    bert_tensor_release(dx);
    bert_set_error("bias_gelu backward: out of memory for %lld x %lld partial sums", (long long)blocks,
                   (long long)N);
    return -1;
  }
  gelu_job job = {N, bert_f32(x), b ? bert_f32(b) : NULL, bert_f32(gout), bert_f32(dx), partial, tanh_mode};
  bert_parallel_blocks(R, bert_parallel_grain(N), gelu_backward_rows, &job);
  if (want_db) {
    bert_tensor *db = bert_tensor_empty(BERT_F32, 1, &N);
    if (db == NULL) { free(partial); bert_tensor_release(dx); return -1; }
    float *DB = bert_f32(db);
    bert_sum_blocks(partial, blocks, N, N, DB);
    free(partial);
    if (bert_accumulate_grad_steal(bin, db) != 0) { bert_tensor_release(dx); return -1; }
  }
  return bert_accumulate_grad_steal(xin, dx);
}

bert_tensor *cpu_bias_gelu(const bert_tensor *x, const bert_tensor *b, int tanh_mode) {
  int64_t N = x->shape[x->ndim - 1];
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
  int64_t R = N > 0 ? bert_numel(x) / N : 0;
  gelu_job job = {N, bert_f32(x), b ? bert_f32(b) : NULL, NULL, bert_f32(y), NULL, tanh_mode};
  bert_parallel_for(R, bert_parallel_grain(N), gelu_forward_rows, &job);
  return y;
}
