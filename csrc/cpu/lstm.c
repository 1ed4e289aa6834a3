/*
** One LSTM layer, one direction, on the CPU (bert_lstm in core/nn.h).
**
** Forward: the input projection of every step is one GEMM (x w_ih^T + b,
** [B*T, 4H]); then each step is one GEMM of the running sequences' states
** with w_hh (and one with w_hr when h is projected) and a fused pass over
** the gates (i, f, g, o as PyTorch), split over the pool.  A sequence b runs
** over its own positions 0 .. len_b - 1 (right to left when reverse), so
** its state never sees a padded step.  The states are kept in the order of
** decreasing length: at step s the sequences still running are the first
** rows, and only they enter the step's GEMMs (a finished row keeps its
** final state untouched below them).
**
** Saved state ws: the activated gates G [B, T, 4H], the cell C [B, T, H]
** (after clipping), with a projection r = o * tanh(c) R [B, T, H] and,
** with proj_clip, the projection before clipping P [B, T, O] (its
** gradient is zero where clipped); C, R and P zero at padded positions.
** Backward runs the steps in the reverse order, collecting the
** pre-activation gradients of every position in dA [B, T, 4H]: the weight
** and input gradients are then a few big GEMMs.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"
#include "cpu/nn_internal.h"

enum { LX, LH0, LC0, LWIH, LWHH, LB, LWHR, LLEN };

typedef struct {
  int64_t B, T, I, H, O;   /* O: the state's width, P with a projection, else H */
  int64_t row;             /* T*O + O + H: one sequence's packed output */
  int reverse;
  float clip, proj_clip;   /* 0: none */
  const int32_t *len;      /* NULL: every sequence has T steps */
} lstm_dims;

static lstm_dims dims_of(const bert_tensor *const t[8], const bert_lstm_opts *o) {
  lstm_dims d;
  d.B = t[LX]->shape[0];
  d.T = t[LX]->shape[1];
  d.I = t[LX]->shape[2];
  d.H = t[LWIH]->shape[0] / 4;
  d.O = t[LWHR] ? t[LWHR]->shape[0] : d.H;
  d.row = d.T * d.O + d.O + d.H;
  d.reverse = o->reverse;
  d.clip = (float)o->clip;
  d.proj_clip = (float)o->proj_clip;
  d.len = t[LLEN] ? bert_i32(t[LLEN]) : NULL;
  return d;
}

static int64_t seq_len(const lstm_dims *d, int64_t b) { return d->len ? d->len[b] : d->T; }

/* The position of step s of sequence b (s < its length). */
static int64_t step_pos(const lstm_dims *d, int64_t b, int64_t s) {
  return d->reverse ? seq_len(d, b) - 1 - s : s;
}

/* The position of the step before position p of sequence b, or -1 at its first step. */
static int64_t prev_pos(const lstm_dims *d, int64_t b, int64_t p) {
  int64_t q = d->reverse ? p + 1 : p - 1;
  return q >= 0 && q < seq_len(d, b) ? q : -1;
}

/* sigmoid and tanh from nn_expf (vectorisable; relative error a few ulp) */
static inline float sigmoid_f(float x) {
  float e = nn_expf(-fabsf(x));
  return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

static float *zalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static bert_tensor *zeros_f32(int ndim, const int64_t *shape) {
  bert_tensor *t = bert_tensor_empty(BERT_F32, ndim, shape);
  if (t) memset(bert_f32(t), 0, (size_t)bert_numel(t) * sizeof(float));
  return t;
}

/* One step's gate pass, over the elements [lo, hi) of its [n, H] grid of
** running rows: forward writes the activated gates over the
** pre-activations, the cell, and r = o * tanh(c) twice (saved, and the
** state row the next GEMM reads); backward the gate gradients (the step's
** rows for the GEMM with w_hh, and dA) and the cell's gradient. */
typedef struct {
  const lstm_dims *d;
  const int32_t *order;
  int64_t s;
  const float *z, *dr, *c0, *zero;   /* z [n, 4H]; dr [n, H]; c0, zero [.., H] */
  float *G, *C, *R, *Y;
  float *cs, *rs;                    /* [B, H]: cell rows; r rows (w_hr's input, or the unprojected state) */
  float *dstep, *dA;                 /* backward: [n, 4H], [B, T, 4H] */
} step_job;

static inline void gates_forward_row(const float *restrict zb, float *restrict g, float *restrict c,
                                     float *restrict cb, float *restrict r, float *restrict rs, int64_t H,
                                     int64_t j0, int64_t j1, float clip) {
  #pragma omp simd
  for (int64_t j = j0; j < j1; j++) {
    float ig = sigmoid_f(g[j] + zb[j]), fg = sigmoid_f(g[H + j] + zb[H + j]);
    float gg = nn_tanhf(g[2 * H + j] + zb[2 * H + j]), og = sigmoid_f(g[3 * H + j] + zb[3 * H + j]);
    float cn = fg * cb[j] + ig * gg;
    if (clip > 0) cn = cn > clip ? clip : cn < -clip ? -clip : cn;
    g[j] = ig; g[H + j] = fg; g[2 * H + j] = gg; g[3 * H + j] = og;
    c[j] = cb[j] = cn;
    r[j] = rs[j] = og * nn_tanhf(cn);
  }
}

static void gates_forward(void *p, int64_t lo, int64_t hi) {
  const step_job *k = p;
  const lstm_dims *d = k->d;
  const int64_t H = d->H, G4 = 4 * H;
  while (lo < hi) {
    const int64_t i = lo / H, j0 = lo % H, j1 = hi - lo < H - j0 ? j0 + (hi - lo) : H;
    const int64_t b = k->order[i], pos = step_pos(d, b, k->s), at = b * d->T + pos;
    float *r = k->R ? k->R + at * H : k->Y + b * d->row + pos * d->O;
    gates_forward_row(k->z + i * G4, k->G + at * G4, k->C + at * H, k->cs + i * H, r, k->rs + i * H, H, j0, j1,
                      d->clip);
    lo += j1 - j0;
  }
}

static inline void gates_backward_row(const float *restrict g, const float *restrict c, const float *restrict cp,
                                      const float *restrict dr, float *restrict dcb, float *restrict ab,
                                      float *restrict da, int64_t H, int64_t j0, int64_t j1, float clip) {
  #pragma omp simd
  for (int64_t j = j0; j < j1; j++) {
    const float ig = g[j], fg = g[H + j], gg = g[2 * H + j], og = g[3 * H + j];
    const float tc = nn_tanhf(c[j]);
    float dc = dcb[j] + dr[j] * og * (1 - tc * tc);
    /* clamp passes the gradient where |c| <= clip before clipping (as torch.clamp) */
    if (clip > 0 && !(fabsf(fg * cp[j] + ig * gg) <= clip)) dc = 0;
    da[j] = ab[j] = dc * gg * ig * (1 - ig);
    da[H + j] = ab[H + j] = dc * cp[j] * fg * (1 - fg);
    da[2 * H + j] = ab[2 * H + j] = dc * ig * (1 - gg * gg);
    da[3 * H + j] = ab[3 * H + j] = dr[j] * tc * og * (1 - og);
    dcb[j] = dc * fg;
  }
}

static void gates_backward(void *p, int64_t lo, int64_t hi) {
  const step_job *k = p;
  const lstm_dims *d = k->d;
  const int64_t H = d->H, G4 = 4 * H;
  while (lo < hi) {
    const int64_t i = lo / H, j0 = lo % H, j1 = hi - lo < H - j0 ? j0 + (hi - lo) : H;
    const int64_t b = k->order[i], pos = step_pos(d, b, k->s), q = prev_pos(d, b, pos), at = b * d->T + pos;
    const float *cp = q >= 0 ? k->C + (b * d->T + q) * H : k->c0 ? k->c0 + b * H : k->zero;
    gates_backward_row(k->G + at * G4, k->C + at * H, cp, k->dr + i * H, k->cs + i * H, k->dstep + i * G4,
                       k->dA + at * G4, H, j0, j1, d->clip);
    lo += j1 - j0;
  }
}

/* about this many flops per gate element (five exps and divisions) */
#define GATE_COST 64

static void step_pass(int64_t n, const lstm_dims *d, bert_range_fn fn, step_job *job) {
  bert_parallel_for(n * d->H, bert_parallel_grain(GATE_COST), fn, job);
}

bert_tensor *cpu_lstm(const bert_tensor *const t[8], const bert_lstm_opts *o, bert_tensor **ws_out) {
  const lstm_dims d = dims_of(t, o);
  const int64_t B = d.B, T = d.T, H = d.H, O = d.O, G4 = 4 * H, BT = B * T;
  const int proj = t[LWHR] != NULL;
  int64_t oshape[2] = {B, d.row}, wsn = BT * (G4 + H + (proj ? H : 0) + (d.proj_clip > 0 ? O : 0));
  bert_tensor *out = zeros_f32(2, oshape), *ws = zeros_f32(1, &wsn);
  /* hs, cs: the state rows in length order; rstep: the step's r rows (projection) */
  float *hs = zalloc(B * O), *cs = zalloc(B * H), *z = zalloc(B * G4), *rstep = proj ? zalloc(B * H) : NULL;
  int32_t *order = malloc((size_t)(B > 0 ? B : 1) * sizeof *order);
  if (!out || !ws || !hs || !cs || !z || (proj && !rstep) || !order || bert_lstm_row_order(d.len, B, T, order) != 0) {
    if (out && ws) bert_set_error("lstm: out of memory for the %lld x %lld state", (long long)B, (long long)G4);
    bert_tensor_release(out);
    bert_tensor_release(ws);
    out = NULL;
    goto done;
  }
  float *Y = bert_f32(out), *G = bert_f32(ws), *C = G + BT * G4, *R = proj ? C + BT * H : NULL;
  float *P = d.proj_clip > 0 ? R + BT * H : NULL;
  const float *h0 = t[LH0] ? bert_f32(t[LH0]) : NULL, *c0 = t[LC0] ? bert_f32(t[LC0]) : NULL;
  if (t[LB])
    for (int64_t r = 0; r < BT; r++) memcpy(G + r * G4, bert_f32(t[LB]), (size_t)G4 * sizeof(float));
  bert_sgemm(0, 1, BT, G4, d.I, 1.0f, bert_f32(t[LX]), d.I, bert_f32(t[LWIH]), d.I, t[LB] ? 1.0f : 0.0f, G, G4);
  for (int64_t i = 0; i < B; i++) {
    if (h0) memcpy(hs + i * O, h0 + order[i] * O, (size_t)O * sizeof(float));
    if (c0) memcpy(cs + i * H, c0 + order[i] * H, (size_t)H * sizeof(float));
  }
  step_job job = {&d, order, 0, z, NULL, NULL, NULL, G, C, R, Y, cs, proj ? rstep : hs, NULL, NULL};
  int64_t n = B;   /* the sequences running at step s: rows 0 .. n - 1 */
  for (int64_t s = 0;; s++) {
    while (n > 0 && seq_len(&d, order[n - 1]) <= s) n--;
    if (n == 0) break;
    bert_sgemm(0, 1, n, G4, O, 1.0f, hs, O, bert_f32(t[LWHH]), O, 0.0f, z, G4);
    job.s = s;
    step_pass(n, &d, gates_forward, &job);
    if (!proj) continue;
    bert_sgemm(0, 1, n, O, H, 1.0f, rstep, H, bert_f32(t[LWHR]), H, 0.0f, hs, O);
    for (int64_t i = 0; i < n; i++) {
      const int64_t b = order[i], pos = step_pos(&d, b, s);
      float *hb = hs + i * O;
      if (P) {
        memcpy(P + (b * T + pos) * O, hb, (size_t)O * sizeof(float));
        for (int64_t j = 0; j < O; j++) hb[j] = hb[j] > d.proj_clip ? d.proj_clip
                                                : hb[j] < -d.proj_clip ? -d.proj_clip : hb[j];
      }
      memcpy(Y + b * d.row + pos * O, hb, (size_t)O * sizeof(float));
    }
  }
  for (int64_t i = 0; i < B; i++) {
    memcpy(Y + order[i] * d.row + T * O, hs + i * O, (size_t)O * sizeof(float));
    memcpy(Y + order[i] * d.row + T * O + O, cs + i * H, (size_t)H * sizeof(float));
  }
  *ws_out = ws;
done:
  free(hs); free(cs); free(z); free(rstep); free(order);
  return out;
}

static int wants(bert_tensor *const in[7], int k) { return in[k] != NULL && in[k]->requires_grad; }

int cpu_lstm_backward(bert_tensor *const in[7], const bert_tensor *const t[8], const bert_lstm_opts *o,
                      const bert_tensor *ws, const bert_tensor *out, const bert_tensor *gout) {
  const lstm_dims d = dims_of(t, o);
  const int64_t B = d.B, T = d.T, I = d.I, H = d.H, O = d.O, G4 = 4 * H, BT = B * T;
  const int proj = t[LWHR] != NULL;
  const float *Y = bert_f32(out), *dY = bert_f32(gout), *G = bert_f32(ws), *C = G + BT * G4;
  const float *R = proj ? C + BT * H : NULL, *P = d.proj_clip > 0 ? R + BT * H : NULL;
  const float *h0 = t[LH0] ? bert_f32(t[LH0]) : NULL, *c0 = t[LC0] ? bert_f32(t[LC0]) : NULL;
  int rc = -1;
  /* the gradients, in the order of in; those of b, h0 and c0 by their shapes */
  const int64_t sb = G4, sh[2] = {B, O}, sc[2] = {B, H};
  bert_tensor *grad[7] = {NULL};
  for (int k = 0; k < 7; k++) {
    if (!wants(in, k)) continue;
    grad[k] = k == LB ? bert_tensor_empty(BERT_F32, 1, &sb) : k == LH0 ? bert_tensor_empty(BERT_F32, 2, sh)
            : k == LC0 ? bert_tensor_empty(BERT_F32, 2, sc) : bert_tensor_empty(BERT_F32, t[k]->ndim, t[k]->shape);
  }
  bert_tensor *dx = grad[LX], *dwih = grad[LWIH], *dwhh = grad[LWHH], *dwhr = grad[LWHR], *db = grad[LB];
  /* dA: pre-activation gate gradients of every position; dHall: those of
  ** the projected h (for dW_hr); prev: each position's recurrent input.
  ** dhs, dcs: the gradients of the state rows (length order, as forward) */
  float *dA = zalloc(BT * G4), *dHall = dwhr ? zalloc(BT * O) : NULL, *prev = dwhh ? zalloc(BT * O) : NULL;
  float *dhs = zalloc(B * O), *dcs = zalloc(B * H), *dh = zalloc(B * O), *dr = proj ? zalloc(B * H) : NULL;
  float *dstep = zalloc(B * G4), *zero = zalloc(H);
  int32_t *order = malloc((size_t)(B > 0 ? B : 1) * sizeof *order);
  for (int k = 0; k < 7; k++)
    if (wants(in, k) && grad[k] == NULL) goto done;   /* bert_tensor_empty said why */
  if (!dA || (dwhr && !dHall) || (dwhh && !prev) || !dhs || !dcs || !dh || (proj && !dr) || !dstep || !zero ||
      !order || bert_lstm_row_order(d.len, B, T, order) != 0) {
    bert_set_error("lstm backward: out of memory for the %lld x %lld x %lld gate gradients", (long long)B,
                   (long long)T, (long long)G4);
    goto done;
  }
  for (int64_t i = 0; i < B; i++) {   /* the gradients of h_n and c_n start the recursion */
    memcpy(dhs + i * O, dY + order[i] * d.row + T * O, (size_t)O * sizeof(float));
    memcpy(dcs + i * H, dY + order[i] * d.row + T * O + O, (size_t)H * sizeof(float));
  }
  if (prev)
    for (int64_t b = 0; b < B; b++)
      for (int64_t pos = 0; pos < seq_len(&d, b); pos++) {
        const int64_t q = prev_pos(&d, b, pos);
        const float *hp = q >= 0 ? Y + b * d.row + q * O : h0 ? h0 + b * O : NULL;
        if (hp) memcpy(prev + (b * T + pos) * O, hp, (size_t)O * sizeof(float));
      }
  step_job job = {&d, order, 0, NULL, proj ? dr : dh, c0, zero, (float *)G, (float *)C, NULL, NULL, dcs, NULL,
                dstep, dA};
  int64_t n = 0;   /* the sequences with a step s: rows 0 .. n - 1 */
  for (int64_t s = B > 0 ? seq_len(&d, order[0]) - 1 : -1; s >= 0; s--) {
    while (n < B && seq_len(&d, order[n]) > s) n++;
    /* dh: the gradient of this step's h (of the projection before clipping) */
    for (int64_t i = 0; i < n; i++) {
      const int64_t b = order[i], pos = step_pos(&d, b, s), at = b * T + pos;
      const float *dyb = dY + b * d.row + pos * O;
      float *hb = dh + i * O;
      for (int64_t j = 0; j < O; j++) hb[j] = dhs[i * O + j] + dyb[j];
      if (P)   /* as torch.clamp: the gradient passes where |h| <= proj_clip before clipping */
        for (int64_t j = 0; j < O; j++)
          if (!(fabsf(P[at * O + j]) <= d.proj_clip)) hb[j] = 0;
      if (dHall) memcpy(dHall + at * O, hb, (size_t)O * sizeof(float));
    }
    if (proj) bert_sgemm(0, 0, n, H, O, 1.0f, dh, O, bert_f32(t[LWHR]), H, 0.0f, dr, H);
    job.s = s;
    step_pass(n, &d, gates_backward, &job);
    bert_sgemm(0, 0, n, O, G4, 1.0f, dstep, G4, bert_f32(t[LWHH]), O, 0.0f, dhs, O);
  }
  if (dx) bert_sgemm(0, 0, BT, I, G4, 1.0f, dA, G4, bert_f32(t[LWIH]), I, 0.0f, bert_f32(dx), I);
  if (dwih) bert_sgemm(1, 0, G4, I, BT, 1.0f, dA, G4, bert_f32(t[LX]), I, 0.0f, bert_f32(dwih), I);
  if (dwhh) bert_sgemm(1, 0, G4, O, BT, 1.0f, dA, G4, prev, O, 0.0f, bert_f32(dwhh), O);
  if (dwhr) bert_sgemm(1, 0, O, H, BT, 1.0f, dHall, O, R, H, 0.0f, bert_f32(dwhr), H);
  if (db) {
    float *D = bert_f32(db);
    memset(D, 0, (size_t)G4 * sizeof(float));
    for (int64_t r = 0; r < BT; r++)
      for (int64_t j = 0; j < G4; j++) D[j] += dA[r * G4 + j];
  }
  for (int64_t i = 0; i < B; i++) {
    if (grad[LH0]) memcpy(bert_f32(grad[LH0]) + order[i] * O, dhs + i * O, (size_t)O * sizeof(float));
    if (grad[LC0]) memcpy(bert_f32(grad[LC0]) + order[i] * H, dcs + i * H, (size_t)H * sizeof(float));
  }
  rc = bert_accumulate_grads_steal(in, grad, 7);
done:
  for (int k = 0; k < 7; k++) bert_tensor_release(grad[k]);
  free(dA); free(dHall); free(prev); free(dhs); free(dcs); free(dh); free(dr); free(dstep); free(zero);
  free(order);
  return rc;
}
