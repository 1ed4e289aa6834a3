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
#include <omp.h>
#include <cblas.h>

#include "vulkan/vk.h"
#include "core/autograd.h"
#include "cpu/gemm.h"
#include "core/ops.h"
#include "cpu/nn.h"
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
static bert_tensor *blas_ready(bert_tensor *t) {
  int64_t d = t->shape[3];
  int ok = (t->stride[3] == 1 || d == 1) && (t->shape[2] == 1 || t->stride[2] >= d);
  if (ok) { bert_tensor_retain(t); return t; }
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
static int blas_single(void) {
  if (bert_gemm_get_provider() != BERT_GEMM_OPENBLAS) return 0;
  int n = openblas_get_num_threads();
  if (n > 1) openblas_set_num_threads(1);
  return n;
}
static void blas_restore(int n) { if (n > 1) openblas_set_num_threads(n); }

/* Everything backward needs besides q, k, v: one malloc block (node->extra
** is released with a single free()): this header, then lse [B*A*Tq],
** bias [Bm*Tk] and the tile ranges [2*B*ntiles]. */
typedef struct {
  attn_ctx c;
  float *lse;
  float *bias;
  int32_t *ranges;
} attn_saved;

/* node->extra = one block: attn_saved, then lse, ranges and bias arrays;
** saved: 0 = q, 1 = k, 2 = v (BLAS-ready). */
static int attention_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  attn_saved *sv = node->extra;
  bert_tensor *q = bert_node_saved(node, 0), *k = bert_node_saved(node, 1), *v = bert_node_saved(node, 2);
  if (!q || !k || !v) return -1;
  attn_ctx c = sv->c;
  c.q = bert_f32(q); c.k = bert_f32(k); c.v = bert_f32(v);
  int64_t qshape[4] = {c.B, c.A, c.Tq, c.d}, kshape[4] = {c.B, c.A, c.Tk, c.d};
  bert_tensor *dq = bert_tensor_new(BERT_F32, 4, qshape);
  bert_tensor *dk = bert_tensor_new(BERT_F32, 4, kshape);
  bert_tensor *dv = bert_tensor_new(BERT_F32, 4, kshape);
  bert_tensor *o = bert_contiguous(out);
  int rc = -1;
  if (!dq || !dk || !dv || !o) goto done;
  int64_t BH = c.B * c.A;
  int nt = omp_get_max_threads();
  if (nt > BH) nt = (int)BH;
  if (nt < 1) nt = 1;
  size_t per = (size_t)3 * BR * BC + (size_t)c.Tq;
  float *scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention backward: out of memory"); goto done; }
  const float *O = bert_f32(o), *dO = bert_f32(gout);
  float *DQ = bert_f32(dq), *DK = bert_f32(dk), *DV = bert_f32(dv);
  int saved_threads = blas_single();
  #pragma omp parallel num_threads(nt)
  {
    float *S = scratch + (size_t)omp_get_thread_num() * per;
    #pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++)
      backward_head(&c, bh, O, dO, sv->lse, DQ, DK, DV, S, S + BR * BC, S + 2 * BR * BC,
                    S + 3 * BR * BC);
  }
  blas_restore(saved_threads);
  free(scratch);
  int e1 = bert_accumulate_grad_steal(node->inputs[0], dq);
  int e2 = bert_accumulate_grad_steal(node->inputs[1], dk);
  int e3 = bert_accumulate_grad_steal(node->inputs[2], dv);
  dq = dk = dv = NULL;
  rc = (e1 || e2 || e3) ? -1 : 0;
done:
  bert_tensor_release(dq);
  bert_tensor_release(dk);
  bert_tensor_release(dv);
  bert_tensor_release(o);
  return rc;
}

static int check_qkv(const char *name, const bert_tensor *t) {
  char s1[160];
  if (t->dtype != BERT_F32 || t->ndim != 4) {
    bert_set_error("attention: %s must be a 4-D float32 [batch x heads x seq x head_dim], got %s %s",
                   name, SHAPE(s1, t), bert_dtype_name(t->dtype));
    return -1;
  }
  return 0;
}

/* Checks the mask against [B, Tk]; returns its batch size Bm (1 or B), or -1. */
static int64_t mask_check(const bert_tensor *m, const bert_tensor *q, int64_t B, int64_t Tk) {
  char s1[160], s2[160];
  int keep = m->ndim == 2;
  int bias4 = m->ndim == 4 && m->shape[1] == 1 && m->shape[2] == 1;
  int64_t Bm = m->ndim > 0 ? m->shape[0] : 0;
  if ((!keep && !bias4) || (Bm != B && Bm != 1) || m->shape[m->ndim - 1] != Tk) {
    bert_set_error("attention: mask %s does not fit query %s with %lld keys: expected a [%lld x %lld] "
                   "keep mask or a [%lld x 1 x 1 x %lld] additive bias", SHAPE(s1, m), SHAPE(s2, q),
                   (long long)Tk, (long long)B, (long long)Tk, (long long)B, (long long)Tk);
    return -1;
  }
  if (bias4 && m->dtype != BERT_F32) {
    bert_set_error("attention: an additive mask [%lld x 1 x 1 x %lld] must be float32, got %s",
                   (long long)Bm, (long long)Tk, bert_dtype_name(m->dtype));
    return -1;
  }
  return Bm;
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

bert_tensor *bert_attention(bert_tensor *q_in, bert_tensor *k_in, bert_tensor *v_in,
                            const bert_attention_opts *o) {
  if (bert_is_vk(q_in) || bert_is_vk(k_in) || bert_is_vk(v_in)) return bert_vk_attention(q_in, k_in, v_in, o);
  char s1[160], s2[160], s3[160];
  if (check_qkv("query", q_in) || check_qkv("key", k_in) || check_qkv("value", v_in)) return NULL;
  int64_t B = q_in->shape[0], A = q_in->shape[1], Tq = q_in->shape[2], d = q_in->shape[3];
  int64_t Tk = k_in->shape[2];
  for (int i = 0; i < 4; i++) {
    int64_t want = i == 2 ? Tk : q_in->shape[i];
    if (k_in->shape[i] != want || v_in->shape[i] != want) {
      bert_set_error("attention: query %s, key %s and value %s must agree in batch, heads and "
                     "head_dim, and key and value in length", SHAPE(s1, q_in), SHAPE(s2, k_in),
                     SHAPE(s3, v_in));
      return NULL;
    }
  }
  if (Tk == 0 && Tq > 0) {
    bert_set_error("attention: no keys (key %s)", SHAPE(s1, k_in));
    return NULL;
  }
  if (!(o->dropout_p >= 0 && o->dropout_p < 1)) {
    bert_set_error("attention: dropout must be in [0, 1), got %g", o->dropout_p);
    return NULL;
  }
  int64_t Bm = 0;
  if (o->mask && (Bm = mask_check(o->mask, q_in, B, Tk)) < 0) return NULL;
  int64_t ntiles = (Tk + BC - 1) / BC;
  size_t head = (sizeof(attn_saved) + 63) / 64 * 64;
  size_t nlse = (size_t)(B * A * Tq), nbias = (size_t)(Bm * Tk), nrange = (size_t)(2 * B * ntiles);
  attn_saved *sv = malloc(head + (nlse + nbias) * sizeof(float) + nrange * sizeof(int32_t));
  bert_tensor *q = blas_ready(q_in), *k = blas_ready(k_in), *v = blas_ready(v_in), *out = NULL;
  float *scratch = NULL;
  if (sv == NULL) { bert_set_error("attention: out of memory"); goto fail; }
  if (!q || !k || !v) goto fail;
  memset(sv, 0, sizeof *sv);
  sv->lse = (float *)((char *)sv + head);
  sv->bias = o->mask ? sv->lse + nlse : NULL;
  sv->ranges = (int32_t *)(sv->lse + nlse + nbias);
  attn_ctx *c = &sv->c;
  c->B = B; c->A = A; c->Tq = Tq; c->Tk = Tk; c->d = d;
  c->q = bert_f32(q); c->k = bert_f32(k); c->v = bert_f32(v);
  ctx_strides(q, c->qs); ctx_strides(k, c->ks); ctx_strides(v, c->vs);
  c->scale = o->scale > 0 ? (float)o->scale : (float)(1.0 / sqrt((double)(d > 0 ? d : 1)));
  if (o->mask) {
    mask_fill(o, Bm * Tk, sv->bias);
    c->bias_bstride = Bm == 1 ? 0 : Tk;
  }
  c->bias = sv->bias;
  c->ntiles = ntiles;
  tile_ranges(sv->bias, c->bias_bstride, B, Tk, ntiles, sv->ranges);
  c->tile_lo = sv->ranges;
  c->tile_hi = sv->ranges + B * ntiles;
  c->p = o->training ? o->dropout_p : 0.0;
  if (c->p > 0) {
    uint64_t unused;
    bert_rng_get_state(&c->seed, &unused);
    c->offset = bert_rng_reserve(((uint64_t)(B * A * Tq) * (uint64_t)Tk + 3) / 4);
    c->thr = nn_keep_threshold(c->p);
    c->keep_scale = (float)(1.0 / (1.0 - c->p));
  }
  int64_t shape[4] = {B, A, Tq, d};
  out = bert_tensor_empty(BERT_F32, 4, shape);
  if (out == NULL) goto fail;
  int64_t nqb = (Tq + BR - 1) / BR, items = B * A * nqb;
  int nt = omp_get_max_threads();
  if (nt > items) nt = (int)items;
  if (nt < 1) nt = 1;
  size_t per = (size_t)2 * BR * BC + 2 * BR;
  scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention: out of memory"); goto fail; }
  float *O = bert_f32(out);
  int saved_threads = blas_single();
  #pragma omp parallel num_threads(nt)
  {
    float *S = scratch + (size_t)omp_get_thread_num() * per;
    #pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++)
      forward_block(c, it / nqb, (it % nqb) * BR, O, sv->lse, S, S + BR * BC, S + 2 * BR * BC,
                    S + 2 * BR * BC + BR);
  }
  blas_restore(saved_threads);
  free(scratch);
  scratch = NULL;
  bert_tensor *inputs[3] = {q_in, k_in, v_in};
  if (bert_needs_grad(3, inputs)) {
    bert_node *node = bert_node_new("attention", attention_backward, 3, inputs);
    if (node == NULL) goto fail;
    bert_node_save(node, q);
    bert_node_save(node, k);
    bert_node_save(node, v);
    c->q = c->k = c->v = NULL;
    /* the arrays move into one block owned by the node */
    node->extra = sv;
    sv = NULL;
    bert_attach(out, node);
  }
  bert_tensor_release(q);
  bert_tensor_release(k);
  bert_tensor_release(v);
  free(sv);
  return out;
fail:
  free(scratch);
  free(sv);
  bert_tensor_release(q);
  bert_tensor_release(k);
  bert_tensor_release(v);
  bert_tensor_release(out);
  return NULL;
}
