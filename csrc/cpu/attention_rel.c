/*
** DeBERTa's disentangled attention, fused and flash-style like attention.c:
**
**   S(i, j) = scale * (q_i . k_j + q_i . Kr[row(i, j)] + k_j . Qr[row(i, j)]) + bias_j
**
** q, k, v [B, A, T, d]; Kr, Qr [A, R, d]: the relative-position table
** projected by the key and query projections (c2p and p2c; either may be
** absent); row [Tq, Tk] int32: the table row query i and key j read
** (DeBERTa's clamp(span + bucket(i - j))).  Per (batch, head) the kernel
** forms C2P = Q Kr^T [block x R] and P2C = K Qr^T [Tk x R] with two GEMMs
** and gathers from them inside each score tile, so no [B, A, T, T] score,
** bias or probability tensor exists, forward or backward: memory stays
** O(T * R) per thread.  Softmax is online over key tiles; only the output
** and the per-row log-sum-exp are kept.  Backward recomputes P tile by
** tile (as attention.c), and scatters dS into dC2P / dP2C by row, giving
**   dQ += scale dC2P Kr,  dKr += scale dC2P^T Q,
**   dK += scale dP2C Qr,  dQr += scale dP2C^T K.
** Kr and Qr are shared over the batch: each thread sums its own copy of
** their gradients, added together at the end.
**
** Masks and dead-key skipping are attention.c's: a [B, Tk] keep mask
** becomes an additive bias; fully padded key tiles are skipped.  Dropout on
** the probabilities uses the same Philox stream layout as attention.c.
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

#define RBR 64          /* query rows per block */
#define RBC 128         /* keys per tile */
#define RDEAD (-10000.0f)

typedef struct {
  int64_t B, A, Tq, Tk, d;
  int64_t R, Rfull, r0;               /* rows r0 .. r0 + R - 1 of the Rfull-row tables are used */
  const float *q, *k, *v, *kr, *qr;   /* kr, qr [A, Rfull, d] contiguous, or NULL */
  int64_t qs[3], ks[3], vs[3];        /* strides of batch, head, time */
  const int32_t *rows;                /* [Tq, Tk] */
  const float *bias;                  /* [Bm, Tk] additive, or NULL */
  int64_t bias_bstride;
  int64_t ntiles;
  const int32_t *tile_lo, *tile_hi;   /* [B, ntiles] live key range of each tile */
  float scale;
  double p;
  uint32_t thr;
  float keep_scale;
  uint64_t seed, offset;
} rel_ctx;

/* the last dim contiguous and rows at least d apart, else a contiguous copy */
static bert_tensor *rel_blas_ready(bert_tensor *t) {
  int64_t d = t->shape[t->ndim - 1];
  int ok = t->stride[t->ndim - 1] == 1 && (t->shape[t->ndim - 2] == 1 || t->stride[t->ndim - 2] >= d);
  if (ok && t->ndim == 4) { bert_tensor_retain(t); return t; }
  return bert_contiguous(t);
}

static void rel_strides(const bert_tensor *t, int64_t s[3]) {
  s[0] = t->stride[0];
  s[1] = t->stride[1];
  s[2] = t->shape[2] == 1 ? t->shape[3] : t->stride[2];
}

static void rel_tile_ranges(const rel_ctx *c, int32_t *r) {
  for (int64_t b = 0; b < c->B; b++) {
    const float *bb = c->bias ? c->bias + b * c->bias_bstride : NULL;
    int any = 0;
    for (int64_t j = 0; bb && j < c->Tk && !any; j++) any = bb[j] > RDEAD;
    for (int64_t t = 0; t < c->ntiles; t++) {
      int64_t j0 = t * RBC, j1 = j0 + RBC < c->Tk ? j0 + RBC : c->Tk, lo = j0, hi = j1;
      if (bb && any) {
        while (lo < j1 && !(bb[lo] > RDEAD)) lo++;
        while (hi > lo && !(bb[hi - 1] > RDEAD)) hi--;
      }
      r[b * c->ntiles + t] = (int32_t)lo;
      r[c->B * c->ntiles + b * c->ntiles + t] = (int32_t)hi;
    }
  }
}

/* S[br x n] = scale * (Q K^T + C2P gathered + P2C gathered) + bias, keys lo .. lo + n - 1 */
static void rel_scores(const rel_ctx *c, const float *Q, const float *K, const float *bias,
                       const float *C2P, const float *P2C, int64_t i0, int64_t br, int64_t lo,
                       int64_t n, float *S) {
  bert_sgemm(0, 1, br, n, c->d, c->scale, Q, c->qs[2], K + lo * c->ks[2], c->ks[2], 0.0f, S, RBC);
  int64_t R = c->R, r0 = c->r0;
  for (int64_t i = 0; i < br; i++) {
    float *s = S + i * RBC;
    const int32_t *row = c->rows + (i0 + i) * c->Tk + lo;
    if (C2P) {
      const float *cp = C2P + i * R;
      for (int64_t j = 0; j < n; j++) s[j] += c->scale * cp[row[j] - r0];
    }
    if (P2C) {
      const float *pc = P2C + lo * R;
      for (int64_t j = 0; j < n; j++) s[j] += c->scale * pc[j * R + row[j] - r0];
    }
    if (bias) {
      for (int64_t j = 0; j < n; j++) s[j] += bias[lo + j];
    }
  }
}

static void rel_drop_block(const rel_ctx *c, int64_t bh, int64_t i0, int64_t br, int64_t lo,
                           int64_t n, float *M) {
  for (int64_t i = 0; i < br; i++) {
    uint64_t idx = ((uint64_t)bh * (uint64_t)c->Tq + (uint64_t)(i0 + i)) * (uint64_t)c->Tk + (uint64_t)lo;
    nn_dropout_row(c->seed, c->offset, idx, n, c->thr, c->keep_scale, M + i * RBC);
  }
}

/* One (batch, head): O rows and lse.  Scratch: S, M [RBR x RBC], mrow, lrow
** [RBR], C2P [RBR x R], P2C [Tk x R]. */
static void rel_forward_head(const rel_ctx *c, int64_t bh, float *O, float *lse, float *S, float *M,
                             float *mrow, float *lrow, float *C2P, float *P2C) {
  int64_t b = bh / c->A, a = bh % c->A, d = c->d, R = c->R;
  const float *Q0 = c->q + b * c->qs[0] + a * c->qs[1];
  const float *K = c->k + b * c->ks[0] + a * c->ks[1];
  const float *V = c->v + b * c->vs[0] + a * c->vs[1];
  const float *Kr = c->kr ? c->kr + (a * c->Rfull + c->r0) * d : NULL;
  const float *Qr = c->qr ? c->qr + (a * c->Rfull + c->r0) * d : NULL;
  const float *bias = c->bias ? c->bias + b * c->bias_bstride : NULL;
  if (Qr) bert_sgemm(0, 1, c->Tk, R, d, 1.0f, K, c->ks[2], Qr, d, 0.0f, P2C, R);
  for (int64_t i0 = 0; i0 < c->Tq; i0 += RBR) {
    int64_t br = i0 + RBR <= c->Tq ? RBR : c->Tq - i0;
    const float *Q = Q0 + i0 * c->qs[2];
    if (Kr) bert_sgemm(0, 1, br, R, d, 1.0f, Q, c->qs[2], Kr, d, 0.0f, C2P, R);
    float *Ob = O + (bh * c->Tq + i0) * d;
    memset(Ob, 0, (size_t)(br * d) * sizeof(float));
    for (int64_t i = 0; i < br; i++) { mrow[i] = -INFINITY; lrow[i] = 0.0f; }
    for (int64_t t = 0; t < c->ntiles; t++) {
      int64_t lo = c->tile_lo[b * c->ntiles + t], hi = c->tile_hi[b * c->ntiles + t], n = hi - lo;
      if (n <= 0) continue;
      rel_scores(c, Q, K, bias, Kr ? C2P : NULL, Qr ? P2C : NULL, i0, br, lo, n, S);
      if (c->p > 0) rel_drop_block(c, bh, i0, br, lo, n, M);
      for (int64_t i = 0; i < br; i++) {
        float *s = S + i * RBC;
        float mx = s[0];
        for (int64_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
        float mnew = mx > mrow[i] ? mx : mrow[i];
        float alpha = expf(mrow[i] - mnew), sum = 0.0f;
        for (int64_t j = 0; j < n; j++) { float e = nn_expf(s[j] - mnew); s[j] = e; sum += e; }
        lrow[i] = lrow[i] * alpha + sum;
        mrow[i] = mnew;
        if (alpha != 1.0f) {
          float *o = Ob + i * d;
          for (int64_t x = 0; x < d; x++) o[x] *= alpha;
        }
        if (c->p > 0) {
          const float *m = M + i * RBC;
          for (int64_t j = 0; j < n; j++) s[j] *= m[j];
        }
      }
      bert_sgemm(0, 0, br, d, n, 1.0f, S, RBC, V + lo * c->vs[2], c->vs[2], 1.0f, Ob, d);
    }
    for (int64_t i = 0; i < br; i++) {
      float inv = 1.0f / lrow[i], *o = Ob + i * d;
      for (int64_t x = 0; x < d; x++) o[x] *= inv;
      lse[bh * c->Tq + i0 + i] = mrow[i] + logf(lrow[i]);
    }
  }
}

/* One (batch, head) backward.  dQ, dK, dV rows of the head (zeroed);
** dKr, dQr this thread's [A, R, d] sums (or NULL). */
static void rel_backward_head(const rel_ctx *c, int64_t bh, const float *O, const float *dO,
                              const float *lse, float *dQ, float *dK, float *dV, float *dKr,
                              float *dQr, float *S, float *M, float *dP, float *Dv, float *C2P,
                              float *dC2P, float *P2C, float *dP2C) {
  int64_t b = bh / c->A, a = bh % c->A, d = c->d, R = c->R, r0 = c->r0;
  const float *Q0 = c->q + b * c->qs[0] + a * c->qs[1];
  const float *K = c->k + b * c->ks[0] + a * c->ks[1];
  const float *V = c->v + b * c->vs[0] + a * c->vs[1];
  const float *Kr = c->kr ? c->kr + (a * c->Rfull + c->r0) * d : NULL;
  const float *Qr = c->qr ? c->qr + (a * c->Rfull + c->r0) * d : NULL;
  const float *bias = c->bias ? c->bias + b * c->bias_bstride : NULL;
  const float *Oh = O + bh * c->Tq * d, *dOh = dO + bh * c->Tq * d, *L = lse + bh * c->Tq;
  float *dQh = dQ + bh * c->Tq * d, *dKh = dK + bh * c->Tk * d, *dVh = dV + bh * c->Tk * d;
  for (int64_t i = 0; i < c->Tq; i++) {
    float s = 0.0f;
    for (int64_t x = 0; x < d; x++) s += Oh[i * d + x] * dOh[i * d + x];
    Dv[i] = s;
  }
  if (Qr) {
    bert_sgemm(0, 1, c->Tk, R, d, 1.0f, K, c->ks[2], Qr, d, 0.0f, P2C, R);
    memset(dP2C, 0, (size_t)(c->Tk * R) * sizeof(float));
  }
  for (int64_t i0 = 0; i0 < c->Tq; i0 += RBR) {
    int64_t br = i0 + RBR <= c->Tq ? RBR : c->Tq - i0;
    const float *Q = Q0 + i0 * c->qs[2];
    if (Kr) {
      bert_sgemm(0, 1, br, R, d, 1.0f, Q, c->qs[2], Kr, d, 0.0f, C2P, R);
      memset(dC2P, 0, (size_t)(br * R) * sizeof(float));
    }
    for (int64_t t = 0; t < c->ntiles; t++) {
      int64_t lo = c->tile_lo[b * c->ntiles + t], hi = c->tile_hi[b * c->ntiles + t], n = hi - lo;
      if (n <= 0) continue;
      rel_scores(c, Q, K, bias, Kr ? C2P : NULL, Qr ? P2C : NULL, i0, br, lo, n, S);
      for (int64_t i = 0; i < br; i++) {   /* S -> P */
        float *s = S + i * RBC, l = L[i0 + i];
        for (int64_t j = 0; j < n; j++) s[j] = nn_expf(s[j] - l);
      }
      if (c->p > 0) {
        rel_drop_block(c, bh, i0, br, lo, n, M);
        for (int64_t i = 0; i < br; i++) {
          float *m = M + i * RBC;
          const float *s = S + i * RBC;
          for (int64_t j = 0; j < n; j++) { float keep = m[j]; m[j] = s[j] * keep; dP[i * RBC + j] = keep; }
        }
        bert_sgemm(1, 0, n, d, br, 1.0f, M, RBC, dOh + i0 * d, d, 1.0f, dVh + lo * d, d);
        bert_sgemm(0, 1, br, n, d, 1.0f, dOh + i0 * d, d, V + lo * c->vs[2], c->vs[2], 0.0f, M, RBC);
        for (int64_t i = 0; i < br; i++) {
          float *s = S + i * RBC, *m = M + i * RBC, *k = dP + i * RBC, Di = Dv[i0 + i];
          for (int64_t j = 0; j < n; j++) s[j] = s[j] * (m[j] * k[j] - Di);
        }
      } else {
        bert_sgemm(1, 0, n, d, br, 1.0f, S, RBC, dOh + i0 * d, d, 1.0f, dVh + lo * d, d);
        bert_sgemm(0, 1, br, n, d, 1.0f, dOh + i0 * d, d, V + lo * c->vs[2], c->vs[2], 0.0f, dP, RBC);
        for (int64_t i = 0; i < br; i++) {
          float *s = S + i * RBC, *g = dP + i * RBC, Di = Dv[i0 + i];
          for (int64_t j = 0; j < n; j++) s[j] = s[j] * (g[j] - Di);
        }
      }
      /* S holds dS: the content terms, then the relative ones scattered by row */
      bert_sgemm(0, 0, br, d, n, c->scale, S, RBC, K + lo * c->ks[2], c->ks[2], 1.0f, dQh + i0 * d, d);
      bert_sgemm(1, 0, n, d, br, c->scale, S, RBC, Q, c->qs[2], 1.0f, dKh + lo * d, d);
      for (int64_t i = 0; i < br; i++) {
        const float *g = S + i * RBC;
        const int32_t *row = c->rows + (i0 + i) * c->Tk + lo;
        if (Kr) { float *dc = dC2P + i * R; for (int64_t j = 0; j < n; j++) dc[row[j] - r0] += g[j]; }
        if (Qr) { float *dp = dP2C + lo * R; for (int64_t j = 0; j < n; j++) dp[j * R + row[j] - r0] += g[j]; }
      }
    }
    if (Kr) {
      bert_sgemm(0, 0, br, d, R, c->scale, dC2P, R, Kr, d, 1.0f, dQh + i0 * d, d);
      bert_sgemm(1, 0, R, d, br, c->scale, dC2P, R, Q, c->qs[2], 1.0f, dKr + (a * c->Rfull + c->r0) * d, d);
    }
  }
  if (Qr) {
    bert_sgemm(0, 0, c->Tk, d, R, c->scale, dP2C, R, Qr, d, 1.0f, dKh, d);
    bert_sgemm(1, 0, R, d, c->Tk, c->scale, dP2C, R, K, c->ks[2], 1.0f, dQr + (a * c->Rfull + c->r0) * d, d);
  }
}

static int rel_blas_single(void) {
  if (bert_gemm_get_provider() != BERT_GEMM_OPENBLAS) return 0;
  int n = openblas_get_num_threads();
  if (n > 1) openblas_set_num_threads(1);
  return n;
}
static void rel_blas_restore(int n) { if (n > 1) openblas_set_num_threads(n); }

/* node->extra: this header, then lse [B*A*Tq], bias [Bm*Tk], tile ranges. */
typedef struct {
  rel_ctx c;
  float *lse, *bias;
  int32_t *ranges;
} rel_saved;

static int rel_threads(int64_t items) {
  int nt = omp_get_max_threads();
  if (nt > items) nt = (int)items;
  return nt < 1 ? 1 : nt;
}

/* saved: 0 q, 1 k, 2 v, 3 rows, then kr and qr when present (node->i[0], i[1] flag them) */
static int attention_rel_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  rel_saved *sv = node->extra;
  rel_ctx c = sv->c;
  int has_kr = (int)node->i[0], has_qr = (int)node->i[1];
  bert_tensor *q = bert_node_saved(node, 0), *k = bert_node_saved(node, 1), *v = bert_node_saved(node, 2);
  bert_tensor *rows = bert_node_saved(node, 3);
  bert_tensor *kr = has_kr ? bert_node_saved(node, 4) : NULL;
  bert_tensor *qr = has_qr ? bert_node_saved(node, 4 + has_kr) : NULL;
  if (!q || !k || !v || !rows || (has_kr && !kr) || (has_qr && !qr)) return -1;
  c.q = bert_f32(q); c.k = bert_f32(k); c.v = bert_f32(v); c.rows = bert_i32(rows);
  c.kr = kr ? bert_f32(kr) : NULL; c.qr = qr ? bert_f32(qr) : NULL;
  int64_t qshape[4] = {c.B, c.A, c.Tq, c.d}, kshape[4] = {c.B, c.A, c.Tk, c.d}, rshape[3] = {c.A, c.Rfull, c.d};
  bert_tensor *dq = bert_tensor_new(BERT_F32, 4, qshape), *dk = bert_tensor_new(BERT_F32, 4, kshape);
  bert_tensor *dv = bert_tensor_new(BERT_F32, 4, kshape);
  bert_tensor *dkr = has_kr ? bert_tensor_new(BERT_F32, 3, rshape) : NULL;
  bert_tensor *dqr = has_qr ? bert_tensor_new(BERT_F32, 3, rshape) : NULL;
  bert_tensor *o = bert_contiguous(out);
  float *scratch = NULL;
  int rc = -1;
  if (!dq || !dk || !dv || !o || (has_kr && !dkr) || (has_qr && !dqr)) goto done;
  int64_t BH = c.B * c.A, ARd = c.A * c.Rfull * c.d;
  int nt = rel_threads(BH);
  size_t per = (size_t)3 * RBR * RBC + (size_t)c.Tq + (size_t)2 * RBR * c.R + (size_t)2 * c.Tk * c.R
               + (size_t)2 * ARd;
  scratch = calloc((size_t)nt * per, sizeof(float));
  if (scratch == NULL) { bert_set_error("attention_rel backward: out of memory"); goto done; }
  const float *O = bert_f32(o), *dO = bert_f32(gout);
  float *DQ = bert_f32(dq), *DK = bert_f32(dk), *DV = bert_f32(dv);
  int saved_threads = rel_blas_single();
  #pragma omp parallel num_threads(nt)
  {
    float *S = scratch + (size_t)omp_get_thread_num() * per;
    float *M = S + RBR * RBC, *dP = M + RBR * RBC, *Dv = dP + RBR * RBC, *C2P = Dv + c.Tq;
    float *dC2P = C2P + RBR * c.R, *P2C = dC2P + RBR * c.R, *dP2C = P2C + c.Tk * c.R;
    float *dKr = dP2C + c.Tk * c.R, *dQr = dKr + ARd;
    #pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++)
      rel_backward_head(&c, bh, O, dO, sv->lse, DQ, DK, DV, dKr, dQr, S, M, dP, Dv, C2P, dC2P, P2C, dP2C);
  }
  rel_blas_restore(saved_threads);
  /* the shared tables' gradients: the threads' sums added up */
  for (int which = 0; which < 2; which++) {
    bert_tensor *g = which == 0 ? dkr : dqr;
    if (!g) continue;
    float *G = bert_f32(g);
    memset(G, 0, (size_t)ARd * sizeof(float));
    for (int t = 0; t < nt; t++) {
      const float *part = scratch + (size_t)t * per + 3 * RBR * RBC + c.Tq + 2 * RBR * c.R + 2 * c.Tk * c.R
                          + (size_t)which * ARd;
      for (int64_t x = 0; x < ARd; x++) G[x] += part[x];
    }
  }
  int e1 = bert_accumulate_grad_steal(node->inputs[0], dq);
  int e2 = bert_accumulate_grad_steal(node->inputs[1], dk);
  int e3 = bert_accumulate_grad_steal(node->inputs[2], dv);
  int e4 = dkr ? bert_accumulate_grad_steal(node->inputs[3], dkr) : 0;
  int e5 = dqr ? bert_accumulate_grad_steal(node->inputs[4], dqr) : 0;
  dq = dk = dv = dkr = dqr = NULL;
  rc = (e1 || e2 || e3 || e4 || e5) ? -1 : 0;
done:
  free(scratch);
  bert_tensor_release(dq);
  bert_tensor_release(dk);
  bert_tensor_release(dv);
  bert_tensor_release(dkr);
  bert_tensor_release(dqr);
  bert_tensor_release(o);
  return rc;
}

static int rel_check(const char *name, const bert_tensor *t, int ndim) {
  char s1[160];
  if (t->dtype != BERT_F32 || t->ndim != ndim) {
    bert_set_error("attention_rel: %s must be a %d-D float32 tensor, got %s %s", name, ndim, SHAPE(s1, t),
                   bert_dtype_name(t->dtype));
    return -1;
  }
  return 0;
}

bert_tensor *bert_attention_rel(bert_tensor *q_in, bert_tensor *k_in, bert_tensor *v_in,
                                bert_tensor *kr_in, bert_tensor *qr_in, bert_tensor *rows_in,
                                const bert_attention_opts *o) {
  char s1[160], s2[160], s3[160];
  if (bert_is_vk(q_in) || bert_is_vk(k_in) || bert_is_vk(v_in)) {
    bert_set_error("attention_rel: not available on the vulkan device yet (use the composed path)");
    return NULL;
  }
  if (rel_check("query", q_in, 4) || rel_check("key", k_in, 4) || rel_check("value", v_in, 4)) return NULL;
  if ((kr_in && rel_check("kr", kr_in, 3)) || (qr_in && rel_check("qr", qr_in, 3))) return NULL;
  int64_t B = q_in->shape[0], A = q_in->shape[1], Tq = q_in->shape[2], d = q_in->shape[3];
  int64_t Tk = k_in->shape[2];
  for (int i = 0; i < 4; i++) {
    int64_t want = i == 2 ? Tk : q_in->shape[i];
    if (k_in->shape[i] != want || v_in->shape[i] != want) {
      bert_set_error("attention_rel: query %s, key %s and value %s must agree in batch, heads and head_dim, "
                     "and key and value in length", SHAPE(s1, q_in), SHAPE(s2, k_in), SHAPE(s3, v_in));
      return NULL;
    }
  }
  if (Tk == 0 || Tq == 0) {
    bert_set_error("attention_rel: empty query %s or key %s", SHAPE(s1, q_in), SHAPE(s2, k_in));
    return NULL;
  }
  int64_t R = kr_in ? kr_in->shape[1] : qr_in ? qr_in->shape[1] : 1;
  for (int w = 0; w < 2; w++) {
    bert_tensor *t = w == 0 ? kr_in : qr_in;
    if (t && (t->shape[0] != A || t->shape[1] != R || t->shape[2] != d)) {
      bert_set_error("attention_rel: %s %s must be [heads %lld x rows %lld x head_dim %lld]", w == 0 ? "kr" : "qr",
                     SHAPE(s1, t), (long long)A, (long long)R, (long long)d);
      return NULL;
    }
  }
  if (rows_in->dtype != BERT_I32 || rows_in->ndim != 2 || rows_in->shape[0] != Tq || rows_in->shape[1] != Tk) {
    bert_set_error("attention_rel: rows must be int32 [%lld x %lld], got %s %s", (long long)Tq, (long long)Tk,
                   SHAPE(s1, rows_in), bert_dtype_name(rows_in->dtype));
    return NULL;
  }
  if (!(o->dropout_p >= 0 && o->dropout_p < 1)) {
    bert_set_error("attention_rel: dropout must be in [0, 1), got %g", o->dropout_p);
    return NULL;
  }
  int64_t Bm = 0;
  if (o->mask) {
    const bert_tensor *m = o->mask;
    Bm = m->ndim == 2 ? m->shape[0] : -1;
    if (Bm != B || m->shape[1] != Tk) {
      bert_set_error("attention_rel: mask %s must be a [%lld x %lld] keep mask", SHAPE(s1, m), (long long)B,
                     (long long)Tk);
      return NULL;
    }
  }
  bert_tensor *rows = bert_contiguous(rows_in);
  if (!rows) return NULL;
  const int32_t *rw = bert_i32(rows);
  for (int64_t x = 0; x < Tq * Tk; x++) {
    if (rw[x] < 0 || rw[x] >= R) {
      bert_set_error("attention_rel: rows[%lld][%lld] = %d is outside the %lld rows of the relative table",
                     (long long)(x / Tk), (long long)(x % Tk), (int)rw[x], (long long)R);
      bert_tensor_release(rows);
      return NULL;
    }
  }
  /* only the rows the table names are multiplied: 2T - 1 of them for DeBERTa, often far fewer than R */
  int32_t rmin = rw[0], rmax = rw[0];
  for (int64_t x = 1; x < Tq * Tk; x++) { if (rw[x] < rmin) rmin = rw[x]; if (rw[x] > rmax) rmax = rw[x]; }
  int64_t ntiles = (Tk + RBC - 1) / RBC;
  size_t head = (sizeof(rel_saved) + 63) / 64 * 64;
  size_t nlse = (size_t)(B * A * Tq), nbias = (size_t)(Bm * Tk), nrange = (size_t)(2 * B * ntiles);
  rel_saved *sv = malloc(head + (nlse + nbias) * sizeof(float) + nrange * sizeof(int32_t));
  bert_tensor *q = rel_blas_ready(q_in), *k = rel_blas_ready(k_in), *v = rel_blas_ready(v_in);
  bert_tensor *kr = kr_in ? bert_contiguous(kr_in) : NULL, *qr = qr_in ? bert_contiguous(qr_in) : NULL;
  bert_tensor *out = NULL;
  float *scratch = NULL;
  if (sv == NULL) { bert_set_error("attention_rel: out of memory"); goto fail; }
  if (!q || !k || !v || (kr_in && !kr) || (qr_in && !qr)) goto fail;
  memset(sv, 0, sizeof *sv);
  sv->lse = (float *)((char *)sv + head);
  sv->bias = o->mask ? sv->lse + nlse : NULL;
  sv->ranges = (int32_t *)(sv->lse + nlse + nbias);
  rel_ctx *c = &sv->c;
  c->B = B; c->A = A; c->Tq = Tq; c->Tk = Tk; c->d = d;
  c->Rfull = R; c->r0 = rmin; c->R = (int64_t)rmax - rmin + 1;
  c->q = bert_f32(q); c->k = bert_f32(k); c->v = bert_f32(v);
  c->kr = kr ? bert_f32(kr) : NULL; c->qr = qr ? bert_f32(qr) : NULL;
  c->rows = rw;
  rel_strides(q, c->qs); rel_strides(k, c->ks); rel_strides(v, c->vs);
  c->scale = o->scale > 0 ? (float)o->scale : (float)(1.0 / sqrt((double)d));
  if (o->mask) {
    float mv = o->mask_value != 0 ? (float)o->mask_value : -FLT_MAX;
    for (int64_t i = 0; i < Bm * Tk; i++) sv->bias[i] = (1.0f - (float)bert_get_flat(o->mask, i)) * mv;
    c->bias_bstride = Tk;
  }
  c->bias = sv->bias;
  c->ntiles = ntiles;
  rel_tile_ranges(c, sv->ranges);
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
  int64_t BH = B * A;
  int nt = rel_threads(BH);
  size_t per = (size_t)2 * RBR * RBC + 2 * RBR + (size_t)RBR * c->R + (size_t)Tk * c->R;
  scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention_rel: out of memory"); goto fail; }
  float *O = bert_f32(out);
  int saved_threads = rel_blas_single();
  #pragma omp parallel num_threads(nt)
  {
    float *S = scratch + (size_t)omp_get_thread_num() * per;
    float *M = S + RBR * RBC, *mrow = M + RBR * RBC, *lrow = mrow + RBR, *C2P = lrow + RBR;
    float *P2C = C2P + RBR * c->R;
    #pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < BH; bh++) rel_forward_head(c, bh, O, sv->lse, S, M, mrow, lrow, C2P, P2C);
  }
  rel_blas_restore(saved_threads);
  free(scratch);
  scratch = NULL;
  bert_tensor *inputs[5] = {q_in, k_in, v_in, kr_in, qr_in};
  if (bert_needs_grad(5, inputs)) {
    bert_node *node = bert_node_new("attention_rel", attention_rel_backward, 5, inputs);
    if (node == NULL) goto fail;
    bert_node_save(node, q);
    bert_node_save(node, k);
    bert_node_save(node, v);
    bert_node_save(node, rows);
    if (kr) bert_node_save(node, kr);
    if (qr) bert_node_save(node, qr);
    node->i[0] = kr != NULL;
    node->i[1] = qr != NULL;
    c->q = c->k = c->v = c->kr = c->qr = NULL;
    c->rows = NULL;
    node->extra = sv;
    sv = NULL;
    bert_attach(out, node);
  }
  bert_tensor_release(q);
  bert_tensor_release(k);
  bert_tensor_release(v);
  bert_tensor_release(kr);
  bert_tensor_release(qr);
  bert_tensor_release(rows);
  free(sv);
  return out;
fail:
  free(scratch);
  free(sv);
  bert_tensor_release(q);
  bert_tensor_release(k);
  bert_tensor_release(v);
  bert_tensor_release(kr);
  bert_tensor_release(qr);
  bert_tensor_release(rows);
  bert_tensor_release(out);
  return NULL;
}
