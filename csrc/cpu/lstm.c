/*
** One LSTM layer, one direction, on the CPU (bert_lstm in core/nn.h).
**
** Forward: the input projection of every step is one GEMM (x w_ih^T + b,
** [B*T, 4H]); then each step is one GEMM of the batch's states with w_hh
** (and one with w_hr when h is projected) and a fused pass over the gates
** (i, f, g, o as PyTorch).  A sequence b runs over its own positions
** 0 .. len_b - 1 (right to left when reverse), so its state never sees a
** padded step: a row whose sequence is over keeps its final state while the
** others go on.
**
** Saved state ws: the activated gates G [B, T, 4H], the cell C [B, T, H]
** (after clipping), with a projection r = o * tanh(c) R [B, T, H] and,
** with proj_clip, the projection before clipping P [B, T, O] (its
** gradient is zero where clipped); zero at padded positions.  Backward runs the steps in the reverse order,
** collecting the pre-activation gradients of every position in dA
** [B, T, 4H]: the weight and input gradients are then a few big GEMMs.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "cpu/cpu.h"
#include "cpu/gemm.h"

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

static int64_t max_len(const lstm_dims *d) {
  int64_t m = 0;
  for (int64_t b = 0; b < d->B; b++) m = seq_len(d, b) > m ? seq_len(d, b) : m;
  return m;
}

/* The position of step s of sequence b (s < its length). */
static int64_t step_pos(const lstm_dims *d, int64_t b, int64_t s) {
  return d->reverse ? seq_len(d, b) - 1 - s : s;
}

/* The position of the step before position p of sequence b, or -1 at its first step. */
static int64_t prev_pos(const lstm_dims *d, int64_t b, int64_t p) {
  int64_t q = d->reverse ? p + 1 : p - 1;
  return q >= 0 && q < seq_len(d, b) ? q : -1;
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static float *zalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

static bert_tensor *zeros_f32(int ndim, const int64_t *shape) {
  bert_tensor *t = bert_tensor_empty(BERT_F32, ndim, shape);
  if (t) memset(bert_f32(t), 0, (size_t)bert_numel(t) * sizeof(float));
  return t;
}

bert_tensor *cpu_lstm(const bert_tensor *const t[8], const bert_lstm_opts *o, bert_tensor **ws_out) {
  const lstm_dims d = dims_of(t, o);
  const int64_t B = d.B, T = d.T, H = d.H, O = d.O, G4 = 4 * H, BT = B * T;
  const int proj = t[LWHR] != NULL;
  int64_t oshape[2] = {B, d.row}, wsn = BT * (G4 + H + (proj ? H : 0) + (d.proj_clip > 0 ? O : 0));
  bert_tensor *out = zeros_f32(2, oshape), *ws = zeros_f32(1, &wsn);
  float *hs = zalloc(B * O), *cs = zalloc(B * H), *z = zalloc(B * G4);
  float *rstep = proj ? zalloc(B * H) : NULL, *hp = proj ? zalloc(B * O) : NULL;
  if (!out || !ws || !hs || !cs || !z || (proj && (!rstep || !hp))) {
    if (out && ws) bert_set_error("lstm: out of memory for the %lld x %lld state", (long long)B, (long long)G4);
    bert_tensor_release(out);
    bert_tensor_release(ws);
    out = NULL;
    goto done;
  }
  float *Y = bert_f32(out), *G = bert_f32(ws), *C = G + BT * G4, *R = proj ? C + BT * H : NULL;
  float *P = d.proj_clip > 0 ? R + BT * H : NULL;
  const float *Whh = bert_f32(t[LWHH]);
  if (t[LB])
    for (int64_t r = 0; r < BT; r++) memcpy(G + r * G4, bert_f32(t[LB]), (size_t)G4 * sizeof(float));
  bert_sgemm(0, 1, BT, G4, d.I, 1.0f, bert_f32(t[LX]), d.I, bert_f32(t[LWIH]), d.I, t[LB] ? 1.0f : 0.0f, G, G4);
  if (t[LH0]) memcpy(hs, bert_f32(t[LH0]), (size_t)(B * O) * sizeof(float));
  if (t[LC0]) memcpy(cs, bert_f32(t[LC0]), (size_t)(B * H) * sizeof(float));
  const int64_t steps = max_len(&d);
  for (int64_t s = 0; s < steps; s++) {
    bert_sgemm(0, 1, B, G4, O, 1.0f, hs, O, Whh, O, 0.0f, z, G4);
    for (int64_t b = 0; b < B; b++) {
      if (s >= seq_len(&d, b)) continue;
      const int64_t p = step_pos(&d, b, s);
      float *g = G + (b * T + p) * G4, *c = C + (b * T + p) * H, *cb = cs + b * H;
      const float *zb = z + b * G4;
      float *r = proj ? R + (b * T + p) * H : Y + b * d.row + p * O;
      for (int64_t j = 0; j < H; j++) {
        float ig = sigmoidf(g[j] + zb[j]), fg = sigmoidf(g[H + j] + zb[H + j]);
        float gg = tanhf(g[2 * H + j] + zb[2 * H + j]), og = sigmoidf(g[3 * H + j] + zb[3 * H + j]);
        float cn = fg * cb[j] + ig * gg;
        if (d.clip > 0) cn = fminf(fmaxf(cn, -d.clip), d.clip);
        g[j] = ig; g[H + j] = fg; g[2 * H + j] = gg; g[3 * H + j] = og;
        c[j] = cb[j] = cn;
        r[j] = og * tanhf(cn);
      }
      if (proj) memcpy(rstep + b * H, r, (size_t)H * sizeof(float));
      else memcpy(hs + b * O, r, (size_t)O * sizeof(float));
    }
    if (!proj) continue;
    bert_sgemm(0, 1, B, O, H, 1.0f, rstep, H, bert_f32(t[LWHR]), H, 0.0f, hp, O);
    for (int64_t b = 0; b < B; b++) {
      if (s >= seq_len(&d, b)) continue;
      const int64_t p = step_pos(&d, b, s);
      float *hb = hp + b * O;
      if (P) {
        memcpy(P + (b * T + p) * O, hb, (size_t)O * sizeof(float));
        for (int64_t j = 0; j < O; j++) hb[j] = fminf(fmaxf(hb[j], -d.proj_clip), d.proj_clip);
      }
      memcpy(hs + b * O, hb, (size_t)O * sizeof(float));
      memcpy(Y + b * d.row + p * O, hb, (size_t)O * sizeof(float));
    }
  }
  for (int64_t b = 0; b < B; b++) {
    memcpy(Y + b * d.row + T * O, hs + b * O, (size_t)O * sizeof(float));
    memcpy(Y + b * d.row + T * O + O, cs + b * H, (size_t)H * sizeof(float));
  }
  *ws_out = ws;
done:
  free(hs); free(cs); free(z); free(rstep); free(hp);
  return out;
}

static int wants(bert_tensor *const in[7], int k) { return in[k] != NULL && in[k]->requires_grad; }

int cpu_lstm_backward(bert_tensor *const in[7], const bert_tensor *const t[8], const bert_lstm_opts *o,
                      const bert_tensor *ws, const bert_tensor *out, const bert_tensor *gout) {
  const lstm_dims d = dims_of(t, o);
  const int64_t B = d.B, T = d.T, I = d.I, H = d.H, O = d.O, G4 = 4 * H, BT = B * T;
  const int proj = t[LWHR] != NULL;
  const float *Y = bert_f32(out), *dY = bert_f32(gout), *G = bert_f32(ws), *C = G + BT * G4;
  const float *R = proj ? C + BT * H : NULL, *P = d.proj_clip > 0 ? R + BT * H : NULL, *Whh = bert_f32(t[LWHH]);
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
  ** the projected h (for dW_hr); prev: each position's recurrent input */
  float *dA = zalloc(BT * G4), *dHall = dwhr ? zalloc(BT * O) : NULL, *prev = dwhh ? zalloc(BT * O) : NULL;
  float *dhs = zalloc(B * O), *dcs = zalloc(B * H), *dh = zalloc(B * O), *dr = proj ? zalloc(B * H) : NULL;
  float *dstep = zalloc(B * G4), *tmp = zalloc(B * O);
  for (int k = 0; k < 7; k++)
    if (wants(in, k) && grad[k] == NULL) goto done;   /* bert_tensor_empty said why */
  if (!dA || (dwhr && !dHall) || (dwhh && !prev) || !dhs || !dcs || !dh || (proj && !dr) || !dstep || !tmp) {
    bert_set_error("lstm backward: out of memory for the %lld x %lld x %lld gate gradients", (long long)B,
                   (long long)T, (long long)G4);
    goto done;
  }
  for (int64_t b = 0; b < B; b++) {   /* the gradients of h_n and c_n start the recursion */
    memcpy(dhs + b * O, dY + b * d.row + T * O, (size_t)O * sizeof(float));
    memcpy(dcs + b * H, dY + b * d.row + T * O + O, (size_t)H * sizeof(float));
  }
  for (int64_t s = max_len(&d) - 1; s >= 0; s--) {
    /* dh: the gradient of this step's h, zero in rows whose sequence has no step s */
    for (int64_t b = 0; b < B; b++) {
      float *hb = dh + b * O;
      if (s >= seq_len(&d, b)) { memset(hb, 0, (size_t)O * sizeof(float)); continue; }
      const int64_t p = step_pos(&d, b, s);
      const float *dyb = dY + b * d.row + p * O;
      for (int64_t j = 0; j < O; j++) hb[j] = dhs[b * O + j] + dyb[j];
      if (P)   /* as torch.clamp: the gradient passes where |h| <= proj_clip before clipping */
        for (int64_t j = 0; j < O; j++)
          if (!(fabsf(P[(b * T + p) * O + j]) <= d.proj_clip)) hb[j] = 0;
      if (dHall) memcpy(dHall + (b * T + p) * O, hb, (size_t)O * sizeof(float));
    }
    if (proj) bert_sgemm(0, 0, B, H, O, 1.0f, dh, O, bert_f32(t[LWHR]), H, 0.0f, dr, H);
    const float *drs = proj ? dr : dh;
    for (int64_t b = 0; b < B; b++) {
      float *ab = dstep + b * G4, *cb = dcs + b * H;
      if (s >= seq_len(&d, b)) { memset(ab, 0, (size_t)G4 * sizeof(float)); continue; }
      const int64_t p = step_pos(&d, b, s), q = prev_pos(&d, b, p);
      const float *g = G + (b * T + p) * G4, *c = C + (b * T + p) * H;
      const float *cp = q >= 0 ? C + (b * T + q) * H : c0 ? c0 + b * H : NULL;
      for (int64_t j = 0; j < H; j++) {
        const float ig = g[j], fg = g[H + j], gg = g[2 * H + j], og = g[3 * H + j];
        const float tc = tanhf(c[j]), cpj = cp ? cp[j] : 0.0f, drj = drs[b * H + j];
        float dc = cb[j] + drj * og * (1 - tc * tc);
        /* clamp passes the gradient where |c| <= clip before clipping (as torch.clamp) */
        if (d.clip > 0 && !(fabsf(fg * cpj + ig * gg) <= d.clip)) dc = 0;
        ab[j] = dc * gg * ig * (1 - ig);
        ab[H + j] = dc * cpj * fg * (1 - fg);
        ab[2 * H + j] = dc * ig * (1 - gg * gg);
        ab[3 * H + j] = drj * tc * og * (1 - og);
        cb[j] = dc * fg;
      }
      memcpy(dA + (b * T + p) * G4, ab, (size_t)G4 * sizeof(float));
      if (prev) {
        const float *hp = q >= 0 ? Y + b * d.row + q * O : h0 ? h0 + b * O : NULL;
        if (hp) memcpy(prev + (b * T + p) * O, hp, (size_t)O * sizeof(float));
      }
    }
    bert_sgemm(0, 0, B, O, G4, 1.0f, dstep, G4, Whh, O, 0.0f, tmp, O);
    for (int64_t b = 0; b < B; b++)
      if (s < seq_len(&d, b)) memcpy(dhs + b * O, tmp + b * O, (size_t)O * sizeof(float));
  }
  if (dx) bert_sgemm(0, 0, BT, I, G4, 1.0f, dA, G4, bert_f32(t[LWIH]), I, 0.0f, bert_f32(dx), I);
  if (dwih) bert_sgemm(1, 0, G4, I, BT, 1.0f, dA, G4, bert_f32(t[LX]), I, 0.0f, bert_f32(dwih), I);
  if (dwhh) bert_sgemm(1, 0, G4, O, BT, 1.0f, dA, G4, prev, O, 0.0f, bert_f32(dwhh), O);
  if (dwhr) bert_sgemm(1, 0, O, H, BT, 1.0f, dHall, O, R, H, 0.0f, bert_f32(dwhr), H);
  if (db) {
    float *D = bert_f32(db);
    memset(D, 0, (size_t)G4 * sizeof(float));
    for (int64_t r = 0; r < BT; r++)
      for (int64_t k = 0; k < G4; k++) D[k] += dA[r * G4 + k];
  }
  if (grad[LH0]) memcpy(bert_f32(grad[LH0]), dhs, (size_t)(B * O) * sizeof(float));
  if (grad[LC0]) memcpy(bert_f32(grad[LC0]), dcs, (size_t)(B * H) * sizeof(float));
  rc = 0;
  for (int k = 0; k < 7; k++) {   /* each handed over (or released) once */
    if (grad[k] && rc == 0) rc = bert_accumulate_grad_steal(in[k], grad[k]);
    else bert_tensor_release(grad[k]);
    grad[k] = NULL;
  }
done:
  for (int k = 0; k < 7; k++) bert_tensor_release(grad[k]);
  free(dA); free(dHall); free(prev); free(dhs); free(dcs); free(dh); free(dr); free(dstep); free(tmp);
  return rc;
}
