/*
** linear on the CPU: y = x @ W^T + b, batch dims folded into one GEMM;
** backward writes straight into the gradient buffers.
*/
#include <string.h>

#include "core/autograd.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "cpu/nn_internal.h"

/* Column sums of G [R, N] into out[N] (bias gradient). */
static void column_sums(const float *G, int64_t R, int64_t N, float *out) {
  const int64_t CH = 256;
  int64_t nchunks = (N + CH - 1) / CH;
  #pragma omp parallel for schedule(static) if (R * N >= BERT_PARALLEL_MIN)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t j0 = c * CH, j1 = j0 + CH < N ? j0 + CH : N;
    float acc[256];
    for (int64_t j = j0; j < j1; j++) acc[j - j0] = 0;
    for (int64_t r = 0; r < R; r++) {
      const float *g = G + r * N;
      for (int64_t j = j0; j < j1; j++) acc[j - j0] += g[j];
    }
    for (int64_t j = j0; j < j1; j++) out[j] = acc[j - j0];
  }
}

/* x, w contiguous as in the forward; in = {x, w, b} as the caller passed them */
int cpu_linear_backward(bert_tensor *const inputs[3], const bert_tensor *x, const bert_tensor *w,
                        const bert_tensor *gout) {
  bert_tensor *xin = inputs[0], *win = inputs[1], *bin = inputs[2];
  int64_t in = w->shape[1], outf = w->shape[0];
  int64_t R = in > 0 ? bert_numel(x) / in : 0;
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
    column_sums(G, R, outf, bert_f32(db));
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
    const float *B = bert_f32(b);
    #pragma omp parallel for schedule(static) if (R * outf >= BERT_PARALLEL_MIN)
    for (int64_t r = 0; r < R; r++) memcpy(Y + r * outf, B, (size_t)outf * sizeof(float));
  }
  bert_sgemm(0, 1, R, outf, in, 1.0f, bert_f32(x), in, bert_f32(w), in, b ? 1.0f : 0.0f, Y, outf);
  return y;
}
