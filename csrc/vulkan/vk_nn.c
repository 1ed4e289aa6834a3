/*
** The fused nn kernels and their backward passes, each after its forward:
** linear (gemm.comp), layer norm (layer_norm.comp, layer_norm_bwd.comp),
** bias + GELU, dropout, the embedding gather and scatter and column sums
** (nn_misc.comp), cross entropy (cross_entropy.comp); and index_select /
** index_add_ of rows, the embedding's kernels.  The backward entries write
** into a gradient buffer on the device when there is one (a model's flat
** gradient), so a training step never waits on the host.
*/
#include <string.h>

#include "core/autograd.h"
#include "core/ops.h"
#include "vulkan/vk_kernels.h"
#include "vulkan/vk_opcodes.h"

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

static int wants(const bert_tensor *t) { return t != NULL && t->requires_grad; }

/* {====================================================== layer norm, GELU, dropout, embedding, cross entropy */

typedef struct { uint32_t R, H, flags; float eps; } ln_push;

/* Rows per dispatch for a [R, H] layer norm: all of them, or windows of
** whole rows when the row-major tensors exceed the binding range (gamma,
** beta and the [2, H] parameter gradients are always bound whole). */
static int64_t ln_window(const char *fname, int64_t R, int64_t H) {
  int64_t lim = (int64_t)vk_max_bind() / 4;
  if (R * H <= lim && 2 * R <= lim) return R > 0 ? R : 1;
  int64_t rows = lim / (H > 2 ? H : 2);
  if (rows < 1 || 2 * H > lim) {
    bert_set_error("%s: vulkan: a row of %lld features exceeds the binding range", fname, (long long)H);
    return -1;
  }
  return rows;
}

/* y = LN(x + res); *stats receives [R, 2] mean / rstd per row. */
bert_tensor *vk_layer_norm(const bert_tensor *x_in, const bert_tensor *g_in, const bert_tensor *b_in, double eps,
                           const bert_tensor *r_in, bert_tensor **stats_out) {
  const char *f = "layer_norm";
  int64_t H = x_in->shape[x_in->ndim - 1];
  bert_tensor *x = bert_contiguous((bert_tensor *)x_in), *r = r_in ? bert_contiguous((bert_tensor *)r_in) : NULL;
  bert_tensor *g = g_in ? bert_contiguous((bert_tensor *)g_in) : NULL;
  bert_tensor *bb = b_in ? bert_contiguous((bert_tensor *)b_in) : NULL;
  bert_tensor *y = NULL, *st = NULL;
  if (!x || (r_in && !r) || (g_in && !g) || (b_in && !bb)) goto done;
  int64_t R = H > 0 ? bert_numel(x) / H : 0, sshape[2] = {R, 2}, rows = ln_window(f, R, H);
  if (rows < 0) goto done;
  y = bert_vk_empty(BERT_F32, x->ndim, x->shape);
  st = bert_vk_empty(BERT_F32, 2, sshape);
  if (!y || !st) goto fail;
  for (int64_t r0 = 0; r0 < R; r0 += rows) {
    int64_t nr = R - r0 < rows ? R - r0 : rows;
    ln_push p = {(uint32_t)nr, (uint32_t)H, (r ? 1u : 0u) | (g ? 2u : 0u) | (bb ? 4u : 0u), (float)eps};
    vkx_bind xw = vk_bind_el(x, r0 * H, nr * H);
    vkx_bind bd[6] = {vk_bind_el(y, r0 * H, nr * H), vk_bind_el(st, r0 * 2, nr * 2), xw,
                      r ? vk_bind_el(r, r0 * H, nr * H) : xw, g ? vk_bind_of(g) : xw, bb ? vk_bind_of(bb) : xw};
    uint32_t gx, gy;
    vk_grid_1d((uint64_t)nr, 1, &gx, &gy);
    if (vkx_dispatch("layer_norm", NULL, 0, 6, bd, &p, sizeof p, gx, gy, 1) != 0) goto fail;
  }
  if (stats_out) { *stats_out = st; st = NULL; }
  goto done;
fail:
  bert_tensor_release(y);
  y = NULL;
done:
  bert_tensor_release(st);
  bert_tensor_release(x);
  bert_tensor_release(r);
  bert_tensor_release(g);
  bert_tensor_release(bb);
  return y;
}

typedef struct { uint32_t R, H, flags, mode; } lnb_push;

/* Backward kernels: dx [R, H] and dgb [2, H] = dgamma, dbeta; row windows
** as in the forward, the parameter gradients accumulated over them. */
static int ln_backward(const bert_tensor *dy_in, const bert_tensor *x_in, const bert_tensor *res_in,
                       const bert_tensor *gamma_in, const bert_tensor *stats, bert_tensor **dx_out,
                       bert_tensor **dgb_out) {
  const char *f = "layer_norm_backward";
  int64_t H = x_in->shape[x_in->ndim - 1], R = H > 0 ? bert_numel(x_in) / H : 0;
  int64_t gshape[2] = {2, H}, rows = ln_window(f, R, H);
  if (rows < 0) return -1;
  if (rows > (int64_t)VK_MAX_LOOP) rows = VK_MAX_LOOP;   /* dgamma / dbeta loop over the window's rows */
  bert_tensor *dy = bert_contiguous((bert_tensor *)dy_in), *x = bert_contiguous((bert_tensor *)x_in);
  bert_tensor *st = bert_contiguous((bert_tensor *)stats);
  bert_tensor *res = res_in ? bert_contiguous((bert_tensor *)res_in) : NULL;
  bert_tensor *gamma = gamma_in ? bert_contiguous((bert_tensor *)gamma_in) : NULL;
  bert_tensor *dx = bert_vk_empty(BERT_F32, x_in->ndim, x_in->shape), *dgb = bert_vk_empty(BERT_F32, 2, gshape);
  int rc = -1;
  if (!dy || !x || !st || (res_in && !res) || (gamma_in && !gamma) || !dx || !dgb) goto done;
  if (R == 0 && bert_vk_fill_(dgb, 0) != 0) goto done;
  for (int64_t r0 = 0; r0 < R; r0 += rows) {
    int64_t nr = R - r0 < rows ? R - r0 : rows;
    /* flags bit 2: add to dgamma / dbeta (windows after the first) */
    lnb_push p = {(uint32_t)nr, (uint32_t)H, (res ? 1u : 0u) | (gamma ? 2u : 0u) | (r0 > 0 ? 4u : 0u), 0};
    vkx_bind xw = vk_bind_el(x, r0 * H, nr * H);
    vkx_bind bd[7] = {vk_bind_el(dx, r0 * H, nr * H), vk_bind_of(dgb), vk_bind_el(dy, r0 * H, nr * H), xw,
                      res ? vk_bind_el(res, r0 * H, nr * H) : xw, gamma ? vk_bind_of(gamma) : xw,
                      vk_bind_el(st, r0 * 2, nr * 2)};
    uint32_t gx, gy;
    vk_grid_1d((uint64_t)nr, 1, &gx, &gy);
    if (vkx_dispatch("layer_norm_bwd", NULL, 0, 7, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
    p.mode = 1;
    vk_grid_1d((uint64_t)H, 256, &gx, &gy);
    if (vkx_dispatch("layer_norm_bwd", NULL, 0, 7, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
  }
  *dx_out = dx;
  *dgb_out = dgb;
  dx = dgb = NULL;
  rc = 0;
done:
  bert_tensor_release(dy); bert_tensor_release(x); bert_tensor_release(st);
  bert_tensor_release(res); bert_tensor_release(gamma);
  bert_tensor_release(dx); bert_tensor_release(dgb);
  return rc;
}

int vk_layer_norm_backward(bert_tensor *const in[4], const bert_tensor *x, const bert_tensor *res,
                               const bert_tensor *gamma, const bert_tensor *stats, const bert_tensor *g) {
  bert_tensor *dx = NULL, *dgb = NULL;
  if (ln_backward(g, x, res, gamma, stats, &dx, &dgb) != 0)
    return -1;
  int rc = 0;
  if (wants(in[1])) {
    bert_tensor *v = bert_select(dgb, 0, 0);
    rc |= v ? bert_accumulate_grad_steal(in[1], v) : -1;
  }
  if (wants(in[2])) {
    bert_tensor *v = bert_select(dgb, 0, 1);
    rc |= v ? bert_accumulate_grad_steal(in[2], v) : -1;
  }
  if (rc == 0 && wants(in[3])) rc = bert_accumulate_grad(in[3], dx);
  if (rc == 0 && wants(in[0])) { rc = bert_accumulate_grad_steal(in[0], dx); dx = NULL; }
  bert_tensor_release(dx);
  bert_tensor_release(dgb);
  return rc;
}

typedef struct {
  uint32_t n, N, R, mode, flags, thr;
  float scale;
  uint32_t seed_lo, seed_hi, off_lo, off_hi, v0, vn;
} misc_push;

static int misc_raw(const vkx_bind *bd, const misc_push *p, uint64_t nthreads) {
  uint32_t gx, gy;
  vk_grid_1d(nthreads, 256, &gx, &gy);
  return vkx_dispatch("nn_misc", NULL, 0, 4, bd, p, sizeof *p, gx, gy, 1);
}

/* Windows when a binding is too large: the embedding table in row ranges
** (gather: ids outside the range leave their rows alone after the first
** window; scatter: skipped), column sums in row ranges (accumulated), and
** bias + GELU and dropout in element ranges (whole rows; Philox counters
** moved on with the range). */
static int misc_split(uint32_t mode, bert_tensor *o, const bert_tensor *x, const bert_tensor *b,
                      const bert_tensor *ids, misc_push *p) {
  int64_t lim = (int64_t)vk_max_bind() / 4, N = p->N ? p->N : 1;
  if (mode == MISC_EMBED_GATHER || mode == MISC_EMBED_SCATTER) {   /* x (gather) or o (scatter): the [V, N] table */
    int gather = mode == MISC_EMBED_GATHER;
    const bert_tensor *tab = gather ? x : o;
    int64_t V = tab->shape[0], rows = lim / N, nr = gather ? p->n / N : p->R;
    if (rows < 1 || nr * N > lim) goto cannot;
    /* the scatter loops over the ids in each invocation: VK_MAX_LOOP at a time */
    int64_t rstep = gather || nr <= (int64_t)VK_MAX_LOOP ? (nr > 0 ? nr : 1) : (int64_t)VK_MAX_LOOP;
    for (int64_t v0 = 0; v0 < V; v0 += rows) {
      int64_t nv = V - v0 < rows ? V - v0 : rows;
      for (int64_t r0 = 0; r0 < (gather ? 1 : nr); r0 += rstep) {
        int64_t nrr = gather ? nr : (nr - r0 < rstep ? nr - r0 : rstep);
        misc_push q = *p;
        q.v0 = (uint32_t)v0;
        q.vn = (uint32_t)nv;
        if (!gather) q.R = (uint32_t)nrr;
        if (gather && v0 > 0) q.flags |= MISC_LATER_WIN;
        vkx_bind tw = vk_bind_el(tab, v0 * N, nv * N);
        vkx_bind bd[4] = {gather ? vk_bind_of(o) : tw, gather ? tw : vk_bind_el(x, r0 * N, nrr * N), tw,
                          gather ? vk_bind_of(ids) : vk_bind_el(ids, r0, nrr)};
        if (misc_raw(bd, &q, gather ? p->n : (uint64_t)N) != 0) return -1;
      }
    }
    return 0;
  }
  if (mode == MISC_COLUMN_SUMS) {   /* column sums over R rows of x, VK_MAX_LOOP rows at a time at most */
    int64_t R = p->R, rows = lim / N;
    if (rows > (int64_t)VK_MAX_LOOP) rows = VK_MAX_LOOP;
    if (rows < 1) goto cannot;
    for (int64_t r0 = 0; r0 < R; r0 += rows) {
      int64_t nr = R - r0 < rows ? R - r0 : rows;
      misc_push q = *p;
      q.R = (uint32_t)nr;
      if (r0 > 0) q.flags |= MISC_ACCUMULATE;
      vkx_bind bd[4] = {vk_bind_of(o), vk_bind_el(x, r0 * N, nr * N), vk_bind_of(o), vk_bind_of(o)};
      if (misc_raw(bd, &q, (uint64_t)N) != 0) return -1;
    }
    return 0;
  }
  int gelu = mode == MISC_BIAS_GELU || mode == MISC_BIAS_GELU_BACKWARD;
  if (gelu || mode == MISC_DROPOUT) {   /* elementwise over n: windows of whole rows (multiples of 4) */
    int64_t n = p->n, unit = gelu ? N : 4;
    int64_t step = lim / unit * unit;
    if (step < unit || (b && vk_bind_of(b).len > (size_t)lim * 4)) goto cannot;
    for (int64_t e0 = 0; e0 < n; e0 += step) {
      int64_t ne = n - e0 < step ? n - e0 : step;
      misc_push q = *p;
      q.n = (uint32_t)ne;
      if (mode == MISC_DROPOUT) {
        uint64_t off = ((uint64_t)p->off_hi << 32 | p->off_lo) + (uint64_t)(e0 / 4);
        q.off_lo = (uint32_t)off;
        q.off_hi = (uint32_t)(off >> 32);
      }
      vkx_bind bd[4] = {vk_bind_el(o, e0, ne), vk_bind_el(x, e0, ne), b ? vk_bind_of(b) : vk_bind_el(o, e0, 1),
                        mode == MISC_BIAS_GELU_BACKWARD ? vk_bind_el(ids, e0, ne) : vk_bind_el(o, e0, 1)};
      if (misc_raw(bd, &q, (uint64_t)ne) != 0) return -1;
    }
    return 0;
  }
cannot:
  bert_set_error("vulkan: nn_misc mode %u: a tensor exceeds the binding range and this kernel is not split", mode);
  return -1;
}

static int misc_dispatch(uint32_t mode, bert_tensor *o, const bert_tensor *x, const bert_tensor *b,
                         const bert_tensor *ids, misc_push *p, uint64_t nthreads) {
  p->mode = mode;
  if (mode == MISC_EMBED_GATHER && p->vn == 0) p->vn = p->R;
  vkx_bind bd[4] = {vk_bind_of(o), vk_bind_of(x ? x : o), vk_bind_of(b ? b : o), vk_bind_of(ids ? ids : o)};
  if (nthreads == 0) return 0;
  int long_loop = (mode == MISC_COLUMN_SUMS || mode == MISC_EMBED_SCATTER) && p->R > VK_MAX_LOOP;
  if (!vk_binds_fit(4, bd) || long_loop) return misc_split(mode, o, x, b, ids, p);
  return misc_raw(bd, p, nthreads);
}

bert_tensor *vk_bias_gelu(const bert_tensor *x_in, const bert_tensor *b_in, int tanh_mode) {
  int64_t N = x_in->shape[x_in->ndim - 1];   /* checked by core/nn.c */
  bert_tensor *x = bert_contiguous((bert_tensor *)x_in), *b = b_in ? bert_contiguous((bert_tensor *)b_in) : NULL;
  bert_tensor *y = NULL;
  if (x && (!b_in || b)) {
    y = bert_vk_empty(BERT_F32, x->ndim, x->shape);
    misc_push p = {(uint32_t)bert_numel(x), (uint32_t)(N ? N : 1), 0, 0, (b ? MISC_HAS_BIAS : 0u) | (tanh_mode ? MISC_TANH : 0u), 0, 0, 0, 0, 0, 0, 0, 0};
    if (y && misc_dispatch(MISC_BIAS_GELU, y, x, b, NULL, &p, p.n) != 0) { bert_tensor_release(y); y = NULL; }
  }
  bert_tensor_release(x);
  bert_tensor_release(b);
  return y;
}

/* dx = dy * gelu'(x + b); dy is bound in the kernel's index slot (read as
** float bits), so the dispatch splits like the forward. */
static bert_tensor *gelu_backward(const bert_tensor *dy_in, const bert_tensor *x_in, const bert_tensor *b_in,
                                  int tanh_mode) {
  int64_t N = x_in->ndim ? x_in->shape[x_in->ndim - 1] : 1;
  bert_tensor *dy = bert_contiguous((bert_tensor *)dy_in), *x = bert_contiguous((bert_tensor *)x_in);
  bert_tensor *b = b_in ? bert_contiguous((bert_tensor *)b_in) : NULL;
  bert_tensor *dx = bert_vk_empty(BERT_F32, x_in->ndim, x_in->shape);
  int ok = dy && x && (!b_in || b) && dx;
  misc_push p = {(uint32_t)bert_numel(x_in), (uint32_t)(N ? N : 1), 0, 0, (b ? MISC_HAS_BIAS : 0u) | (tanh_mode ? MISC_TANH : 0u),
                 0, 0, 0, 0, 0, 0, 0, 0};
  if (ok) ok = misc_dispatch(MISC_BIAS_GELU_BACKWARD, dx, x, b, dy, &p, p.n) == 0;
  bert_tensor_release(dy);
  bert_tensor_release(x);
  bert_tensor_release(b);
  if (!ok) { bert_tensor_release(dx); return NULL; }
  return dx;
}

bert_tensor *bert_vk_column_sums(const bert_tensor *g_in) {
  int64_t N = g_in->shape[g_in->ndim - 1], R = N ? bert_numel(g_in) / N : 0;
  bert_tensor *g = bert_contiguous((bert_tensor *)g_in), *o = bert_vk_empty(BERT_F32, 1, &N);
  misc_push p = {(uint32_t)N, (uint32_t)N, (uint32_t)R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (!g || !o || misc_dispatch(MISC_COLUMN_SUMS, o, g, NULL, NULL, &p, (uint64_t)N) != 0) { bert_tensor_release(o); o = NULL; }
  bert_tensor_release(g);
  return o;
}

int vk_bias_gelu_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b, int tanh_mode,
                              const bert_tensor *g) {
  bert_tensor *dx = gelu_backward(g, x, b, tanh_mode);
  if (dx == NULL) return -1;
  int rc = 0;
  if (wants(in[1])) {
    bert_tensor *db = bert_vk_column_sums(dx);
    rc = db ? bert_accumulate_grad_steal(in[1], db) : -1;
  }
  if (rc == 0 && wants(in[0])) return bert_accumulate_grad_steal(in[0], dx);
  bert_tensor_release(dx);
  return rc;
}

/* x times the mask of stream s, as the CPU's dropout (cpu/dropout.c). */
bert_tensor *vk_dropout(const bert_tensor *x_in, double p, bert_stream s) {
  uint64_t seed = s.seed, offset = s.offset;
  bert_tensor *x = bert_contiguous((bert_tensor *)x_in);
  if (x == NULL) return NULL;
  bert_tensor *y = bert_vk_empty(BERT_F32, x->ndim, x->shape);
  misc_push mp = {(uint32_t)bert_numel(x), 1, 0, 0, 0, vk_keep_threshold(p),
                  p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p)),
                  (uint32_t)seed, (uint32_t)(seed >> 32), (uint32_t)offset, (uint32_t)(offset >> 32), 0, 0};
  if (y && misc_dispatch(MISC_DROPOUT, y, x, NULL, NULL, &mp, mp.n) != 0) { bert_tensor_release(y); y = NULL; }
  bert_tensor_release(x);
  return y;
}

/* ids checked by core/nn.c (or index_select's front-end): int32, in range;
** host ids (positions made on the cpu) are uploaded: they are small */
bert_tensor *vk_embedding(const bert_tensor *ids_in, const bert_tensor *w) {
  bert_tensor *ids = bert_is_host(ids_in) ? bert_vk_upload(ids_in) : bert_contiguous((bert_tensor *)ids_in);
  bert_tensor *wc = bert_contiguous((bert_tensor *)w), *y = NULL;
  if (ids && wc) {
    int64_t shape[BERT_MAX_DIMS], H = w->shape[1], R = bert_numel(ids);
    memcpy(shape, ids->shape, sizeof shape);
    shape[ids->ndim] = H;
    y = bert_vk_empty(BERT_F32, ids->ndim + 1, shape);
    misc_push p = {(uint32_t)(R * H), (uint32_t)H, (uint32_t)w->shape[0], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (y && misc_dispatch(MISC_EMBED_GATHER, y, wc, NULL, ids, &p, p.n) != 0) { bert_tensor_release(y); y = NULL; }
  }
  bert_tensor_release(ids);
  bert_tensor_release(wc);
  return y;
}

/* dW[ids[r]] += dy[r] (dw: contiguous [V, H] device tensor, accumulated). */
static int embedding_scatter(bert_tensor *dw, const bert_tensor *ids_in, const bert_tensor *dy_in) {
  bert_tensor *ids = bert_contiguous((bert_tensor *)ids_in), *dy = bert_contiguous((bert_tensor *)dy_in);
  int rc = -1;
  if (ids && dy) {
    int64_t H = dw->shape[1];
    misc_push p = {(uint32_t)H, (uint32_t)H, (uint32_t)bert_numel(ids), 0, 0, 0, 0, 0, 0, 0, 0, 0,
                   (uint32_t)dw->shape[0]};
    rc = misc_dispatch(MISC_EMBED_SCATTER, dw, dy, NULL, ids, &p, (uint64_t)H);
  }
  bert_tensor_release(ids);
  bert_tensor_release(dy);
  return rc;
}

int vk_embedding_backward(bert_tensor *w, const bert_tensor *ids_in, const bert_tensor *g) {
  bert_tensor *ids = bert_vk_on_device(ids_in);
  if (ids == NULL) return -1;
  bert_tensor *tgt = bert_grad_target(w);
  int rc;
  if (tgt && !bert_is_host(tgt)) {   /* rows added into the existing gradient (e.g. the tied decoder's) */
    rc = embedding_scatter(tgt, ids, g);
    if (rc == 0) bert_bump_version(tgt);
  } else {
    bert_tensor *z = bert_vk_zeros(BERT_F32, 2, w->shape);
    rc = z ? embedding_scatter(z, ids, g) : -1;
    rc = rc == 0 ? bert_accumulate_grad_steal(w, z) : (bert_tensor_release(z), -1);
  }
  bert_tensor_release(ids);
  return rc;
}

typedef struct { uint32_t R, C, mode, mean; int32_t ignore; uint32_t r0, Rall; float count; } ce_push;

/* Modes 0 and 2 of the cross-entropy kernel over rows of logits (and of
** the output o: one value per row in mode 0, C in mode 2), in windows of
** rows when the logits do not fit one binding; labels and g bound whole. */
static int ce_rows(ce_push p, bert_tensor *o, const bert_tensor *x, const bert_tensor *lab, const bert_tensor *g) {
  int64_t R = p.R, C = p.C, ostep = p.mode == 0u ? 1 : C;
  vkx_bind bd[4] = {vk_bind_of(o), vk_bind_of(x), vk_bind_of(lab), vk_bind_of(g)};
  uint32_t gx, gy;
  p.r0 = 0;
  p.Rall = (uint32_t)R;
  if (R == 0) return 0;
  if (vk_binds_fit(4, bd)) {
    vk_grid_1d((uint64_t)R, 1, &gx, &gy);
    return vkx_dispatch("cross_entropy", NULL, 0, 4, bd, &p, sizeof p, gx, gy, 1);
  }
  int64_t rc = (int64_t)vk_max_bind() / 4 / (C > 0 ? C : 1);
  if (rc < 1) { bert_set_error("cross_entropy: vulkan: a row of %lld logits exceeds the binding range", (long long)C); return -1; }
  for (int64_t r0 = 0; r0 < R; r0 += rc) {
    int64_t n = R - r0 < rc ? R - r0 : rc;
    ce_push q = p;
    q.R = (uint32_t)n;
    q.r0 = (uint32_t)r0;
    vkx_bind w[4] = {vk_bind_el(o, r0 * ostep, n * ostep), vk_bind_el(x, r0 * C, n * C), bd[2], bd[3]};
    vk_grid_1d((uint64_t)n, 1, &gx, &gy);
    if (vkx_dispatch("cross_entropy", NULL, 0, 4, w, &q, sizeof q, gx, gy, 1) != 0) return -1;
  }
  return 0;
}

/* labels checked by core/nn.c: in range or ignore_index.  *lse: none, the
** backward recomputes the row statistics. */
bert_tensor *vk_cross_entropy(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore_index,
                              bert_reduction reduction, int64_t count, bert_tensor **lse) {
  int64_t C = logits->shape[logits->ndim - 1];
  int64_t R = bert_numel(labels);
  *lse = NULL;
  bert_tensor *x = bert_contiguous((bert_tensor *)logits), *rows = NULL, *out = NULL;
  bert_tensor *lab = bert_vk_on_device(labels);
  if (!x || !lab) goto done;
  rows = reduction == BERT_REDUCE_NONE ? bert_vk_empty(BERT_F32, labels->ndim, labels->shape)
                                       : bert_vk_empty(BERT_F32, 1, &R);
  if (rows == NULL) goto done;
  ce_push p = {(uint32_t)R, (uint32_t)C, 0, 0, (int32_t)ignore_index, 0, (uint32_t)R, (float)count};
  if (ce_rows(p, rows, x, lab, lab) != 0) goto done;
  if (reduction == BERT_REDUCE_NONE) { out = rows; rows = NULL; goto done; }
  out = bert_vk_empty(BERT_F32, 0, NULL);
  if (out == NULL) goto done;
  p.mode = 1;
  p.mean = reduction == BERT_REDUCE_MEAN;
  vkx_bind bd2[4] = {vk_bind_of(out), vk_bind_of(rows), vk_bind_of(lab), vk_bind_of(rows)};
  if (vkx_dispatch("cross_entropy", NULL, 0, 4, bd2, &p, sizeof p, 1, 1, 1) != 0) { bert_tensor_release(out); out = NULL; }
done:
  bert_tensor_release(x);
  bert_tensor_release(lab);
  bert_tensor_release(rows);
  return out;
}

/* dlogits for a mean / sum loss with upstream gradient g (1-element device tensor). */
static bert_tensor *ce_backward(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore_index,
                                bert_reduction reduction, int64_t count, const bert_tensor *g) {
  int64_t C = logits->shape[logits->ndim - 1], R = bert_numel(labels);
  bert_tensor *x = bert_contiguous((bert_tensor *)logits), *lab = bert_contiguous((bert_tensor *)labels);
  bert_tensor *dx = bert_vk_empty(BERT_F32, logits->ndim, logits->shape);
  ce_push p = {(uint32_t)R, (uint32_t)C, 2, reduction == BERT_REDUCE_MEAN, (int32_t)ignore_index, 0, (uint32_t)R,
               (float)count};
  if (x && lab && dx) {
    if (ce_rows(p, dx, x, lab, g) != 0) { bert_tensor_release(dx); dx = NULL; }
  } else { bert_tensor_release(dx); dx = NULL; }
  bert_tensor_release(x);
  bert_tensor_release(lab);
  return dx;
}

bert_tensor *vk_cross_entropy_backward(const bert_tensor *l, const bert_tensor *lab_in, const bert_tensor *lse,
                                           int64_t ignore, bert_reduction red, int64_t count,
                                           const bert_tensor *g_in) {
  (void)lse;
  bert_tensor *lab = bert_vk_on_device(lab_in);
  bert_tensor *g = bert_vk_on_device(g_in), *dl = NULL;
  if (g && lab) {
    if (red != BERT_REDUCE_NONE) {
      dl = ce_backward(l, lab, ignore, red, count, g);
    } else {   /* per-row upstream gradients: the summed form with g = 1, scaled per row */
      bert_tensor *one = bert_vk_empty(BERT_F32, 0, NULL);
      bert_tensor *d1 = one && bert_vk_fill_(one, 1.0) == 0
                      ? ce_backward(l, lab, ignore, BERT_REDUCE_SUM, count, one) : NULL;
      bert_tensor *gu = d1 ? bert_unsqueeze(g, g->ndim) : NULL;
      dl = gu ? bert_binary(BERT_MUL, d1, gu, 1, NULL) : NULL;
      bert_tensor_release(one); bert_tensor_release(d1); bert_tensor_release(gu);
    }
  }
  bert_tensor_release(g);
  bert_tensor_release(lab);
  return dl;
}
/* }====================================================== */

/* {====================================================== linear */

/* t's gradient (existing on the device) += op(A) op(B), or a new one */
static int gemm_grad(bert_tensor *t, const bert_tensor *a, int ta, const bert_tensor *b, int tb, int64_t M, int64_t N) {
  int64_t s2[2] = {M, N};
  bert_tensor *tgt = bert_grad_target(t);
  if (tgt && !bert_is_host(tgt)) {
    bert_tensor *v = bert_view(tgt, 2, s2);
    int rc = v ? bert_vk_gemm_into(v, a, ta, b, tb, 1.0f) : -1;
    if (rc == 0) bert_bump_version(tgt);
    bert_tensor_release(v);
    return rc;
  }
  bert_tensor *c = bert_vk_empty(BERT_F32, 2, s2);
  if (c == NULL || bert_vk_gemm_into(c, a, ta, b, tb, 0.0f) != 0) { bert_tensor_release(c); return -1; }
  bert_tensor *v = bert_view(c, t->ndim, t->shape);
  bert_tensor_release(c);
  return v ? bert_accumulate_grad_steal(t, v) : -1;
}

/* y = x W^T + b as one GEMM over all rows, the bias in the output step
** (arguments checked by core/nn.c). */
bert_tensor *vk_linear(const bert_tensor *x_in, const bert_tensor *w, const bert_tensor *b) {
  bert_tensor *x = bert_contiguous((bert_tensor *)x_in);
  if (x == NULL) return NULL;
  int64_t in = w->shape[1], outf = w->shape[0], R = 1;
  for (int d = 0; d < x->ndim - 1; d++) R *= x->shape[d];   /* rows, also when in == 0 */
  int64_t s2d[2] = {R, in};
  bert_tensor *x2 = bert_view(x, 2, s2d), *y = NULL;
  bert_tensor_release(x);
  if (x2 == NULL) return NULL;
  bert_tensor *y2 = bert_vk_gemm(x2, 0, w, 1, b, 0);
  if (y2 == NULL) { bert_tensor_release(x2); return NULL; }
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, x_in->shape, sizeof shape);
  shape[x_in->ndim - 1] = outf;
  y = bert_view(y2, x_in->ndim, shape);
  bert_tensor_release(y2);
  bert_tensor_release(x2);
  return y;
}

int vk_linear_backward(bert_tensor *const in[3], const bert_tensor *x, const bert_tensor *w, const bert_tensor *g) {
  int64_t outf = w->shape[0], inf = w->shape[1], R = 1;
  for (int d = 0; d < x->ndim - 1; d++) R *= x->shape[d];
  int64_t xs[2] = {R, inf}, gs[2] = {R, outf};
  bert_tensor *x2 = bert_view((bert_tensor *)x, 2, xs), *g2 = bert_view((bert_tensor *)g, 2, gs);
  int rc = x2 && g2 ? 0 : -1;
  if (rc == 0 && wants(in[0])) rc = gemm_grad(in[0], g2, 0, w, 0, R, inf);
  if (rc == 0 && wants(in[1])) rc = gemm_grad(in[1], g2, 1, x2, 0, outf, inf);
  if (rc == 0 && wants(in[2])) {
    bert_tensor *db = bert_vk_column_sums(g2);
    rc = db ? bert_accumulate_grad_steal(in[2], db) : -1;
  }
  bert_tensor_release(x2);
  bert_tensor_release(g2);
  return rc;
}
/* }====================================================== */

/* {====================================================== rows of a table */

/* out = t.index_select(dim, index): for float32 t and dim 0 the embedding
** gather over t viewed as [rows, rest], other cases on the host. */
bert_tensor *vk_index_select(const bert_tensor *t, int dim, const bert_tensor *index) {
  char s1[160];
  if (dim != 0 || t->dtype != BERT_F32 || t->ndim < 1 || index->ndim != 1 || index->dtype != BERT_I32) {
    /* other cases: on the host */
    bert_tensor *h = bert_vk_download(t), *r = NULL, *idx = bert_is_host(index) ? NULL : bert_vk_download(index);
    if (h && (bert_is_host(index) || idx)) {
      bert_tensor *hr = bert_index_select(h, dim, idx ? idx : index);
      r = hr ? bert_vk_upload(hr) : NULL;
      bert_tensor_release(hr);
    }
    bert_tensor_release(h);
    bert_tensor_release(idx);
    return r;
  }
  int64_t V = t->shape[0], H = V ? bert_numel(t) / V : 0, n = index->shape[0];
  int64_t sh2[2] = {V, H};
  bert_tensor *tc = bert_contiguous((bert_tensor *)t);
  bert_tensor *t2 = tc ? bert_view(tc, 2, sh2) : NULL;
  bert_tensor_release(tc);
  if (t2 == NULL) return NULL;
  bert_tensor *y2 = n > 0 && H > 0 ? vk_embedding(index, t2) : NULL;
  bert_tensor_release(t2);
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] = n;
  if (n == 0 || H == 0) return bert_vk_empty(BERT_F32, t->ndim, shape);
  if (y2 == NULL) return NULL;
  bert_tensor *y = bert_view(y2, t->ndim, shape);
  bert_tensor_release(y2);
  if (y == NULL) bert_set_error("index_select: vulkan: cannot view %s", SHAPE(s1, t));
  return y;
}

/* z.index_add_(0, index, g): rows of a contiguous float32 device z. */
int vk_index_add(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *g) {
  if (dim != 0 || z->dtype != BERT_F32 || !bert_is_contiguous(z)) {
    bert_set_error("index_add_: not supported on device vulkan (only dim 1 of a contiguous float32 tensor)");
    return -1;
  }
  int64_t V = z->shape[0], H = V ? bert_numel(z) / V : 0, n = index->shape[0];
  if (n == 0 || H == 0) return 0;
  int64_t sz[2] = {V, H}, sg[2] = {n, H};
  bert_tensor *z2 = bert_view(z, 2, sz), *gc = bert_contiguous((bert_tensor *)g), *g2 = gc ? bert_view(gc, 2, sg) : NULL;
  bert_tensor *ids = bert_is_host(index) ? bert_vk_upload(index) : bert_contiguous((bert_tensor *)index);
  int rc = z2 && g2 && ids ? embedding_scatter(z2, ids, g2) : -1;
  if (rc == 0) bert_bump_version(z);
  bert_tensor_release(z2); bert_tensor_release(gc); bert_tensor_release(g2); bert_tensor_release(ids);
  return rc;
}
