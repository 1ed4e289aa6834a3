/*
** The CPU backend's table: host memory, and every op's CPU kernel.
*/
#include "core/ops.h"
#include "cpu/cpu.h"

static bert_tensor *host_empty(bert_dtype dt, int ndim, const int64_t *shape) {
  return bert_tensor_empty(dt, ndim, shape);
}

static bert_tensor *host_copy(const bert_tensor *t) { return bert_clone(t); }

static int host_sync(void) { return 0; }

static int fill_random(bert_tensor *t, bert_rand_kind kind, uint64_t seed, uint64_t offset, double a, double b) {
  return bert_fill_random(t, kind, seed, offset, a, b);
}

const bert_backend bert_cpu_backend = {
  .name = "cpu",
  .is_host = 1,
  .supports_op = NULL,
  .empty = host_empty,
  .storage_free = NULL,
  .from_host = host_copy,
  .to_host = host_copy,
  .copy_ = bert_copy_,
  .get_flat = bert_get_flat,
  .sync = host_sync,
  .binary = cpu_binary,
  .unary = cpu_unary,
  .unary_backward = cpu_unary_backward,
  .masked_fill = cpu_masked_fill,
  .where = cpu_where,
  .fill_ = cpu_fill_,
  .reduce = cpu_reduce,
  .softmax = cpu_softmax,
  .matmul = cpu_matmul,
  .index_select = cpu_index_select,
  .index_add_ = cpu_index_add_,
  .gather = cpu_gather,
  .scatter_add_ = cpu_scatter_add_,
  .cat = bert_cat_by_copies,
  .nonzero = cpu_nonzero,
  .sort_indices = cpu_sort_indices,
  .fill_random = fill_random,
  .linear = cpu_linear,
  .linear_backward = cpu_linear_backward,
  .layer_norm = cpu_layer_norm,
  .layer_norm_backward = cpu_layer_norm_backward,
  .rms_norm = cpu_rms_norm,
  .rms_norm_backward = cpu_rms_norm_backward,
  .lstm = cpu_lstm,
  .lstm_backward = cpu_lstm_backward,
  .bias_gelu = cpu_bias_gelu,
  .bias_gelu_backward = cpu_bias_gelu_backward,
  .dropout = cpu_dropout,
  .dropout_rows = cpu_dropout_rows,
  .embedding = cpu_embedding,
  .embedding_backward = cpu_embedding_backward,
  .cross_entropy = cpu_cross_entropy,
  .cross_entropy_backward = cpu_cross_entropy_backward,
  .attention = cpu_attention,
  .attention_backward = cpu_attention_backward,
  .attention_backward_into = cpu_attention_backward_into,
  .attention_rel = cpu_attention_rel,
  .attention_rel_backward = cpu_attention_rel_backward,
  .adamw_step = cpu_adamw_step,
  .lamb_step = cpu_lamb_step,
  .sgd_step = cpu_sgd_step,
  .sumsq = cpu_sumsq,
  .scale_ = cpu_scale_,
};
