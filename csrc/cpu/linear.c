/*
** linear on the CPU: y = x @ W^T + b, batch dims folded into one GEMM;
** backward writes straight into the gradient buffers.
*/
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "cpu/nn_internal.h"

/* Column sums of G [R, N] (the bias gradient): each block of rows is summed
** whole into its own partial vector (contiguous, vectorised), then the
** partials are added up in block order: the same bits at any thread count. */
typedef struct {
  const float *G;
  int64_t N;
  float *partial;   /* [blocks, N] */
} colsum_job;

static void colsum_rows(void *ctx, int64_t block, int64_t lo, int64_t hi) {
  const colsum_job *j = ctx;
  const int64_t N = j->N;
  float *acc = j->partial + (size_t)block * (size_t)N;
  for (int64_t r = lo; r < hi; r++) {
    const float *g = j->G + r * N;
    #pragma omp simd
    for (int64_t k = 0; k < N; k++) acc[k] += g[k];
  }
}

static int column_sums(const float *G, int64_t R, int64_t N, float *out) {
  int64_t blocks = bert_reduce_blocks(R, bert_parallel_grain(N));
  float *partial = calloc((size_t)blocks * (size_t)N, sizeof(float));
  if (partial == NULL) {
    bert_set_error("linear backward: out of memory for %lld x %lld bias partial sums", (long long)blocks,
                   (long long)N);
    return -1;
  }
  colsum_job job = {G, N, partial};
  bert_parallel_blocks(R, bert_parallel_grain(N), colsum_rows, &job);
  bert_sum_blocks(partial, blocks, N, N, out);
  free(partial);
  return 0;
}

typedef struct {
  const float *B;
  float *Y;
  int64_t N;
} bias_rows_job;

static void bias_rows(void *ctx, int64_t lo, int64_t hi) {
  const bias_rows_job *j = ctx;
  for (int64_t r = lo; r < hi; r++) memcpy(j->Y + r * j->N, j->B, (size_t)j->N * sizeof(float));
}

/* x, w contiguous as in the forward; in = {x, w, b} as the caller passed them */
int cpu_linear_backward(bert_tensor *const inputs[3], const bert_tensor *x, const bert_tensor *w,
                        const bert_tensor *gout) {
  bert_tensor *xin = inputs[0], *win = inputs[1], *bin = inputs[2];
  int64_t in = w->shape[1], outf = w->shape[0];
  int64_t R = 1;   /* rows: x's leading dims (not numel / in, which is 0 / 0 when in == 0) */
  for (int d = 0; d < x->ndim - 1; d++) R *= x->shape[d];
  const float *G = bert_f32(gout);
  /* results go straight into the gradient buffers (GEMM beta = 1 when a
  ** gradient is already there): no temporary, no extra accumulation pass */
  int acc;
  float *dx = bert_grad_buffer(xin, &acc);
  if (dx) bert_sgemm(0, 0, R, in, outf, 1.0f, G, outf, bert_f32(w), in, acc ? 1.0f : 0.0f, dx, in);
  else if (xin && xin->requires_grad) {
    bert_tensor *t = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
    if (t == NULL) return -1;
    bert_sgemm(0, 0, R, in, outf, 1.0f, G, outf, bert_f32(w), in, 0.0f, bert_f32(t), in);
    if (bert_accumulate_grad_steal(xin, t) != 0) return -1;
  }
  float *dw = bert_grad_buffer(win, &acc);
  if (dw) bert_sgemm(1, 0, outf, in, R, 1.0f, G, outf, bert_f32(x), in, acc ? 1.0f : 0.0f, dw, in);
  else if (win && win->requires_grad) {
    bert_tensor *t = bert_tensor_empty(BERT_F32, 2, w->shape);
    if (t == NULL) return -1;
    bert_sgemm(1, 0, outf, in, R, 1.0f, G, outf, bert_f32(x), in, 0.0f, bert_f32(t), in);
    if (bert_accumulate_grad_steal(win, t) != 0) return -1;
  }
  if (bin && bin->requires_grad) {
    bert_tensor *db = bert_tensor_empty(BERT_F32, 1, &outf);
    if (db == NULL) return -1;
    if (column_sums(G, R, outf, bert_f32(db)) != 0) { bert_tensor_release(db); return -1; }
    if (bert_accumulate_grad_steal(bin, db) != 0) return -1;
  }
  return 0;
}

bert_tensor *cpu_linear(const bert_tensor *x, const bert_tensor *w, const bert_tensor *b) {
  int64_t outf = w->shape[0], in = w->shape[1];
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->ndim - 1] = outf;
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, shape);
  if (y == NULL) return NULL;
  int64_t R = in > 0 ? bert_numel(x) / in : bert_numel(y) / (outf > 0 ? outf : 1);
  float *Y = bert_f32(y);
  if (b) {
    bias_rows_job job = {bert_f32(b), Y, outf};
    bert_parallel_for(R, bert_parallel_grain(outf), bias_rows, &job);
  }
  bert_sgemm(0, 1, R, outf, in, 1.0f, bert_f32(x), in, bert_f32(w), in, b ? 1.0f : 0.0f, Y, outf);
  return y;
}
