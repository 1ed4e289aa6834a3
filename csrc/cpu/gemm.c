/*
** GEMM providers and matmul (2-D and batched with broadcast batch dims).
** Transposed operands are passed to BLAS as transposes, never copied.
*/
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <cblas.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "core/ops.h"
#include "core/parallel.h"
#include "cpu/gemm.h"
#include "cpu/cpu.h"

/* {====================================================== providers */

typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *,
                             int64_t, const float *, int64_t, float, float *, int64_t);

static dnnl_sgemm_fn dnnl_sgemm_ptr;
static int dnnl_probed;
static bert_gemm_provider provider = BERT_GEMM_OPENBLAS;

static void probe_dnnl(void) {
  if (dnnl_probed) return;
  dnnl_probed = 1;
  const char *names[] = {"libdnnl.so.3", "libdnnl.so.2", "libdnnl.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !dnnl_sgemm_ptr; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      void *sym = dlsym(h, "dnnl_sgemm");
      /* POSIX guarantees object and function pointers convert via memcpy */
      if (sym) memcpy(&dnnl_sgemm_ptr, &sym, sizeof sym);
      else dlclose(h);
    }
  }
}

int bert_gemm_available(bert_gemm_provider p) {
  if (p == BERT_GEMM_OPENBLAS || p == BERT_GEMM_OWN) return 1;
  if (p != BERT_GEMM_ONEDNN) return 0;
  probe_dnnl();
  return dnnl_sgemm_ptr != NULL;
}

const char *bert_gemm_provider_name(bert_gemm_provider p) {
  return p == BERT_GEMM_ONEDNN ? "onednn" : p == BERT_GEMM_OWN ? "bert" : "openblas";
}

int bert_gemm_set_provider(bert_gemm_provider p) {
  if (!bert_gemm_available(p)) {
    bert_set_error("GEMM provider '%s' is not available (install libdnnl)",
                   bert_gemm_provider_name(p));
    return -1;
  }
  provider = p;
  return 0;
}

bert_gemm_provider bert_gemm_get_provider(void) { return provider; }

const char *bert_openblas_corename(void) { return openblas_get_corename(); }
int bert_openblas_num_threads(void) { return openblas_get_num_threads(); }

/* Flush denormals to zero: softmax and GELU tails otherwise produce
** denormals that cost 10-100x per operation. */
static void set_ftz_daz(void) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}

/* The BLAS libraries always run single-threaded: the pool (core/parallel.c)
** splits large GEMMs itself, so no BLAS or OpenMP thread is left spinning
** against other work between calls.  n is the pool's width (bert_set_num_threads). */
void bert_gemm_set_num_threads(int n) {
  (void)n;
  openblas_set_num_threads(1);
}

void bert_gemm_init(void) {
  static int done;
  if (done) return;
  done = 1;
  set_ftz_daz();
  openblas_set_num_threads(1);
  const char *env = getenv("BERT_GEMM");
  if (env && strcmp(env, "openblas") == 0) provider = BERT_GEMM_OPENBLAS;
  else if (env && strcmp(env, "bert") == 0) provider = BERT_GEMM_OWN;
  else if (env && strcmp(env, "onednn") == 0 && bert_gemm_available(BERT_GEMM_ONEDNN))
    provider = BERT_GEMM_ONEDNN;
  else provider = bert_gemm_available(BERT_GEMM_ONEDNN) ? BERT_GEMM_ONEDNN : BERT_GEMM_OPENBLAS;
}

/* One GEMM on the calling thread (oneDNN's OpenMP runtime held to 1 thread). */
static void sgemm_serial(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                         float *C, int64_t ldc) {
  if (provider == BERT_GEMM_OWN) {
    bert_sgemm_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (provider == BERT_GEMM_ONEDNN && dnnl_sgemm_ptr) {
    int saved = omp_get_max_threads();
    if (saved != 1) omp_set_num_threads(1);
    dnnl_sgemm_ptr(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                   beta, C, ldc);
    if (saved != 1) omp_set_num_threads(saved);
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, alpha,
              A, (blasint)lda, B, (blasint)ldb, beta, C, (blasint)ldc);
}

/* A GEMM split over the pool: blocks of C's rows (when C has more rows than
** columns: each thread then re-reads only its share of A, all of B) or of
** its columns, in multiples of 16. */
typedef struct {
  int trans_a, trans_b, by_rows;
  int64_t M, N, K, lda, ldb, ldc, block;
  float alpha, beta;
  const float *A, *B;
  float *C;
} gemm_job;

static void gemm_blocks(void *p, int64_t lo, int64_t hi) {
  const gemm_job *g = p;
  int64_t first = lo * g->block, last = hi * g->block;
  if (g->by_rows) {
    if (last > g->M) last = g->M;
    const float *A = g->trans_a ? g->A + first : g->A + first * g->lda;
    sgemm_serial(g->trans_a, g->trans_b, last - first, g->N, g->K, g->alpha, A, g->lda, g->B, g->ldb,
                 g->beta, g->C + first * g->ldc, g->ldc);
  } else {
    if (last > g->N) last = g->N;
    const float *B = g->trans_b ? g->B + first * g->ldb : g->B + first;
    sgemm_serial(g->trans_a, g->trans_b, g->M, last - first, g->K, g->alpha, g->A, g->lda, B, g->ldb,
                 g->beta, g->C + first, g->ldc);
  }
}

/* below this many FLOPs per thread a split costs more than it gains */
#define GEMM_SPLIT_FLOPS 4e6

void bert_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {   /* BLAS may skip this case; define it: C = beta * C */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    return;
  }
  int width = bert_parallel_width();
  double flops = 2.0 * (double)M * (double)N * (double)K;
  if (width > 1 && flops >= GEMM_SPLIT_FLOPS * width && (M >= 32 || N >= 32)) {
    gemm_job g = {trans_a, trans_b, M >= N, M, N, K, lda, ldb, ldc, 16, alpha, beta, A, B, C};
    int64_t extent = g.by_rows ? M : N, blocks = (extent + 15) / 16;
    /* one piece per thread, of at least 64 rows/columns and GEMM_SPLIT_FLOPS:
    ** each piece is a BLAS call that packs its shared operand again, so
    ** more pieces ran slower (docs/speed.md, "GEMMs split in fewer pieces") */
    int64_t per_block = (int64_t)(flops / (double)blocks);
    int64_t grain = per_block > 0 ? (int64_t)(GEMM_SPLIT_FLOPS / per_block) + 1 : blocks;
    int64_t pieces = width;
    if (grain < (blocks + pieces - 1) / pieces) grain = (blocks + pieces - 1) / pieces;
    if (grain < 4) grain = 4;
    bert_parallel_for(blocks, grain, gemm_blocks, &g);
    return;
  }
  sgemm_serial(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
/* }====================================================== */

/* {====================================================== matmul */

/* How one operand's matrices lie in memory. */
typedef struct {
  int64_t rows, cols, ld;
  int trans;
} matlayout;

/* Can the last two dims (rows x cols, strides sr, sc) go to BLAS directly? */
static int blas_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, matlayout *m) {
  m->rows = rows; m->cols = cols;
  if (rows == 1) sr = cols > 1 ? cols : 1;     /* unused strides: pick valid ones */
  if (cols == 1) sc = 1;
  if (sc == 1 && sr >= (cols > 1 ? cols : 1)) { m->trans = 0; m->ld = sr; return 1; }
  if (rows == 1 && cols == 1) { m->trans = 0; m->ld = 1; return 1; }
  if (sr == 1 && sc >= (rows > 1 ? rows : 1)) { m->trans = 1; m->ld = sc; return 1; }
  return 0;
}

typedef struct {
  int nbd;
  const int64_t *batch, *sa, *sb;
  int ta, tb;
  int64_t M, N, K, lda, ldb;
  const float *A, *B;
  float *C;
} batched_job;

static void batched_items(void *p, int64_t lo, int64_t hi) {
  const batched_job *j = p;
  for (int64_t bi = lo; bi < hi; bi++) {
    int64_t r = bi, oa = 0, ob = 0;
    for (int i = j->nbd - 1; i >= 0; i--) {
      int64_t ix = r % j->batch[i];
      r /= j->batch[i];
      oa += ix * j->sa[i];
      ob += ix * j->sb[i];
    }
    bert_sgemm(j->ta, j->tb, j->M, j->N, j->K, 1.0f, j->A + oa, j->lda, j->B + ob, j->ldb, 0.0f,
               j->C + bi * j->M * j->N, j->N);
  }
}

/* Shapes and dtypes checked by bert_matmul (core/ops.c). */
bert_tensor *cpu_matmul(const bert_tensor *a_in, const bert_tensor *b_in) {
  /* vectors: [K] -> [1 x K] on the left, [K x 1] on the right, dropped after */
  bert_tensor *a = a_in->ndim == 1 ? bert_unsqueeze((bert_tensor *)a_in, 0) : bert_alias(a_in);
  bert_tensor *b = b_in->ndim == 1 ? bert_unsqueeze((bert_tensor *)b_in, 1) : bert_alias(b_in);
  bert_tensor *out = NULL;
  if (a == NULL || b == NULL) goto done;
  int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
  int64_t batch[BERT_MAX_DIMS];
  int nbd;
  if (bert_broadcast_shape(a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nbd, batch) != 0) goto done;
  /* make each operand BLAS-friendly, copying only when its strides are not */
  matlayout la, lb;
  bert_tensor **ops[2] = {&a, &b};
  matlayout *lays[2] = {&la, &lb};
  for (int k = 0; k < 2; k++) {
    bert_tensor *t = *ops[k];
    int nd = t->ndim;
    if (!blas_layout(t->shape[nd - 2], t->shape[nd - 1], t->stride[nd - 2], t->stride[nd - 1], lays[k])) {
      bert_tensor *c = bert_clone(t);
      if (c == NULL) goto done;
      bert_tensor_release(t);
      *ops[k] = t = c;
      blas_layout(t->shape[nd - 2], t->shape[nd - 1], t->stride[nd - 2], t->stride[nd - 1], lays[k]);
    }
  }
  /* output [batch..., M, N] (vector dims dropped at the end) */
  int64_t oshape[BERT_MAX_DIMS];
  int ond = 0;
  for (int i = 0; i < nbd; i++) oshape[ond++] = batch[i];
  oshape[ond++] = M;
  oshape[ond++] = N;
  out = bert_tensor_empty(BERT_F32, ond, oshape);
  if (out == NULL) goto done;

  /* batch strides aligned to the broadcast batch shape (0 where broadcast) */
  int64_t sa[BERT_MAX_DIMS], sb[BERT_MAX_DIMS], nbatch = 1;
  for (int i = 0; i < nbd; i++) {
    int ia = i - (nbd - (a->ndim - 2)), ib = i - (nbd - (b->ndim - 2));
    sa[i] = (ia < 0 || a->shape[ia] == 1) ? 0 : a->stride[ia];
    sb[i] = (ib < 0 || b->shape[ib] == 1) ? 0 : b->stride[ib];
    nbatch *= batch[i];
  }
  const float *A = bert_f32(a), *B = bert_f32(b);
  float *C = bert_f32(out);

  /* [batch, M, K] @ [K, N] with a's rows evenly spaced: one tall GEMM */
  int b_shared = 1, a_foldable = !la.trans;
  int64_t expect = M * la.ld;
  for (int i = nbd - 1; i >= 0; i--) {
    if (sb[i] != 0) b_shared = 0;
    if (batch[i] != 1 && sa[i] != expect) a_foldable = 0;
    expect *= batch[i];
  }
  if (nbatch == 1 || (b_shared && a_foldable)) {
    bert_sgemm(la.trans, lb.trans, nbatch * M, N, K, 1.0f, A, la.ld, B, lb.ld, 0.0f, C, N);
    goto done;
  }
  /* many small GEMMs: parallel over the batch, one GEMM per item on its thread */
  batched_job bj = {nbd, batch, sa, sb, la.trans, lb.trans, M, N, K, la.ld, lb.ld, A, B, C};
  double flops = 2.0 * (double)M * (double)N * (double)K;
  bert_parallel_for(nbatch, flops < GEMM_SPLIT_FLOPS ? (int64_t)(GEMM_SPLIT_FLOPS / (flops + 1)) + 1 : 1,
                    batched_items, &bj);
done:
  if (out && (a_in->ndim == 1 || b_in->ndim == 1)) {
    int64_t shape[BERT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < out->ndim - 2; i++) shape[nd++] = out->shape[i];
    if (a_in->ndim > 1) shape[nd++] = out->shape[out->ndim - 2];
    if (b_in->ndim > 1) shape[nd++] = out->shape[out->ndim - 1];
    bert_tensor *v = bert_view(out, nd, shape);
    bert_tensor_release(out);
    out = v;
  }
  bert_tensor_release(a);
  bert_tensor_release(b);
  return out;
}
/* }====================================================== */
