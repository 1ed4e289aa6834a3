/*
** Optimizer kernels (optim.h): AdamW, LAMB, SGD with momentum, and the
** sum of squares / in-place scale behind global-norm clipping.
**
** Each update is one pass over memory (LAMB: two, the second recomputing
** the update instead of storing it), parallel over elements with OpenMP
** and written so that GCC vectorises the element loop.  Scalars that
** depend only on the step are computed once, in double, outside the loop.
*/
#include <math.h>
#include <stdlib.h>

#include "autograd.h"   /* bert_bump_version */
#include "optim.h"

/* sqrtf here never sees a negative argument (v >= 0), but with errno
** semantics GCC keeps a scalar branch to the library call and will not
** vectorise the AdamW loop; dropping errno for this file restores it. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-math-errno")
#endif

/* Reductions sum blocks of this many elements each (fixed, so the
** result does not depend on the number of threads). */
#define SUM_BLOCK 65536

/* {====================================================== argument checks */

static const char *shape_s(char *buf, size_t n, const bert_tensor *t) {
  return bert_shape_str(buf, n, t->ndim, t->shape);
}

/* t must be a live, contiguous float32 tensor; when ref is given, with
** as many elements as ref. */
static int check_f32(const char *fn, const char *what, const bert_tensor *t,
                     const char *refname, const bert_tensor *ref) {
  char a[128], b[128];
  if (t->storage == NULL || t->storage->data == NULL) {
    bert_set_error("%s: %s has been freed", fn, what);
    return -1;
  }
  if (t->dtype != BERT_F32) {
    bert_set_error("%s: %s %s is %s, expected float32", fn, what, shape_s(a, sizeof a, t),
                   bert_dtype_name(t->dtype));
    return -1;
  }
  if (!bert_is_contiguous(t)) {
    bert_set_error("%s: %s %s is not contiguous", fn, what, shape_s(a, sizeof a, t));
    return -1;
  }
  if (ref != NULL && bert_numel(t) != bert_numel(ref)) {
    bert_set_error("%s: %s %s has %lld elements but %s %s has %lld", fn, what,
                   shape_s(a, sizeof a, t), (long long)bert_numel(t), refname,
                   shape_s(b, sizeof b, ref), (long long)bert_numel(ref));
    return -1;
  }
  return 0;
}

/* The kernels use restrict pointers: their operands must not share memory. */
static int overlaps(const bert_tensor *x, const bert_tensor *y) {
  const char *xs = (const char *)bert_f32(x), *ys = (const char *)bert_f32(y);
  size_t xn = (size_t)bert_numel(x) * sizeof(float), yn = (size_t)bert_numel(y) * sizeof(float);
  if (xn == 0 || yn == 0) return 0;
  return xs < ys + yn && ys < xs + xn;
}

static int check_distinct(const char *fn, int n, const bert_tensor *const *ts,
                          const char *const *names) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (ts[i] != NULL && ts[j] != NULL && overlaps(ts[i], ts[j])) {
        bert_set_error("%s: %s and %s share memory", fn, names[i], names[j]);
        return -1;
      }
  return 0;
}

static int check_adam(const char *fn, const bert_tensor *p, const bert_tensor *g,
                      const bert_tensor *m, const bert_tensor *v, const bert_adam_cfg *cfg) {
  if (check_f32(fn, "param", p, NULL, NULL) || check_f32(fn, "grad", g, "param", p) ||
      check_f32(fn, "exp_avg", m, "param", p) || check_f32(fn, "exp_avg_sq", v, "param", p))
    return -1;
  const bert_tensor *ts[4] = {p, g, m, v};
  static const char *const names[4] = {"param", "grad", "exp_avg", "exp_avg_sq"};
  if (check_distinct(fn, 4, ts, names)) return -1;
  if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1)) {
    bert_set_error("%s: betas (%g, %g) must lie in [0, 1)", fn, cfg->beta1, cfg->beta2);
    return -1;
  }
  if (cfg->step < 1) {
    bert_set_error("%s: step %lld must be >= 1", fn, (long long)cfg->step);
    return -1;
  }
  return 0;
}
/* }====================================================== */

/* {====================================================== Adam family */

/* Per-step scalars shared by AdamW and LAMB, rounded to float once. */
typedef struct {
  float b1, c1, b2, c2;    /* m = b1*m + c1*g;  v = b2*v + c2*g*g */
  float inv_bc1;           /* 1/(1 - b1^t) or 1 */
  float inv_sqrt_bc2;      /* 1/sqrt(1 - b2^t) or 1 */
  float eps;
} adam_scalars;

static adam_scalars adam_prepare(const bert_adam_cfg *cfg) {
  adam_scalars s;
  s.b1 = (float)cfg->beta1;
  s.c1 = (float)(1.0 - cfg->beta1);
  s.b2 = (float)cfg->beta2;
  s.c2 = (float)(1.0 - cfg->beta2);
  s.inv_bc1 = 1.0f;
  s.inv_sqrt_bc2 = 1.0f;
  if (cfg->bias_correction) {
    double t = (double)cfg->step;
    s.inv_bc1 = (float)(1.0 / (1.0 - pow(cfg->beta1, t)));
    s.inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(cfg->beta2, t)));
  }
  s.eps = (float)cfg->eps;
  return s;
}

int bert_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                    const bert_adam_cfg *cfg) {
  if (check_adam("adamw", p, g, m, v, cfg)) return -1;
  const int64_t n = bert_numel(p);
  adam_scalars s = adam_prepare(cfg);
  const float decay = (float)(1.0 - cfg->lr * cfg->weight_decay);
  const float step_size = (float)(cfg->lr * (cfg->bias_correction
                                  ? 1.0 / (1.0 - pow(cfg->beta1, (double)cfg->step)) : 1.0));
  float *restrict pp = bert_f32(p);
  const float *restrict gp = bert_f32(g);
  float *restrict mp = bert_f32(m);
  float *restrict vp = bert_f32(v);
  const float b1 = s.b1, c1 = s.c1, b2 = s.b2, c2 = s.c2, isb2 = s.inv_sqrt_bc2, eps = s.eps;

  #pragma omp parallel for simd if (n >= BERT_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float gi = gp[i];
    float mi = b1 * mp[i] + c1 * gi;
    float vi = b2 * vp[i] + c2 * (gi * gi);
    mp[i] = mi;
    vp[i] = vi;
    pp[i] = pp[i] * decay - step_size * (mi / (sqrtf(vi) * isb2 + eps));
  }
  bert_bump_version(p);
  bert_bump_version(m);
  bert_bump_version(v);
  return 0;
}

/* The LAMB update direction for one element, after m and v are updated. */
static inline float lamb_dir(float pi, float mi, float vi, float ibc1, float isb2,
                             float eps, float wd) {
  return (mi * ibc1) / (sqrtf(vi) * isb2 + eps) + wd * pi;
}

int bert_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                   const bert_adam_cfg *cfg, int adapt, double *trust_out) {
  if (check_adam("lamb", p, g, m, v, cfg)) return -1;
  const int64_t n = bert_numel(p);
  adam_scalars s = adam_prepare(cfg);
  const float b1 = s.b1, c1 = s.c1, b2 = s.b2, c2 = s.c2;
  const float ibc1 = s.inv_bc1, isb2 = s.inv_sqrt_bc2, eps = s.eps;
  const float wd = (float)cfg->weight_decay;
  float *restrict pp = bert_f32(p);
  const float *restrict gp = bert_f32(g);
  float *restrict mp = bert_f32(m);
  float *restrict vp = bert_f32(v);

  /* pass 1: moments, and per-block sums of p^2 and u^2 */
  const int64_t nb = (n + SUM_BLOCK - 1) / SUM_BLOCK;
  double *sums = NULL;
  if (nb > 0) {
    sums = malloc((size_t)nb * 2 * sizeof *sums);
    if (sums == NULL) {
      bert_set_error("lamb: out of memory");
      return -1;
    }
  }
  #pragma omp parallel for if (n >= BERT_PARALLEL_MIN && nb > 1) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    int64_t lo = b * SUM_BLOCK, hi = lo + SUM_BLOCK < n ? lo + SUM_BLOCK : n;
    double sp = 0, su = 0;
    #pragma omp simd reduction(+:sp, su)
    for (int64_t i = lo; i < hi; i++) {
      float gi = gp[i];
      float mi = b1 * mp[i] + c1 * gi;
      float vi = b2 * vp[i] + c2 * (gi * gi);
      mp[i] = mi;
      vp[i] = vi;
      float pi = pp[i];
      float u = lamb_dir(pi, mi, vi, ibc1, isb2, eps, wd);
      sp += (double)pi * (double)pi;
      su += (double)u * (double)u;
    }
    sums[2 * b] = sp;
    sums[2 * b + 1] = su;
  }
  double sp = 0, su = 0;
  for (int64_t b = 0; b < nb; b++) {
    sp += sums[2 * b];
    su += sums[2 * b + 1];
  }
  free(sums);
  double pnorm = sqrt(sp), unorm = sqrt(su);
  double trust = adapt && pnorm > 0 && unorm > 0 ? pnorm / unorm : 1.0;
  if (trust_out != NULL) *trust_out = trust;

  /* pass 2: the step, recomputing u from the (unchanged) p and new m, v */
  const float step = (float)(cfg->lr * trust);
  #pragma omp parallel for simd if (n >= BERT_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float pi = pp[i];
    pp[i] = pi - step * lamb_dir(pi, mp[i], vp[i], ibc1, isb2, eps, wd);
  }
  bert_bump_version(p);
  bert_bump_version(m);
  bert_bump_version(v);
  return 0;
}
/* }====================================================== */

/* {====================================================== SGD */

int bert_sgd_step(bert_tensor *p, const bert_tensor *g, bert_tensor *buf, const bert_sgd_cfg *cfg) {
  static const char *fn = "sgd";
  if (check_f32(fn, "param", p, NULL, NULL) || check_f32(fn, "grad", g, "param", p)) return -1;
  int use_buf = cfg->momentum != 0;
  if (use_buf) {
    if (buf == NULL) {
      bert_set_error("%s: momentum %g needs a momentum buffer", fn, cfg->momentum);
      return -1;
    }
    if (check_f32(fn, "momentum_buffer", buf, "param", p)) return -1;
  }
  const bert_tensor *ts[3] = {p, g, use_buf ? buf : NULL};
  static const char *const names[3] = {"param", "grad", "momentum_buffer"};
  if (check_distinct(fn, 3, ts, names)) return -1;
  if (cfg->nesterov && (cfg->momentum <= 0 || cfg->dampening != 0)) {
    bert_set_error("%s: nesterov momentum requires momentum > 0 and dampening 0", fn);
    return -1;
  }
  const int64_t n = bert_numel(p);
  const float lr = (float)cfg->lr, wd = (float)cfg->weight_decay;
  const float mu = (float)cfg->momentum, damp = (float)(1.0 - cfg->dampening);
  float *restrict pp = bert_f32(p);
  const float *restrict gp = bert_f32(g);

  if (!use_buf) {
    #pragma omp parallel for simd if (n >= BERT_PARALLEL_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
      float d = gp[i] + wd * pp[i];
      pp[i] = pp[i] - lr * d;
    }
  } else {
    float *restrict bp = bert_f32(buf);
    const int first = cfg->first, nesterov = cfg->nesterov;
    #pragma omp parallel for simd if (n >= BERT_PARALLEL_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) {
      float d = gp[i] + wd * pp[i];
      float b = first ? d : mu * bp[i] + damp * d;
      bp[i] = b;
      d = nesterov ? d + mu * b : b;
      pp[i] = pp[i] - lr * d;
    }
    bert_bump_version(buf);
  }
  bert_bump_version(p);
  return 0;
}
/* }====================================================== */

/* {====================================================== clipping */

int bert_sumsq(const bert_tensor *t, double *out) {
  if (t->storage == NULL || t->storage->data == NULL) {
    bert_set_error("sumsq: tensor has been freed");
    return -1;
  }
  if (t->dtype != BERT_F32) {
    char a[128];
    bert_set_error("sumsq: tensor %s is %s, expected float32", shape_s(a, sizeof a, t),
                   bert_dtype_name(t->dtype));
    return -1;
  }
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
  const float *restrict x = bert_f32(t);
  #pragma omp parallel for if (n >= BERT_PARALLEL_MIN && nb > 1) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    int64_t lo = b * SUM_BLOCK, hi = lo + SUM_BLOCK < n ? lo + SUM_BLOCK : n;
    double s = 0;
    #pragma omp simd reduction(+:s)
    for (int64_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
    sums[b] = s;
  }
  double s = 0;
  for (int64_t b = 0; b < nb; b++) s += sums[b];
  free(sums);
  *out = s;
  return 0;
}

int bert_scale_(bert_tensor *t, double s) {
  if (check_f32("scale_", "tensor", t, NULL, NULL)) return -1;
  const int64_t n = bert_numel(t);
  const float f = (float)s;
  float *restrict x = bert_f32(t);
  #pragma omp parallel for simd if (n >= BERT_PARALLEL_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] *= f;
  bert_bump_version(t);
  return 0;
}
/* }====================================================== */
