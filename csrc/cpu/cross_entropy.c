/*
** cross_entropy: fused log-softmax + negative log-likelihood with
** ignore_index.  Forward keeps the per-row log-sum-exp; backward writes
** (softmax - onehot) * g in one pass per row.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan/vk.h"
#include "core/autograd.h"
#include "cpu/nn.h"
#include "cpu/nn_internal.h"

/* saved: 0 = logits (contiguous), 1 = labels (contiguous)
** extra = lse[N]; i[0] = N, i[1] = C, i[2] = ignore_index, i[3] = reduction,
** i[4] = number of counted rows */
static int cross_entropy_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  bert_tensor *lin = node->inputs[0];
  if (!lin || !lin->requires_grad) return 0;
  bert_tensor *logits = bert_node_saved(node, 0), *labels = bert_node_saved(node, 1);
  if (logits == NULL || labels == NULL) return -1;
  int64_t N = node->i[0], C = node->i[1], ignore = node->i[2], count = node->i[4];
  bert_reduction red = (bert_reduction)node->i[3];
  const float *L = bert_f32(logits), *lse = node->extra, *G = bert_f32(gout);
  const int32_t *Y = bert_i32(labels);
  bert_tensor *dl = bert_tensor_empty(BERT_F32, logits->ndim, logits->shape);
  if (dl == NULL) return -1;
  float *D = bert_f32(dl);
  float gscalar = red == BERT_REDUCE_NONE ? 0.0f
                : red == BERT_REDUCE_MEAN ? (count > 0 ? G[0] / (float)count : 0.0f) : G[0];
  #pragma omp parallel for schedule(static) if (N * C >= BERT_PARALLEL_MIN)
  for (int64_t r = 0; r < N; r++) {
    float *d = D + r * C;
    if ((int64_t)Y[r] == ignore) { memset(d, 0, (size_t)C * sizeof(float)); continue; }
    float g = red == BERT_REDUCE_NONE ? G[r] : gscalar, m = lse[r];
    const float *x = L + r * C;
    #pragma omp simd
    for (int64_t j = 0; j < C; j++) d[j] = nn_expf(x[j] - m) * g;
    d[Y[r]] -= g;
  }
  (void)out;
  return bert_accumulate_grad_steal(lin, dl);
}

bert_tensor *bert_cross_entropy(bert_tensor *l_in, bert_tensor *y_in, int64_t ignore,
                                bert_reduction red) {
  if (bert_is_vk(l_in) || bert_is_vk(y_in)) return bert_vk_cross_entropy(l_in, y_in, ignore, (int)red);
  char s1[160], s2[160];
  if (l_in->dtype != BERT_F32) {
    bert_set_error("cross_entropy: logits must be float32, got %s", bert_dtype_name(l_in->dtype));
    return NULL;
  }
  if (y_in->dtype != BERT_I32) {
    bert_set_error("cross_entropy: labels must be int32, got %s", bert_dtype_name(y_in->dtype));
    return NULL;
  }
  int same = l_in->ndim >= 1 && y_in->ndim == l_in->ndim - 1;
  for (int d = 0; same && d < y_in->ndim; d++) same = y_in->shape[d] == l_in->shape[d];
  if (!same) {
    bert_set_error("cross_entropy: logits %s and labels %s: labels must have the logits' shape "
                   "without the class dim", SHAPE(s1, l_in), SHAPE(s2, y_in));
    return NULL;
  }
  int64_t C = l_in->shape[l_in->ndim - 1];
  if (C == 0) { bert_set_error("cross_entropy: logits %s have no classes", SHAPE(s1, l_in)); return NULL; }
  bert_tensor *logits = bert_contiguous(l_in), *labels = bert_contiguous(y_in), *loss = NULL;
  float *lse = NULL, *rowloss = NULL;
  if (logits == NULL || labels == NULL) goto done;
  int64_t N = bert_numel(labels), count = 0;
  const int32_t *Y = bert_i32(labels);
  for (int64_t r = 0; r < N; r++) {
    if ((int64_t)Y[r] == ignore) continue;
    if (Y[r] < 0 || Y[r] >= C) {
      bert_set_error("cross_entropy: label %d at position %lld is out of range for %lld classes "
                     "(valid: 0..%lld, or ignore_index %lld)", (int)Y[r], (long long)r + 1,
                     (long long)C, (long long)C - 1, (long long)ignore);
      goto done;
    }
    count++;
  }
  lse = malloc((size_t)(N + 1) * sizeof(float));
  rowloss = malloc((size_t)(N + 1) * sizeof(float));
  if (lse == NULL || rowloss == NULL) { bert_set_error("cross_entropy: out of memory"); goto done; }
  const float *L = bert_f32(logits);
  #pragma omp parallel for schedule(static) if (N * C >= BERT_PARALLEL_MIN)
  for (int64_t r = 0; r < N; r++) {
    const float *x = L + r * C;
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
    rowloss[r] = (int64_t)Y[r] == ignore ? 0.0f : lse[r] - x[Y[r]];
  }
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
  if (bert_needs_grad(1, &l_in)) {
    bert_tensor *inputs[2] = {l_in, NULL};
    bert_node *node = bert_node_new("cross_entropy", cross_entropy_backward, 2, inputs);
    if (node == NULL) { bert_tensor_release(loss); loss = NULL; goto done; }
    bert_node_save(node, logits);
    bert_node_save(node, labels);
    node->i[0] = N; node->i[1] = C; node->i[2] = ignore; node->i[3] = red; node->i[4] = count;
    node->extra = lse;
    lse = NULL;
    bert_attach(loss, node);
  }
done:
  free(lse);
  free(rowloss);
  bert_tensor_release(logits);
  bert_tensor_release(labels);
  return loss;
}
