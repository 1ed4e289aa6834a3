/*
** Optimizer kernels (optim.h): AdamW, LAMB, SGD with momentum, the
** sum of squares / in-place scale behind global-norm clipping, and the
** zeroing of gradients.
**
** Each update is one pass over memory (LAMB: two, the second recomputing
** the update instead of storing it), parallel over elements with OpenMP
** and vectorised (AVX intrinsics where the square root is involved, the
** compiler elsewhere).  Scalars that depend only on the step are computed
** once, in double, outside the loop.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "core/autograd.h"   /* bert_bump_version */
#include "core/parallel.h"
#include "core/optim.h"
#include "cpu/cpu.h"

/* Reductions sum blocks of this many elements each (fixed, so the
** result does not depend on the number of threads). */
#define SUM_BLOCK 65536

/* {====================================================== Adam family */

/* Per-step scalars shared by AdamW and LAMB, rounded to float once. */
typedef struct {
  float b1, c1, b2, c2;    /* m = b1*m + c1*g;  v = b2*v + c2*g*g */
  float ibc1;              /* 1/(1 - b1^t), or 1 without bias correction */
  float isb2;              /* 1/sqrt(1 - b2^t), or 1 */
  float eps;
  float decay, step_size;  /* AdamW: p = p*decay - step_size * m/(sqrt(v)*isb2 + eps) */
  float wd, lamb_step;     /* LAMB: u = m*ibc1/(sqrt(v)*isb2 + eps) + wd*p; p -= lamb_step*u */
  float gs;                /* each gradient element is read as gs * g (clipping; 1 otherwise) */
} adam_k;

static adam_k adam_prepare(const bert_adam_cfg *cfg) {
  adam_k k;
  double bc1 = 1.0, bc2 = 1.0;
  if (cfg->bias_correction) {
    bc1 = 1.0 - pow(cfg->beta1, (double)cfg->step);
    bc2 = 1.0 - pow(cfg->beta2, (double)cfg->step);
  }
  k.b1 = (float)cfg->beta1;
  k.c1 = (float)(1.0 - cfg->beta1);
  k.b2 = (float)cfg->beta2;
  k.c2 = (float)(1.0 - cfg->beta2);
  k.ibc1 = (float)(1.0 / bc1);
  k.isb2 = (float)(1.0 / sqrt(bc2));
  k.eps = (float)cfg->eps;
  k.decay = (float)(1.0 - cfg->lr * cfg->weight_decay);
  k.step_size = (float)(cfg->lr / bc1);
  k.wd = (float)cfg->weight_decay;
  k.lamb_step = 0;
  k.gs = 1.0f;
  return k;
}

/* One optimizer pass for the pool: the tensors and constants of a step;
** the pool hands out blocks of ELEM_BLOCK elements (SUM_BLOCK for the
** passes that keep per-block sums, so their sums do not depend on the
** thread count). */
#define ELEM_BLOCK 4096
typedef struct {
  float *p, *m, *v, *buf;
  const float *g;
  const adam_k *k;
  double *sums;
  int64_t n;
  float lr, wd, mu, damp;
  int first, nesterov;
} optim_job;

static void elem_bounds(const optim_job *j, int64_t lo, int64_t hi, int64_t block, int64_t *a, int64_t *b) {
  *a = lo * block;
  *b = hi * block < j->n ? hi * block : j->n;
}

/* The element loops below are written twice: with AVX intrinsics, and in
** scalar C for the tail and for other targets.  GCC does not vectorise
** sqrtf itself here: without -fno-math-errno it keeps a branch to the
** library call for negative arguments.  Both versions perform the same
** IEEE operations in the same order (no FMA contraction under -std=c11),
** so results are identical whichever path an element takes. */

static void adamw_range(float *restrict p, const float *restrict g, float *restrict m,
                        float *restrict v, int64_t lo, int64_t hi, const adam_k *k) {
  int64_t i = lo;
#ifdef __AVX__
  const __m256 b1 = _mm256_set1_ps(k->b1), c1 = _mm256_set1_ps(k->c1);
  const __m256 b2 = _mm256_set1_ps(k->b2), c2 = _mm256_set1_ps(k->c2);
  const __m256 isb2 = _mm256_set1_ps(k->isb2), eps = _mm256_set1_ps(k->eps);
  const __m256 decay = _mm256_set1_ps(k->decay), step = _mm256_set1_ps(k->step_size);
  const __m256 gs = _mm256_set1_ps(k->gs);
  for (; i + 8 <= hi; i += 8) {
    __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                              _mm256_mul_ps(c2, _mm256_mul_ps(gi, gi)));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), isb2), eps);
    __m256 pi = _mm256_mul_ps(_mm256_loadu_ps(p + i), decay);
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(step, _mm256_div_ps(mi, den))));
  }
#endif
  for (; i < hi; i++) {
    float gi = g[i] * k->gs;
    float mi = k->b1 * m[i] + k->c1 * gi;
    float vi = k->b2 * v[i] + k->c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * k->decay - k->step_size * (mi / (sqrtf(vi) * k->isb2 + k->eps));
  }
}

static void adamw_blocks(void *ctx, int64_t lo, int64_t hi) {
  const optim_job *j = ctx;
  int64_t a, b;
  elem_bounds(j, lo, hi, ELEM_BLOCK, &a, &b);
  adamw_range(j->p, j->g, j->m, j->v, a, b, j->k);
}

int cpu_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                   const bert_adam_cfg *cfg) {
  const int64_t n = bert_numel(p);
  const adam_k k = adam_prepare(cfg);
  float *pp = bert_f32(p), *mp = bert_f32(m), *vp = bert_f32(v);
  const float *gp = bert_f32(g);
  optim_job j = {.p = pp, .m = mp, .v = vp, .g = gp, .k = &k, .n = n};
  bert_parallel_for((n + ELEM_BLOCK - 1) / ELEM_BLOCK, bert_parallel_grain(ELEM_BLOCK), adamw_blocks, &j);
  bert_bump_version(p);
  bert_bump_version(m);
  bert_bump_version(v);
  return 0;
}

/* LAMB pass 1 over [lo, hi): update m and v; return the sums of p^2 and
** u^2 (in double). */
static void lamb_moments_range(const float *restrict p, const float *restrict g, float *restrict m,
                               float *restrict v, int64_t lo, int64_t hi, const adam_k *k,
                               double *sum_p, double *sum_u) {
  int64_t i = lo;
  double sp = 0, su = 0;
#ifdef __AVX__
  const __m256 b1 = _mm256_set1_ps(k->b1), c1 = _mm256_set1_ps(k->c1);
  const __m256 b2 = _mm256_set1_ps(k->b2), c2 = _mm256_set1_ps(k->c2);
  const __m256 ibc1 = _mm256_set1_ps(k->ibc1), isb2 = _mm256_set1_ps(k->isb2);
  const __m256 eps = _mm256_set1_ps(k->eps), wd = _mm256_set1_ps(k->wd);
  const __m256 gs = _mm256_set1_ps(k->gs);
  __m256d ap = _mm256_setzero_pd(), au = _mm256_setzero_pd();
  for (; i + 8 <= hi; i += 8) {
    __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, gi));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                              _mm256_mul_ps(c2, _mm256_mul_ps(gi, gi)));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    __m256 pi = _mm256_loadu_ps(p + i);
    __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), isb2), eps);
    __m256 u = _mm256_add_ps(_mm256_div_ps(_mm256_mul_ps(mi, ibc1), den), _mm256_mul_ps(wd, pi));
    __m256d p0 = _mm256_cvtps_pd(_mm256_castps256_ps128(pi));
    __m256d p1 = _mm256_cvtps_pd(_mm256_extractf128_ps(pi, 1));
    __m256d u0 = _mm256_cvtps_pd(_mm256_castps256_ps128(u));
    __m256d u1 = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
    ap = _mm256_add_pd(ap, _mm256_add_pd(_mm256_mul_pd(p0, p0), _mm256_mul_pd(p1, p1)));
    au = _mm256_add_pd(au, _mm256_add_pd(_mm256_mul_pd(u0, u0), _mm256_mul_pd(u1, u1)));
  }
  double lp[4], lu[4];
  _mm256_storeu_pd(lp, ap);
  _mm256_storeu_pd(lu, au);
  sp = (lp[0] + lp[1]) + (lp[2] + lp[3]);
  su = (lu[0] + lu[1]) + (lu[2] + lu[3]);
#endif
  for (; i < hi; i++) {
    float gi = g[i] * k->gs;
    float mi = k->b1 * m[i] + k->c1 * gi;
    float vi = k->b2 * v[i] + k->c2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    float pi = p[i];
    float u = (mi * k->ibc1) / (sqrtf(vi) * k->isb2 + k->eps) + k->wd * pi;
    sp += (double)pi * (double)pi;
    su += (double)u * (double)u;
  }
  *sum_p = sp;
  *sum_u = su;
}

/* LAMB pass 2 over [lo, hi): p -= lamb_step * u, recomputing u from the
** unchanged p and the new m, v. */
static void lamb_apply_range(float *restrict p, const float *restrict m, const float *restrict v,
                             int64_t lo, int64_t hi, const adam_k *k) {
  int64_t i = lo;
#ifdef __AVX__
  const __m256 ibc1 = _mm256_set1_ps(k->ibc1), isb2 = _mm256_set1_ps(k->isb2);
  const __m256 eps = _mm256_set1_ps(k->eps), wd = _mm256_set1_ps(k->wd);
  const __m256 step = _mm256_set1_ps(k->lamb_step);
  for (; i + 8 <= hi; i += 8) {
    __m256 pi = _mm256_loadu_ps(p + i);
    __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(_mm256_loadu_ps(v + i)), isb2), eps);
    __m256 u = _mm256_add_ps(_mm256_div_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), ibc1), den),
                             _mm256_mul_ps(wd, pi));
    _mm256_storeu_ps(p + i, _mm256_sub_ps(pi, _mm256_mul_ps(step, u)));
  }
#endif
  for (; i < hi; i++) {
    float pi = p[i];
    float u = (m[i] * k->ibc1) / (sqrtf(v[i]) * k->isb2 + k->eps) + k->wd * pi;
    p[i] = pi - k->lamb_step * u;
  }
}

static void lamb_moment_blocks(void *ctx, int64_t lo, int64_t hi) {
  const optim_job *j = ctx;
  for (int64_t b = lo; b < hi; b++) {
    int64_t a = b * SUM_BLOCK, e = a + SUM_BLOCK < j->n ? a + SUM_BLOCK : j->n;
    lamb_moments_range(j->p, j->g, j->m, j->v, a, e, j->k, &j->sums[2 * b], &j->sums[2 * b + 1]);
  }
}

static void lamb_apply_blocks(void *ctx, int64_t lo, int64_t hi) {
  const optim_job *j = ctx;
  int64_t a, b;
  elem_bounds(j, lo, hi, ELEM_BLOCK, &a, &b);
  lamb_apply_range(j->p, j->m, j->v, a, b, j->k);
}

int cpu_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                  const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out) {
  const int64_t n = bert_numel(p);
  adam_k k = adam_prepare(cfg);
  float *pp = bert_f32(p), *mp = bert_f32(m), *vp = bert_f32(v);
  const float *gp = bert_f32(g);

  /* pass 1: moments, and per-block sums of p^2 and u^2 */
  const int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  double *sums = NULL;
  if (nb > 0 && (sums = malloc((size_t)nb * 2 * sizeof *sums)) == NULL) {
    bert_set_error("lamb: out of memory");
    return -1;
  }
  optim_job j = {.p = pp, .m = mp, .v = vp, .g = gp, .k = &k, .sums = sums, .n = n};
  bert_parallel_for(nb, 1, lamb_moment_blocks, &j);
  double sp = 0, su = 0;
  for (int64_t b = 0; b < nb; b++) {
    sp += sums[2 * b];
    su += sums[2 * b + 1];
  }
  free(sums);
  double pnorm = sqrt(sp), unorm = sqrt(su);
  double trust = adapt && pnorm > 0 && unorm > 0 ? pnorm / unorm : 1.0;
  if (trust_out != NULL) {
    if ((*trust_out = bert_tensor_empty(BERT_F32, 0, NULL)) == NULL) return -1;
    bert_f32(*trust_out)[0] = (float)trust;
  }

  /* pass 2: the step */
  k.lamb_step = (float)(cfg->lr * trust);
  bert_parallel_for((n + ELEM_BLOCK - 1) / ELEM_BLOCK, bert_parallel_grain(ELEM_BLOCK), lamb_apply_blocks, &j);
  bert_bump_version(p);
  bert_bump_version(m);
  bert_bump_version(v);
  return 0;
}
/* }====================================================== */

/* {====================================================== many tensors in one pass
** The pool runs over the blocks of every segment at once: blocks never
** straddle two segments (each segment's blocks start at its first element,
** as in the one-tensor kernels), and first_block[s] numbers segment s's
** first block, so a chunk of block indices finds its segment by binary
** search.  Per-segment scalars are prepared once before the pass. */

typedef struct {
  bert_optim_seg *segs;
  adam_k *k;               /* per segment */
  int64_t *first_block;    /* [nseg + 1] */
  int64_t block;
  int nseg;
  double *sums;            /* LAMB: 2 per block */
} multi_job;

static int seg_of_block(const multi_job *j, int64_t b) {
  int lo = 0, hi = j->nseg - 1;   /* the last s with first_block[s] <= b */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (j->first_block[mid] <= b) lo = mid; else hi = mid - 1;
  }
  return lo;
}

/* Calls each(j, s, b, a, e) for every block b in [lo, hi): segment s, elements [a, e). */
#define FOR_BLOCKS(j, lo, hi, BODY)                                                  \
  do {                                                                               \
    int s_ = seg_of_block(j, lo);                                                    \
    for (int64_t b = lo; b < hi; b++) {                                              \
      while (b >= (j)->first_block[s_ + 1]) s_++;                                    \
      const bert_optim_seg *seg = &(j)->segs[s_];                                    \
      int64_t a = (b - (j)->first_block[s_]) * (j)->block;                           \
      int64_t e = a + (j)->block < seg->n ? a + (j)->block : seg->n;                 \
      const adam_k *k = &(j)->k[s_];                                                 \
      (void)k;                                                                       \
      BODY                                                                           \
    }                                                                                \
  } while (0)

static void adamw_multi_blocks(void *ctx, int64_t lo, int64_t hi) {
  const multi_job *j = ctx;
  FOR_BLOCKS(j, lo, hi, { adamw_range(seg->p, seg->g, seg->m, seg->v, a, e, k); });
}

static void lamb_moment_multi_blocks(void *ctx, int64_t lo, int64_t hi) {
  const multi_job *j = ctx;
  FOR_BLOCKS(j, lo, hi, {
    lamb_moments_range(seg->p, seg->g, seg->m, seg->v, a, e, k, &j->sums[2 * b], &j->sums[2 * b + 1]);
  });
}

static void lamb_apply_multi_blocks(void *ctx, int64_t lo, int64_t hi) {
  const multi_job *j = ctx;
  FOR_BLOCKS(j, lo, hi, { lamb_apply_range(seg->p, seg->m, seg->v, a, e, k); });
}

/* Numbers the blocks of block elements each; returns the total, or -1. */
static int64_t number_blocks(multi_job *j, int64_t block) {
  j->block = block;
  j->first_block[0] = 0;
  for (int s = 0; s < j->nseg; s++)
    j->first_block[s + 1] = j->first_block[s] + (j->segs[s].n + block - 1) / block;
  return j->first_block[j->nseg];
}

static int multi_setup(multi_job *j, bert_optim_seg *segs, int n, const bert_adam_cfg *cfg, const char *fn) {
  j->segs = segs;
  j->nseg = n;
  j->sums = NULL;
  j->k = malloc((size_t)(n > 0 ? n : 1) * sizeof *j->k);
  j->first_block = malloc((size_t)(n + 1) * sizeof *j->first_block);
  if (j->k == NULL || j->first_block == NULL) {
    free(j->k);
    free(j->first_block);
    bert_set_error("%s: out of memory", fn);
    return -1;
  }
  for (int s = 0; s < n; s++) {
    bert_adam_cfg c = *cfg;
    c.weight_decay = segs[s].weight_decay;
    c.step = segs[s].step;
    j->k[s] = adam_prepare(&c);
    j->k[s].gs = (float)segs[s].grad_scale;
  }
  return 0;
}

static void multi_free(multi_job *j) {
  free(j->k);
  free(j->first_block);
  free(j->sums);
}

int cpu_adamw_multi(bert_optim_seg *segs, int n, const bert_adam_cfg *cfg) {
  multi_job j;
  if (n <= 0) return 0;
  if (multi_setup(&j, segs, n, cfg, "adamw_multi")) return -1;
  int64_t nb = number_blocks(&j, ELEM_BLOCK);
  bert_parallel_for(nb, bert_parallel_grain(ELEM_BLOCK), adamw_multi_blocks, &j);
  multi_free(&j);
  return 0;
}

int cpu_lamb_multi(bert_optim_seg *segs, int n, const bert_adam_cfg *cfg) {
  multi_job j;
  if (n <= 0) return 0;
  if (multi_setup(&j, segs, n, cfg, "lamb_multi")) return -1;
  /* pass 1: moments and per-block sums of p^2 and u^2 */
  int64_t nb = number_blocks(&j, SUM_BLOCK);
  if (nb > 0 && (j.sums = malloc((size_t)nb * 2 * sizeof *j.sums)) == NULL) {
    multi_free(&j);
    bert_set_error("lamb_multi: out of memory");
    return -1;
  }
  bert_parallel_for(nb, 1, lamb_moment_multi_blocks, &j);
  /* each segment's norms, its blocks summed in order (as cpu_lamb_step) */
  for (int s = 0; s < n; s++) {
    double sp = 0, su = 0;
    for (int64_t b = j.first_block[s]; b < j.first_block[s + 1]; b++) {
      sp += j.sums[2 * b];
      su += j.sums[2 * b + 1];
    }
    double pnorm = sqrt(sp), unorm = sqrt(su);
    double trust = segs[s].adapt && pnorm > 0 && unorm > 0 ? pnorm / unorm : 1.0;
    segs[s].trust = (float)trust;
    j.k[s].lamb_step = (float)(cfg->lr * trust);
  }
  /* pass 2: the steps */
  nb = number_blocks(&j, ELEM_BLOCK);
  bert_parallel_for(nb, bert_parallel_grain(ELEM_BLOCK), lamb_apply_multi_blocks, &j);
  multi_free(&j);
  return 0;
}
/* }====================================================== */

/* {====================================================== SGD */

static void sgd_blocks(void *ctx, int64_t lo, int64_t hi) {
  const optim_job *j = ctx;
  int64_t a, e;
  elem_bounds(j, lo, hi, ELEM_BLOCK, &a, &e);
  float *restrict pp = j->p, *restrict bp = j->buf;
  const float *restrict gp = j->g;
  const float lr = j->lr, wd = j->wd, mu = j->mu, damp = j->damp;
  if (bp == NULL) {
    #pragma omp simd
    for (int64_t i = a; i < e; i++) {
      float d = gp[i] + wd * pp[i];
      pp[i] = pp[i] - lr * d;
    }
  } else {
    const int first = j->first, nesterov = j->nesterov;
    #pragma omp simd
    for (int64_t i = a; i < e; i++) {
      float d = gp[i] + wd * pp[i];
      float b = first ? d : mu * bp[i] + damp * d;
      bp[i] = b;
      d = nesterov ? d + mu * b : b;
      pp[i] = pp[i] - lr * d;
    }
  }
}

int cpu_sgd_step(bert_tensor *p, const bert_tensor *g, bert_tensor *buf, const bert_sgd_cfg *cfg) {
  int use_buf = cfg->momentum != 0;
  const int64_t n = bert_numel(p);
  const float lr = (float)cfg->lr, wd = (float)cfg->weight_decay;
  const float mu = (float)cfg->momentum, damp = (float)(1.0 - cfg->dampening);
  float *restrict pp = bert_f32(p);
  const float *restrict gp = bert_f32(g);

  optim_job j = {.p = pp, .g = gp, .buf = use_buf ? bert_f32(buf) : NULL, .n = n, .lr = lr, .wd = wd,
                 .mu = mu, .damp = damp, .first = cfg->first, .nesterov = cfg->nesterov};
  bert_parallel_for((n + ELEM_BLOCK - 1) / ELEM_BLOCK, bert_parallel_grain(ELEM_BLOCK), sgd_blocks, &j);
  if (use_buf) bert_bump_version(buf);
  bert_bump_version(p);
  return 0;
}
/* }====================================================== */

/* {====================================================== clipping */

/* Sum of x[i]^2 over [lo, hi): SUMSQ_LANES independent float partial sums
** over chunks of SUMSQ_CHUNK elements (each lane adds only
** SUMSQ_CHUNK/SUMSQ_LANES squares in float), each chunk then added in
** double.  The lanes vectorise without reassociation, and several
** accumulators hide the add latency, so this runs at memory speed. */
#define SUMSQ_LANES 32
#define SUMSQ_CHUNK 2048
static double sumsq_range(const float *restrict x, int64_t lo, int64_t hi) {
  double s = 0;
  int64_t i = lo;
  for (; i + SUMSQ_CHUNK <= hi; i += SUMSQ_CHUNK) {
    float acc[SUMSQ_LANES] = {0};
    for (int64_t j = i; j < i + SUMSQ_CHUNK; j += SUMSQ_LANES)
      for (int l = 0; l < SUMSQ_LANES; l++) acc[l] += x[j + l] * x[j + l];
    double part = 0;
    for (int l = 0; l < SUMSQ_LANES; l++) part += (double)acc[l];
    s += part;
  }
  for (; i < hi; i++) s += (double)x[i] * (double)x[i];
  return s;
}

static void sumsq_blocks(void *ctx, int64_t lo, int64_t hi) {
  const optim_job *j = ctx;
  for (int64_t b = lo; b < hi; b++) {
    int64_t a = b * SUM_BLOCK, e = a + SUM_BLOCK < j->n ? a + SUM_BLOCK : j->n;
    j->sums[b] = sumsq_range(j->g, a, e);
  }
}

static void scale_blocks(void *ctx, int64_t lo, int64_t hi) {
  const optim_job *j = ctx;
  int64_t a, e;
  elem_bounds(j, lo, hi, ELEM_BLOCK, &a, &e);
  float *restrict x = j->p;
  const float f = j->lr;
  #pragma omp simd
  for (int64_t i = a; i < e; i++) x[i] *= f;
}

int cpu_sumsq(const bert_tensor *t, double *out) {
  const int64_t n = bert_numel(t);
  const int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  if (!bert_is_contiguous(t)) {   /* rare: a strided view; one thread, flat order */
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
      double x = bert_get_flat(t, i);
      s += x * x;
    }
    *out = s;
    return 0;
  }
  double *sums = NULL;
  if (nb > 0 && (sums = malloc((size_t)nb * sizeof *sums)) == NULL) {
    bert_set_error("sumsq: out of memory");
    return -1;
  }
  const float *x = bert_f32(t);
  optim_job j = {.g = x, .sums = sums, .n = n};
  bert_parallel_for(nb, 1, sumsq_blocks, &j);
  double s = 0;
  for (int64_t b = 0; b < nb; b++) s += sums[b];
  free(sums);
  *out = s;
  return 0;
}

int cpu_scale_(bert_tensor *t, double s) {
  const int64_t n = bert_numel(t);
  const float f = (float)s;
  float *restrict x = bert_f32(t);
  optim_job j = {.p = x, .n = n, .lr = f};   /* lr holds the factor */
  bert_parallel_for((n + ELEM_BLOCK - 1) / ELEM_BLOCK, bert_parallel_grain(ELEM_BLOCK), scale_blocks, &j);
  bert_bump_version(t);
  return 0;
}
/* }====================================================== */

/* {====================================================== zeroing gradients
** With streaming stores, which write whole cache lines without first
** reading them: the gradients are not read again before the next backward,
** so there is nothing to keep in the cache (measured against memset in
** docs/speed.md, "The optimizer"). */

#define ZERO_BLOCK 65536
typedef struct { float *x; int64_t n; } zero_job;

static void zero_blocks(void *ctx, int64_t lo, int64_t hi) {
  const zero_job *j = ctx;
  int64_t i = lo * ZERO_BLOCK, e = hi * ZERO_BLOCK < j->n ? hi * ZERO_BLOCK : j->n;
  float *x = j->x;
#if defined(__AVX512F__)
  for (; i < e && ((uintptr_t)(x + i) & 63) != 0; i++) x[i] = 0.0f;
  for (; i + 16 <= e; i += 16) _mm512_stream_ps(x + i, _mm512_setzero_ps());
  _mm_sfence();   /* streaming stores are weakly ordered: publish before the pool's barrier */
#elif defined(__AVX__)
  for (; i < e && ((uintptr_t)(x + i) & 31) != 0; i++) x[i] = 0.0f;
  for (; i + 8 <= e; i += 8) _mm256_stream_ps(x + i, _mm256_setzero_ps());
  _mm_sfence();
#endif
  if (i < e) memset(x + i, 0, (size_t)(e - i) * sizeof(float));
}

int cpu_zero_grad_(bert_tensor *t) {
  const int64_t n = bert_numel(t);
  zero_job j = {bert_f32(t), n};
  bert_parallel_for((n + ZERO_BLOCK - 1) / ZERO_BLOCK, 1, zero_blocks, &j);
  bert_bump_version(t);
  return 0;
}
/* }====================================================== */
