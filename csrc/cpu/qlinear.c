/*
** int8 linear on the CPU, inference only: y = x @ W^T + b with W quantised
** once and x quantised per call (dynamic quantisation).
**
** Weights: symmetric int8 per output channel, codes in [-127, 127],
** scale_w[n] = max |W[n, :]| / 127.  Activations: asymmetric per row, 7-bit
** codes in [0, 127] with a zero point z (0 stays exact), scale_x = (hi - lo)
** / 127 over [min(0, min x), max(0, max x)].  Why 7 bits: AVX2's vpmaddubsw
** adds two u8 x s8 products into a saturating int16, and 2 * 127 * 127 =
** 32258 fits, so no product ever saturates; the same u8 codes feed VNNI's
** vpdpbusd (AVX-512 VNNI, or AVX-VNNI's 256-bit form; no saturation at all)
** and the scalar loop.  Every path therefore
** computes the same exact int32 sums, and one shared epilogue turns them
** into floats: the SIMD paths are bit-for-bit equal to the scalar one.  A
** full 8-bit symmetric activation needs a sign fix-up per product on AVX2
** (one more instruction per 32 products); 7 asymmetric bits lose at most one
** bit against it, on rows symmetric about 0 (PyTorch's x86 default,
** reduce_range, makes the same trade).
**
**   y[m, n] = scale_x[m] * scale_w[n] * (sum_k a[m, k] w[n, k] - z[m] sum_k w[n, k]) + b[n]
**
** Error against fp32 (x_hat, w_hat the dequantised values, |x - x_hat| <=
** scale_x / 2, |w - w_hat| <= scale_w / 2):
**   |y - y_int8| <= scale_w[n] / 2 * sum_k |x[m, k]| + scale_x[m] / 2 * sum_k |w_hat[n, k]|
** plus float rounding of the epilogue (spec/int8_spec.lua checks it).
**
** Layout: W packed in panels of 16 output columns; within a panel, groups
** of 4 consecutive k for each column (64 bytes per k-group): one 32-bit
** broadcast of 4 activation codes times one panel load gives 16 (AVX-512)
** or 8 (AVX2) columns' partial sums with no horizontal reduction.  K is padded
** to a multiple of 4 and N to one of 16 with zero weights.
*/
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/parallel.h"
#include "cpu/cpu.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define QL_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#define PANEL 16      /* output columns per packed panel */
#define ROW_BLOCK 64  /* rows of one work item (a multiple of every kernel's row tile) */
#define COL_BLOCK 64  /* columns of one work item (a multiple of PANEL) */
/* int32 sums stay exact: |sum| <= K * 127 * 127 < 2^31 */
#define MAX_IN_FEATURES 131072

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* {====================================================== weights */

/* The code's byte in the packed layout: panel, k-group, column, k in group. */
static size_t packed_index(int64_t kp, int64_t n, int64_t k) {
  return (size_t)((n / PANEL) * PANEL * kp + (k / 4) * (PANEL * 4) + (n % PANEL) * 4 + k % 4);
}

bert_qweight *cpu_qweight_new(const bert_tensor *w_in) {
  char s[160];
  if (!bert_is_host(w_in) || w_in->dtype != BERT_F32 || w_in->ndim != 2) {
    bert_set_error("quantize_int8: expects a float32 [out x in] weight on the CPU, got %s %s on %s",
                   bert_dtype_name(w_in->dtype), SHAPE(s, w_in), bert_backend_of(w_in)->name);
    return NULL;
  }
  int64_t N = w_in->shape[0], K = w_in->shape[1];
  if (N < 1 || K < 1 || K > MAX_IN_FEATURES) {
    bert_set_error("quantize_int8: weight %s: needs 1 or more outputs and 1 .. %d inputs "
                   "(the int32 sums of int8 products stay exact)", SHAPE(s, w_in), MAX_IN_FEATURES);
    return NULL;
  }
  bert_tensor *w = bert_contiguous((bert_tensor *)w_in);
  if (w == NULL) return NULL;
  const float *W = bert_f32(w);
  int64_t kp = round_up(K, 4), np = round_up(N, PANEL);
  bert_qweight *q = calloc(1, sizeof *q);
  int8_t *codes = q ? calloc((size_t)(np * kp), 1) : NULL;
  float *scale = q ? malloc((size_t)N * sizeof(float)) : NULL;
  int32_t *sums = q ? malloc((size_t)N * sizeof(int32_t)) : NULL;
  if (codes == NULL || scale == NULL || sums == NULL) {
    free(codes); free(scale); free(sums); free(q);
    bert_tensor_release(w);
    bert_set_error("quantize_int8: out of memory for a %lld x %lld int8 weight", (long long)N, (long long)K);
    return NULL;
  }
  for (int64_t n = 0; n < N; n++) {
    const float *row = W + n * K;
    float amax = 0;
    int finite = 1;
    for (int64_t k = 0; k < K; k++) {
      float a = fabsf(row[k]);
      amax = a > amax ? a : amax;
      finite &= a <= FLT_MAX;   /* false for an infinity and for a NaN */
    }
    if (!finite) {
      free(codes); free(scale); free(sums); free(q);
      bert_tensor_release(w);
      bert_set_error("quantize_int8: weight row %lld has a non-finite value", (long long)n + 1);
      return NULL;
    }
    float inv = amax > 0 ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t k = 0; k < K; k++) {
      int c = (int)nearbyintf(row[k] * inv);
      c = c > 127 ? 127 : c < -127 ? -127 : c;
      codes[packed_index(kp, n, k)] = (int8_t)c;
      sum += c;
    }
    scale[n] = amax / 127.0f;
    sums[n] = sum;
  }
  bert_tensor_release(w);
  q->out_features = N;
  q->in_features = K;
  q->in_padded = kp;
  q->codes = codes;
  q->scale = scale;
  q->sums = sums;
  q->nbytes = (size_t)(np * kp) + (size_t)N * (sizeof(float) + sizeof(int32_t));
  return q;
}

void cpu_qweight_free(bert_qweight *q) {
  if (q == NULL) return;
  free(q->codes);
  free(q->scale);
  free(q->sums);
  free(q);
}

/* W_hat = codes * scale_w as float32 [out, in]. */
bert_tensor *cpu_qweight_dequantize(const bert_qweight *q) {
  int64_t shape[2] = {q->out_features, q->in_features};
  bert_tensor *t = bert_tensor_empty(BERT_F32, 2, shape);
  if (t == NULL) return NULL;
  float *out = bert_f32(t);
  for (int64_t n = 0; n < shape[0]; n++)
    for (int64_t k = 0; k < shape[1]; k++)
      out[n * shape[1] + k] = (float)q->codes[packed_index(q->in_padded, n, k)] * q->scale[n];
  return t;
}
/* }====================================================== */

/* {====================================================== kernels */

/* acc[r * ldacc + j] = sum_k A[r, k] * W[col j of the panel, k], for rows
** r < rows of A (u8 codes, row stride kp) and the panel's 16 columns. */
typedef void dots_fn(const uint8_t *A, int64_t kp, int rows, const int8_t *panel, int32_t *acc, int ldacc);

/* The reference: exact integer arithmetic, any CPU. */
static void dots_scalar(const uint8_t *A, int64_t kp, int rows, const int8_t *panel, int32_t *acc, int ldacc) {
  for (int r = 0; r < rows; r++) {
    const uint8_t *a = A + r * kp;
    int32_t s[PANEL] = {0};
    for (int64_t g = 0; g < kp / 4; g++) {
      const uint8_t *ag = a + 4 * g;
      const int8_t *wg = panel + g * (PANEL * 4);
      for (int j = 0; j < PANEL; j++)
        s[j] += ag[0] * wg[4 * j] + ag[1] * wg[4 * j + 1] + ag[2] * wg[4 * j + 2] + ag[3] * wg[4 * j + 3];
    }
    memcpy(acc + r * ldacc, s, sizeof s);
  }
}

#ifdef QL_X86
#define AVX2_TARGET __attribute__((target("avx2")))
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define AVX_VNNI_TARGET __attribute__((target("avx2,avxvnni")))
#define ALWAYS_INLINE inline __attribute__((always_inline))

static ALWAYS_INLINE int32_t load_group(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* The 256-bit kernels: R rows x 16 columns in two 8-column halves, 4 rows
** at a time.  STEP(acc, a, w) adds, per int32 lane (a column), the products
** of 4 u8 activation codes (a: broadcast) and that column's 4 s8 weights. */
#define DEFINE_DOTS_256(TARGET, dots, STEP)                                                      \
  TARGET static ALWAYS_INLINE void dots##_tile(const uint8_t *A, int64_t kp, int R,              \
                                               const int8_t *panel, int32_t *acc, int ldacc) {   \
    __m256i lo[4], hi[4];                                                                        \
    for (int r = 0; r < R; r++) lo[r] = hi[r] = _mm256_setzero_si256();                          \
    for (int64_t g = 0; g < kp / 4; g++) {                                                       \
      const __m256i w0 = _mm256_loadu_si256((const __m256i *)(panel + g * 64));                  \
      const __m256i w1 = _mm256_loadu_si256((const __m256i *)(panel + g * 64 + 32));             \
      for (int r = 0; r < R; r++) {                                                              \
        const __m256i a = _mm256_set1_epi32(load_group(A + r * kp + 4 * g));                     \
        lo[r] = STEP(lo[r], a, w0);                                                              \
        hi[r] = STEP(hi[r], a, w1);                                                              \
      }                                                                                          \
    }                                                                                            \
    for (int r = 0; r < R; r++) {                                                                \
      _mm256_storeu_si256((__m256i *)(acc + r * ldacc), lo[r]);                                  \
      _mm256_storeu_si256((__m256i *)(acc + r * ldacc + 8), hi[r]);                              \
    }                                                                                            \
  }                                                                                              \
  TARGET static void dots(const uint8_t *A, int64_t kp, int rows, const int8_t *panel,           \
                          int32_t *acc, int ldacc) {                                             \
    int r = 0;                                                                                   \
    for (; r + 4 <= rows; r += 4) dots##_tile(A + r * kp, kp, 4, panel, acc + r * ldacc, ldacc); \
    switch (rows - r) {   /* constant R: the tile's loops unroll */                              \
      case 3: dots##_tile(A + r * kp, kp, 3, panel, acc + r * ldacc, ldacc); break;              \
      case 2: dots##_tile(A + r * kp, kp, 2, panel, acc + r * ldacc, ldacc); break;              \
      case 1: dots##_tile(A + r * kp, kp, 1, panel, acc + r * ldacc, ldacc); break;              \
      default: break;                                                                            \
    }                                                                                            \
  }

/* AVX2: vpmaddubsw pairs u8 x s8 into int16 (never saturating: codes <=
** 127), vpmaddwd by 1 widens the pairs to int32. */
AVX2_TARGET static ALWAYS_INLINE __m256i step_avx2(__m256i acc, __m256i a, __m256i w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, w), _mm256_set1_epi16(1)));
}
DEFINE_DOTS_256(AVX2_TARGET, dots_avx2, step_avx2)

/* AVX-VNNI (AVX2 and VNNI, no AVX-512): the 256-bit vpdpbusd. */
AVX_VNNI_TARGET static ALWAYS_INLINE __m256i step_avx_vnni(__m256i acc, __m256i a, __m256i w) {
  return _mm256_dpbusd_avx_epi32(acc, a, w);
}
DEFINE_DOTS_256(AVX_VNNI_TARGET, dots_avx_vnni, step_avx_vnni)

/* AVX-512 VNNI: R rows x 16 columns, one vpdpbusd per row and k-group. */
VNNI_TARGET static ALWAYS_INLINE void tile_vnni(const uint8_t *A, int64_t kp, int R, const int8_t *panel,
                                                 int32_t *acc, int ldacc) {
  __m512i s[8];
  for (int r = 0; r < R; r++) s[r] = _mm512_setzero_si512();
  for (int64_t g = 0; g < kp / 4; g++) {
    const __m512i w = _mm512_loadu_si512((const void *)(panel + g * 64));
    for (int r = 0; r < R; r++)
      s[r] = _mm512_dpbusd_epi32(s[r], _mm512_set1_epi32(load_group(A + r * kp + 4 * g)), w);
  }
  for (int r = 0; r < R; r++) _mm512_storeu_si512((void *)(acc + r * ldacc), s[r]);
}

VNNI_TARGET static void dots_vnni(const uint8_t *A, int64_t kp, int rows, const int8_t *panel,
                                  int32_t *acc, int ldacc) {
  int r = 0;
  for (; r + 8 <= rows; r += 8) tile_vnni(A + r * kp, kp, 8, panel, acc + r * ldacc, ldacc);
  for (; r + 4 <= rows; r += 4) tile_vnni(A + r * kp, kp, 4, panel, acc + r * ldacc, ldacc);
  for (; r < rows; r++) tile_vnni(A + r * kp, kp, 1, panel, acc + r * ldacc, ldacc);
}

static int has_avx2(void) { __builtin_cpu_init(); return __builtin_cpu_supports("avx2"); }
/* CPUID leaf 7, sub-leaf 1, EAX bit 4 (compilers' cpu_supports names it only lately) */
static int has_avx_vnni(void) {
  unsigned a, b, c, d;
  return has_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
static int has_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}
#endif

static int always(void) { return 1; }

/* Best first: the default is the first one the CPU has. */
static const struct { const char *name; dots_fn *dots; int (*available)(void); } kernels[] = {
#ifdef QL_X86
  {"avx512vnni", dots_vnni, has_vnni},
  {"avxvnni", dots_avx_vnni, has_avx_vnni},
  {"avx2", dots_avx2, has_avx2},
#endif
  {"scalar", dots_scalar, always},
};
#define NKERNELS ((int)(sizeof kernels / sizeof kernels[0]))

static int kernel = -1;   /* index into kernels; -1 until first use */

static int find_kernel(const char *name) {
  for (int i = 0; i < NKERNELS; i++)
    if (strcmp(kernels[i].name, name) == 0) return i;
  return -1;
}

static int best_kernel(void) {
  int i = 0;
  while (!kernels[i].available()) i++;   /* the scalar one always is */
  return i;
}

/* BERT_INT8_KERNEL=scalar|avx2|avxvnni|avx512vnni forces a kernel the CPU has. */
static int current_kernel(void) {
  if (kernel < 0) {
    const char *env = getenv("BERT_INT8_KERNEL");
    int i = env ? find_kernel(env) : -1;
    kernel = i >= 0 && kernels[i].available() ? i : best_kernel();
  }
  return kernel;
}

const char *cpu_int8_kernel(void) { return kernels[current_kernel()].name; }

int cpu_int8_set_kernel(const char *name) {
  if (strcmp(name, "auto") == 0) { kernel = best_kernel(); return 0; }
  int i = find_kernel(name);
  if (i < 0 || !kernels[i].available()) {
    char list[128] = "";
    for (int j = 0; j < NKERNELS; j++)
      if (kernels[j].available()) { strcat(list, " "); strcat(list, kernels[j].name); }
    bert_set_error("int8_kernel: '%s' is %s (this CPU has: auto%s)", name,
                   i < 0 ? "not a kernel" : "not supported by this CPU", list);
    return -1;
  }
  kernel = i;
  return 0;
}

int cpu_int8_kernels(const char **names, int max) {
  int n = 0;
  for (int i = 0; i < NKERNELS && n < max; i++)
    if (kernels[i].available()) names[n++] = kernels[i].name;
  return n;
}
/* }====================================================== */

/* {====================================================== the op */

/* Activation rows quantised: codes [M, kp], scale and zero point per row.
** A row holding a NaN or an infinity gets scale NaN: its outputs are NaN,
** as the fp32 product's would be. */
typedef struct {
  const float *X;
  int64_t K, kp;
  uint8_t *codes;
  float *scale;
  int32_t *zero;
} quantize_job;

static void quantize_rows(void *ctx, int64_t lo_row, int64_t hi_row) {
  const quantize_job *j = ctx;
  const int64_t K = j->K, kp = j->kp;   /* locals: the byte stores below may alias j */
  for (int64_t m = lo_row; m < hi_row; m++) {
    const float *x = j->X + m * K;
    uint8_t *c = j->codes + m * kp;
    /* comparisons, not fminf / fmaxf (library calls); a NaN, which they
    ** skip, fails the finiteness test */
    float lo = 0, hi = 0;
    int finite = 1;
    #pragma omp simd reduction(min:lo) reduction(max:hi) reduction(&:finite)
    for (int64_t k = 0; k < K; k++) {
      lo = x[k] < lo ? x[k] : lo;
      hi = x[k] > hi ? x[k] : hi;
      finite &= fabsf(x[k]) <= FLT_MAX;
    }
    float range = hi - lo;
    if (!finite || range == 0) {
      memset(c, 0, (size_t)kp);
      j->scale[m] = finite ? 0.0f : NAN;
      j->zero[m] = 0;
      continue;
    }
    float inv = 127.0f / range;
    int32_t z = (int32_t)nearbyintf(-lo * inv);
    z = z > 127 ? 127 : z;
    #pragma omp simd
    for (int64_t k = 0; k < K; k++) {
      int32_t v = (int32_t)nearbyintf(x[k] * inv) + z;
      c[k] = (uint8_t)(v < 0 ? 0 : v > 127 ? 127 : v);
    }
    memset(c + K, 0, (size_t)(kp - K));
    j->scale[m] = range / 127.0f;
    j->zero[m] = z;
  }
}

typedef struct {
  const uint8_t *A;
  const float *xscale;
  const int32_t *xzero;
  const bert_qweight *q;
  const float *bias;
  float *Y;
  int64_t M, N, kp, col_blocks;
  dots_fn *dots;
} qgemm_job;

/* The one path from int32 sums to floats, whichever kernel made them.
** a - z * sum = sum_k (a_k - z) w_k, |.| <= K * 127 * 127: int32 throughout. */
static void dequantize_block(const qgemm_job *g, int64_t m0, int rows, int64_t n0, int cols,
                             const int32_t *acc) {
  const int32_t *sums = g->q->sums + n0;
  const float *sw = g->q->scale + n0;
  for (int r = 0; r < rows; r++) {
    float *y = g->Y + (m0 + r) * g->N + n0;
    const int32_t *a = acc + r * COL_BLOCK;
    const float sx = g->xscale[m0 + r];
    const int32_t z = g->xzero[m0 + r];
    if (g->bias) {
      const float *b = g->bias + n0;
      for (int c = 0; c < cols; c++) y[c] = (float)(a[c] - z * sums[c]) * (sx * sw[c]) + b[c];
    } else {
      for (int c = 0; c < cols; c++) y[c] = (float)(a[c] - z * sums[c]) * (sx * sw[c]);
    }
  }
}

/* Items are ROW_BLOCK x COL_BLOCK tiles of Y, consecutive items along the
** rows of one column block: a thread keeps its panels in cache. */
static void qgemm_items(void *ctx, int64_t lo, int64_t hi) {
  const qgemm_job *g = ctx;
  int32_t acc[ROW_BLOCK * COL_BLOCK];
  int64_t row_blocks = (g->M + ROW_BLOCK - 1) / ROW_BLOCK;
  for (int64_t it = lo; it < hi; it++) {
    int64_t m0 = (it % row_blocks) * ROW_BLOCK, n0 = (it / row_blocks) * COL_BLOCK;
    int rows = (int)(g->M - m0 < ROW_BLOCK ? g->M - m0 : ROW_BLOCK);
    int cols = (int)(g->N - n0 < COL_BLOCK ? g->N - n0 : COL_BLOCK);
    for (int p = 0; p < cols; p += PANEL)
      g->dots(g->A + m0 * g->kp, g->kp, rows, g->q->codes + (n0 + p) * g->kp, acc + p, COL_BLOCK);
    dequantize_block(g, m0, rows, n0, cols, acc);
  }
}

/* The node of a quantised linear: it refuses backward. */
static int linear_int8_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  (void)node; (void)out; (void)g;
  bert_set_error("linear_int8: a model quantised to int8 runs inference only, backward is not "
                 "supported (train the float32 model; model:quantize(nil) returns to it)");
  return -1;
}

static const bert_node_type linear_int8_node = {"linear_int8", linear_int8_backward, 0, 0};

bert_tensor *cpu_linear_int8(bert_tensor *x_in, const bert_qweight *q, bert_tensor *b_in) {
  char s1[160], s2[160];
  if (!bert_is_host(x_in) || (b_in && !bert_is_host(b_in))) {
    bert_set_error("linear_int8: runs on the CPU only, got input on %s%s%s", bert_backend_of(x_in)->name,
                   b_in ? ", bias on " : "", b_in ? bert_backend_of(b_in)->name : "");
    return NULL;
  }
  if (x_in->dtype != BERT_F32 || (b_in && b_in->dtype != BERT_F32)) {
    bert_set_error("linear_int8: expects float32 tensors, got input %s%s%s", bert_dtype_name(x_in->dtype),
                   b_in ? ", bias " : "", b_in ? bert_dtype_name(b_in->dtype) : "");
    return NULL;
  }
  int64_t N = q->out_features, K = q->in_features;
  if (x_in->ndim < 1 || x_in->shape[x_in->ndim - 1] != K) {
    bert_set_error("linear_int8: input %s and the int8 weight [%lld x %lld]: in_features differ",
                   SHAPE(s1, x_in), (long long)N, (long long)K);
    return NULL;
  }
  if (b_in && (b_in->ndim != 1 || b_in->shape[0] != N)) {
    bert_set_error("linear_int8: bias %s does not match the int8 weight [%lld x %lld] (expected [%lld])",
                   SHAPE(s2, b_in), (long long)N, (long long)K, (long long)N);
    return NULL;
  }
  bert_tensor *x = bert_contiguous(x_in), *b = b_in ? bert_contiguous(b_in) : NULL;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, x_in->shape, sizeof shape);
  shape[x_in->ndim - 1] = N;
  bert_tensor *y = x && (b || !b_in) ? bert_tensor_empty(BERT_F32, x_in->ndim, shape) : NULL;
  int64_t M = x ? bert_numel(x) / K : 0, kp = q->in_padded;
  uint8_t *codes = y ? malloc((size_t)(M * kp) + 1) : NULL;
  float *xscale = codes ? malloc((size_t)M * sizeof(float) + 1) : NULL;
  int32_t *xzero = xscale ? malloc((size_t)M * sizeof(int32_t) + 1) : NULL;
  if (xzero == NULL) {
    if (y) bert_set_error("linear_int8: out of memory for the int8 codes of %lld x %lld activations",
                          (long long)M, (long long)K);
    free(codes); free(xscale);
    bert_tensor_release(y); bert_tensor_release(x); bert_tensor_release(b);
    return NULL;
  }
  quantize_job qj = {bert_f32(x), K, kp, codes, xscale, xzero};
  bert_parallel_for(M, bert_parallel_grain(K), quantize_rows, &qj);
  qgemm_job g = {codes, xscale, xzero, q, b ? bert_f32(b) : NULL, bert_f32(y), M, N, kp,
                 (N + COL_BLOCK - 1) / COL_BLOCK, kernels[current_kernel()].dots};
  int64_t items = (M + ROW_BLOCK - 1) / ROW_BLOCK * g.col_blocks;
  /* an item is at most 64 x 64 x kp multiply-adds: a few splits per thread */
  int64_t grain = (int64_t)(1 << 20) / ((int64_t)ROW_BLOCK * COL_BLOCK * kp / 4 + 1);
  bert_parallel_for(items, grain > 0 ? grain : 1, qgemm_items, &g);
  free(codes); free(xscale); free(xzero);
  bert_tensor_release(x);
  bert_tensor_release(b);
  bert_tensor *in[2] = {x_in, b_in};
  bert_node *node;
  return bert_record(y, &node, &linear_int8_node, 2, in);
}
/* }====================================================== */
