/*
** The library's own thread pool for data-parallel loops on the host.
**
** Why not OpenMP: libgomp's idle threads busy-wait for milliseconds after
** every parallel region (OMP_WAIT_POLICY is read before this library loads),
** so on a shared machine a 2-thread step ran up to 3x slower than 1 thread.
** Here idle workers spin only briefly (BERT_POOL_SPIN pause iterations,
** default 2000: tens of microseconds) and then sleep on a futex; chunks are
** claimed dynamically, so the calling thread does every chunk a descheduled
** worker never picked up instead of waiting for it.
**
** A loop started from inside a loop (or while another thread runs one) runs
** inline on the calling thread.  Inside a loop, BLAS calls are single-threaded
** (the pool splits GEMMs itself; see cpu/gemm.c).
*/
#ifndef BERT_PARALLEL_H
#define BERT_PARALLEL_H

#include <stdint.h>

/* The pool's width: threads per loop, the caller included (n < 1: 1). */
void bert_set_num_threads(int n);
int bert_get_num_threads(void);

/* Loops with fewer elements than this stay single-threaded. */
#define BERT_PARALLEL_MIN 32768

/* fn(ctx, lo, hi) handles items [lo, hi) */
typedef void (*bert_range_fn)(void *ctx, int64_t lo, int64_t hi);

/* Runs fn over [0, n) in chunks of at least `grain` items (grain < 1 means
** 1) on up to bert_get_num_threads() threads, the caller included; returns
** when every chunk is done.  n <= grain runs inline. */
void bert_parallel_for(int64_t n, int64_t grain, bert_range_fn fn, void *ctx);

/* Grain for items of `cost` elements each, so that a chunk has at least
** BERT_PARALLEL_MIN / 2 elements (the old OpenMP threshold, per chunk). */
int64_t bert_parallel_grain(int64_t cost);

/* Reductions whose result must not depend on timing or the thread count
** (a gradient's column sums): [0, n) split into bert_reduce_blocks(n, grain)
** fixed blocks, from n and grain alone, each run whole by one thread as
** fn(ctx, block, lo, hi).  One partial per block, summed in block order,
** gives the same bits at any thread count, where per-thread partials under
** the pool's dynamic chunks do not. */
#define BERT_REDUCE_BLOCKS 16
typedef void (*bert_block_fn)(void *ctx, int64_t block, int64_t lo, int64_t hi);
int64_t bert_reduce_blocks(int64_t n, int64_t grain);
void bert_parallel_blocks(int64_t n, int64_t grain, bert_block_fn fn, void *ctx);
/* out[k] = the sum of partial[t * stride + k] over t = 0 .. blocks - 1, for
** k < n, added in block order: the partials of bert_parallel_blocks summed. */
void bert_sum_blocks(const float *partial, int64_t blocks, int64_t stride, int64_t n, float *out);

/* The calling thread's index in the running loop, 0 .. bert_parallel_width() - 1
** (0 outside a loop): for per-thread scratch (not for partial sums: see
** bert_parallel_blocks). */
int bert_parallel_thread(void);
/* How many threads a loop started now may use (its per-thread buffers). */
int bert_parallel_width(void);

#endif
