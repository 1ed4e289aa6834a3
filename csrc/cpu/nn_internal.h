/*
** Helpers shared by the nn kernels (not part of the public API).
*/
#ifndef BERT_NN_INTERNAL_H
#define BERT_NN_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX512F__
#include <immintrin.h>
#endif

#include "core/tensor.h"

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

/* Philox4x32-10 (the generator of rng.c), inline so that loops over many
** counters vectorise.  Same (seed, counter) -> same four words. */
static inline void nn_philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Keep threshold: an element is kept when its 32-bit word >= thr, which
** happens with probability 1 - p (p < 1). */
static inline uint32_t nn_keep_threshold(double p) {
  double t = p * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

#ifdef __AVX512F__
/* Sixteen Philox4x32-10 counters c .. c + 15 at once (lane l: counter c + l),
** then the multipliers of their 64 elements in stream order: element 4l + w
** is word w of counter c + l.  Bit-identical to nn_philox; ~10x faster than
** 16 scalar calls, which spend 10 rounds of two 32x32->64 multiplies each. */
static inline void nn_dropout_x16(uint64_t seed, uint64_t c, uint32_t thr, float scale, float *out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  /* counters c + l as (low word, high word), the carry into the high word per lane */
  __m512i lo = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)c), lane);
  __m512i carry = _mm512_maskz_set1_epi32(_mm512_cmplt_epu32_mask(lo, lane), 1);
  __m512i c0 = lo, c1 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)(c >> 32)), carry);
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  __m512i k0 = _mm512_set1_epi32((int)(uint32_t)seed), k1 = _mm512_set1_epi32((int)(uint32_t)(seed >> 32));
  const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u), m1 = _mm512_set1_epi32((int)0xCD9E8D57u);
  const __m512i w0 = _mm512_set1_epi32((int)0x9E3779B9u), w1 = _mm512_set1_epi32((int)0xBB67AE85u);
  for (int round = 0; round < 10; round++) {
    /* high halves of the 32x32 products: even lanes, then odd lanes, merged */
    __m512i h0 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(_mm512_mul_epu32(c0, m0), 32),
                                         _mm512_mul_epu32(_mm512_srli_epi64(c0, 32), m0));
    __m512i h2 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(_mm512_mul_epu32(c2, m1), 32),
                                         _mm512_mul_epu32(_mm512_srli_epi64(c2, 32), m1));
    __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(h2, c1), k0), n1 = _mm512_mullo_epi32(c2, m1);
    __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(h0, c3), k1), n3 = _mm512_mullo_epi32(c0, m0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 = _mm512_add_epi32(k0, w0);
    k1 = _mm512_add_epi32(k1, w1);
  }
  /* transpose to stream order: (c0, c1) and (c2, c3) interleaved per counter, then the pairs */
  const __m512i lo32 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi32 = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i lo64 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
  const __m512i hi64 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
  __m512i a = _mm512_permutex2var_epi32(c0, lo32, c1), b = _mm512_permutex2var_epi32(c2, lo32, c3);
  __m512i e = _mm512_permutex2var_epi32(c0, hi32, c1), f = _mm512_permutex2var_epi32(c2, hi32, c3);
  const __m512i words[4] = {_mm512_permutex2var_epi64(a, lo64, b), _mm512_permutex2var_epi64(a, hi64, b),
                            _mm512_permutex2var_epi64(e, lo64, f), _mm512_permutex2var_epi64(e, hi64, f)};
  const __m512i t = _mm512_set1_epi32((int)thr);
  const __m512 sv = _mm512_set1_ps(scale);
  for (int q = 0; q < 4; q++)
    _mm512_storeu_ps(out + 16 * q, _mm512_maskz_mov_ps(_mm512_cmpge_epu32_mask(words[q], t), sv));
}
#endif

/* Dropout multipliers for elements idx0 .. idx0 + n - 1 of a stream whose
** element i uses word i % 4 of counter offset + i / 4: out[j] = scale when
** kept, 0 when dropped. */
static inline void nn_dropout_row(uint64_t seed, uint64_t offset, uint64_t idx0, int64_t n,
                                  uint32_t thr, float scale, float *out) {
  int64_t j = 0;
  uint32_t r[4];
  /* leading partial block */
  if (idx0 % 4 != 0) {
    nn_philox(seed, offset + idx0 / 4, r);
    for (uint64_t w = idx0 % 4; w < 4 && j < n; w++, j++) out[j] = r[w] >= thr ? scale : 0.0f;
  }
  uint64_t c = offset + (idx0 + (uint64_t)j) / 4;
#ifdef __AVX512F__
  for (; j + 64 <= n; j += 64, c += 16) nn_dropout_x16(seed, c, thr, scale, out + j);
#endif
  /* whole blocks: four words per counter */
  for (; j + 4 <= n; j += 4, c++) {
    nn_philox(seed, c, r);
    out[j] = r[0] >= thr ? scale : 0.0f;
    out[j + 1] = r[1] >= thr ? scale : 0.0f;
    out[j + 2] = r[2] >= thr ? scale : 0.0f;
    out[j + 3] = r[3] >= thr ? scale : 0.0f;
  }
  if (j < n) {
    nn_philox(seed, c, r);
    for (int w = 0; j < n; w++, j++) out[j] = r[w] >= thr ? scale : 0.0f;
  }
}

/* exp(x) for float, vectorisable (no calls, no branches): Cody-Waite
** reduction x = n ln2 + r, |r| <= ln2 / 2, then a degree-7 Taylor polynomial;
** relative error within a few ulp.  Returns exactly 0 below -87.3 (so masked
** scores give zero probability, as expf's underflow does) and is only
** meant for x <= 0 (softmax arguments).  NaN gives NaN and +inf gives inf:
** the clamp below maps NaN to a finite value (comparisons with NaN are
** false), so the exponent arithmetic never converts NaN to an integer. */
static inline float nn_expf(float x) {
  float xc = x > -87.3f ? x : -87.3f;
  xc = xc < 88.0f ? xc : 88.0f;
  float n = xc * 1.44269504088896341f;
  n = (n + 12582912.0f) - 12582912.0f;          /* round to nearest */
  float r = xc - n * 0.693145751953125f;        /* ln2 high part */
  r = r - n * 1.428606765330187045e-06f;        /* ln2 low part */
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t e = (uint32_t)((int32_t)n + 127) << 23;   /* n in [-126, 127] */
  float scale;
  memcpy(&scale, &e, sizeof scale);
  float y = p * scale;
  y = x > 88.72f ? HUGE_VALF : y;
  y = x != x ? x : y;
  return x < -87.3f ? 0.0f : y;
}

/* {====================================================== erf and GELU */

#define INV_SQRT2 0.70710678118654752f
#define INV_SQRT2PI 0.39894228040143268f
#define SQRT_2_OVER_PI 0.79788456080286536f

/* erf(a) for a >= 0, given e = exp(-a^2): Abramowitz & Stegun 7.1.26,
** absolute error < 1.5e-7 (the Vulkan shaders' erf_approx is the same). */
static inline float nn_erf_nonneg(float a, float e) {
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  return 1.0f - p * e;
}

/* erf, vectorisable (no calls, no branches), for GELU.  t:erf() keeps
** libm's erff: near 0 this one's absolute error is large against erf(x)
** itself (6% at 1e-6), while GELU's x * (1 + erf) stays within 3e-7. */
static inline float nn_erff(float x) {
  float a = fabsf(x);
  float y = nn_erf_nonneg(a, nn_expf(-a * a));
  return x < 0 ? -y : y;
}

/* tanh(z) = 1 - 2 / (exp(2z) + 1), with the exponent kept <= 0 */
static inline float nn_tanhf(float z) {
  float a = fabsf(z);
  float e = nn_expf(-2.0f * a);
  float y = (1.0f - e) / (1.0f + e);
  return z < 0 ? -y : y;
}

/* GELU, the erf form x * Phi(x) or the tanh approximation ("gelu_new"):
** the one definition of t:gelu() and F.bias_gelu on the CPU. */
static inline float nn_gelu(float u, int tanh_mode) {
  if (tanh_mode) return 0.5f * u * (1.0f + nn_tanhf(SQRT_2_OVER_PI * (u + 0.044715f * u * u * u)));
  return 0.5f * u * (1.0f + nn_erff(u * INV_SQRT2));
}

/* d gelu(u) / du; the erf form shares one exp(-u^2 / 2) between erf and
** the Gaussian density. */
static inline float nn_gelu_grad(float u, int tanh_mode) {
  if (tanh_mode) {
    float t = nn_tanhf(SQRT_2_OVER_PI * (u + 0.044715f * u * u * u));
    return 0.5f * (1.0f + t) + 0.5f * u * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * u * u);
  }
  /* erf(u / sqrt 2) as nn_erff, with exp(-(u / sqrt 2)^2) = exp(-u^2 / 2) reused */
  float e = nn_expf(-0.5f * u * u), erf_abs = nn_erf_nonneg(fabsf(u) * INV_SQRT2, e);
  return 0.5f * (1.0f + (u < 0 ? -erf_abs : erf_abs)) + u * INV_SQRT2PI * e;
}
/* }====================================================== */

#endif
