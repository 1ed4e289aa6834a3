/*
** One LSTM layer, one direction, on Vulkan (bert_lstm; the algorithm of
** cpu/lstm.c): the input projection of every step is one GEMM, then each
** step is a GEMM of the running sequences' state rows with w_hh (and one
** with w_hr when h is projected) and a pass of lstm.comp over the gates.
** The state rows are kept longest sequence first (the order is uploaded
** with the lengths), so the step's GEMMs take the running rows only.
** Backward runs the steps in the reverse order into the pre-activation
** gradients dA of every position; the weight and input gradients are then
** a few big GEMMs.  Everything is recorded; nothing waits on the host.
**
** Saved state ws: the activated gates, the cells, with a projection r and
** (proj_clip) the projection before clipping, and each position's
** recurrent input: the layout lstm.comp describes.
*/
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "vulkan/vk_kernels.h"
#include "vulkan/vk_opcodes.h"

enum { LX, LH0, LC0, LWIH, LWHH, LB, LWHR, LLEN };

typedef struct {
  uint32_t mode, flags, B, T, H, O, s, n;
  uint32_t oC, oR, oP, oHp, oCS, oZ, oRR, oDH, oDHA;
  float clip, pclip;
} lstm_push;

/* What forward and backward share: the sizes, the offsets of lstm.comp's
** layouts, the order of the state rows (host) with the lengths, and the
** device tensors of the order and lengths and of the work rows. */
typedef struct {
  int64_t B, T, I, H, O, ws_n, da_n;
  int32_t *order, *len;   /* host: [B] each */
  bert_tensor *meta, *work;
  lstm_push p;
} lstm_plan;

static void plan_free(lstm_plan *pl) {
  free(pl->order);
  bert_tensor_release(pl->meta);
  bert_tensor_release(pl->work);
}

/* The device may bind each of t whole (lstm.comp is not split). */
static int binds_fit(const char *fname, int n, const bert_tensor *const *t) {
  for (int i = 0; i < n; i++)
    if (t[i] && vk_bind_of(t[i]).len > vk_max_bind()) {
      bert_set_error("%s: vulkan: a tensor of %lld floats exceeds the device's binding range (%zu bytes)", fname,
                     (long long)bert_numel(t[i]), vk_max_bind());
      return -1;
    }
  return 0;
}

static int plan_init(lstm_plan *pl, const char *fname, const bert_tensor *const t[8], const bert_lstm_opts *o) {
  memset(pl, 0, sizeof *pl);
  const int64_t B = t[LX]->shape[0], T = t[LX]->shape[1], H = t[LWIH]->shape[0] / 4;
  const int64_t O = t[LWHR] ? t[LWHR]->shape[0] : H, BT = B * T;
  pl->B = B; pl->T = T; pl->I = t[LX]->shape[2]; pl->H = H; pl->O = O;
  lstm_push *p = &pl->p;
  p->B = (uint32_t)B; p->T = (uint32_t)T; p->H = (uint32_t)H; p->O = (uint32_t)O;
  p->clip = (float)o->clip;
  p->pclip = (float)o->proj_clip;
  p->flags = (o->reverse ? LSTM_REVERSE : 0u) | (t[LWHR] ? LSTM_PROJECTED : 0u);
  /* ws: G, C, R, P, Hp; work: hs, cs, z, rr, dh; dA: dA, dh of every position */
  int64_t oC = BT * 4 * H, oR = oC + BT * H, oP = oR + (t[LWHR] ? BT * H : 0);
  int64_t oHp = oP + (o->proj_clip > 0 ? BT * O : 0), oCS = B * O, oZ = oCS + B * H, oRR = oZ + B * 4 * H;
  int64_t oDH = oRR + B * H, work_n = oDH + B * O;
  pl->ws_n = oHp + BT * O;
  pl->da_n = BT * 4 * H + (t[LWHR] ? BT * O : 0);
  if (pl->ws_n > (int64_t)UINT32_MAX || pl->da_n > (int64_t)UINT32_MAX || work_n > (int64_t)UINT32_MAX) {
    bert_set_error("%s: vulkan: %lld x %lld steps of hidden %lld exceed the kernel's 32-bit offsets", fname,
                   (long long)B, (long long)T, (long long)H);
    return -1;
  }
  p->oC = (uint32_t)oC; p->oR = (uint32_t)oR; p->oP = (uint32_t)oP; p->oHp = (uint32_t)oHp;
  p->oCS = (uint32_t)oCS; p->oZ = (uint32_t)oZ; p->oRR = (uint32_t)oRR; p->oDH = (uint32_t)oDH;
  p->oDHA = (uint32_t)(BT * 4 * H);
  /* order, then lengths (bert_lstm_row_order: longest first) */
  int64_t mn = 2 * B > 0 ? 2 * B : 1;
  pl->order = malloc((size_t)mn * sizeof *pl->order);
  if (!pl->order) {
    bert_set_error("%s: out of memory", fname);
    return -1;
  }
  pl->len = pl->order + B;
  const int32_t *len = t[LLEN] ? bert_i32(t[LLEN]) : NULL;
  for (int64_t b = 0; b < B; b++) pl->len[b] = len ? len[b] : (int32_t)T;
  if (bert_lstm_row_order(pl->len, B, T, pl->order) != 0) {
    bert_set_error("%s: out of memory", fname);
    return -1;
  }
  bert_tensor *mh = bert_tensor_empty(BERT_I32, 1, &mn);
  if (mh) {
    memcpy(bert_i32(mh), pl->order, (size_t)(2 * B) * sizeof(int32_t));
    pl->meta = bert_vk_upload(mh);
  }
  bert_tensor_release(mh);
  pl->work = bert_vk_empty(BERT_F32, 1, &work_n);
  if (!pl->meta || !pl->work) return -1;
  const bert_tensor *bound[2] = {pl->meta, pl->work};
  return binds_fit(fname, 2, bound);
}

/* One pass of lstm.comp over B rows (the INIT modes) or the n running
** ones at step s; bd: its eight bindings (lstm.comp's order). */
static int lstm_pass(const lstm_plan *pl, uint32_t mode, uint32_t flags, int64_t s, int64_t n, const vkx_bind *bd) {
  lstm_push q = pl->p;
  q.mode = mode;
  q.flags |= flags;
  q.s = (uint32_t)s;
  q.n = (uint32_t)n;
  int init = mode == LSTM_INIT || mode == LSTM_BINIT || mode == LSTM_BFINAL;
  int64_t wide = pl->O > pl->H ? pl->O : pl->H;
  int64_t width = init || mode == LSTM_GATES ? wide : mode == LSTM_PROJ || mode == LSTM_DH ? pl->O : pl->H;
  uint32_t gx, gy;
  vk_grid_1d((uint64_t)((init ? pl->B : n) * width), 256, &gx, &gy);
  return vkx_dispatch("lstm", NULL, 0, 8, bd, &q, sizeof q, gx, gy, 1);
}

/* C[M, N] (at element co of c) = A[M, K] (at ao of a) @ op(W) */
static int gemm_rows(const bert_tensor *c, int64_t co, int64_t M, int64_t N, const bert_tensor *a, int64_t ao,
                     int64_t K, const bert_tensor *w, int tw) {
  int64_t sc[2] = {M, N}, sa[2] = {M, K};
  bert_tensor *cv = bert_tensor_view_of(c->storage, BERT_F32, c->offset + co, 2, sc, NULL);
  bert_tensor *av = bert_tensor_view_of(a->storage, BERT_F32, a->offset + ao, 2, sa, NULL);
  int rc = cv && av ? bert_vk_gemm_into(cv, av, 0, w, tw, 0.0f) : -1;
  bert_tensor_release(cv);
  bert_tensor_release(av);
  return rc;
}

bert_tensor *vk_lstm(const bert_tensor *const t[8], const bert_lstm_opts *o, bert_tensor **ws_out) {
  lstm_plan pl;
  bert_tensor *out = NULL, *ws = NULL;
  if (plan_init(&pl, "lstm", t, o) != 0) goto fail;
  const int64_t B = pl.B, T = pl.T, H = pl.H, O = pl.O, G4 = 4 * H;
  int64_t oshape[2] = {B, T * O + O + H};
  out = bert_vk_zeros(BERT_F32, 2, oshape);   /* padded positions stay 0 */
  ws = bert_vk_empty(BERT_F32, 1, &pl.ws_n);
  const bert_tensor *bound[5] = {out, ws, t[LH0], t[LC0], t[LB]};
  if (!out || !ws || binds_fit("lstm", 5, bound) != 0) goto fail;
  if (gemm_rows(ws, 0, B * T, G4, t[LX], 0, pl.I, t[LWIH], 1) != 0) goto fail;
  const bert_tensor *h0 = t[LH0] ? t[LH0] : pl.work, *c0 = t[LC0] ? t[LC0] : pl.work, *b = t[LB] ? t[LB] : pl.work;
  vkx_bind bd[8] = {vk_bind_of(out), vk_bind_of(ws), vk_bind_of(pl.work), vk_bind_of(h0), vk_bind_of(c0),
                    vk_bind_of(pl.meta), vk_bind_of(ws), vk_bind_of(b)};
  uint32_t has = (t[LH0] ? LSTM_HAS_H0 : 0u) | (t[LC0] ? LSTM_HAS_C0 : 0u) | (t[LB] ? LSTM_HAS_BIAS : 0u);
  if (lstm_pass(&pl, LSTM_INIT, has, 0, B, bd) != 0) goto fail;
  int64_t n = B;   /* the sequences running at step s: rows 0 .. n - 1 */
  for (int64_t s = 0;; s++) {
    while (n > 0 && pl.len[pl.order[n - 1]] <= s) n--;
    if (n == 0) break;
    if (gemm_rows(pl.work, pl.p.oZ, n, G4, pl.work, 0, O, t[LWHH], 1) != 0 ||
        lstm_pass(&pl, LSTM_GATES, has, s, n, bd) != 0)
      goto fail;
    if (t[LWHR] && (gemm_rows(pl.work, 0, n, O, pl.work, pl.p.oRR, H, t[LWHR], 1) != 0 ||
                    lstm_pass(&pl, LSTM_PROJ, has, s, n, bd) != 0))
      goto fail;
  }
  *ws_out = ws;
  plan_free(&pl);
  return out;
fail:
  bert_tensor_release(out);
  bert_tensor_release(ws);
  plan_free(&pl);
  return NULL;
}

static int wants(bert_tensor *const in[7], int k) { return in[k] != NULL && in[k]->requires_grad; }

int vk_lstm_backward(bert_tensor *const in[7], const bert_tensor *const t[8], const bert_lstm_opts *o,
                     const bert_tensor *ws, const bert_tensor *out, const bert_tensor *gout) {
  (void)out;   /* the forward's outputs backward needs are in ws */
  lstm_plan pl;
  bert_tensor *grad[7] = {NULL}, *g = NULL, *dA = NULL;
  int rc = -1;
  if (plan_init(&pl, "lstm backward", t, o) != 0) goto done;
  const int64_t B = pl.B, T = pl.T, I = pl.I, H = pl.H, O = pl.O, G4 = 4 * H, BT = B * T;
  g = bert_contiguous((bert_tensor *)gout);
  dA = bert_vk_zeros(BERT_F32, 1, &pl.da_n);   /* padded positions stay 0 */
  const bert_tensor *bound[3] = {g, ws, dA};
  if (!g || !dA || binds_fit("lstm backward", 3, bound) != 0) goto done;
  const bert_tensor *c0 = t[LC0] ? t[LC0] : pl.work;
  vkx_bind bd[8] = {vk_bind_of(g), vk_bind_of(ws), vk_bind_of(pl.work), vk_bind_of(pl.work), vk_bind_of(c0),
                    vk_bind_of(pl.meta), vk_bind_of(dA), vk_bind_of(pl.work)};
  uint32_t has = t[LC0] ? LSTM_HAS_C0 : 0u;
  if (lstm_pass(&pl, LSTM_BINIT, has, 0, B, bd) != 0) goto done;
  int64_t n = 0;   /* the sequences with a step s: rows 0 .. n - 1 */
  for (int64_t s = B > 0 ? pl.len[pl.order[0]] - 1 : -1; s >= 0; s--) {
    while (n < B && pl.len[pl.order[n]] > s) n++;
    if (lstm_pass(&pl, LSTM_DH, has, s, n, bd) != 0) goto done;
    if (t[LWHR] && gemm_rows(pl.work, pl.p.oRR, n, H, pl.work, pl.p.oDH, O, t[LWHR], 0) != 0) goto done;
    if (lstm_pass(&pl, LSTM_GATES_BWD, has, s, n, bd) != 0 ||
        gemm_rows(pl.work, 0, n, O, pl.work, pl.p.oZ, G4, t[LWHH], 0) != 0)
      goto done;
  }
  /* the gradients, in the order of in; those of h0 and c0 by their shapes */
  const int64_t sh[2] = {B, O}, sc[2] = {B, H};
  for (int k = 0; k < 7; k++) {
    if (!wants(in, k) || k == LB) continue;   /* b's: the column sums of dA, below */
    grad[k] = k == LH0 ? bert_vk_empty(BERT_F32, 2, sh) : k == LC0 ? bert_vk_empty(BERT_F32, 2, sc)
            : bert_vk_empty(BERT_F32, t[k]->ndim, t[k]->shape);
    if (grad[k] == NULL) goto done;
  }
  if ((grad[LX] && gemm_rows(grad[LX], 0, BT, I, dA, 0, G4, t[LWIH], 0) != 0)) goto done;
  int64_t sdA[2] = {BT, G4}, sx[2] = {BT, I}, shp[2] = {BT, O}, sr[2] = {BT, H};
  bert_tensor *dA2 = bert_tensor_view_of(dA->storage, BERT_F32, dA->offset, 2, sdA, NULL);
  bert_tensor *x2 = bert_tensor_view_of(t[LX]->storage, BERT_F32, t[LX]->offset, 2, sx, NULL);
  bert_tensor *hp = bert_tensor_view_of(ws->storage, BERT_F32, ws->offset + pl.p.oHp, 2, shp, NULL);
  bert_tensor *dh = NULL, *r = NULL;   /* projected: dW_hr = dh^T r */
  if (grad[LWHR]) {
    dh = bert_tensor_view_of(dA->storage, BERT_F32, dA->offset + pl.p.oDHA, 2, shp, NULL);
    r = bert_tensor_view_of(ws->storage, BERT_F32, ws->offset + pl.p.oR, 2, sr, NULL);
  }
  int ok = dA2 && x2 && hp && (!grad[LWHR] || (dh && r));
  if (ok && grad[LWIH]) ok = bert_vk_gemm_into(grad[LWIH], dA2, 1, x2, 0, 0.0f) == 0;
  if (ok && grad[LWHH]) ok = bert_vk_gemm_into(grad[LWHH], dA2, 1, hp, 0, 0.0f) == 0;
  if (ok && grad[LWHR]) ok = bert_vk_gemm_into(grad[LWHR], dh, 1, r, 0, 0.0f) == 0;
  if (ok && wants(in, LB)) ok = (grad[LB] = bert_vk_column_sums(dA2)) != NULL;
  bert_tensor_release(dA2); bert_tensor_release(x2); bert_tensor_release(hp); bert_tensor_release(dh);
  bert_tensor_release(r);
  if (!ok) goto done;
  if (grad[LH0] || grad[LC0]) {   /* out of the state rows' order */
    bd[3] = vk_bind_of(grad[LH0] ? grad[LH0] : pl.work);
    bd[4] = vk_bind_of(grad[LC0] ? grad[LC0] : pl.work);
    uint32_t fl = (grad[LH0] ? LSTM_HAS_H0 : 0u) | (grad[LC0] ? LSTM_HAS_C0 : 0u);
    lstm_push keep = pl.p;
    pl.p.flags = 0;
    int bad = lstm_pass(&pl, LSTM_BFINAL, fl, 0, B, bd) != 0;
    pl.p = keep;
    if (bad) goto done;
  }
  rc = bert_accumulate_grads_steal(in, grad, 7);
done:
  for (int k = 0; k < 7; k++) bert_tensor_release(grad[k]);
  bert_tensor_release(g);
  bert_tensor_release(dA);
  plan_free(&pl);
  return rc;
}
