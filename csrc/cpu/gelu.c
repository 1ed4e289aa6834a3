/*
** bias_gelu: y = gelu(x + b), the FFN-up epilogue, in one pass; backward
** recomputes u = x + b and writes dx = dy * gelu'(u) with db as its column
** sums.  erf comes from a vectorisable approximation (Abramowitz & Stegun
** 7.1.26, absolute error < 1.5e-7) so the loops run in SIMD.
*/
#include <math.h>
#include <string.h>

#include "core/autograd.h"
#include "cpu/cpu.h"
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

/* in = {x, b} as the caller passed them; x, b contiguous */
int cpu_bias_gelu_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b,
                           int tanh_mode, const bert_tensor *gout) {
  bert_tensor *xin = in[0], *bin = in[1];
  int64_t N = x->shape[x->ndim - 1], R = N > 0 ? bert_numel(x) / N : 0;
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
  return bert_accumulate_grad_steal(xin, dx);
}

bert_tensor *cpu_bias_gelu(const bert_tensor *x, const bert_tensor *b, int tanh_mode) {
  int64_t N = x->shape[x->ndim - 1];
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
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
  return y;
}
