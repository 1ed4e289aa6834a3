/*
** layer_norm on the CPU: y = LN(x + residual) over the last dim, one pass
** per row; stats [2, R] keeps mean and rstd.  Backward recomputes x_hat
** from the inputs and the saved mean / rstd.
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
  float *DX, *part;   /* part: per thread [dgamma H | dbeta H], or NULL */
} ln_backward_job;

static void ln_backward_rows(void *p, int64_t lo, int64_t hi) {
  const ln_backward_job *jb = p;
  const int64_t H = jb->H;
  const float *X = jb->X, *Rs = jb->Rs, *Gm = jb->Gm, *DY = jb->DY;
  float *DX = jb->DX;
  float *dg = jb->part ? jb->part + (size_t)bert_parallel_thread() * 2 * (size_t)H : NULL;
  float *db = dg ? dg + H : NULL;
  for (int64_t r = lo; r < hi; r++) {
    const float *xr = X + r * H, *rr = Rs ? Rs + r * H : NULL, *dy = DY + r * H;
    float mu = jb->mean[r], rs = jb->rstd[r];
    float sg = 0, sgx = 0;
    for (int64_t j = 0; j < H; j++) {
      float xh = ((rr ? xr[j] + rr[j] : xr[j]) - mu) * rs;
      float g = Gm ? dy[j] * Gm[j] : dy[j];
      sg += g;
      sgx += g * xh;
      if (dg) { dg[j] += dy[j] * xh; db[j] += dy[j]; }
    }
    if (DX) {
      float a = sg / (float)H, c = sgx / (float)H;
      float *dxr = DX + r * H;
      for (int64_t j = 0; j < H; j++) {
        float xh = ((rr ? xr[j] + rr[j] : xr[j]) - mu) * rs;
        float g = Gm ? dy[j] * Gm[j] : dy[j];
        dxr[j] = rs * (g - a - xh * c);
      }
    }
  }
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
  int nt = bert_parallel_width(), rc = -1;
  if (want_x && (dx = bert_tensor_empty(BERT_F32, x->ndim, x->shape)) == NULL) goto done;
  if (want_g || want_b) {
    part = calloc((size_t)nt * 2 * (size_t)H, sizeof(float));
    if (part == NULL) { bert_set_error("layer_norm backward: out of memory"); goto done; }
  }
  float *DX = dx ? bert_f32(dx) : NULL;
  ln_backward_job job = {H, X, Rs, Gm, DY, mean, rstd, DX, part};
  bert_parallel_for(R, bert_parallel_grain(H), ln_backward_rows, &job);
  if (want_g || want_b) {
    bert_tensor *dgt = bert_tensor_empty(BERT_F32, 1, &H), *dbt = bert_tensor_empty(BERT_F32, 1, &H);
    if (dgt == NULL || dbt == NULL) { bert_tensor_release(dgt); bert_tensor_release(dbt); goto done; }
    float *G = bert_f32(dgt), *B = bert_f32(dbt);
    for (int64_t j = 0; j < H; j++) {
      float sg = 0, sb = 0;
      for (int t = 0; t < nt; t++) { sg += part[(size_t)t * 2 * H + j]; sb += part[(size_t)t * 2 * H + H + j]; }
      G[j] = sg;
      B[j] = sb;
    }
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
    double sum = 0;
    for (int64_t j = 0; j < H; j++) {
      float s = rr ? xr[j] + rr[j] : xr[j];
      yr[j] = s;
      sum += s;
    }
    float mu = (float)(sum / (double)H);
    double var = 0;
    for (int64_t j = 0; j < H; j++) { double dv = yr[j] - mu; var += dv * dv; }
    float rs = (float)(1.0 / sqrt(var / (double)H + jf->eps));
    for (int64_t j = 0; j < H; j++) {
      float v = (yr[j] - mu) * rs;
      if (G) v *= G[j];
      if (B) v += B[j];
      yr[j] = v;
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
