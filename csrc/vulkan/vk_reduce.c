/*
** Reductions and softmax (reduce.comp, reduce_int.comp): sum, mean, max
** and min over a dim or everything (with first indices), softmax and
** log-softmax, sums of squares; rows beyond a dispatch's loop or a binding
** are reduced in slices into partials.
*/
#include "core/ops.h"
#include "vulkan/vk_kernels.h"
#include "vulkan/vk_opcodes.h"

typedef struct { uint32_t R, inner, nout, op, want_idx; float denom; uint32_t int_mode; } red_push;

static int reduce_raw(vkx_bind *bd, int64_t R, int64_t inner, int64_t nout, uint32_t op, int want_idx, double denom,
                      int ints) {
  red_push p = {(uint32_t)R, (uint32_t)inner, (uint32_t)nout, op, (uint32_t)want_idx, (float)denom, (uint32_t)ints};
  uint32_t gx, gy;
  vk_grid_1d((uint64_t)nout, 1, &gx, &gy);
  uint32_t spec[1] = {op};   /* reduce.comp: one pipeline per op */
  return ints ? vkx_dispatch("reduce_int", NULL, 0, 3, bd, &p, sizeof p, gx, gy, 1)
              : vkx_dispatch("reduce", spec, 1, 3, bd, &p, sizeof p, gx, gy, 1);
}

/* The most rows one workgroup reduces (256 invocations, VK_MAX_LOOP each). */
#define RED_MAX_ROWS ((int64_t)256 * VK_MAX_LOOP)

/* x: contiguous [outer, R, inner]; out [outer, inner] (reductions) or like
** x (softmax).  Too large for one binding, or R beyond RED_MAX_ROWS: split
** along outer when one [R, inner] slice fits and R is short enough, else
** (sums, means, sums of squares, max / min without indices) reduce R in
** slices into partials, then the partials (again in slices if need be). */
static int reduce_dispatch(bert_tensor *out, const bert_tensor *x, bert_tensor *idx, int64_t R,
                           int64_t inner, int64_t nout, uint32_t op) {
  int ints = x->dtype == BERT_I32;
  vkx_bind bd[3] = {vk_bind_of(out), vk_bind_of(x), vk_bind_of(idx ? idx : out)};
  if (vk_binds_fit(3, bd) && R <= RED_MAX_ROWS) return reduce_raw(bd, R, inner, nout, op, idx != NULL, (double)R, ints);
  int64_t lim = (int64_t)vk_max_bind() / 4, outer = nout / (inner > 0 ? inner : 1), slice = R * inner;
  int soft = op == RED_SOFTMAX || op == RED_LOG_SOFTMAX;
  int64_t ostep = soft ? slice : inner;
  if (slice <= lim && R <= RED_MAX_ROWS) {
    int64_t oc = lim / slice;
    for (int64_t o0 = 0; o0 < outer; o0 += oc) {
      int64_t n = outer - o0 < oc ? outer - o0 : oc;
      vkx_bind w[3] = {vk_bind_el(out, o0 * ostep, n * ostep), vk_bind_el(x, o0 * slice, n * slice),
                       idx ? vk_bind_el(idx, o0 * inner, n * inner) : vk_bind_el(out, o0 * ostep, 1)};
      if (reduce_raw(w, R, inner, n * inner, op, idx != NULL, (double)R, ints) != 0) return -1;
    }
    return 0;
  }
  if (soft || idx != NULL || inner > lim) {
    bert_set_error("%s: vulkan: a reduction of %lld x %lld elements with indices (or a softmax) does not split "
                   "into windows", soft ? "softmax" : "max", (long long)R, (long long)inner);
    return -1;
  }
  int64_t rc = lim / inner;
  if (rc > RED_MAX_ROWS) rc = RED_MAX_ROWS;
  int64_t nch = (R + rc - 1) / rc, pn = nch * inner;
  bert_tensor *P = bert_vk_empty(x->dtype, 1, &pn);
  if (P == NULL) return -1;
  uint32_t part = op == RED_MEAN ? RED_SUM : op, fin = op == RED_SUMSQ ? RED_SUM : op;
  int rc_ = 0;
  for (int64_t o = 0; o < outer && rc_ == 0; o++) {
    for (int64_t c = 0; c < nch && rc_ == 0; c++) {
      int64_t r0 = c * rc, n = R - r0 < rc ? R - r0 : rc;
      vkx_bind w[3] = {vk_bind_el(P, c * inner, inner), vk_bind_el(x, o * slice + r0 * inner, n * inner), vk_bind_el(P, 0, 1)};
      rc_ = reduce_raw(w, n, inner, inner, part, 0, (double)n, ints);
    }
    if (rc_ != 0) break;
    /* the partials [nch, inner]: one more pass (itself split when long) */
    bert_tensor *ov = bert_tensor_view_of(out->storage, out->dtype, out->offset + o * inner, 1, &inner, NULL);
    rc_ = ov ? reduce_dispatch(ov, P, NULL, nch, inner, inner, fin == RED_MEAN ? RED_SUM : fin) : -1;
    if (rc_ == 0 && fin == RED_MEAN) {   /* the mean of R rows, from their sum */
      vkx_bind m[3] = {vk_bind_of(ov), vk_bind_of(ov), vk_bind_of(ov)};
      rc_ = reduce_raw(m, 1, inner, inner, RED_MEAN, 0, (double)R, ints);
    }
    bert_tensor_release(ov);
  }
  bert_tensor_release(P);
  return rc_;
}

bert_tensor *vk_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                       int correction, bert_tensor **indices) {
  const char *name = bert_redop_name(op);
  (void)correction;
  if (op == BERT_ARGMAX || op == BERT_ARGMIN) {   /* the indices of max / min */
    bert_tensor *idx = NULL, *v;
    if (dim < 0) {
      int64_t n = bert_numel(t);
      bert_tensor *flat = bert_reshape_copy((bert_tensor *)t, 1, &n);
      v = flat ? vk_reduce(op == BERT_ARGMAX ? BERT_MAX : BERT_MIN, flat, 0, 0, 0, &idx) : NULL;
      bert_tensor_release(flat);
    } else {
      v = vk_reduce(op == BERT_ARGMAX ? BERT_MAX : BERT_MIN, t, dim, keepdim, 0, &idx);
    }
    bert_tensor_release(v);
    if (v == NULL) { bert_tensor_release(idx); return NULL; }
    return idx;
  }
  if (op != BERT_SUM && op != BERT_MEAN && op != BERT_MAX && op != BERT_MIN) {
    bert_set_error("%s: not supported on device vulkan (move the tensor with t:to(\"cpu\"))", name);
    return NULL;
  }
  if (t->dtype == BERT_I32 && op == BERT_MEAN) {   /* a float result: the mean of the floats */
    bert_tensor *f = bert_vk_to_dtype(t, BERT_F32), *idx = NULL;
    bert_tensor *r = f ? vk_reduce(op, f, dim, keepdim, correction, indices ? &idx : NULL) : NULL;
    bert_tensor_release(f);
    if (r && op != BERT_MEAN) {
      bert_tensor *ri = bert_vk_to_dtype(r, BERT_I32);
      bert_tensor_release(r);
      r = ri;
    }
    if (r == NULL) { bert_tensor_release(idx); return NULL; }
    if (indices) *indices = idx;
    return r;
  }

  int64_t outer, R, inner;   /* dim and an empty max / min checked by core/ops.c */
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  int64_t shape[BERT_MAX_DIMS];
  int nd = 0;
  if (dim >= 0)
    for (int d = 0; d < t->ndim; d++) {
      if (d != dim) shape[nd++] = t->shape[d];
      else if (keepdim) shape[nd++] = 1;
    }
  bert_tensor *x = bert_contiguous((bert_tensor *)t);
  if (x == NULL) return NULL;
  bert_tensor *out = bert_vk_empty(t->dtype, nd, shape);   /* sum, max, min keep int32 */
  bert_tensor *idx = (indices && dim >= 0 && (op == BERT_MAX || op == BERT_MIN)) ? bert_vk_empty(BERT_I32, nd, shape) : NULL;
  int64_t nout = outer * inner;
  if (out == NULL || (indices && dim >= 0 && (op == BERT_MAX || op == BERT_MIN) && idx == NULL) ||
      (nout > 0 && reduce_dispatch(out, x, idx, R, inner, nout, (uint32_t)op) != 0)) {
    bert_tensor_release(out);
    bert_tensor_release(idx);
    bert_tensor_release(x);
    return NULL;
  }
  bert_tensor_release(x);
  if (indices) *indices = idx;
  return out;
}

/* out[slot] = sum of squares of t (any float32 device tensor). */
int bert_vk_sumsq_into(const bert_tensor *t, bert_tensor *out, int64_t slot) {
  bert_tensor *x = bert_contiguous((bert_tensor *)t);
  if (x == NULL) return -1;
  int64_t one = 1;
  bert_tensor *o = bert_tensor_view_of(out->storage, BERT_F32, out->offset + slot, 1, &one, NULL);
  int rc = o ? 0 : -1;
  if (o && bert_numel(x) == 0) rc = bert_vk_fill_(o, 0);
  else if (o) rc = reduce_dispatch(o, x, NULL, bert_numel(x), 1, 1, RED_SUMSQ);
  bert_tensor_release(o);
  bert_tensor_release(x);
  return rc;
}

bert_tensor *vk_softmax(const bert_tensor *t, int dim, int log) {
  int64_t outer, R, inner;   /* dim checked by core/ops.c */
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  /* int32 input: in float32, as on the cpu */
  bert_tensor *x = t->dtype == BERT_F32 ? bert_contiguous((bert_tensor *)t) : bert_vk_to_dtype(t, BERT_F32);
  if (x == NULL) return NULL;
  bert_tensor *out = bert_vk_empty(BERT_F32, t->ndim, t->shape);
  if (out && outer * inner * R > 0 && reduce_dispatch(out, x, NULL, R, inner, outer * inner, log ? RED_LOG_SOFTMAX : RED_SOFTMAX) != 0) {
    bert_tensor_release(out);
    out = NULL;
  }
  bert_tensor_release(x);
  return out;
}

/* One reduction into a device slot, one read back. */
int vk_sumsq(const bert_tensor *t, double *out) {
  int64_t one = 1;
  bert_tensor *part = bert_vk_empty(BERT_F32, 1, &one);
  int rc = part ? bert_vk_sumsq_into(t, part, 0) : -1;
  if (rc == 0) *out = bert_vk_get_flat(part, 0);
  bert_tensor_release(part);
  return rc;
}
