/*
** Flash attention (attention.comp, attention_bwd.comp): forward with its
** per-row log-sum-exps, backward recomputing the probabilities, with a key
** padding mask or an additive bias, causal masking, packed sequences and
** dropout on the CPU's Philox counters; batches beyond one binding are
** dispatched in windows of whole items.
*/
#include <float.h>
#include <math.h>
#include <string.h>

#include "vulkan/vk_kernels.h"
#include "vulkan/vk_opcodes.h"

typedef struct {
  uint32_t A, Tq, Tk, d, qs0, qs1, qs2, ks0, ks1, ks2, vs0, vs1, vs2, mask_bstride, mask_flags;
  float mask_value, scale;
  uint32_t thr;
  float keep_scale;
  uint32_t seed_lo, seed_hi, off_lo, off_hi;
} attn_push;

/* Elements one binding of batch items [b0, b0 + nb) of t spans, from there. */
static int64_t batch_span(const bert_tensor *t, int64_t nb) {
  int64_t rest = 1;
  for (int d = 1; d < t->ndim; d++)
    if (t->shape[d] > 1) rest += (t->shape[d] - 1) * t->stride[d];
  return (nb - 1) * t->stride[0] + rest;
}

static vkx_bind bind_batch(const bert_tensor *t, int64_t b0, int64_t nb) {
  vkx_bind b = {vk_alloc_of(t), (size_t)(t->offset + b0 * t->stride[0]) * 4, (size_t)batch_span(t, nb) * 4};
  return b;
}

/* Batch items per attention dispatch: all of them, or windows of whole
** items when a [B, ...] tensor (n of them), the per-row statistics (rows
** per item) or the mask (mask_items: Tk per item, 0 when broadcast) exceed
** the binding range.  With dropout, windows start at multiples of 4 items
** unless an item's A*Tq*Tk counters are, so that the Philox offset moves on
** by whole blocks of 4.  -1 with an error when one item does not fit. */
static int64_t attn_window(const char *fname, const bert_tensor *const *t, int n, int64_t rows, int64_t mask_items,
                           int64_t per_item_counters, int dropout) {
  int64_t B = t[0]->shape[0], lim = (int64_t)vk_max_bind() / 4, nb = B;
  for (int i = 0; i < n; i++) {
    int64_t one = batch_span(t[i], 1), s0 = t[i]->stride[0];
    if (one > lim) nb = 0;
    else if (s0 > 0 && 1 + (lim - one) / s0 < nb) nb = 1 + (lim - one) / s0;
  }
  if (rows > 0 && lim / rows < nb) nb = lim / rows;
  if (mask_items > 0 && lim / mask_items < nb) nb = lim / mask_items;
  if (nb < B && dropout && per_item_counters % 4 != 0) nb -= nb % 4;
  if (nb < 1) {
    bert_set_error("%s: vulkan: one batch item exceeds the binding range and attention does not split within it", fname);
    return -1;
  }
  return nb;
}

/* The Philox offset of a window starting at item b0 (counters in blocks of 4). */
static void attn_offset(uint32_t *lo, uint32_t *hi, int64_t b0, int64_t per_item_counters) {
  uint64_t off = ((uint64_t)*hi << 32 | *lo) + (uint64_t)(b0 * per_item_counters) / 4;
  *lo = (uint32_t)off;
  *hi = (uint32_t)(off >> 32);
}

/* Batch, head and time strides of q, k or v: [B, A, T, d], or [total, A, d]
** packed (batch stride 0: the sequences' first rows come from the offsets). */
static void attn_strides(const bert_tensor *t, uint32_t s[3]) {
  int packed = t->ndim == 3;
  s[0] = packed ? 0u : (uint32_t)t->stride[0];
  s[1] = (uint32_t)t->stride[1];
  s[2] = (uint32_t)t->stride[packed ? 0 : 2];
}

/* The push constants both attention passes share: shapes, the mask's
** layout (mc: the mask on the device) or, packed, the number of sequences,
** scale and the dropout stream. */
static void attn_params(attn_push *p, const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                        const bert_tensor *mc, const bert_attention_opts *o, bert_stream s) {
  int packed = o->cu_seqlens != NULL;
  int64_t B = packed ? o->cu_seqlens->shape[0] - 1 : q->shape[0], A = q->shape[1];
  int64_t Tq = packed ? o->max_seqlen : q->shape[2], Tk = packed ? o->max_seqlen : k->shape[2];
  int64_t d = q->shape[q->ndim - 1];
  uint32_t qs[3], ks[3], vs[3];
  attn_strides(q, qs); attn_strides(k, ks); attn_strides(v, vs);
  memset(p, 0, sizeof *p);
  p->A = (uint32_t)A; p->Tq = (uint32_t)Tq; p->Tk = (uint32_t)Tk; p->d = (uint32_t)d;
  p->qs0 = qs[0]; p->qs1 = qs[1]; p->qs2 = qs[2];
  p->ks0 = ks[0]; p->ks1 = ks[1]; p->ks2 = ks[2];
  p->vs0 = vs[0]; p->vs1 = vs[1]; p->vs2 = vs[2];
  if (packed) {
    p->mask_bstride = (uint32_t)B;   /* the shaders' VARLEN: the offsets sit in the mask's binding */
  } else if (mc) {
    int keep = mc->ndim == 2;
    p->mask_flags = 1u | (keep ? 2u : 0u) | (mc->dtype == BERT_I32 ? 4u : 0u);
    p->mask_bstride = (uint32_t)(mc->shape[0] == B && B > 1 ? Tk : 0);
    p->mask_value = o->mask_value != 0 ? (float)o->mask_value : -FLT_MAX;
  }
  p->scale = o->scale > 0 ? (float)o->scale : (float)(1.0 / sqrt((double)(d > 0 ? d : 1)));
  double pd = o->training ? o->dropout_p : 0.0;
  if (pd > 0) {
    p->thr = vk_keep_threshold(pd);
    if (p->thr == 0) p->thr = 1;   /* 0 means "no dropout" to the shader */
    p->keep_scale = (float)(1.0 / (1.0 - pd));
    p->seed_lo = (uint32_t)s.seed; p->seed_hi = (uint32_t)(s.seed >> 32);
    p->off_lo = (uint32_t)s.offset; p->off_hi = (uint32_t)(s.offset >> 32);
  }
}

/* Packed sequences are dispatched whole: every binding must fit one range. */
static int attn_fits(const char *fname, const bert_tensor *const *t, int n) {
  size_t lim = vk_max_bind();
  for (int i = 0; i < n; i++) {
    if (vk_bind_of(t[i]).len > lim) {
      bert_set_error("%s: vulkan: packed sequences of %lld tokens exceed the binding range (the device does "
                     "not split them)", fname, (long long)t[0]->shape[0]);
      return -1;
    }
  }
  return 0;
}

/* The device runs loops of at most VK_MAX_LOOP keys or queries. */
static int attn_len_ok(const char *fname, const bert_attention_opts *o) {
  if (o->cu_seqlens && o->max_seqlen > VK_MAX_LOOP) {
    bert_set_error("%s: not supported on device vulkan (a packed sequence of %lld tokens: more than %d keys)",
                   fname, (long long)o->max_seqlen, (int)VK_MAX_LOOP);
    return -1;
  }
  return 0;
}

/* Forward (arguments checked by core/nn.c); *lse_out receives the
** [B*A*Tq] log-sum-exps. */
bert_tensor *vk_attention(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                          const bert_attention_opts *o, bert_stream s, bert_tensor **lse_out) {
  const char *f = "attention";
  int packed = o->cu_seqlens != NULL, last = q_in->ndim - 1;
  if (attn_len_ok(f, o) != 0) return NULL;
  /* the mask's binding: the mask, or packed, the offsets */
  const bert_tensor *m = packed ? o->cu_seqlens : o->mask;
  int64_t A = q_in->shape[1], d = q_in->shape[last];
  int64_t B = packed ? o->cu_seqlens->shape[0] - 1 : q_in->shape[0];
  int64_t Tq = packed ? 0 : q_in->shape[2], Tk = packed ? 0 : k_in->shape[2];
  /* unit stride in the last dim */
  bert_tensor *q = q_in->stride[last] == 1 ? bert_alias(q_in) : bert_contiguous((bert_tensor *)q_in);
  bert_tensor *k = k_in->stride[last] == 1 ? bert_alias(k_in) : bert_contiguous((bert_tensor *)k_in);
  bert_tensor *v = v_in->stride[last] == 1 ? bert_alias(v_in) : bert_contiguous((bert_tensor *)v_in);
  bert_tensor *mc = !m ? NULL : bert_is_host(m) ? bert_vk_upload(m) : bert_contiguous((bert_tensor *)m);
  int64_t oshape[4] = {B, A, Tq, d}, nl = packed ? q_in->shape[0] * A : B * A * Tq;
  bert_tensor *out = packed ? bert_vk_empty(BERT_F32, 3, q_in->shape) : bert_vk_empty(BERT_F32, 4, oshape);
  bert_tensor *lse = bert_vk_empty(BERT_F32, 1, &nl);
  if (!q || !k || !v || (m && !mc) || !out || !lse) goto fail;
  attn_push p;
  attn_params(&p, q, k, v, packed ? NULL : mc, o, s);
  uint32_t spec[2] = {o->causal ? 1u : 0u, packed ? 1u : 0u};
  if (packed && nl > 0 && d > 0) {
    const bert_tensor *bt[4] = {q, k, v, out};
    if (attn_fits(f, bt, 4) != 0) goto fail;
    vkx_bind bd[6] = {vk_bind_of(out), vk_bind_of(lse), vk_bind_of(q), vk_bind_of(k), vk_bind_of(v), vk_bind_of(mc)};
    uint32_t gx, gy;
    vk_grid_1d((uint64_t)nl, 1, &gx, &gy);
    if (vkx_dispatch("attention", spec, 2, 6, bd, &p, sizeof p, gx, gy, 1) != 0) goto fail;
  } else if (nl > 0 && d > 0) {
    const bert_tensor *bt[4] = {q, k, v, out};
    int64_t per = A * Tq * Tk, nb = attn_window(f, bt, 4, A * Tq, p.mask_bstride ? Tk : 0, per, p.thr != 0);
    if (nb < 0) goto fail;
    for (int64_t b0 = 0; b0 < B; b0 += nb) {
      int64_t n = B - b0 < nb ? B - b0 : nb;
      attn_push w = p;
      attn_offset(&w.off_lo, &w.off_hi, b0, per);
      vkx_bind bd[6] = {bind_batch(out, b0, n), vk_bind_el(lse, b0 * A * Tq, n * A * Tq), bind_batch(q, b0, n),
                        bind_batch(k, b0, n), bind_batch(v, b0, n),
                        !mc ? vk_bind_el(q, 0, 1) : p.mask_bstride ? vk_bind_el(mc, b0 * Tk, n * Tk) : vk_bind_of(mc)};
      uint32_t gx, gy;
      vk_grid_1d((uint64_t)(n * A * Tq), 1, &gx, &gy);
      if (vkx_dispatch("attention", spec, 2, 6, bd, &w, sizeof w, gx, gy, 1) != 0) goto fail;
    }
  }
  if (lse_out) { *lse_out = lse; lse = NULL; }
  goto done;
fail:
  bert_tensor_release(out);
  out = NULL;
done:
  bert_tensor_release(q);
  bert_tensor_release(k);
  bert_tensor_release(v);
  bert_tensor_release(mc);
  bert_tensor_release(lse);
  return out;
}

typedef struct {
  uint32_t A, Tq, Tk, d, qs0, qs1, qs2, ks0, ks1, ks2, mask_bstride, mask_flags;
  float mask_value, scale;
  uint32_t thr;
  float keep_scale;
  uint32_t seed_lo, seed_hi, off_lo, off_hi, mode;
} attn_bwd_push;

/* dQ, dK, dV from the forward's saved state, out and its gradient. */
int vk_attention_backward(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                          const bert_attention_opts *opts, bert_stream s, const bert_tensor *out,
                          const bert_tensor *lse, const bert_tensor *dout,
                          bert_tensor **dq_out, bert_tensor **dk_out, bert_tensor **dv_out) {
  const char *f = "attention_backward";
  int packed = opts->cu_seqlens != NULL, last = q_in->ndim - 1;
  if (attn_len_ok(f, opts) != 0) return -1;
  /* q as the forward bound it; k and v with one set of strides */
  bert_tensor *q = q_in->stride[last] == 1 ? bert_alias(q_in) : bert_contiguous((bert_tensor *)q_in);
  int same = k_in->stride[last] == 1 && v_in->stride[last] == 1;
  for (int d = 0; d < last; d++) same &= k_in->stride[d] == v_in->stride[d];
  bert_tensor *k = same ? bert_alias(k_in) : bert_contiguous((bert_tensor *)k_in);
  bert_tensor *v = same ? bert_alias(v_in) : bert_contiguous((bert_tensor *)v_in);
  const bert_tensor *m = packed ? opts->cu_seqlens : opts->mask;
  bert_tensor *mc = !m ? NULL : bert_is_host(m) ? bert_vk_upload(m) : bert_contiguous((bert_tensor *)m);
  int64_t A = q_in->shape[1], d = q_in->shape[last];
  int64_t B = packed ? opts->cu_seqlens->shape[0] - 1 : q_in->shape[0];
  int64_t Tq = packed ? 0 : q_in->shape[2], Tk = packed ? 0 : k_in->shape[2];
  int64_t nq = packed ? q_in->shape[0] * A : B * A * Tq;
  bert_tensor *o = bert_contiguous((bert_tensor *)out), *g = bert_contiguous((bert_tensor *)dout);
  bert_tensor *dq = bert_vk_empty(BERT_F32, q_in->ndim, q_in->shape), *dk = bert_vk_empty(BERT_F32, k_in->ndim, k_in->shape);
  bert_tensor *dv = bert_vk_empty(BERT_F32, k_in->ndim, k_in->shape), *D = bert_vk_empty(BERT_F32, 1, &nq);
  int rc = -1;
  if (!q || !k || !v || (m && !mc) || !o || !g || !dq || !dk || !dv || !D) goto done;
  attn_push fp;
  attn_params(&fp, q, k, v, packed ? NULL : mc, opts, s);
  attn_bwd_push p = {fp.A, fp.Tq, fp.Tk, fp.d, fp.qs0, fp.qs1, fp.qs2, fp.ks0, fp.ks1, fp.ks2, fp.mask_bstride,
                     fp.mask_flags, fp.mask_value, fp.scale, fp.thr, fp.keep_scale, fp.seed_lo, fp.seed_hi,
                     fp.off_lo, fp.off_hi, ATTN_BWD_Q};
  uint32_t spec[2] = {opts->causal ? 1u : 0u, packed ? 1u : 0u};
  if (packed && nq > 0 && d > 0) {
    const bert_tensor *bt[8] = {q, k, v, o, g, dq, dk, dv};
    if (attn_fits(f, bt, 8) != 0) goto done;
    vkx_bind bd[10] = {vk_bind_of(dq), vk_bind_of(dq), vk_bind_of(D), vk_bind_of(lse), vk_bind_of(q), vk_bind_of(k), vk_bind_of(v),
                       vk_bind_of(o), vk_bind_of(g), vk_bind_of(mc)};
    uint32_t gx, gy;
    vk_grid_1d((uint64_t)nq, 1, &gx, &gy);
    if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
    p.mode = ATTN_BWD_KV;   /* one window: attn_len_ok keeps sequences within VK_MAX_LOOP */
    bd[0] = vk_bind_of(dk);
    bd[1] = vk_bind_of(dv);
    if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
  } else if (nq > 0 && d > 0) {
    const bert_tensor *bt[8] = {q, k, v, o, g, dq, dk, dv};
    int64_t per = A * Tq * Tk, nb = attn_window(f, bt, 8, A * (Tq > Tk ? Tq : Tk),
                                                p.mask_bstride ? Tk : 0, per, p.thr != 0);
    if (nb < 0) goto done;
    for (int64_t b0 = 0; b0 < B; b0 += nb) {
      int64_t n = B - b0 < nb ? B - b0 : nb;
      attn_bwd_push w = p;
      attn_offset(&w.off_lo, &w.off_hi, b0, per);
      vkx_bind bd[10] = {bind_batch(dq, b0, n), bind_batch(dq, b0, n), vk_bind_el(D, b0 * A * Tq, n * A * Tq),
                         vk_bind_el(lse, b0 * A * Tq, n * A * Tq), bind_batch(q, b0, n), bind_batch(k, b0, n),
                         bind_batch(v, b0, n), bind_batch(o, b0, n), bind_batch(g, b0, n),
                         !mc ? vk_bind_el(q, 0, 1)
                                   : p.mask_bstride ? vk_bind_el(mc, b0 * Tk, n * Tk) : vk_bind_of(mc)};
      uint32_t gx, gy;
      vk_grid_1d((uint64_t)(n * A * Tq), 1, &gx, &gy);
      if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &w, sizeof w, gx, gy, 1) != 0) goto done;
      bd[0] = bind_batch(dk, b0, n);
      bd[1] = bind_batch(dv, b0, n);
      vk_grid_1d((uint64_t)(n * A * Tk), 1, &gx, &gy);
      for (int64_t win = 0; win * VK_MAX_LOOP < Tq; win++) {   /* each key row's loop over the queries, in windows */
        w.mode = ATTN_BWD_KV | (uint32_t)win << ATTN_BWD_WINDOW;
        if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &w, sizeof w, gx, gy, 1) != 0) goto done;
      }
    }
  }
  if (nq == 0 || d == 0) {
    if (bert_vk_fill_(dq, 0) || bert_vk_fill_(dk, 0) || bert_vk_fill_(dv, 0)) goto done;
  }
  *dq_out = dq; *dk_out = dk; *dv_out = dv;
  dq = dk = dv = NULL;
  rc = 0;
done:
  bert_tensor_release(q); bert_tensor_release(mc);
  bert_tensor_release(k); bert_tensor_release(v); bert_tensor_release(o); bert_tensor_release(g);
  bert_tensor_release(dq); bert_tensor_release(dk); bert_tensor_release(dv); bert_tensor_release(D);
  return rc;
}
