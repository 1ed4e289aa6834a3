/*
** Helpers shared by the nn kernels (not part of the public API).
*/
#ifndef BERT_NN_INTERNAL_H
#define BERT_NN_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

#endif
