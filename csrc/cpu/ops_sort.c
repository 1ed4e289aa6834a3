/*
** The CPU kernel of sort_indices (core/ops.c checks the arguments): the
** int32 positions (0-based) that order each row along one dimension, or
** its k largest / smallest.  The values come from a gather of
** these positions in Lua (t:topk, t:sort), so the gradient flows through
** gather's backward and this op needs none.  Ties keep the lower position
** first (a stable order); NaN counts as larger than every number, as in
** PyTorch.
*/
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/cpu.h"

typedef struct { double v; int32_t i; } sort_item;

static int is_nan(double v) { return v != v; }

/* descending: larger first; NaN first.  Ties: lower position first. */
static int cmp_desc(const void *pa, const void *pb) {
  const sort_item *a = pa, *b = pb;
  int na = is_nan(a->v), nb = is_nan(b->v);
  if (na != nb) return na ? -1 : 1;
  if (!na && a->v != b->v) return a->v > b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* ascending: smaller first; NaN last.  Ties: lower position first. */
static int cmp_asc(const void *pa, const void *pb) {
  const sort_item *a = pa, *b = pb;
  int na = is_nan(a->v), nb = is_nan(b->v);
  if (na != nb) return na ? 1 : -1;
  if (!na && a->v != b->v) return a->v < b->v ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

typedef struct {
  const bert_tensor *t;
  bert_tensor *out;
  int64_t R, inner, n, k;
  int descending;
  _Atomic int failed;
} sort_job;

static void sort_rows(void *ctx, int64_t lo, int64_t hi) {
  sort_job *jb = ctx;
  const int64_t R = jb->R, inner = jb->inner, n = jb->n, k = jb->k;
  sort_item *items = malloc(sizeof(sort_item) * (size_t)n);
  if (items == NULL) { atomic_store(&jb->failed, 1); return; }
  for (int64_t r = lo; r < hi; r++) {
    int64_t o = r / inner, in = r % inner;
    for (int64_t j = 0; j < n; j++) {
      /* the logical flat index of element (o, j, in) in [outer, R, inner] */
      items[j].v = bert_get_flat(jb->t, (o * R + j) * inner + in);
      items[j].i = (int32_t)j;
    }
    qsort(items, (size_t)n, sizeof(sort_item), jb->descending ? cmp_desc : cmp_asc);
    int32_t *dst = bert_i32(jb->out);
    for (int64_t j = 0; j < k; j++) dst[(o * k + j) * inner + in] = items[j].i;
  }
  free(items);
}

bert_tensor *cpu_sort_indices(const bert_tensor *t, int dim, int64_t k, int descending) {
  int64_t n = t->shape[dim];   /* dim and k checked by the core (bert_sort_indices) */
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  shape[dim] = k;
  bert_tensor *out = bert_tensor_empty(BERT_I32, t->ndim, shape);
  if (out == NULL) return NULL;
  int64_t outer, R, inner;
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  int64_t rows = outer * inner;
  if (rows == 0 || k == 0) return out;
  sort_job job = {t, out, R, inner, n, k, descending, 0};
  bert_parallel_for(rows, bert_parallel_grain(n), sort_rows, &job);
  int failed = atomic_load(&job.failed);
  if (failed) {
    bert_tensor_release(out);
    bert_set_error("sort: out of memory for a row of %lld elements", (long long)n);
    return NULL;
  }
  return out;
}
