/*
** dropout: the keep mask is a pure function of (seed, offset, element), so
** backward regenerates it instead of storing it.
*/
#include "vulkan/vk.h"
#include "core/autograd.h"
#include "core/ops.h"
#include "cpu/nn.h"
#include "cpu/nn_internal.h"

#define DROP_CHUNK 1024   /* elements per mask block (a multiple of 4) */

/* out = in * keep(i) * scale for every element, in parallel over chunks. */
static void apply_mask(const float *in, float *out, int64_t n, uint64_t seed, uint64_t offset,
                       double p) {
  uint32_t thr = nn_keep_threshold(p);
  float scale = p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p));
  int64_t nchunks = (n + DROP_CHUNK - 1) / DROP_CHUNK;
  #pragma omp parallel for schedule(static) if (n >= BERT_PARALLEL_MIN)
  for (int64_t c = 0; c < nchunks; c++) {
    float m[DROP_CHUNK];
    int64_t i0 = c * DROP_CHUNK, len = i0 + DROP_CHUNK <= n ? DROP_CHUNK : n - i0;
    if (p >= 1.0) { for (int64_t j = 0; j < len; j++) out[i0 + j] = 0.0f; continue; }
    nn_dropout_row(seed, offset, (uint64_t)i0, len, thr, scale, m);
    for (int64_t j = 0; j < len; j++) out[i0 + j] = in[i0 + j] * m[j];
  }
}

/* node->i[0] = seed, i[1] = offset; f[0] = p */
static int dropout_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  bert_tensor *xin = node->inputs[0];
  if (!xin || !xin->requires_grad) return 0;
  bert_tensor *dx = bert_tensor_empty(BERT_F32, gout->ndim, gout->shape);
  if (dx == NULL) return -1;
  apply_mask(bert_f32(gout), bert_f32(dx), bert_numel(gout), (uint64_t)node->i[0],
             (uint64_t)node->i[1], node->f[0]);
  (void)out;
  return bert_accumulate_grad_steal(xin, dx);
}

bert_tensor *bert_dropout(bert_tensor *x_in, double p, int training) {
  if (bert_is_vk(x_in)) return bert_vk_dropout(x_in, p, training);
  if (x_in->dtype != BERT_F32) {
    bert_set_error("dropout: input must be float32, got %s", bert_dtype_name(x_in->dtype));
    return NULL;
  }
  if (!(p >= 0.0 && p <= 1.0)) {
    bert_set_error("dropout: probability must be in [0, 1], got %g", p);
    return NULL;
  }
  if (p == 0.0 || !training) {
    bert_tensor_retain(x_in);
    return x_in;
  }
  bert_tensor *x = bert_contiguous(x_in);
  if (x == NULL) return NULL;
  int64_t n = bert_numel(x);
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) { bert_tensor_release(x); return NULL; }
  uint64_t seed, unused;
  bert_rng_get_state(&seed, &unused);
  uint64_t offset = bert_rng_reserve(((uint64_t)n + 3) / 4);
  apply_mask(bert_f32(x), bert_f32(y), n, seed, offset, p);
  bert_tensor_release(x);
  if (bert_needs_grad(1, &x_in)) {
    bert_node *node = bert_node_new("dropout", dropout_backward, 1, &x_in);
    if (node == NULL) { bert_tensor_release(y); return NULL; }
    node->i[0] = (int64_t)seed;
    node->i[1] = (int64_t)offset;
    node->f[0] = p;
    bert_attach(y, node);
  }
  return y;
}
