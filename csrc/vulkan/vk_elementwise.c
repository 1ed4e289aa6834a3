/*
** Elementwise kernels (eltwise.comp, eltwise_int.comp): binary and unary
** ops over broadcast strided views, their derivatives, copies, dtype
** conversions and fills; operands beyond one binding are split into
** windows.
*/
#include <string.h>

#include "core/ops.h"
#include "vulkan/vk_kernels.h"
#include "vulkan/vk_opcodes.h"

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

typedef struct {
  uint32_t n, op, flags;
  float alpha;
  int32_t ialpha;   /* alpha (or the fill value) for int32 operands, saturated */
  uint32_t shape[4];
  int32_t so[4], sa[4], sb[4];
} elt_push;

/* Merges dims that are contiguous for every operand; -1 if more than 4
** remain.  st[k][d]: strides of operand k (0 for broadcast). */
static int collapse(int nd, const int64_t *shape, int nops, int64_t st[][BERT_MAX_DIMS],
                    uint32_t *oshape, int32_t os[][4]) {
  int64_t sh[BERT_MAX_DIMS], s2[3][BERT_MAX_DIMS];
  int m = 0;
  for (int d = 0; d < nd; d++) {
    if (shape[d] == 1) continue;
    if (m > 0) {
      int merge = 1;
      for (int k = 0; k < nops; k++) merge &= s2[k][m - 1] == st[k][d] * shape[d];
      if (merge) {
        sh[m - 1] *= shape[d];
        for (int k = 0; k < nops; k++) s2[k][m - 1] = st[k][d];
        continue;
      }
    }
    sh[m] = shape[d];
    for (int k = 0; k < nops; k++) s2[k][m] = st[k][d];
    m++;
  }
  if (m > 4) return -1;
  for (int d = 0; d < 4; d++) {
    int src = d - (4 - m);
    oshape[d] = src >= 0 ? (uint32_t)sh[src] : 1;
    for (int k = 0; k < nops; k++) os[k][d] = src >= 0 ? (int32_t)s2[k][src] : 0;
  }
  for (int k = nops; k < 3; k++) for (int d = 0; d < 4; d++) os[k][d] = 0;
  return 0;
}

/* Strides of t broadcast to (nd, shape). */
static void bstrides(const bert_tensor *t, int nd, const int64_t *shape, int64_t *st) {
  for (int d = 0; d < nd; d++) {
    int td = d - (nd - t->ndim);
    st[d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td];
  }
  (void)shape;
}

/* Elements one operand spans over the (collapsed) shape. */
static int64_t span4(const uint32_t *shape, const int32_t *st) {
  int64_t hi = 0;
  for (int d = 0; d < 4; d++) if (shape[d] > 1) hi += (int64_t)(shape[d] - 1) * st[d];
  return hi + 1;
}

/* An elementwise dispatch too large for one binding: split along the
** outermost dim (recursing inward when one slice of it is still too
** large), each window bound on its own. */
static int elt_split(const char *fname, const char *shader, elt_push p, vkx_alloc *al[3], const int64_t base[3]) {
  int32_t *st[3] = {p.so, p.sa, p.sb};
  int64_t sp[3], mx = 0, lim = (int64_t)vk_max_bind() / 4;
  for (int k = 0; k < 3; k++) { sp[k] = span4(p.shape, st[k]); if (sp[k] > mx) mx = sp[k]; }
  if (mx <= lim) {
    uint64_t n = (uint64_t)p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
    p.n = (uint32_t)n;
    vkx_bind bd[3];
    for (int k = 0; k < 3; k++) { bd[k].a = al[k]; bd[k].off = (size_t)base[k] * 4; bd[k].len = (size_t)sp[k] * 4; }
    uint32_t gx, gy;
    vk_grid_1d(n, 256, &gx, &gy);
    return vkx_dispatch(shader, &p.op, 1, 3, bd, &p, sizeof p, gx, gy, 1);
  }
  int d = 0;
  while (d < 4 && p.shape[d] == 1) d++;
  if (d == 4) { bert_set_error("%s: vulkan: cannot split the operands", fname); return -1; }
  int64_t S = p.shape[d], cs = (int64_t)((double)S * (double)lim / (double)mx);
  if (cs < 1) cs = 1;
  if (cs >= S) cs = (S + 1) / 2;
  for (int64_t c0 = 0; c0 < S; c0 += cs) {
    elt_push q = p;
    q.shape[d] = (uint32_t)(S - c0 < cs ? S - c0 : cs);
    int64_t b2[3];
    for (int k = 0; k < 3; k++) b2[k] = base[k] + c0 * st[k][d];
    if (elt_split(fname, shader, q, al, b2) != 0) return -1;
  }
  return 0;
}

/* out = f(a, b) elementwise; b may be NULL (unary / copy / fill: a = out). */
static int elt_run(const char *fname, uint32_t op, bert_tensor *out, const bert_tensor *a,
                   const bert_tensor *b, double alpha) {
  char s1[160];
  int64_t st[3][BERT_MAX_DIMS];
  const bert_tensor *A = a ? a : out, *B = b ? b : A;
  bstrides(out, out->ndim, out->shape, st[0]);
  bstrides(A, out->ndim, out->shape, st[1]);
  bstrides(B, out->ndim, out->shape, st[2]);
  elt_push p;
  int32_t os[3][4];
  if (collapse(out->ndim, out->shape, 3, st, p.shape, os) != 0) {
    /* more than 4 dims that do not merge (a permuted 5-D view): one
    ** dispatch per index of the outermost dim, each with a dim less */
    if (out->ndim <= 4) {
      bert_set_error("%s: vulkan: %s has more than 4 non-mergeable dimensions", fname, SHAPE(s1, out));
      return -1;
    }
    for (int64_t i = 0; i < out->shape[0]; i++) {
      const bert_tensor *ops[2] = {A, B};
      bert_tensor *sub[3] = {bert_select(out, 0, i), NULL, NULL};
      for (int k = 0; k < 2; k++)   /* operands of fewer dims broadcast over dim 0 */
        sub[k + 1] = ops[k]->ndim < out->ndim ? bert_alias(ops[k])
                   : bert_select((bert_tensor *)ops[k], 0, ops[k]->shape[0] == 1 ? 0 : i);
      int rc = sub[0] && sub[1] && sub[2] ? elt_run(fname, op, sub[0], sub[1], b ? sub[2] : NULL, alpha) : -1;
      for (int k = 0; k < 3; k++) bert_tensor_release(sub[k]);
      if (rc != 0) return -1;
    }
    return 0;
  }
  memcpy(p.so, os[0], sizeof p.so);
  memcpy(p.sa, os[1], sizeof p.sa);
  memcpy(p.sb, os[2], sizeof p.sb);
  int64_t n = bert_numel(out);
  if (n == 0) return 0;
  if (n > (int64_t)UINT32_MAX) { bert_set_error("%s: vulkan: too many elements", fname); return -1; }
  p.n = (uint32_t)n;
  p.op = op;
  p.flags = (A->dtype == BERT_I32 ? ELT_A_INT : 0u) | (B->dtype == BERT_I32 ? ELT_B_INT : 0u) |
            (out->dtype == BERT_I32 ? ELT_OUT_INT : 0u);
  p.alpha = (float)alpha;
  p.ialpha = alpha != alpha ? 0 : alpha >= 2147483647.0 ? INT32_MAX : alpha <= -2147483648.0 ? INT32_MIN : (int32_t)alpha;
  /* int32 in, int32 out (or an int32 comparison): the integer kernel */
  int ai = A->dtype == BERT_I32, bi = B->dtype == BERT_I32, oi = out->dtype == BERT_I32, binary = op < ELT_UNARY;
  int ints = (oi && ai && (bi || !binary)) || (op == ELT_FILL && oi) ||
             (binary && ai && bi && op >= (uint32_t)BERT_EQ && op <= (uint32_t)BERT_GE);
  const char *shader = ints ? "eltwise_int" : "eltwise";
  vkx_bind bd[3] = {vk_bind_of(out), vk_bind_of(A), vk_bind_of(B)};
  if (!vk_binds_fit(3, bd)) {
    vkx_alloc *al[3] = {vk_alloc_of(out), vk_alloc_of(A), vk_alloc_of(B)};
    int64_t base[3] = {out->offset, A->offset, B->offset};
    return elt_split(fname, shader, p, al, base);
  }
  uint32_t gx, gy;
  vk_grid_1d((uint64_t)n, 256, &gx, &gy);
  return vkx_dispatch(shader, &p.op, 1, 3, bd, &p, sizeof p, gx, gy, 1);   /* one pipeline per op */
}

int bert_vk_copy_(bert_tensor *dst, const bert_tensor *src) {
  /* src is already expanded to dst's shape by bert_copy_ */
  if (!bert_is_host(dst) && !bert_is_host(src)) return elt_run("copy_", ELT_COPY, dst, src, NULL, 0);
  if (!bert_is_host(dst)) {   /* upload, then convert / scatter on the device */
    if (bert_is_contiguous(dst) && bert_is_contiguous(src) && dst->dtype == src->dtype)
      return vkx_upload(vk_alloc_of(dst), (size_t)dst->offset * 4, bert_data(src), (size_t)bert_numel(dst) * 4);
    bert_tensor *u = bert_vk_upload(src);
    if (u == NULL) return -1;
    int rc = elt_run("copy_", ELT_COPY, dst, u, NULL, 0);
    bert_tensor_release(u);
    return rc;
  }
  bert_tensor *h = bert_vk_download(src);   /* device -> host */
  if (h == NULL) return -1;
  int rc = bert_copy_(dst, h);
  bert_tensor_release(h);
  return rc;
}

bert_tensor *bert_vk_to_dtype(const bert_tensor *t, bert_dtype dt) {
  bert_tensor *c = bert_vk_empty(dt, t->ndim, t->shape);
  if (c && elt_run("to", ELT_COPY, c, t, NULL, 0) != 0) { bert_tensor_release(c); return NULL; }
  return c;
}

int bert_vk_fill_(bert_tensor *t, double value) {
  return elt_run("fill_", ELT_FILL, t, t, NULL, value);
}

int vk_binary(bert_binop op, const bert_tensor *a_in, const bert_tensor *b_in, double alpha, bert_tensor *out) {
  /* host operands (scalars, int32 ids) are uploaded */
  bert_tensor *a = bert_vk_on_device(a_in), *b = a ? bert_vk_on_device(b_in) : NULL;
  int rc = a && b ? elt_run(bert_binop_name(op), (uint32_t)op, out, a, b, alpha) : -1;
  bert_tensor_release(a);
  bert_tensor_release(b);
  return rc;
}

int vk_unary(bert_unop op, const bert_tensor *a, bert_tensor *out) {
  return elt_run(bert_unop_name(op), ELT_UNARY + (uint32_t)op, out, a, NULL, 0);
}

/* dy * f'(x) for the unary op (the autograd backward of bert_unary): x's shape. */
bert_tensor *vk_unary_backward(bert_unop op, const bert_tensor *x, const bert_tensor *y, const bert_tensor *dy) {
  (void)y;
  bert_tensor *out = bert_vk_empty(BERT_F32, x->ndim, x->shape);
  if (out && elt_run(bert_unop_name(op), ELT_UNARY_GRAD + (uint32_t)op, out, x, dy, 0) != 0) {
    bert_tensor_release(out);
    out = NULL;
  }
  return out;
}
