/*
** bias_gelu: y = gelu(x + b), the FFN-up epilogue, in one pass; backward
** recomputes u = x + b and writes dx = dy * gelu'(u) with db as its column
** sums.  erf comes from a vectorisable approximation (Abramowitz & Stegun
** 7.1.26, absolute error < 1.5e-7) so the loops run in SIMD.
*/
#include <math.h>
#include <string.h>

#include "vulkan/vk.h"
#include "core/autograd.h"
#include "cpu/nn.h"
#include "cpu/nn_internal.h"

#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT2PI 0.39894228040143268f
#define SQRT_2_OVER_PI 0.79788456080286536f

static inline float erf_approx(float x) {
  float a = fabsf(x);
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  float y = 1.0f - p * nn_expf(-a * a);
  return x < 0 ? -y : y;
}

/* tanh(z) = 1 - 2 / (exp(2z) + 1), with the exponent kept <= 0 */
static inline float tanh_approx(float z) {
  float a = fabsf(z);
  float e = nn_expf(-2.0f * a);
  float y = (1.0f - e) / (1.0f + e);
  return z < 0 ? -y : y;
}

static inline float gelu_fwd(float u, int tanh_mode) {
  if (tanh_mode) return 0.5f * u * (1.0f + tanh_approx(SQRT_2_OVER_PI * (u + 0.044715f * u * u * u)));
  return 0.5f * u * (1.0f + erf_approx(u * INV_SQRT2));
}

static inline float gelu_grad(float u, int tanh_mode) {
  if (tanh_mode) {
    float t = tanh_approx(SQRT_2_OVER_PI * (u + 0.044715f * u * u * u));
    return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * u * u);
  }
  return 0.5f * (1.0f + erf_approx(u * INV_SQRT2)) + u * INV_SQRT2PI * nn_expf(-0.5f * u * u);
}

/* saved: 0 = x, 1 = b (if any); i[0] = rows, i[1] = N, i[2] = tanh mode */
static int bias_gelu_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  bert_tensor *xin = node->inputs[0], *bin = node->inputs[1];
  int64_t R = node->i[0], N = node->i[1];
  int tanh_mode = (int)node->i[2];
  bert_tensor *x = bert_node_saved(node, 0), *b = node->nsaved > 1 ? bert_node_saved(node, 1) : NULL;
  if (x == NULL || (node->nsaved > 1 && b == NULL)) return -1;
  bert_tensor *dx = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (dx == NULL) return -1;
  const float *X = bert_f32(x), *B = b ? bert_f32(b) : NULL, *G = bert_f32(gout);
  float *D = bert_f32(dx);
  #pragma omp parallel for schedule(static) if (R * N >= BERT_PARALLEL_MIN)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = X + r * N, *gr = G + r * N;
    float *dr = D + r * N;
    #pragma omp simd
    for (int64_t j = 0; j < N; j++) dr[j] = gr[j] * gelu_grad(B ? xr[j] + B[j] : xr[j], tanh_mode);
  }
  if (bin && bin->requires_grad) {
    bert_tensor *db = bert_tensor_new(BERT_F32, 1, &N);
    if (db == NULL) { bert_tensor_release(dx); return -1; }
    float *DB = bert_f32(db);
    const int64_t CH = 256;
    int64_t nchunks = (N + CH - 1) / CH;
    #pragma omp parallel for schedule(static) if (R * N >= BERT_PARALLEL_MIN)
    for (int64_t c = 0; c < nchunks; c++) {
      int64_t j0 = c * CH, j1 = j0 + CH < N ? j0 + CH : N;
      for (int64_t r = 0; r < R; r++)
        for (int64_t j = j0; j < j1; j++) DB[j] += D[r * N + j];
    }
    if (bert_accumulate_grad_steal(bin, db) != 0) { bert_tensor_release(dx); return -1; }
  }
  (void)out;
  return bert_accumulate_grad_steal(xin, dx);
}

bert_tensor *bert_bias_gelu(bert_tensor *x_in, bert_tensor *b_in, int tanh_mode) {
  if (bert_is_vk(x_in) || bert_is_vk(b_in)) return bert_vk_bias_gelu(x_in, b_in, tanh_mode);
  char s1[160], s2[160];
  if (x_in->dtype != BERT_F32 || (b_in && b_in->dtype != BERT_F32)) {
    bert_set_error("bias_gelu: expects float32 tensors, got input %s%s%s", bert_dtype_name(x_in->dtype),
                   b_in ? " and bias " : "", b_in ? bert_dtype_name(b_in->dtype) : "");
    return NULL;
  }
  if (x_in->ndim < 1) { bert_set_error("bias_gelu: input must have at least 1 dimension"); return NULL; }
  int64_t N = x_in->shape[x_in->ndim - 1];
  if (b_in && (b_in->ndim != 1 || b_in->shape[0] != N)) {
    bert_set_error("bias_gelu: bias %s does not match the last dim of input %s (expected [%lld])",
                   SHAPE(s1, b_in), SHAPE(s2, x_in), (long long)N);
    return NULL;
  }
  bert_tensor *x = bert_contiguous(x_in), *b = b_in ? bert_contiguous(b_in) : NULL, *y = NULL;
  if (x == NULL || (b_in && b == NULL)) goto done;
  y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) goto done;
  int64_t R = N > 0 ? bert_numel(x) / N : 0;
  const float *X = bert_f32(x), *B = b ? bert_f32(b) : NULL;
  float *Y = bert_f32(y);
  #pragma omp parallel for schedule(static) if (R * N >= BERT_PARALLEL_MIN)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = X + r * N;
    float *yr = Y + r * N;
    #pragma omp simd
    for (int64_t j = 0; j < N; j++) yr[j] = gelu_fwd(B ? xr[j] + B[j] : xr[j], tanh_mode);
  }
  bert_tensor *inputs[2] = {x_in, b_in};
  if (bert_needs_grad(2, inputs)) {
    bert_node *node = bert_node_new("bias_gelu", bias_gelu_backward, 2, inputs);
    if (node == NULL) { bert_tensor_release(y); y = NULL; goto done; }
    bert_node_save(node, x);
    if (b) bert_node_save(node, b);
    node->i[0] = R;
    node->i[1] = N;
    node->i[2] = tanh_mode != 0;
    bert_attach(y, node);
  }
done:
  bert_tensor_release(x);
  bert_tensor_release(b);
  return y;
}
