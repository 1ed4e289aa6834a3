/*
** The flash-attention tile step and the call's setup (BLAS-ready q, k, v,
** the scale, the mask as a bias), shared by attention.c (scaled dot-product
** attention) and attention_rel.c (DeBERTa's disentangled attention): the
** two differ only in how a tile of scores is formed, so each computes its
** scores S [rows x keys] and hands the tile to these functions.
**
** Forward (FlashAttention-2): per query row an online softmax over key
** tiles -- running max m and sum l, the output rescaled by exp(m_old - m)
** when the max grows -- and the output accumulated with one GEMM per tile
** (O += P V); attn_tile_finish divides by l and writes the log-sum-exp.
** Backward: P = exp(S - lse) recomputed per tile, then
**   dV += Pd^T dO,  dP = (dO V^T) * multiplier,  dS = P * (dP - D),
**   dQ += scale dS K,  dK += scale dS^T Q,
** with D = rowsum(dO * O) and Pd = P * multiplier (dropout).
**
** Everything here is static inline so that each kernel gets its own
** specialised copy (no call or callback per tile row).
*/
#ifndef BERT_CPU_ATTENTION_TILE_H
#define BERT_CPU_ATTENTION_TILE_H

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "core/backend.h"
#include "cpu/gemm.h"
#include "cpu/nn_internal.h"

/* ---- the call's setup, shared ---- */

/* Layout of q/k/v for BLAS: last dim contiguous and rows at least d apart.
** Returns a new reference to t itself or to a contiguous copy.  4-D
** [B, A, T, d] or 3-D [total, A, d] (time first). */
static inline bert_tensor *attn_blas_ready(const bert_tensor *t) {
  int last = t->ndim - 1, td = t->ndim == 4 ? 2 : 0;
  int64_t d = t->shape[last];
  int ok = (t->stride[last] == 1 || d == 1) && (t->shape[td] == 1 || t->stride[td] >= d);
  if (ok) { bert_tensor_retain((bert_tensor *)t); return (bert_tensor *)t; }
  return bert_clone(t);
}

/* Strides of batch, head and time of a BLAS-ready q, k or v (3-D: batch 0). */
static inline void attn_strides(const bert_tensor *t, int64_t s[3]) {
  int td = t->ndim == 4 ? 2 : 0;
  s[0] = t->ndim == 4 ? t->stride[0] : 0;
  s[1] = t->stride[1];
  s[2] = t->shape[td] == 1 ? t->shape[t->ndim - 1] : t->stride[td];
}

static inline float attn_scale(const bert_attention_opts *o, int64_t d) {
  return o->scale > 0 ? (float)o->scale : (float)(1.0 / sqrt((double)(d > 0 ? d : 1)));
}

/* bias = (1 - mask) * mask_value for [B, Tk] keep masks, the mask itself
** otherwise (an additive one). */
static inline void attn_mask_fill(const bert_attention_opts *o, int64_t n, float *bias) {
  const bert_tensor *m = o->mask;
  int keep = m->ndim == 2;
  float mv = o->mask_value != 0 ? (float)o->mask_value : -FLT_MAX;
  for (int64_t i = 0; i < n; i++) {
    float x = (float)bert_get_flat(m, i);
    bias[i] = keep ? (1.0f - x) * mv : x;
  }
}

/* Keys whose additive bias is at or below this are "dead" (padding): key
** tiles are trimmed to their live keys and wholly dead tiles skipped.
** Exact as long as exp(score - 10000 - rowmax) underflows, as it does in
** HF's fp32 softmax. */
#define ATTN_DEAD_BIAS (-10000.0f)

/* Per batch row b (bias row b * bstride) and key tile t of bc keys, the
** range [lo, hi) from the first to the last live key: r[b * ntiles + t]
** and r[B * ntiles + b * ntiles + t]; lo == hi when the tile is dead.  A
** batch row with no live key keeps its tiles whole (its softmax is over
** all keys).  first[b] (when first is not NULL): the first live key of
** batch row b, Tk when none. */
static inline void attn_tile_ranges(const float *bias, int64_t bstride, int64_t B, int64_t Tk, int64_t bc,
                                    int64_t ntiles, int32_t *r, int32_t *first) {
  for (int64_t b = 0; b < B; b++) {
    const float *bb = bias + b * bstride;
    int64_t f = 0;
    while (f < Tk && !(bb[f] > ATTN_DEAD_BIAS)) f++;
    if (first) first[b] = (int32_t)f;
    for (int64_t t = 0; t < ntiles; t++) {
      int64_t j0 = t * bc, j1 = j0 + bc < Tk ? j0 + bc : Tk, lo = j0, hi = j1;
      if (f < Tk) {
        while (lo < j1 && !(bb[lo] > ATTN_DEAD_BIAS)) lo++;
        while (hi > lo && !(bb[hi - 1] > ATTN_DEAD_BIAS)) hi--;
      }
      r[b * ntiles + t] = (int32_t)lo;
      r[B * ntiles + b * ntiles + t] = (int32_t)hi;
    }
  }
}

/* Dropout on the probabilities: the multiplier of (head bh = b * A + a,
** query i, key j) comes from element (bh * Tq + i) * Tk + j of the stream,
** the layout F.dropout has over a [B, A, Tq, Tk] tensor. */
typedef struct {
  int on;
  uint32_t thr;
  float keep_scale;
  uint64_t seed, offset;
  int64_t Tq, Tk;
} attn_dropout;

static inline void attn_dropout_init(attn_dropout *dr, double p, bert_stream s, int64_t Tq, int64_t Tk) {
  dr->on = p > 0;
  dr->thr = dr->on ? nn_keep_threshold(p) : 0;
  dr->keep_scale = dr->on ? (float)(1.0 / (1.0 - p)) : 1.0f;
  dr->seed = s.seed;
  dr->offset = s.offset;
  dr->Tq = Tq;
  dr->Tk = Tk;
}

/* M[i][j] (row stride ld): the multipliers of queries i0 .. i0 + br - 1 and
** keys lo .. lo + n - 1 of head bh. */
static inline void attn_tile_dropout(const attn_dropout *dr, int64_t bh, int64_t i0, int64_t br, int64_t lo,
                                     int64_t n, float *M, int64_t ld) {
  for (int64_t i = 0; i < br; i++) {
    uint64_t idx = ((uint64_t)bh * (uint64_t)dr->Tq + (uint64_t)(i0 + i)) * (uint64_t)dr->Tk + (uint64_t)lo;
    nn_dropout_row(dr->seed, dr->offset, idx, n, dr->thr, dr->keep_scale, M + i * ld);
  }
}

/* The causal mask on a tile: S[i][j] = -inf where key lo + j comes after
** query q0 + i. */
static inline void attn_tile_causal(float *S, int64_t ld, int64_t q0, int64_t br, int64_t lo, int64_t n) {
  for (int64_t i = 0; i < br; i++) {
    int64_t first = q0 + i - lo + 1;   /* the first key row i may not see */
    float *s = S + i * ld;
    for (int64_t j = first < 0 ? 0 : first; j < n; j++) s[j] = -INFINITY;
  }
}

/* One tile of the forward: S [br x n] (row stride ld) holds the scores on
** entry and the (dropped) probabilities on return; M the dropout
** multipliers or NULL; V the tile's first value row (row stride vs); O the
** rows' accumulators (row stride ldo); mrow, lrow the running max and sum.
** first: the rows' first tile, O not yet written (not even zeroed). */
static inline void attn_tile_forward(float *S, int64_t ld, int64_t br, int64_t n, const float *M,
                                     const float *V, int64_t vs, int64_t d, float *O, int64_t ldo,
                                     float *mrow, float *lrow, int first) {
  for (int64_t i = 0; i < br; i++) {
    float *s = S + i * ld;
    float mx = s[0];
    #pragma omp simd reduction(max:mx)
    for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    float mnew = mx > mrow[i] ? mx : mrow[i];
    if (mnew == -INFINITY) {   /* every key so far masked out (causal): nothing to add yet */
      for (int64_t j = 0; j < n; j++) s[j] = 0.0f;
      continue;
    }
    float alpha = expf(mrow[i] - mnew), sum = 0.0f;
    #pragma omp simd reduction(+:sum)
    for (int64_t j = 0; j < n; j++) { float e = nn_expf(s[j] - mnew); s[j] = e; sum += e; }
    lrow[i] = lrow[i] * alpha + sum;
    mrow[i] = mnew;
    if (alpha != 1.0f && !first) {
      float *o = O + i * ldo;
      for (int64_t x = 0; x < d; x++) o[x] *= alpha;
    }
    if (M) {
      const float *m = M + i * ld;
      #pragma omp simd
      for (int64_t j = 0; j < n; j++) s[j] *= m[j];
    }
  }
  bert_sgemm_tile(0, 0, br, d, n, 1.0f, S, ld, V, vs, first ? 0.0f : 1.0f, O, ldo);
}

/* Starts br rows: zero accumulators, max -inf, sum 0. */
static inline void attn_rows_start(float *O, int64_t ldo, int64_t br, int64_t d, float *mrow, float *lrow) {
  for (int64_t i = 0; i < br; i++) {
    memset(O + i * ldo, 0, (size_t)d * sizeof(float));
    mrow[i] = -INFINITY;
    lrow[i] = 0.0f;
  }
}

/* Ends br rows: O /= l, lse[i * lse_stride] = m + log l. */
static inline void attn_rows_finish(float *O, int64_t ldo, int64_t br, int64_t d, const float *mrow,
                                    const float *lrow, float *lse, int64_t lse_stride) {
  for (int64_t i = 0; i < br; i++) {
    float inv = 1.0f / lrow[i], *o = O + i * ldo;
    for (int64_t x = 0; x < d; x++) o[x] *= inv;
    lse[i * lse_stride] = mrow[i] + logf(lrow[i]);
  }
}

/* What the backward of a tile reads and writes besides S: the query rows
** (Q, dO, dQ, each with its row stride; L and D per row, contiguous) and
** the key rows (K, V, dK, dV from the tile's first key). */
typedef struct {
  const float *Q, *dO, *L, *D;
  float *dQ;
  int64_t qs, dos, dqs;
} attn_bwd_rows;

typedef struct {
  const float *K, *V;
  float *dK, *dV;
  int64_t ks, vs, dks;
} attn_bwd_keys;

/* One tile of the backward.  S [br x n] (row stride ld): the scores on
** entry, dS on return; M: the dropout multipliers or NULL (overwritten);
** dP: scratch of S's size.  Accumulates dV, dQ and dK, or writes them
** (their rows not written before): dQ when first_q, dK and dV when first_k. */
static inline void attn_tile_backward(float *S, float *M, float *dP, int64_t ld, int64_t br, int64_t n,
                                      const attn_bwd_rows *r, const attn_bwd_keys *k, float scale, int64_t d,
                                      int first_q, int first_k) {
  const float beta_q = first_q ? 0.0f : 1.0f, beta_k = first_k ? 0.0f : 1.0f;
  for (int64_t i = 0; i < br; i++) {   /* S -> P */
    float *s = S + i * ld, l = r->L[i];
    #pragma omp simd
    for (int64_t j = 0; j < n; j++) s[j] = nn_expf(s[j] - l);
  }
  if (M) {
    /* dV += Pd^T dO with Pd = P * multiplier (built in M, the multipliers kept in dP) */
    for (int64_t i = 0; i < br; i++) {
      float *m = M + i * ld, *keep = dP + i * ld;
      const float *s = S + i * ld;
      #pragma omp simd
      for (int64_t j = 0; j < n; j++) { keep[j] = m[j]; m[j] = s[j] * keep[j]; }
    }
    bert_sgemm_tile(1, 0, n, d, br, 1.0f, M, ld, r->dO, r->dos, beta_k, k->dV, k->dks);
    /* dPd = dO V^T; dP = dPd * multiplier */
    bert_sgemm_tile(0, 1, br, n, d, 1.0f, r->dO, r->dos, k->V, k->vs, 0.0f, M, ld);
    for (int64_t i = 0; i < br; i++) {
      float *s = S + i * ld, Di = r->D[i];
      const float *m = M + i * ld, *keep = dP + i * ld;
      #pragma omp simd
      for (int64_t j = 0; j < n; j++) s[j] = s[j] * (m[j] * keep[j] - Di);
    }
  } else {
    bert_sgemm_tile(1, 0, n, d, br, 1.0f, S, ld, r->dO, r->dos, beta_k, k->dV, k->dks);
    bert_sgemm_tile(0, 1, br, n, d, 1.0f, r->dO, r->dos, k->V, k->vs, 0.0f, dP, ld);
    for (int64_t i = 0; i < br; i++) {
      float *s = S + i * ld, Di = r->D[i];
      const float *g = dP + i * ld;
      #pragma omp simd
      for (int64_t j = 0; j < n; j++) s[j] = s[j] * (g[j] - Di);
    }
  }
  /* S now holds dS */
  bert_sgemm_tile(0, 0, br, d, n, scale, S, ld, k->K, k->ks, beta_q, r->dQ, r->dqs);
  bert_sgemm_tile(1, 0, n, d, br, scale, S, ld, r->Q, r->qs, beta_k, k->dK, k->dks);
}

/* D[i] = rowsum(dO * O) for n rows (row strides os, dos). */
static inline void attn_rows_dot(const float *O, int64_t os, const float *dO, int64_t dos, int64_t n, int64_t d,
                                 float *D) {
  for (int64_t i = 0; i < n; i++) {
    const float *o = O + i * os, *g = dO + i * dos;
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int64_t x = 0; x < d; x++) s += o[x] * g[x];
    D[i] = s;
  }
}

#endif
