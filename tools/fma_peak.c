/*
** fp32 FMA peak of this machine for a given thread count: every thread runs
** independent FMA chains held in registers (enough chains to cover the FMA
** latency on two ports), for the widest vector width the compiler targets
** (-march=native).  Prints one line: "<threads> <GFLOP/s> <isa> <lanes>".
** Best of several trials: on a shared machine a trial can only lose time.
**   cc -O2 -march=native -pthread tools/fma_peak.c -o fma_peak && ./fma_peak 2
*/
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERS 40000000L   /* ~0.1 s per trial at 1 thread */

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define ISA "avx512"
#define SET1(x) _mm512_set1_ps(x)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FIRST(v) _mm512_cvtss_f32(v)
#elif defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define ISA "avx2+fma"
#define SET1(x) _mm256_set1_ps(x)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FIRST(v) _mm256_cvtss_f32(v)
#else
#error "fma_peak needs FMA (build with -march=native on an FMA machine)"
#endif

static volatile float sink;

static void *run(void *arg) {
  (void)arg;
  vec m = SET1(0.999999f), c = SET1(1e-7f);
  vec a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3), a4 = SET1(4), a5 = SET1(5);
  vec a6 = SET1(6), a7 = SET1(7), a8 = SET1(8), a9 = SET1(9), a10 = SET1(10), a11 = SET1(11);
  for (long i = 0; i < ITERS; i++) {
    a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c);
    a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c);
    a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c);
    /* keeps the twelve chains in registers and the loop from being folded */
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
                     "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
  }
  sink = FIRST(a0) + FIRST(a1) + FIRST(a2) + FIRST(a3) + FIRST(a4) + FIRST(a5) + FIRST(a6) +
         FIRST(a7) + FIRST(a8) + FIRST(a9) + FIRST(a10) + FIRST(a11);
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1, trials = argc > 2 ? atoi(argv[2]) : 5;
  if (threads < 1 || threads > 1024 || trials < 1) {
    fprintf(stderr, "usage: fma_peak THREADS [TRIALS]\n");
    return 2;
  }
  pthread_t *tid = malloc(sizeof *tid * (size_t)threads);
  if (tid == NULL) return 1;
  double best = 0;
  for (int t = 0; t < trials; t++) {
    double t0 = now();
    for (int k = 1; k < threads; k++)
      if (pthread_create(&tid[k], NULL, run, NULL) != 0) { perror("pthread_create"); return 1; }
    run(NULL);
    for (int k = 1; k < threads; k++) pthread_join(tid[k], NULL);
    double gf = 2.0 * CHAINS * LANES * (double)ITERS * threads / (now() - t0) / 1e9;
    if (gf > best) best = gf;
  }
  printf("%d %.1f %s %d\n", threads, best, ISA, LANES);
  free(tid);
  return 0;
}
