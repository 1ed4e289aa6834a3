/*
** Tensor operations, on any device.  All take and return core tensors;
** NULL (or -1) means failure with bert_last_error() set.  Dimensions are
** 0-based here.  Each validates its arguments, then runs on the backend of
** its tensors (core/backend.h).
*/
#ifndef BERT_OPS_H
#define BERT_OPS_H

#include "core/tensor.h"
#include "core/types.h"

/* ---- elementwise (bert_binop, bert_unop: core/types.h) ---- */

/* Comparisons give int32 0/1 masks and have no gradient. */
int bert_binop_is_comparison(bert_binop op);
/* An int32 input keeps its dtype (neg, abs, relu); others compute in float32. */
int bert_unop_keeps_int(bert_unop op);

/* Broadcast shape of a and b into out_shape; -1 with an error naming both. */
int bert_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b,
                         int *nout, int64_t *out);
/* out = a op (alpha * b) for ADD/SUB, a op b otherwise.  When dst is
** non-NULL the result is written there (in-place forms); dst must have the
** broadcast shape and not be an expanded view. */
bert_tensor *bert_binary(bert_binop op, const bert_tensor *a, const bert_tensor *b,
                         double alpha, bert_tensor *dst);
bert_tensor *bert_unary(bert_unop op, const bert_tensor *a, bert_tensor *dst);
/* dy * f'(x) for the unary op f (y = f(x)): its backward, float32. */
bert_tensor *bert_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *y,
                                 const bert_tensor *dy);
/* out = mask != 0 ? value : a */
bert_tensor *bert_masked_fill(const bert_tensor *a, const bert_tensor *mask, double value,
                              bert_tensor *dst);
/* out = cond != 0 ? a : b, all three broadcast */
bert_tensor *bert_where(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b);
int bert_fill_(bert_tensor *t, double value);
const char *bert_binop_name(bert_binop op);
const char *bert_unop_name(bert_unop op);
const char *bert_redop_name(bert_redop op);

/* ---- reductions over one dim (dim < 0: over all elements, scalar result) ---- */
/* For MAX/MIN with a dim, *indices (if non-NULL) receives the int32 argmax/argmin. */
bert_tensor *bert_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                         int correction, bert_tensor **indices);
bert_tensor *bert_softmax(const bert_tensor *t, int dim, int log);

/* ---- matmul ---- */
bert_tensor *bert_matmul(const bert_tensor *a, const bert_tensor *b);

/* ---- indexing ---- */
bert_tensor *bert_index_select(const bert_tensor *t, int dim, const bert_tensor *index);
bert_tensor *bert_gather(const bert_tensor *t, int dim, const bert_tensor *index);
/* dst[index[i][j]][j] += src[i][j] along dim (in place on dst) */
int bert_scatter_add_(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src);
bert_tensor *bert_cat(bert_tensor *const *ts, int n, int dim);
/* z[index[i]] += src[i] along dim (in place on z; index int32 [n]) */
int bert_index_add_(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src);
/* Flat (row-major) 0-based positions of the non-zero elements, as int32 [n]. */
bert_tensor *bert_nonzero_flat(const bert_tensor *t);

/* ---- sorting ---- */
/* int32 positions of the k first elements of each row along dim, in
** descending (or ascending) order; ties stable, NaN largest.  k = size: a sort. */
bert_tensor *bert_sort_indices(const bert_tensor *t, int dim, int64_t k, int descending);

/* ---- creation (host memory) ---- */
bert_tensor *bert_arange(double start, double stop, double step, bert_dtype dt);
bert_tensor *bert_eye(int64_t n, int64_t m, bert_dtype dt);

/* ---- random numbers (rng.c): Philox4x32-10, counter-based ---- */
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
/* Data parallelism: this process computes rows [first, first + rows) of
** every global batch of `total` rows (rows == total: no sharding). */
void bert_rng_set_batch_shard(int64_t first, int64_t rows, int64_t total);
/* Counters for a mask over a tensor of `rows` leading rows of `per_row`
** elements, returned as the counter of its element 0.  When rows is this
** process's shard, counters are reserved for the whole global batch and
** the shard starts at its rows' place, so a sample's mask depends on its
** global index, not on how many processes share the batch (exactly so when
** first * per_row is a multiple of 4, the elements per counter). */
uint64_t bert_rng_reserve_batch(int64_t rows, int64_t per_row);

#endif
