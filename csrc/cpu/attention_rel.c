/*
** DeBERTa's disentangled attention, fused and flash-style like attention.c:
**
**   S(i, j) = scale * (q_i . k_j + q_i . Kr[row(i, j)] + k_j . Qr[row(i, j)]) + bias_j
**
** q, k, v [B, A, T, d]; Kr, Qr [A, R, d]: the relative-position table
** projected by the key and query projections (c2p and p2c; either may be
** absent); row [Tq, Tk] int32: the table row query i and key j read
** (DeBERTa's clamp(span + bucket(i - j))).  Per (batch, head) the kernel
** forms C2P = Q Kr^T and P2C = K Qr^T, chunk by chunk of 32 queries (keys)
** over only the table rows each chunk reads (rel_chunks_init), and gathers
** from them inside each score tile, so no [B, A, T, T] score, bias or
** probability tensor exists, forward or backward: memory stays O(T * R)
** per thread.  Softmax is online over key tiles; only the output
** and the per-row log-sum-exp are kept.  Backward recomputes P tile by
** tile (as attention.c), and scatters dS into dC2P / dP2C by row, giving
**   dQ += scale dC2P Kr,  dKr += scale dC2P^T Q,
**   dK += scale dP2C Qr,  dQr += scale dP2C^T K.
** Kr and Qr are shared over the batch: each thread sums its own copy of
** their gradients, added together at the end.
**
** The front-end (argument checks, the autograd node) is bert_attention_rel
** in core/nn.c; this file is the CPU backend's forward and backward
** (cpu_backend.c's attention_rel entries).
**
** Masks and dead-key skipping are attention.c's: a [B, Tk] keep mask
** becomes an additive bias; fully padded key tiles are skipped.  Causal
** (query i sees keys j <= i): tiles after a query block are skipped and the
** diagonal tile masked.  The tile
** step after the scores (online softmax, P V; the backward's P, dV, dS,
** dQ, dK) and dropout on the probabilities (attention.c's Philox layout)
** are attention_tile.h's, shared with attention.c.
*/
/* GCC defaults to 256-bit vectors on AVX-512 machines; the softmax and
** dS loops of the tiles are compute-bound (an exp per score): full width */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/attention_tile.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "cpu/nn_internal.h"

#define RBR 64          /* query rows per block */
#define RBC 128         /* keys per tile */
#define RCH 32          /* queries (keys) per chunk of C2P (P2C); divides RBR */

/* A chunk of queries (of C2P) or keys (of P2C): those from start, n of them,
** read table rows lo .. lo + w - 1, and their terms are a [w x n] matrix
** at off (in the block's C2P, from the block's first chunk on; in the
** head's P2C): the GEMM that forms it reads the window of the table in
** place and transposes only the n queries or keys. */
typedef struct { int64_t start, n, lo, w, off; } rel_chunk;

typedef struct {
  int64_t B, A, Tq, Tk, d;
  int64_t R, Rfull, r0;               /* rows r0 .. r0 + R - 1 of the Rfull-row tables are used */
  const float *q, *k, *v, *kr, *qr;   /* kr, qr [A, Rfull, d] contiguous, or NULL */
  int64_t qs[3], ks[3], vs[3];        /* strides of batch, head, time */
  int64_t os[3], gs[3];               /* backward: those of the output and of its gradient */
  const int32_t *c2p_at, *p2c_at;     /* [Tq, Tk]: where S(i, j)'s term is in C2P / P2C */
  const rel_chunk *qch, *kch;         /* chunks of the queries (of C2P) and of the keys (of P2C) */
  int64_t nkch, c2p_size, p2c_size;   /* key chunks; floats of a block's C2P, of a head's P2C */
  const float *bias;                  /* [Bm, Tk] additive, or NULL */
  int64_t bias_bstride;
  int64_t ntiles;
  const int32_t *tile_lo, *tile_hi;   /* [B, ntiles] live key range of each tile */
  const int32_t *first_live;          /* causal with a mask: [B] first live key (Tk: none), else NULL */
  int causal;
  float scale;
  attn_dropout drop;
} rel_ctx;

/* The output and the gradients of q, k, v are time-major, [B, T, A, d] in
** memory (as attention.c's): a [B, A, T, d] result is a transposed view of
** it, so the layer's context [B, T, H] and the gradients reaching the
** projections need no transposing copy.  Head a of batch row b starts at
** its rel_at; consecutive time rows are A * d floats apart. */
static inline int64_t rel_at(const rel_ctx *c, int64_t b, int64_t a, int64_t T) { return (b * T * c->A + a) * c->d; }

static bert_tensor *rel_result(const rel_ctx *c, int64_t T) {
  int64_t shape[4] = {c->B, T, c->A, c->d};
  bert_tensor *t = bert_tensor_empty(BERT_F32, 4, shape);
  if (t == NULL) return NULL;
  bert_tensor *view = bert_transpose(t, 1, 2);
  bert_tensor_release(t);
  return view;
}

static void rel_zero_rows(float *X, int64_t ld, int64_t from, int64_t to, int64_t d) {
  for (int64_t i = from; i < to; i++) memset(X + i * ld, 0, (size_t)d * sizeof(float));
}

/* S[br x n] = scale * Q K^T + C2P + P2C gathered (both already scaled) + bias, keys lo .. lo + n - 1 */
static void rel_scores(const rel_ctx *c, const float *Q, const float *K, const float *bias,
                       const float *restrict C2P, const float *restrict P2C, int64_t i0, int64_t br, int64_t lo,
                       int64_t n, float *restrict S) {
  bert_sgemm_tile(0, 1, br, n, c->d, c->scale, Q, c->qs[2], K + lo * c->ks[2], c->ks[2], 0.0f, S, RBC);
  for (int64_t i = 0; i < br; i++) {
    float *restrict s = S + i * RBC;
    const int32_t *restrict cat = c->c2p_at + (i0 + i) * c->Tk + lo, *restrict pat = c->p2c_at + (i0 + i) * c->Tk + lo;
    if (C2P && P2C) {
      for (int64_t j = 0; j < n; j++) s[j] += C2P[cat[j]] + P2C[pat[j]];
    } else if (C2P) {
      for (int64_t j = 0; j < n; j++) s[j] += C2P[cat[j]];
    } else if (P2C) {
      for (int64_t j = 0; j < n; j++) s[j] += P2C[pat[j]];
    }
    if (bias) {
      for (int64_t j = 0; j < n; j++) s[j] += bias[lo + j];
    }
  }
}

/* Keys [lo, hi) of tile t for query block [i0, i0 + br) of batch row b:
** the live range (the whole tile for rows before the first live key,
** which see only dead keys under the causal mask), cut at the block's last
** row when causal.  *diag: the causal mask cuts inside the tile. */
static inline int64_t rel_tile(const rel_ctx *c, int64_t b, int64_t t, int64_t i0, int64_t br, int64_t *lo,
                               int *diag) {
  int64_t hi;
  if (c->first_live && i0 < c->first_live[b]) {
    *lo = t * RBC;
    hi = *lo + RBC < c->Tk ? *lo + RBC : c->Tk;
  } else {
    *lo = c->tile_lo[b * c->ntiles + t];
    hi = c->tile_hi[b * c->ntiles + t];
  }
  if (c->causal && hi > i0 + br) hi = i0 + br;
  *diag = c->causal && hi - 1 > i0;
  return hi - *lo;
}

/* Head a of batch row b: q, k, v, the whole tables (or NULL), the bias row. */
typedef struct { const float *q, *k, *v, *kr, *qr, *bias; } rel_head;

static inline rel_head rel_head_at(const rel_ctx *c, int64_t b, int64_t a) {
  int64_t d = c->d;
  return (rel_head){c->q + b * c->qs[0] + a * c->qs[1], c->k + b * c->ks[0] + a * c->ks[1],
                    c->v + b * c->vs[0] + a * c->vs[1],
                    c->kr ? c->kr + a * c->Rfull * d : NULL,
                    c->qr ? c->qr + a * c->Rfull * d : NULL,
                    c->bias ? c->bias + b * c->bias_bstride : NULL};
}

/* The query chunks of the block [i0, i0 + br): *first, returns how many. */
static inline int64_t rel_block_chunks(int64_t i0, int64_t br, int64_t *first) {
  *first = i0 / RCH;
  return (br + RCH - 1) / RCH;
}

/* C2P of block [i0, i0 + br): each query chunk's window of Kr times the queries, scaled */
static void rel_block_c2p(const rel_ctx *c, const rel_head *h, int64_t i0, int64_t br, float *C2P) {
  int64_t first, nch = rel_block_chunks(i0, br, &first), d = c->d;
  for (const rel_chunk *ch = c->qch + first; ch < c->qch + first + nch; ch++)
    bert_sgemm_tile(0, 1, ch->w, ch->n, d, c->scale, h->kr + ch->lo * d, d, h->q + ch->start * c->qs[2], c->qs[2],
                    0.0f, C2P + ch->off, ch->n);
}

/* P2C of the head: each key chunk's window of Qr times the keys, scaled */
static void rel_head_p2c(const rel_ctx *c, const rel_head *h, float *P2C) {
  for (const rel_chunk *ch = c->kch; ch < c->kch + c->nkch; ch++)
    bert_sgemm_tile(0, 1, ch->w, ch->n, c->d, c->scale, h->qr + ch->lo * c->d, c->d, h->k + ch->start * c->ks[2],
                    c->ks[2], 0.0f, P2C + ch->off, ch->n);
}

/* The score tile of key tile t for query block [i0, i0 + br) (rows Q):
** S with the causal mask, and M with the dropout multipliers.  Returns its
** keys from *lo on (<= 0: no tile). */
static inline int64_t rel_score_tile(const rel_ctx *c, const rel_head *h, int64_t bh, int64_t t, int64_t i0,
                                     int64_t br, const float *Q, const float *C2P, const float *P2C, float *S,
                                     float *M, int64_t *lo) {
  int diag;
  int64_t n = rel_tile(c, bh / c->A, t, i0, br, lo, &diag);
  if (n <= 0) return n;
  rel_scores(c, Q, h->k, h->bias, h->kr ? C2P : NULL, h->qr ? P2C : NULL, i0, br, *lo, n, S);
  if (diag) attn_tile_causal(S, RBC, i0, br, *lo, n);
  if (c->drop.on) attn_tile_dropout(&c->drop, bh, i0, br, *lo, n, M, RBC);
  return n;
}

/* One (batch, head): O rows and lse.  Scratch: S, M [RBR x RBC], mrow, lrow
** [RBR], C2P [c2p_size], P2C [p2c_size]. */
static void rel_forward_head(const rel_ctx *c, int64_t bh, float *O, float *lse, float *S, float *M,
                             float *mrow, float *lrow, float *C2P, float *P2C) {
  int64_t d = c->d, ld = c->A * d;
  rel_head h = rel_head_at(c, bh / c->A, bh % c->A);
  if (h.qr) rel_head_p2c(c, &h, P2C);
  for (int64_t i0 = 0; i0 < c->Tq; i0 += RBR) {
    int64_t br = i0 + RBR <= c->Tq ? RBR : c->Tq - i0;
    const float *Q = h.q + i0 * c->qs[2];
    if (h.kr) rel_block_c2p(c, &h, i0, br, C2P);
    float *Ob = O + rel_at(c, bh / c->A, bh % c->A, c->Tq) + i0 * ld;
    attn_rows_start(Ob, ld, br, d, mrow, lrow);
    for (int64_t t = 0; t < c->ntiles; t++) {
      int64_t lo, n = rel_score_tile(c, &h, bh, t, i0, br, Q, C2P, P2C, S, M, &lo);
      if (n <= 0) continue;
      attn_tile_forward(S, RBC, br, n, c->drop.on ? M : NULL, h.v + lo * c->vs[2], c->vs[2], d, Ob, ld, mrow, lrow, 0);
    }
    attn_rows_finish(Ob, ld, br, d, mrow, lrow, lse + bh * c->Tq + i0, 1);
  }
}

/* One (batch, head) backward.  dQ, dK, dV rows of the head (written by
** the first tiles, as attention.c's; zeroed where no tile reaches);
** dKr, dQr this thread's [A, R, d] sums from row r0 on (or NULL). */
static void rel_backward_head(const rel_ctx *c, int64_t bh, const float *O, const float *dO,
                              const float *lse, float *dQ, float *dK, float *dV, float *dKr,
                              float *dQr, float *S, float *M, float *dP, float *Dv, float *C2P,
                              float *dC2P, float *P2C, float *dP2C) {
  int64_t b = bh / c->A, a = bh % c->A, d = c->d, ld = c->A * d;
  rel_head h = rel_head_at(c, b, a);
  const float *Oh = O + b * c->os[0] + a * c->os[1], *dOh = dO + b * c->gs[0] + a * c->gs[1], *L = lse + bh * c->Tq;
  float *dQh = dQ + rel_at(c, b, a, c->Tq), *dKh = dK + rel_at(c, b, a, c->Tk), *dVh = dV + rel_at(c, b, a, c->Tk);
  float *dKra = dKr ? dKr + (a * c->R - c->r0) * d : NULL, *dQra = dQr ? dQr + (a * c->R - c->r0) * d : NULL;
  if (c->causal) {
    rel_zero_rows(dQh, ld, 0, c->Tq, d);
    rel_zero_rows(dKh, ld, 0, c->Tk, d);
    rel_zero_rows(dVh, ld, 0, c->Tk, d);
  } else {
    for (int64_t t = 0; t < c->ntiles; t++) {   /* the dead keys around each tile's live range */
      int64_t start = t * RBC, end = start + RBC < c->Tk ? start + RBC : c->Tk;
      int64_t lo = c->tile_lo[b * c->ntiles + t], hi = c->tile_hi[b * c->ntiles + t];
      if (hi <= lo) lo = hi = end;
      rel_zero_rows(dKh, ld, start, lo, d);
      rel_zero_rows(dVh, ld, start, lo, d);
      rel_zero_rows(dKh, ld, hi, end, d);
      rel_zero_rows(dVh, ld, hi, end, d);
    }
  }
  attn_rows_dot(Oh, c->os[2], dOh, c->gs[2], c->Tq, d, Dv);
  if (h.qr) {
    rel_head_p2c(c, &h, P2C);
    memset(dP2C, 0, (size_t)c->p2c_size * sizeof(float));
  }
  for (int64_t i0 = 0; i0 < c->Tq; i0 += RBR) {
    int64_t br = i0 + RBR <= c->Tq ? RBR : c->Tq - i0;
    const float *Q = h.q + i0 * c->qs[2];
    if (h.kr) {
      rel_block_c2p(c, &h, i0, br, C2P);
      memset(dC2P, 0, (size_t)c->c2p_size * sizeof(float));
    }
    attn_bwd_rows rws = {Q, dOh + i0 * c->gs[2], L + i0, Dv + i0, dQh + i0 * ld, c->qs[2], c->gs[2], ld};
    int q_started = c->causal;
    for (int64_t t = 0; t < c->ntiles; t++) {
      int64_t lo, n = rel_score_tile(c, &h, bh, t, i0, br, Q, C2P, P2C, S, M, &lo);
      if (n <= 0) continue;
      attn_bwd_keys keys = {h.k + lo * c->ks[2], h.v + lo * c->vs[2], dKh + lo * ld, dVh + lo * ld, c->ks[2], c->vs[2], ld};
      attn_tile_backward(S, c->drop.on ? M : NULL, dP, RBC, br, n, &rws, &keys, c->scale, d, !q_started,
                         !c->causal && i0 == 0);
      q_started = 1;
      /* S holds dS: the relative terms scattered to where they were gathered from */
      for (int64_t i = 0; i < br; i++) {
        const float *g = S + i * RBC;
        const int32_t *cat = c->c2p_at + (i0 + i) * c->Tk + lo, *pat = c->p2c_at + (i0 + i) * c->Tk + lo;
        if (h.kr) for (int64_t j = 0; j < n; j++) dC2P[cat[j]] += g[j];
        if (h.qr) for (int64_t j = 0; j < n; j++) dP2C[pat[j]] += g[j];
      }
    }
    if (!q_started) rel_zero_rows(dQh, ld, i0, i0 + br, d);   /* no keys at all */
    if (h.kr) {
      int64_t first, nch = rel_block_chunks(i0, br, &first);
      for (const rel_chunk *ch = c->qch + first; ch < c->qch + first + nch; ch++) {
        const float *g = dC2P + ch->off, *Qc = h.q + ch->start * c->qs[2];
        bert_sgemm_tile(1, 0, ch->n, d, ch->w, c->scale, g, ch->n, h.kr + ch->lo * d, d, 1.0f, dQh + ch->start * ld, ld);
        bert_sgemm_tile(0, 0, ch->w, d, ch->n, c->scale, g, ch->n, Qc, c->qs[2], 1.0f, dKra + ch->lo * d, d);
      }
    }
  }
  if (h.qr) {
    for (const rel_chunk *ch = c->kch; ch < c->kch + c->nkch; ch++) {
      const float *g = dP2C + ch->off, *Kc = h.k + ch->start * c->ks[2];
      bert_sgemm_tile(1, 0, ch->n, d, ch->w, c->scale, g, ch->n, h.qr + ch->lo * d, d, 1.0f, dKh + ch->start * ld, ld);
      bert_sgemm_tile(0, 0, ch->w, d, ch->n, c->scale, g, ch->n, Kc, c->ks[2], 1.0f, dQra + ch->lo * d, d);
    }
  }
}


/* The context of one call (forward or backward): q, k, v BLAS-ready, the
** tables contiguous, the additive bias and the live key ranges of each
** tile, recomputed by backward so that only the log-sum-exp is kept. */
typedef struct {
  rel_ctx c;
  bert_tensor *q, *k, *v, *kr, *qr;
  float *bias;
  int32_t *ranges, *at;
  rel_chunk *chunks;
} rel_setup;

static void rel_setup_free(rel_setup *a) {
  bert_tensor_release(a->q);
  bert_tensor_release(a->k);
  bert_tensor_release(a->v);
  bert_tensor_release(a->kr);
  bert_tensor_release(a->qr);
  free(a->bias);
  free(a->ranges);
  free(a->at);
  free(a->chunks);
}

/* The pool's shares: whole (batch, head) pairs, scratch per thread. */
typedef struct {
  const rel_ctx *c;
  const float *O, *dO, *LSE;
  float *O_out, *LSE_out, *DQ, *DK, *DV, *scratch;
  size_t per, ARd;
} rel_job;

static void rel_forward_heads(void *p, int64_t lo, int64_t hi) {
  const rel_job *j = p;
  const rel_ctx *c = j->c;
  float *S = j->scratch + (size_t)bert_parallel_thread() * j->per;
  float *M = S + RBR * RBC, *mrow = M + RBR * RBC, *lrow = mrow + RBR, *C2P = lrow + RBR;
  float *P2C = C2P + c->c2p_size;
  for (int64_t bh = lo; bh < hi; bh++) rel_forward_head(c, bh, j->O_out, j->LSE_out, S, M, mrow, lrow, C2P, P2C);
}

static void rel_backward_heads(void *p, int64_t lo, int64_t hi) {
  const rel_job *j = p;
  const rel_ctx *c = j->c;
  float *S = j->scratch + (size_t)bert_parallel_thread() * j->per;
  float *M = S + RBR * RBC, *dP = M + RBR * RBC, *Dv = dP + RBR * RBC, *C2P = Dv + c->Tq;
  float *dC2P = C2P + c->c2p_size, *P2C = dC2P + c->c2p_size, *dP2C = P2C + c->p2c_size;
  float *dKr = dP2C + c->p2c_size, *dQr = dKr + j->ARd;
  for (int64_t bh = lo; bh < hi; bh++)
    rel_backward_head(c, bh, j->O, j->dO, j->LSE, j->DQ, j->DK, j->DV, dKr, dQr, S, M, dP, Dv, C2P, dC2P, P2C, dP2C);
}

/* The chunks' windows of table rows and where each score's terms are.  A
** chunk of RCH queries reads only the rows between its least and greatest
** (RCH + Tk - 1 for DeBERTa's linear distances, fewer where log buckets or
** the clamp merge them), so C2P and P2C cost about a Tq x Tk product each,
** where the whole used table would be about twice that. */
static int rel_chunks_init(rel_setup *a, const int32_t *rows) {
  rel_ctx *c = &a->c;
  int64_t Tq = c->Tq, Tk = c->Tk, nq = (Tq + RCH - 1) / RCH, nk = (Tk + RCH - 1) / RCH;
  a->chunks = malloc((size_t)(nq + nk) * sizeof(rel_chunk));
  a->at = malloc((size_t)(2 * Tq * Tk) * sizeof(int32_t));
  if (!a->chunks || !a->at) { bert_set_error("attention_rel: out of memory"); return -1; }
  rel_chunk *qch = a->chunks, *kch = a->chunks + nq;
  for (int64_t x = 0; x < nq + nk; x++) {
    int64_t start = (x < nq ? x : x - nq) * RCH, len = x < nq ? Tq : Tk;
    a->chunks[x] = (rel_chunk){start, start + RCH <= len ? RCH : len - start, INT32_MAX, INT32_MIN, 0};
  }
  /* w holds the greatest row until the windows are known */
  for (int64_t i = 0; i < Tq; i++) {
    rel_chunk *qc = qch + i / RCH;
    for (int64_t j = 0; j < Tk; j++) {
      int32_t r = rows[i * Tk + j];
      rel_chunk *kc = kch + j / RCH;
      if (r < qc->lo) qc->lo = r;
      if (r > qc->w) qc->w = r;
      if (r < kc->lo) kc->lo = r;
      if (r > kc->w) kc->w = r;
    }
  }
  int64_t rmin = INT32_MAX, rmax = INT32_MIN;
  for (int64_t x = 0; x < nq + nk; x++) {
    rel_chunk *ch = a->chunks + x;
    if (ch->lo < rmin) rmin = ch->lo;
    if (ch->w > rmax) rmax = ch->w;
    ch->w = ch->w - ch->lo + 1;
    /* C2P restarts at each query block, P2C runs over the head */
    int fresh = x == 0 || x == nq || (x < nq && ch->start % RBR == 0);
    ch->off = fresh ? 0 : ch[-1].off + ch[-1].n * ch[-1].w;
    if (x < nq && ch->off + ch->n * ch->w > c->c2p_size) c->c2p_size = ch->off + ch->n * ch->w;
    if (x >= nq) c->p2c_size = ch->off + ch->n * ch->w;
  }
  if (c->c2p_size > INT32_MAX || c->p2c_size > INT32_MAX) {
    bert_set_error("attention_rel: %lld queries and keys over a table of %lld rows is too large",
                   (long long)Tq, (long long)(rmax - rmin + 1));
    return -1;
  }
  c->r0 = rmin;
  c->R = rmax - rmin + 1;
  int32_t *c2p_at = a->at, *p2c_at = a->at + Tq * Tk;
  for (int64_t i = 0; i < Tq; i++) {
    const rel_chunk *qc = qch + i / RCH;
    int64_t qbase = qc->off + i - qc->start - qc->lo * qc->n;
    for (int64_t j = 0; j < Tk; j++) {
      const rel_chunk *kc = kch + j / RCH;
      int32_t r = rows[i * Tk + j];
      c2p_at[i * Tk + j] = (int32_t)(qbase + r * qc->n);
      p2c_at[i * Tk + j] = (int32_t)(kc->off + (r - kc->lo) * kc->n + j - kc->start);
    }
  }
  c->c2p_at = c2p_at;
  c->p2c_at = p2c_at;
  c->qch = qch;
  c->kch = kch;
  c->nkch = nk;
  return 0;
}

/* Arguments validated by the front-end (core/nn.c): rows contiguous int32
** [Tq, Tk] within the tables' rows, the mask a contiguous [B, Tk] keep mask. */
static int rel_setup_init(rel_setup *a, const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                          const bert_tensor *kr, const bert_tensor *qr, const bert_tensor *rows,
                          const bert_attention_opts *o, bert_stream s) {
  memset(a, 0, sizeof *a);
  int64_t B = q->shape[0], A = q->shape[1], Tq = q->shape[2], d = q->shape[3], Tk = k->shape[2];
  int64_t ntiles = (Tk + RBC - 1) / RBC;
  a->q = attn_blas_ready(q);
  a->k = attn_blas_ready(k);
  a->v = attn_blas_ready(v);
  a->kr = kr ? bert_contiguous((bert_tensor *)kr) : NULL;
  a->qr = qr ? bert_contiguous((bert_tensor *)qr) : NULL;
  a->bias = o->mask ? malloc((size_t)(B * Tk + 1) * sizeof(float)) : NULL;
  a->ranges = malloc((size_t)(2 * B * ntiles + B + 1) * sizeof(int32_t));
  if (!a->q || !a->k || !a->v || (kr && !a->kr) || (qr && !a->qr) || (o->mask && !a->bias) || !a->ranges) {
    if ((o->mask && !a->bias) || !a->ranges) bert_set_error("attention_rel: out of memory");
    rel_setup_free(a);
    return -1;
  }
  rel_ctx *c = &a->c;
  c->B = B; c->A = A; c->Tq = Tq; c->Tk = Tk; c->d = d;
  c->q = bert_f32(a->q); c->k = bert_f32(a->k); c->v = bert_f32(a->v);
  c->kr = a->kr ? bert_f32(a->kr) : NULL;
  c->qr = a->qr ? bert_f32(a->qr) : NULL;
  c->Rfull = kr ? kr->shape[1] : qr ? qr->shape[1] : 1;
  if (rel_chunks_init(a, bert_i32(rows)) != 0) {
    rel_setup_free(a);
    return -1;
  }
  attn_strides(a->q, c->qs); attn_strides(a->k, c->ks); attn_strides(a->v, c->vs);
  c->scale = attn_scale(o, d);
  if (o->mask) {
    attn_mask_fill(o, B * Tk, a->bias);
    c->bias_bstride = Tk;
  }
  c->bias = a->bias;
  c->ntiles = ntiles;
  if (a->bias) {
    c->first_live = o->causal ? a->ranges + 2 * B * ntiles : NULL;
    attn_tile_ranges(a->bias, c->bias_bstride, B, Tk, RBC, ntiles, a->ranges, a->ranges + 2 * B * ntiles);
  } else {
    for (int64_t b = 0; b < B; b++) {
      for (int64_t t = 0; t < ntiles; t++) {
        a->ranges[b * ntiles + t] = (int32_t)(t * RBC);
        a->ranges[B * ntiles + b * ntiles + t] = (int32_t)(t * RBC + RBC < Tk ? t * RBC + RBC : Tk);
      }
    }
  }
  c->tile_lo = a->ranges;
  c->tile_hi = a->ranges + B * ntiles;
  c->causal = o->causal != 0;
  attn_dropout_init(&c->drop, o->training ? o->dropout_p : 0.0, s, Tq, Tk);
  return 0;
}

int cpu_attention_rel_backward(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                               const bert_tensor *kr_in, const bert_tensor *qr_in, const bert_tensor *rows,
                               const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                               const bert_tensor *lse, const bert_tensor *gout, bert_tensor **dq_out,
                               bert_tensor **dk_out, bert_tensor **dv_out, bert_tensor **dkr_out,
                               bert_tensor **dqr_out) {
  rel_setup a;
  if (rel_setup_init(&a, q_in, k_in, v_in, kr_in, qr_in, rows, o, s) != 0) return -1;
  rel_ctx c = a.c;
  int has_kr = c.kr != NULL, has_qr = c.qr != NULL;
  int64_t rshape[3] = {c.A, c.Rfull, c.d};
  /* not zeroed here: each head writes its own rows (rel_backward_head), the
  ** tables are summed from the threads' parts below; zeroed tensors of this
  ** size would be fresh pages from the kernel every step */
  bert_tensor *dq = rel_result(&c, c.Tq), *dk = rel_result(&c, c.Tk), *dv = rel_result(&c, c.Tk);
  bert_tensor *dkr = has_kr ? bert_tensor_empty(BERT_F32, 3, rshape) : NULL;
  bert_tensor *dqr = has_qr ? bert_tensor_empty(BERT_F32, 3, rshape) : NULL;
  /* the output (time-major, ours) and its gradient read in place where rows are */
  bert_tensor *oc = attn_blas_ready(out), *gc = attn_blas_ready(gout);
  float *scratch = NULL;
  int rc = -1;
  if (!dq || !dk || !dv || !oc || !gc || (has_kr && !dkr) || (has_qr && !dqr)) goto done;
  attn_strides(oc, c.os);
  attn_strides(gc, c.gs);
  /* each thread sums the tables' gradients over the used rows only */
  int64_t BH = c.B * c.A, ARd = c.A * c.R * c.d, Rd = c.R * c.d;
  int nt = bert_parallel_width();
  size_t sums = (size_t)3 * RBR * RBC + (size_t)c.Tq + (size_t)2 * (c.c2p_size + c.p2c_size);
  size_t per = sums + (size_t)2 * ARd;
  scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention_rel backward: out of memory"); goto done; }
  for (int t = 0; t < nt; t++) memset(scratch + (size_t)t * per + sums, 0, (size_t)2 * ARd * sizeof(float));
  rel_job job = {&c, bert_f32(oc), bert_f32(gc), bert_f32(lse), NULL, NULL, bert_f32(dq), bert_f32(dk),
                 bert_f32(dv), scratch, per, (size_t)ARd};
  bert_parallel_for(BH, 1, rel_backward_heads, &job);
  /* the shared tables' gradients: the threads' sums added up, zero outside the used rows */
  for (int which = 0; which < 2; which++) {
    bert_tensor *g = which == 0 ? dkr : dqr;
    if (!g) continue;
    float *G = bert_f32(g);
    memset(G, 0, (size_t)(c.A * c.Rfull * c.d) * sizeof(float));
    for (int t = 0; t < nt; t++) {
      const float *part = scratch + (size_t)t * per + sums + (size_t)which * ARd;
      for (int64_t head = 0; head < c.A; head++) {
        float *Ga = G + (head * c.Rfull + c.r0) * c.d;
        const float *pa = part + head * Rd;
        for (int64_t x = 0; x < Rd; x++) Ga[x] += pa[x];
      }
    }
  }
  *dq_out = dq; *dk_out = dk; *dv_out = dv; *dkr_out = dkr; *dqr_out = dqr;
  dq = dk = dv = dkr = dqr = NULL;
  rc = 0;
done:
  free(scratch);
  bert_tensor_release(dq);
  bert_tensor_release(dk);
  bert_tensor_release(dv);
  bert_tensor_release(dkr);
  bert_tensor_release(dqr);
  bert_tensor_release(oc);
  bert_tensor_release(gc);
  rel_setup_free(&a);
  return rc;
}

bert_tensor *cpu_attention_rel(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                               const bert_tensor *kr_in, const bert_tensor *qr_in, const bert_tensor *rows,
                               const bert_attention_opts *o, bert_stream s, bert_tensor **lse_out) {
  rel_setup a;
  if (rel_setup_init(&a, q_in, k_in, v_in, kr_in, qr_in, rows, o, s) != 0) return NULL;
  rel_ctx *c = &a.c;
  int64_t B = c->B, A = c->A, Tq = c->Tq, nl = B * A * Tq;
  bert_tensor *out = rel_result(c, Tq), *lse = bert_tensor_empty(BERT_F32, 1, &nl);
  float *scratch = NULL;
  if (out == NULL || lse == NULL) goto fail;
  int64_t BH = B * A;
  int nt = bert_parallel_width();
  size_t per = (size_t)2 * RBR * RBC + 2 * RBR + (size_t)(c->c2p_size + c->p2c_size);
  scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention_rel: out of memory"); goto fail; }
  rel_job job = {c, NULL, NULL, NULL, bert_f32(out), bert_f32(lse), NULL, NULL, NULL, scratch, per, 0};
  bert_parallel_for(BH, 1, rel_forward_heads, &job);
  free(scratch);
  rel_setup_free(&a);
  *lse_out = lse;
  return out;
fail:
  free(scratch);
  rel_setup_free(&a);
  bert_tensor_release(out);
  bert_tensor_release(lse);
  return NULL;
}
