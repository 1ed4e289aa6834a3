/*
** Fused scaled-dot-product attention, flash-style (FlashAttention-2 on the
** CPU).  Forward: per block of BR query rows, loop over key tiles of at
** most BC keys with an online softmax, accumulating the output in place;
** only the output and the per-row log-sum-exp are kept.  Backward: per
** (batch, head), recompute P = exp(S - lse) tile by tile, then dV, dP, dS,
** dQ, dK as attention_tile.h says.  No T x T matrix is stored.  The tile
** step itself (softmax update, P V, the backward's products) is
** attention_tile.h's, shared with attention_rel.c; this file forms the
** score tiles and decides which tiles exist.
**
** Masks become an additive per-key bias [B, Tk].  Keys whose bias is
** <= -10000 ("dead") are skipped (attn_tile_ranges): key tiles are trimmed
** to their first and last live key and fully dead tiles are never touched.
** A batch row with no live key is processed in full, so its output equals
** HF's (uniform over keys with finfo.min).
**
** Causal (query i sees keys j <= i): key tiles wholly after a query block's
** last row are never formed, and a tile crossing the diagonal is processed
** in strips of STRIP rows, each only up to its own last row, so the work is
** about half.  Rows before a batch row's first live key see only dead keys:
** their blocks take the untrimmed tiles (as a row with no live key does).
**
** Packed sequences (o->cu_seqlens, FlashAttention's varlen): q, k, v, the
** output and the gradients are [total, A, d]; sequence b is rows
** cu[b] .. cu[b+1] - 1 and attends only within them.  The kernel sees it
** as a batch whose item b starts at row cu[b] with its own length, so the
** work is sum(len_b^2).  Dropout counters are those of the padded op with
** T = the longest sequence.
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

#ifndef BR
#define BR 128         /* query rows per block */
#endif
#ifndef BC
#define BC 256         /* keys per tile */
#endif
#define STRIP 32       /* query rows per strip where a tile crosses the causal diagonal */

typedef struct {
  int64_t B, A, Tq, Tk, d;       /* varlen: B sequences, Tq = Tk = the longest */
  const int32_t *cu;             /* varlen: [B + 1] first rows of the sequences, else NULL */
  int64_t total;                 /* varlen: rows in all */
  const float *q, *k, *v;
  int64_t qs[3], ks[3], vs[3];   /* strides of batch, head, time (varlen: batch 0); last dim stride 1 */
  const float *bias;             /* [Bm, Tk] additive, or NULL */
  int64_t bias_bstride;          /* Tk, or 0 when the mask broadcasts over batch */
  const int32_t *tile_lo, *tile_hi;   /* [B, ntiles]: live key range of each tile, or NULL (no mask) */
  const int32_t *first_live;     /* causal with a mask: [B] first live key (Tk: none), else NULL */
  int64_t ntiles;
  int64_t grs;                   /* backward: floats between consecutive time rows of dq, dk, dv */
  int causal;
  float scale;
  attn_dropout drop;
} attn_ctx;

/* ---- where rows live ---- */

static inline int64_t seq_start(const attn_ctx *c, int64_t b) { return c->cu ? c->cu[b] : 0; }
static inline int64_t seq_len_q(const attn_ctx *c, int64_t b) { return c->cu ? c->cu[b + 1] - c->cu[b] : c->Tq; }
static inline int64_t seq_len_k(const attn_ctx *c, int64_t b) { return c->cu ? c->cu[b + 1] - c->cu[b] : c->Tk; }

/* Row (b, a, i) of a result (the output and the gradients), counted in rows
** of d.  Results are time-major, [B, T, A, d] in memory (varlen: [total, A,
** d]): a [B, A, T, d] result is a transposed view of it, so the layer's
** context [B, T, H] and the gradients of q, k, v (narrowed from one [B, T,
** 3H] projection) need no transposing copy.  Consecutive i are A rows apart
** (a result row stride of A * d floats). */
static inline int64_t res_row(const attn_ctx *c, int64_t b, int64_t a, int64_t i, int64_t T) {
  return c->cu ? (c->cu[b] + i) * c->A + a : (b * T + i) * c->A + a;
}
/* The first element of head a of batch row b in a gradient of q, k or v:
** time-major like the results, consecutive time rows c->grs floats apart
** (A * d, or 3 * A * d when the three are slices of one [B, T, 3H]
** gradient, bert_attention_qkv). */
static inline int64_t grad_at(const attn_ctx *c, int64_t b, int64_t a, int64_t T) {
  return (c->cu ? c->cu[b] : b * T) * c->grs + a * c->d;
}
/* The log-sum-exp of row (b, a, i): [B, A, Tq] or, varlen, [A, total]; consecutive i adjacent. */
static inline int64_t lse_at(const attn_ctx *c, int64_t b, int64_t a, int64_t i) {
  return c->cu ? a * c->total + c->cu[b] + i : (b * c->A + a) * c->Tq + i;
}

/* Keys [lo, hi) of tile t of batch row b for a block whose rows need the
** untrimmed tiles (full) or not. */
static inline void tile_range(const attn_ctx *c, int64_t b, int64_t t, int64_t tk, int full,
                              int64_t *lo, int64_t *hi) {
  if (c->tile_lo && !full) {
    *lo = c->tile_lo[b * c->ntiles + t];
    *hi = c->tile_hi[b * c->ntiles + t];
  } else {
    *lo = t * BC;
    *hi = *lo + BC < tk ? *lo + BC : tk;
  }
}

/* S[br x n] = scale * Q K^T + bias for keys lo .. lo + n - 1. */
static void scores(const attn_ctx *c, const float *Q, const float *K, const float *bias,
                   int64_t br, int64_t lo, int64_t n, float *S) {
  bert_sgemm_tile(0, 1, br, n, c->d, c->scale, Q, c->qs[2], K + lo * c->ks[2], c->ks[2], 0.0f, S, BC);
  if (bias) {
    for (int64_t i = 0; i < br; i++) {
      float *s = S + i * BC;
      for (int64_t j = 0; j < n; j++) s[j] += bias[lo + j];
    }
  }
}

/* The pieces of query block [i0, i0 + br) x key tile [lo, hi) that are
** formed: the whole block, or with the causal mask the tile cut at the
** block's last row and, where it crosses the diagonal, the block's rows in
** strips of STRIP, each over the keys up to its own last row.  piece_rows
** trims *hi and gives the rows per piece (0: nothing to do); piece_keys
** the keys of the piece whose rows end before row `end`. */
static inline int64_t piece_rows(const attn_ctx *c, int64_t i0, int64_t br, int64_t lo, int64_t *hi) {
  if (!c->causal) return *hi > lo ? br : 0;
  if (*hi > i0 + br) *hi = i0 + br;
  if (*hi <= lo) return 0;
  return *hi - 1 > i0 ? STRIP : br;
}

static inline int64_t piece_keys(const attn_ctx *c, int64_t end, int64_t lo, int64_t hi) {
  return (c->causal && hi > end ? end : hi) - lo;
}

/* Walks the pieces of query block [i0, i0 + br) over all key tiles: rows
** r0 .. r0 + rb - 1 of the block against keys lo .. lo + n - 1.  Start
** from PIECES_START; next_piece gives 0 after the last piece. */
typedef struct { int64_t t, hi, step, r0, rb, lo, n; } piece;
#define PIECES_START {-1, 0, 0, 0, 0, 0, 0}

static inline int next_piece(const attn_ctx *c, int64_t b, int64_t i0, int64_t br, int64_t tk, int full,
                             piece *p) {
  for (;;) {
    p->r0 += p->step;
    if (!p->step || p->r0 >= br) {   /* the next tile */
      if (++p->t * BC >= tk) return 0;
      tile_range(c, b, p->t, tk, full, &p->lo, &p->hi);
      p->step = piece_rows(c, i0, br, p->lo, &p->hi);
      p->r0 = 0;
      if (!p->step) continue;
    }
    p->rb = br - p->r0 < p->step ? br - p->r0 : p->step;
    p->n = piece_keys(c, i0 + p->r0 + p->rb, p->lo, p->hi);
    if (p->n > 0) return 1;
  }
}

/* Head a of batch row b: q, k, v from the sequence's first row, its bias row. */
typedef struct { const float *q, *k, *v, *bias; } head_view;

static inline head_view head_at(const attn_ctx *c, int64_t b, int64_t a) {
  int64_t st = seq_start(c, b);
  return (head_view){c->q + b * c->qs[0] + a * c->qs[1] + st * c->qs[2],
                     c->k + b * c->ks[0] + a * c->ks[1] + st * c->ks[2],
                     c->v + b * c->vs[0] + a * c->vs[1] + st * c->vs[2],
                     c->bias ? c->bias + b * c->bias_bstride : NULL};
}

/* S for rows i0 + r0 .. of one piece: scores, the causal mask where the
** piece reaches past its first row, the dropout multipliers into M. */
static void piece_scores(const attn_ctx *c, int64_t bh, const float *Q, const float *K, const float *bias,
                         int64_t q0, int64_t rb, int64_t lo, int64_t n, float *S, float *M) {
  scores(c, Q, K, bias, rb, lo, n, S);
  if (c->causal && lo + n - 1 > q0) attn_tile_causal(S, BC, q0, rb, lo, n);
  if (M) attn_tile_dropout(&c->drop, bh, q0, rb, lo, n, M, BC);
}

static void forward_block(const attn_ctx *c, int64_t b, int64_t a, int64_t i0, float *O, float *lse,
                          float *S, float *M, float *mrow, float *lrow) {
  int64_t d = c->d, bh = b * c->A + a, tq = seq_len_q(c, b), tk = seq_len_k(c, b);
  int64_t br = i0 + BR <= tq ? BR : tq - i0, ldo = c->A * d;
  head_view h = head_at(c, b, a);
  const float *Q = h.q + i0 * c->qs[2];
  float *Ob = O + res_row(c, b, a, i0, c->Tq) * d;
  int full = c->first_live && i0 < c->first_live[b];
  /* Without the causal mask every piece is the whole block: the first one
  ** writes O (GEMM beta 0) instead of adding to zeroed rows. */
  int started = c->causal;
  if (c->causal) attn_rows_start(Ob, ldo, br, d, mrow, lrow);
  else for (int64_t i = 0; i < br; i++) { mrow[i] = -INFINITY; lrow[i] = 0.0f; }
  for (piece p = PIECES_START; next_piece(c, b, i0, br, tk, full, &p);) {
    float *Sr = S + p.r0 * BC, *Mr = c->drop.on ? M + p.r0 * BC : NULL;
    piece_scores(c, bh, Q + p.r0 * c->qs[2], h.k, h.bias, i0 + p.r0, p.rb, p.lo, p.n, Sr, Mr);
    attn_tile_forward(Sr, BC, p.rb, p.n, Mr, h.v + p.lo * c->vs[2], c->vs[2], d, Ob + p.r0 * ldo, ldo,
                      mrow + p.r0, lrow + p.r0, !started);
    started = 1;
  }
  if (!started) attn_rows_start(Ob, ldo, br, d, mrow, lrow);   /* no keys at all */
  attn_rows_finish(Ob, ldo, br, d, mrow, lrow, lse + lse_at(c, b, a, i0), 1);
}

/* Zeroes rows [lo, hi) of d floats, row stride ld. */
static void zero_rows(float *X, int64_t ld, int64_t lo, int64_t hi, int64_t d) {
  for (int64_t i = lo; i < hi; i++) memset(X + i * ld, 0, (size_t)d * sizeof(float));
}

/* One (batch, head): dQ, dK, dV rows of that head, which are the worker's
** alone (a zeroed tensor of their size would be fresh pages from the kernel
** every step).  Without the causal mask every query block sees the same
** trimmed key tiles, whole: a block's first tile writes its dQ rows and the
** first block writes each tile's dK, dV rows (GEMM beta 0), and only the
** rows no tile reaches (dead keys) are zeroed.  With it, pieces cover
** uneven rows: all three are zeroed first and accumulated into. */
static void backward_head(const attn_ctx *c, int64_t b, int64_t a, const float *O, const float *dO,
                          const float *lse, float *dQ, float *dK, float *dV, float *S, float *M,
                          float *dP, float *Dv) {
  int64_t d = c->d, bh = b * c->A + a, tq = seq_len_q(c, b), tk = seq_len_k(c, b);
  int64_t ld = c->A * d, gld = c->grs;
  head_view h = head_at(c, b, a);
  int64_t qrow = res_row(c, b, a, 0, c->Tq);
  const float *Oh = O + qrow * d, *dOh = dO + qrow * d, *L = lse + lse_at(c, b, a, 0);
  float *dQh = dQ + grad_at(c, b, a, c->Tq), *dKh = dK + grad_at(c, b, a, c->Tk), *dVh = dV + grad_at(c, b, a, c->Tk);
  if (c->causal || tq == 0) {
    zero_rows(dQh, gld, 0, tq, d);
    zero_rows(dKh, gld, 0, tk, d);
    zero_rows(dVh, gld, 0, tk, d);
  } else {
    for (int64_t t = 0; t * BC < tk; t++) {   /* the dead keys around each tile's live range */
      int64_t lo, hi, end = t * BC + BC < tk ? t * BC + BC : tk;
      tile_range(c, b, t, tk, 0, &lo, &hi);
      if (hi <= lo) lo = hi = end;
      zero_rows(dKh, gld, t * BC, lo, d);
      zero_rows(dVh, gld, t * BC, lo, d);
      zero_rows(dKh, gld, hi, end, d);
      zero_rows(dVh, gld, hi, end, d);
    }
  }
  attn_rows_dot(Oh, ld, dOh, ld, tq, d, Dv);
  for (int64_t i0 = 0; i0 < tq; i0 += BR) {
    int64_t br = i0 + BR <= tq ? BR : tq - i0;
    int full = c->first_live && i0 < c->first_live[b];
    int q_started = c->causal;
    for (piece p = PIECES_START; next_piece(c, b, i0, br, tk, full, &p);) {
      int64_t q0 = i0 + p.r0, lo = p.lo;
      float *Sr = S + p.r0 * BC, *Mr = c->drop.on ? M + p.r0 * BC : NULL;
      const float *Q = h.q + q0 * c->qs[2];
      piece_scores(c, bh, Q, h.k, h.bias, q0, p.rb, lo, p.n, Sr, Mr);
      attn_bwd_rows rows = {Q, dOh + q0 * ld, L + q0, Dv + q0, dQh + q0 * gld, c->qs[2], ld, gld};
      attn_bwd_keys keys = {h.k + lo * c->ks[2], h.v + lo * c->vs[2], dKh + lo * gld, dVh + lo * gld,
                            c->ks[2], c->vs[2], gld};
      attn_tile_backward(Sr, Mr, dP + p.r0 * BC, BC, p.rb, p.n, &rows, &keys, c->scale, d, !q_started,
                         !c->causal && i0 == 0);
      q_started = 1;
    }
    if (!q_started) zero_rows(dQh, gld, i0, i0 + br, d);   /* no keys at all */
  }
}

/* Threads run the tile GEMMs single-threaded (OpenBLAS would otherwise
** start its own pool inside ours). */

/* The context of one call: q, k, v made BLAS-ready, the additive bias
** and the live key ranges of each tile (recomputed by backward, so that
** nothing but the log-sum-exp is kept between the passes), and the
** forward's work items: blocks of BR query rows, blk_first[b] the first
** block of batch row b. */
typedef struct {
  attn_ctx c;
  bert_tensor *q, *k, *v;
  float *bias;
  int32_t *ranges;
  int64_t *blk_first;
} attn_setup;

static void setup_free(attn_setup *a) {
  bert_tensor_release(a->q);
  bert_tensor_release(a->k);
  bert_tensor_release(a->v);
  free(a->bias);
  free(a->ranges);
  free(a->blk_first);
}

/* Arguments checked by the front-end (core/nn.c): 4-D q, k, v, or 3-D
** [total, A, d] with o->cu_seqlens a contiguous int32 [B + 1] on the host
** (no mask then) and o->max_seqlen its longest sequence. */
static int setup(attn_setup *a, const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                 const bert_attention_opts *o, bert_stream s) {
  memset(a, 0, sizeof *a);
  attn_ctx *c = &a->c;
  int varlen = o->cu_seqlens != NULL;
  if (varlen) {
    c->cu = bert_i32(o->cu_seqlens);
    c->B = o->cu_seqlens->shape[0] - 1;
    c->A = q->shape[1];
    c->Tq = c->Tk = o->max_seqlen;
    c->d = q->shape[2];
    c->total = q->shape[0];
  } else {
    c->B = q->shape[0]; c->A = q->shape[1]; c->Tq = q->shape[2]; c->d = q->shape[3]; c->Tk = k->shape[2];
  }
  int64_t B = c->B, Tk = c->Tk, d = c->d;
  int64_t Bm = o->mask ? o->mask->shape[0] : 0, ntiles = (Tk + BC - 1) / BC;
  a->q = attn_blas_ready(q);
  a->k = attn_blas_ready(k);
  a->v = attn_blas_ready(v);
  a->bias = o->mask ? malloc((size_t)(Bm * Tk + 1) * sizeof(float)) : NULL;
  a->ranges = o->mask ? malloc((size_t)(2 * B * ntiles + B + 1) * sizeof(int32_t)) : NULL;
  a->blk_first = malloc((size_t)(B + 1) * sizeof(int64_t));
  if (!a->q || !a->k || !a->v || (o->mask && (!a->bias || !a->ranges)) || !a->blk_first) {
    if ((o->mask && (!a->bias || !a->ranges)) || !a->blk_first) bert_set_error("attention: out of memory");
    setup_free(a);
    return -1;
  }
  c->q = bert_f32(a->q); c->k = bert_f32(a->k); c->v = bert_f32(a->v);
  attn_strides(a->q, c->qs); attn_strides(a->k, c->ks); attn_strides(a->v, c->vs);
  c->scale = attn_scale(o, d);
  c->causal = o->causal != 0;
  c->ntiles = ntiles;
  c->grs = c->A * d;
  int nonzero = 0;
  if (o->mask) {
    attn_mask_fill(o, Bm * Tk, a->bias);
    for (int64_t i = 0; i < Bm * Tk && !nonzero; i++) nonzero = a->bias[i] != 0.0f;
  }
  if (nonzero) {   /* a mask of all ones (no padding) adds nothing: no bias pass per tile */
    c->bias_bstride = Bm == 1 ? 0 : Tk;
    c->bias = a->bias;
    int32_t *first = c->causal ? a->ranges + 2 * B * ntiles : NULL;
    attn_tile_ranges(a->bias, c->bias_bstride, B, Tk, BC, ntiles, a->ranges, first);
    c->tile_lo = a->ranges;
    c->tile_hi = a->ranges + B * ntiles;
    c->first_live = first;
  }
  a->blk_first[0] = 0;
  for (int64_t b = 0; b < B; b++) a->blk_first[b + 1] = a->blk_first[b] + (seq_len_q(c, b) + BR - 1) / BR;
  attn_dropout_init(&c->drop, o->training ? o->dropout_p : 0.0, s, c->Tq, c->Tk);
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
    backward_head(j->c, bh / j->c->A, bh % j->c->A, j->O, j->dO, j->LSE, j->DQ, j->DK, j->DV, S,
                  S + BR * BC, S + 2 * BR * BC, S + 3 * BR * BC);
}

/* The forward's share: blocks of BR query rows; item it is block
** it / A (counted over all batch rows) of head it % A. */
typedef struct {
  const attn_ctx *c;
  float *O, *LSE, *scratch;
  size_t per;
  const int64_t *blk_first;
} forward_job;

static void forward_blocks(void *p, int64_t lo, int64_t hi) {
  const forward_job *j = p;
  const attn_ctx *c = j->c;
  float *S = j->scratch + (size_t)bert_parallel_thread() * j->per;
  int64_t b = 0;
  for (int64_t it = lo; it < hi; it++) {
    int64_t g = it / c->A, a = it % c->A;
    if (g < j->blk_first[b] || g >= j->blk_first[b + 1]) {   /* the batch row holding block g */
      int64_t l = 0, h = c->B;
      while (h - l > 1) { int64_t m = (l + h) / 2; if (j->blk_first[m] <= g) l = m; else h = m; }
      b = l;
      while (j->blk_first[b + 1] <= g) b++;   /* skip empty sequences */
    }
    forward_block(c, b, a, (g - j->blk_first[b]) * BR, j->O, j->LSE, S, S + BR * BC, S + 2 * BR * BC,
                  S + 2 * BR * BC + BR);
  }
}

/* A result: [B, A, T, d] as a view of time-major [B, T, A, d] memory
** (res_row), or [total, A, d] with cu_seqlens. */
static bert_tensor *result_like(const attn_ctx *c, int64_t T) {
  int64_t s4[4] = {c->B, T, c->A, c->d}, s3[3] = {c->total, c->A, c->d};
  int nd = c->cu ? 3 : 4;
  const int64_t *shape = c->cu ? s3 : s4;
  bert_tensor *t = bert_tensor_empty(BERT_F32, nd, shape);
  if (t == NULL || c->cu) return t;
  bert_tensor *view = bert_transpose(t, 1, 2);
  bert_tensor_release(t);
  return view;
}

/* t (the forward's output, or the gradient arriving for it) in the result
** layout: t itself when it is laid out so (the usual case: the context's
** gradient is a transposed view of a [B, T, H] gradient), else a copy. */
static bert_tensor *in_result_layout(const attn_ctx *c, const bert_tensor *t, int64_t T) {
  int64_t A = c->A, d = c->d;
  int ok = t->stride[t->ndim - 1] == 1 || d == 1;
  if (c->cu) ok = ok && (c->total == 1 || t->stride[0] == A * d) && (A == 1 || t->stride[1] == d);
  else ok = ok && (c->B == 1 || t->stride[0] == T * A * d) && (A == 1 || t->stride[1] == d) &&
            (T == 1 || t->stride[2] == A * d);
  if (ok) {
    bert_tensor_retain((bert_tensor *)t);
    return (bert_tensor *)t;
  }
  bert_tensor *r = result_like(c, T);
  if (r && bert_copy_(r, t) != 0) {
    bert_tensor_release(r);
    return NULL;
  }
  return r;
}

/* The backward of a set-up call into DQ, DK, DV (laid out as grad_at says). */
static int backward_run(attn_ctx *c, const bert_tensor *out, const bert_tensor *lse, const bert_tensor *gout,
                        float *DQ, float *DK, float *DV) {
  bert_tensor *oc = in_result_layout(c, out, c->Tq), *gc = in_result_layout(c, gout, c->Tq);
  int rc = -1;
  int nt = bert_parallel_width();
  size_t per = (size_t)3 * BR * BC + (size_t)c->Tq;
  float *scratch = oc && gc ? malloc((size_t)nt * per * sizeof(float)) : NULL;
  if (oc && gc && scratch == NULL) bert_set_error("attention backward: out of memory");
  if (scratch) {
    backward_job job = {c, bert_f32(oc), bert_f32(gc), bert_f32(lse), DQ, DK, DV, scratch, per};
    bert_parallel_for(c->B * c->A, 1, backward_heads, &job);
    rc = 0;
  }
  free(scratch);
  bert_tensor_release(oc);
  bert_tensor_release(gc);
  return rc;
}

int cpu_attention_backward(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                           const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                           const bert_tensor *lse, const bert_tensor *gout,
                           bert_tensor **dq_out, bert_tensor **dk_out, bert_tensor **dv_out) {
  attn_setup a;
  if (setup(&a, q_in, k_in, v_in, o, s) != 0) return -1;
  attn_ctx c = a.c;
  bert_tensor *dq = result_like(&c, c.Tq), *dk = result_like(&c, c.Tk), *dv = result_like(&c, c.Tk);
  int rc = -1;
  if (dq && dk && dv && backward_run(&c, out, lse, gout, bert_f32(dq), bert_f32(dk), bert_f32(dv)) == 0) {
    *dq_out = dq; *dk_out = dk; *dv_out = dv;
    dq = dk = dv = NULL;
    rc = 0;
  }
  bert_tensor_release(dq);
  bert_tensor_release(dk);
  bert_tensor_release(dv);
  setup_free(&a);
  return rc;
}

/* Does g (a gradient view handed in) lie as grad_at expects, rows rs apart? */
static int grad_view_ok(const attn_ctx *c, const bert_tensor *g, int64_t T, int64_t rs) {
  if (c->cu) return g->ndim == 3 && g->stride[2] == 1 && g->stride[1] == c->d && g->stride[0] == rs;
  return g->ndim == 4 && g->stride[3] == 1 && g->stride[1] == c->d && g->stride[2] == rs &&
         g->stride[0] == T * rs;
}

int cpu_attention_backward_into(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                                const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                                const bert_tensor *lse, const bert_tensor *gout,
                                bert_tensor *dq, bert_tensor *dk, bert_tensor *dv) {
  attn_setup a;
  if (setup(&a, q_in, k_in, v_in, o, s) != 0) return -1;
  attn_ctx c = a.c;
  c.grs = dq->ndim == 3 ? dq->stride[0] : dq->stride[2];
  int rc = -1;
  if (!grad_view_ok(&c, dq, c.Tq, c.grs) || !grad_view_ok(&c, dk, c.Tk, c.grs) ||
      !grad_view_ok(&c, dv, c.Tk, c.grs))
    bert_set_error("attention backward: the gradient views of q, k and v must be time-major slices of "
                   "one buffer (head stride %lld, time rows %lld floats apart)", (long long)c.d, (long long)c.grs);
  else rc = backward_run(&c, out, lse, gout, bert_f32(dq), bert_f32(dk), bert_f32(dv));
  setup_free(&a);
  return rc;
}

bert_tensor *cpu_attention(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                           const bert_attention_opts *o, bert_stream s, bert_tensor **lse_out) {
  attn_setup a;
  if (setup(&a, q_in, k_in, v_in, o, s) != 0) return NULL;
  attn_ctx *c = &a.c;
  int64_t nl = c->cu ? c->A * c->total : c->B * c->A * c->Tq;
  bert_tensor *out = result_like(c, c->Tq), *lse = bert_tensor_empty(BERT_F32, 1, &nl);
  float *scratch = NULL;
  if (out == NULL || lse == NULL) goto fail;
  int64_t items = a.blk_first[c->B] * c->A;
  int nt = bert_parallel_width();
  size_t per = (size_t)2 * BR * BC + 2 * BR;
  scratch = malloc((size_t)nt * per * sizeof(float));
  if (scratch == NULL) { bert_set_error("attention: out of memory"); goto fail; }
  forward_job job = {c, bert_f32(out), bert_f32(lse), scratch, per, a.blk_first};
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
