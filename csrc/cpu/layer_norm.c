/*
** layer_norm on the CPU: y = LN(x + residual) over the last dim, one pass
** per row; stats [2, R] keeps mean and rstd.  Backward recomputes x_hat
** from the inputs and the saved mean / rstd.
**
** Row sums run in LN_LANES independent lanes (double lanes for the
** forward's mean and variance, float lanes for the backward's two dot
** products), added up in a fixed order at the end of the row: the lanes
** vectorise without reassociating anything (no -ffast-math), and the
** result depends neither on the thread count nor on the ISA.
**
** rms_norm, its kin, lives here too with the same lanes: y = x * rstd *
** weight, rstd = 1 / sqrt(mean(x^2) + eps) per row, saved as [R].
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

typedef struct {
  int64_t H;
  const float *X, *Rs, *Gm, *DY, *mean, *rstd;
  float *DX, *part;   /* part: per block [dgamma H | dbeta H], or NULL */
} ln_backward_job;

#define LN_LANES 16

static inline double sum_lanes_d(const double *a) {
  double s[LN_LANES / 2];
  for (int l = 0; l < LN_LANES / 2; l++) s[l] = a[l] + a[l + LN_LANES / 2];
  for (int w = LN_LANES / 4; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) s[l] += s[l + w];
  return s[0];
}

static inline float sum_lanes_f(const float *a) {
  float s[LN_LANES / 2];
  for (int l = 0; l < LN_LANES / 2; l++) s[l] = a[l] + a[l + LN_LANES / 2];
  for (int w = LN_LANES / 4; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) s[l] += s[l + w];
  return s[0];
}

/* The same as ln_backward_rows without row buffers (their allocation
** failed): x_hat and dy * gamma recomputed in the dx loop, serial sums. */
static void ln_backward_rows_unbuffered(const ln_backward_job *jb, int64_t lo, int64_t hi, float *dg, float *db) {
  const int64_t H = jb->H;
  const float *X = jb->X, *Rs = jb->Rs, *Gm = jb->Gm, *DY = jb->DY;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = X + r * H, *rr = Rs ? Rs + r * H : NULL, *dy = DY + r * H;
    float mu = jb->mean[r], rs = jb->rstd[r];
    float sg = 0, sgx = 0;
    for (int64_t j = 0; j < H; j++) {
      float xj = ((rr ? xr[j] + rr[j] : xr[j]) - mu) * rs;
      float g = Gm ? dy[j] * Gm[j] : dy[j];
      sg += g;
      sgx += g * xj;
      if (dg) { dg[j] += dy[j] * xj; db[j] += dy[j]; }
    }
    if (jb->DX) {
      float a = sg / (float)H, c = sgx / (float)H;
      float *dxr = jb->DX + r * H;
      for (int64_t j = 0; j < H; j++) {
        float xj = ((rr ? xr[j] + rr[j] : xr[j]) - mu) * rs;
        float g = Gm ? dy[j] * Gm[j] : dy[j];
        dxr[j] = rs * (g - a - xj * c);
      }
    }
  }
}

/* One row's first pass, with the operands' presence constant (the caller
** instantiates each combination): x_hat and dy * gamma into xh and gy, this
** block's dgamma / dbeta, and the two row sums in independent lanes, all
** in one loop so that the row's inputs stream from memory once. */
static inline __attribute__((always_inline)) void ln_backward_row_sums(
    const float *restrict xr, const float *restrict rr, const float *restrict dy, const float *restrict Gm,
    float *restrict dg, float *restrict db, float *restrict xh, float *restrict gy, int64_t H, float mu,
    float rs, float *sg, float *sgx, const int has_r, const int has_g, const int has_d) {
  float ag[LN_LANES] = {0}, agx[LN_LANES] = {0};
  int64_t j = 0;
  for (; j + LN_LANES <= H; j += LN_LANES)
    for (int l = 0; l < LN_LANES; l++) {
      const int64_t k = j + l;
      float xv = ((has_r ? xr[k] + rr[k] : xr[k]) - mu) * rs;
      float gv = has_g ? dy[k] * Gm[k] : dy[k];
      xh[k] = xv;
      gy[k] = gv;
      if (has_d) { dg[k] += dy[k] * xv; db[k] += dy[k]; }
      ag[l] += gv;
      agx[l] += gv * xv;
    }
  for (int l = 0; j < H; j++, l++) {
    float xv = ((has_r ? xr[j] + rr[j] : xr[j]) - mu) * rs;
    float gv = has_g ? dy[j] * Gm[j] : dy[j];
    xh[j] = xv;
    gy[j] = gv;
    if (has_d) { dg[j] += dy[j] * xv; db[j] += dy[j]; }
    ag[l] += gv;
    agx[l] += gv * xv;
  }
  *sg = sum_lanes_f(ag);
  *sgx = sum_lanes_f(agx);
}

static void ln_backward_rows(void *p, int64_t block, int64_t lo, int64_t hi) {
  const ln_backward_job *jb = p;
  const int64_t H = jb->H;
  const float *X = jb->X, *Rs = jb->Rs, *Gm = jb->Gm, *DY = jb->DY;
  float *DX = jb->DX;
  float *dg = jb->part ? jb->part + (size_t)block * 2 * (size_t)H : NULL;
  float *db = dg ? dg + H : NULL;
  /* x_hat and dy * gamma of one row, kept for the dx loop */
  float *xh = malloc((size_t)(H > 0 ? H : 1) * 2 * sizeof *xh);
  if (xh == NULL) {   /* no error path from a pool task: recompute instead of keeping */
    ln_backward_rows_unbuffered(jb, lo, hi, dg, db);
    return;
  }
  float *gy = xh + H;
  const int mode = (Rs != NULL) | (Gm != NULL) << 1 | (dg != NULL) << 2;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = X + r * H, *rr = Rs ? Rs + r * H : NULL, *dy = DY + r * H;
    const float mu = jb->mean[r], rs = jb->rstd[r];
    float sg, sgx;
    switch (mode) {
#define LN_CASE(m)                                                                                    \
      case m:                                                                                         \
        ln_backward_row_sums(xr, rr, dy, Gm, dg, db, xh, gy, H, mu, rs, &sg, &sgx, (m) & 1, (m) >> 1 & 1, \
                             (m) >> 2 & 1);                                                           \
        break;
      LN_CASE(0) LN_CASE(1) LN_CASE(2) LN_CASE(3) LN_CASE(4) LN_CASE(5) LN_CASE(6) LN_CASE(7)
#undef LN_CASE
      default: sg = sgx = 0; break;
    }
    if (DX) {
      const float a = sg / (float)H, c = sgx / (float)H;
      float *dxr = DX + r * H;
      #pragma omp simd
      for (int64_t k = 0; k < H; k++) dxr[k] = rs * (gy[k] - a - xh[k] * c);
    }
  }
  free(xh);
}

/* in = {x, gamma, beta, residual} as the caller passed them */
int cpu_layer_norm_backward(bert_tensor *const in[4], const bert_tensor *x, const bert_tensor *res,
                            const bert_tensor *gamma, const bert_tensor *stats, const bert_tensor *gout) {
  bert_tensor *xin = in[0], *gin = in[1], *bin = in[2], *rin = in[3];
  int64_t H = x->shape[x->ndim - 1], R = stats->shape[1];
  const float *X = bert_f32(x), *Rs = res ? bert_f32(res) : NULL;
  const float *Gm = gamma ? bert_f32(gamma) : NULL, *DY = bert_f32(gout);
  const float *mean = bert_f32(stats), *rstd = mean + R;
  int want_x = (xin && xin->requires_grad) || (rin && rin->requires_grad);
  int want_g = gin && gin->requires_grad, want_b = bin && bin->requires_grad;
  bert_tensor *dx = NULL;
  float *part = NULL;
  int64_t nt = bert_reduce_blocks(R, bert_parallel_grain(H));
  int rc = -1;
  if (want_x && (dx = bert_tensor_empty(BERT_F32, x->ndim, x->shape)) == NULL) goto done;
  if (want_g || want_b) {
    part = calloc((size_t)nt * 2 * (size_t)H, sizeof(float));
    if (part == NULL) { bert_set_error("layer_norm backward: out of memory"); goto done; }
  }
  float *DX = dx ? bert_f32(dx) : NULL;
  ln_backward_job job = {H, X, Rs, Gm, DY, mean, rstd, DX, part};
  bert_parallel_blocks(R, bert_parallel_grain(H), ln_backward_rows, &job);
  if (want_g || want_b) {
    bert_tensor *dgt = bert_tensor_empty(BERT_F32, 1, &H), *dbt = bert_tensor_empty(BERT_F32, 1, &H);
    if (dgt == NULL || dbt == NULL) { bert_tensor_release(dgt); bert_tensor_release(dbt); goto done; }
    bert_sum_blocks(part, nt, 2 * H, H, bert_f32(dgt));       /* each block: [dgamma ; dbeta] */
    bert_sum_blocks(part + H, nt, 2 * H, H, bert_f32(dbt));
    int e1 = bert_accumulate_grad_steal(gin, dgt);
    int e2 = bert_accumulate_grad_steal(bin, dbt);
    if (e1 || e2) goto done;
  }
  if (dx) {
    if (bert_accumulate_grad(rin, dx) != 0) goto done;
    bert_tensor *g = dx;
    dx = NULL;
    if (bert_accumulate_grad_steal(xin, g) != 0) goto done;
  }
  rc = 0;
done:
  bert_tensor_release(dx);
  free(part);
  return rc;
}

typedef struct {
  int64_t H;
  double eps;
  const float *X, *Rs, *G, *B;
  float *Y, *mean, *rstd;
} ln_forward_job;

static void ln_forward_rows(void *p, int64_t lo, int64_t hi) {
  const ln_forward_job *jf = p;
  const int64_t H = jf->H;
  const float *G = jf->G, *B = jf->B;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = jf->X + r * H, *rr = jf->Rs ? jf->Rs + r * H : NULL;
    float *yr = jf->Y + r * H;
    /* s = x + residual into y, then its mean and variance in double lanes */
    if (rr) {
      #pragma omp simd
      for (int64_t j = 0; j < H; j++) yr[j] = xr[j] + rr[j];
    } else {
      memcpy(yr, xr, (size_t)H * sizeof *yr);
    }
    double acc[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= H; j += LN_LANES)
      for (int l = 0; l < LN_LANES; l++) acc[l] += (double)yr[j + l];
    for (int l = 0; j < H; j++, l++) acc[l] += (double)yr[j];
    const float mu = (float)(sum_lanes_d(acc) / (double)H);
    double accv[LN_LANES] = {0};
    for (j = 0; j + LN_LANES <= H; j += LN_LANES)
      for (int l = 0; l < LN_LANES; l++) {
        double dv = (double)(yr[j + l] - mu);
        accv[l] += dv * dv;
      }
    for (int l = 0; j < H; j++, l++) {
      double dv = (double)(yr[j] - mu);
      accv[l] += dv * dv;
    }
    const float rs = (float)(1.0 / sqrt(sum_lanes_d(accv) / (double)H + jf->eps));
    if (G && B) {
      #pragma omp simd
      for (int64_t k = 0; k < H; k++) yr[k] = (yr[k] - mu) * rs * G[k] + B[k];
    } else {
      for (int64_t k = 0; k < H; k++) {
        float v = (yr[k] - mu) * rs;
        if (G) v *= G[k];
        if (B) v += B[k];
        yr[k] = v;
      }
    }
    jf->mean[r] = mu;
    jf->rstd[r] = rs;
  }
}

bert_tensor *cpu_layer_norm(const bert_tensor *x, const bert_tensor *gamma, const bert_tensor *beta,
                           double eps, const bert_tensor *res, bert_tensor **stats_out) {
  int64_t H = x->shape[x->ndim - 1];
  bert_tensor *y = NULL, *st = NULL;
  int64_t R = H > 0 ? bert_numel(x) / H : 0;
  int64_t sshape[2] = {2, R};
  y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  st = bert_tensor_empty(BERT_F32, 2, sshape);
  if (y == NULL || st == NULL) { bert_tensor_release(y); bert_tensor_release(st); return NULL; }
  const float *X = bert_f32(x), *Rs = res ? bert_f32(res) : NULL;
  const float *G = gamma ? bert_f32(gamma) : NULL, *B = beta ? bert_f32(beta) : NULL;
  float *Y = bert_f32(y), *mean = bert_f32(st), *rstd = mean + R;
  ln_forward_job job = {H, eps, X, Rs, G, B, Y, mean, rstd};
  bert_parallel_for(R, bert_parallel_grain(H), ln_forward_rows, &job);
  *stats_out = st;
  return y;
}

/* {====================================================== RMS norm */

typedef struct {
  int64_t H;
  double eps;
  const float *X, *W;
  float *Y, *rstd;
} rms_forward_job;

static void rms_forward_rows(void *p, int64_t lo, int64_t hi) {
  const rms_forward_job *jf = p;
  const int64_t H = jf->H;
  const float *W = jf->W;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = jf->X + r * H;
    float *yr = jf->Y + r * H;
    double acc[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= H; j += LN_LANES)
      for (int l = 0; l < LN_LANES; l++) acc[l] += (double)xr[j + l] * xr[j + l];
    for (int l = 0; j < H; j++, l++) acc[l] += (double)xr[j] * xr[j];
    const float rs = (float)(1.0 / sqrt(sum_lanes_d(acc) / (double)H + jf->eps));
    #pragma omp simd
    for (int64_t k = 0; k < H; k++) yr[k] = xr[k] * rs * W[k];
    jf->rstd[r] = rs;
  }
}

bert_tensor *cpu_rms_norm(const bert_tensor *x, const bert_tensor *weight, double eps, bert_tensor **rstd_out) {
  int64_t H = x->shape[x->ndim - 1];
  int64_t R = H > 0 ? bert_numel(x) / H : 0;
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape), *st = bert_tensor_empty(BERT_F32, 1, &R);
  if (y == NULL || st == NULL) { bert_tensor_release(y); bert_tensor_release(st); return NULL; }
  rms_forward_job job = {H, eps, bert_f32(x), bert_f32(weight), bert_f32(y), bert_f32(st)};
  bert_parallel_for(R, bert_parallel_grain(H), rms_forward_rows, &job);
  *rstd_out = st;
  return y;
}

typedef struct {
  int64_t H;
  const float *X, *W, *DY, *rstd;
  float *DX, *part;   /* part: per block dweight [H], or NULL */
} rms_backward_job;

/* With x_hat = x * rs and g = dy * w: dx = rs * (g - x_hat * mean(g * x_hat)),
** dweight = sum over rows of dy * x_hat.  The row sum in float lanes as
** layer norm's backward; x_hat and g recomputed in the dx loop. */
static void rms_backward_rows(void *p, int64_t block, int64_t lo, int64_t hi) {
  const rms_backward_job *jb = p;
  const int64_t H = jb->H;
  const float *W = jb->W;
  float *dw = jb->part ? jb->part + (size_t)block * (size_t)H : NULL;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = jb->X + r * H, *dy = jb->DY + r * H;
    const float rs = jb->rstd[r];
    if (dw)
      for (int64_t k = 0; k < H; k++) dw[k] += dy[k] * (xr[k] * rs);
    if (jb->DX == NULL) continue;
    float agx[LN_LANES] = {0};
    int64_t j = 0;
    for (; j + LN_LANES <= H; j += LN_LANES)
      for (int l = 0; l < LN_LANES; l++) agx[l] += dy[j + l] * W[j + l] * (xr[j + l] * rs);
    for (int l = 0; j < H; j++, l++) agx[l] += dy[j] * W[j] * (xr[j] * rs);
    const float c = sum_lanes_f(agx) / (float)H;
    float *dxr = jb->DX + r * H;
    #pragma omp simd
    for (int64_t k = 0; k < H; k++) dxr[k] = rs * (dy[k] * W[k] - (xr[k] * rs) * c);
  }
}

/* in = {x, weight} as the caller passed them */
int cpu_rms_norm_backward(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *weight,
                          const bert_tensor *rstd, const bert_tensor *gout) {
  bert_tensor *xin = in[0], *win = in[1];
  int64_t H = x->shape[x->ndim - 1], R = rstd->shape[0];
  int want_x = xin && xin->requires_grad, want_w = win && win->requires_grad;
  int64_t nt = bert_reduce_blocks(R, bert_parallel_grain(H));
  int rc = -1;
  bert_tensor *dx = NULL;
  float *part = NULL;
  if (want_x && (dx = bert_tensor_empty(BERT_F32, x->ndim, x->shape)) == NULL) goto done;
  if (want_w && (part = calloc((size_t)nt * (size_t)H, sizeof(float))) == NULL) {
    bert_set_error("rms_norm backward: out of memory");
    goto done;
  }
  rms_backward_job job = {H, bert_f32(x), bert_f32(weight), bert_f32(gout), bert_f32(rstd),
                          dx ? bert_f32(dx) : NULL, part};
  bert_parallel_blocks(R, bert_parallel_grain(H), rms_backward_rows, &job);
  if (want_w) {
    bert_tensor *dw = bert_tensor_empty(BERT_F32, 1, &H);
    if (dw == NULL) goto done;
    bert_sum_blocks(part, nt, H, H, bert_f32(dw));
    if (bert_accumulate_grad_steal(win, dw) != 0) goto done;
  }
  if (dx) {
    bert_tensor *g = dx;
    dx = NULL;
    if (bert_accumulate_grad_steal(xin, g) != 0) goto done;
  }
  rc = 0;
done:
  bert_tensor_release(dx);
  free(part);
  return rc;
}
/* }====================================================== */
