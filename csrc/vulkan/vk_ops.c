/*
** Vulkan ops: device tensors, transfers, and one function per op, each
** recording dispatches of the shaders in shaders/ (nothing waits until a
** result is read back).  The contracts are those of the CPU ops (ops.h,
** nn/nn.h, optim.h); each checks that its tensors are on the device.
*/
#include <math.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan/vk.h"
#include "vulkan/vk_internal.h"
#include "vulkan/vk_opcodes.h"
#include "core/autograd.h"

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

/* {====================================================== tensors */

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

static bert_storage *vk_storage(size_t nbytes) {
  vkx_alloc *a = vkx_alloc_new(nbytes);
  if (a == NULL) return NULL;
  bert_storage *s = malloc(sizeof *s);
  if (s == NULL) { vkx_alloc_free(a); bert_set_error("out of memory"); return NULL; }
  memset(s, 0, sizeof *s);
  s->nbytes = nbytes;
  s->refcount = 1;
  s->kind = BERT_STORAGE_DEVICE;
  s->backend = &bert_vulkan_backend;
  s->device = a;
  bert_mem_account((int64_t)nbytes);
  return s;
}

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

static vkx_alloc *alloc_of(const bert_tensor *t) { return (vkx_alloc *)t->storage->device; }

/* The byte range a view touches (strides are never negative). */
static vkx_bind bind_of(const bert_tensor *t) {
  int64_t hi = 0;
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] > 1) hi += (t->shape[d] - 1) * t->stride[d];
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  vkx_bind b = {alloc_of(t), (size_t)t->offset * 4, n == 0 ? 4 : (size_t)(hi + 1) * 4};
  return b;
}

/* n elements of t from element `off` past its offset. */
static vkx_bind bind_el(const bert_tensor *t, int64_t off, int64_t n) {
  vkx_bind b = {alloc_of(t), (size_t)(t->offset + off) * 4, (size_t)(n > 0 ? n : 1) * 4};
  return b;
}

/* The most bytes one binding may span (the device's maxStorageBufferRange,
** or the range forced for tests, less the offset alignment slack): larger
** tensors are split into windows, one dispatch per window. */
static size_t max_bind(void) {
  const vkx_info *in = vkx_get_info();
  if (in == NULL) return (size_t)1 << 62;
  return (size_t)(in->max_range - in->offset_align);
}

static int same_shape(const bert_tensor *a, const bert_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static int binds_fit(int n, const vkx_bind *b) {
  size_t lim = max_bind();
  for (int i = 0; i < n; i++) if (b[i].len > lim) return 0;
  return 1;
}

bert_tensor *bert_vk_upload(const bert_tensor *t) {
  bert_tensor *c = bert_contiguous((bert_tensor *)t);
  if (c == NULL) return NULL;
  bert_tensor *d = bert_vk_empty(c->dtype, c->ndim, c->shape);
  if (d && vkx_upload(alloc_of(d), 0, bert_data(c), (size_t)bert_numel(c) * 4) != 0) {
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
  if (h && vkx_download(alloc_of(c), (size_t)c->offset * 4, bert_data(h), (size_t)bert_numel(c) * 4) != 0) {
    bert_tensor_release(h);
    h = NULL;
  }
  bert_tensor_release(c);
  return h;
}

double bert_vk_get_flat(const bert_tensor *t, int64_t i) {
  int64_t off = bert_flat_offset(t, i);
  uint32_t w = 0;
  if (vkx_download(alloc_of(t), (size_t)off * 4, &w, 4) != 0) return NAN;
  if (t->dtype == BERT_I32) return (double)(int32_t)w;
  float f;
  memcpy(&f, &w, 4);
  return f;
}

/* A CPU tensor of one element used as a scalar operand: its value. */
static int host_scalar(const bert_tensor *t, double *v) {
  if (bert_is_vk(t) || bert_numel(t) != 1) return 0;
  *v = bert_get_flat(t, 0);
  return 1;
}

static int need_vk(const char *fname, const bert_tensor *t, const char *what) {
  if (t == NULL || bert_is_vk(t)) return 0;
  bert_set_error("%s: %s is on the cpu but the operation runs on vulkan (move it with :to(\"vulkan\"))",
                 fname, what);
  return -1;
}
/* }====================================================== */

/* {====================================================== elementwise */


typedef struct {
  uint32_t n, op, flags;
  float alpha;
  int32_t ialpha;   /* alpha (or the fill value) for int32 operands, saturated */
  uint32_t shape[4];
  int32_t so[4], sa[4], sb[4];
} elt_push;

static void grid_1d(uint64_t n, uint32_t wg, uint32_t *gx, uint32_t *gy) {
  uint64_t groups = (n + wg - 1) / wg;
  if (groups == 0) groups = 1;
  *gx = groups < 65535 ? (uint32_t)groups : 65535;
  *gy = (uint32_t)((groups + *gx - 1) / *gx);
}

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
  int64_t sp[3], mx = 0, lim = (int64_t)max_bind() / 4;
  for (int k = 0; k < 3; k++) { sp[k] = span4(p.shape, st[k]); if (sp[k] > mx) mx = sp[k]; }
  if (mx <= lim) {
    uint64_t n = (uint64_t)p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
    p.n = (uint32_t)n;
    vkx_bind bd[3];
    for (int k = 0; k < 3; k++) { bd[k].a = al[k]; bd[k].off = (size_t)base[k] * 4; bd[k].len = (size_t)sp[k] * 4; }
    uint32_t gx, gy;
    grid_1d(n, 256, &gx, &gy);
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
  vkx_bind bd[3] = {bind_of(out), bind_of(A), bind_of(B)};
  if (!binds_fit(3, bd)) {
    vkx_alloc *al[3] = {alloc_of(out), alloc_of(A), alloc_of(B)};
    int64_t base[3] = {out->offset, A->offset, B->offset};
    return elt_split(fname, shader, p, al, base);
  }
  uint32_t gx, gy;
  grid_1d((uint64_t)n, 256, &gx, &gy);
  return vkx_dispatch(shader, &p.op, 1, 3, bd, &p, sizeof p, gx, gy, 1);   /* one pipeline per op */
}

int bert_vk_copy_(bert_tensor *dst, const bert_tensor *src) {
  /* src is already expanded to dst's shape by bert_copy_ */
  if (bert_is_vk(dst) && bert_is_vk(src)) return elt_run("copy_", ELT_COPY, dst, src, NULL, 0);
  if (bert_is_vk(dst)) {   /* upload, then convert / scatter on the device */
    if (bert_is_contiguous(dst) && bert_is_contiguous(src) && dst->dtype == src->dtype)
      return vkx_upload(alloc_of(dst), (size_t)dst->offset * 4, bert_data(src), (size_t)bert_numel(dst) * 4);
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

/* Operands for a device op: device tensors as they are, one-element host
** tensors uploaded (scalars), anything else on the host refused. */
static bert_tensor *operand(const char *fname, const bert_tensor *t, const char *what) {
  double v;
  if (bert_is_vk(t)) { bert_tensor_retain((bert_tensor *)t); return (bert_tensor *)t; }
  if (host_scalar(t, &v)) return bert_vk_upload(t);
  /* host int32 tensors (ids, masks, labels from a data loader) are small:
  ** uploaded like scalars */
  if (t->dtype == BERT_I32 && bert_numel(t) <= ((int64_t)1 << 24)) return bert_vk_upload(t);
  need_vk(fname, t, what);
  return NULL;
}

static bert_tensor *prepare(const char *fname, bert_tensor *dst, bert_dtype dt, const bert_tensor *a,
                            const bert_tensor *b) {
  char s1[160], s2[160];
  int64_t shape[BERT_MAX_DIMS];
  int nd = a->ndim;
  memcpy(shape, a->shape, sizeof shape);
  if (b && bert_broadcast_shape(a->ndim, a->shape, b->ndim, b->shape, &nd, shape) != 0) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s: %s", fname, bert_last_error());
    bert_set_error("%s", msg);
    return NULL;
  }
  if (dst == NULL) return bert_vk_empty(dt, nd, shape);
  int same = dst->ndim == nd;
  for (int i = 0; same && i < nd; i++) same = dst->shape[i] == shape[i];
  if (!same || dst->dtype != dt || bert_has_overlap(dst) || !bert_is_vk(dst)) {
    bert_set_error("%s: in-place result %s %s must be a %s vulkan tensor of shape %s", fname,
                   SHAPE(s1, dst), bert_dtype_name(dst->dtype), bert_dtype_name(dt),
                   bert_shape_str(s2, sizeof s2, nd, shape));
    return NULL;
  }
  bert_tensor_retain(dst);
  return dst;
}

bert_tensor *bert_vk_binary(bert_binop op, const bert_tensor *a_in, const bert_tensor *b_in,
                            double alpha, bert_tensor *dst) {
  const char *fname = bert_binop_name(op);
  bert_dtype to;
  if (bert_binop_is_comparison(op)) to = BERT_I32;
  else if (op == BERT_DIV) to = BERT_F32;
  else to = (a_in->dtype == BERT_F32 || b_in->dtype == BERT_F32) ? BERT_F32 : BERT_I32;
  if (dst) to = dst->dtype;   /* the front-end prepared it (core/ops_elementwise.c) */
  bert_tensor *a = operand(fname, a_in, "the first operand"), *b = NULL, *out = NULL;
  if (a == NULL) return NULL;
  b = operand(fname, b_in, "the second operand");
  if (b == NULL) goto done;
  out = prepare(fname, dst, to, a, b);
  if (out && elt_run(fname, (uint32_t)op, out, a, b, alpha) != 0) { bert_tensor_release(out); out = NULL; }
done:
  bert_tensor_release(a);
  bert_tensor_release(b);
  return out;
}

bert_tensor *bert_vk_unary(bert_unop op, const bert_tensor *a, bert_tensor *dst) {
  const char *fname = bert_unop_name(op);
  if (need_vk(fname, a, "the input")) return NULL;
  bert_dtype to = (a->dtype == BERT_I32 && bert_unop_keeps_int(op)) ? BERT_I32 : BERT_F32;
  bert_tensor *out = prepare(fname, dst, to, a, NULL);
  if (out && elt_run(fname, ELT_UNARY + (uint32_t)op, out, a, NULL, 0) != 0) { bert_tensor_release(out); out = NULL; }
  return out;
}
/* dy * f'(x) for the unary op (the autograd backward of bert_unary). */
bert_tensor *bert_vk_unary_backward(bert_unop op, const bert_tensor *x_in, const bert_tensor *dy_in) {
  const char *fname = bert_unop_name(op);
  bert_tensor *x = operand(fname, x_in, "the input"), *dy = x ? operand(fname, dy_in, "the gradient") : NULL, *out = NULL;
  if (x && dy) {
    out = prepare(fname, NULL, BERT_F32, x, dy);
    if (out && elt_run(fname, ELT_UNARY_GRAD + (uint32_t)op, out, x, dy, 0) != 0) { bert_tensor_release(out); out = NULL; }
  }
  bert_tensor_release(x);
  bert_tensor_release(dy);
  return out;
}
/* }====================================================== */

/* {====================================================== GEMM */

typedef struct {
  uint32_t M, N, K, sam, sak, sbk, sbn, sab, sbb, scb;
  float alpha, beta;
  uint32_t flags, ldc;
} gemm_push;

/* Tiles from the device's limits and the problem size: 128 x 128 blocks
** with 8 x 8 outputs per invocation (256 invocations) where the shared
** memory and invocation limits allow and the grid still fills the device,
** else 64 x 64 blocks with 4 x 4 per invocation (CPU implementations such
** as lavapipe, small matrices).  BERT_VK_GEMM_TILE=64|128 forces one. */
static void gemm_tiles(uint32_t spec[6], uint64_t M, uint64_t N, uint64_t batch) {
  const vkx_info *in = vkx_get_info();
  uint32_t bm = 128, bk = 16, tm = 8;
  const char *env = getenv("BERT_VK_GEMM_TILE");
  int force = env ? atoi(env) : 0;
  int big_ok = in != NULL && in->max_shared >= 2 * bk * (bm + 4) * 4 && in->max_invocations >= 256;
  uint64_t groups = ((M + 127) / 128) * ((N + 127) / 128) * batch;
  if (force == 64 || !big_ok || (force != 128 && (strcmp(in->type, "cpu") == 0 || groups < 96)))
    bm = 64, tm = 4;
  spec[0] = (bm / tm) * (bm / tm);
  spec[1] = bm; spec[2] = bm; spec[3] = bk; spec[4] = tm; spec[5] = tm;
}

/* The deepest K one dispatch takes: the kernel loops K / BK (16) times. */
#define GEMM_MAX_K ((int64_t)16 * VK_MAX_LOOP)

/* A GEMM whose operands do not fit one binding each, or deeper than
** GEMM_MAX_K: per batch, C is tiled into Mc x Nc windows and K into Kc
** slices (accumulated with beta = 1; bias and GELU on the last slice), each
** window small enough. */
static int gemm_split(bert_tensor *c, const bert_tensor *a, const bert_tensor *b, const bert_tensor *bias,
                      uint32_t M, uint32_t N, uint32_t K, const int64_t sa[3], const int64_t sb[3],
                      uint32_t scb, uint32_t batch, float alpha, float beta, uint32_t flags) {
  int64_t lim = (int64_t)max_bind() / 4, Mc = M, Nc = N, Kc = K;
  for (;;) {
    int64_t tA = (Mc - 1) * sa[0], kA = (Kc - 1) * sa[1], kB = (Kc - 1) * sb[0], tB = (Nc - 1) * sb[1];
    int64_t sC = (Mc - 1) * (int64_t)N + Nc;
    if (sC > lim) {
      if (Mc > 1) Mc = (Mc + 1) / 2; else if (Nc > 1) Nc = (Nc + 1) / 2; else break;
    } else if (tA + kA + 1 > lim) {
      if (tA >= kA && Mc > 1) Mc = (Mc + 1) / 2; else if (Kc > 1) Kc = (Kc + 1) / 2; else break;
    } else if (kB + tB + 1 > lim) {
      if (tB >= kB && Nc > 1) Nc = (Nc + 1) / 2; else if (Kc > 1) Kc = (Kc + 1) / 2; else break;
    } else break;
  }
  if (Kc > GEMM_MAX_K) Kc = GEMM_MAX_K;
  if ((Mc - 1) * (int64_t)N + Nc > lim || (Mc - 1) * sa[0] + (Kc - 1) * sa[1] + 1 > lim ||
      (Kc - 1) * sb[0] + (Nc - 1) * sb[1] + 1 > lim) {
    bert_set_error("gemm: vulkan: cannot split a %u x %u x %u product into bindings of %lld bytes", M, N, K,
                   (long long)lim * 4);
    return -1;
  }
  for (uint32_t z = 0; z < batch; z++)
    for (int64_t m0 = 0; m0 < M; m0 += Mc)
      for (int64_t n0 = 0; n0 < N; n0 += Nc) {
        int64_t mc = M - m0 < Mc ? M - m0 : Mc, nc = N - n0 < Nc ? N - n0 : Nc;
        uint32_t spec[6];
        gemm_tiles(spec, (uint64_t)mc, (uint64_t)nc, 1);
        for (int64_t k0 = 0; k0 < K; k0 += Kc) {
          int64_t kc = K - k0 < Kc ? K - k0 : Kc;
          int last = k0 + kc >= K;
          int64_t ca = c->offset + (int64_t)z * scb + m0 * (int64_t)N + n0;
          int64_t aa = a->offset + (int64_t)z * sa[2] + m0 * sa[0] + k0 * sa[1];
          int64_t bb = b->offset + (int64_t)z * sb[2] + k0 * sb[0] + n0 * sb[1];
          gemm_push p = {(uint32_t)mc, (uint32_t)nc, (uint32_t)kc, (uint32_t)sa[0], (uint32_t)sa[1],
                         (uint32_t)sb[0], (uint32_t)sb[1], 0, 0, 0, alpha, k0 == 0 ? beta : 1.0f,
                         last ? flags : 0u, N};
          vkx_bind bd[4] = {{alloc_of(c), (size_t)ca * 4, (size_t)((mc - 1) * (int64_t)N + nc) * 4},
                            {alloc_of(a), (size_t)aa * 4, (size_t)((mc - 1) * sa[0] + (kc - 1) * sa[1] + 1) * 4},
                            {alloc_of(b), (size_t)bb * 4, (size_t)((kc - 1) * sb[0] + (nc - 1) * sb[1] + 1) * 4},
                            {alloc_of(c), (size_t)ca * 4, 4}};
          if (bias) { bd[3].a = alloc_of(bias); bd[3].off = (size_t)(bias->offset + n0) * 4; bd[3].len = (size_t)nc * 4; }
          if (vkx_dispatch("gemm", spec, 6, 4, bd, &p, sizeof p, (uint32_t)((nc + spec[2] - 1) / spec[2]),
                           (uint32_t)((mc + spec[1] - 1) / spec[1]), 1) != 0) return -1;
        }
      }
  return 0;
}

/* C[z] (contiguous [M, N] per batch, batch stride scb) = op(A) op(B) ... */
static int gemm_dispatch(bert_tensor *c, const bert_tensor *a, const bert_tensor *b, const bert_tensor *bias,
                         uint32_t M, uint32_t N, uint32_t K, const int64_t sa[3], const int64_t sb[3],
                         uint32_t scb, uint32_t batch, float alpha, float beta, uint32_t flags) {
  uint32_t spec[6];
  gemm_tiles(spec, M, N, batch);
  gemm_push p = {M, N, K, (uint32_t)sa[0], (uint32_t)sa[1], (uint32_t)sb[0], (uint32_t)sb[1],
                 (uint32_t)sa[2], (uint32_t)sb[2], scb, alpha, beta, flags, N};
  vkx_bind bd[4] = {bind_of(c), bind_of(a), bind_of(b), bind_of(bias ? bias : c)};
  if (!binds_fit(4, bd) || K > GEMM_MAX_K)
    return gemm_split(c, a, b, bias, M, N, K, sa, sb, scb, batch, alpha, beta, flags);
  return vkx_dispatch("gemm", spec, 6, 4, bd, &p, sizeof p, (N + spec[2] - 1) / spec[2],
                      (M + spec[1] - 1) / spec[1], batch);
}

bert_tensor *bert_vk_gemm(const bert_tensor *a, int ta, const bert_tensor *b, int tb,
                          const bert_tensor *bias, int gelu) {
  char s1[160], s2[160];
  if (need_vk("gemm", a, "A") || need_vk("gemm", b, "B") || need_vk("gemm", bias, "the bias")) return NULL;
  if (a->ndim != 2 || b->ndim != 2 || a->dtype != BERT_F32 || b->dtype != BERT_F32) {
    bert_set_error("gemm: expects 2-D float32 tensors, got %s and %s", SHAPE(s1, a), SHAPE(s2, b));
    return NULL;
  }
  int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (K != Kb) {
    bert_set_error("gemm: %s @ %s: inner dimensions differ (%lld vs %lld)", SHAPE(s1, a), SHAPE(s2, b),
                   (long long)K, (long long)Kb);
    return NULL;
  }
  if (bias && (bias->ndim != 1 || bias->shape[0] != N || bias->dtype != BERT_F32)) {
    bert_set_error("gemm: bias %s must be float32 [%lld]", SHAPE(s1, bias), (long long)N);
    return NULL;
  }
  int64_t shape[2] = {M, N};
  bert_tensor *c = bert_vk_empty(BERT_F32, 2, shape);
  if (c == NULL) return NULL;
  int64_t sa[3] = {ta ? a->stride[1] : a->stride[0], ta ? a->stride[0] : a->stride[1], 0};
  int64_t sb[3] = {tb ? b->stride[1] : b->stride[0], tb ? b->stride[0] : b->stride[1], 0};
  if (M * N > 0 && K == 0) {
    if (bert_vk_fill_(c, 0) != 0) { bert_tensor_release(c); return NULL; }
  }
  uint32_t flags = (bias ? 1u : 0u) | (gelu == 1 ? 2u : gelu == 2 ? 4u : 0u);
  if (M * N > 0 && gemm_dispatch(c, a, b, bias, (uint32_t)M, (uint32_t)N, (uint32_t)K, sa, sb, 0, 1,
                                 1.0f, 0.0f, flags) != 0) {
    bert_tensor_release(c);
    return NULL;
  }
  return c;
}

/* c = op(A) op(B) + beta * c, c a contiguous 2-D device tensor (the
** backward GEMMs writing into gradient buffers). */
int bert_vk_gemm_into(bert_tensor *c, const bert_tensor *a, int ta, const bert_tensor *b, int tb, float beta) {
  char s1[160], s2[160];
  int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
  if (a->ndim != 2 || b->ndim != 2 || c->ndim != 2 || K != Kb || c->shape[0] != M || c->shape[1] != N ||
      !bert_is_contiguous(c) || !bert_is_vk(a) || !bert_is_vk(b) || !bert_is_vk(c)) {
    bert_set_error("gemm: vulkan: %s @ %s does not fit the output", SHAPE(s1, a), SHAPE(s2, b));
    return -1;
  }
  if (M * N == 0) return 0;
  if (K == 0) return beta == 0.0f ? bert_vk_fill_(c, 0) : 0;
  int64_t sa[3] = {ta ? a->stride[1] : a->stride[0], ta ? a->stride[0] : a->stride[1], 0};
  int64_t sb[3] = {tb ? b->stride[1] : b->stride[0], tb ? b->stride[0] : b->stride[1], 0};
  if (gemm_dispatch(c, a, b, NULL, (uint32_t)M, (uint32_t)N, (uint32_t)K, sa, sb, 0, 1, 1.0f, beta, 0) != 0) return -1;
  bert_bump_version(c);
  return 0;
}

/* Is the broadcast batch index of t (batch dims aligned right to nbd)
** one stride apart?  *st receives it. */
static int batch_stride(const bert_tensor *t, int nbd, const int64_t *batch, int64_t *st) {
  int64_t s[BERT_MAX_DIMS];
  int tb = t->ndim - 2;
  for (int d = 0; d < nbd; d++) {
    int td = d - (nbd - tb);
    s[d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td];
  }
  int allzero = 1;
  for (int d = 0; d < nbd; d++) allzero &= s[d] == 0 || batch[d] == 1;
  if (allzero) { *st = 0; return 1; }
  for (int d = 0; d + 1 < nbd; d++)
    if (batch[d] > 1 && s[d] != s[d + 1] * batch[d + 1]) return 0;
  *st = nbd ? s[nbd - 1] : 0;
  for (int d = nbd - 1; d >= 0 && batch[d] == 1; d--) *st = d > 0 ? s[d - 1] : 0;
  return 1;
}

bert_tensor *bert_vk_matmul(const bert_tensor *a_in, const bert_tensor *b_in) {
  char b1[160], b2[160];
  if (need_vk("matmul", a_in, "the first operand") || need_vk("matmul", b_in, "the second operand")) return NULL;
  if (a_in->dtype != BERT_F32 || b_in->dtype != BERT_F32 || a_in->ndim == 0 || b_in->ndim == 0) {
    bert_set_error("matmul: expects float32 tensors of at least 1 dimension, got %s @ %s",
                   SHAPE(b1, a_in), SHAPE(b2, b_in));
    return NULL;
  }
  bert_tensor *a = a_in->ndim == 1 ? bert_unsqueeze((bert_tensor *)a_in, 0) : bert_alias(a_in);
  bert_tensor *b = b_in->ndim == 1 ? bert_unsqueeze((bert_tensor *)b_in, 1) : bert_alias(b_in);
  bert_tensor *out = NULL;
  if (a == NULL || b == NULL) goto done;
  int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
  int64_t Kb = b->shape[b->ndim - 2], N = b->shape[b->ndim - 1];
  if (K != Kb) {
    bert_set_error("matmul: %s @ %s: inner dimensions differ (%lld vs %lld)", SHAPE(b1, a_in),
                   SHAPE(b2, b_in), (long long)K, (long long)Kb);
    goto done;
  }
  int64_t batch[BERT_MAX_DIMS];
  int nbd;
  if (bert_broadcast_shape(a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nbd, batch) != 0) {
    bert_set_error("matmul: %s @ %s: batch dimensions cannot be broadcast", SHAPE(b1, a_in), SHAPE(b2, b_in));
    goto done;
  }
  int64_t oshape[BERT_MAX_DIMS], nb = 1;
  int ond = 0;
  for (int i = 0; i < nbd; i++) { oshape[ond++] = batch[i]; nb *= batch[i]; }
  oshape[ond++] = M;
  oshape[ond++] = N;
  out = bert_vk_empty(BERT_F32, ond, oshape);
  if (out == NULL) goto done;
  if (M * N * nb == 0) goto shape;
  if (K == 0) { if (bert_vk_fill_(out, 0) != 0) goto fail; goto shape; }
  int64_t sta, stb;
  /* one dispatch when each operand's batch dims are one stride apart */
  if (!batch_stride(a, nbd, batch, &sta) || !batch_stride(b, nbd, batch, &stb)) {
    bert_tensor *ca = bert_contiguous(a), *cb = bert_contiguous(b);   /* on the device */
    bert_tensor_release(a);
    bert_tensor_release(b);
    a = ca;
    b = cb;
    if (a == NULL || b == NULL) goto fail;
    if (!batch_stride(a, nbd, batch, &sta) || !batch_stride(b, nbd, batch, &stb)) {
      /* general broadcast: one dispatch per batch, each on its own views */
      int64_t sa[3] = {a->stride[a->ndim - 2], a->stride[a->ndim - 1], 0};
      int64_t sb[3] = {b->stride[b->ndim - 2], b->stride[b->ndim - 1], 0};
      for (int64_t z = 0; z < nb; z++) {
        int64_t oa = a->offset, ob = b->offset, rem = z;
        for (int d = nbd - 1; d >= 0; d--) {
          int64_t c = rem % batch[d];
          rem /= batch[d];
          int da = d - (nbd - (a->ndim - 2)), db = d - (nbd - (b->ndim - 2));
          if (da >= 0 && a->shape[da] > 1) oa += c * a->stride[da];
          if (db >= 0 && b->shape[db] > 1) ob += c * b->stride[db];
        }
        int64_t sha[2] = {M, K}, shb[2] = {K, N}, sho[2] = {M, N};
        int64_t sta2[2] = {sa[0], sa[1]}, stb2[2] = {sb[0], sb[1]};
        bert_tensor *va = bert_tensor_view_of(a->storage, BERT_F32, oa, 2, sha, sta2);
        bert_tensor *vb = bert_tensor_view_of(b->storage, BERT_F32, ob, 2, shb, stb2);
        bert_tensor *vo = bert_tensor_view_of(out->storage, BERT_F32, z * M * N, 2, sho, NULL);
        int rc = va && vb && vo ? gemm_dispatch(vo, va, vb, NULL, (uint32_t)M, (uint32_t)N, (uint32_t)K, sa, sb, 0, 1,
                                                1.0f, 0.0f, 0) : -1;
        bert_tensor_release(va);
        bert_tensor_release(vb);
        bert_tensor_release(vo);
        if (rc != 0) goto fail;
      }
      goto shape;
    }
  }
  int64_t sa[3] = {a->stride[a->ndim - 2], a->stride[a->ndim - 1], sta};
  int64_t sb[3] = {b->stride[b->ndim - 2], b->stride[b->ndim - 1], stb};
  if (nb > 65535) { bert_set_error("matmul: vulkan: more than 65535 batches"); goto fail; }
  if (gemm_dispatch(out, a, b, NULL, (uint32_t)M, (uint32_t)N, (uint32_t)K, sa, sb, (uint32_t)(M * N),
                    (uint32_t)nb, 1.0f, 0.0f, 0) != 0) goto fail;
shape:
  if (a_in->ndim == 1 || b_in->ndim == 1) {   /* drop the vector dims */
    int64_t s[BERT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < nbd; i++) s[n++] = batch[i];
    if (a_in->ndim != 1) s[n++] = M;
    if (b_in->ndim != 1) s[n++] = N;
    bert_tensor *v = bert_view(out, n, s);
    bert_tensor_release(out);
    out = v;
  }
  goto done;
fail:
  bert_tensor_release(out);
  out = NULL;
done:
  bert_tensor_release(a);
  bert_tensor_release(b);
  return out;
}

/* y = x W^T + b as one GEMM over all rows, the bias in the output step
** (arguments checked by core/nn.c). */
bert_tensor *bert_vk_linear(bert_tensor *x_in, bert_tensor *w, bert_tensor *b) {
  if (need_vk("linear", x_in, "the input") || need_vk("linear", w, "the weight") || need_vk("linear", b, "the bias"))
    return NULL;
  bert_tensor *x = bert_contiguous(x_in);
  if (x == NULL) return NULL;
  int64_t in = w->shape[1], outf = w->shape[0], R = 1;
  for (int d = 0; d < x->ndim - 1; d++) R *= x->shape[d];   /* rows, also when in == 0 */
  int64_t s2d[2] = {R, in};
  bert_tensor *x2 = bert_view(x, 2, s2d), *y = NULL;
  bert_tensor_release(x);
  if (x2 == NULL) return NULL;
  bert_tensor *y2 = bert_vk_gemm(x2, 0, w, 1, b, 0);
  if (y2 == NULL) { bert_tensor_release(x2); return NULL; }
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, x_in->shape, sizeof shape);
  shape[x_in->ndim - 1] = outf;
  y = bert_view(y2, x_in->ndim, shape);
  bert_tensor_release(y2);
  bert_tensor_release(x2);
  return y;
}
/* }====================================================== */

/* {====================================================== reductions, softmax */

typedef struct { uint32_t R, inner, nout, op, want_idx; float denom; uint32_t int_mode; } red_push;

static int reduce_raw(vkx_bind *bd, int64_t R, int64_t inner, int64_t nout, uint32_t op, int want_idx, double denom,
                      int ints) {
  red_push p = {(uint32_t)R, (uint32_t)inner, (uint32_t)nout, op, (uint32_t)want_idx, (float)denom, (uint32_t)ints};
  uint32_t gx, gy;
  grid_1d((uint64_t)nout, 1, &gx, &gy);
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
  vkx_bind bd[3] = {bind_of(out), bind_of(x), bind_of(idx ? idx : out)};
  if (binds_fit(3, bd) && R <= RED_MAX_ROWS) return reduce_raw(bd, R, inner, nout, op, idx != NULL, (double)R, ints);
  int64_t lim = (int64_t)max_bind() / 4, outer = nout / (inner > 0 ? inner : 1), slice = R * inner;
  int soft = op == RED_SOFTMAX || op == RED_LOG_SOFTMAX;
  int64_t ostep = soft ? slice : inner;
  if (slice <= lim && R <= RED_MAX_ROWS) {
    int64_t oc = lim / slice;
    for (int64_t o0 = 0; o0 < outer; o0 += oc) {
      int64_t n = outer - o0 < oc ? outer - o0 : oc;
      vkx_bind w[3] = {bind_el(out, o0 * ostep, n * ostep), bind_el(x, o0 * slice, n * slice),
                       idx ? bind_el(idx, o0 * inner, n * inner) : bind_el(out, o0 * ostep, 1)};
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
      vkx_bind w[3] = {bind_el(P, c * inner, inner), bind_el(x, o * slice + r0 * inner, n * inner), bind_el(P, 0, 1)};
      rc_ = reduce_raw(w, n, inner, inner, part, 0, (double)n, ints);
    }
    if (rc_ != 0) break;
    /* the partials [nch, inner]: one more pass (itself split when long) */
    bert_tensor *ov = bert_tensor_view_of(out->storage, out->dtype, out->offset + o * inner, 1, &inner, NULL);
    rc_ = ov ? reduce_dispatch(ov, P, NULL, nch, inner, inner, fin == RED_MEAN ? RED_SUM : fin) : -1;
    if (rc_ == 0 && fin == RED_MEAN) {   /* the mean of R rows, from their sum */
      vkx_bind m[3] = {bind_of(ov), bind_of(ov), bind_of(ov)};
      rc_ = reduce_raw(m, 1, inner, inner, RED_MEAN, 0, (double)R, ints);
    }
    bert_tensor_release(ov);
  }
  bert_tensor_release(P);
  return rc_;
}

static const char *const red_names[] = {"sum", "mean", "max", "min", "argmax", "argmin", "var"};

bert_tensor *bert_vk_reduce(bert_redop op, const bert_tensor *t, int dim, int keepdim,
                            int correction, bert_tensor **indices) {
  char b[160];
  const char *name = red_names[op];
  (void)correction;
  if (op == BERT_ARGMAX || op == BERT_ARGMIN) {   /* the indices of max / min */
    bert_tensor *idx = NULL, *v;
    if (dim < 0) {
      int64_t n = bert_numel(t);
      bert_tensor *flat = bert_reshape_copy((bert_tensor *)t, 1, &n);
      v = flat ? bert_vk_reduce(op == BERT_ARGMAX ? BERT_MAX : BERT_MIN, flat, 0, 0, 0, &idx) : NULL;
      bert_tensor_release(flat);
    } else {
      v = bert_vk_reduce(op == BERT_ARGMAX ? BERT_MAX : BERT_MIN, t, dim, keepdim, 0, &idx);
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
    bert_tensor *r = f ? bert_vk_reduce(op, f, dim, keepdim, correction, indices ? &idx : NULL) : NULL;
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

  if (dim >= t->ndim) { bert_set_error("%s: dimension %d out of range for %s", name, dim + 1, SHAPE(b, t)); return NULL; }
  int64_t outer, R, inner;
  bert_split_at_dim(t, dim, &outer, &R, &inner);
  if (R == 0 && (op == BERT_MAX || op == BERT_MIN)) {
    bert_set_error("%s: cannot reduce an empty dimension of %s", name, SHAPE(b, t));
    return NULL;
  }
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

bert_tensor *bert_vk_softmax(const bert_tensor *t, int dim, int log) {
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
/* }====================================================== */

/* {====================================================== nn */


typedef struct { uint32_t R, H, flags; float eps; } ln_push;

/* Rows per dispatch for a [R, H] layer norm: all of them, or windows of
** whole rows when the row-major tensors exceed the binding range (gamma,
** beta and the [2, H] parameter gradients are always bound whole). */
static int64_t ln_window(const char *fname, int64_t R, int64_t H) {
  int64_t lim = (int64_t)max_bind() / 4;
  if (R * H <= lim && 2 * R <= lim) return R > 0 ? R : 1;
  int64_t rows = lim / (H > 2 ? H : 2);
  if (rows < 1 || 2 * H > lim) {
    bert_set_error("%s: vulkan: a row of %lld features exceeds the binding range", fname, (long long)H);
    return -1;
  }
  return rows;
}

/* y = LN(x + res); *stats (optional) receives [R, 2] mean / rstd per row. */
bert_tensor *bert_vk_layer_norm_ex(bert_tensor *x_in, bert_tensor *g_in, bert_tensor *b_in, double eps,
                                   bert_tensor *r_in, bert_tensor **stats_out) {
  char s1[160], s2[160];
  const char *f = "layer_norm";
  if (need_vk(f, x_in, "the input") || need_vk(f, g_in, "the weight") || need_vk(f, b_in, "the bias") ||
      need_vk(f, r_in, "the residual")) return NULL;
  if (x_in->ndim < 1 || x_in->dtype != BERT_F32) { bert_set_error("layer_norm: bad input %s", SHAPE(s1, x_in)); return NULL; }
  int64_t H = x_in->shape[x_in->ndim - 1];
  if ((g_in && (g_in->ndim != 1 || g_in->shape[0] != H)) || (b_in && (b_in->ndim != 1 || b_in->shape[0] != H))) {
    bert_set_error("layer_norm: weight / bias must be [%lld] for input %s", (long long)H, SHAPE(s1, x_in));
    return NULL;
  }
  if (r_in && !same_shape(r_in, x_in)) {
    bert_set_error("layer_norm: residual %s does not match input %s", SHAPE(s1, r_in), SHAPE(s2, x_in));
    return NULL;
  }
  bert_tensor *x = bert_contiguous(x_in), *r = r_in ? bert_contiguous(r_in) : NULL;
  bert_tensor *g = g_in ? bert_contiguous(g_in) : NULL, *bb = b_in ? bert_contiguous(b_in) : NULL;
  bert_tensor *y = NULL, *st = NULL;
  if (!x || (r_in && !r) || (g_in && !g) || (b_in && !bb)) goto done;
  int64_t R = H > 0 ? bert_numel(x) / H : 0, sshape[2] = {R, 2}, rows = ln_window(f, R, H);
  if (rows < 0) goto done;
  y = bert_vk_empty(BERT_F32, x->ndim, x->shape);
  st = bert_vk_empty(BERT_F32, 2, sshape);
  if (!y || !st) goto fail;
  for (int64_t r0 = 0; r0 < R; r0 += rows) {
    int64_t nr = R - r0 < rows ? R - r0 : rows;
    ln_push p = {(uint32_t)nr, (uint32_t)H, (r ? 1u : 0u) | (g ? 2u : 0u) | (bb ? 4u : 0u), (float)eps};
    vkx_bind xw = bind_el(x, r0 * H, nr * H);
    vkx_bind bd[6] = {bind_el(y, r0 * H, nr * H), bind_el(st, r0 * 2, nr * 2), xw,
                      r ? bind_el(r, r0 * H, nr * H) : xw, g ? bind_of(g) : xw, bb ? bind_of(bb) : xw};
    uint32_t gx, gy;
    grid_1d((uint64_t)nr, 1, &gx, &gy);
    if (vkx_dispatch("layer_norm", NULL, 0, 6, bd, &p, sizeof p, gx, gy, 1) != 0) goto fail;
  }
  if (stats_out) { *stats_out = st; st = NULL; }
  goto done;
fail:
  bert_tensor_release(y);
  y = NULL;
done:
  bert_tensor_release(st);
  bert_tensor_release(x);
  bert_tensor_release(r);
  bert_tensor_release(g);
  bert_tensor_release(bb);
  return y;
}

typedef struct { uint32_t R, H, flags, mode; } lnb_push;

/* Backward kernels: dx [R, H] (when dx_out) and dgb [2, H] = dgamma, dbeta;
** row windows as in the forward, the parameter gradients accumulated over them. */
int bert_vk_layer_norm_backward(bert_tensor *dy_in, bert_tensor *x_in, bert_tensor *res_in, bert_tensor *gamma_in,
                                bert_tensor *stats, bert_tensor **dx_out, bert_tensor **dgb_out) {
  char s1[160], s2[160];
  const char *f = "layer_norm_backward";
  if (need_vk(f, dy_in, "the gradient") || need_vk(f, x_in, "the input") || need_vk(f, res_in, "the residual") ||
      need_vk(f, gamma_in, "the weight") || need_vk(f, stats, "the stats")) return -1;
  int64_t H = x_in->ndim ? x_in->shape[x_in->ndim - 1] : 0, R = H > 0 ? bert_numel(x_in) / H : 0;
  if (x_in->ndim < 1 || !same_shape(dy_in, x_in) || (res_in && !same_shape(res_in, x_in)) ||
      (gamma_in && (gamma_in->ndim != 1 || gamma_in->shape[0] != H)) || stats->ndim != 2 ||
      stats->shape[0] != R || stats->shape[1] != 2) {
    bert_set_error("%s: gradient %s, input %s, stats %s: expected matching [.., H] tensors and stats [R, 2]", f,
                   SHAPE(s1, dy_in), SHAPE(s2, x_in), SHAPE(s1, stats));
    return -1;
  }
  int64_t gshape[2] = {2, H}, rows = ln_window(f, R, H);
  if (rows < 0) return -1;
  if (rows > (int64_t)VK_MAX_LOOP) rows = VK_MAX_LOOP;   /* dgamma / dbeta loop over the window's rows */
  bert_tensor *dy = bert_contiguous(dy_in), *x = bert_contiguous(x_in), *st = bert_contiguous(stats);
  bert_tensor *res = res_in ? bert_contiguous(res_in) : NULL, *gamma = gamma_in ? bert_contiguous(gamma_in) : NULL;
  bert_tensor *dx = bert_vk_empty(BERT_F32, x_in->ndim, x_in->shape), *dgb = bert_vk_empty(BERT_F32, 2, gshape);
  int rc = -1;
  if (!dy || !x || !st || (res_in && !res) || (gamma_in && !gamma) || !dx || !dgb) goto done;
  if (R == 0 && bert_vk_fill_(dgb, 0) != 0) goto done;
  for (int64_t r0 = 0; r0 < R; r0 += rows) {
    int64_t nr = R - r0 < rows ? R - r0 : rows;
    /* flags bit 2: add to dgamma / dbeta (windows after the first) */
    lnb_push p = {(uint32_t)nr, (uint32_t)H, (res ? 1u : 0u) | (gamma ? 2u : 0u) | (r0 > 0 ? 4u : 0u), 0};
    vkx_bind xw = bind_el(x, r0 * H, nr * H);
    vkx_bind bd[7] = {bind_el(dx, r0 * H, nr * H), bind_of(dgb), bind_el(dy, r0 * H, nr * H), xw,
                      res ? bind_el(res, r0 * H, nr * H) : xw, gamma ? bind_of(gamma) : xw,
                      bind_el(st, r0 * 2, nr * 2)};
    uint32_t gx, gy;
    grid_1d((uint64_t)nr, 1, &gx, &gy);
    if (vkx_dispatch("layer_norm_bwd", NULL, 0, 7, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
    p.mode = 1;
    grid_1d((uint64_t)H, 256, &gx, &gy);
    if (vkx_dispatch("layer_norm_bwd", NULL, 0, 7, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
  }
  *dx_out = dx;
  *dgb_out = dgb;
  dx = dgb = NULL;
  rc = 0;
done:
  bert_tensor_release(dy); bert_tensor_release(x); bert_tensor_release(st);
  bert_tensor_release(res); bert_tensor_release(gamma);
  bert_tensor_release(dx); bert_tensor_release(dgb);
  return rc;
}

typedef struct {
  uint32_t n, N, R, mode, flags, thr;
  float scale;
  uint32_t seed_lo, seed_hi, off_lo, off_hi, v0, vn;
} misc_push;

static int misc_raw(const vkx_bind *bd, const misc_push *p, uint64_t nthreads) {
  uint32_t gx, gy;
  grid_1d(nthreads, 256, &gx, &gy);
  return vkx_dispatch("nn_misc", NULL, 0, 4, bd, p, sizeof *p, gx, gy, 1);
}

/* Windows when a binding is too large: the embedding table in row ranges
** (gather: ids outside the range leave their rows alone after the first
** window; scatter: skipped), column sums in row ranges (accumulated), and
** bias + GELU and dropout in element ranges (whole rows; Philox counters
** moved on with the range). */
static int misc_split(uint32_t mode, bert_tensor *o, const bert_tensor *x, const bert_tensor *b,
                      const bert_tensor *ids, misc_push *p) {
  int64_t lim = (int64_t)max_bind() / 4, N = p->N ? p->N : 1;
  if (mode == MISC_EMBED_GATHER || mode == MISC_EMBED_SCATTER) {   /* x (gather) or o (scatter): the [V, N] table */
    int gather = mode == MISC_EMBED_GATHER;
    const bert_tensor *tab = gather ? x : o;
    int64_t V = tab->shape[0], rows = lim / N, nr = gather ? p->n / N : p->R;
    if (rows < 1 || nr * N > lim) goto cannot;
    /* the scatter loops over the ids in each invocation: VK_MAX_LOOP at a time */
    int64_t rstep = gather || nr <= (int64_t)VK_MAX_LOOP ? (nr > 0 ? nr : 1) : (int64_t)VK_MAX_LOOP;
    for (int64_t v0 = 0; v0 < V; v0 += rows) {
      int64_t nv = V - v0 < rows ? V - v0 : rows;
      for (int64_t r0 = 0; r0 < (gather ? 1 : nr); r0 += rstep) {
        int64_t nrr = gather ? nr : (nr - r0 < rstep ? nr - r0 : rstep);
        misc_push q = *p;
        q.v0 = (uint32_t)v0;
        q.vn = (uint32_t)nv;
        if (!gather) q.R = (uint32_t)nrr;
        if (gather && v0 > 0) q.flags |= MISC_LATER_WIN;
        vkx_bind tw = bind_el(tab, v0 * N, nv * N);
        vkx_bind bd[4] = {gather ? bind_of(o) : tw, gather ? tw : bind_el(x, r0 * N, nrr * N), tw,
                          gather ? bind_of(ids) : bind_el(ids, r0, nrr)};
        if (misc_raw(bd, &q, gather ? p->n : (uint64_t)N) != 0) return -1;
      }
    }
    return 0;
  }
  if (mode == MISC_COLUMN_SUMS) {   /* column sums over R rows of x, VK_MAX_LOOP rows at a time at most */
    int64_t R = p->R, rows = lim / N;
    if (rows > (int64_t)VK_MAX_LOOP) rows = VK_MAX_LOOP;
    if (rows < 1) goto cannot;
    for (int64_t r0 = 0; r0 < R; r0 += rows) {
      int64_t nr = R - r0 < rows ? R - r0 : rows;
      misc_push q = *p;
      q.R = (uint32_t)nr;
      if (r0 > 0) q.flags |= MISC_ACCUMULATE;
      vkx_bind bd[4] = {bind_of(o), bind_el(x, r0 * N, nr * N), bind_of(o), bind_of(o)};
      if (misc_raw(bd, &q, (uint64_t)N) != 0) return -1;
    }
    return 0;
  }
  int gelu = mode == MISC_BIAS_GELU || mode == MISC_BIAS_GELU_BACKWARD;
  if (gelu || mode == MISC_DROPOUT) {   /* elementwise over n: windows of whole rows (multiples of 4) */
    int64_t n = p->n, unit = gelu ? N : 4;
    int64_t step = lim / unit * unit;
    if (step < unit || (b && bind_of(b).len > (size_t)lim * 4)) goto cannot;
    for (int64_t e0 = 0; e0 < n; e0 += step) {
      int64_t ne = n - e0 < step ? n - e0 : step;
      misc_push q = *p;
      q.n = (uint32_t)ne;
      if (mode == MISC_DROPOUT) {
        uint64_t off = ((uint64_t)p->off_hi << 32 | p->off_lo) + (uint64_t)(e0 / 4);
        q.off_lo = (uint32_t)off;
        q.off_hi = (uint32_t)(off >> 32);
      }
      vkx_bind bd[4] = {bind_el(o, e0, ne), bind_el(x, e0, ne), b ? bind_of(b) : bind_el(o, e0, 1),
                        mode == MISC_BIAS_GELU_BACKWARD ? bind_el(ids, e0, ne) : bind_el(o, e0, 1)};
      if (misc_raw(bd, &q, (uint64_t)ne) != 0) return -1;
    }
    return 0;
  }
cannot:
  bert_set_error("vulkan: nn_misc mode %u: a tensor exceeds the binding range and this kernel is not split", mode);
  return -1;
}

static int misc_dispatch(uint32_t mode, bert_tensor *o, const bert_tensor *x, const bert_tensor *b,
                         const bert_tensor *ids, misc_push *p, uint64_t nthreads) {
  p->mode = mode;
  if (mode == MISC_EMBED_GATHER && p->vn == 0) p->vn = p->R;
  vkx_bind bd[4] = {bind_of(o), bind_of(x ? x : o), bind_of(b ? b : o), bind_of(ids ? ids : o)};
  if (nthreads == 0) return 0;
  int long_loop = (mode == MISC_COLUMN_SUMS || mode == MISC_EMBED_SCATTER) && p->R > VK_MAX_LOOP;
  if (!binds_fit(4, bd) || long_loop) return misc_split(mode, o, x, b, ids, p);
  return misc_raw(bd, p, nthreads);
}

bert_tensor *bert_vk_bias_gelu(bert_tensor *x_in, bert_tensor *b_in, int tanh_mode) {
  if (need_vk("bias_gelu", x_in, "the input") || need_vk("bias_gelu", b_in, "the bias")) return NULL;
  int64_t N = x_in->shape[x_in->ndim - 1];   /* checked by core/nn.c */
  bert_tensor *x = bert_contiguous(x_in), *b = b_in ? bert_contiguous(b_in) : NULL, *y = NULL;
  if (x && (!b_in || b)) {
    y = bert_vk_empty(BERT_F32, x->ndim, x->shape);
    misc_push p = {(uint32_t)bert_numel(x), (uint32_t)(N ? N : 1), 0, 0, (b ? MISC_HAS_BIAS : 0u) | (tanh_mode ? MISC_TANH : 0u), 0, 0, 0, 0, 0, 0, 0, 0};
    if (y && misc_dispatch(MISC_BIAS_GELU, y, x, b, NULL, &p, p.n) != 0) { bert_tensor_release(y); y = NULL; }
  }
  bert_tensor_release(x);
  bert_tensor_release(b);
  return y;
}

/* dx = dy * gelu'(x + b); dy is bound in the kernel's index slot (read as
** float bits), so the dispatch splits like the forward. */
bert_tensor *bert_vk_gelu_backward(bert_tensor *dy_in, bert_tensor *x_in, bert_tensor *b_in, int tanh_mode) {
  char s1[160], s2[160];
  const char *f = "gelu_backward";
  if (need_vk(f, dy_in, "the gradient") || need_vk(f, x_in, "the input") || need_vk(f, b_in, "the bias")) return NULL;
  int64_t N = x_in->ndim ? x_in->shape[x_in->ndim - 1] : 1;
  if (!same_shape(dy_in, x_in) || (b_in && (b_in->ndim != 1 || b_in->shape[0] != N))) {
    bert_set_error("%s: gradient %s, input %s: shapes must match (bias [%lld])", f, SHAPE(s1, dy_in),
                   SHAPE(s2, x_in), (long long)N);
    return NULL;
  }
  bert_tensor *dy = bert_contiguous(dy_in), *x = bert_contiguous(x_in), *b = b_in ? bert_contiguous(b_in) : NULL;
  bert_tensor *dx = bert_vk_empty(BERT_F32, x_in->ndim, x_in->shape);
  int ok = dy && x && (!b_in || b) && dx;
  misc_push p = {(uint32_t)bert_numel(x_in), (uint32_t)(N ? N : 1), 0, 0, (b ? MISC_HAS_BIAS : 0u) | (tanh_mode ? MISC_TANH : 0u),
                 0, 0, 0, 0, 0, 0, 0, 0};
  if (ok) ok = misc_dispatch(MISC_BIAS_GELU_BACKWARD, dx, x, b, dy, &p, p.n) == 0;
  bert_tensor_release(dy);
  bert_tensor_release(x);
  bert_tensor_release(b);
  if (!ok) { bert_tensor_release(dx); return NULL; }
  return dx;
}

bert_tensor *bert_vk_column_sums(bert_tensor *g_in) {
  int64_t N = g_in->shape[g_in->ndim - 1], R = N ? bert_numel(g_in) / N : 0;
  bert_tensor *g = bert_contiguous(g_in), *o = bert_vk_empty(BERT_F32, 1, &N);
  misc_push p = {(uint32_t)N, (uint32_t)N, (uint32_t)R, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  if (!g || !o || misc_dispatch(MISC_COLUMN_SUMS, o, g, NULL, NULL, &p, (uint64_t)N) != 0) { bert_tensor_release(o); o = NULL; }
  bert_tensor_release(g);
  return o;
}

static uint32_t keep_threshold(double p) {
  double t = p * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}

/* The mask of (seed, offset), as the CPU's dropout (nn/dropout.c). */
bert_tensor *bert_vk_dropout_mask(bert_tensor *x_in, double p, uint64_t seed, uint64_t offset) {
  bert_tensor *x = bert_contiguous(x_in);
  if (x == NULL) return NULL;
  bert_tensor *y = bert_vk_empty(BERT_F32, x->ndim, x->shape);
  misc_push mp = {(uint32_t)bert_numel(x), 1, 0, 0, 0, keep_threshold(p),
                  p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p)),
                  (uint32_t)seed, (uint32_t)(seed >> 32), (uint32_t)offset, (uint32_t)(offset >> 32), 0, 0};
  if (y && misc_dispatch(MISC_DROPOUT, y, x, NULL, NULL, &mp, mp.n) != 0) { bert_tensor_release(y); y = NULL; }
  bert_tensor_release(x);
  return y;
}

static bert_tensor *embedding_fwd(bert_tensor *ids_in, bert_tensor *w);

bert_tensor *bert_vk_embedding(bert_tensor *ids_in, bert_tensor *w) { return embedding_fwd(ids_in, w); }

/* ids checked by core/nn.c (or index_select's front-end): int32, in range */
static bert_tensor *embedding_fwd(bert_tensor *ids_in, bert_tensor *w) {
  if (need_vk("embedding", w, "the weight")) return NULL;
  /* host ids (positions made on the cpu) are uploaded: they are small */
  bert_tensor *ids = bert_is_vk(ids_in) ? bert_contiguous(ids_in) : bert_vk_upload(ids_in);
  bert_tensor *wc = bert_contiguous(w), *y = NULL;
  if (ids && wc) {
    int64_t shape[BERT_MAX_DIMS], H = w->shape[1], R = bert_numel(ids);
    memcpy(shape, ids->shape, sizeof shape);
    shape[ids->ndim] = H;
    y = bert_vk_empty(BERT_F32, ids->ndim + 1, shape);
    misc_push p = {(uint32_t)(R * H), (uint32_t)H, (uint32_t)w->shape[0], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (y && misc_dispatch(MISC_EMBED_GATHER, y, wc, NULL, ids, &p, p.n) != 0) { bert_tensor_release(y); y = NULL; }
  }
  bert_tensor_release(ids);
  bert_tensor_release(wc);
  return y;
}

/* dW[ids[r]] += dy[r] (dw: contiguous [V, H] device tensor, accumulated). */
int bert_vk_embedding_backward(bert_tensor *dw, bert_tensor *ids_in, bert_tensor *dy_in) {
  bert_tensor *ids = bert_contiguous(ids_in), *dy = bert_contiguous(dy_in);
  int rc = -1;
  if (ids && dy) {
    int64_t H = dw->shape[1];
    misc_push p = {(uint32_t)H, (uint32_t)H, (uint32_t)bert_numel(ids), 0, 0, 0, 0, 0, 0, 0, 0, 0,
                   (uint32_t)dw->shape[0]};
    rc = misc_dispatch(MISC_EMBED_SCATTER, dw, dy, NULL, ids, &p, (uint64_t)H);
  }
  bert_tensor_release(ids);
  bert_tensor_release(dy);
  return rc;
}

typedef struct { uint32_t R, C, mode, mean; int32_t ignore; uint32_t r0, Rall; float count; } ce_push;

/* Modes 0 and 2 of the cross-entropy kernel over rows of logits (and of
** the output o: one value per row in mode 0, C in mode 2), in windows of
** rows when the logits do not fit one binding; labels and g bound whole. */
static int ce_rows(ce_push p, bert_tensor *o, const bert_tensor *x, const bert_tensor *lab, const bert_tensor *g) {
  int64_t R = p.R, C = p.C, ostep = p.mode == 0u ? 1 : C;
  vkx_bind bd[4] = {bind_of(o), bind_of(x), bind_of(lab), bind_of(g)};
  uint32_t gx, gy;
  p.r0 = 0;
  p.Rall = (uint32_t)R;
  if (R == 0) return 0;
  if (binds_fit(4, bd)) {
    grid_1d((uint64_t)R, 1, &gx, &gy);
    return vkx_dispatch("cross_entropy", NULL, 0, 4, bd, &p, sizeof p, gx, gy, 1);
  }
  int64_t rc = (int64_t)max_bind() / 4 / (C > 0 ? C : 1);
  if (rc < 1) { bert_set_error("cross_entropy: vulkan: a row of %lld logits exceeds the binding range", (long long)C); return -1; }
  for (int64_t r0 = 0; r0 < R; r0 += rc) {
    int64_t n = R - r0 < rc ? R - r0 : rc;
    ce_push q = p;
    q.R = (uint32_t)n;
    q.r0 = (uint32_t)r0;
    vkx_bind w[4] = {bind_el(o, r0 * ostep, n * ostep), bind_el(x, r0 * C, n * C), bd[2], bd[3]};
    grid_1d((uint64_t)n, 1, &gx, &gy);
    if (vkx_dispatch("cross_entropy", NULL, 0, 4, w, &q, sizeof q, gx, gy, 1) != 0) return -1;
  }
  return 0;
}

/* arguments checked by core/nn.c: labels in range or ignore_index */
bert_tensor *bert_vk_cross_entropy(bert_tensor *logits, bert_tensor *labels, int64_t ignore_index,
                                   int reduction, int64_t count) {
  if (need_vk("cross_entropy", logits, "the logits")) return NULL;
  int64_t C = logits->shape[logits->ndim - 1];
  int64_t R = bert_numel(labels);
  bert_tensor *x = bert_contiguous(logits), *rows = NULL, *out = NULL;
  bert_tensor *lab = bert_is_vk(labels) ? bert_contiguous(labels) : bert_vk_upload(labels);
  if (!x || !lab) goto done;
  rows = reduction == BERT_REDUCE_NONE ? bert_vk_empty(BERT_F32, labels->ndim, labels->shape)
                                       : bert_vk_empty(BERT_F32, 1, &R);
  if (rows == NULL) goto done;
  ce_push p = {(uint32_t)R, (uint32_t)C, 0, 0, (int32_t)ignore_index, 0, (uint32_t)R, (float)count};
  if (ce_rows(p, rows, x, lab, lab) != 0) goto done;
  if (reduction == BERT_REDUCE_NONE) { out = rows; rows = NULL; goto done; }
  out = bert_vk_empty(BERT_F32, 0, NULL);
  if (out == NULL) goto done;
  p.mode = 1;
  p.mean = reduction == BERT_REDUCE_MEAN;
  vkx_bind bd2[4] = {bind_of(out), bind_of(rows), bind_of(lab), bind_of(rows)};
  if (vkx_dispatch("cross_entropy", NULL, 0, 4, bd2, &p, sizeof p, 1, 1, 1) != 0) { bert_tensor_release(out); out = NULL; }
done:
  bert_tensor_release(x);
  bert_tensor_release(lab);
  bert_tensor_release(rows);
  return out;
}

/* dlogits for a mean / sum loss with upstream gradient g (1-element device tensor). */
bert_tensor *bert_vk_cross_entropy_backward(bert_tensor *logits, bert_tensor *labels, int64_t ignore_index,
                                            int reduction, int64_t count, bert_tensor *g) {
  int64_t C = logits->shape[logits->ndim - 1], R = bert_numel(labels);
  bert_tensor *x = bert_contiguous(logits), *lab = bert_contiguous(labels);
  bert_tensor *dx = bert_vk_empty(BERT_F32, logits->ndim, logits->shape);
  ce_push p = {(uint32_t)R, (uint32_t)C, 2, reduction == BERT_REDUCE_MEAN, (int32_t)ignore_index, 0, (uint32_t)R,
               (float)count};
  if (x && lab && dx) {
    if (ce_rows(p, dx, x, lab, g) != 0) { bert_tensor_release(dx); dx = NULL; }
  } else { bert_tensor_release(dx); dx = NULL; }
  bert_tensor_release(x);
  bert_tensor_release(lab);
  return dx;
}

typedef struct {
  uint32_t A, Tq, Tk, d, qs0, qs1, qs2, ks0, ks1, ks2, vs0, vs1, vs2, mask_bstride, mask_flags;
  float mask_value, scale;
  uint32_t thr;
  float keep_scale;
  uint32_t seed_lo, seed_hi, off_lo, off_hi;
} attn_push;

/* Elements one binding of batch items [b0, b0 + nb) of t spans, from there. */
static int64_t batch_span(const bert_tensor *t, int64_t nb) {
  int64_t rest = 1;
  for (int d = 1; d < t->ndim; d++)
    if (t->shape[d] > 1) rest += (t->shape[d] - 1) * t->stride[d];
  return (nb - 1) * t->stride[0] + rest;
}

static vkx_bind bind_batch(const bert_tensor *t, int64_t b0, int64_t nb) {
  vkx_bind b = {alloc_of(t), (size_t)(t->offset + b0 * t->stride[0]) * 4, (size_t)batch_span(t, nb) * 4};
  return b;
}

/* Batch items per attention dispatch: all of them, or windows of whole
** items when a [B, ...] tensor (n of them), the per-row statistics (rows
** per item) or the mask (mask_items: Tk per item, 0 when broadcast) exceed
** the binding range.  With dropout, windows start at multiples of 4 items
** unless an item's A*Tq*Tk counters are, so that the Philox offset moves on
** by whole blocks of 4.  -1 with an error when one item does not fit. */
static int64_t attn_window(const char *fname, const bert_tensor *const *t, int n, int64_t rows, int64_t mask_items,
                           int64_t per_item_counters, int dropout) {
  int64_t B = t[0]->shape[0], lim = (int64_t)max_bind() / 4, nb = B;
  for (int i = 0; i < n; i++) {
    int64_t one = batch_span(t[i], 1), s0 = t[i]->stride[0];
    if (one > lim) nb = 0;
    else if (s0 > 0 && 1 + (lim - one) / s0 < nb) nb = 1 + (lim - one) / s0;
  }
  if (rows > 0 && lim / rows < nb) nb = lim / rows;
  if (mask_items > 0 && lim / mask_items < nb) nb = lim / mask_items;
  if (nb < B && dropout && per_item_counters % 4 != 0) nb -= nb % 4;
  if (nb < 1) {
    bert_set_error("%s: vulkan: one batch item exceeds the binding range and attention does not split within it", fname);
    return -1;
  }
  return nb;
}

/* The Philox offset of a window starting at item b0 (counters in blocks of 4). */
static void attn_offset(uint32_t *lo, uint32_t *hi, int64_t b0, int64_t per_item_counters) {
  uint64_t off = ((uint64_t)*hi << 32 | *lo) + (uint64_t)(b0 * per_item_counters) / 4;
  *lo = (uint32_t)off;
  *hi = (uint32_t)(off >> 32);
}

/* Batch, head and time strides of q, k or v: [B, A, T, d], or [total, A, d]
** packed (batch stride 0: the sequences' first rows come from the offsets). */
static void attn_strides(const bert_tensor *t, uint32_t s[3]) {
  int packed = t->ndim == 3;
  s[0] = packed ? 0u : (uint32_t)t->stride[0];
  s[1] = (uint32_t)t->stride[1];
  s[2] = (uint32_t)t->stride[packed ? 0 : 2];
}

/* The push constants both attention passes share: shapes, the mask's
** layout (mc: the mask on the device) or, packed, the number of sequences,
** scale and the dropout stream. */
static void attn_params(attn_push *p, const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                        const bert_tensor *mc, const bert_attention_opts *o, bert_stream s) {
  int packed = o->cu_seqlens != NULL;
  int64_t B = packed ? o->cu_seqlens->shape[0] - 1 : q->shape[0], A = q->shape[1];
  int64_t Tq = packed ? o->max_seqlen : q->shape[2], Tk = packed ? o->max_seqlen : k->shape[2];
  int64_t d = q->shape[q->ndim - 1];
  uint32_t qs[3], ks[3], vs[3];
  attn_strides(q, qs); attn_strides(k, ks); attn_strides(v, vs);
  memset(p, 0, sizeof *p);
  p->A = (uint32_t)A; p->Tq = (uint32_t)Tq; p->Tk = (uint32_t)Tk; p->d = (uint32_t)d;
  p->qs0 = qs[0]; p->qs1 = qs[1]; p->qs2 = qs[2];
  p->ks0 = ks[0]; p->ks1 = ks[1]; p->ks2 = ks[2];
  p->vs0 = vs[0]; p->vs1 = vs[1]; p->vs2 = vs[2];
  if (packed) {
    p->mask_bstride = (uint32_t)B;   /* the shaders' VARLEN: the offsets sit in the mask's binding */
  } else if (mc) {
    int keep = mc->ndim == 2;
    p->mask_flags = 1u | (keep ? 2u : 0u) | (mc->dtype == BERT_I32 ? 4u : 0u);
    p->mask_bstride = (uint32_t)(mc->shape[0] == B && B > 1 ? Tk : 0);
    p->mask_value = o->mask_value != 0 ? (float)o->mask_value : -FLT_MAX;
  }
  p->scale = o->scale > 0 ? (float)o->scale : (float)(1.0 / sqrt((double)(d > 0 ? d : 1)));
  double pd = o->training ? o->dropout_p : 0.0;
  if (pd > 0) {
    p->thr = keep_threshold(pd);
    if (p->thr == 0) p->thr = 1;   /* 0 means "no dropout" to the shader */
    p->keep_scale = (float)(1.0 / (1.0 - pd));
    p->seed_lo = (uint32_t)s.seed; p->seed_hi = (uint32_t)(s.seed >> 32);
    p->off_lo = (uint32_t)s.offset; p->off_hi = (uint32_t)(s.offset >> 32);
  }
}

/* Packed sequences are dispatched whole: every binding must fit one range. */
static int attn_fits(const char *fname, const bert_tensor *const *t, int n) {
  size_t lim = max_bind();
  for (int i = 0; i < n; i++) {
    if (bind_of(t[i]).len > lim) {
      bert_set_error("%s: vulkan: packed sequences of %lld tokens exceed the binding range (the device does "
                     "not split them)", fname, (long long)t[0]->shape[0]);
      return -1;
    }
  }
  return 0;
}

/* The device runs loops of at most VK_MAX_LOOP keys or queries. */
static int attn_len_ok(const char *fname, const bert_attention_opts *o) {
  if (o->cu_seqlens && o->max_seqlen > VK_MAX_LOOP) {
    bert_set_error("%s: not supported on device vulkan (a packed sequence of %lld tokens: more than %d keys)",
                   fname, (long long)o->max_seqlen, (int)VK_MAX_LOOP);
    return -1;
  }
  return 0;
}

/* Forward (arguments checked by core/nn.c); *lse_out receives the
** [B*A*Tq] log-sum-exps. */
bert_tensor *bert_vk_attention_ex(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                                  const bert_attention_opts *o, bert_stream s, bert_tensor **lse_out) {
  const char *f = "attention";
  int packed = o->cu_seqlens != NULL, last = q_in->ndim - 1;
  if (attn_len_ok(f, o) != 0) return NULL;
  /* the mask's binding: the mask, or packed, the offsets */
  const bert_tensor *m = packed ? o->cu_seqlens : o->mask;
  int64_t A = q_in->shape[1], d = q_in->shape[last];
  int64_t B = packed ? o->cu_seqlens->shape[0] - 1 : q_in->shape[0];
  int64_t Tq = packed ? 0 : q_in->shape[2], Tk = packed ? 0 : k_in->shape[2];
  /* unit stride in the last dim */
  bert_tensor *q = q_in->stride[last] == 1 ? bert_alias(q_in) : bert_contiguous((bert_tensor *)q_in);
  bert_tensor *k = k_in->stride[last] == 1 ? bert_alias(k_in) : bert_contiguous((bert_tensor *)k_in);
  bert_tensor *v = v_in->stride[last] == 1 ? bert_alias(v_in) : bert_contiguous((bert_tensor *)v_in);
  bert_tensor *mc = !m ? NULL : bert_is_vk(m) ? bert_contiguous((bert_tensor *)m) : bert_vk_upload(m);
  int64_t oshape[4] = {B, A, Tq, d}, nl = packed ? q_in->shape[0] * A : B * A * Tq;
  bert_tensor *out = packed ? bert_vk_empty(BERT_F32, 3, q_in->shape) : bert_vk_empty(BERT_F32, 4, oshape);
  bert_tensor *lse = bert_vk_empty(BERT_F32, 1, &nl);
  if (!q || !k || !v || (m && !mc) || !out || !lse) goto fail;
  attn_push p;
  attn_params(&p, q, k, v, packed ? NULL : mc, o, s);
  uint32_t spec[2] = {o->causal ? 1u : 0u, packed ? 1u : 0u};
  if (packed && nl > 0 && d > 0) {
    const bert_tensor *bt[4] = {q, k, v, out};
    if (attn_fits(f, bt, 4) != 0) goto fail;
    vkx_bind bd[6] = {bind_of(out), bind_of(lse), bind_of(q), bind_of(k), bind_of(v), bind_of(mc)};
    uint32_t gx, gy;
    grid_1d((uint64_t)nl, 1, &gx, &gy);
    if (vkx_dispatch("attention", spec, 2, 6, bd, &p, sizeof p, gx, gy, 1) != 0) goto fail;
  } else if (nl > 0 && d > 0) {
    const bert_tensor *bt[4] = {q, k, v, out};
    int64_t per = A * Tq * Tk, nb = attn_window(f, bt, 4, A * Tq, p.mask_bstride ? Tk : 0, per, p.thr != 0);
    if (nb < 0) goto fail;
    for (int64_t b0 = 0; b0 < B; b0 += nb) {
      int64_t n = B - b0 < nb ? B - b0 : nb;
      attn_push w = p;
      attn_offset(&w.off_lo, &w.off_hi, b0, per);
      vkx_bind bd[6] = {bind_batch(out, b0, n), bind_el(lse, b0 * A * Tq, n * A * Tq), bind_batch(q, b0, n),
                        bind_batch(k, b0, n), bind_batch(v, b0, n),
                        !mc ? bind_el(q, 0, 1) : p.mask_bstride ? bind_el(mc, b0 * Tk, n * Tk) : bind_of(mc)};
      uint32_t gx, gy;
      grid_1d((uint64_t)(n * A * Tq), 1, &gx, &gy);
      if (vkx_dispatch("attention", spec, 2, 6, bd, &w, sizeof w, gx, gy, 1) != 0) goto fail;
    }
  }
  if (lse_out) { *lse_out = lse; lse = NULL; }
  goto done;
fail:
  bert_tensor_release(out);
  out = NULL;
done:
  bert_tensor_release(q);
  bert_tensor_release(k);
  bert_tensor_release(v);
  bert_tensor_release(mc);
  bert_tensor_release(lse);
  return out;
}

typedef struct {
  uint32_t A, Tq, Tk, d, qs0, qs1, qs2, ks0, ks1, ks2, mask_bstride, mask_flags;
  float mask_value, scale;
  uint32_t thr;
  float keep_scale;
  uint32_t seed_lo, seed_hi, off_lo, off_hi, mode;
} attn_bwd_push;

/* dQ, dK, dV from the forward's saved state, out and its gradient. */
int bert_vk_attention_backward(const bert_tensor *q_in, const bert_tensor *k_in, const bert_tensor *v_in,
                               const bert_attention_opts *opts, bert_stream s, const bert_tensor *out,
                               const bert_tensor *lse, const bert_tensor *dout,
                               bert_tensor **dq_out, bert_tensor **dk_out, bert_tensor **dv_out) {
  const char *f = "attention_backward";
  int packed = opts->cu_seqlens != NULL, last = q_in->ndim - 1;
  if (attn_len_ok(f, opts) != 0) return -1;
  /* q as the forward bound it; k and v with one set of strides */
  bert_tensor *q = q_in->stride[last] == 1 ? bert_alias(q_in) : bert_contiguous((bert_tensor *)q_in);
  int same = k_in->stride[last] == 1 && v_in->stride[last] == 1;
  for (int d = 0; d < last; d++) same &= k_in->stride[d] == v_in->stride[d];
  bert_tensor *k = same ? bert_alias(k_in) : bert_contiguous((bert_tensor *)k_in);
  bert_tensor *v = same ? bert_alias(v_in) : bert_contiguous((bert_tensor *)v_in);
  const bert_tensor *m = packed ? opts->cu_seqlens : opts->mask;
  bert_tensor *mc = !m ? NULL : bert_is_vk(m) ? bert_contiguous((bert_tensor *)m) : bert_vk_upload(m);
  int64_t A = q_in->shape[1], d = q_in->shape[last];
  int64_t B = packed ? opts->cu_seqlens->shape[0] - 1 : q_in->shape[0];
  int64_t Tq = packed ? 0 : q_in->shape[2], Tk = packed ? 0 : k_in->shape[2];
  int64_t nq = packed ? q_in->shape[0] * A : B * A * Tq;
  bert_tensor *o = bert_contiguous((bert_tensor *)out), *g = bert_contiguous((bert_tensor *)dout);
  bert_tensor *dq = bert_vk_empty(BERT_F32, q_in->ndim, q_in->shape), *dk = bert_vk_empty(BERT_F32, k_in->ndim, k_in->shape);
  bert_tensor *dv = bert_vk_empty(BERT_F32, k_in->ndim, k_in->shape), *D = bert_vk_empty(BERT_F32, 1, &nq);
  int rc = -1;
  if (!q || !k || !v || (m && !mc) || !o || !g || !dq || !dk || !dv || !D) goto done;
  attn_push fp;
  attn_params(&fp, q, k, v, packed ? NULL : mc, opts, s);
  attn_bwd_push p = {fp.A, fp.Tq, fp.Tk, fp.d, fp.qs0, fp.qs1, fp.qs2, fp.ks0, fp.ks1, fp.ks2, fp.mask_bstride,
                     fp.mask_flags, fp.mask_value, fp.scale, fp.thr, fp.keep_scale, fp.seed_lo, fp.seed_hi,
                     fp.off_lo, fp.off_hi, 1};
  uint32_t spec[2] = {opts->causal ? 1u : 0u, packed ? 1u : 0u};
  if (packed && nq > 0 && d > 0) {
    const bert_tensor *bt[8] = {q, k, v, o, g, dq, dk, dv};
    if (attn_fits(f, bt, 8) != 0) goto done;
    vkx_bind bd[10] = {bind_of(dq), bind_of(dq), bind_of(D), bind_of(lse), bind_of(q), bind_of(k), bind_of(v),
                       bind_of(o), bind_of(g), bind_of(mc)};
    uint32_t gx, gy;
    grid_1d((uint64_t)nq, 1, &gx, &gy);
    if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
    p.mode = 2;
    bd[0] = bind_of(dk);
    bd[1] = bind_of(dv);
    if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &p, sizeof p, gx, gy, 1) != 0) goto done;
  } else if (nq > 0 && d > 0) {
    const bert_tensor *bt[8] = {q, k, v, o, g, dq, dk, dv};
    int64_t per = A * Tq * Tk, nb = attn_window(f, bt, 8, A * (Tq > Tk ? Tq : Tk),
                                                p.mask_bstride ? Tk : 0, per, p.thr != 0);
    if (nb < 0) goto done;
    for (int64_t b0 = 0; b0 < B; b0 += nb) {
      int64_t n = B - b0 < nb ? B - b0 : nb;
      attn_bwd_push w = p;
      attn_offset(&w.off_lo, &w.off_hi, b0, per);
      vkx_bind bd[10] = {bind_batch(dq, b0, n), bind_batch(dq, b0, n), bind_el(D, b0 * A * Tq, n * A * Tq),
                         bind_el(lse, b0 * A * Tq, n * A * Tq), bind_batch(q, b0, n), bind_batch(k, b0, n),
                         bind_batch(v, b0, n), bind_batch(o, b0, n), bind_batch(g, b0, n),
                         !mc ? bind_el(q, 0, 1)
                                   : p.mask_bstride ? bind_el(mc, b0 * Tk, n * Tk) : bind_of(mc)};
      uint32_t gx, gy;
      grid_1d((uint64_t)(n * A * Tq), 1, &gx, &gy);
      if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &w, sizeof w, gx, gy, 1) != 0) goto done;
      w.mode = 2;
      bd[0] = bind_batch(dk, b0, n);
      bd[1] = bind_batch(dv, b0, n);
      grid_1d((uint64_t)(n * A * Tk), 1, &gx, &gy);
      if (vkx_dispatch("attention_bwd", spec, 2, 10, bd, &w, sizeof w, gx, gy, 1) != 0) goto done;
    }
  }
  if (nq == 0 || d == 0) {
    if (bert_vk_fill_(dq, 0) || bert_vk_fill_(dk, 0) || bert_vk_fill_(dv, 0)) goto done;
  }
  *dq_out = dq; *dk_out = dk; *dv_out = dv;
  dq = dk = dv = NULL;
  rc = 0;
done:
  bert_tensor_release(q); bert_tensor_release(mc);
  bert_tensor_release(k); bert_tensor_release(v); bert_tensor_release(o); bert_tensor_release(g);
  bert_tensor_release(dq); bert_tensor_release(dk); bert_tensor_release(dv); bert_tensor_release(D);
  return rc;
}

/* out = t.index_select(dim, index): for float32 t and dim 0 the embedding
** gather over t viewed as [rows, rest], other cases on the host. */
bert_tensor *bert_vk_index_select(const bert_tensor *t, int dim, const bert_tensor *index) {
  char s1[160];
  if (dim != 0 || t->dtype != BERT_F32 || t->ndim < 1 || index->ndim != 1 || index->dtype != BERT_I32) {
    /* other cases: on the host */
    bert_tensor *h = bert_vk_download(t), *r = NULL, *idx = bert_is_vk(index) ? bert_vk_download(index) : NULL;
    if (h && (!bert_is_vk(index) || idx)) {
      bert_tensor *hr = bert_index_select(h, dim, idx ? idx : index);
      r = hr ? bert_vk_upload(hr) : NULL;
      bert_tensor_release(hr);
    }
    bert_tensor_release(h);
    bert_tensor_release(idx);
    return r;
  }
  int64_t V = t->shape[0], H = V ? bert_numel(t) / V : 0, n = index->shape[0];
  int64_t sh2[2] = {V, H};
  bert_tensor *tc = bert_contiguous((bert_tensor *)t);
  bert_tensor *t2 = tc ? bert_view(tc, 2, sh2) : NULL;
  bert_tensor_release(tc);
  if (t2 == NULL) return NULL;
  bert_tensor *y2 = n > 0 && H > 0 ? embedding_fwd((bert_tensor *)index, t2) : NULL;
  bert_tensor_release(t2);
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[0] = n;
  if (n == 0 || H == 0) return bert_vk_empty(BERT_F32, t->ndim, shape);
  if (y2 == NULL) return NULL;
  bert_tensor *y = bert_view(y2, t->ndim, shape);
  bert_tensor_release(y2);
  if (y == NULL) bert_set_error("index_select: vulkan: cannot view %s", SHAPE(s1, t));
  return y;
}

/* z.index_add_(0, index, g) for a contiguous float32 device z. */
int bert_vk_index_add0(bert_tensor *z, const bert_tensor *index, const bert_tensor *g) {
  int64_t V = z->shape[0], H = V ? bert_numel(z) / V : 0, n = index->shape[0];
  if (n == 0 || H == 0) return 0;
  int64_t sz[2] = {V, H}, sg[2] = {n, H};
  bert_tensor *z2 = bert_view(z, 2, sz), *gc = bert_contiguous((bert_tensor *)g), *g2 = gc ? bert_view(gc, 2, sg) : NULL;
  bert_tensor *ids = bert_is_vk(index) ? bert_contiguous((bert_tensor *)index) : bert_vk_upload(index);
  int rc = z2 && g2 && ids ? bert_vk_embedding_backward(z2, ids, g2) : -1;
  if (rc == 0) bert_bump_version(z);
  bert_tensor_release(z2); bert_tensor_release(gc); bert_tensor_release(g2); bert_tensor_release(ids);
  return rc;
}
/* }====================================================== */

/* {====================================================== optimizer */


/* Shapes, dtypes and hyperparameters are checked by core/optim.c; the
** operands must also all be on the device, and Adam's bias corrections. */
static int adam_args(const char *f, bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                     const bert_adam_cfg *cfg, double *bc1, double *bc2) {
  if (need_vk(f, p, "the parameter") || need_vk(f, g, "the gradient") || need_vk(f, m, "exp_avg") ||
      need_vk(f, v, "exp_avg_sq")) return -1;
  *bc1 = *bc2 = 1.0;
  if (cfg->bias_correction) {
    *bc1 = 1.0 - pow(cfg->beta1, (double)cfg->step);
    *bc2 = 1.0 - pow(cfg->beta2, (double)cfg->step);
  }
  return 0;
}

typedef struct { uint32_t n; float b1, c1, b2, c2, isb2, eps, decay, step; } adam_push;

int bert_vk_adamw_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                       const bert_adam_cfg *cfg) {
  const char *f = "adamw";
  double bc1, bc2;
  if (adam_args(f, p, g, m, v, cfg, &bc1, &bc2) != 0) return -1;
  int64_t n = bert_numel(p);
  adam_push k = {0, (float)cfg->beta1, (float)(1.0 - cfg->beta1), (float)cfg->beta2, (float)(1.0 - cfg->beta2),
                 (float)(1.0 / sqrt(bc2)), (float)cfg->eps, (float)(1.0 - cfg->lr * cfg->weight_decay),
                 (float)(cfg->lr / bc1)};
  /* chunks within maxStorageBufferRange (the flat buffers of large models) */
  int64_t chunk = (int64_t)(max_bind() / 4);
  if (chunk > (int64_t)1 << 30) chunk = (int64_t)1 << 30;
  for (int64_t s = 0; s < n; s += chunk) {
    int64_t len = n - s < chunk ? n - s : chunk;
    k.n = (uint32_t)len;
    vkx_bind bd[4] = {{alloc_of(p), (size_t)(p->offset + s) * 4, (size_t)len * 4},
                      {alloc_of(g), (size_t)(g->offset + s) * 4, (size_t)len * 4},
                      {alloc_of(m), (size_t)(m->offset + s) * 4, (size_t)len * 4},
                      {alloc_of(v), (size_t)(v->offset + s) * 4, (size_t)len * 4}};
    uint32_t gx, gy;
    grid_1d((uint64_t)len, 256, &gx, &gy);
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

/* LAMB as bert_lamb_step, the trust ratio computed and applied on the device
** (no host round trip per tensor); *trust_out (may be NULL) receives it as a
** one-element device tensor. */
int bert_vk_lamb_step(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                      const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out) {
  const char *f = "lamb";
  double bc1, bc2;
  if (adam_args(f, p, g, m, v, cfg, &bc1, &bc2) != 0) return -1;
  int64_t n = bert_numel(p);
  int64_t chunk = (int64_t)(max_bind() / 4) / 256 * 256, ngroups = (n + 255) / 256, plen = 4 * ngroups + 1;
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
      vkx_bind bd[5] = {bind_el(p, s, len), bind_el(g, s, len), bind_el(m, s, len), bind_el(v, s, len),
                        bind_of(part)};
      uint32_t gx = 1, gy = 1;
      if (mode != 1) grid_1d((uint64_t)len, 256, &gx, &gy);
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
/* }====================================================== */
