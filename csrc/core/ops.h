/*
** CPU tensor operations.  All take and return core tensors; NULL (or -1)
** means failure with bert_last_error() set.  Dimensions are 0-based here.
*/
#ifndef BERT_OPS_H
#define BERT_OPS_H

#include "core/tensor.h"

/* ---- elementwise ---- */
typedef enum {
  BERT_ADD, BERT_SUB, BERT_MUL, BERT_DIV, BERT_POW, BERT_MAXIMUM, BERT_MINIMUM,
  BERT_EQ, BERT_NE, BERT_LT, BERT_LE, BERT_GT, BERT_GE
} bert_binop;

typedef enum {
  BERT_NEG, BERT_EXP, BERT_LOG, BERT_SQRT, BERT_RSQRT, BERT_TANH, BERT_SIGMOID,
  BERT_RELU, BERT_GELU, BERT_GELU_TANH, BERT_ABS, BERT_ERF
} bert_unop;

/* Broadcast shape of a and b into out_shape; -1 with an error naming both. */
int bert_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out);
/* out = a op (alpha * b) for ADD/SUB, a op b otherwise.  When dst is
** non-NULL the result is written there (in-place forms); dst must have the
** broadcast shape and not be an expanded view. */
bert_tensor *bert_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b,
                         double alpha, bert_tensor *dst);
bert_tensor *bert_unary(bert_unop op, const bert_tensor *a, bert_tensor *dst);
/* out = mask != 0 ? value : a */
bert_tensor *bert_masked_fill(const bert_tensor *a, const bert_tensor *mask, double value,
                              bert_tensor *dst);
/* out = cond != 0 ? a : b, all three broadcast */
bert_tensor *bert_where(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b);
int bert_fill_(bert_tensor *t, double value);
const char *bert_binop_name(bert_binop op);
const char *bert_unop_name(bert_unop op);

/* ---- reductions over one dim (dim < 0: over all elements, scalar result) ---- */
typedef enum { BERT_SUM, BERT_MEAN, BERT_MAX, BERT_MIN, BERT_ARGMAX, BERT_ARGMIN, BERT_VAR } bert_redop;
/* For MAX/MIN with a dim, *indices (if non-NULL) receives the int32 argmax/argmin. */
bert_tensor *bert_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                         int correction, bert_tensor **indices);
bert_tensor *bert_softmax(const bert_tensor *t, int dim, int log);

/* ---- matmul (gemm.c) ---- */
bert_tensor *bert_matmul(const bert_tensor *a, const bert_tensor *b);

/* ---- indexing (ops_index.c) ---- */
bert_tensor *bert_index_select(const bert_tensor *t, int dim, const bert_tensor *index);
bert_tensor *bert_gather(const bert_tensor *t, int dim, const bert_tensor *index);
/* dst[index[i][j]][j] += src[i][j] along dim (in place on dst) */
int bert_scatter_add_(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src);
bert_tensor *bert_cat(bert_tensor *const *ts, int n, int dim);
/* Flat (row-major) 0-based positions of the non-zero elements, as int32 [n]. */
bert_tensor *bert_nonzero_flat(const bert_tensor *t);

/* ---- creation (ops_index.c) ---- */
bert_tensor *bert_arange(double start, double stop, double step, bert_dtype dt);
bert_tensor *bert_eye(int64_t n, int64_t m, bert_dtype dt);

/* ---- random numbers (rng.c): Philox4x32-10, counter-based ---- */
typedef enum { BERT_RAND_UNIFORM, BERT_RAND_NORMAL, BERT_RAND_INT } bert_rand_kind;
/* Fills t (contiguous) from stream (seed, offset): element i uses counter
** offset + i, so results never depend on the thread count.  UNIFORM:
** [a, b); NORMAL: mean a, std b; INT: integers in [a, b). */
int bert_fill_random(bert_tensor *t, bert_rand_kind kind, uint64_t seed, uint64_t offset,
                     double a, double b);
void bert_philox(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* The default generator: a seed and a running counter.  Draws reserve a
** range of counters, so a (seed, offset) pair replays everything after it
** (checkpoints save it to resume exactly). */
void bert_rng_set_state(uint64_t seed, uint64_t offset);
void bert_rng_get_state(uint64_t *seed, uint64_t *offset);
uint64_t bert_rng_reserve(uint64_t n);   /* returns the first counter of n */
uint64_t bert_rng_get_seed(void);

#endif
