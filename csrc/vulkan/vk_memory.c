/*
** Device tensors: storages in device memory (vk_device.c's allocator),
** transfers to and from the host, and the storage-buffer bindings the
** kernels dispatch with.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan/vk_kernels.h"

int bert_vk_available(const char **reason) {
  const char *r = NULL;
  int ok = vkx_init(&r) == 0;
  if (reason) *reason = ok ? NULL : r;
  return ok;
}

int bert_vk_sync(void) { return vkx_flush(); }

void bert_vk_storage_free(bert_storage *s) {
  vkx_alloc_free((vkx_alloc *)s->device);
  bert_mem_account(-(int64_t)s->nbytes);
  s->device = NULL;   /* bert_storage_release frees s itself */
}

/* The backend a new storage points at, found by name in the registry: the
** table lists the kernels, which allocate through here, so this file does
** not name the table itself. */
static const bert_backend *vulkan_backend(void) {
  static const bert_backend *be;
  if (be == NULL) be = bert_backend_find("vulkan");
  return be;
}

static bert_storage *vk_storage(size_t nbytes) {
  const bert_backend *be = vulkan_backend();
  if (be == NULL) { bert_set_error("vulkan: the backend is not registered"); return NULL; }
  vkx_alloc *a = vkx_alloc_new(nbytes);
  if (a == NULL) return NULL;
  bert_storage *s = malloc(sizeof *s);
  if (s == NULL) { vkx_alloc_free(a); bert_set_error("out of memory"); return NULL; }
  memset(s, 0, sizeof *s);
  s->nbytes = nbytes;
  s->refcount = 1;
  s->kind = BERT_STORAGE_DEVICE;
  s->backend = be;
  s->device = a;
  bert_mem_account((int64_t)nbytes);
  return s;
}

/* The shape is checked here: bert.vulkan.empty and zeros reach this from Lua. */
bert_tensor *bert_vk_empty(bert_dtype dt, int ndim, const int64_t *shape) {
  char b[160];
  int64_t n = 1;
  if (ndim < 0 || ndim > BERT_MAX_DIMS) { bert_set_error("vulkan: bad rank %d", ndim); return NULL; }
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (shape[i] > 0 && n > (INT64_C(1) << 40) / shape[i])) {
      bert_set_error("vulkan: invalid shape %s", bert_shape_str(b, sizeof b, ndim, shape));
      return NULL;
    }
    n *= shape[i];
  }
  bert_storage *s = vk_storage((size_t)n * 4);
  if (s == NULL) return NULL;
  bert_tensor *t = bert_tensor_view_of(s, dt, 0, ndim, shape, NULL);
  bert_storage_release(s);
  return t;
}

bert_tensor *bert_vk_zeros(bert_dtype dt, int ndim, const int64_t *shape) {
  bert_tensor *t = bert_vk_empty(dt, ndim, shape);
  if (t && vkx_fill((vkx_alloc *)t->storage->device, 0, t->storage->nbytes, 0) != 0) {
    bert_tensor_release(t);
    return NULL;
  }
  return t;
}

vkx_alloc *vk_alloc_of(const bert_tensor *t) { return (vkx_alloc *)t->storage->device; }

/* The byte range a view touches (strides are never negative). */
vkx_bind vk_bind_of(const bert_tensor *t) {
  int64_t hi = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1) hi += (t->shape[d] - 1) * t->stride[d];
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  vkx_bind b = {vk_alloc_of(t), (size_t)t->offset * 4, n == 0 ? 4 : (size_t)(hi + 1) * 4};
  return b;
}

vkx_bind vk_bind_el(const bert_tensor *t, int64_t off, int64_t n) {
  vkx_bind b = {vk_alloc_of(t), (size_t)(t->offset + off) * 4, (size_t)(n > 0 ? n : 1) * 4};
  return b;
}

/* The device's maxStorageBufferRange, or the range forced for tests, less
** the offset alignment slack. */
size_t vk_max_bind(void) {
  const vkx_info *in = vkx_get_info();
  if (in == NULL) return (size_t)1 << 62;
  return (size_t)(in->max_range - in->offset_align);
}

int vk_binds_fit(int n, const vkx_bind *b) {
  size_t lim = vk_max_bind();
  for (int i = 0; i < n; i++) if (b[i].len > lim) return 0;
  return 1;
}

void vk_grid_1d(uint64_t n, uint32_t wg, uint32_t *gx, uint32_t *gy) {
  uint64_t groups = (n + wg - 1) / wg;
  if (groups == 0) groups = 1;
  *gx = groups < 65535 ? (uint32_t)groups : 65535;
  *gy = (uint32_t)((groups + *gx - 1) / *gx);
}

uint32_t vk_keep_threshold(double p) {
  double t = p * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

bert_tensor *bert_vk_upload(const bert_tensor *t) {
  bert_tensor *c = bert_contiguous((bert_tensor *)t);
  if (c == NULL) return NULL;
  bert_tensor *d = bert_vk_empty(c->dtype, c->ndim, c->shape);
  if (d && vkx_upload(vk_alloc_of(d), 0, bert_data(c), (size_t)bert_numel(c) * 4) != 0) {
    bert_tensor_release(d);
    d = NULL;
  }
  bert_tensor_release(c);
  return d;
}

bert_tensor *bert_vk_download(const bert_tensor *t) {
  bert_tensor *c = bert_contiguous((bert_tensor *)t);   /* on the device */
  if (c == NULL) return NULL;
  bert_tensor *h = bert_tensor_empty(c->dtype, c->ndim, c->shape);
  if (h && vkx_download(vk_alloc_of(c), (size_t)c->offset * 4, bert_data(h), (size_t)bert_numel(c) * 4) != 0) {
    bert_tensor_release(h);
    h = NULL;
  }
  bert_tensor_release(c);
  return h;
}

bert_tensor *bert_vk_on_device(const bert_tensor *t) {
  if (bert_is_host(t)) return bert_vk_upload(t);
  return bert_alias(t);
}

double bert_vk_get_flat(const bert_tensor *t, int64_t i) {
  int64_t off = bert_flat_offset(t, i);
  uint32_t w = 0;
  if (vkx_download(vk_alloc_of(t), (size_t)off * 4, &w, 4) != 0) return NAN;
  if (t->dtype == BERT_I32) return (double)(int32_t)w;
  float f;
  memcpy(&f, &w, 4);
  return f;
}
