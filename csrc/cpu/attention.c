/*
** Fused scaled-dot-product attention, flash-style (FlashAttention-2 on the
** CPU).  Forward: per block of Br query rows, loop over key tiles of at
** most Bc keys with an online softmax, accumulating the output in place;
** only the output and the per-row log-sum-exp are kept.  Backward: per
** (batch, head), recompute P = exp(S - lse) tile by tile, then
** dV += P^T dO, dP = dO V^T, dS = P * (dP - D) with D = rowsum(dO * O),
** dQ += dS K * scale, dK += dS^T Q * scale.  No T x T matrix is stored.
**
** Masks become an additive per-key bias [B, Tk].  Keys whose bias is
** <= -10000 ("dead") are skipped: key tiles are trimmed to their first and
** last live key and fully dead tiles are never touched.  This is exact as
** long as exp(score - 10000 - rowmax) underflows, as it does in HF's fp32
** softmax.  A batch row with no live key is processed in full, so its
** output equals HF's (uniform over keys with finfo.min).
*/
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "cpu/nn_internal.h"

#ifndef BR
#define BR 128         /* query rows per block */
#endif
#ifndef BC
#define BC 256         /* keys per tile */
#endif
#define DEAD_BIAS (-10000.0f)

typedef struct {
  int64_t B, A, Tq, Tk, d;
  const float *q, *k, *v;
  int64_t qs[3], ks[3], vs[3];   /* strides of batch, head, time; last dim stride 1 */
  const float *bias;             /* [Bm, Tk] additive, or NULL */
  int64_t bias_bstride;          /* Tk, or 0 when the mask broadcasts over batch */
  int64_t ntiles;
  const int32_t *tile_lo, *tile_hi;   /* [B, ntiles]: live key range of each tile */
  float scale;
  double p;
  uint32_t thr;
  float keep_scale;
  uint64_t seed, offset;
} attn_ctx;

/* Layout of q/k/v for BLAS: last dim contiguous and rows at least d apart.
** Returns a new reference to t itself or to a contiguous copy. */
static bert_tensor *blas_ready(const bert_tensor *t) {
  int64_t d = t->shape[3];
  int ok = (t->stride[3] == 1 || d == 1) && (t->shape[2] == 1 || t->stride[2] >= d);
  if (ok) { bert_tensor_retain((bert_tensor *)t); return (bert_tensor *)t; }
  return bert_clone(t);
}

static void ctx_strides(const bert_tensor *t, int64_t s[3]) {
  s[0] = t->stride[0];
  s[1] = t->stride[1];
  s[2] = t->shape[2] == 1 ? t->shape[3] : t->stride[2];
}

/* Per batch and key tile, the range [lo, hi) from the first to the last
** live key; lo == hi when the whole tile is dead. */
static void tile_ranges(const float *bias, int64_t bstride, int64_t B, int64_t Tk,
                        int64_t ntiles, int32_t *r) {
  for (int64_t b = 0; b < B; b++) {
    const float *bb = bias ? bias + b * bstride : NULL;
    int any = 0;
    for (int64_t j = 0; bb && j < Tk && !any; j++) any = bb[j] > DEAD_BIAS;
    for (int64_t t = 0; t < ntiles; t++) {
      int64_t j0 = t * BC, j1 = j0 + BC < Tk ? j0 + BC : Tk, lo = j0, hi = j1;
      if (bb && any) {
        while (lo < j1 && !(bb[lo] > DEAD_BIAS)) lo++;
        while (hi > lo && !(bb[hi - 1] > DEAD_BIAS)) hi--;
      }
      r[b * ntiles + t] = (int32_t)lo;
      r[B * ntiles + b * ntiles + t] = (int32_t)hi;
    }
  }
}

/* S[br x n] = scale * Q K^T + bias for keys lo .. lo + n - 1. */
static void scores(const attn_ctx *c, const float *Q, const float *K, const float *bias,
                   int64_t br, int64_t lo, int64_t n, float *S) {
  bert_sgemm(0, 1, br, n, c->d, c->scale, Q, c->qs[2], K + lo * c->ks[2], c->ks[2], 0.0f, S, BC);
  if (bias) {
    for (int64_t i = 0; i < br; i++) {
      float *s = S + i * BC;
      for (int64_t j = 0; j < n; j++) s[j] += bias[lo + j];
    }
  }
}

/* Dropout multipliers of rows i0 .. i0 + br - 1, keys lo .. lo + n - 1 of head bh. */
static void drop_block(const attn_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t lo,
                       int64_t n, float *M) {
  for (int64_t i = 0; i < br; i++) {
    uint64_t idx = ((uint64_t)bh * (uint64_t)c->Tq + (uint64_t)(i0 + i)) * (uint64_t)c->Tk + (uint64_t)lo;
    nn_dropout_row(c->seed, c->offset, idx, n, c->thr, c->keep_scale, M + i * BC);
  }
}

static void forward_block(const attn_ctx *c, int64_t bh, int64_t i0, float *O, float *lse,
                          float *S, float *M, float *mrow, float *lrow) {
  int64_t b = bh / c->A, a = bh % c->A, d = c->d;
  int64_t br = i0 + BR <= c->Tq ? BR : c->Tq - i0;
  const float *Q = c->q + b * c->qs[0] + a * c->qs[1] + i0 * c->qs[2];
  const float *K = c->k + b * c->ks[0] + a * c->ks[1];
  const float *V = c->v + b * c->vs[0] + a * c->vs[1];
  const float *bias = c->bias ? c->bias + b * c->bias_bstride : NULL;
  float *Ob = O + (bh * c->Tq + i0) * d;
  memset(Ob, 0, (size_t)(br * d) * sizeof(float));
  for (int64_t i = 0; i < br; i++) { mrow[i] = -INFINITY; lrow[i] = 0.0f; }
  for (int64_t t = 0; t < c->ntiles; t++) {
    int64_t lo = c->tile_lo[b * c->ntiles + t], hi = c->tile_hi[b * c->ntiles + t], n = hi - lo;
    if (n <= 0) continue;
    scores(c, Q, K, bias, br, lo, n, S);
    if (c->p > 0) drop_block(c, bh, i0, br, lo, n, M);
    for (int64_t i = 0; i < br; i++) {
      float *s = S + i * BC;
      float mx = s[0];
      #pragma omp simd reduction(max:mx)
      for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
      float mnew = mx > mrow[i] ? mx : mrow[i];
      float alpha = expf(mrow[i] - mnew), sum = 0.0f;
      #pragma omp simd reduction(+:sum)
      for (int64_t j = 0; j < n; j++) { float e = nn_expf(s[j] - mnew); s[j] = e; sum += e; }
      lrow[i] = lrow[i] * alpha + sum;
      mrow[i] = mnew;
      if (alpha != 1.0f) {
        float *o = Ob + i * d;
        for (int64_t x = 0; x < d; x++) o[x] *= alpha;
      }
      if (c->p > 0) {
        const float *m = M + i * BC;
        for (int64_t j = 0; j < n; j++) s[j] *= m[j];
      }
    }
    bert_sgemm(0, 0, br, d, n, 1.0f, S, BC, V + lo * c->vs[2], c->vs[2], 1.0f, Ob, d);
  }
  for (int64_t i = 0; i < br; i++) {
    float inv = 1.0f / lrow[i], *o = Ob + i * d;
    for (int64_t x = 0; x < d; x++) o[x] *= inv;
    lse[bh * c->Tq + i0 + i] = mrow[i] + logf(lrow[i]);
  }
}

/* One (batch, head): dQ, dK, dV rows of that head (contiguous, zeroed). */
static void backward_head(const attn_ctx *c, int64_t bh, const float *O, const float *dO,
                          const float *lse, float *dQ, float *dK, float *dV, float *S, float *M,
                          float *dP, float *Dv) {
  int64_t b = bh / c->A, a = bh % c->A, d = c->d;
  const float *K = c->k + b * c->ks[0] + a * c->ks[1];
  const float *V = c->v + b * c->vs[0] + a * c->vs[1];
  const float *bias = c->bias ? c->bias + b * c->bias_bstride : NULL;
  const float *Oh = O + bh * c->Tq * d, *dOh = dO + bh * c->Tq * d, *L = lse + bh * c->Tq;
  float *dQh = dQ + bh * c->Tq * d, *dKh = dK + bh * c->Tk * d, *dVh = dV + bh * c->Tk * d;
  for (int64_t i = 0; i < c->Tq; i++) {
    float s = 0.0f;
    #pragma omp simd reduction(+:s)
    for (int64_t x = 0; x < d; x++) s += Oh[i * d + x] * dOh[i * d + x];
    Dv[i] = s;
  }
  for (int64_t i0 = 0; i0 < c->Tq; i0 += BR) {
    int64_t br = i0 + BR <= c->Tq ? BR : c->Tq - i0;
    const float *Q = c->q + b * c->qs[0] + a * c->qs[1] + i0 * c->qs[2];
    for (int64_t t = 0; t < c->ntiles; t++) {
      int64_t lo = c->tile_lo[b * c->ntiles + t], hi = c->tile_hi[b * c->ntiles + t], n = hi - lo;
      if (n <= 0) continue;
      scores(c, Q, K, bias, br, lo, n, S);
      for (int64_t i = 0; i < br; i++) {   /* S -> P */
        float *s = S + i * BC, l = L[i0 + i];
        #pragma omp simd
        for (int64_t j = 0; j < n; j++) s[j] = nn_expf(s[j] - l);
      }
      /* dV += Pd^T dO, where Pd = P * dropout multipliers (kept in M) */
      if (c->p > 0) {
        drop_block(c, bh, i0, br, lo, n, M);
        for (int64_t i = 0; i < br; i++) {
          float *m = M + i * BC;
          const float *s = S + i * BC;
          for (int64_t j = 0; j < n; j++) { float keep = m[j]; m[j] = s[j] * keep; dP[i * BC + j] = keep; }
        }
        bert_sgemm(1, 0, n, d, br, 1.0f, M, BC, dOh + i0 * d, d, 1.0f, dVh + lo * d, d);
      } else {
        bert_sgemm(1, 0, n, d, br, 1.0f, S, BC, dOh + i0 * d, d, 1.0f, dVh + lo * d, d);
      }
      /* dPd = dO V^T; with dropout dP = dPd * multiplier (saved in dP above) */
      if (c->p > 0) {
        bert_sgemm(0, 1, br, n, d, 1.0f, dOh + i0 * d, d, V + lo * c->vs[2], c->vs[2], 0.0f, M, BC);
        for (int64_t i = 0; i < br; i++) {
          float *s = S + i * BC, *m = M + i * BC, *k = dP + i * BC, Di = Dv[i0 + i];
          for (int64_t j = 0; j < n; j++) s[j] = s[j] * (m[j] * k[j] - Di);
        }
      } else {
        bert_sgemm(0, 1, br, n, d, 1.0f, dOh + i0 * d, d, V + lo * c->vs[2], c->vs[2], 0.0f, dP, BC);
        for (int64_t i = 0; i < br; i++) {
          float *s = S + i * BC, *g = dP + i * BC, Di = Dv[i0 + i];
          for (int64_t j = 0; j < n; j++) s[j] = s[j] * (g[j] - Di);
        }
      }
      /* S now holds dS */
      bert_sgemm(0, 0, br, d, n, c->scale, S, BC, K + lo * c->ks[2], c->ks[2], 1.0f, dQh + i0 * d, d);
      bert_sgemm(1, 0, n, d, br, c->scale, S, BC, Q, c->qs[2], 1.0f, dKh + lo * d, d);
    }
  }
}

/* Threads run the tile GEMMs single-threaded (OpenBLAS would otherwise
** start its own pool inside ours). */

/* Everything backward needs besides q, k, v: one malloc block (node->extra
** is released with a single free()): this header, then lse [B*A*Tq],
** bias [Bm*Tk] and the tile ranges [2*B*ntiles]. */
/* The context of one call: q, k, v made BLAS-ready, the additive bias
** and the live key ranges of each tile (recomputed by backward, so that
** nothing but the log-sum-exp is kept between the passes). */
typedef struct {
  attn_ctx c;
  bert_tensor *q, *k, *v;
  float *bias;
  int32_t *ranges;
} attn_setup;

static void setup_free(attn_setup *a) {
  bert_tensor_release(a->q);
  bert_tensor_release(a->k);
  bert_tensor_release(a->v);
  free(a->bias);
  free(a->ranges);
}

/* bias = (1 - mask) * mask_value for keep masks, the mask itself otherwise. */
static void mask_fill(const bert_attention_opts *o, int64_t n, float *bias) {
  const bert_tensor *m = o->mask;
  int keep = m->ndim == 2;
  float mv = o->mask_value != 0 ? (float)o->mask_value : -FLT_MAX;
  for (int64_t i = 0; i < n; i++) {
    float x = (float)bert_get_flat(m, i);
    bias[i] = keep ? (1.0f - x) * mv : x;
  }
}

static int setup(attn_setup *a, const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                 const bert_attention_opts *o, bert_stream s) {
  memset(a, 0, sizeof *a);
  int64_t B = q->shape[0], A = q->shape[1], Tq = q->shape[2], d = q->shape[3], Tk = k->shape[2];
  int64_t Bm = o->mask ? o->mask->shape[0] : 0, ntiles = (Tk + BC - 1) / BC;
  a->q = blas_ready(q);
  a->k = blas_ready(k);
  a->v = blas_ready(v);
  a->bias = o->mask ? malloc((size_t)(Bm * Tk + 1) * sizeof(float)) : NULL;
  a->ranges = malloc((size_t)(2 * B * ntiles + 1) * sizeof(int32_t));
  if (!a->q || !a->k || !a->v || (o->mask && !a->bias) || !a->ranges) {
    if ((o->mask && !a->bias) || !a->ranges) bert_set_error("attention: out of memory");
    setup_free(a);
    return -1;
  }
  attn_ctx *c = &a->c;
  c->B = B; c->A = A; c->Tq = Tq; c->Tk = Tk; c->d = d;
  c->q = bert_f32(a->q); c->k = bert_f32(a->k); c->v = bert_f32(a->v);
  ctx_strides(a->q, c->qs); ctx_strides(a->k, c->ks); ctx_strides(a->v, c->vs);
  c->scale = o->scale > 0 ? (float)o->scale : (float)(1.0 / sqrt((double)(d > 0 ? d : 1)));
  if (o->mask) {
    mask_fill(o, Bm * Tk, a->bias);
    c->bias_bstride = Bm == 1 ? 0 : Tk;
  }
  c->bias = a->bias;
  c->ntiles = ntiles;
  tile_ranges(a->bias, c->bias_bstride, B, Tk, ntiles, a->ranges);
  c->tile_lo = a->ranges;
  c->tile_hi = a->ranges + B * ntiles;
  c->p = o->training ? o->dropout_p : 0.0;
  if (c->p > 0) {
    c->seed = s.seed;
    c->offset = s.offset;
    c->thr = nn_keep_threshold(c->p);
    c->keep_scale = (float)(1.0 / (1.0 - c->p));
  }
  return 0;
}

/* The pool's share of backward: whole (batch, head) pairs, scratch per thread. */
typedef struct {
  const attn_ctx *c;
  const float *O, *dO, *LSE;
  float *DQ, *DK, *DV, *scratch;
  size_t per;
} backward_job;

static void backward_heads(void *p, int64_t lo, int64_t hi) {
  const backward_job *j = p;
  float *S = j->scratch + (size_t)bert_parallel_thread() * j->per;
  for (int64_t bh = lo; bh < hi; bh++)
    backward_head(j->c, bh, j->O, j->dO, j->LSE, j->DQ, j->DK, j->DV, S, S + BR * BC,
                  S + 2 * BR * BC, S + 3 * BR * BC);
}

/* The forward's share: blocks of BR query rows of one (batch, head). */
typedef struct {
  const attn_ctx *c;
  float *O, *LSE, *scratch;
  size_t per;
  int64_t nqb;
} forward_job;

static void forward_blocks(void *p, int64_t lo, int64_t hi) {
  const forward_job *j = p;
  float *S = j->scratch + (size_t)bert_parallel_thread() * j->per;
  for (int64_t it = lo; it < hi; it++)
    forward_block(j->c, it / j->nqb, (it % j->nqb) * BR, j->O, j->LSE, S, S + BR * BC,
                  S + 2 * BR * BC, S + 2 * BR * BC + BR);
}

int cpu_attention_backward(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                           const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                           const bert_tensor *lse, const bert_tensor *gout,
                           bert_tensor **dq_out, bert_tensor **dk_out, bert_tensor **dv_out) {
  attn_setup a;
  if (setup(&a, q_in, k_in, v_in, o, s) != 0) return -1;
  attn_ctx c = a.c;
  int64_t qshape[4] = {c.B, c.A, c.Tq, c.d}, kshape[4] = {c.B, c.A, c.Tk, c.d};
  bert_tensor *dq = bert_tensor_new(BERT_F32, 4, qshape);
  bert_tensor *dk = bert_tensor_new(BERT_F32, 4, kshape);
  bert_tensor *dv = bert_tensor_new(BERT_F32, 4, kshape);
  bert_tensor *oc = bert_contiguous((bert_tensor *)out);
  int rc = -1;
  if (!dq || !dk || !dv || !oc) goto done;
  int64_t BH = c.B * c.A;
  int nt = bert_parallel_width();
  size_t per = (size_t)3 * BR * BC + (size_t)c.Tq;
  float *scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention backward: out of memory"); goto done; }
  const float *O = bert_f32(oc), *dO = bert_f32(gout), *LSE = bert_f32(lse);
  float *DQ = bert_f32(dq), *DK = bert_f32(dk), *DV = bert_f32(dv);
  backward_job job = {&c, O, dO, LSE, DQ, DK, DV, scratch, per};
  bert_parallel_for(BH, 1, backward_heads, &job);
  free(scratch);
  *dq_out = dq; *dk_out = dk; *dv_out = dv;
  dq = dk = dv = NULL;
  rc = 0;
done:
  bert_tensor_release(dq);
  bert_tensor_release(dk);
  bert_tensor_release(dv);
  bert_tensor_release(oc);
  setup_free(&a);
  return rc;
}

bert_tensor *cpu_attention(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                           const bert_attention_opts *o, bert_stream s, bert_tensor **lse_out) {
  attn_setup a;
  if (setup(&a, q_in, k_in, v_in, o, s) != 0) return NULL;
  attn_ctx *c = &a.c;
  int64_t B = c->B, A = c->A, Tq = c->Tq, d = c->d, nl = B * A * Tq;
  int64_t shape[4] = {B, A, Tq, d};
  bert_tensor *out = bert_tensor_empty(BERT_F32, 4, shape), *lse = bert_tensor_empty(BERT_F32, 1, &nl);
  float *scratch = NULL;
  if (out == NULL || lse == NULL) goto fail;
  int64_t nqb = (Tq + BR - 1) / BR, items = B * A * nqb;
  int nt = bert_parallel_width();
  size_t per = (size_t)2 * BR * BC + 2 * BR;
  scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention: out of memory"); goto fail; }
  float *O = bert_f32(out), *LSE = bert_f32(lse);
  forward_job job = {c, O, LSE, scratch, per, nqb};
  bert_parallel_for(items, 1, forward_blocks, &job);
  free(scratch);
  setup_free(&a);
  *lse_out = lse;
  return out;
fail:
  free(scratch);
  setup_free(&a);
  bert_tensor_release(out);
  bert_tensor_release(lse);
  return NULL;
}
