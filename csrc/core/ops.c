/*
** Front-ends of the reductions, matmul, indexing and random fills: each
** checks its arguments once, for every backend, then runs the backend's
** kernel (core/backend.h).
*/
#include <math.h>
#include <string.h>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/ops.h"

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

static const char *const redop_names[] = {
#define X(ID, name) #name,
  BERT_REDUCE_OPS(X)
#undef X
};

/* a device's own messages name the reduction as the front-end does */
const char *bert_redop_name(bert_redop op) { return redop_names[op]; }

/* t itself when it is in host memory, else a host copy (new reference). */
static bert_tensor *on_host(const bert_tensor *t) {
  if (bert_is_host(t)) { bert_tensor_retain((bert_tensor *)t); return (bert_tensor *)t; }
  return t->storage->backend->to_host(t);
}

/* {====================================================== reductions, softmax */

bert_tensor *bert_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                         int correction, bert_tensor **indices) {
  char b[160];
  const char *name = redop_names[op];
  const bert_backend *be;
  if (indices) *indices = NULL;
  if (!BERT_DISPATCH(be, REDUCE, name, 1, &t)) return NULL;
  if (dim >= t->ndim) {
    bert_set_error("%s: dimension %d out of range for a %dD tensor %s", name, dim + 1, t->ndim, SHAPE(b, t));
    return NULL;
  }
  int64_t outer, R, inner;
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  int is_ext = op == BERT_MAX || op == BERT_MIN || op == BERT_ARGMAX || op == BERT_ARGMIN;
  if (R == 0 && is_ext) {
    bert_set_error("%s: cannot reduce an empty dimension of %s", name, SHAPE(b, t));
    return NULL;
  }
  return be->reduce(op, t, dim, keepdim, correction, (op == BERT_MAX || op == BERT_MIN) ? indices : NULL);
}

bert_tensor *bert_softmax(const bert_tensor *t, int dim, int log_space) {
  char b[160];
  const char *name = log_space ? "log_softmax" : "softmax";
  const bert_backend *be;
  if (!BERT_DISPATCH(be, SOFTMAX, name, 1, &t)) return NULL;
  if (dim < 0 || dim >= t->ndim) {
    bert_set_error("%s: dimension %d out of range for a %dD tensor %s", name, dim + 1, t->ndim, SHAPE(b, t));
    return NULL;
  }
  return be->softmax(t, dim, log_space);
}
/* }====================================================== */

/* {====================================================== matmul */

bert_tensor *bert_matmul(const bert_tensor *a, const bert_tensor *b) {
  char b1[160], b2[160];
  const bert_tensor *args[2] = {a, b};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, MATMUL, "matmul", 2, args)) return NULL;
  if (a->dtype != BERT_F32 || b->dtype != BERT_F32) {
    bert_set_error("matmul: expects float32 tensors, got %s and %s",
                   bert_dtype_name(a->dtype), bert_dtype_name(b->dtype));
    return NULL;
  }
  if (a->ndim == 0 || b->ndim == 0) {
    bert_set_error("matmul: both arguments need at least 1 dimension, got %s @ %s", SHAPE(b1, a), SHAPE(b2, b));
    return NULL;
  }
  int64_t K = a->shape[a->ndim - 1], Kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
  if (K != Kb) {
    bert_set_error("matmul: %s @ %s: inner dimensions differ (%lld vs %lld)", SHAPE(b1, a), SHAPE(b2, b),
                   (long long)K, (long long)Kb);
    return NULL;
  }
  int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0, nbd;
  int64_t batch[BERT_MAX_DIMS];
  if (bert_broadcast_shape(na, a->shape, nb, b->shape, &nbd, batch) != 0) {
    bert_set_error("matmul: %s @ %s: batch dimensions cannot be broadcast", SHAPE(b1, a), SHAPE(b2, b));
    return NULL;
  }
  if (nbd + 2 > BERT_MAX_DIMS) { bert_set_error("matmul: too many dimensions"); return NULL; }
  return be->matmul(a, b);
}
/* }====================================================== */

/* {====================================================== indexing */

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
    bert_set_error("%s: dimension %d out of range for a %dD tensor %s", fname, dim + 1, t->ndim, SHAPE(b, t));
    return -1;
  }
  return 0;
}

/* Every index in [0, size), read once (on the host) before any work. */
static int check_index_range(const char *fname, const bert_tensor *index, int64_t size, int dim) {
  bert_tensor *h = on_host(index);
  if (h == NULL) return -1;
  int64_t n = bert_numel(h);
  int rc = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = bert_get_flat(h, i);
    if (v < 0 || v >= (double)size) {
      bert_set_error("%s: index %lld out of range [0, %lld) for dimension %d", fname,
                     (long long)v, (long long)size, dim + 1);
      rc = -1;
      break;
    }
  }
  bert_tensor_release(h);
  return rc;
}

bert_tensor *bert_index_select(const bert_tensor *t, int dim, const bert_tensor *index) {
  char b[160];
  const bert_tensor *args[2] = {t, index};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, INDEX_SELECT, "index_select", 2, args)) return NULL;
  if (check_dim("index_select", t, dim) || check_index_dtype("index_select", index)) return NULL;
  if (index->ndim != 1) {
    bert_set_error("index_select: index must be 1-D, got %s", SHAPE(b, index));
    return NULL;
  }
  if (check_index_range("index_select", index, t->shape[dim], dim)) return NULL;
  return be->index_select(t, dim, index);
}

int bert_index_add_(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src) {
  char b[160];
  const bert_tensor *args[3] = {z, index, src};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, INDEX_ADD, "index_add_", 3, args)) return -1;
  if (check_dim("index_add_", z, dim) || check_index_dtype("index_add_", index)) return -1;
  if (index->ndim != 1 || src->ndim != z->ndim || src->shape[dim] != index->shape[0]) {
    bert_set_error("index_add_: index %s must be 1-D with one entry per slice of the source", SHAPE(b, index));
    return -1;
  }
  if (check_index_range("index_add_", index, z->shape[dim], dim)) return -1;
  if (be->index_add_(z, dim, index, src) != 0) return -1;
  bert_bump_version(z);
  return 0;
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
                 SHAPE(b1, index), SHAPE(b2, t), dim + 1, src ? " (or the source)" : "");
  return -1;
}

bert_tensor *bert_gather(const bert_tensor *t, int dim, const bert_tensor *index) {
  const bert_tensor *args[2] = {t, index};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, GATHER, "gather", 2, args)) return NULL;
  if (check_dim("gather", t, dim) || check_index_dtype("gather", index) ||
      check_gather_shapes("gather", t, dim, index, NULL) ||
      check_index_range("gather", index, t->shape[dim], dim))
    return NULL;
  return be->gather(t, dim, index);
}

int bert_scatter_add_(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src) {
  const bert_tensor *args[3] = {dst, index, src};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, SCATTER_ADD, "scatter_add", 3, args)) return -1;
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
  if (be->scatter_add_(dst, dim, index, src) != 0) return -1;
  bert_bump_version(dst);
  return 0;
}

/* The cat entry of every backend: the output allocated on the inputs'
** device, each input copied into its slot by that device's copy_ (a
** strided copy), so a device needs no kernel of its own for it. */
bert_tensor *bert_cat_by_copies(bert_tensor *const *ts, int n, int dim) {
  const bert_tensor *f = ts[0];
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, f->shape, sizeof shape);
  shape[dim] = 0;
  for (int i = 0; i < n; i++) shape[dim] += ts[i]->shape[dim];
  bert_tensor *out = bert_backend_of(f)->empty(f->dtype, f->ndim, shape);
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

bert_tensor *bert_cat(bert_tensor *const *ts, int n, int dim) {
  char b1[160], b2[160];
  if (n <= 0) { bert_set_error("cat: expects a non-empty list of tensors"); return NULL; }
  const bert_backend *be;
  if (!BERT_DISPATCH(be, CAT, "cat", n, (const bert_tensor *const *)ts)) return NULL;
  const bert_tensor *f = ts[0];
  if (check_dim("cat", f, dim)) return NULL;
  for (int i = 0; i < n; i++) {
    const bert_tensor *t = ts[i];
    int ok = t->ndim == f->ndim && t->dtype == f->dtype;
    for (int d = 0; ok && d < f->ndim; d++) ok = d == dim || t->shape[d] == f->shape[d];
    if (!ok) {
      bert_set_error("cat: tensor %d (%s %s) does not match tensor 1 (%s %s) outside dimension %d",
                     i + 1, SHAPE(b1, t), bert_dtype_name(t->dtype), SHAPE(b2, f), bert_dtype_name(f->dtype),
                     dim + 1);
      return NULL;
    }
  }
  return be->cat(ts, n, dim);
}

bert_tensor *bert_nonzero_flat(const bert_tensor *t) {
  const bert_backend *be;
  if (!BERT_DISPATCH(be, NONZERO, "nonzero", 1, &t)) return NULL;
  int64_t n = bert_numel(t);
  if (n > INT32_MAX) { bert_set_error("nonzero: %lld elements exceed int32 positions", (long long)n); return NULL; }
  return be->nonzero(t);
}

bert_tensor *bert_sort_indices(const bert_tensor *t, int dim, int64_t k, int descending) {
  char b[160];
  const bert_backend *be;
  if (!BERT_DISPATCH(be, SORT_INDICES, "sort_indices", 1, &t)) return NULL;
  if (check_dim("sort_indices", t, dim)) return NULL;
  int64_t n = t->shape[dim];
  if (k < 0 || k > n) {
    bert_set_error("sort_indices: k = %lld out of range [0, %lld] for dimension %d of %s", (long long)k,
                   (long long)n, dim + 1, SHAPE(b, t));
    return NULL;
  }
  if (n > INT32_MAX) {
    bert_set_error("sort_indices: dimension %d has %lld elements, more than int32 positions hold", dim + 1,
                   (long long)n);
    return NULL;
  }
  return be->sort_indices(t, dim, k, descending);
}
/* }====================================================== */

/* {====================================================== creation (host memory) */

bert_tensor *bert_arange(double start, double stop, double step, bert_dtype dt) {
  if (step == 0 || !isfinite(start) || !isfinite(stop) || !isfinite(step)) {
    bert_set_error("arange: invalid range start %g, stop %g, step %g", start, stop, step);
    return NULL;
  }
  double count = ceil((stop - start) / step);
  if (count < 0) count = 0;
  if (count > 1e12) { bert_set_error("arange: %g elements is too many", count); return NULL; }
  int64_t n = (int64_t)count;
  double last = start + (double)(n > 0 ? n - 1 : 0) * step;
  if (dt == BERT_I32 && (fmax(fabs(start), fabs(last)) > 2147483647.0)) {
    bert_set_error("arange: values up to %g do not fit int32", fabs(start) > fabs(last) ? start : last);
    return NULL;
  }
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
/* }====================================================== */
