/*
** The elementwise and reduction op lists, written once (the backend
** entries' list, BERT_OPS, is core/backend.h's).  Each list is an X-macro:
** the C enums, the op names (errors, autograd node names, Lua methods), the
** Lua bindings' method tables and the GLSL opcodes of shaders/eltwise.comp
** (generated into build/gen/bert_ops.glsl by tools/gen_op_glsl.c) all
** expand these.
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

#endif
