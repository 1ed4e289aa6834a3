/*
** The CPU backend's kernels, as its table (cpu/cpu_backend.c) lists them.
** Arguments arrive checked by the core's front-ends (core/backend.h says
** what each entry may assume); only host tensors reach them.
*/
#ifndef BERT_CPU_H
#define BERT_CPU_H

#include "core/backend.h"

extern const bert_backend bert_cpu_backend;

/* elementwise (ops_elementwise.c) */
int cpu_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b, double alpha, bert_tensor *out);
int cpu_unary(bert_unop op, const bert_tensor *a, bert_tensor *out);
bert_tensor *cpu_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *y, const bert_tensor *dy);
int cpu_masked_fill(const bert_tensor *a, const bert_tensor *mask, double value, bert_tensor *out);
int cpu_where(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b, bert_tensor *out);
int cpu_fill_(bert_tensor *t, double value);

/* reductions (ops_reduce.c), matmul (gemm.c) */
bert_tensor *cpu_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim, int correction,
                        bert_tensor **indices);
bert_tensor *cpu_softmax(const bert_tensor *t, int dim, int log_space);
bert_tensor *cpu_matmul(const bert_tensor *a, const bert_tensor *b);

/* indexing (ops_index.c) */
bert_tensor *cpu_index_select(const bert_tensor *t, int dim, const bert_tensor *index);
int cpu_index_add_(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src);
bert_tensor *cpu_gather(const bert_tensor *t, int dim, const bert_tensor *index);
int cpu_scatter_add_(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src);
bert_tensor *cpu_nonzero(const bert_tensor *t);
/* sorting (ops_sort.c) */
bert_tensor *cpu_sort_indices(const bert_tensor *t, int dim, int64_t k, int descending);

/* fused nn ops: linear.c, layer_norm.c (with rms_norm), lstm.c, gelu.c, dropout.c,
** embedding.c, cross_entropy.c, attention.c */
bert_tensor *cpu_linear(const bert_tensor *x, const bert_tensor *w, const bert_tensor *b);
int cpu_linear_backward(bert_tensor *const in[3], const bert_tensor *x, const bert_tensor *w, const bert_tensor *g);
bert_tensor *cpu_layer_norm(const bert_tensor *x, const bert_tensor *gamma, const bert_tensor *beta,
                            double eps, const bert_tensor *residual, bert_tensor **stats);
int cpu_layer_norm_backward(bert_tensor *const in[4], const bert_tensor *x, const bert_tensor *residual,
                            const bert_tensor *gamma, const bert_tensor *stats, const bert_tensor *g);
bert_tensor *cpu_rms_norm(const bert_tensor *x, const bert_tensor *weight, double eps, bert_tensor **rstd);
int cpu_rms_norm_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *weight,
                          const bert_tensor *rstd, const bert_tensor *g);
bert_tensor *cpu_lstm(const bert_tensor *const t[8], const bert_lstm_opts *o, bert_tensor **ws);
int cpu_lstm_backward(bert_tensor *const in[7], const bert_tensor *const t[8], const bert_lstm_opts *o,
                      const bert_tensor *ws, const bert_tensor *out, const bert_tensor *g);
bert_tensor *cpu_bias_gelu(const bert_tensor *x, const bert_tensor *b, int tanh_mode);
int cpu_bias_gelu_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b,
                           int tanh_mode, const bert_tensor *g);
bert_tensor *cpu_dropout(const bert_tensor *x, double p, bert_stream s);
bert_tensor *cpu_dropout_rows(const bert_tensor *x, double p, bert_stream s, const bert_tensor *rows);
bert_tensor *cpu_embedding(const bert_tensor *ids, const bert_tensor *w);
int cpu_embedding_backward(bert_tensor *w_in, const bert_tensor *ids, const bert_tensor *g);
bert_tensor *cpu_cross_entropy(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore_index,
                               bert_reduction red, int64_t count, bert_tensor **lse);
bert_tensor *cpu_cross_entropy_backward(const bert_tensor *logits, const bert_tensor *labels,
                                        const bert_tensor *lse, int64_t ignore_index, bert_reduction red,
                                        int64_t count, const bert_tensor *g);
bert_attention_fn cpu_attention;
bert_attention_backward_fn cpu_attention_backward;
bert_attention_backward_into_fn cpu_attention_backward_into;
/* attention_rel.c */
bert_attention_rel_fn cpu_attention_rel;
bert_attention_rel_backward_fn cpu_attention_rel_backward;

/* int8 linear, inference only (qlinear.c): weights quantised once per
** output channel into 16-column panels, activations per row at each call. */
typedef struct bert_qweight {
  int64_t out_features, in_features;
  int64_t in_padded;    /* in_features rounded up to 4: a packed panel's k extent */
  int8_t *codes;        /* [out rounded up to 16, in_padded], panel-packed */
  float *scale;         /* [out]: max |W[n, :]| / 127 */
  int32_t *sums;        /* [out]: each row's sum of codes (the activations' zero point) */
  size_t nbytes;
} bert_qweight;
bert_qweight *cpu_qweight_new(const bert_tensor *w);
void cpu_qweight_free(bert_qweight *q);
bert_tensor *cpu_qweight_dequantize(const bert_qweight *q);
/* checks its arguments (errors name linear_int8); its node refuses backward */
bert_tensor *cpu_linear_int8(bert_tensor *x, const bert_qweight *q, bert_tensor *b);
/* the integer kernel in use ("avx512vnni", "avxvnni", "avx2", "scalar"), forcing one
** ("auto": the best the CPU has), and the ones this CPU has, best first */
const char *cpu_int8_kernel(void);
int cpu_int8_set_kernel(const char *name);
int cpu_int8_kernels(const char **names, int max);

/* optimizers (optim.c) */
int cpu_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v, const bert_adam_cfg *cfg);
int cpu_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                  const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out);
int cpu_sgd_step(bert_tensor *p, const bert_tensor *g, bert_tensor *buf, const bert_sgd_cfg *cfg);
int cpu_sumsq(const bert_tensor *t, double *out);
int cpu_scale_(bert_tensor *t, double s);

#endif
