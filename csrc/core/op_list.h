/*
** The op lists, written once.  Each list is an X-macro: the C enums, the
** op names (errors, autograd node names, Lua methods), the Lua bindings'
** method tables and the GLSL opcodes of shaders/eltwise.comp (generated
** into build/gen/bert_ops.glsl by tools/gen_op_glsl.c) all expand these.
** This header is read by the C compiler only through the preprocessor:
** no types, no includes.
**
** Adding a unary activation: one X(...) line below, its forward and
** derivative in cpu/ops_elementwise.c (unary_f32 and unary_grad), the
** same in shaders/eltwise.comp (UN_<ID> and UNB_<ID>), and a spec.
*/
#ifndef BERT_OP_LIST_H
#define BERT_OP_LIST_H

/* Binary elementwise ops, broadcasting: X(ID, name, is_comparison).
** name is also the Lua method (t:add(u)) and, with "_", the in-place one. */
#define BERT_BINARY_OPS(X) \
  X(ADD,     add,     0) \
  X(SUB,     sub,     0) \
  X(MUL,     mul,     0) \
  X(DIV,     div,     0) \
  X(POW,     pow,     0) \
  X(MAXIMUM, maximum, 0) \
  X(MINIMUM, minimum, 0) \
  X(EQ,      eq,      1) \
  X(NE,      ne,      1) \
  X(LT,      lt,      1) \
  X(LE,      le,      1) \
  X(GT,      gt,      1) \
  X(GE,      ge,      1)

/* Unary elementwise ops: X(ID, name, keeps_int).  keeps_int: an int32
** input gives an int32 result (otherwise it is converted to float32). */
#define BERT_UNARY_OPS(X) \
  X(NEG,       neg,       1) \
  X(EXP,       exp,       0) \
  X(LOG,       log,       0) \
  X(SQRT,      sqrt,      0) \
  X(RSQRT,     rsqrt,     0) \
  X(TANH,      tanh,      0) \
  X(SIGMOID,   sigmoid,   0) \
  X(RELU,      relu,      1) \
  X(GELU,      gelu,      0) \
  X(GELU_TANH, gelu_tanh, 0) \
  X(ABS,       abs,       1) \
  X(ERF,       erf,       0) \
  X(SILU,      silu,      0)

/* Reductions over one dim (or all): X(ID, name). */
#define BERT_REDUCE_OPS(X) \
  X(SUM,    sum)    \
  X(MEAN,   mean)   \
  X(MAX,    max)    \
  X(MIN,    min)    \
  X(ARGMAX, argmax) \
  X(ARGMIN, argmin) \
  X(VAR,    var)

/* Every entry of the backend table (core/backend.h) that a device may
** lack: X(ID, entry), entry the field of bert_backend.  BERT_DISPATCH
** (core/backend.h) checks a front-end's BERT_OP_<ID> against it. */
#define BERT_OPS(X) \
  X(BINARY,                 binary) \
  X(UNARY,                  unary) \
  X(UNARY_BACKWARD,         unary_backward) \
  X(MASKED_FILL,            masked_fill) \
  X(WHERE,                  where) \
  X(FILL,                   fill_) \
  X(REDUCE,                 reduce) \
  X(SOFTMAX,                softmax) \
  X(MATMUL,                 matmul) \
  X(INDEX_SELECT,           index_select) \
  X(INDEX_ADD,              index_add_) \
  X(GATHER,                 gather) \
  X(SCATTER_ADD,            scatter_add_) \
  X(CAT,                    cat) \
  X(NONZERO,                nonzero) \
  X(SORT_INDICES,           sort_indices) \
  X(FILL_RANDOM,            fill_random) \
  X(LINEAR,                 linear) \
  X(LINEAR_BACKWARD,        linear_backward) \
  X(LAYER_NORM,             layer_norm) \
  X(LAYER_NORM_BACKWARD,    layer_norm_backward) \
  X(BIAS_GELU,              bias_gelu) \
  X(BIAS_GELU_BACKWARD,     bias_gelu_backward) \
  X(DROPOUT,                dropout) \
  X(DROPOUT_ROWS,           dropout_rows) \
  X(EMBEDDING,              embedding) \
  X(EMBEDDING_BACKWARD,     embedding_backward) \
  X(CROSS_ENTROPY,          cross_entropy) \
  X(CROSS_ENTROPY_BACKWARD, cross_entropy_backward) \
  X(ATTENTION,              attention) \
  X(ATTENTION_BACKWARD,     attention_backward) \
  X(ATTENTION_BACKWARD_INTO, attention_backward_into) \
  X(ATTENTION_REL,          attention_rel) \
  X(ATTENTION_REL_BACKWARD, attention_rel_backward) \
  X(ADAMW,                  adamw_step) \
  X(LAMB,                   lamb_step) \
  X(SGD,                    sgd_step) \
  X(SUMSQ,                  sumsq) \
  X(SCALE,                  scale_)

#endif
