/*
** linear: y = x @ W^T + b, batch dims folded into one GEMM.
*/
#include <string.h>

#include "vulkan/vk.h"
#include "core/autograd.h"
#include "cpu/gemm.h"
#include "cpu/nn.h"
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

/* saved: 0 = x (contiguous), 1 = W (contiguous) */
static int linear_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  bert_tensor *xin = node->inputs[0], *win = node->inputs[1], *bin = node->inputs[2];
  bert_tensor *x = bert_node_saved(node, 0), *w = bert_node_saved(node, 1);
  if (x == NULL || w == NULL) return -1;
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
  (void)out;
  return 0;
}

bert_tensor *bert_linear(bert_tensor *x_in, bert_tensor *w_in, bert_tensor *b_in) {
  if (bert_is_vk(x_in) || bert_is_vk(w_in) || bert_is_vk(b_in)) return bert_vk_linear(x_in, w_in, b_in);
  char s1[160], s2[160];
  if (x_in->dtype != BERT_F32 || w_in->dtype != BERT_F32 || (b_in && b_in->dtype != BERT_F32)) {
    bert_set_error("linear: expects float32 tensors, got input %s, weight %s%s%s",
                   bert_dtype_name(x_in->dtype), bert_dtype_name(w_in->dtype),
                   b_in ? ", bias " : "", b_in ? bert_dtype_name(b_in->dtype) : "");
    return NULL;
  }
  if (w_in->ndim != 2) {
    bert_set_error("linear: weight must be 2-D [out x in], got %s", SHAPE(s1, w_in));
    return NULL;
  }
  if (x_in->ndim < 1) {
    bert_set_error("linear: input must have at least 1 dimension, got a scalar");
    return NULL;
  }
  int64_t outf = w_in->shape[0], in = w_in->shape[1];
  if (x_in->shape[x_in->ndim - 1] != in) {
    bert_set_error("linear: input %s and weight %s: in_features differ (%lld vs %lld)",
                   SHAPE(s1, x_in), SHAPE(s2, w_in), (long long)x_in->shape[x_in->ndim - 1],
                   (long long)in);
    return NULL;
  }
  if (b_in && (b_in->ndim != 1 || b_in->shape[0] != outf)) {
    bert_set_error("linear: bias %s does not match weight %s (expected [%lld])",
                   SHAPE(s1, b_in), SHAPE(s2, w_in), (long long)outf);
    return NULL;
  }
  bert_tensor *x = bert_contiguous(x_in), *w = bert_contiguous(w_in);
  bert_tensor *b = b_in ? bert_contiguous(b_in) : NULL, *y = NULL;
  if (x == NULL || w == NULL || (b_in && b == NULL)) goto done;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->ndim - 1] = outf;
  y = bert_tensor_empty(BERT_F32, x->ndim, shape);
  if (y == NULL) goto done;
  int64_t R = in > 0 ? bert_numel(x) / in : bert_numel(y) / (outf > 0 ? outf : 1);
  float *Y = bert_f32(y);
  if (b) {
    const float *B = bert_f32(b);
    #pragma omp parallel for schedule(static) if (R * outf >= BERT_PARALLEL_MIN)
    for (int64_t r = 0; r < R; r++) memcpy(Y + r * outf, B, (size_t)outf * sizeof(float));
  }
  bert_sgemm(0, 1, R, outf, in, 1.0f, bert_f32(x), in, bert_f32(w), in, b ? 1.0f : 0.0f, Y, outf);

  bert_tensor *inputs[3] = {x_in, w_in, b_in};
  if (bert_needs_grad(3, inputs)) {
    bert_node *node = bert_node_new("linear", linear_backward, 3, inputs);
    if (node == NULL) { bert_tensor_release(y); y = NULL; goto done; }
    bert_node_save(node, x);
    bert_node_save(node, w);
    bert_attach(y, node);
  }
done:
  bert_tensor_release(x);
  bert_tensor_release(w);
  bert_tensor_release(b);
  return y;
}
