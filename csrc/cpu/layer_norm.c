/*
** layer_norm: y = LN(x + residual) over the last dim, one pass per row.
** Backward recomputes x_hat from the inputs and the saved mean / rstd.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "vulkan/vk.h"
#include "core/autograd.h"
#include "cpu/nn.h"
#include "cpu/nn_internal.h"

/* saved: 0 = x, 1 = residual or (absent), gamma; node->extra = mean[R], rstd[R]
** node->i[0] = R, i[1] = H, i[2] = has residual, i[3] = index of gamma (-1) */
static int layer_norm_backward(bert_node *node, bert_tensor *out, bert_tensor *gout) {
  bert_tensor *xin = node->inputs[0], *gin = node->inputs[1], *bin = node->inputs[2];
  bert_tensor *rin = node->inputs[3];
  int64_t R = node->i[0], H = node->i[1];
  bert_tensor *x = bert_node_saved(node, 0);
  bert_tensor *res = node->i[2] ? bert_node_saved(node, 1) : NULL;
  bert_tensor *gamma = node->i[3] >= 0 ? bert_node_saved(node, (int)node->i[3]) : NULL;
  if (x == NULL || (node->i[2] && res == NULL) || (node->i[3] >= 0 && gamma == NULL)) return -1;
  const float *X = bert_f32(x), *Rs = res ? bert_f32(res) : NULL;
  const float *Gm = gamma ? bert_f32(gamma) : NULL, *DY = bert_f32(gout);
  const float *mean = node->extra, *rstd = mean + R;
  int want_x = (xin && xin->requires_grad) || (rin && rin->requires_grad);
  int want_g = gin && gin->requires_grad, want_b = bin && bin->requires_grad;
  bert_tensor *dx = NULL;
  float *part = NULL;
  int nt = omp_get_max_threads(), rc = -1;
  if (R * H < BERT_PARALLEL_MIN) nt = 1;
  if (want_x && (dx = bert_tensor_empty(BERT_F32, x->ndim, x->shape)) == NULL) goto done;
  if (want_g || want_b) {
    part = calloc((size_t)nt * 2 * (size_t)H, sizeof(float));
    if (part == NULL) { bert_set_error("layer_norm backward: out of memory"); goto done; }
  }
  float *DX = dx ? bert_f32(dx) : NULL;
  #pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num();
    float *dg = part ? part + (size_t)t * 2 * (size_t)H : NULL, *db = dg ? dg + H : NULL;
    #pragma omp for schedule(static)
    for (int64_t r = 0; r < R; r++) {
      const float *xr = X + r * H, *rr = Rs ? Rs + r * H : NULL, *dy = DY + r * H;
      float mu = mean[r], rs = rstd[r];
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
  (void)out;
  return rc;
}

static int check_param(const char *what, bert_tensor *p, bert_tensor *x, int64_t H) {
  char s1[160], s2[160];
  if (p == NULL) return 0;
  if (p->dtype != BERT_F32) {
    bert_set_error("layer_norm: %s must be float32, got %s", what, bert_dtype_name(p->dtype));
    return -1;
  }
  if (p->ndim != 1 || p->shape[0] != H) {
    bert_set_error("layer_norm: %s %s does not match the last dim of input %s (expected [%lld])",
                   what, SHAPE(s1, p), SHAPE(s2, x), (long long)H);
    return -1;
  }
  return 0;
}

bert_tensor *bert_layer_norm(bert_tensor *x_in, bert_tensor *g_in, bert_tensor *b_in, double eps,
                             bert_tensor *r_in) {
  if (bert_is_vk(x_in) || bert_is_vk(g_in) || bert_is_vk(b_in) || bert_is_vk(r_in))
    return bert_vk_layer_norm(x_in, g_in, b_in, eps, r_in);
  char s1[160], s2[160];
  if (x_in->dtype != BERT_F32) {
    bert_set_error("layer_norm: input must be float32, got %s", bert_dtype_name(x_in->dtype));
    return NULL;
  }
  if (x_in->ndim < 1) { bert_set_error("layer_norm: input must have at least 1 dimension"); return NULL; }
  if (!(eps >= 0)) { bert_set_error("layer_norm: eps must be >= 0, got %g", eps); return NULL; }
  int64_t H = x_in->shape[x_in->ndim - 1];
  if (check_param("weight", g_in, x_in, H) || check_param("bias", b_in, x_in, H)) return NULL;
  if (r_in) {
    int same = r_in->ndim == x_in->ndim;
    for (int d = 0; same && d < x_in->ndim; d++) same = r_in->shape[d] == x_in->shape[d];
    if (!same || r_in->dtype != BERT_F32) {
      bert_set_error("layer_norm: residual %s %s must match input %s float32",
                     SHAPE(s1, r_in), bert_dtype_name(r_in->dtype), SHAPE(s2, x_in));
      return NULL;
    }
  }
  bert_tensor *x = bert_contiguous(x_in), *res = r_in ? bert_contiguous(r_in) : NULL;
  bert_tensor *gamma = g_in ? bert_contiguous(g_in) : NULL, *beta = b_in ? bert_contiguous(b_in) : NULL;
  bert_tensor *y = NULL;
  float *stats = NULL;
  if (!x || (r_in && !res) || (g_in && !gamma) || (b_in && !beta)) goto done;
  int64_t R = H > 0 ? bert_numel(x) / H : 0;
  y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  stats = malloc((size_t)(2 * R + 1) * sizeof(float));
  if (y == NULL || stats == NULL) {
    if (stats == NULL) bert_set_error("layer_norm: out of memory");
    bert_tensor_release(y); y = NULL; goto done;
  }
  const float *X = bert_f32(x), *Rs = res ? bert_f32(res) : NULL;
  const float *G = gamma ? bert_f32(gamma) : NULL, *B = beta ? bert_f32(beta) : NULL;
  float *Y = bert_f32(y), *mean = stats, *rstd = stats + R;
  #pragma omp parallel for schedule(static) if (R * H >= BERT_PARALLEL_MIN)
  for (int64_t r = 0; r < R; r++) {
    const float *xr = X + r * H, *rr = Rs ? Rs + r * H : NULL;
    float *yr = Y + r * H;
    double sum = 0;
    for (int64_t j = 0; j < H; j++) {
      float s = rr ? xr[j] + rr[j] : xr[j];
      yr[j] = s;
      sum += s;
    }
    float mu = (float)(sum / (double)H);
    double var = 0;
    for (int64_t j = 0; j < H; j++) { double dv = yr[j] - mu; var += dv * dv; }
    float rs = (float)(1.0 / sqrt(var / (double)H + eps));
    for (int64_t j = 0; j < H; j++) {
      float v = (yr[j] - mu) * rs;
      if (G) v *= G[j];
      if (B) v += B[j];
      yr[j] = v;
    }
    mean[r] = mu;
    rstd[r] = rs;
  }
  bert_tensor *inputs[4] = {x_in, g_in, b_in, r_in};
  if (bert_needs_grad(4, inputs)) {
    bert_node *node = bert_node_new("layer_norm", layer_norm_backward, 4, inputs);
    if (node == NULL) { bert_tensor_release(y); y = NULL; goto done; }
    bert_node_save(node, x);
    node->i[0] = R;
    node->i[1] = H;
    node->i[2] = res != NULL;
    if (res) bert_node_save(node, res);
    node->i[3] = gamma ? node->nsaved : -1;
    if (gamma) bert_node_save(node, gamma);
    node->extra = stats;
    stats = NULL;
    bert_attach(y, node);
  }
done:
  free(stats);
  bert_tensor_release(x);
  bert_tensor_release(res);
  bert_tensor_release(gamma);
  bert_tensor_release(beta);
  return y;
}
