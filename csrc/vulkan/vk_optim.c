/*
** The fused optimizer steps (adamw.comp, lamb.comp) over the flat buffers
** of a model, in chunks within the binding range.
*/
#include <math.h>

#include "vulkan/vk_kernels.h"

/* Adam's bias corrections (shapes, dtypes and hyperparameters are checked
** by core/optim.c). */
static void bias_corrections(const bert_adam_cfg *cfg, double *bc1, double *bc2) {
  *bc1 = *bc2 = 1.0;
  if (cfg->bias_correction) {
    *bc1 = 1.0 - pow(cfg->beta1, (double)cfg->step);
    *bc2 = 1.0 - pow(cfg->beta2, (double)cfg->step);
  }
}

typedef struct { uint32_t n; float b1, c1, b2, c2, isb2, eps, decay, step; } adam_push;

int vk_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v, const bert_adam_cfg *cfg) {
  double bc1, bc2;
  bias_corrections(cfg, &bc1, &bc2);
  int64_t n = bert_numel(p);
  adam_push k = {0, (float)cfg->beta1, (float)(1.0 - cfg->beta1), (float)cfg->beta2, (float)(1.0 - cfg->beta2),
                 (float)(1.0 / sqrt(bc2)), (float)cfg->eps, (float)(1.0 - cfg->lr * cfg->weight_decay),
                 (float)(cfg->lr / bc1)};
  /* chunks within maxStorageBufferRange (the flat buffers of large models) */
  int64_t chunk = (int64_t)(vk_max_bind() / 4);
  if (chunk > (int64_t)1 << 30) chunk = (int64_t)1 << 30;
  for (int64_t s = 0; s < n; s += chunk) {
    int64_t len = n - s < chunk ? n - s : chunk;
    k.n = (uint32_t)len;
    vkx_bind bd[4] = {{vk_alloc_of(p), (size_t)(p->offset + s) * 4, (size_t)len * 4},
                      {vk_alloc_of(g), (size_t)(g->offset + s) * 4, (size_t)len * 4},
                      {vk_alloc_of(m), (size_t)(m->offset + s) * 4, (size_t)len * 4},
                      {vk_alloc_of(v), (size_t)(v->offset + s) * 4, (size_t)len * 4}};
    uint32_t gx, gy;
    vk_grid_1d((uint64_t)len, 256, &gx, &gy);
    if (vkx_dispatch("adamw", NULL, 0, 4, bd, &k, sizeof k, gx, gy, 1) != 0) return -1;
  }
  p->storage->version++;
  m->storage->version++;
  v->storage->version++;
  return 0;
}

typedef struct {
  uint32_t n, mode, goff, ngroups, adapt;
  float b1, c1, b2, c2, ibc1, isb2, eps, wd, lr;
} lamb_push;

/* LAMB as cpu/optim.c, the trust ratio computed and applied on the device
** (no host round trip per tensor); *trust_out (may be NULL) receives it as a
** one-element device tensor. */
int vk_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v, const bert_adam_cfg *cfg,
                 int adapt, bert_tensor **trust_out) {
  double bc1, bc2;
  bias_corrections(cfg, &bc1, &bc2);
  int64_t n = bert_numel(p);
  int64_t chunk = (int64_t)(vk_max_bind() / 4) / 256 * 256, ngroups = (n + 255) / 256, plen = 4 * ngroups + 1;
  if (chunk > (int64_t)1 << 30) chunk = (int64_t)1 << 30;
  if (plen > chunk) { bert_set_error("lamb: vulkan: %lld elements are too many for one tensor", (long long)n); return -1; }
  bert_tensor *part = bert_vk_empty(BERT_F32, 1, &plen);
  if (part == NULL) return -1;
  lamb_push k = {0, 0, 0, (uint32_t)ngroups, adapt ? 1u : 0u, (float)cfg->beta1, (float)(1.0 - cfg->beta1),
                 (float)cfg->beta2, (float)(1.0 - cfg->beta2), (float)(1.0 / bc1), (float)(1.0 / sqrt(bc2)),
                 (float)cfg->eps, (float)cfg->weight_decay, (float)cfg->lr};
  int rc = 0;
  for (uint32_t mode = 0; mode < 3 && rc == 0; mode++) {
    k.mode = mode;
    for (int64_t s = 0; s < (mode == 1 ? 1 : n) && rc == 0; s += chunk) {
      int64_t len = n - s < chunk ? n - s : chunk;
      k.n = (uint32_t)len;
      k.goff = (uint32_t)(s / 256);
      vkx_bind bd[5] = {vk_bind_el(p, s, len), vk_bind_el(g, s, len), vk_bind_el(m, s, len), vk_bind_el(v, s, len),
                        vk_bind_of(part)};
      uint32_t gx = 1, gy = 1;
      if (mode != 1) vk_grid_1d((uint64_t)len, 256, &gx, &gy);
      rc = vkx_dispatch("lamb", NULL, 0, 5, bd, &k, sizeof k, gx, gy, 1);
    }
  }
  if (rc == 0) {
    p->storage->version++;
    m->storage->version++;
    v->storage->version++;
    if (trust_out && (*trust_out = bert_narrow(part, 0, plen - 1, 1)) == NULL) rc = -1;
  }
  bert_tensor_release(part);
  return rc;
}
