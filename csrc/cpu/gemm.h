/*
** One GEMM entry point, three providers: OpenBLAS (always linked), oneDNN's
** dnnl_sgemm (loaded at run time with dlopen when the library is installed,
** so the module never needs it to load) and our own packed GEMM
** (cpu/gemm_kernel.c, always there).
*/
#ifndef BERT_GEMM_H
#define BERT_GEMM_H

#include <stdint.h>

typedef enum {
  BERT_GEMM_OPENBLAS = 0, BERT_GEMM_ONEDNN = 1, BERT_GEMM_OWN = 2,
  BERT_GEMM_NPROVIDERS
} bert_gemm_provider;

/* Row-major C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C. */
void bert_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                float *C, int64_t ldc);

/* The same on the calling thread only, with our own kernel ("bert"):
** reentrant, any leading dimensions, beta == 0 never reads C. */
void bert_sgemm_packed(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                       float *C, int64_t ldc);

/* The tiles of attention (a block of query rows against a tile of keys, on
** the calling thread): always our packed kernel, whatever the provider.
** At these sizes the libraries' per-call cost dominates: 128 x 128 x 64 ran
** at ~35% of peak through dnnl_sgemm, against ~73% here (tools/bench_gemm.lua). */
static inline void bert_sgemm_tile(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                                   const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                                   float *C, int64_t ldc) {
  bert_sgemm_packed(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Selects a provider; -1 with an error if it is not available. */
int bert_gemm_set_provider(bert_gemm_provider p);
bert_gemm_provider bert_gemm_get_provider(void);
const char *bert_gemm_provider_name(bert_gemm_provider p);
int bert_gemm_available(bert_gemm_provider p);
/* Reads BERT_GEMM from the environment, else prefers oneDNN when present. */
void bert_gemm_init(void);
const char *bert_openblas_corename(void);
int bert_openblas_num_threads(void);
void bert_gemm_set_num_threads(int n);

#endif
