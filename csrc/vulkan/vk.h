/*
** The Vulkan backend: its table (bert_vulkan_backend, registered by the
** binding like any backend) and the kernels behind it, also reached by the
** binding's bert.vulkan.* test entries.  The core never includes this
** header.  Built without Vulkan (-DBERT_NO_VULKAN) every entry fails with
** an error, and no tensor can ever be on the device.
*/
#ifndef BERT_VK_H
#define BERT_VK_H

#include "core/backend.h"

extern const bert_backend bert_vulkan_backend;

static inline int bert_is_vk(const bert_tensor *t) {
  return t != NULL && t->storage != NULL && t->storage->backend == &bert_vulkan_backend;
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
bert_tensor *bert_vk_bias_gelu(bert_tensor *x, bert_tensor *b, int tanh_mode);
bert_tensor *bert_vk_embedding(bert_tensor *ids, bert_tensor *weight);
/* count: the rows whose label is not ignore_index (the front-end counts them) */
bert_tensor *bert_vk_cross_entropy(bert_tensor *logits, bert_tensor *labels,
                                   int64_t ignore_index, int reduction, int64_t count);
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
                                            int reduction, int64_t count, bert_tensor *g);
bert_tensor *bert_vk_attention_ex(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                                  const bert_attention_opts *o, bert_stream s, bert_tensor **lse_out);
int bert_vk_attention_backward(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                               const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                               const bert_tensor *lse, const bert_tensor *dout,
                               bert_tensor **dq, bert_tensor **dk, bert_tensor **dv);
int bert_vk_gemm_into(bert_tensor *c, const bert_tensor *a, int ta, const bert_tensor *b, int tb, float beta);
bert_tensor *bert_vk_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *dy);
int bert_vk_sumsq_into(const bert_tensor *t, bert_tensor *out, int64_t slot);
bert_tensor *bert_vk_index_select(const bert_tensor *t, int dim, const bert_tensor *index);
int bert_vk_index_add0(bert_tensor *z, const bert_tensor *index, const bert_tensor *g);

#endif
