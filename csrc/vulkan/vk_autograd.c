/*
** Autograd through device tensors: the graph nodes of the nn ops on
** Vulkan (linear, layer norm, bias + GELU, dropout, embedding, cross
** entropy, attention).  Each backward records device kernels only (the
** backward GEMMs, the layer-norm / GELU / embedding-scatter / cross-entropy
** kernels, the flash-attention recompute kernel, the dropout mask
** regenerated from its Philox counters) and writes into the gradient
** buffers directly when they exist on the device (the parameters' views of
** a model's flat gradient), so a training step never waits on the host.
*/
#include <stdlib.h>
#include <string.h>

#include "vulkan/vk.h"
#include "core/autograd.h"

/* t's gradient when a kernel can write into it: a contiguous float32
** device tensor of t's shape (borrowed), else NULL. */
bert_tensor *bert_vk_grad_target(bert_tensor *t) {
  bert_tensor *g = t ? t->grad : NULL;
  if (g == NULL || !bert_is_vk(g) || g->dtype != BERT_F32 || !bert_is_contiguous(g) || g->ndim != t->ndim ||
      memcmp(g->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)) != 0)
    return NULL;
  return g;
}

static int wants(bert_tensor *t) { return t != NULL && t->requires_grad; }

static bert_node *make_node(bert_tensor **y, const char *name, bert_backward_fn fn, int n, bert_tensor *const *in) {
  if (!bert_needs_grad(n, in)) return NULL;
  bert_node *node = bert_node_new(name, fn, n, in);
  if (node == NULL) { bert_tensor_release(*y); *y = NULL; return NULL; }
  bert_attach(*y, node);
  return node;
}

/* {====================================================== linear */

/* dst (t's gradient, or a new tensor handed to it) = / += op(A) op(B) */
static int gemm_grad(bert_tensor *t, bert_tensor *a, int ta, bert_tensor *b, int tb, int64_t M, int64_t N) {
  int64_t s2[2] = {M, N};
  bert_tensor *tgt = bert_vk_grad_target(t);
  if (tgt) {
    bert_tensor *v = bert_view(tgt, 2, s2);
    int rc = v ? bert_vk_gemm_into(v, a, ta, b, tb, 1.0f) : -1;
    bert_tensor_release(v);
    return rc;
  }
  bert_tensor *c = bert_vk_empty(BERT_F32, 2, s2);
  if (c == NULL || bert_vk_gemm_into(c, a, ta, b, tb, 0.0f) != 0) { bert_tensor_release(c); return -1; }
  bert_tensor *v = bert_view(c, t->ndim, t->shape);
  bert_tensor_release(c);
  return v ? bert_accumulate_grad_steal(t, v) : -1;
}

/* saved: 0 = x as [R, in] (contiguous), 1 = W */
static int linear_bwd(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *xin = node->inputs[0], *win = node->inputs[1], *bin = node->inputs[2];
  bert_tensor *x2 = bert_node_saved(node, 0), *w = bert_node_saved(node, 1);
  if (x2 == NULL || w == NULL) return -1;
  int64_t outf = w->shape[0], in = w->shape[1], R = x2->shape[0], gs[2] = {R, outf};
  bert_tensor *g2 = bert_view(g, 2, gs);
  int rc = g2 ? 0 : -1;
  if (rc == 0 && wants(xin)) rc = gemm_grad(xin, g2, 0, w, 0, R, in);
  if (rc == 0 && wants(win)) rc = gemm_grad(win, g2, 1, x2, 0, outf, in);
  if (rc == 0 && wants(bin)) {
    bert_tensor *db = bert_vk_column_sums(g2);
    rc = db ? bert_accumulate_grad_steal(bin, db) : -1;
  }
  bert_tensor_release(g2);
  (void)out;
  return rc;
}

bert_tensor *bert_vkag_linear(bert_tensor *y, bert_tensor *x_in, bert_tensor *w, bert_tensor *b, bert_tensor *x2) {
  bert_tensor *in[3] = {x_in, w, b};
  bert_node *node = make_node(&y, "linear", linear_bwd, 3, in);
  if (node) { bert_node_save(node, x2); bert_node_save(node, w); }
  return y;
}
/* }====================================================== */

/* {====================================================== layer norm */

/* saved: 0 = x, 1 = stats, then residual (i[0]) and gamma (i[1]), -1 if absent */
static int layer_norm_bwd(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *xin = node->inputs[0], *gin = node->inputs[1], *bin = node->inputs[2], *rin = node->inputs[3];
  bert_tensor *x = bert_node_saved(node, 0), *st = bert_node_saved(node, 1);
  bert_tensor *r = node->i[0] >= 0 ? bert_node_saved(node, (int)node->i[0]) : NULL;
  bert_tensor *gm = node->i[1] >= 0 ? bert_node_saved(node, (int)node->i[1]) : NULL;
  if (!x || !st || (node->i[0] >= 0 && !r) || (node->i[1] >= 0 && !gm)) return -1;
  bert_tensor *dx = NULL, *dgb = NULL;
  if (bert_vk_layer_norm_backward(g, x, r, gm, st, &dx, &dgb) != 0) return -1;
  int rc = 0;
  if (wants(gin)) {
    bert_tensor *v = bert_select(dgb, 0, 0);
    rc |= v ? bert_accumulate_grad_steal(gin, v) : -1;
  }
  if (wants(bin)) {
    bert_tensor *v = bert_select(dgb, 0, 1);
    rc |= v ? bert_accumulate_grad_steal(bin, v) : -1;
  }
  if (rc == 0 && wants(rin)) rc = bert_accumulate_grad(rin, dx);
  if (rc == 0 && wants(xin)) { rc = bert_accumulate_grad_steal(xin, dx); dx = NULL; }
  bert_tensor_release(dx);
  bert_tensor_release(dgb);
  (void)out;
  return rc;
}

bert_tensor *bert_vkag_layer_norm(bert_tensor *y, bert_tensor *x, bert_tensor *g, bert_tensor *b,
                                  bert_tensor *r, bert_tensor *stats) {
  bert_tensor *in[4] = {x, g, b, r};
  bert_node *node = make_node(&y, "layer_norm", layer_norm_bwd, 4, in);
  if (node == NULL) return y;
  bert_tensor *xc = bert_contiguous(x), *rc = r ? bert_contiguous(r) : NULL, *gc = g ? bert_contiguous(g) : NULL;
  if (!xc || (r && !rc) || (g && !gc)) {
    bert_tensor_release(xc); bert_tensor_release(rc); bert_tensor_release(gc);
    bert_tensor_release(y);
    return NULL;
  }
  bert_node_save(node, xc);
  bert_node_save(node, stats);
  node->i[0] = node->i[1] = -1;
  if (rc) { node->i[0] = node->nsaved; bert_node_save(node, rc); }
  if (gc) { node->i[1] = node->nsaved; bert_node_save(node, gc); }
  bert_tensor_release(xc); bert_tensor_release(rc); bert_tensor_release(gc);
  return y;
}
/* }====================================================== */

/* {====================================================== bias + GELU, dropout */

/* saved: 0 = x (contiguous), 1 = b (when present); i[0] = tanh mode */
static int bias_gelu_bwd(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *xin = node->inputs[0], *bin = node->inputs[1];
  bert_tensor *x = bert_node_saved(node, 0), *b = node->nsaved > 1 ? bert_node_saved(node, 1) : NULL;
  if (x == NULL || (node->nsaved > 1 && b == NULL)) return -1;
  bert_tensor *dx = bert_vk_gelu_backward(g, x, b, (int)node->i[0]);
  if (dx == NULL) return -1;
  int rc = 0;
  if (wants(bin)) {
    bert_tensor *db = bert_vk_column_sums(dx);
    rc = db ? bert_accumulate_grad_steal(bin, db) : -1;
  }
  if (rc == 0 && wants(xin)) return bert_accumulate_grad_steal(xin, dx);
  bert_tensor_release(dx);
  (void)out;
  return rc;
}

bert_tensor *bert_vkag_bias_gelu(bert_tensor *y, bert_tensor *x_in, bert_tensor *b_in, bert_tensor *x,
                                 bert_tensor *b, int tanh_mode) {
  bert_tensor *in[2] = {x_in, b_in};
  bert_node *node = make_node(&y, "bias_gelu", bias_gelu_bwd, 2, in);
  if (node) {
    bert_node_save(node, x);
    if (b) bert_node_save(node, b);
    node->i[0] = tanh_mode != 0;
  }
  return y;
}

/* i[0] = seed, i[1] = offset, f[0] = p: the mask is regenerated */
static int dropout_bwd(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *dx = bert_vk_dropout_mask(g, node->f[0], (uint64_t)node->i[0], (uint64_t)node->i[1]);
  (void)out;
  return dx ? bert_accumulate_grad_steal(node->inputs[0], dx) : -1;
}

bert_tensor *bert_vkag_dropout(bert_tensor *y, bert_tensor *x, double p, uint64_t seed, uint64_t offset) {
  bert_node *node = make_node(&y, "dropout", dropout_bwd, 1, &x);
  if (node) { node->i[0] = (int64_t)seed; node->i[1] = (int64_t)offset; node->f[0] = p; }
  return y;
}
/* }====================================================== */

/* {====================================================== embedding, cross entropy */

/* saved: 0 = ids (device, contiguous) */
static int embedding_bwd(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *w = node->inputs[1], *ids = bert_node_saved(node, 0);
  if (ids == NULL) return -1;
  (void)out;
  bert_tensor *tgt = bert_vk_grad_target(w);
  if (tgt) {   /* rows added into the existing gradient (e.g. the tied decoder's) */
    if (bert_vk_embedding_backward(tgt, ids, g) != 0) return -1;
    bert_bump_version(tgt);
    return 0;
  }
  bert_tensor *z = bert_vk_zeros(BERT_F32, 2, w->shape);
  if (z == NULL || bert_vk_embedding_backward(z, ids, g) != 0) { bert_tensor_release(z); return -1; }
  return bert_accumulate_grad_steal(w, z);
}

bert_tensor *bert_vkag_embedding(bert_tensor *y, bert_tensor *w, bert_tensor *ids) {
  bert_tensor *in[2] = {NULL, w};
  bert_node *node = make_node(&y, "embedding", embedding_bwd, 2, in);
  if (node) bert_node_save(node, ids);
  return y;
}

/* saved: 0 = logits, 1 = labels (device, contiguous); i[0] = ignore, i[1] = reduction */
static int cross_entropy_bwd(bert_node *node, bert_tensor *out, bert_tensor *g_in) {
  bert_tensor *l = bert_node_saved(node, 0), *lab = bert_node_saved(node, 1);
  if (l == NULL || lab == NULL) return -1;
  int red = (int)node->i[1];
  bert_tensor *g = bert_is_vk(g_in) ? bert_alias(g_in) : bert_vk_upload(g_in), *dl = NULL;
  if (g == NULL) return -1;
  if (red != BERT_REDUCE_NONE) {
    dl = bert_vk_cross_entropy_backward(l, lab, node->i[0], red, g);
  } else {   /* per-row upstream gradients: the summed form with g = 1, scaled per row */
    bert_tensor *one = bert_vk_empty(BERT_F32, 0, NULL);
    bert_tensor *d1 = one && bert_vk_fill_(one, 1.0) == 0
                    ? bert_vk_cross_entropy_backward(l, lab, node->i[0], BERT_REDUCE_SUM, one) : NULL;
    bert_tensor *gu = d1 ? bert_unsqueeze(g, g->ndim) : NULL;
    dl = gu ? bert_binary(BERT_MUL, d1, gu, 1, NULL) : NULL;
    bert_tensor_release(one); bert_tensor_release(d1); bert_tensor_release(gu);
  }
  bert_tensor_release(g);
  (void)out;
  return dl ? bert_accumulate_grad_steal(node->inputs[0], dl) : -1;
}

bert_tensor *bert_vkag_cross_entropy(bert_tensor *loss, bert_tensor *l_in, bert_tensor *logits, bert_tensor *labels,
                                     int64_t ignore_index, int reduction) {
  bert_tensor *in[2] = {l_in, NULL};
  bert_node *node = make_node(&loss, "cross_entropy", cross_entropy_bwd, 2, in);
  if (node) {
    bert_node_save(node, logits);
    bert_node_save(node, labels);
    node->i[0] = ignore_index;
    node->i[1] = reduction;
  }
  return loss;
}
/* }====================================================== */

/* {====================================================== attention */

/* saved: q, k, v, lse, then the mask (when any); extra: the push constants */
static int attention_bwd(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_vk_attn_saved sv;
  memcpy(&sv, node->extra, sizeof sv);
  sv.q = bert_node_saved(node, 0);
  sv.k = bert_node_saved(node, 1);
  sv.v = bert_node_saved(node, 2);
  sv.lse = bert_node_saved(node, 3);
  sv.mask = node->nsaved > 4 ? bert_node_saved(node, 4) : NULL;
  if (!sv.q || !sv.k || !sv.v || !sv.lse || (node->nsaved > 4 && !sv.mask)) return -1;
  bert_tensor *dq, *dk, *dv;
  if (bert_vk_attention_backward(&sv, out, g, &dq, &dk, &dv) != 0) return -1;
  int e1 = bert_accumulate_grad_steal(node->inputs[0], dq);
  int e2 = bert_accumulate_grad_steal(node->inputs[1], dk);
  int e3 = bert_accumulate_grad_steal(node->inputs[2], dv);
  return (e1 || e2 || e3) ? -1 : 0;
}

bert_tensor *bert_vkag_attention(bert_tensor *out, bert_tensor *q_in, bert_tensor *k_in, bert_tensor *v_in,
                                 const bert_vk_attn_saved *sv) {
  bert_tensor *in[3] = {q_in, k_in, v_in};
  bert_node *node = make_node(&out, "attention", attention_bwd, 3, in);
  if (node == NULL) return out;
  node->extra = malloc(sizeof *sv);
  if (node->extra == NULL) { bert_set_error("attention: out of memory"); bert_tensor_release(out); return NULL; }
  memcpy(node->extra, sv, sizeof *sv);
  bert_vk_attn_saved *e = node->extra;
  e->q = e->k = e->v = e->mask = e->lse = NULL;
  bert_node_save(node, sv->q);
  bert_node_save(node, sv->k);
  bert_node_save(node, sv->v);
  bert_node_save(node, sv->lse);
  if (sv->mask) bert_node_save(node, sv->mask);
  return out;
}
/* }====================================================== */
