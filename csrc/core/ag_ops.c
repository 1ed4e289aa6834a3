/*
** Differentiable tensor ops: forward through ops.h, backward by hand,
** through the same front-ends (so on any device).  Each op's node type and
** saved state sit with its forward and backward below, llm.c style.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ag_ops.h"
#include "core/autograd.h"
#include "core/backend.h"

#define wants bert_node_wants

/* A zero-dimensional float32 tensor holding v, on t's device. */
static bert_tensor *scalar_like(const bert_tensor *t, double v) {
  bert_tensor *s = bert_backend_of(t)->empty(BERT_F32, 0, NULL);
  if (s && bert_fill_(s, v) != 0) { bert_tensor_release(s); return NULL; }
  return s;
}

/* Accumulates g into input k when that input wants it; consumes g. */
static int give(bert_node *node, int k, bert_tensor *g) {
  if (g == NULL) return -1;
  return bert_accumulate_grad_steal(node->inputs[k], g);
}

/* {====================================================== binary */

typedef struct { bert_binop op; double alpha; } binary_state;

static int binary_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  binary_state *st = node->state;
  bert_binop op = st->op;
  double alpha = st->alpha;
  bert_tensor *a = node->nsaved > 0 ? bert_node_saved(node, 0) : NULL;
  bert_tensor *b = node->nsaved > 1 ? bert_node_saved(node, 1) : NULL;
  if (node->nsaved > 0 && (a == NULL || b == NULL)) return -1;
  bert_tensor *ga = NULL, *gb = NULL;
  int rc = 0;
  switch (op) {
    case BERT_ADD: case BERT_SUB:
      if (wants(node, 0)) { bert_tensor_retain(g); rc |= give(node, 0, g); }
      if (wants(node, 1)) {
        bert_tensor *s = scalar_like(g, op == BERT_ADD ? alpha : -alpha);
        if (s == NULL) return -1;
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
        bert_tensor *one = scalar_like(b, 1.0);
        if (one == NULL) return -1;
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
      if (wants(node, 1)) {   /* g * (pick_a == 0) */
        bert_tensor *z = bert_tensor_new(BERT_I32, 0, NULL);
        bert_tensor *np = z ? bert_binary(BERT_EQ, pick_a, z, 1, NULL) : NULL;
        rc |= give(node, 1, np ? bert_binary(BERT_MUL, g, np, 1, NULL) : NULL);
        bert_tensor_release(z);
        bert_tensor_release(np);
      }
      bert_tensor_release(pick_a);
      return rc;
    }
    default:
      return 0;
  }
}

/* one node type per binary op, named after it */
static const bert_node_type binary_nodes[] = {
#define X(ID, name, cmp) {#name, binary_backward, sizeof(binary_state), 0},
  BERT_BINARY_OPS(X)
#undef X
};

bert_tensor *bert_ag_binary(bert_binop op, bert_tensor *a, bert_tensor *b, double alpha) {
  bert_tensor *in[2] = {a, b};
  bert_node *node;
  bert_tensor *out = bert_binary(op, a, b, alpha, NULL);
  if (bert_binop_is_comparison(op)) return out;   /* comparisons are not differentiable */
  out = bert_record(out, &node, &binary_nodes[op], 2, in);
  if (node) {
    binary_state *st = node->state;
    st->op = op;
    st->alpha = alpha;
    if (op != BERT_ADD && op != BERT_SUB) { bert_node_save(node, a); bert_node_save(node, b); }
  }
  return out;
}
/* }====================================================== */

/* {====================================================== unary */

typedef struct { bert_unop op; } unary_state;

/* saved: 0 = the input; dy * f'(x) by the backend's kernel */
static int unary_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  unary_state *st = node->state;
  bert_tensor *a = bert_node_saved(node, 0);
  if (a == NULL) return -1;
  return give(node, 0, bert_unary_backward(st->op, a, out, g));
}

static const bert_node_type unary_nodes[] = {
#define X(ID, name, keeps_int) {#name, unary_backward, sizeof(unary_state), 0},
  BERT_UNARY_OPS(X)
#undef X
};

bert_tensor *bert_ag_unary(bert_unop op, bert_tensor *a) {
  bert_node *node;
  bert_tensor *out = bert_unary(op, a, NULL);
  if (out && out->dtype != BERT_F32) return out;   /* integer results carry no gradient */
  out = bert_record(out, &node, &unary_nodes[op], 1, &a);
  if (node) { ((unary_state *)node->state)->op = op; bert_node_save(node, a); }
  return out;
}
/* }====================================================== */

/* {====================================================== masked_fill, where */

static int masked_fill_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *mask = bert_node_saved(node, 0);
  if (mask == NULL) return -1;
  return give(node, 0, bert_masked_fill(g, mask, 0, NULL));
}

static const bert_node_type masked_fill_node = {"masked_fill", masked_fill_backward, 0, 0};

bert_tensor *bert_ag_masked_fill(bert_tensor *a, bert_tensor *mask, double value) {
  bert_node *node;
  bert_tensor *out = bert_record(bert_masked_fill(a, mask, value, NULL), &node, &masked_fill_node, 1, &a);
  if (node) bert_node_save(node, mask);
  return out;
}

static int where_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *cond = bert_node_saved(node, 0);
  if (cond == NULL) return -1;
  int rc = 0;
  bert_tensor *zero = scalar_like(g, 0.0);
  if (zero == NULL) return -1;
  if (wants(node, 1)) rc |= give(node, 1, bert_where(cond, g, zero));
  if (wants(node, 2)) rc |= give(node, 2, bert_where(cond, zero, g));
  bert_tensor_release(zero);
  return rc;
}

static const bert_node_type where_node = {"where", where_backward, 0, 0};

bert_tensor *bert_ag_where(bert_tensor *cond, bert_tensor *a, bert_tensor *b) {
  bert_tensor *in[3] = {NULL, a, b};
  bert_node *node;
  bert_tensor *out = bert_where(cond, a, b);
  if (out && out->dtype != BERT_F32) return out;
  out = bert_record(out, &node, &where_node, 3, in);
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

typedef struct { bert_redop op; int dim, keepdim, correction; } reduce_state;

static int reduce_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  reduce_state *st = node->state;
  bert_redop op = st->op;
  int dim = st->dim, keepdim = st->keepdim;
  bert_tensor *in = node->inputs[0];
  int64_t R = dim < 0 ? bert_numel(in) : in->shape[dim];
  if (op == BERT_SUM || op == BERT_MEAN) {
    bert_tensor *e = expand_back(g, in, dim, keepdim);
    if (e == NULL) return -1;
    if (op == BERT_MEAN) {
      bert_tensor *s = scalar_like(g, 1.0 / (double)R);
      bert_tensor *m = s ? bert_binary(BERT_MUL, e, s, 1, NULL) : NULL;
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
    bert_tensor *s = scalar_like(g, 2.0 / (double)(R - st->correction));
    bert_tensor *r = (p && s) ? bert_binary(BERT_MUL, p, s, 1, NULL) : NULL;
    bert_tensor_release(mean); bert_tensor_release(c); bert_tensor_release(e);
    bert_tensor_release(p); bert_tensor_release(s);
    return give(node, 0, r);
  }
  /* MAX / MIN: the gradient goes to the selected element */
  bert_tensor *idx = bert_node_saved(node, 0);
  if (idx == NULL) return -1;
  const bert_backend *be = bert_backend_of(g);
  int64_t kshape[BERT_MAX_DIMS], n = bert_numel(in), one = 1;
  for (int d = 0; d < in->ndim; d++) kshape[d] = d == dim ? 1 : in->shape[d];
  if (be->scatter_add_ == NULL) {
    /* a device without scatter: g where the position along dim (or the
    ** flat position) equals the saved index, 0 elsewhere */
    int64_t pshape[BERT_MAX_DIMS];
    for (int d = 0; d < in->ndim; d++) pshape[d] = dim < 0 ? in->shape[d] : d == dim ? in->shape[d] : 1;
    bert_tensor *pos = bert_arange(0, dim < 0 ? (double)n : (double)R, 1, BERT_I32);
    bert_tensor *pv = pos ? bert_view(pos, in->ndim, pshape) : NULL;
    bert_tensor *pd = pv ? be->from_host(pv) : NULL;
    bert_tensor *ik = dim < 0 ? bert_alias(idx) : bert_view(idx, in->ndim, kshape);
    bert_tensor *gk = dim < 0 ? bert_alias(g) : bert_view(g, in->ndim, kshape);
    bert_tensor *mask = pd && ik ? bert_binary(BERT_EQ, pd, ik, 1, NULL) : NULL;
    bert_tensor *r = mask && gk ? bert_binary(BERT_MUL, mask, gk, 1, NULL) : NULL;
    bert_tensor_release(pos); bert_tensor_release(pv); bert_tensor_release(pd);
    bert_tensor_release(ik); bert_tensor_release(gk); bert_tensor_release(mask);
    return give(node, 0, r);
  }
  bert_tensor *z = be->empty(BERT_F32, in->ndim, in->shape);
  if (z && bert_fill_(z, 0) != 0) { bert_tensor_release(z); return -1; }
  if (z == NULL) return -1;
  int rc;
  if (dim < 0) {
    bert_tensor *flat = bert_view(z, 1, &n);
    bert_tensor *gi = bert_view(idx, 1, &one), *gv = bert_view(g, 1, &one);
    rc = (flat && gi && gv) ? bert_scatter_add_(flat, 0, gi, gv) : -1;
    bert_tensor_release(flat); bert_tensor_release(gi); bert_tensor_release(gv);
  } else {
    bert_tensor *gi = bert_view(idx, in->ndim, kshape), *gv = bert_view(g, in->ndim, kshape);
    rc = (gi && gv) ? bert_scatter_add_(z, dim, gi, gv) : -1;
    bert_tensor_release(gi); bert_tensor_release(gv);
  }
  if (rc != 0) { bert_tensor_release(z); return -1; }
  return give(node, 0, z);
}

static const bert_node_type reduce_nodes[] = {
#define X(ID, name) {#name, reduce_backward, sizeof(reduce_state), 0},
  BERT_REDUCE_OPS(X)
#undef X
};

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
  if (differentiable && out->dtype == BERT_F32) out = bert_record(out, &node, &reduce_nodes[op], 1, &t);
  if (node) {
    reduce_state *st = node->state;
    st->op = op; st->dim = dim; st->keepdim = keepdim; st->correction = correction;
    if (op == BERT_VAR) bert_node_save(node, t);
    if (idx) bert_node_save(node, idx);
  }
  if (indices && dim >= 0) *indices = idx;
  else bert_tensor_release(idx);
  return out;
}

typedef struct { int dim; } softmax_state;
static const bert_node_type softmax_node;

static int softmax_backward(bert_node *node, bert_tensor *y, bert_tensor *g) {
  int dim = ((softmax_state *)node->state)->dim, log_space = node->type != &softmax_node;
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

static const bert_node_type softmax_node = {"softmax", softmax_backward, sizeof(softmax_state), 0};
static const bert_node_type log_softmax_node = {"log_softmax", softmax_backward, sizeof(softmax_state), 0};

bert_tensor *bert_ag_softmax(bert_tensor *t, int dim, int log_space) {
  bert_node *node;
  bert_tensor *out = bert_record(bert_softmax(t, dim, log_space), &node,
                                 log_space ? &log_softmax_node : &softmax_node, 1, &t);
  if (node) ((softmax_state *)node->state)->dim = dim;
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
  static const bert_node_type matmul_node = {"matmul", matmul_backward, 0, 0};
  bert_tensor *in[2] = {a, b};
  bert_node *node;
  bert_tensor *out = bert_record(bert_matmul(a, b), &node, &matmul_node, 2, in);
  if (node) { bert_node_save(node, a); bert_node_save(node, b); }
  return out;
}
/* }====================================================== */

/* {====================================================== views */

enum { V_VIEW, V_TRANSPOSE, V_PERMUTE, V_NARROW, V_SELECT, V_IDENTITY };

/* which view, and its arguments: d0/d1 (transpose), dim/start/len
** (narrow; select uses start as the index), perm (permute) */
typedef struct { int kind, d0, d1; int64_t start, len; int perm[BERT_MAX_DIMS]; } view_state;

/* Adds g into the slice of in's gradient that the narrow / select took,
** creating the gradient (zeroed, on in's device) when there is none: q, k
** and v of one fused projection share one buffer. */
static int slice_backward(bert_node *node, const view_state *st, bert_tensor *g) {
  bert_tensor *in = node->inputs[0];
  bert_tensor *tgt = bert_grad_target(in), *full;
  if (tgt) { bert_tensor_retain(tgt); full = tgt; }
  else {
    full = bert_backend_of(in)->empty(BERT_F32, in->ndim, in->shape);
    if (full && bert_fill_(full, 0) != 0) { bert_tensor_release(full); full = NULL; }
  }
  if (full == NULL) return -1;
  bert_tensor *slot = st->kind == V_NARROW ? bert_narrow(full, st->d0, st->start, st->len)
                                           : bert_select(full, st->d0, st->start);
  bert_tensor *sum = slot ? bert_binary(BERT_ADD, slot, g, 1, slot) : NULL;
  bert_tensor_release(slot);
  bert_tensor_release(sum);
  if (sum == NULL) { bert_tensor_release(full); return -1; }
  if (tgt) { bert_tensor_release(full); return 0; }
  return give(node, 0, full);
}

static int view_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  const view_state *st = node->state;
  bert_tensor *in = node->inputs[0], *r = NULL;
  (void)out;
  switch (st->kind) {
    case V_VIEW: r = bert_reshape_copy(g, in->ndim, in->shape); break;
    case V_TRANSPOSE: r = bert_transpose(g, st->d0, st->d1); break;
    case V_PERMUTE: {
      int inv[BERT_MAX_DIMS];
      for (int d = 0; d < in->ndim; d++) inv[st->perm[d]] = d;
      r = bert_permute(g, inv);
      break;
    }
    case V_NARROW: case V_SELECT: return slice_backward(node, st, g);
    default: bert_tensor_retain(g); r = g; break;   /* identity, and expand (summed by accumulate) */
  }
  return give(node, 0, r);
}

#define VIEW_NODE(name) static const bert_node_type name##_node = {#name, view_backward, sizeof(view_state), 1};
VIEW_NODE(view) VIEW_NODE(reshape) VIEW_NODE(transpose) VIEW_NODE(permute) VIEW_NODE(narrow)
VIEW_NODE(select) VIEW_NODE(squeeze) VIEW_NODE(unsqueeze) VIEW_NODE(expand) VIEW_NODE(contiguous)
VIEW_NODE(clone)
#undef VIEW_NODE

static bert_tensor *record_view(bert_tensor *out, bert_tensor *t, const bert_node_type *type, int kind,
                                int d0, int d1, int64_t start, int64_t len) {
  if (out == NULL || t->dtype != BERT_F32) return out;
  bert_node *node;
  out = bert_record(out, &node, type, 1, &t);
  if (node) {
    view_state *st = node->state;
    st->kind = kind; st->d0 = d0; st->d1 = d1; st->start = start; st->len = len;
  }
  return out;
}

bert_tensor *bert_ag_view(bert_tensor *t, int ndim, const int64_t *shape) {
  return record_view(bert_view(t, ndim, shape), t, &view_node, V_VIEW, 0, 0, 0, 0);
}

bert_tensor *bert_ag_reshape(bert_tensor *t, int ndim, const int64_t *shape) {
  return record_view(bert_reshape_copy(t, ndim, shape), t, &reshape_node, V_VIEW, 0, 0, 0, 0);
}

bert_tensor *bert_ag_transpose(bert_tensor *t, int d0, int d1) {
  return record_view(bert_transpose(t, d0, d1), t, &transpose_node, V_TRANSPOSE, d0, d1, 0, 0);
}

bert_tensor *bert_ag_permute(bert_tensor *t, const int *perm) {
  bert_tensor *out = record_view(bert_permute(t, perm), t, &permute_node, V_PERMUTE, 0, 0, 0, 0);
  if (out && out->grad_fn && out->grad_fn->type == &permute_node) {
    view_state *st = out->grad_fn->state;
    for (int d = 0; d < t->ndim; d++) st->perm[d] = perm[d];
  }
  return out;
}

bert_tensor *bert_ag_narrow(bert_tensor *t, int dim, int64_t start, int64_t len) {
  return record_view(bert_narrow(t, dim, start, len), t, &narrow_node, V_NARROW, dim, 0, start, len);
}

bert_tensor *bert_ag_select(bert_tensor *t, int dim, int64_t index) {
  return record_view(bert_select(t, dim, index), t, &select_node, V_SELECT, dim, 0, index, 0);
}

bert_tensor *bert_ag_squeeze(bert_tensor *t, int dim) {
  return record_view(bert_squeeze(t, dim), t, &squeeze_node, V_VIEW, 0, 0, 0, 0);
}

bert_tensor *bert_ag_unsqueeze(bert_tensor *t, int dim) {
  return record_view(bert_unsqueeze(t, dim), t, &unsqueeze_node, V_VIEW, 0, 0, 0, 0);
}

bert_tensor *bert_ag_expand(bert_tensor *t, int ndim, const int64_t *shape) {
  return record_view(bert_expand(t, ndim, shape), t, &expand_node, V_IDENTITY, 0, 0, 0, 0);
}

bert_tensor *bert_ag_contiguous(bert_tensor *t) {
  if (bert_is_contiguous(t)) { bert_tensor_retain(t); return t; }
  return record_view(bert_clone(t), t, &contiguous_node, V_IDENTITY, 0, 0, 0, 0);
}

bert_tensor *bert_ag_clone(bert_tensor *t) {
  return record_view(bert_clone(t), t, &clone_node, V_IDENTITY, 0, 0, 0, 0);
}
/* }====================================================== */

/* {====================================================== indexing */

typedef struct { int dim; } index_state;

/* saved: 0 = index; rows picked several times receive the sum of their gradients */
static int index_select_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *in = node->inputs[0], *index = bert_node_saved(node, 0);
  if (index == NULL) return -1;
  bert_tensor *z = bert_backend_of(g)->empty(BERT_F32, in->ndim, in->shape);
  if (z == NULL || bert_fill_(z, 0) != 0 ||
      bert_index_add_(z, ((index_state *)node->state)->dim, index, g) != 0) {
    bert_tensor_release(z);
    return -1;
  }
  (void)out;
  return give(node, 0, z);
}

static const bert_node_type index_select_node = {"index_select", index_select_backward, sizeof(index_state), 0};

bert_tensor *bert_ag_index_select(bert_tensor *t, int dim, bert_tensor *index) {
  bert_node *node = NULL;
  bert_tensor *out = bert_index_select(t, dim, index);
  if (out && t->dtype == BERT_F32) out = bert_record(out, &node, &index_select_node, 1, &t);
  if (node) { ((index_state *)node->state)->dim = dim; bert_node_save(node, index); }
  return out;
}

static int gather_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *in = node->inputs[0], *index = bert_node_saved(node, 0);
  if (index == NULL) return -1;
  bert_tensor *z = bert_backend_of(g)->empty(BERT_F32, in->ndim, in->shape);
  if (z == NULL || bert_fill_(z, 0) != 0 ||
      bert_scatter_add_(z, ((index_state *)node->state)->dim, index, g) != 0) {
    bert_tensor_release(z);
    return -1;
  }
  (void)out;
  return give(node, 0, z);
}

static const bert_node_type gather_node = {"gather", gather_backward, sizeof(index_state), 0};

bert_tensor *bert_ag_gather(bert_tensor *t, int dim, bert_tensor *index) {
  bert_node *node = NULL;
  bert_tensor *out = bert_gather(t, dim, index);
  if (out && t->dtype == BERT_F32) out = bert_record(out, &node, &gather_node, 1, &t);
  if (node) { ((index_state *)node->state)->dim = dim; bert_node_save(node, index); }
  return out;
}

static int cat_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  int dim = ((index_state *)node->state)->dim;
  int64_t at = 0;
  int rc = 0;
  for (int k = 0; k < node->ninputs; k++) {
    int64_t len = node->inputs[k]->shape[dim];
    if (wants(node, k)) rc |= give(node, k, bert_narrow(g, dim, at, len));
    at += len;
  }
  (void)out;
  return rc;
}

static const bert_node_type cat_node = {"cat", cat_backward, sizeof(index_state), 0};

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
  out = bert_record(out, &node, &cat_node, n, ts);
  if (node) ((index_state *)node->state)->dim = dim;
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
