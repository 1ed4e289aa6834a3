/*
** bert_sgemm_packed: our own single-precision GEMM, the third provider
** ("bert").  The classic blocked scheme of packed GEMMs:
**
**   for jc over N in steps of NC            B block: kc x nc, lives in L2
**     for pc over K in steps of KC
**       pack op(B)[pc.., jc..] into kc x NR column panels
**       for ic over M in steps of MC        A block: mc x kc
**         pack op(A)[ic.., pc..] into MR x kc row panels
**         for ir over the row panels        one A panel, stays in L1
**           for jr over the column panels   B panels stream from L2
**             MR x NR tile of C += A panel @ B panel, in registers
**
** (The textbook order runs jr outside ir, keeping a B panel in L1; with a
** tile wider than tall the A panel is the smaller one to keep, and that
** order measured slower: docs/speed.md, "Our own GEMM".)  Packing lays B out in the order the
** tile reads it (contiguous, zero-padded past the last column), so the
** inner loop is nothing but loads, broadcasts and FMAs; A's panels are
** plain copies of its rows, which the tile reads with constant strides.
** alpha and beta are applied when a tile is stored: the first K block with
** the caller's beta, the later ones add to what the first wrote (beta = 1).
**
** Small problems (the per-head attention GEMMs: 128 x 128 x 64) spend a
** large share in packing, so there a row-major A is read in place, and a
** row-major B too when it has whole panels (see use_direct_a).
**
** The register tile is chosen at compile time: AVX-512 14 x 32, AVX2+FMA
** 6 x 16, else a portable 4 x 4 in plain C (what the sanitizer build,
** compiled without -march=native, runs).  Serial and reentrant: the pack
** buffers are per thread.
*/
#include <stddef.h>
#include <stdint.h>

#include "cpu/gemm.h"

/* {====================================================== vectors */

#if defined(__AVX512F__)
#include <immintrin.h>

/* 14 x 32: 28 zmm accumulators, 2 for the B row and 1 for the broadcast A
** value.  Two B loads and 14 broadcast loads feed 28 FMAs (14 cycles on
** two FMA ports).  12 x 32 measured slower, and leaves more rows over
** at M = 128. */
#define MR 14
#define VW 16
#define NV 2
typedef __m512 vec;
typedef __mmask16 vmask;

static inline vec v_zero(void) { return _mm512_setzero_ps(); }
static inline vec v_set(float x) { return _mm512_set1_ps(x); }
static inline vec v_loadu(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_storeu(float *p, vec v) { _mm512_storeu_ps(p, v); }
static inline vec v_fma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline vec v_mul(vec a, vec b) { return _mm512_mul_ps(a, b); }
static inline vmask v_mask(int64_t n) {
  return n >= VW ? (vmask)0xFFFF : n <= 0 ? (vmask)0 : (vmask)((1u << n) - 1);
}
static inline vec v_load_mask(const float *p, vmask m) { return _mm512_maskz_loadu_ps(m, p); }
static inline void v_store_mask(float *p, vmask m, vec v) { _mm512_mask_storeu_ps(p, m, v); }

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* 6 x 16: 12 ymm accumulators, 2 for the B row, 1 for the broadcast. */
#define MR 6
#define VW 8
#define NV 2
typedef __m256 vec;
typedef __m256i vmask;

static inline vec v_zero(void) { return _mm256_setzero_ps(); }
static inline vec v_set(float x) { return _mm256_set1_ps(x); }
static inline vec v_loadu(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_storeu(float *p, vec v) { _mm256_storeu_ps(p, v); }
static inline vec v_fma(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }
static inline vec v_mul(vec a, vec b) { return _mm256_mul_ps(a, b); }
static inline vmask v_mask(int64_t n) {
  int k = n >= VW ? VW : n <= 0 ? 0 : (int)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline vec v_load_mask(const float *p, vmask m) { return _mm256_maskload_ps(p, m); }
static inline void v_store_mask(float *p, vmask m, vec v) { _mm256_maskstore_ps(p, m, v); }

#else

/* Portable: a 4 x 4 tile of scalars ("vectors" of one lane). */
#define MR 4
#define VW 1
#define NV 4
typedef float vec;
typedef int vmask;

static inline vec v_zero(void) { return 0.0f; }
static inline vec v_set(float x) { return x; }
static inline vec v_loadu(const float *p) { return *p; }
static inline void v_storeu(float *p, vec v) { *p = v; }
static inline vec v_fma(vec a, vec b, vec c) { return a * b + c; }
static inline vec v_mul(vec a, vec b) { return a * b; }
static inline vmask v_mask(int64_t n) { return n > 0; }
static inline vec v_load_mask(const float *p, vmask m) { return m ? *p : 0.0f; }
static inline void v_store_mask(float *p, vmask m, vec v) { if (m) *p = v; }

#endif

#define NR (VW * NV)      /* columns of the register tile */

/* }====================================================== */

/* {====================================================== blocking */

/* KC = 256: an A panel (MR x KC floats, 14 KB at MR = 14) stays in the
**   48 KB L1 while every B panel of the block streams past it, and C is
**   read and written once per 256 steps of K (BERT's K of 768, 1024 and
**   3072 are 3, 4 and 12 such blocks; K is split into equal blocks).
** NC = 1024: the packed B block (KC x NC floats, 1 MB) fills half of the
**   2 MB L2, leaving room for the A block, C's tiles and the next rows.
**   (Larger KC with smaller NC measured no faster: docs/speed.md.)
** MC = 168 (12 panels of 14, 168 KB): how much of A is packed at a time.
**   Each A panel is used against the whole B block as soon as it is
**   packed, so MC only bounds the buffer (and how often the packing loop
**   and the tile loop take turns). */
#define KC 256
#define NC 1024
#define MC (MR * 12)

_Static_assert(NC % NR == 0, "NC must be a multiple of NR");
_Static_assert(MR == 4 || MR == 6 || MR == 12 || MR == 14, "the tile table below lists MR rows");

/* Per thread, so that concurrent calls (bert_sgemm splits a GEMM over the
** pool) never share a buffer; 64-byte aligned: no B load splits a line. */
static _Thread_local _Alignas(64) float b_pack[KC * NC];
static _Thread_local _Alignas(64) float a_pack[MC * KC];

/* }====================================================== */

/* {====================================================== register tile */

/* One tile's operands.  A comes in one of three layouts (see A_COLS below);
** B is packed (b[k * NR + j], zero beyond the matrix's last column), or
** with A_DIRECT possibly read in place (b[k * ldb + j], all NR columns
** inside the matrix). */
typedef struct {
  int64_t kc, lda, ldb, ldc;
  const float *a, *b;
  float *c;
  int64_t n;               /* columns of C to store, 1..NR */
  float alpha, beta;
} tile_args;

/* C[0..mr, 0..n) = alpha * acc + beta * C; beta == 0 never reads C. */
static inline __attribute__((always_inline)) void store_tile(const int mr, vec acc[MR][NV],
                                                             const tile_args *t) {
  vec va = v_set(t->alpha), vb = v_set(t->beta);
  int full = t->n == NR, read = t->beta != 0.0f;
#pragma GCC unroll 16
  for (int i = 0; i < mr; i++) {
    float *c = t->c + i * t->ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      vec x = v_mul(va, acc[i][v]);
      if (full) {
        if (read) x = v_fma(vb, v_loadu(c + v * VW), x);
        v_storeu(c + v * VW, x);
      } else {
        vmask m = v_mask(t->n - v * VW);
        if (read) x = v_fma(vb, v_load_mask(c + v * VW, m), x);
        v_store_mask(c + v * VW, m, x);
      }
    }
  }
}

/* The register tile: mr rows (a constant once inlined, so the accumulators
** are registers) by NR columns, over kc steps.  rs, cs: A's strides between
** rows and between steps of k; bs: B's stride between steps of k.  Row i
** of A is read from g[i / 3] + (i % 3) * rs: with rs not a constant, five
** base registers and one index reach all 14 rows (one pointer per row
** spilled registers, 174 against 181 GFLOP/s in the tile alone). */
static inline __attribute__((always_inline)) void micro_tile(const int mr, const tile_args *t,
                                                             int64_t rs, int64_t cs, int64_t bs) {
  vec acc[MR][NV];
  const float *b = t->b, *g[(MR + 2) / 3];
  for (int q = 0; q < (MR + 2) / 3; q++) g[q] = t->a + 3 * q * rs;
#pragma GCC unroll 16
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[i][v] = v_zero();
  /* C's lines are needed only at the end: ask for them now */
  for (int i = 0; i < mr; i++) {
    __builtin_prefetch(t->c + i * t->ldc);
    __builtin_prefetch(t->c + i * t->ldc + NR - 1);
  }
#pragma GCC unroll 4
  for (int64_t k = 0; k < t->kc; k++) {
    vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) bv[v] = v_loadu(b + v * VW);
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) {
      vec ai = v_set(g[i / 3][(i % 3) * rs]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[i][v] = v_fma(ai, bv[v], acc[i][v]);
    }
    for (int q = 0; q < (MR + 2) / 3; q++) g[q] += cs;
    b += bs;
  }
  store_tile(mr, acc, t);
}

typedef void (*tile_fn)(const tile_args *t);

/* Where element (i, k) of an A panel is:
**   A_COLS   packed from a transposed A: a[k * MR + i] (a copy of A's rows)
**   A_ROWS   packed from a row-major A: a[i * KC + k] (a copy of A's rows:
**            no transpose in packing; the constant stride lets the tile
**            address all MR rows from one register)
**   A_DIRECT a row-major A read in place: a[i * lda + k] */
enum { A_COLS, A_ROWS, A_DIRECT, A_LAYOUTS };

/* One function per row count and A layout: edge panels of fewer than MR
** rows run a tile of their own height instead of computing padding. */
#define TILES(m) \
  static void tile_cols_##m(const tile_args *t) { micro_tile(m, t, 1, MR, NR); } \
  static void tile_rows_##m(const tile_args *t) { micro_tile(m, t, KC, 1, NR); } \
  static void tile_direct_##m(const tile_args *t) { micro_tile(m, t, t->lda, 1, t->ldb); }
#define ENTRY(m) {tile_cols_##m, tile_rows_##m, tile_direct_##m}

TILES(1) TILES(2) TILES(3) TILES(4)
#if MR > 4
TILES(5) TILES(6)
#endif
#if MR > 6
TILES(7) TILES(8) TILES(9) TILES(10) TILES(11) TILES(12)
#endif
#if MR > 12
TILES(13) TILES(14)
#endif

static const tile_fn tiles[MR + 1][A_LAYOUTS] = {
  {NULL, NULL, NULL}, ENTRY(1), ENTRY(2), ENTRY(3), ENTRY(4),
#if MR > 4
  ENTRY(5), ENTRY(6),
#endif
#if MR > 6
  ENTRY(7), ENTRY(8), ENTRY(9), ENTRY(10), ENTRY(11), ENTRY(12),
#endif
#if MR > 12
  ENTRY(13), ENTRY(14),
#endif
};

/* }====================================================== */

/* {====================================================== packing */

/* dst[k * dld + j] = src[k * ld + j] for j < cols, 0 for cols <= j < width,
** k < rows: panels of an operand whose rows run along the panel.  The
** source usually comes from L3; asking for the row 8 ahead took the packing
** of A in 1024 x 768 x 3072 NN from 7.2% of the time to 5.7%. */
static void pack_copy(float *dst, int64_t dld, int64_t width, const float *src, int64_t ld,
                      int64_t rows, int64_t cols) {
  for (int64_t k = 0; k < rows; k++, dst += dld, src += ld)
    for (int64_t j = 0; j < width; j += VW) {
      if (k + 8 < rows && j < cols) __builtin_prefetch(src + 8 * ld + j);
      v_store_mask(dst + j, v_mask(width - j), v_load_mask(src + j, v_mask(cols - j)));
    }
}

#if defined(__AVX512F__)

/* In-register transpose of 16 rows of 16: r[t] becomes column t. */
static inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  /* pairs of rows interleaved: per 128-bit lane (r0[0] r1[0] r0[1] r1[1]) */
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  /* groups of 4 rows: q[g][c] holds, in lane L, column 4L+c of rows 4g..4g+3 */
  __m512 q[4][4];
  for (int g = 0; g < 4; g++) {
    q[g][0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    q[g][1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    q[g][2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    q[g][3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  /* a 4 x 4 transpose of 128-bit lanes gathers each column's four groups */
  for (int c = 0; c < 4; c++) {
    __m512 s0 = _mm512_shuffle_f32x4(q[0][c], q[1][c], 0x44);
    __m512 s1 = _mm512_shuffle_f32x4(q[0][c], q[1][c], 0xEE);
    __m512 s2 = _mm512_shuffle_f32x4(q[2][c], q[3][c], 0x44);
    __m512 s3 = _mm512_shuffle_f32x4(q[2][c], q[3][c], 0xEE);
    r[c] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    r[4 + c] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    r[8 + c] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}

/* dst[k * width + r] = src[r * ld + k] for r < rows, 0 for rows <= r < width,
** k < cols: panels of an operand whose rows run across the panel, 16 x 16
** blocks at a time. */
static void pack_transpose(float *dst, int64_t width, const float *src, int64_t ld, int64_t rows,
                           int64_t cols) {
  for (int64_t r0 = 0; r0 < width; r0 += 16) {
    int64_t h = rows - r0;
    vmask out = v_mask(width - r0);
    for (int64_t k0 = 0; k0 < cols; k0 += 16) {
      int64_t kn = cols - k0 < 16 ? cols - k0 : 16;
      vmask in = v_mask(kn);
      __m512 r[16];
      for (int i = 0; i < 16; i++)
        r[i] = i < h ? v_load_mask(src + (r0 + i) * ld + k0, in) : v_zero();
      transpose16(r);
      for (int64_t k = 0; k < kn; k++) v_store_mask(dst + (k0 + k) * width + r0, out, r[k]);
    }
  }
}

#else

static void pack_transpose(float *dst, int64_t width, const float *src, int64_t ld, int64_t rows,
                           int64_t cols) {
  for (int64_t k = 0; k < cols; k++, dst += width) {
    int64_t r = 0;
    for (; r < rows; r++) dst[r] = src[r * ld + k];
    for (; r < width; r++) dst[r] = 0.0f;
  }
}

#endif

/* op(B)[0..kc, 0..nc) (B at the block's first element) into NR-column
** panels, each kc x NR. */
static void pack_b(int trans_b, const float *B, int64_t ldb, int64_t kc, int64_t nc, float *dst) {
  for (int64_t j = 0; j < nc; j += NR, dst += NR * kc) {
    int64_t w = nc - j < NR ? nc - j : NR;
    if (trans_b) pack_transpose(dst, NR, B + j * ldb, ldb, w, kc);
    else pack_copy(dst, NR, NR, B + j, ldb, kc, w);
  }
}

/* The mc rows of an A block are cut into ceil(mc / MR) panels of near
** equal height (128 rows: 8 of 13 and 2 of 12, not 9 of 14 and 1 of 2: a
** thin tile has too few accumulators to hide the FMA latency).  Panel p
** starts at row panel_start(mc, p). */
static int64_t panel_count(int64_t mc) { return (mc + MR - 1) / MR; }

static int64_t panel_start(int64_t mc, int64_t p) {
  int64_t n = panel_count(mc), h = mc / n, extra = mc % n;
  return p * h + (p < extra ? p : extra);
}

/* op(A)[0..mc, 0..kc) into panels of MR * KC floats: A_COLS from a
** transposed A, A_ROWS from a row-major one, both plain copies of A's rows
** (a panel's rows beyond its height are never read). */
static void pack_a(int trans_a, const float *A, int64_t lda, int64_t mc, int64_t kc, float *dst) {
  for (int64_t p = 0; p < panel_count(mc); p++, dst += MR * KC) {
    int64_t i = panel_start(mc, p), h = panel_start(mc, p + 1) - i;
    if (trans_a) pack_copy(dst, MR, MR, A + i, lda, kc, h);
    else pack_copy(dst, KC, kc, A + i * lda, lda, h, kc);
  }
}

/* }====================================================== */

/* {====================================================== driver */

/* C[0..mc, 0..nc) = alpha * A block @ B block + beta * C, the A block in
** the given layout (lda: its row stride when A_DIRECT), B packed (ldb 0) or
** in place (ldb its row stride). */
static void macro_block(int layout, int64_t mc, int64_t nc, int64_t kc, const float *a, int64_t lda,
                        const float *b, int64_t ldb, float *c, int64_t ldc, float alpha, float beta) {
  tile_args t = {kc, lda, ldb ? ldb : NR, ldc, NULL, NULL, NULL, NR, alpha, beta};
  for (int64_t p = 0; p < panel_count(mc); p++) {
    int64_t ir = panel_start(mc, p), m = panel_start(mc, p + 1) - ir;
    tile_fn fn = tiles[m][layout];
    t.a = layout == A_DIRECT ? a + ir * lda : a + p * MR * KC;
    for (int64_t jr = 0; jr < nc; jr += NR) {
      t.b = ldb ? b + jr : b + jr * kc;
      t.c = c + ir * ldc + jr;
      t.n = nc - jr < NR ? nc - jr : NR;
      fn(&t);
    }
  }
}

/* Small problems (one K block, few B panels: the per-head attention GEMMs)
** read a row-major A in place rather than copy it, and a row-major B too
** when it has whole panels of NR columns.  Packing pays back when a panel
** is used many times; in place, a tile reads MR rows lda apart, which
** strides of a multiple of 4 KB map onto the same L1 sets. */
static int use_direct_a(int trans_a, int64_t N, int64_t K, int64_t lda) {
  if (trans_a) return 0;
  if (K > KC || N > 4 * NR) return 0;
  return (lda * (int64_t)sizeof(float)) % 4096 != 0;
}

/* C = beta * C, without reading C when beta == 0. */
static void scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

void bert_sgemm_packed(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                       float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) { scale_c(M, N, beta, C, ldc); return; }
  float *bp = b_pack, *ap = a_pack;
  int direct = use_direct_a(trans_a, N, K, lda);
  int direct_b = direct && !trans_b && N % NR == 0;
  /* K in equal blocks of at most KC: no thin last block */
  int64_t nk = (K + KC - 1) / KC, kstep = (K + nk - 1) / nk;
  for (int64_t jc = 0; jc < N; jc += NC) {
    int64_t nc = N - jc < NC ? N - jc : NC;
    for (int64_t pc = 0; pc < K; pc += kstep) {
      int64_t kc = K - pc < kstep ? K - pc : kstep;
      float bk = pc == 0 ? beta : 1.0f;
      const float *b = trans_b ? B + jc * ldb + pc : B + pc * ldb + jc;
      if (!direct_b) pack_b(trans_b, b, ldb, kc, nc, bp);
      for (int64_t ic = 0; ic < M; ic += MC) {
        int64_t mc = M - ic < MC ? M - ic : MC;
        float *c = C + ic * ldc + jc;
        if (direct) {
          macro_block(A_DIRECT, mc, nc, kc, A + ic * lda + pc, lda, direct_b ? b : bp,
                      direct_b ? ldb : 0, c, ldc, alpha, bk);
        } else {
          pack_a(trans_a, trans_a ? A + pc * lda + ic : A + ic * lda + pc, lda, mc, kc, ap);
          macro_block(trans_a ? A_COLS : A_ROWS, mc, nc, kc, ap, 0, bp, 0, c, ldc, alpha, bk);
        }
      }
    }
  }
}

/* }====================================================== */
