/*
** The Vulkan backend's kernels, as its table (vk_backend.c) lists them,
** and what the kernel files share.  Files follow cpu/: vk_memory.c (device
** tensors, transfers, bindings), vk_elementwise.c, vk_gemm.c, vk_reduce.c,
** vk_nn.c, vk_lstm.c, vk_attention.c, vk_optim.c; each records dispatches of the
** shaders in shaders/ (nothing waits until a result is read back).
**
** Arguments arrive checked by the core's front-ends (core/backend.h) and
** by the table's supports_op: every operand is on the device, except the
** host ones a kernel uploads itself (scalars, int32 ids / labels / indices,
** attention masks, LSTM lengths).  vk_* are table entries; bert_vk_* the kernels and
** device tensors the other files and the binding (vk.h) call.
*/
#ifndef BERT_VK_KERNELS_H
#define BERT_VK_KERNELS_H

#include "core/backend.h"
#include "vulkan/vk_internal.h"

/* ---- device tensors and bindings (vk_memory.c) ---- */
/* Initialises the device on first use; 1 when usable, else 0 and *reason. */
int bert_vk_available(const char **reason);
int bert_vk_sync(void);                                /* submits what is recorded, waits */
void bert_vk_storage_free(bert_storage *s);
bert_tensor *bert_vk_empty(bert_dtype dt, int ndim, const int64_t *shape);
bert_tensor *bert_vk_zeros(bert_dtype dt, int ndim, const int64_t *shape);
bert_tensor *bert_vk_upload(const bert_tensor *t);     /* host -> device, contiguous */
bert_tensor *bert_vk_download(const bert_tensor *t);   /* device -> host, contiguous */
double bert_vk_get_flat(const bert_tensor *t, int64_t i);
/* t itself on the device (a new reference), or a host t uploaded */
bert_tensor *bert_vk_on_device(const bert_tensor *t);

vkx_alloc *vk_alloc_of(const bert_tensor *t);
vkx_bind vk_bind_of(const bert_tensor *t);             /* the bytes a view touches */
vkx_bind vk_bind_el(const bert_tensor *t, int64_t off, int64_t n);   /* n elements from off */
/* The most bytes one binding may span: larger tensors are split into
** windows, one dispatch per window. */
size_t vk_max_bind(void);
int vk_binds_fit(int n, const vkx_bind *b);
/* A 1-D grid of n invocations in groups of wg, folded into y past 65535 groups. */
void vk_grid_1d(uint64_t n, uint32_t wg, uint32_t *gx, uint32_t *gy);
/* Philox keeps an element when its draw is at least this (dropout p). */
uint32_t vk_keep_threshold(double p);

/* ---- elementwise (vk_elementwise.c) ---- */
int bert_vk_copy_(bert_tensor *dst, const bert_tensor *src);   /* either side may be the host */
bert_tensor *bert_vk_to_dtype(const bert_tensor *t, bert_dtype dt);
int bert_vk_fill_(bert_tensor *t, double value);
int vk_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b, double alpha, bert_tensor *out);
int vk_unary(bert_unop op, const bert_tensor *a, bert_tensor *out);
bert_tensor *vk_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *y, const bert_tensor *dy);

/* ---- GEMM, matmul (vk_gemm.c) ---- */
/* C = op(A) @ op(B) (+ bias[N]) then GELU when gelu: the fused GEMM. */
bert_tensor *bert_vk_gemm(const bert_tensor *a, int ta, const bert_tensor *b, int tb,
                          const bert_tensor *bias, int gelu);
/* c = op(A) op(B) + beta * c, c a contiguous 2-D device tensor. */
int bert_vk_gemm_into(bert_tensor *c, const bert_tensor *a, int ta, const bert_tensor *b, int tb, float beta);
bert_tensor *vk_matmul(const bert_tensor *a, const bert_tensor *b);

/* ---- reductions, softmax (vk_reduce.c) ---- */
bert_tensor *vk_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim, int correction,
                       bert_tensor **indices);
bert_tensor *vk_softmax(const bert_tensor *t, int dim, int log_space);
/* out[slot] = the sum of squares of t (any float32 device tensor). */
int bert_vk_sumsq_into(const bert_tensor *t, bert_tensor *out, int64_t slot);
int vk_sumsq(const bert_tensor *t, double *out);

/* ---- fused nn ops, indexing (vk_nn.c) ---- */
bert_tensor *vk_linear(const bert_tensor *x, const bert_tensor *w, const bert_tensor *b);
int vk_linear_backward(bert_tensor *const in[3], const bert_tensor *x, const bert_tensor *w, const bert_tensor *g);
bert_tensor *vk_layer_norm(const bert_tensor *x, const bert_tensor *gamma, const bert_tensor *beta, double eps,
                           const bert_tensor *res, bert_tensor **stats);
int vk_layer_norm_backward(bert_tensor *const in[4], const bert_tensor *x, const bert_tensor *res,
                           const bert_tensor *gamma, const bert_tensor *stats, const bert_tensor *g);
bert_tensor *vk_bias_gelu(const bert_tensor *x, const bert_tensor *b, int tanh_mode);
int vk_bias_gelu_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b, int tanh_mode,
                          const bert_tensor *g);
bert_tensor *vk_dropout(const bert_tensor *x, double p, bert_stream s);
bert_tensor *vk_embedding(const bert_tensor *ids, const bert_tensor *w);
int vk_embedding_backward(bert_tensor *w, const bert_tensor *ids, const bert_tensor *g);
bert_tensor *vk_cross_entropy(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore,
                              bert_reduction red, int64_t count, bert_tensor **lse);
bert_tensor *vk_cross_entropy_backward(const bert_tensor *logits, const bert_tensor *labels, const bert_tensor *lse,
                                       int64_t ignore, bert_reduction red, int64_t count, const bert_tensor *g);
bert_tensor *vk_index_select(const bert_tensor *t, int dim, const bert_tensor *index);
/* [N]: the sums of the rows of g ([..., N]) */
bert_tensor *bert_vk_column_sums(const bert_tensor *g);
int vk_index_add(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src);

/* ---- LSTM (vk_lstm.c) ---- */
bert_tensor *vk_lstm(const bert_tensor *const t[8], const bert_lstm_opts *o, bert_tensor **ws);
int vk_lstm_backward(bert_tensor *const in[7], const bert_tensor *const t[8], const bert_lstm_opts *o,
                     const bert_tensor *ws, const bert_tensor *out, const bert_tensor *g);

/* ---- attention (vk_attention.c) ---- */
bert_attention_fn vk_attention;                    /* the prototypes: core/backend.h */
bert_attention_backward_fn vk_attention_backward;

/* ---- optimizers (vk_optim.c) ---- */
int vk_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v, const bert_adam_cfg *cfg);
/* *trust_out (may be NULL): the trust ratio as a one-element device tensor */
int vk_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v, const bert_adam_cfg *cfg,
                 int adapt, bert_tensor **trust_out);

#endif
