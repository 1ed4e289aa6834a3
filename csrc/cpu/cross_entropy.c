/*
** cross_entropy: fused log-softmax + negative log-likelihood with
** ignore_index.  Forward keeps the per-row log-sum-exp; backward writes
** (softmax - onehot) * g in one pass per row.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

/* One pass over rows [lo, hi): forward writes lse and the row losses,
** backward d logits. */
typedef struct {
  int64_t C, ignore;
  bert_reduction red;
  float gscalar;
  const float *L, *lse, *G;
  const int32_t *Y;
  float *out, *rowloss;   /* backward: d logits; forward: lse */
} ce_job;

static void ce_backward_rows(void *ctx, int64_t lo, int64_t hi) {
  const ce_job *j = ctx;
  const int64_t C = j->C;
  for (int64_t r = lo; r < hi; r++) {
    float *d = j->out + r * C;
    if ((int64_t)j->Y[r] == j->ignore) { memset(d, 0, (size_t)C * sizeof(float)); continue; }
    float g = j->red == BERT_REDUCE_NONE ? j->G[r] : j->gscalar, m = j->lse[r];
    const float *x = j->L + r * C;
    #pragma omp simd
    for (int64_t k = 0; k < C; k++) d[k] = nn_expf(x[k] - m) * g;
    d[j->Y[r]] -= g;
  }
}

static void ce_forward_rows(void *ctx, int64_t lo, int64_t hi) {
  const ce_job *jb = ctx;
  const int64_t C = jb->C;
  float *lse = jb->out;
  for (int64_t r = lo; r < hi; r++) {
    const float *x = jb->L + r * C;
    float m = x[0];
    #pragma omp simd reduction(max:m)
    for (int64_t j = 1; j < C; j++) m = x[j] > m ? x[j] : m;
    /* float partial sums of at most 1024 terms, added up in double */
    double s = 0;
    for (int64_t j0 = 0; j0 < C; j0 += 1024) {
      int64_t j1 = j0 + 1024 < C ? j0 + 1024 : C;
      float part = 0;
      #pragma omp simd reduction(+:part)
      for (int64_t j = j0; j < j1; j++) part += nn_expf(x[j] - m);
      s += part;
    }
    lse[r] = m + (float)log(s);
    jb->rowloss[r] = (int64_t)jb->Y[r] == jb->ignore ? 0.0f : lse[r] - x[jb->Y[r]];
  }
}

/* d logits; logits, labels, lse and gout contiguous */
bert_tensor *cpu_cross_entropy_backward(const bert_tensor *logits, const bert_tensor *labels,
                                        const bert_tensor *lse_t, int64_t ignore, bert_reduction red,
                                        int64_t count, const bert_tensor *gout) {
  int64_t C = logits->shape[logits->ndim - 1], N = bert_numel(labels);
  const float *L = bert_f32(logits), *lse = bert_f32(lse_t), *G = bert_f32(gout);
  const int32_t *Y = bert_i32(labels);
  bert_tensor *dl = bert_tensor_empty(BERT_F32, logits->ndim, logits->shape);
  if (dl == NULL) return NULL;
  float *D = bert_f32(dl);
  float gscalar = red == BERT_REDUCE_NONE ? 0.0f
                : red == BERT_REDUCE_MEAN ? (count > 0 ? G[0] / (float)count : 0.0f) : G[0];
  ce_job job = {C, ignore, red, gscalar, L, lse, G, Y, D, NULL};
  bert_parallel_for(N, bert_parallel_grain(C), ce_backward_rows, &job);
  return dl;
}

bert_tensor *cpu_cross_entropy(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore,
                               bert_reduction red, int64_t count, bert_tensor **lse_out) {
  int64_t C = logits->shape[logits->ndim - 1], N = bert_numel(labels);
  const int32_t *Y = bert_i32(labels);
  bert_tensor *loss = NULL, *lse_t = bert_tensor_empty(BERT_F32, 1, &N);
  float *rowloss = malloc((size_t)(N + 1) * sizeof(float));
  if (lse_t == NULL || rowloss == NULL) {
    if (rowloss == NULL) bert_set_error("cross_entropy: out of memory");
    goto done;
  }
  float *lse = bert_f32(lse_t);
  const float *L = bert_f32(logits);
  ce_job job = {C, ignore, red, 0, L, NULL, NULL, Y, lse, rowloss};
  bert_parallel_for(N, bert_parallel_grain(C), ce_forward_rows, &job);
  if (red == BERT_REDUCE_NONE) {
    loss = bert_tensor_empty(BERT_F32, labels->ndim, labels->shape);
    if (loss == NULL) goto done;
    memcpy(bert_f32(loss), rowloss, (size_t)N * sizeof(float));
  } else {
    loss = bert_tensor_empty(BERT_F32, 0, NULL);
    if (loss == NULL) goto done;
    double total = 0;
    for (int64_t r = 0; r < N; r++) total += rowloss[r];
    if (red == BERT_REDUCE_MEAN) total = count > 0 ? total / (double)count : 0.0;
    bert_f32(loss)[0] = (float)total;
  }
  *lse_out = lse_t;
  lse_t = NULL;
done:
  free(rowloss);
  bert_tensor_release(lse_t);
  return loss;
}
