/*
** embedding: rows of weight gathered by int32 ids; backward adds the
** output gradient rows into the weight's gradient (in place when it
** exists, else a dense [V, H] one), threads owning disjoint column ranges
** (no races, deterministic).
*/
#include <string.h>

#include "vulkan/vk.h"
#include "core/autograd.h"
#include "cpu/nn.h"
#include "cpu/nn_internal.h"

/* saved: 0 = ids (contiguous); i[0] = V, i[1] = H */
static int embedding_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  bert_tensor *win = node->inputs[1];
  if (!win || !win->requires_grad) return 0;
  bert_tensor *ids = bert_node_saved(node, 0);
  if (ids == NULL) return -1;
  int64_t V = node->i[0], H = node->i[1], n = bert_numel(ids);
  /* When the weight already has a gradient (the tied MLM decoder wrote
  ** one, or an earlier step's is being accumulated) add the rows into it
  ** in place: no dense [V, H] temporary to zero and add. */
  bert_tensor *acc = win->grad, *dw = NULL;
  int inplace = acc && acc->dtype == BERT_F32 && acc->ndim == 2 && acc->shape[0] == V &&
                acc->shape[1] == H && (acc->stride[1] == 1 || H == 1) && acc->stride[0] >= H;
  int64_t ld = inplace ? acc->stride[0] : H;
  if (!inplace) {
    int64_t shape[2] = {V, H};
    if ((dw = bert_tensor_new(BERT_F32, 2, shape)) == NULL) return -1;
  }
  const int32_t *I = bert_i32(ids);
  const float *G = bert_f32(gout);
  float *DW = bert_f32(inplace ? acc : dw);
  const int64_t CH = 64;
  int64_t nchunks = (H + CH - 1) / CH;
  #pragma omp parallel for schedule(static) if (n * H >= BERT_PARALLEL_MIN)
  for (int64_t c = 0; c < nchunks; c++) {
    int64_t j0 = c * CH, j1 = j0 + CH < H ? j0 + CH : H;
    for (int64_t t = 0; t < n; t++) {
      float *d = DW + (int64_t)I[t] * ld;
      const float *g = G + t * H;
      for (int64_t j = j0; j < j1; j++) d[j] += g[j];
    }
  }
  (void)out;
  if (inplace) { bert_bump_version(acc); return 0; }
  return bert_accumulate_grad_steal(win, dw);
}

bert_tensor *bert_embedding(bert_tensor *ids_in, bert_tensor *w_in) {
  if (bert_is_vk(ids_in) || bert_is_vk(w_in)) return bert_vk_embedding(ids_in, w_in);
  char s1[160];
  if (ids_in->dtype != BERT_I32) {
    bert_set_error("embedding: ids must be int32, got %s", bert_dtype_name(ids_in->dtype));
    return NULL;
  }
  if (w_in->dtype != BERT_F32 || w_in->ndim != 2) {
    bert_set_error("embedding: weight must be a 2-D float32 [num_embeddings x dim], got %s %s",
                   SHAPE(s1, w_in), bert_dtype_name(w_in->dtype));
    return NULL;
  }
  if (ids_in->ndim + 1 > BERT_MAX_DIMS) {
    bert_set_error("embedding: ids have too many dimensions (%d)", ids_in->ndim);
    return NULL;
  }
  int64_t V = w_in->shape[0], H = w_in->shape[1];
  bert_tensor *ids = bert_contiguous(ids_in), *w = bert_contiguous(w_in), *y = NULL;
  if (ids == NULL || w == NULL) goto done;
  int64_t n = bert_numel(ids);
  const int32_t *I = bert_i32(ids);
  for (int64_t t = 0; t < n; t++) {
    if (I[t] < 0 || I[t] >= V) {
      bert_set_error("embedding: id %d at position %lld is out of range for %lld embeddings "
                     "(valid ids are 0..%lld)", (int)I[t], (long long)t + 1, (long long)V,
                     (long long)V - 1);
      goto done;
    }
  }
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof(int64_t));
  shape[ids->ndim] = H;
  y = bert_tensor_empty(BERT_F32, ids->ndim + 1, shape);
  if (y == NULL) goto done;
  const float *W = bert_f32(w);
  float *Y = bert_f32(y);
  #pragma omp parallel for schedule(static) if (n * H >= BERT_PARALLEL_MIN)
  for (int64_t t = 0; t < n; t++) memcpy(Y + t * H, W + (int64_t)I[t] * H, (size_t)H * sizeof(float));
  bert_tensor *inputs[2] = {NULL, w_in};
  if (bert_needs_grad(2, inputs)) {
    bert_node *node = bert_node_new("embedding", embedding_backward, 2, inputs);
    if (node == NULL) { bert_tensor_release(y); y = NULL; goto done; }
    bert_node_save(node, ids);
    node->i[0] = V;
    node->i[1] = H;
    bert_attach(y, node);
  }
done:
  bert_tensor_release(ids);
  bert_tensor_release(w);
  return y;
}
