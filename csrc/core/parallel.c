/*
** The host thread pool (core/parallel.h): workers that spin briefly and then
** sleep on a futex, chunks claimed dynamically.
**
** One job runs at a time.  Its chunks are claimed by compare-and-swap on one
** 64-bit word holding (generation, width, chunk count, next chunk): a claim
** that succeeds names a chunk of the job current at that instant, so its
** fields (fn, ctx, n, chunk size) are valid until that chunk is counted done,
** and a worker woken late never touches a job that has ended.
*/
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#include "core/parallel.h"
#include "core/tensor.h"

#define MAX_WIDTH 256          /* threads in one loop, the caller included */
#define MAX_CHUNKS 0xFFFFF     /* 20 bits of the claim word */

/* claim word: gen 16 | width 8 (width - 1) | chunks 20 | next 20 */
#define CLAIM(gen, width, nch, next) \
  (((uint64_t)(gen) << 48) | ((uint64_t)((width) - 1) << 40) | ((uint64_t)(nch) << 20) | (uint64_t)(next))
#define CLAIM_WIDTH(w) ((int)(((w) >> 40) & 0xFF) + 1)
#define CLAIM_CHUNKS(w) ((uint32_t)(((w) >> 20) & MAX_CHUNKS))
#define CLAIM_NEXT(w) ((uint32_t)((w) & MAX_CHUNKS))

static _Atomic uint64_t claim;
static _Atomic uint32_t wake_word;     /* bumped for each job; idle workers sleep on it */
static _Atomic uint32_t done_word;     /* chunks of the current job finished */
static _Atomic int sleepers;           /* workers asleep (or about to be) on wake_word */
static _Atomic int caller_sleeping;    /* the caller asleep on done_word */
static _Atomic int quit;

/* the current job; written before its claim word is published */
static bert_range_fn job_fn;
static void *job_ctx;
static int64_t job_n, job_chunk;
static uint32_t job_gen;

static pthread_mutex_t dispatch = PTHREAD_MUTEX_INITIALIZER;
static pthread_t workers[MAX_WIDTH - 1];
static int nworkers;
static int spin_iters = -1;

static _Thread_local int tl_index;     /* this thread's index in the running loop */
static _Thread_local int tl_active;    /* inside a loop (workers: always) */

static void futex_wait(_Atomic uint32_t *addr, uint32_t expected) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}
static void futex_wake(_Atomic uint32_t *addr, int n) {
  syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Denormals flushed in every thread that runs kernels (see cpu/gemm.c). */
static void set_ftz_daz(void) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

/* Claims and runs chunks of the current job until none is left. */
static void run_chunks(int index) {
  for (;;) {
    uint64_t w = atomic_load(&claim);
    uint32_t nch = CLAIM_CHUNKS(w), next = CLAIM_NEXT(w);
    if (next >= nch || index >= CLAIM_WIDTH(w)) return;
    if (!atomic_compare_exchange_weak(&claim, &w, w + 1)) continue;
    int64_t lo = (int64_t)next * job_chunk, hi = lo + job_chunk < job_n ? lo + job_chunk : job_n;
    job_fn(job_ctx, lo, hi);
    if (atomic_fetch_add(&done_word, 1) + 1 == nch && atomic_load(&caller_sleeping))
      futex_wake(&done_word, 1);
  }
}

static void *worker_main(void *arg) {
  tl_index = (int)(intptr_t)arg;
  tl_active = 1;
  set_ftz_daz();
  omp_set_num_threads(1);   /* a BLAS call in a chunk stays on this thread */
  uint32_t seen = atomic_load(&wake_word);
  for (;;) {
    run_chunks(tl_index);
    for (int s = 0; atomic_load(&wake_word) == seen && !atomic_load(&quit);) {
      if (s < spin_iters) { CPU_RELAX(); s++; continue; }
      atomic_fetch_add(&sleepers, 1);
      if (atomic_load(&wake_word) == seen && !atomic_load(&quit)) futex_wait(&wake_word, seen);
      atomic_fetch_sub(&sleepers, 1);
    }
    if (atomic_load(&quit)) return NULL;
    seen = atomic_load(&wake_word);
  }
}

/* A forked child has none of the parent's workers. */
static void after_fork_child(void) {
  nworkers = 0;
  pthread_mutex_init(&dispatch, NULL);
  atomic_store(&sleepers, 0);
  atomic_store(&caller_sleeping, 0);
}

static void init_once(void) {
  const char *env = getenv("BERT_POOL_SPIN");
  char *end;
  long v = env ? strtol(env, &end, 10) : -1;
  spin_iters = env && *end == '\0' && v >= 0 && v <= 100000000 ? (int)v : 2000;
  pthread_atfork(NULL, NULL, after_fork_child);
}

/* The library is unloaded (Lua dlcloses C modules at exit): stop the workers
** before their code is unmapped. */
__attribute__((destructor)) static void stop_workers(void) {
  if (nworkers == 0) return;
  atomic_store(&quit, 1);
  atomic_fetch_add(&wake_word, 1);
  futex_wake(&wake_word, INT_MAX);
  for (int i = 0; i < nworkers; i++) pthread_join(workers[i], NULL);
  nworkers = 0;
}

/* The width is OpenMP's thread count, so that OMP_NUM_THREADS sets it. */
void bert_set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }
int bert_get_num_threads(void) { return omp_get_max_threads(); }

static int clamp_width(int w) { return w < 1 ? 1 : w > MAX_WIDTH ? MAX_WIDTH : w; }

int bert_parallel_width(void) { return tl_active ? 1 : clamp_width(bert_get_num_threads()); }
int bert_parallel_thread(void) { return tl_index; }

int64_t bert_parallel_grain(int64_t cost) {
  int64_t g = (BERT_PARALLEL_MIN / 2) / (cost > 0 ? cost : 1);
  return g > 0 ? g : 1;
}

int64_t bert_reduce_blocks(int64_t n, int64_t grain) {
  if (grain < 1) grain = 1;
  int64_t nb = (n + grain - 1) / grain;
  if (nb > BERT_REDUCE_BLOCKS) nb = BERT_REDUCE_BLOCKS;
  return nb > 0 ? nb : 1;
}

typedef struct {
  bert_block_fn fn;
  void *ctx;
  int64_t n, size;
} blocks_job;

static void run_blocks(void *p, int64_t lo, int64_t hi) {
  const blocks_job *j = p;
  for (int64_t b = lo; b < hi; b++) {
    int64_t first = b * j->size, last = first + j->size < j->n ? first + j->size : j->n;
    if (first < last) j->fn(j->ctx, b, first, last);
  }
}

void bert_parallel_blocks(int64_t n, int64_t grain, bert_block_fn fn, void *ctx) {
  int64_t nb = bert_reduce_blocks(n, grain);
  blocks_job job = {fn, ctx, n, (n + nb - 1) / (nb > 0 ? nb : 1)};
  bert_parallel_for(nb, 1, run_blocks, &job);
}

void bert_sum_blocks(const float *partial, int64_t blocks, int64_t stride, int64_t n, float *out) {
  for (int64_t k = 0; k < n; k++) out[k] = blocks > 0 ? partial[k] : 0.0f;
  for (int64_t t = 1; t < blocks; t++) {
    const float *p = partial + (size_t)t * (size_t)stride;
    for (int64_t k = 0; k < n; k++) out[k] += p[k];
  }
}

static void run_inline(int64_t n, bert_range_fn fn, void *ctx) {
  int saved = tl_index;
  tl_index = 0;
  fn(ctx, 0, n);
  tl_index = saved;
}

void bert_parallel_for(int64_t n, int64_t grain, bert_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int width = bert_parallel_width();
  if (width == 1 || n <= grain || pthread_mutex_trylock(&dispatch) != 0) {
    run_inline(n, fn, ctx);
    return;
  }
  if (spin_iters < 0) init_once();
  while (nworkers < width - 1) {
    if (pthread_create(&workers[nworkers], NULL, worker_main, (void *)(intptr_t)(nworkers + 1)) != 0) break;
    nworkers++;
  }
  if (width > nworkers + 1) width = nworkers + 1;
  if (width == 1) { pthread_mutex_unlock(&dispatch); run_inline(n, fn, ctx); return; }

  /* up to 4 chunks per thread: a late worker costs at most a chunk's wait */
  int64_t nch = (n + grain - 1) / grain, most = 4 * (int64_t)width;
  if (nch > most) nch = most;
  if (nch > MAX_CHUNKS) nch = MAX_CHUNKS;
  int64_t chunk = (n + nch - 1) / nch;
  nch = (n + chunk - 1) / chunk;

  job_fn = fn; job_ctx = ctx; job_n = n; job_chunk = chunk;
  job_gen = (job_gen + 1) & 0xFFFF;
  atomic_store(&done_word, 0);
  atomic_store(&claim, CLAIM(job_gen, width, nch, 0));
  atomic_fetch_add(&wake_word, 1);
  if (atomic_load(&sleepers) > 0) futex_wake(&wake_word, INT_MAX);

  int saved_threads = bert_get_num_threads();
  omp_set_num_threads(1);
  tl_active = 1;
  tl_index = 0;
  run_chunks(0);
  /* wait for chunks still running on workers: spin, then sleep */
  for (int s = 0; atomic_load(&done_word) < (uint32_t)nch;) {
    if (s < spin_iters) { CPU_RELAX(); s++; continue; }
    atomic_store(&caller_sleeping, 1);
    uint32_t d = atomic_load(&done_word);
    if (d < (uint32_t)nch) futex_wait(&done_word, d);
    atomic_store(&caller_sleeping, 0);
  }
  tl_active = 0;
  omp_set_num_threads(saved_threads);
  pthread_mutex_unlock(&dispatch);
}
