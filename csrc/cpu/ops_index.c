/*
** CPU kernels of indexing and joining: index_select, index_add_, gather,
** scatter_add_, cat, nonzero.  Arguments were checked by the front-ends
** (core/ops.c): index tensors are int32 holding in-range 0-based positions.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/ops.h"
#include "core/parallel.h"
#include "cpu/cpu.h"

bert_tensor *cpu_index_select(const bert_tensor *t, int dim, const bert_tensor *index) {
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

typedef struct {
  const bert_tensor *t;
  int dim;
  const bert_tensor *index;
  bert_tensor *out;
} gather_job;

static void gather_range(void *ctx, int64_t lo, int64_t hi) {
  const gather_job *j = ctx;
  const bert_tensor *t = j->t;
  for (int64_t i = lo; i < hi; i++) {
    int64_t k = (int64_t)bert_get_flat(j->index, i);
    int64_t off = gather_offset(t, j->index, j->dim, i, k);
    if (t->dtype == BERT_F32) bert_f32(j->out)[i] = ((float *)t->storage->data)[off];
    else bert_i32(j->out)[i] = ((int32_t *)t->storage->data)[off];
  }
}

bert_tensor *cpu_gather(const bert_tensor *t, int dim, const bert_tensor *index) {
  bert_tensor *out = bert_tensor_empty(t->dtype, index->ndim, index->shape);
  if (out == NULL) return NULL;
  int64_t n = bert_numel(index);
  gather_job job = {t, dim, index, out};
  bert_parallel_for(n, bert_parallel_grain(1), gather_range, &job);
  return out;
}

int cpu_scatter_add_(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src) {
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

bert_tensor *cpu_nonzero(const bert_tensor *t) {
  int64_t n = bert_numel(t), count = 0;
  for (int64_t i = 0; i < n; i++) count += bert_get_flat(t, i) != 0;
  bert_tensor *out = bert_tensor_empty(BERT_I32, 1, &count);
  if (out == NULL) return NULL;
  int32_t *o = bert_i32(out);
  for (int64_t i = 0, k = 0; i < n; i++)
    if (bert_get_flat(t, i) != 0) o[k++] = (int32_t)i;
  return out;
}


/* z.select(dim, index[k]) += src.select(dim, k): rows picked several times
** receive the sum (index_select's backward). */
int cpu_index_add_(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src) {
  for (int64_t k = 0; k < index->shape[0]; k++) {
    int64_t row = (int64_t)bert_get_flat(index, k);
    bert_tensor *dst = bert_select(z, dim, row), *s = bert_select((bert_tensor *)src, dim, k);
    bert_tensor *r = (dst && s) ? bert_binary(BERT_ADD, dst, s, 1, dst) : NULL;
    bert_tensor_release(dst);
    bert_tensor_release(s);
    if (r == NULL) return -1;
    bert_tensor_release(r);
  }
  return 0;
}
