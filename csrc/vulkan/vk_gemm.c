/*
** GEMM kernels (gemm.comp): the fused GEMM with its bias and GELU epilogue,
** the accumulating GEMM of the backward passes, and batched, broadcast
** matmul; products beyond one binding or deeper than a dispatch may loop
** are split into windows and K slices.
*/
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "core/ops.h"
#include "vulkan/vk_kernels.h"
#include "vulkan/vk_opcodes.h"

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
  int64_t lim = (int64_t)vk_max_bind() / 4, Mc = M, Nc = N, Kc = K;
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
          vkx_bind bd[4] = {{vk_alloc_of(c), (size_t)ca * 4, (size_t)((mc - 1) * (int64_t)N + nc) * 4},
                            {vk_alloc_of(a), (size_t)aa * 4, (size_t)((mc - 1) * sa[0] + (kc - 1) * sa[1] + 1) * 4},
                            {vk_alloc_of(b), (size_t)bb * 4, (size_t)((kc - 1) * sb[0] + (nc - 1) * sb[1] + 1) * 4},
                            {vk_alloc_of(c), (size_t)ca * 4, 4}};
          if (bias) { bd[3].a = vk_alloc_of(bias); bd[3].off = (size_t)(bias->offset + n0) * 4; bd[3].len = (size_t)nc * 4; }
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
  vkx_bind bd[4] = {vk_bind_of(c), vk_bind_of(a), vk_bind_of(b), vk_bind_of(bias ? bias : c)};
  if (!vk_binds_fit(4, bd) || K > GEMM_MAX_K)
    return gemm_split(c, a, b, bias, M, N, K, sa, sb, scb, batch, alpha, beta, flags);
  return vkx_dispatch("gemm", spec, 6, 4, bd, &p, sizeof p, (N + spec[2] - 1) / spec[2],
                      (M + spec[1] - 1) / spec[1], batch);
}

bert_tensor *bert_vk_gemm(const bert_tensor *a, int ta, const bert_tensor *b, int tb,
                          const bert_tensor *bias, int gelu) {
  int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  int64_t N = tb ? b->shape[0] : b->shape[1];
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

/* The backward GEMMs writing into gradient buffers. */
int bert_vk_gemm_into(bert_tensor *c, const bert_tensor *a, int ta, const bert_tensor *b, int tb, float beta) {
  int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  int64_t N = tb ? b->shape[0] : b->shape[1];
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

bert_tensor *vk_matmul(const bert_tensor *a_in, const bert_tensor *b_in) {
  bert_tensor *a = a_in->ndim == 1 ? bert_unsqueeze((bert_tensor *)a_in, 0) : bert_alias(a_in);
  bert_tensor *b = b_in->ndim == 1 ? bert_unsqueeze((bert_tensor *)b_in, 1) : bert_alias(b_in);
  bert_tensor *out = NULL;
  if (a == NULL || b == NULL) goto done;
  int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1];
  int64_t N = b->shape[b->ndim - 1];
  int64_t batch[BERT_MAX_DIMS];
  int nbd;
  bert_broadcast_shape(a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nbd, batch);   /* checked by core/ops.c */
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
