/*
** The Vulkan backend as the rest of the core sees it: a storage kind for
** device memory and one entry per op.  The CPU ops route here with a
** one-line check (bert_is_vk) at their entry points; everything else lives
** in csrc/vk/.  Built without Vulkan (-DBERT_NO_VULKAN) every entry fails
** with an error, and no tensor can ever be on the device.
*/
#ifndef BERT_VK_H
#define BERT_VK_H

#include "core/tensor.h"
#include "core/ops.h"
#include "cpu/optim.h"
#include "cpu/nn.h"

static inline int bert_is_vk(const bert_tensor *t) {
  return t != NULL && t->storage != NULL && t->storage->kind == BERT_STORAGE_VULKAN;
}

/* ---- device (vk_device.c) ---- */
/* Initialises the device on first use; 1 when usable, else 0 and *reason. */
int bert_vk_available(const char **reason);
void bert_vk_storage_free(bert_storage *s);
/* Submits what is recorded and waits for it. */
int bert_vk_sync(void);

/* ---- tensors (vk_ops.c) ---- */
bert_tensor *bert_vk_empty(bert_dtype dt, int ndim, const int64_t *shape);
bert_tensor *bert_vk_zeros(bert_dtype dt, int ndim, const int64_t *shape);
bert_tensor *bert_vk_upload(const bert_tensor *t);     /* CPU -> device, contiguous */
bert_tensor *bert_vk_download(const bert_tensor *t);   /* device -> CPU, contiguous */
int bert_vk_copy_(bert_tensor *dst, const bert_tensor *src);   /* any devices */
bert_tensor *bert_vk_to_dtype(const bert_tensor *t, bert_dtype dt);
double bert_vk_get_flat(const bert_tensor *t, int64_t i);

/* ---- ops (vk_ops.c): same contracts as the CPU ops they stand for ---- */
bert_tensor *bert_vk_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b,
                            double alpha, bert_tensor *dst);
bert_tensor *bert_vk_unary(bert_unop op, const bert_tensor *a, bert_tensor *dst);
int bert_vk_fill_(bert_tensor *t, double value);
bert_tensor *bert_vk_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                            int correction, bert_tensor **indices);
bert_tensor *bert_vk_softmax(const bert_tensor *t, int dim, int log);
bert_tensor *bert_vk_matmul(const bert_tensor *a, const bert_tensor *b);
/* C = op(A) @ op(B) (+ bias[N]) then GELU when gelu: the fused GEMM. */
bert_tensor *bert_vk_gemm(const bert_tensor *a, int ta, const bert_tensor *b, int tb,
                          const bert_tensor *bias, int gelu);
bert_tensor *bert_vk_linear(bert_tensor *x, bert_tensor *w, bert_tensor *b);
bert_tensor *bert_vk_layer_norm(bert_tensor *x, bert_tensor *gamma, bert_tensor *beta,
                                double eps, bert_tensor *residual);
bert_tensor *bert_vk_bias_gelu(bert_tensor *x, bert_tensor *b, int tanh_mode);
bert_tensor *bert_vk_dropout(bert_tensor *x, double p, int training);
bert_tensor *bert_vk_embedding(bert_tensor *ids, bert_tensor *weight);
bert_tensor *bert_vk_cross_entropy(bert_tensor *logits, bert_tensor *labels,
                                   int64_t ignore_index, int reduction);
bert_tensor *bert_vk_attention(bert_tensor *q, bert_tensor *k, bert_tensor *v,
                               const bert_attention_opts *opts);
int bert_vk_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                       const bert_adam_cfg *cfg);
/* *trust_out (may be NULL): the trust ratio as a one-element device tensor */
int bert_vk_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                      const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out);

/* ---- kernel-level entries (forward with saved state, backward passes) ---- */
bert_tensor *bert_vk_layer_norm_ex(bert_tensor *x, bert_tensor *g, bert_tensor *b, double eps,
                                   bert_tensor *r, bert_tensor **stats_out);
int bert_vk_layer_norm_backward(bert_tensor *dy, bert_tensor *x, bert_tensor *res, bert_tensor *gamma,
                                bert_tensor *stats, bert_tensor **dx_out, bert_tensor **dgb_out);
bert_tensor *bert_vk_gelu_backward(bert_tensor *dy, bert_tensor *x, bert_tensor *b, int tanh_mode);
bert_tensor *bert_vk_column_sums(bert_tensor *g);
bert_tensor *bert_vk_dropout_mask(bert_tensor *x, double p, uint64_t seed, uint64_t offset);
int bert_vk_embedding_backward(bert_tensor *dw, bert_tensor *ids, bert_tensor *dy);
bert_tensor *bert_vk_cross_entropy_backward(bert_tensor *logits, bert_tensor *labels, int64_t ignore_index,
                                            int reduction, bert_tensor *g);
bert_tensor *bert_vk_attention_ex(bert_tensor *q, bert_tensor *k, bert_tensor *v,
                                  const bert_attention_opts *o, bert_tensor **lse_out);

/* attention state kept for backward (vk_ops.c fills it) */
typedef struct {
  bert_tensor *q, *k, *v, *mask, *lse;   /* references */
  uint32_t push[32];                     /* the forward's push constants */
} bert_vk_attn_saved;
int bert_vk_attention_backward(const bert_vk_attn_saved *sv, bert_tensor *out, bert_tensor *dout,
                               bert_tensor **dq, bert_tensor **dk, bert_tensor **dv);
int bert_vk_gemm_into(bert_tensor *c, const bert_tensor *a, int ta, const bert_tensor *b, int tb, float beta);
bert_tensor *bert_vk_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *dy);
int bert_vk_sumsq_into(const bert_tensor *t, bert_tensor *out, int64_t slot);
bert_tensor *bert_vk_index_select(const bert_tensor *t, int dim, const bert_tensor *index);
int bert_vk_index_add0(bert_tensor *z, const bert_tensor *index, const bert_tensor *g);

bert_tensor *bert_vk_grad_target(bert_tensor *t);

/* ---- autograd nodes of the device nn ops (vk_autograd.c): each returns y,
** with a graph node attached when an input requires grad (NULL on failure,
** y released) ---- */
bert_tensor *bert_vkag_linear(bert_tensor *y, bert_tensor *x_in, bert_tensor *w, bert_tensor *b, bert_tensor *x2);
bert_tensor *bert_vkag_layer_norm(bert_tensor *y, bert_tensor *x, bert_tensor *g, bert_tensor *b,
                                  bert_tensor *r, bert_tensor *stats);
bert_tensor *bert_vkag_bias_gelu(bert_tensor *y, bert_tensor *x_in, bert_tensor *b_in, bert_tensor *x,
                                 bert_tensor *b, int tanh_mode);
bert_tensor *bert_vkag_dropout(bert_tensor *y, bert_tensor *x, double p, uint64_t seed, uint64_t offset);
bert_tensor *bert_vkag_embedding(bert_tensor *y, bert_tensor *w, bert_tensor *ids);
bert_tensor *bert_vkag_cross_entropy(bert_tensor *loss, bert_tensor *l_in, bert_tensor *logits, bert_tensor *labels,
                                     int64_t ignore_index, int reduction);
bert_tensor *bert_vkag_attention(bert_tensor *out, bert_tensor *q_in, bert_tensor *k_in, bert_tensor *v_in,
                                 const bert_vk_attn_saved *sv);

#endif
