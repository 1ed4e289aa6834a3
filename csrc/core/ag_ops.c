/*
** Differentiable tensor ops: forward through ops.h, backward by hand.
** Each forward is paired with its backward below, llm.c style.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ag_ops.h"
#include "core/autograd.h"
#include "vulkan/vk.h"

/* Attaches a node to out when an input requires grad.  Returns out, or
** NULL (out released) if the node cannot be allocated. */
static bert_tensor *record(bert_tensor *out, bert_node **node, const char *name,
                           bert_backward_fn fn, int n, bert_tensor *const *in) {
  *node = NULL;
  if (out == NULL || !bert_needs_grad(n, in)) return out;
  *node = bert_node_new(name, fn, n, in);
  if (*node == NULL) { bert_tensor_release(out); return NULL; }
  bert_attach(out, *node);
  return out;
}

static int wants(bert_node *node, int k) {
  return node->inputs[k] != NULL && node->inputs[k]->requires_grad;
}

/* Accumulates g into input k when that input wants it; consumes g. */
static int give(bert_node *node, int k, bert_tensor *g) {
  if (g == NULL) return -1;
  return bert_accumulate_grad_steal(node->inputs[k], g);
}

/* {====================================================== binary */

static int binary_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_binop op = (bert_binop)node->i[0];
  double alpha = node->f[0];
  bert_tensor *a = node->nsaved > 0 ? bert_node_saved(node, 0) : NULL;
  bert_tensor *b = node->nsaved > 1 ? bert_node_saved(node, 1) : NULL;
  if (node->nsaved > 0 && (a == NULL || b == NULL)) return -1;
  bert_tensor *ga = NULL, *gb = NULL;
  int rc = 0;
  switch (op) {
    case BERT_ADD: case BERT_SUB:
      if (wants(node, 0)) { bert_tensor_retain(g); rc |= give(node, 0, g); }
      if (wants(node, 1)) {
        bert_tensor *s = bert_tensor_empty(BERT_F32, 0, NULL);
        if (s == NULL) return -1;
        bert_f32(s)[0] = (float)(op == BERT_ADD ? alpha : -alpha);
        rc |= give(node, 1, bert_binary(BERT_MUL, g, s, 1, NULL));
        bert_tensor_release(s);
      }
      return rc;
    case BERT_MUL:
      if (wants(node, 0)) rc |= give(node, 0, bert_binary(BERT_MUL, g, b, 1, NULL));
      if (wants(node, 1)) rc |= give(node, 1, bert_binary(BERT_MUL, g, a, 1, NULL));
      return rc;
    case BERT_DIV:
      if (wants(node, 0)) rc |= give(node, 0, bert_binary(BERT_DIV, g, b, 1, NULL));
      if (wants(node, 1)) {   /* -g * out / b */
        bert_tensor *t = bert_binary(BERT_MUL, g, out, 1, NULL);
        gb = t ? bert_binary(BERT_DIV, t, b, 1, NULL) : NULL;
        bert_tensor_release(t);
        if (gb) bert_unary(BERT_NEG, gb, gb);
        rc |= give(node, 1, gb);
      }
      return rc;
    case BERT_POW:
      if (wants(node, 0)) {   /* g * b * a^(b-1) = g * b * out / a, computed safely at a = 0 */
        bert_tensor *one = bert_tensor_empty(BERT_F32, 0, NULL);
        if (one == NULL) return -1;
        bert_f32(one)[0] = 1;
        bert_tensor *bm1 = bert_binary(BERT_SUB, b, one, 1, NULL);
        bert_tensor *p = bm1 ? bert_binary(BERT_POW, a, bm1, 1, NULL) : NULL;
        bert_tensor *q = p ? bert_binary(BERT_MUL, p, b, 1, NULL) : NULL;
        ga = q ? bert_binary(BERT_MUL, q, g, 1, NULL) : NULL;
        bert_tensor_release(one); bert_tensor_release(bm1); bert_tensor_release(p); bert_tensor_release(q);
        rc |= give(node, 0, ga);
      }
      if (wants(node, 1)) {   /* g * out * log(a) */
        bert_tensor *la = bert_unary(BERT_LOG, a, NULL);
        bert_tensor *t = la ? bert_binary(BERT_MUL, out, la, 1, NULL) : NULL;
        gb = t ? bert_binary(BERT_MUL, t, g, 1, NULL) : NULL;
        bert_tensor_release(la); bert_tensor_release(t);
        rc |= give(node, 1, gb);
      }
      return rc;
    case BERT_MAXIMUM: case BERT_MINIMUM: {
      /* the gradient goes to the chosen operand (a on ties) */
      bert_tensor *pick_a = bert_binary(op == BERT_MAXIMUM ? BERT_GE : BERT_LE, a, b, 1, NULL);
      if (pick_a == NULL) return -1;
      if (wants(node, 0)) rc |= give(node, 0, bert_binary(BERT_MUL, g, pick_a, 1, NULL));
      if (wants(node, 1) && bert_is_vk(g)) {   /* g * (pick_a == 0) on the device */
        bert_tensor *z = bert_tensor_new(BERT_I32, 0, NULL);
        bert_tensor *np = z ? bert_binary(BERT_EQ, pick_a, z, 1, NULL) : NULL;
        rc |= give(node, 1, np ? bert_binary(BERT_MUL, g, np, 1, NULL) : NULL);
        bert_tensor_release(z);
        bert_tensor_release(np);
      } else if (wants(node, 1)) rc |= give(node, 1, bert_masked_fill(g, pick_a, 0, NULL));
      bert_tensor_release(pick_a);
      return rc;
    }
    default:
      return 0;
  }
}

bert_tensor *bert_ag_binary(bert_binop op, bert_tensor *a, bert_tensor *b, double alpha) {
  bert_tensor *in[2] = {a, b};
  bert_node *node;
  bert_tensor *out = bert_binary(op, a, b, alpha, NULL);
  if (op >= BERT_EQ) return out;   /* comparisons are not differentiable */
  out = record(out, &node, bert_binop_name(op), binary_backward, 2, in);
  if (node) {
    node->i[0] = op;
    node->f[0] = alpha;
    if (op != BERT_ADD && op != BERT_SUB) { bert_node_save(node, a); bert_node_save(node, b); }
  }
  return out;
}
/* }====================================================== */

/* {====================================================== unary */

static int unary_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_unop op = (bert_unop)node->i[0];
  bert_tensor *a0 = bert_node_saved(node, 0);
  if (a0 == NULL) return -1;
  if (bert_is_vk(g)) return give(node, 0, bert_vk_unary_backward(op, a0, g));
  bert_tensor *a = bert_contiguous(a0), *y = bert_contiguous(out);
  bert_tensor *ga = bert_tensor_empty(BERT_F32, g->ndim, g->shape);
  if (a == NULL || y == NULL || ga == NULL) {
    bert_tensor_release(a); bert_tensor_release(y); bert_tensor_release(ga);
    return -1;
  }
  const float *x = bert_f32(a), *o = bert_f32(y), *d = bert_f32(g);
  float *r = bert_f32(ga);
  int64_t n = bert_numel(g);
  const float inv_sqrt2 = 0.70710678118654752f, inv_sqrt2pi = 0.39894228040143268f;
  #pragma omp parallel for if (n >= BERT_PARALLEL_MIN)
  for (int64_t j = 0; j < n; j++) {
    float v = x[j], yv = o[j], dv = d[j], res;
    switch (op) {
      case BERT_NEG: res = -dv; break;
      case BERT_EXP: res = dv * yv; break;
      case BERT_LOG: res = dv / v; break;
      case BERT_SQRT: res = dv * 0.5f / yv; break;
      case BERT_RSQRT: res = dv * -0.5f * yv * yv * yv; break;
      case BERT_TANH: res = dv * (1.0f - yv * yv); break;
      case BERT_SIGMOID: res = dv * yv * (1.0f - yv); break;
      case BERT_RELU: res = v > 0 ? dv : 0.0f; break;
      case BERT_GELU: {   /* d/dx x*Phi(x) = Phi(x) + x*phi(x) */
        float cdf = 0.5f * (1.0f + erff(v * inv_sqrt2));
        res = dv * (cdf + v * inv_sqrt2pi * expf(-0.5f * v * v));
        break;
      }
      case BERT_GELU_TANH: {
        const float c = 0.7978845608028654f, k = 0.044715f;
        float u = c * (v + k * v * v * v), t = tanhf(u);
        res = dv * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * c * (1.0f + 3.0f * k * v * v));
        break;
      }
      case BERT_ABS: res = v > 0 ? dv : (v < 0 ? -dv : 0.0f); break;
      case BERT_ERF: res = dv * 1.1283791670955126f * expf(-v * v); break;
      default: res = 0; break;
    }
    r[j] = res;
  }
  bert_tensor_release(a);
  bert_tensor_release(y);
  return give(node, 0, ga);
}

bert_tensor *bert_ag_unary(bert_unop op, bert_tensor *a) {
  bert_node *node;
  bert_tensor *out = bert_unary(op, a, NULL);
  if (out && out->dtype != BERT_F32) return out;   /* integer results carry no gradient */
  out = record(out, &node, bert_unop_name(op), unary_backward, 1, &a);
  if (node) { node->i[0] = op; bert_node_save(node, a); }
  return out;
}
/* }====================================================== */

/* {====================================================== masked_fill, where */

static int masked_fill_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *mask = bert_node_saved(node, 0);
  if (mask == NULL) return -1;
  return give(node, 0, bert_masked_fill(g, mask, 0, NULL));
}

bert_tensor *bert_ag_masked_fill(bert_tensor *a, bert_tensor *mask, double value) {
  bert_node *node;
  bert_tensor *out = record(bert_masked_fill(a, mask, value, NULL), &node, "masked_fill",
                            masked_fill_backward, 1, &a);
  if (node) bert_node_save(node, mask);
  return out;
}

static int where_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *cond = bert_node_saved(node, 0);
  if (cond == NULL) return -1;
  int rc = 0;
  bert_tensor *zero = bert_tensor_new(BERT_F32, 0, NULL);
  if (zero == NULL) return -1;
  if (wants(node, 1)) rc |= give(node, 1, bert_where(cond, g, zero));
  if (wants(node, 2)) rc |= give(node, 2, bert_where(cond, zero, g));
  bert_tensor_release(zero);
  return rc;
}

bert_tensor *bert_ag_where(bert_tensor *cond, bert_tensor *a, bert_tensor *b) {
  bert_tensor *in[3] = {NULL, a, b};
  bert_node *node;
  bert_tensor *out = bert_where(cond, a, b);
  if (out && out->dtype != BERT_F32) return out;
  out = record(out, &node, "where", where_backward, 3, in);
  if (node) bert_node_save(node, cond);
  return out;
}
/* }====================================================== */

/* {====================================================== reductions */

/* g reshaped to keep the reduced dim(s) as size 1, then expanded to shape. */
static bert_tensor *expand_back(bert_tensor *g, const bert_tensor *in, int dim, int keepdim) {
  int64_t kshape[BERT_MAX_DIMS];
  for (int d = 0; d < in->ndim; d++) kshape[d] = (dim < 0 || d == dim) ? 1 : in->shape[d];
  (void)keepdim;
  bert_tensor *k = bert_view(g, in->ndim, kshape);
  if (k == NULL) return NULL;
  bert_tensor *e = bert_expand(k, in->ndim, in->shape);
  bert_tensor_release(k);
  return e;
}

static int reduce_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_redop op = (bert_redop)node->i[0];
  int dim = (int)node->i[1], keepdim = (int)node->i[2];
  bert_tensor *in = node->inputs[0];
  int64_t R = dim < 0 ? bert_numel(in) : in->shape[dim];
  if (op == BERT_SUM || op == BERT_MEAN) {
    bert_tensor *e = expand_back(g, in, dim, keepdim);
    if (e == NULL) return -1;
    if (op == BERT_MEAN) {
      bert_tensor *s = bert_tensor_empty(BERT_F32, 0, NULL);
      bert_tensor *m = s ? (bert_f32(s)[0] = (float)(1.0 / (double)R), bert_binary(BERT_MUL, e, s, 1, NULL)) : NULL;
      bert_tensor_release(s);
      bert_tensor_release(e);
      return give(node, 0, m);
    }
    return give(node, 0, e);
  }
  if (op == BERT_VAR) {   /* 2 (x - mean) / (R - correction) * g */
    bert_tensor *x = bert_node_saved(node, 0);
    if (x == NULL) return -1;
    bert_tensor *mean = bert_reduce(BERT_MEAN, x, dim, 1, 0, NULL);
    bert_tensor *c = mean ? bert_binary(BERT_SUB, x, mean, 1, NULL) : NULL;
    bert_tensor *e = expand_back(g, in, dim, keepdim);
    bert_tensor *p = (c && e) ? bert_binary(BERT_MUL, c, e, 1, NULL) : NULL;
    bert_tensor *s = bert_tensor_empty(BERT_F32, 0, NULL);
    bert_tensor *r = NULL;
    if (p && s) {
      bert_f32(s)[0] = (float)(2.0 / (double)(R - node->i[3]));
      r = bert_binary(BERT_MUL, p, s, 1, NULL);
    }
    bert_tensor_release(mean); bert_tensor_release(c); bert_tensor_release(e);
    bert_tensor_release(p); bert_tensor_release(s);
    return give(node, 0, r);
  }
  /* MAX / MIN: the gradient goes to the selected element */
  bert_tensor *idx = bert_node_saved(node, 0);
  if (idx == NULL) return -1;
  if (bert_is_vk(g)) {
    bert_set_error("%s backward: not implemented on vulkan", node->name);
    return -1;
  }
  bert_tensor *z = bert_tensor_new(BERT_F32, in->ndim, in->shape);
  if (z == NULL) return -1;
  int rc;
  if (dim < 0) {
    int64_t n = bert_numel(in);
    bert_tensor *flat = bert_view(z, 1, &n);
    int64_t one = 1;
    bert_tensor *gi = bert_view(idx, 1, &one), *gv = bert_view(g, 1, &one);
    rc = (flat && gi && gv) ? bert_scatter_add_(flat, 0, gi, gv) : -1;
    bert_tensor_release(flat); bert_tensor_release(gi); bert_tensor_release(gv);
  } else {
    int64_t kshape[BERT_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) kshape[d] = d == dim ? 1 : in->shape[d];
    bert_tensor *gi = bert_view(idx, in->ndim, kshape), *gv = bert_view(g, in->ndim, kshape);
    rc = (gi && gv) ? bert_scatter_add_(z, dim, gi, gv) : -1;
    bert_tensor_release(gi); bert_tensor_release(gv);
  }
  if (rc != 0) { bert_tensor_release(z); return -1; }
  return give(node, 0, z);
}

bert_tensor *bert_ag_reduce(bert_redop op, bert_tensor *t, int dim, int keepdim,
                            int correction, bert_tensor **indices) {
  bert_tensor *idx = NULL;
  int differentiable = op == BERT_SUM || op == BERT_MEAN || op == BERT_VAR ||
                       op == BERT_MAX || op == BERT_MIN;
  int want_idx = (op == BERT_MAX || op == BERT_MIN) && (indices || bert_needs_grad(1, &t));
  bert_tensor *out;
  if (want_idx && dim < 0) {
    /* a full max/min records the flat position of the winner */
    int64_t n = bert_numel(t);
    bert_tensor *flat = bert_reshape_copy(t, 1, &n);
    out = flat ? bert_reduce(op, flat, -1, keepdim, correction, NULL) : NULL;
    idx = flat ? bert_reduce(op == BERT_MAX ? BERT_ARGMAX : BERT_ARGMIN, flat, 0, 0, 0, NULL) : NULL;
    bert_tensor_release(flat);
    if (out && keepdim) {
      int64_t ones[BERT_MAX_DIMS];
      for (int d = 0; d < t->ndim; d++) ones[d] = 1;
      bert_tensor *v = bert_view(out, t->ndim, ones);
      bert_tensor_release(out);
      out = v;
    }
  } else {
    out = bert_reduce(op, t, dim, keepdim, correction, want_idx ? &idx : NULL);
  }
  if (out == NULL) { bert_tensor_release(idx); return NULL; }
  bert_node *node = NULL;
  if (differentiable && out->dtype == BERT_F32)
    out = record(out, &node, op == BERT_SUM ? "sum" : op == BERT_MEAN ? "mean" : op == BERT_VAR ? "var" :
                 op == BERT_MAX ? "max" : "min", reduce_backward, 1, &t);
  if (node) {
    node->i[0] = op; node->i[1] = dim; node->i[2] = keepdim; node->i[3] = correction;
    if (op == BERT_VAR) bert_node_save(node, t);
    if (idx) bert_node_save(node, idx);
  }
  if (indices && dim >= 0) *indices = idx;
  else bert_tensor_release(idx);
  return out;
}

static int softmax_backward(bert_node *node, bert_tensor *y, bert_tensor *g) {
  int dim = (int)node->i[0], log_space = (int)node->i[1];
  bert_tensor *r = NULL;
  if (log_space) {   /* g - exp(y) * sum(g) */
    bert_tensor *s = bert_reduce(BERT_SUM, g, dim, 1, 0, NULL);
    bert_tensor *p = bert_unary(BERT_EXP, y, NULL);
    bert_tensor *ps = (s && p) ? bert_binary(BERT_MUL, p, s, 1, NULL) : NULL;
    r = ps ? bert_binary(BERT_SUB, g, ps, 1, NULL) : NULL;
    bert_tensor_release(s); bert_tensor_release(p); bert_tensor_release(ps);
  } else {           /* y * (g - sum(g * y)) */
    bert_tensor *gy = bert_binary(BERT_MUL, g, y, 1, NULL);
    bert_tensor *s = gy ? bert_reduce(BERT_SUM, gy, dim, 1, 0, NULL) : NULL;
    bert_tensor *d = s ? bert_binary(BERT_SUB, g, s, 1, NULL) : NULL;
    r = d ? bert_binary(BERT_MUL, y, d, 1, NULL) : NULL;
    bert_tensor_release(gy); bert_tensor_release(s); bert_tensor_release(d);
  }
  return give(node, 0, r);
}

bert_tensor *bert_ag_softmax(bert_tensor *t, int dim, int log_space) {
  bert_node *node;
  bert_tensor *out = record(bert_softmax(t, dim, log_space), &node,
                            log_space ? "log_softmax" : "softmax", softmax_backward, 1, &t);
  if (node) { node->i[0] = dim; node->i[1] = log_space; }
  return out;
}
/* }====================================================== */

/* {====================================================== matmul */

static int matmul_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *a = bert_node_saved(node, 0), *b = bert_node_saved(node, 1);
  if (a == NULL || b == NULL) return -1;
  int rc = 0;
  if (wants(node, 0)) {   /* dA = dC @ B^T, summed over broadcast batch dims */
    bert_tensor *bt = bert_transpose(b, b->ndim - 2, b->ndim - 1);
    rc |= give(node, 0, bt ? bert_matmul(g, bt) : NULL);
    bert_tensor_release(bt);
  }
  if (wants(node, 1)) {   /* dB = A^T @ dC */
    bert_tensor *at = bert_transpose(a, a->ndim - 2, a->ndim - 1);
    rc |= give(node, 1, at ? bert_matmul(at, g) : NULL);
    bert_tensor_release(at);
  }
  return rc;
}

bert_tensor *bert_ag_matmul(bert_tensor *a, bert_tensor *b) {
  /* vectors become matrices through differentiable views, so the node
  ** below only ever sees 2-D and batched operands */
  if (a->ndim == 1 || b->ndim == 1) {
    if (a->ndim == 0 || b->ndim == 0) return bert_matmul(a, b);   /* the error */
    bert_tensor *a2 = a->ndim == 1 ? bert_ag_unsqueeze(a, 0) : (bert_tensor_retain(a), a);
    bert_tensor *b2 = b->ndim == 1 ? bert_ag_unsqueeze(b, 1) : (bert_tensor_retain(b), b);
    bert_tensor *c = (a2 && b2) ? bert_ag_matmul(a2, b2) : NULL;
    bert_tensor_release(a2);
    bert_tensor_release(b2);
    if (c == NULL) return NULL;
    bert_tensor *r = c, *tmp;
    if (b->ndim == 1) { tmp = bert_ag_squeeze(r, r->ndim - 1); bert_tensor_release(r); r = tmp; }
    if (r && a->ndim == 1) { tmp = bert_ag_squeeze(r, r->ndim - (b->ndim == 1 ? 1 : 2)); bert_tensor_release(r); r = tmp; }
    return r;
  }
  bert_tensor *in[2] = {a, b};
  bert_node *node;
  bert_tensor *out = record(bert_matmul(a, b), &node, "matmul", matmul_backward, 2, in);
  if (node) { bert_node_save(node, a); bert_node_save(node, b); }
  return out;
}
/* }====================================================== */

/* {====================================================== views */

enum { V_VIEW, V_TRANSPOSE, V_PERMUTE, V_NARROW, V_SELECT, V_IDENTITY };

static int view_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *in = node->inputs[0];
  bert_tensor *r = NULL;
  switch ((int)node->i[0]) {
    case V_VIEW: r = bert_view(g, in->ndim, in->shape); break;
    case V_TRANSPOSE: r = bert_transpose(g, (int)node->i[1], (int)node->i[2]); break;
    case V_PERMUTE: {
      int inv[BERT_MAX_DIMS];
      for (int d = 0; d < in->ndim; d++) inv[node->i[1 + d / 4] >> (16 * (d % 4)) & 0xffff] = d;
      r = bert_permute(g, inv);
      break;
    }
    case V_NARROW: case V_SELECT: {
      /* add g into the slice of the input's gradient, creating it (zeroed)
      ** if needed: q, k and v of one fused projection share one buffer */
      if (bert_is_vk(g)) {
        bert_tensor *tgt = bert_vk_grad_target(in);
        bert_tensor *full = tgt ? (bert_tensor_retain(tgt), tgt) : bert_vk_zeros(BERT_F32, in->ndim, in->shape);
        bert_tensor *slot = !full ? NULL : node->i[0] == V_NARROW ? bert_narrow(full, (int)node->i[1], node->i[2], node->i[3])
                                                                  : bert_select(full, (int)node->i[1], node->i[2]);
        bert_tensor *sum = slot ? bert_binary(BERT_ADD, slot, g, 1, slot) : NULL;
        bert_tensor_release(slot);
        bert_tensor_release(sum);
        if (sum == NULL) { bert_tensor_release(full); return -1; }
        if (tgt) { bert_tensor_release(full); return 0; }
        r = full;
        break;
      }
      int acc;
      float *buf = bert_grad_buffer(in, &acc);
      bert_tensor *full = NULL;
      if (buf) {
        if (!acc) memset(buf, 0, (size_t)bert_numel(in) * sizeof(float));
        full = in->grad;
        bert_tensor_retain(full);
      } else {
        full = bert_tensor_new(BERT_F32, in->ndim, in->shape);
      }
      bert_tensor *slot = NULL;
      if (full) slot = node->i[0] == V_NARROW ? bert_narrow(full, (int)node->i[1], node->i[2], node->i[3])
                                              : bert_select(full, (int)node->i[1], node->i[2]);
      bert_tensor *sum = slot ? bert_binary(BERT_ADD, slot, g, 1, slot) : NULL;
      bert_tensor_release(slot);
      if (sum == NULL) { bert_tensor_release(full); return -1; }
      bert_tensor_release(sum);
      if (buf) { bert_tensor_release(full); return 0; }
      r = full;
      break;
    }
    default: bert_tensor_retain(g); r = g; break;   /* identity, and expand (summed by accumulate) */
  }
  return give(node, 0, r);
}

static bert_tensor *record_view(bert_tensor *out, bert_tensor *t, const char *name, int kind,
                                int64_t p1, int64_t p2, int64_t p3) {
  if (out == NULL || t->dtype != BERT_F32) return out;
  bert_node *node;
  out = record(out, &node, name, view_backward, 1, &t);
  if (node) { node->i[0] = kind; node->i[1] = p1; node->i[2] = p2; node->i[3] = p3; }
  return out;
}

bert_tensor *bert_ag_view(bert_tensor *t, int ndim, const int64_t *shape) {
  return record_view(bert_view(t, ndim, shape), t, "view", V_VIEW, 0, 0, 0);
}

bert_tensor *bert_ag_reshape(bert_tensor *t, int ndim, const int64_t *shape) {
  return record_view(bert_reshape_copy(t, ndim, shape), t, "reshape", V_VIEW, 0, 0, 0);
}

bert_tensor *bert_ag_transpose(bert_tensor *t, int d0, int d1) {
  return record_view(bert_transpose(t, d0, d1), t, "transpose", V_TRANSPOSE, d0, d1, 0);
}

bert_tensor *bert_ag_permute(bert_tensor *t, const int *perm) {
  bert_tensor *out = bert_permute(t, perm);
  if (out == NULL || t->dtype != BERT_F32 || !bert_needs_grad(1, &t)) return out;
  /* pack the permutation into i[1..2]: 16 bits per dim, 4 dims per slot */
  int64_t packed[2] = {0, 0};
  for (int d = 0; d < t->ndim; d++) packed[d / 4] |= (int64_t)perm[d] << (16 * (d % 4));
  return record_view(out, t, "permute", V_PERMUTE, packed[0], packed[1], 0);
}

bert_tensor *bert_ag_narrow(bert_tensor *t, int dim, int64_t start, int64_t len) {
  return record_view(bert_narrow(t, dim, start, len), t, "narrow", V_NARROW, dim, start, len);
}

bert_tensor *bert_ag_select(bert_tensor *t, int dim, int64_t index) {
  return record_view(bert_select(t, dim, index), t, "select", V_SELECT, dim, index, 0);
}

bert_tensor *bert_ag_squeeze(bert_tensor *t, int dim) {
  return record_view(bert_squeeze(t, dim), t, "squeeze", V_VIEW, 0, 0, 0);
}

bert_tensor *bert_ag_unsqueeze(bert_tensor *t, int dim) {
  return record_view(bert_unsqueeze(t, dim), t, "unsqueeze", V_VIEW, 0, 0, 0);
}

bert_tensor *bert_ag_expand(bert_tensor *t, int ndim, const int64_t *shape) {
  return record_view(bert_expand(t, ndim, shape), t, "expand", V_IDENTITY, 0, 0, 0);
}

bert_tensor *bert_ag_contiguous(bert_tensor *t) {
  if (bert_is_contiguous(t)) { bert_tensor_retain(t); return t; }
  return record_view(bert_clone(t), t, "contiguous", V_IDENTITY, 0, 0, 0);
}

bert_tensor *bert_ag_clone(bert_tensor *t) {
  return record_view(bert_clone(t), t, "clone", V_IDENTITY, 0, 0, 0);
}
/* }====================================================== */

/* {====================================================== indexing */

static int index_select_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *in = node->inputs[0], *index = bert_node_saved(node, 0);
  int dim = (int)node->i[0];
  if (index == NULL) return -1;
  if (bert_is_vk(g)) {
    if (dim != 0) { bert_set_error("index_select backward: vulkan: only dim 1"); return -1; }
    bert_tensor *zv = bert_vk_zeros(BERT_F32, in->ndim, in->shape);
    if (zv == NULL || bert_vk_index_add0(zv, index, g) != 0) { bert_tensor_release(zv); return -1; }
    return give(node, 0, zv);
  }
  bert_tensor *z = bert_tensor_new(BERT_F32, in->ndim, in->shape);
  if (z == NULL) return -1;
  /* rows picked several times receive the sum of their gradients */
  for (int64_t k = 0; k < index->shape[0]; k++) {
    int64_t row = (int64_t)bert_get_flat(index, k);
    bert_tensor *dst = bert_select(z, dim, row), *src = bert_select(g, dim, k);
    bert_tensor *r = (dst && src) ? bert_binary(BERT_ADD, dst, src, 1, dst) : NULL;
    bert_tensor_release(dst); bert_tensor_release(src);
    if (r == NULL) { bert_tensor_release(z); return -1; }
    bert_tensor_release(r);
  }
  return give(node, 0, z);
}

bert_tensor *bert_ag_index_select(bert_tensor *t, int dim, bert_tensor *index) {
  bert_node *node = NULL;
  bert_tensor *out = bert_is_vk(t) ? bert_vk_index_select(t, dim, index) : bert_index_select(t, dim, index);
  if (out && t->dtype == BERT_F32)
    out = record(out, &node, "index_select", index_select_backward, 1, &t);
  if (node) { node->i[0] = dim; bert_node_save(node, index); }
  return out;
}

static int gather_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *in = node->inputs[0], *index = bert_node_saved(node, 0);
  if (index == NULL) return -1;
  bert_tensor *z = bert_tensor_new(BERT_F32, in->ndim, in->shape);
  if (z == NULL || bert_scatter_add_(z, (int)node->i[0], index, g) != 0) {
    bert_tensor_release(z);
    return -1;
  }
  return give(node, 0, z);
}

bert_tensor *bert_ag_gather(bert_tensor *t, int dim, bert_tensor *index) {
  bert_node *node = NULL;
  bert_tensor *out = bert_gather(t, dim, index);
  if (out && t->dtype == BERT_F32) out = record(out, &node, "gather", gather_backward, 1, &t);
  if (node) { node->i[0] = dim; bert_node_save(node, index); }
  return out;
}

static int cat_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  int dim = (int)node->i[0];
  int64_t at = 0;
  int rc = 0;
  for (int k = 0; k < node->ninputs; k++) {
    int64_t len = node->inputs[k]->shape[dim];
    if (wants(node, k)) rc |= give(node, k, bert_narrow(g, dim, at, len));
    at += len;
  }
  return rc;
}

bert_tensor *bert_ag_cat(bert_tensor *const *ts, int n, int dim) {
  bert_tensor *out = bert_cat(ts, n, dim);
  if (out == NULL || out->dtype != BERT_F32 || !bert_needs_grad(n, ts)) return out;
  /* a node holds at most BERT_NODE_MAX_INPUTS inputs: join bigger lists pairwise */
  if (n > BERT_NODE_MAX_INPUTS) {
    bert_tensor_release(out);
    int half = n / 2;
    bert_tensor *l = bert_ag_cat(ts, half, dim), *r = l ? bert_ag_cat(ts + half, n - half, dim) : NULL;
    bert_tensor *pair[2] = {l, r};
    bert_tensor *res = r ? bert_ag_cat(pair, 2, dim) : NULL;
    bert_tensor_release(l);
    bert_tensor_release(r);
    return res;
  }
  bert_node *node;
  out = record(out, &node, "cat", cat_backward, n, ts);
  if (node) node->i[0] = dim;
  return out;
}

bert_tensor *bert_ag_stack(bert_tensor *const *ts, int n, int dim) {
  char b1[160], b2[160];
  if (n <= 0) { bert_set_error("stack: expects a non-empty list of tensors"); return NULL; }
  if (n > 256) { bert_set_error("stack: at most 256 tensors, got %d", n); return NULL; }
  bert_tensor *views[256];
  bert_tensor *out = NULL;
  int made = 0;
  for (int i = 0; i < n; i++) {
    int same = ts[i]->ndim == ts[0]->ndim;
    for (int d = 0; same && d < ts[0]->ndim; d++) same = ts[i]->shape[d] == ts[0]->shape[d];
    if (!same) {
      bert_set_error("stack: tensor %d %s differs in shape from tensor 1 %s", i + 1,
                     bert_shape_str(b1, sizeof b1, ts[i]->ndim, ts[i]->shape),
                     bert_shape_str(b2, sizeof b2, ts[0]->ndim, ts[0]->shape));
      goto done;
    }
    views[i] = bert_ag_unsqueeze(ts[i], dim);
    if (views[i] == NULL) goto done;
    made++;
  }
  out = bert_ag_cat(views, n, dim);
done:
  for (int i = 0; i < made; i++) bert_tensor_release(views[i]);
  return out;
}
/* }====================================================== */
