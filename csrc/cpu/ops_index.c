/*
** Indexing and joining: index_select, gather, scatter_add, cat, stack;
** arange and eye.  Index tensors are int32 holding 0-based positions,
** like token ids.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/ops.h"

static int check_index_dtype(const char *fname, const bert_tensor *index) {
  if (index->dtype != BERT_I32) {
    bert_set_error("%s: index must be an int32 tensor, got %s", fname, bert_dtype_name(index->dtype));
    return -1;
  }
  return 0;
}

static int check_dim(const char *fname, const bert_tensor *t, int dim) {
  char b[160];
  if (dim < 0 || dim >= t->ndim) {
    bert_set_error("%s: dimension %d out of range for a %dD tensor %s", fname, dim + 1, t->ndim,
                   bert_shape_str(b, sizeof b, t->ndim, t->shape));
    return -1;
  }
  return 0;
}

/* Reads every index once, checking range before any work is done. */
static int check_index_range(const char *fname, const bert_tensor *index, int64_t size, int dim) {
  int64_t n = bert_numel(index);
  for (int64_t i = 0; i < n; i++) {
    double v = bert_get_flat(index, i);
    if (v < 0 || v >= (double)size) {
      bert_set_error("%s: index %lld out of range [0, %lld) for dimension %d", fname,
                     (long long)v, (long long)size, dim + 1);
      return -1;
    }
  }
  return 0;
}

bert_tensor *bert_index_select(const bert_tensor *t, int dim, const bert_tensor *index) {
  char b[160];
  if (check_dim("index_select", t, dim) || check_index_dtype("index_select", index)) return NULL;
  if (index->ndim != 1) {
    bert_set_error("index_select: index must be 1-D, got %s",
                   bert_shape_str(b, sizeof b, index->ndim, index->shape));
    return NULL;
  }
  if (check_index_range("index_select", index, t->shape[dim], dim)) return NULL;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = index->shape[0];
  bert_tensor *out = bert_tensor_empty(t->dtype, t->ndim, shape);
  if (out == NULL) return NULL;
  /* copy slice by slice: out.select(dim, i) = t.select(dim, index[i]) */
  for (int64_t i = 0; i < index->shape[0]; i++) {
    int64_t k = (int64_t)bert_get_flat(index, i);
    bert_tensor *src = bert_select((bert_tensor *)t, dim, k);
    bert_tensor *dst = bert_select(out, dim, i);
    int rc = (src && dst) ? bert_copy_(dst, src) : -1;
    bert_tensor_release(src);
    bert_tensor_release(dst);
    if (rc != 0) { bert_tensor_release(out); return NULL; }
  }
  return out;
}

/* index must have t's rank and fit inside t on every dim but `dim`. */
static int check_gather_shapes(const char *fname, const bert_tensor *t, int dim,
                               const bert_tensor *index, const bert_tensor *src) {
  char b1[160], b2[160];
  if (index->ndim != t->ndim) goto bad;
  for (int d = 0; d < t->ndim; d++) {
    if (d != dim && index->shape[d] > t->shape[d]) goto bad;
    if (src && index->shape[d] > src->shape[d]) goto bad;
  }
  if (src && src->ndim != t->ndim) goto bad;
  return 0;
bad:
  bert_set_error("%s: index %s does not fit the tensor %s along dimensions other than %d%s", fname,
                 bert_shape_str(b1, sizeof b1, index->ndim, index->shape),
                 bert_shape_str(b2, sizeof b2, t->ndim, t->shape), dim + 1,
                 src ? " (or the source)" : "");
  return -1;
}

/* Offset in t of the element that index position i (flat) points at. */
static int64_t gather_offset(const bert_tensor *t, const bert_tensor *index, int dim,
                             int64_t i, int64_t k) {
  int64_t off = t->offset;
  for (int d = index->ndim - 1; d >= 0; d--) {
    int64_t c = i % index->shape[d];
    i /= index->shape[d];
    off += (d == dim ? k : c) * t->stride[d];
  }
  return off;
}

bert_tensor *bert_gather(const bert_tensor *t, int dim, const bert_tensor *index) {
  if (check_dim("gather", t, dim) || check_index_dtype("gather", index) ||
      check_gather_shapes("gather", t, dim, index, NULL) ||
      check_index_range("gather", index, t->shape[dim], dim))
    return NULL;
  bert_tensor *out = bert_tensor_empty(t->dtype, index->ndim, index->shape);
  if (out == NULL) return NULL;
  int64_t n = bert_numel(index);
  #pragma omp parallel for if (n >= BERT_PARALLEL_MIN)
  for (int64_t i = 0; i < n; i++) {
    int64_t k = (int64_t)bert_get_flat(index, i);
    int64_t off = gather_offset(t, index, dim, i, k);
    if (t->dtype == BERT_F32) bert_f32(out)[i] = ((float *)t->storage->data)[off];
    else bert_i32(out)[i] = ((int32_t *)t->storage->data)[off];
  }
  return out;
}

int bert_scatter_add_(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src) {
  if (check_dim("scatter_add", dst, dim) || check_index_dtype("scatter_add", index) ||
      check_gather_shapes("scatter_add", dst, dim, index, src) ||
      check_index_range("scatter_add", index, dst->shape[dim], dim))
    return -1;
  if (src->dtype != dst->dtype) {
    bert_set_error("scatter_add: source is %s but the tensor is %s",
                   bert_dtype_name(src->dtype), bert_dtype_name(dst->dtype));
    return -1;
  }
  if (bert_has_overlap(dst)) {
    bert_set_error("scatter_add: cannot write in place into an expanded tensor");
    return -1;
  }
  int64_t n = bert_numel(index);
  /* sequential: several positions may hit one destination element */
  for (int64_t i = 0; i < n; i++) {
    int64_t k = (int64_t)bert_get_flat(index, i);
    int64_t off = gather_offset(dst, index, dim, i, k);
    int64_t soff = gather_offset(src, index, -1, i, 0);
    if (dst->dtype == BERT_F32)
      ((float *)dst->storage->data)[off] += ((float *)src->storage->data)[soff];
    else
      ((int32_t *)dst->storage->data)[off] = (int32_t)((uint32_t)((int32_t *)dst->storage->data)[off] +
                                                      (uint32_t)((int32_t *)src->storage->data)[soff]);
  }
  return 0;
}

bert_tensor *bert_cat(bert_tensor *const *ts, int n, int dim) {
  char b1[160], b2[160];
  if (n <= 0) { bert_set_error("cat: expects a non-empty list of tensors"); return NULL; }
  const bert_tensor *f = ts[0];
  if (check_dim("cat", f, dim)) return NULL;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, f->shape, sizeof shape);
  shape[dim] = 0;
  for (int i = 0; i < n; i++) {
    const bert_tensor *t = ts[i];
    int ok = t->ndim == f->ndim && t->dtype == f->dtype;
    for (int d = 0; ok && d < f->ndim; d++) ok = d == dim || t->shape[d] == f->shape[d];
    if (!ok) {
      bert_set_error("cat: tensor %d (%s %s) does not match tensor 1 (%s %s) outside dimension %d",
                     i + 1, bert_shape_str(b1, sizeof b1, t->ndim, t->shape), bert_dtype_name(t->dtype),
                     bert_shape_str(b2, sizeof b2, f->ndim, f->shape), bert_dtype_name(f->dtype), dim + 1);
      return NULL;
    }
    shape[dim] += t->shape[dim];
  }
  bert_tensor *out = bert_tensor_empty(f->dtype, f->ndim, shape);
  if (out == NULL) return NULL;
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    bert_tensor *slot = bert_narrow(out, dim, at, ts[i]->shape[dim]);
    int rc = slot ? bert_copy_(slot, ts[i]) : -1;
    bert_tensor_release(slot);
    if (rc != 0) { bert_tensor_release(out); return NULL; }
    at += ts[i]->shape[dim];
  }
  return out;
}

bert_tensor *bert_nonzero_flat(const bert_tensor *t) {
  int64_t n = bert_numel(t), count = 0;
  if (n > INT32_MAX) { bert_set_error("nonzero: %lld elements exceed int32 positions", (long long)n); return NULL; }
  for (int64_t i = 0; i < n; i++) count += bert_get_flat(t, i) != 0;
  bert_tensor *out = bert_tensor_empty(BERT_I32, 1, &count);
  if (out == NULL) return NULL;
  int32_t *o = bert_i32(out);
  for (int64_t i = 0, k = 0; i < n; i++)
    if (bert_get_flat(t, i) != 0) o[k++] = (int32_t)i;
  return out;
}

bert_tensor *bert_arange(double start, double stop, double step, bert_dtype dt) {
  if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step)) {
    bert_set_error("arange: invalid range start %g, stop %g, step %g", start, stop, step);
    return NULL;
  }
  double count = ceil((stop - start) / step);
  if (count < 0) count = 0;
  if (count > 1e12) { bert_set_error("arange: %g elements is too many", count); return NULL; }
  int64_t n = (int64_t)count;
  bert_tensor *t = bert_tensor_empty(dt, 1, &n);
  if (t == NULL) return NULL;
  for (int64_t i = 0; i < n; i++) bert_set_flat(t, i, start + (double)i * step);
  return t;
}

bert_tensor *bert_eye(int64_t n, int64_t m, bert_dtype dt) {
  int64_t shape[2] = {n, m};
  bert_tensor *t = bert_tensor_new(dt, 2, shape);
  if (t == NULL) return NULL;
  for (int64_t i = 0; i < n && i < m; i++) bert_set_flat(t, i * m + i, 1);
  return t;
}
