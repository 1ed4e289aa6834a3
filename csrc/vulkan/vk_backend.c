/*
** The Vulkan backend's table: device memory, host copies, and the device
** kernels of every op it runs (vk_ops.c).  The backward entries record
** device kernels only (backward GEMMs, the layer-norm / GELU /
** embedding-scatter / cross-entropy kernels, the attention recompute, the
** dropout mask regenerated from its Philox counters) and write into the
** gradient buffers directly when they exist on the device (a model's flat
** gradient), so a training step never waits on the host.
*/
#include <string.h>

#include "core/autograd.h"
#include "vulkan/vk.h"
#include "vulkan/vk_opcodes.h"

static int wants(const bert_tensor *t) { return t != NULL && t->requires_grad; }

/* {====================================================== what the device runs */

/* Attention walks all keys of a query row in one invocation: past this
** many, lavapipe cuts the loop short (a silent wrong answer), so longer
** key sequences are refused until the kernel splits them. */
#define ATTN_MAX_KEYS ((int64_t)VK_MAX_LOOP)

static int supports(bert_op op, int n, const bert_tensor *const *args, const char **why) {
  switch (op) {
    case BERT_OP_ATTENTION:
    case BERT_OP_ATTENTION_BACKWARD:
      if (args[0]->ndim >= 3 && args[0]->shape[args[0]->ndim - 1] > 256) { *why = "head_dim above 256"; return 0; }
      if (args[1]->ndim == 4 && args[1]->shape[2] > ATTN_MAX_KEYS) { *why = "more than 32768 keys"; return 0; }
      return 1;
    default:
      return 1;
  }
  (void)n;
}
/* }====================================================== */

/* {====================================================== elementwise */

static int binary(bert_binop op, const bert_tensor *a, const bert_tensor *b, double alpha, bert_tensor *out) {
  bert_tensor *r = bert_vk_binary(op, a, b, alpha, out);
  bert_tensor_release(r);
  return r ? 0 : -1;
}

static int unary(bert_unop op, const bert_tensor *a, bert_tensor *out) {
  bert_tensor *r = bert_vk_unary(op, a, out);
  bert_tensor_release(r);
  return r ? 0 : -1;
}

static bert_tensor *unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *y, const bert_tensor *dy) {
  (void)y;
  return bert_vk_unary_backward(op, x, dy);
}

/* z.index_add_(0, index, src): rows of a contiguous float32 device z. */
static int index_add(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src) {
  if (dim != 0 || z->dtype != BERT_F32 || !bert_is_contiguous(z)) {
    bert_set_error("index_add_: not supported on device vulkan (only dim 1 of a contiguous float32 tensor)");
    return -1;
  }
  return bert_vk_index_add0(z, index, src);
}
/* }====================================================== */

/* {====================================================== nn ops */

/* t's gradient (existing on the device) += op(A) op(B), or a new one */
static int gemm_grad(bert_tensor *t, const bert_tensor *a, int ta, const bert_tensor *b, int tb, int64_t M, int64_t N) {
  int64_t s2[2] = {M, N};
  bert_tensor *tgt = bert_grad_target(t);
  if (tgt && bert_is_vk(tgt)) {
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

static bert_tensor *linear(const bert_tensor *x, const bert_tensor *w, const bert_tensor *b) {
  return bert_vk_linear((bert_tensor *)x, (bert_tensor *)w, (bert_tensor *)b);
}

static int linear_backward(bert_tensor *const in[3], const bert_tensor *x, const bert_tensor *w, const bert_tensor *g) {
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

static bert_tensor *layer_norm(const bert_tensor *x, const bert_tensor *gamma, const bert_tensor *beta,
                               double eps, const bert_tensor *res, bert_tensor **stats) {
  return bert_vk_layer_norm_ex((bert_tensor *)x, (bert_tensor *)gamma, (bert_tensor *)beta, eps,
                               (bert_tensor *)res, stats);
}

static int layer_norm_backward(bert_tensor *const in[4], const bert_tensor *x, const bert_tensor *res,
                               const bert_tensor *gamma, const bert_tensor *stats, const bert_tensor *g) {
  bert_tensor *dx = NULL, *dgb = NULL;
  if (bert_vk_layer_norm_backward((bert_tensor *)g, (bert_tensor *)x, (bert_tensor *)res, (bert_tensor *)gamma,
                                  (bert_tensor *)stats, &dx, &dgb) != 0)
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

static bert_tensor *bias_gelu(const bert_tensor *x, const bert_tensor *b, int tanh_mode) {
  return bert_vk_bias_gelu((bert_tensor *)x, (bert_tensor *)b, tanh_mode);
}

static int bias_gelu_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b, int tanh_mode,
                              const bert_tensor *g) {
  bert_tensor *dx = bert_vk_gelu_backward((bert_tensor *)g, (bert_tensor *)x, (bert_tensor *)b, tanh_mode);
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

static bert_tensor *dropout(const bert_tensor *x, double p, bert_stream s) {
  return bert_vk_dropout_mask((bert_tensor *)x, p, s.seed, s.offset);
}

static bert_tensor *embedding(const bert_tensor *ids, const bert_tensor *w) {
  return bert_vk_embedding((bert_tensor *)ids, (bert_tensor *)w);
}

static int embedding_backward(bert_tensor *w, const bert_tensor *ids_in, const bert_tensor *g) {
  bert_tensor *ids = bert_is_vk(ids_in) ? bert_alias(ids_in) : bert_vk_upload(ids_in);
  if (ids == NULL) return -1;
  bert_tensor *tgt = bert_grad_target(w);
  int rc;
  if (tgt && bert_is_vk(tgt)) {   /* rows added into the existing gradient (e.g. the tied decoder's) */
    rc = bert_vk_embedding_backward(tgt, ids, (bert_tensor *)g);
    if (rc == 0) bert_bump_version(tgt);
  } else {
    bert_tensor *z = bert_vk_zeros(BERT_F32, 2, w->shape);
    rc = z ? bert_vk_embedding_backward(z, ids, (bert_tensor *)g) : -1;
    rc = rc == 0 ? bert_accumulate_grad_steal(w, z) : (bert_tensor_release(z), -1);
  }
  bert_tensor_release(ids);
  return rc;
}

static bert_tensor *cross_entropy(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore,
                                  bert_reduction red, int64_t count, bert_tensor **lse) {
  *lse = NULL;   /* backward recomputes the row statistics */
  return bert_vk_cross_entropy((bert_tensor *)logits, (bert_tensor *)labels, ignore, (int)red, count);
}

static bert_tensor *cross_entropy_backward(const bert_tensor *l, const bert_tensor *lab_in, const bert_tensor *lse,
                                           int64_t ignore, bert_reduction red, int64_t count,
                                           const bert_tensor *g_in) {
  (void)lse;
  bert_tensor *lab = bert_is_vk(lab_in) ? bert_alias(lab_in) : bert_vk_upload(lab_in);
  bert_tensor *g = bert_is_vk(g_in) ? bert_alias(g_in) : bert_vk_upload(g_in), *dl = NULL;
  if (g && lab) {
    if (red != BERT_REDUCE_NONE) {
      dl = bert_vk_cross_entropy_backward((bert_tensor *)l, lab, ignore, red, count, g);
    } else {   /* per-row upstream gradients: the summed form with g = 1, scaled per row */
      bert_tensor *one = bert_vk_empty(BERT_F32, 0, NULL);
      bert_tensor *d1 = one && bert_vk_fill_(one, 1.0) == 0
                      ? bert_vk_cross_entropy_backward((bert_tensor *)l, lab, ignore, BERT_REDUCE_SUM, count, one) : NULL;
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

/* {====================================================== optimizers */

/* One reduction into a device slot, one read back. */
static int sumsq(const bert_tensor *t, double *out) {
  int64_t one = 1;
  bert_tensor *part = bert_vk_empty(BERT_F32, 1, &one);
  int rc = part ? bert_vk_sumsq_into(t, part, 0) : -1;
  if (rc == 0) *out = bert_vk_get_flat(part, 0);
  bert_tensor_release(part);
  return rc;
}
/* }====================================================== */

const bert_backend bert_vulkan_backend = {
  .name = "vulkan",
  .is_host = 0,
  .supports_op = supports,
  .empty = bert_vk_empty,
  .storage_free = bert_vk_storage_free,
  .from_host = bert_vk_upload,
  .to_host = bert_vk_download,
  .copy_ = bert_vk_copy_,
  .get_flat = bert_vk_get_flat,
  .sync = bert_vk_sync,
  .binary = binary,
  .unary = unary,
  .unary_backward = unary_backward,
  .fill_ = bert_vk_fill_,
  .reduce = bert_vk_reduce,
  .softmax = bert_vk_softmax,
  .matmul = bert_vk_matmul,
  .index_select = bert_vk_index_select,
  .index_add_ = index_add,
  .linear = linear,
  .linear_backward = linear_backward,
  .layer_norm = layer_norm,
  .layer_norm_backward = layer_norm_backward,
  .bias_gelu = bias_gelu,
  .bias_gelu_backward = bias_gelu_backward,
  .dropout = dropout,
  .embedding = embedding,
  .embedding_backward = embedding_backward,
  .cross_entropy = cross_entropy,
  .cross_entropy_backward = cross_entropy_backward,
  .attention = bert_vk_attention_ex,
  .attention_backward = bert_vk_attention_backward,
  .adamw_step = bert_vk_adamw_step,
  .lamb_step = bert_vk_lamb_step,
  .sumsq = sumsq,
};
