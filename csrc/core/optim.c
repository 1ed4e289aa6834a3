/*
** Front-ends of the optimizer kernels (core/optim.h): the argument checks
** every backend shares, then the backend's fused update.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"
#include "core/optim.h"

/* {====================================================== argument checks */

static const char *shape_s(char *buf, size_t n, const bert_tensor *t) {
  return bert_shape_str(buf, n, t->ndim, t->shape);
}

/* t must be a live, contiguous float32 tensor; when ref is given, with
** as many elements as ref. */
static int check_f32(const char *fn, const char *what, const bert_tensor *t,
                     const char *refname, const bert_tensor *ref) {
  char a[128], b[128];
  if (t->storage == NULL || (bert_is_host(t) && t->storage->data == NULL)) {
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
  if (x->storage != y->storage) return 0;
  int64_t xn = bert_numel(x), yn = bert_numel(y);
  if (xn == 0 || yn == 0) return 0;
  return x->offset < y->offset + yn && y->offset < x->offset + xn;
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


int bert_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                    const bert_adam_cfg *cfg) {
  const bert_tensor *ts[4] = {p, g, m, v};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, ADAMW, "adamw", 4, ts)) return -1;
  if (check_adam("adamw", p, g, m, v, cfg)) return -1;
  if (be->adamw_step(p, g, m, v, cfg) != 0) return -1;
  bert_bump_version(p);
  bert_bump_version(m);
  bert_bump_version(v);
  return 0;
}

int bert_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                   const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out) {
  const bert_tensor *ts[4] = {p, g, m, v};
  if (trust_out) *trust_out = NULL;
  const bert_backend *be;
  if (!BERT_DISPATCH(be, LAMB, "lamb", 4, ts)) return -1;
  if (check_adam("lamb", p, g, m, v, cfg)) return -1;
  if (be->lamb_step(p, g, m, v, cfg, adapt, trust_out) != 0) return -1;
  bert_bump_version(p);
  bert_bump_version(m);
  bert_bump_version(v);
  return 0;
}

int bert_sgd_step(bert_tensor *p, const bert_tensor *g, bert_tensor *buf, const bert_sgd_cfg *cfg) {
  static const char *fn = "sgd";
  const bert_tensor *args[3] = {p, g, buf};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, SGD, fn, 3, args)) return -1;
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
  if (be->sgd_step(p, g, buf, cfg) != 0) return -1;
  bert_bump_version(p);
  if (use_buf) bert_bump_version(buf);
  return 0;
}

int bert_sumsq(const bert_tensor *t, double *out) {
  const bert_backend *be;
  if (!BERT_DISPATCH(be, SUMSQ, "sumsq", 1, &t)) return -1;
  if (t->storage == NULL || (bert_is_host(t) && t->storage->data == NULL)) {
    bert_set_error("sumsq: tensor has been freed");
    return -1;
  }
  if (t->dtype != BERT_F32) {
    char a[128];
    bert_set_error("sumsq: tensor %s is %s, expected float32", shape_s(a, sizeof a, t),
                   bert_dtype_name(t->dtype));
    return -1;
  }
  return be->sumsq(t, out);
}

int bert_scale_(bert_tensor *t, double s) {
  const bert_backend *be;
  const bert_tensor *args[1] = {t};
  if (!BERT_DISPATCH(be, SCALE, "scale_", 1, args)) return -1;
  if (check_f32("scale_", "tensor", t, NULL, NULL)) return -1;
  if (be->scale_(t, s) != 0) return -1;
  bert_bump_version(t);
  return 0;
}

int bert_zero_grad_(bert_tensor *t) {
  if (t->storage == NULL || (bert_is_host(t) && t->storage->data == NULL)) {
    bert_set_error("zero_grad_: tensor has been freed");
    return -1;
  }
  if (!bert_is_host(t) || !bert_is_contiguous(t) || t->dtype != BERT_F32) return bert_fill_(t, 0);
  return cpu_zero_grad_(t);
}

/* {====================================================== many tensors in one pass */

typedef struct { const char *lo, *hi; int param, which; } mem_span;

static int span_cmp(const void *a, const void *b) {
  const mem_span *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Checks the 4n tensors of a multi-tensor step and fills segs. */
static int check_multi(const char *fn, int n, bert_tensor *const *p, bert_tensor *const *g,
                       bert_tensor *const *m, bert_tensor *const *v, const double *wd,
                       const int64_t *step, const bert_adam_cfg *cfg, double grad_scale,
                       bert_optim_seg *segs) {
  static const char *const names[4] = {"param", "grad", "exp_avg", "exp_avg_sq"};
  if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1)) {
    bert_set_error("%s: betas (%g, %g) must lie in [0, 1)", fn, cfg->beta1, cfg->beta2);
    return -1;
  }
  if (!(grad_scale > 0) || !isfinite(grad_scale)) {
    bert_set_error("%s: grad_scale %g must be finite and > 0", fn, grad_scale);
    return -1;
  }
  mem_span *spans = malloc((size_t)(n > 0 ? n : 1) * 4 * sizeof *spans);
  if (spans == NULL) {
    bert_set_error("%s: out of memory", fn);
    return -1;
  }
  int ns = 0, rc = 0;
  char what[64];
  for (int i = 0; i < n && rc == 0; i++) {
    const bert_tensor *ts[4] = {p[i], g[i], m[i], v[i]};
    for (int w = 0; w < 4 && rc == 0; w++) {
      snprintf(what, sizeof what, "%s %d", names[w], i + 1);
      if (!bert_is_host(ts[w])) {
        bert_set_error("%s: %s is not on the host (the multi-tensor step is CPU only)", fn, what);
        rc = -1;
      } else if (check_f32(fn, what, ts[w], w ? "param" : NULL, w ? ts[0] : NULL)) {
        rc = -1;
      } else if (bert_numel(ts[w]) > 0) {
        const char *lo = (const char *)bert_f32(ts[w]);
        spans[ns++] = (mem_span){lo, lo + bert_numel(ts[w]) * sizeof(float), i, w};
      }
    }
    if (rc == 0 && step[i] < 1) {
      bert_set_error("%s: step %lld of parameter %d must be >= 1", fn, (long long)step[i], i + 1);
      rc = -1;
    }
    if (rc == 0 && !isfinite(wd[i])) {
      bert_set_error("%s: weight decay %g of parameter %d is not finite", fn, wd[i], i + 1);
      rc = -1;
    }
    if (rc == 0)
      segs[i] = (bert_optim_seg){.p = bert_f32(p[i]), .g = bert_f32(g[i]), .m = bert_f32(m[i]),
                                 .v = bert_f32(v[i]), .n = bert_numel(p[i]),
                                 .weight_decay = wd[i], .step = step[i], .grad_scale = grad_scale};
  }
  /* no two operands may share memory (the kernels use restrict pointers):
  ** sorted by address, each span must end before the next begins */
  if (rc == 0) {
    qsort(spans, (size_t)ns, sizeof *spans, span_cmp);
    for (int k = 0; k + 1 < ns; k++)
      if (spans[k].hi > spans[k + 1].lo) {
        const mem_span *a = &spans[k], *b = &spans[k + 1];
        bert_set_error("%s: %s %d and %s %d share memory", fn, names[a->which], a->param + 1,
                       names[b->which], b->param + 1);
        rc = -1;
        break;
      }
  }
  free(spans);
  return rc;
}

static void bump_multi(int n, bert_tensor *const *p, bert_tensor *const *m, bert_tensor *const *v) {
  for (int i = 0; i < n; i++) {
    bert_bump_version(p[i]);
    bert_bump_version(m[i]);
    bert_bump_version(v[i]);
  }
}

int bert_adamw_multi(int n, bert_tensor *const *p, bert_tensor *const *g, bert_tensor *const *m,
                     bert_tensor *const *v, const double *wd, const int64_t *step,
                     const bert_adam_cfg *cfg, double grad_scale) {
  static const char *fn = "adamw_multi";
  bert_optim_seg *segs = malloc((size_t)(n > 0 ? n : 1) * sizeof *segs);
  if (segs == NULL) {
    bert_set_error("%s: out of memory", fn);
    return -1;
  }
  int rc = check_multi(fn, n, p, g, m, v, wd, step, cfg, grad_scale, segs);
  if (rc == 0) rc = cpu_adamw_multi(segs, n, cfg);
  free(segs);
  if (rc == 0) bump_multi(n, p, m, v);
  return rc;
}

int bert_lamb_multi(int n, bert_tensor *const *p, bert_tensor *const *g, bert_tensor *const *m,
                    bert_tensor *const *v, const double *wd, const int64_t *step, const int *adapt,
                    const bert_adam_cfg *cfg, double grad_scale, double *trust) {
  static const char *fn = "lamb_multi";
  bert_optim_seg *segs = malloc((size_t)(n > 0 ? n : 1) * sizeof *segs);
  if (segs == NULL) {
    bert_set_error("%s: out of memory", fn);
    return -1;
  }
  int rc = check_multi(fn, n, p, g, m, v, wd, step, cfg, grad_scale, segs);
  for (int i = 0; rc == 0 && i < n; i++) segs[i].adapt = adapt[i];
  if (rc == 0) rc = cpu_lamb_multi(segs, n, cfg);
  for (int i = 0; rc == 0 && i < n; i++) trust[i] = segs[i].trust;
  free(segs);
  if (rc == 0) bump_multi(n, p, m, v);
  return rc;
}
/* }====================================================== */
