/*
** The small types the op front-ends (core/ops.h, core/nn.h, core/optim.h)
** and the backend interface (core/backend.h) share: the op enums and the
** option structs.  Here so that backend.h, and with it every backend,
** needs none of the front-ends' headers.
*/
#ifndef BERT_TYPES_H
#define BERT_TYPES_H

#include <stdint.h>

#include "core/op_list.h"
#include "core/tensor.h"

/* ---- op enums (core/op_list.h) ---- */
typedef enum {
#define X(ID, name, cmp) BERT_##ID,
  BERT_BINARY_OPS(X)
#undef X
  BERT_BINOP_COUNT
} bert_binop;

typedef enum {
#define X(ID, name, keeps_int) BERT_##ID,
  BERT_UNARY_OPS(X)
#undef X
  BERT_UNOP_COUNT
} bert_unop;

typedef enum {
#define X(ID, name) BERT_##ID,
  BERT_REDUCE_OPS(X)
#undef X
  BERT_REDOP_COUNT
} bert_redop;

/* bert_fill_random's distributions (core/ops.h) */
typedef enum { BERT_RAND_UNIFORM, BERT_RAND_NORMAL, BERT_RAND_INT } bert_rand_kind;

/* The random stream an op draws from: counters offset.. of seed. */
typedef struct { uint64_t seed, offset; } bert_stream;

/* ---- nn options (core/nn.h) ---- */
/* bert_attention's options (core/nn.h says what each means). */
typedef struct {
  bert_tensor *mask;
  double mask_value;   /* for keep masks; 0 selects -FLT_MAX */
  double dropout_p;
  int training;
  double scale;
  int causal;
  bert_tensor *cu_seqlens;
  int64_t max_seqlen;
} bert_attention_opts;

/* bert_lstm's options (core/nn.h says what each means) */
typedef struct {
  int reverse;
  double clip;        /* the cell state's, 0: none */
  double proj_clip;   /* the projected hidden state's, 0: none */
} bert_lstm_opts;

/* bert_cross_entropy's reduction */
typedef enum { BERT_REDUCE_NONE = 0, BERT_REDUCE_MEAN = 1, BERT_REDUCE_SUM = 2 } bert_reduction;

/* ---- optimizer hyperparameters (core/optim.h) ---- */
/* Adam-family hyperparameters for one call. */
typedef struct bert_adam_cfg {
  double lr;
  double beta1, beta2;
  double eps;
  double weight_decay;     /* decoupled: applied to the parameter, not the gradient */
  int bias_correction;     /* 0: BERT's AdamWeightDecayOptimizer (no correction) */
  int64_t step;            /* this parameter's step count, after incrementing (>= 1) */
} bert_adam_cfg;

/* SGD (bert_sgd_step) */
typedef struct bert_sgd_cfg {
  double lr, momentum, dampening, weight_decay;
  int nesterov;
  int first;               /* the first step of this parameter: buf = d */
} bert_sgd_cfg;

#endif
