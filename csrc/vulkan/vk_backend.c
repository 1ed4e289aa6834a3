/*
** The Vulkan backend's table: device memory, host copies, and the device
** kernels of every op it runs (vk_kernels.h lists them, file by file), and
** what it runs.  The backward entries record device kernels only
** (backward GEMMs, the layer-norm / GELU / embedding-scatter /
** cross-entropy / LSTM kernels, the attention recompute, the dropout mask
** regenerated from its Philox counters), so a training step never waits on
** the host.
*/
#include "vulkan/vk.h"
#include "vulkan/vk_opcodes.h"

/* {====================================================== what the device runs */

/* Attention walks all keys of a query row in one invocation: past this
** many, lavapipe cuts the loop short (a silent wrong answer), so longer
** key sequences are refused until the kernel splits them. */
#define ATTN_MAX_KEYS ((int64_t)VK_MAX_LOOP)

/* The host operands a kernel uploads itself: the scalars and int32
** operands of elementwise ops, ids, labels (and the upstream gradient of
** the cross entropy), indices, attention masks, sequence offsets and LSTM
** lengths.  Any other operand on the host, next to device tensors, is
** refused here once for every op: a kernel binds only device memory. */
static int uploaded(bert_op op, int i, const bert_tensor *t) {
  switch (op) {
    case BERT_OP_BINARY: return i < 2 && (t->dtype == BERT_I32 || bert_numel(t) == 1);
    case BERT_OP_EMBEDDING: return i == 0;
    case BERT_OP_EMBEDDING_BACKWARD: case BERT_OP_INDEX_SELECT: case BERT_OP_INDEX_ADD:
    case BERT_OP_CROSS_ENTROPY: return i == 1;
    case BERT_OP_CROSS_ENTROPY_BACKWARD: return i == 1 || i == 2;
    case BERT_OP_ATTENTION: return i >= 3;
    case BERT_OP_LSTM: return i == 7;
    default: return 0;
  }
}

static int supports(bert_op op, int n, const bert_tensor *const *args, const char **why) {
  for (int i = 0; i < n; i++)
    if (args[i] != NULL && bert_is_host(args[i]) && !uploaded(op, i, args[i])) {
      *why = "an operand is on the cpu: move it with t:to(\"vulkan\")";
      return 0;
    }
  switch (op) {
    case BERT_OP_ATTENTION:
    case BERT_OP_ATTENTION_BACKWARD:
      if (args[0]->ndim >= 3 && args[0]->shape[args[0]->ndim - 1] > 256) { *why = "head_dim above 256"; return 0; }
      if (args[1]->ndim == 4 && args[1]->shape[2] > ATTN_MAX_KEYS) { *why = "more than 32768 keys"; return 0; }
      return 1;
    default:
      return 1;
  }
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
  .binary = vk_binary,
  .unary = vk_unary,
  .unary_backward = vk_unary_backward,
  .fill_ = bert_vk_fill_,
  .reduce = vk_reduce,
  .softmax = vk_softmax,
  .matmul = vk_matmul,
  .index_select = vk_index_select,
  .index_add_ = vk_index_add,
  .cat = bert_cat_by_copies,
  .linear = vk_linear,
  .linear_backward = vk_linear_backward,
  .layer_norm = vk_layer_norm,
  .layer_norm_backward = vk_layer_norm_backward,
  .bias_gelu = vk_bias_gelu,
  .bias_gelu_backward = vk_bias_gelu_backward,
  .dropout = vk_dropout,
  .embedding = vk_embedding,
  .embedding_backward = vk_embedding_backward,
  .cross_entropy = vk_cross_entropy,
  .cross_entropy_backward = vk_cross_entropy_backward,
  .lstm = vk_lstm,
  .lstm_backward = vk_lstm_backward,
  .attention = vk_attention,
  .attention_backward = vk_attention_backward,
  .adamw_step = vk_adamw_step,
  .lamb_step = vk_lamb_step,
  .sumsq = vk_sumsq,
};
