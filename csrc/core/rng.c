/*
** Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel
** random numbers: as easy as 1, 2, 3", SC'11).  Each output block is a
** pure function of (seed, counter), so any thread may compute any element
** and a seed gives the same numbers at every thread count.
*/
#include <math.h>

#include "core/parallel.h"
#include "core/backend.h"
#include "core/ops.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

void bert_philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(PHILOX_M0, c0, &hi0);
    uint32_t lo1 = mulhilo(PHILOX_M1, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static uint64_t rng_seed = 0x5eed, rng_offset = 0;

void bert_rng_set_state(uint64_t seed, uint64_t offset) { rng_seed = seed; rng_offset = offset; }

void bert_rng_get_state(uint64_t *seed, uint64_t *offset) { *seed = rng_seed; *offset = rng_offset; }

uint64_t bert_rng_get_seed(void) { return rng_seed; }

uint64_t bert_rng_reserve(uint64_t n) {
  uint64_t first = rng_offset;
  rng_offset += n;
  return first;
}

static int64_t shard_first = 0, shard_rows = 0, shard_total = 0;

void bert_rng_set_batch_shard(int64_t first, int64_t rows, int64_t total) {
  int on = rows > 0 && total > rows && first >= 0 && first + rows <= total;
  shard_first = on ? first : 0;
  shard_rows = on ? rows : 0;
  shard_total = on ? total : 0;
}

uint64_t bert_rng_reserve_batch(int64_t rows, int64_t per_row) {
  if (shard_rows == 0 || rows != shard_rows || per_row < 0)
    return bert_rng_reserve(((uint64_t)rows * (uint64_t)per_row + 3) / 4);
  uint64_t first = bert_rng_reserve(((uint64_t)shard_total * (uint64_t)per_row + 3) / 4);
  return first + (uint64_t)shard_first * (uint64_t)per_row / 4;
}

/* 24 random bits -> [0, 1) exactly representable in float */
static inline double unit(uint32_t x) { return (double)(x >> 8) * (1.0 / 16777216.0); }

/* Elements [lo, hi) of a random fill (each a pure function of its counter). */
typedef struct {
  float *f;
  int32_t *d;
  int64_t n;
  bert_rand_kind kind;
  uint64_t seed, offset;
  double a, b;
} fill_job;

static void fill_range(void *ctx, int64_t lo, int64_t hi) {
  const fill_job *j = ctx;
  float *f = j->f;
  int32_t *d = j->d;
  const int64_t n = j->n;
  const bert_rand_kind kind = j->kind;
  const uint64_t seed = j->seed, offset = j->offset;
  const double a = j->a, b = j->b;
  for (int64_t i = lo; i < hi; i++) {
    uint32_t r[4];
    double v;
    if (kind == BERT_RAND_NORMAL) {
      if (i & 1) continue;   /* filled with its even partner */
      bert_philox(seed, offset + (uint64_t)i, r);
      double u1 = ((double)r[0] + 1.0) * (1.0 / 4294967296.0);   /* (0, 1]: log is finite */
      double u2 = (double)r[1] * (1.0 / 4294967296.0);
      double radius = sqrt(-2.0 * log(u1)), s, c;
      sincos(6.283185307179586 * u2, &s, &c);
      double z0 = a + b * radius * c, z1 = a + b * radius * s;
      if (f) { f[i] = (float)z0; if (i + 1 < n) f[i + 1] = (float)z1; }
      else { d[i] = (int32_t)z0; if (i + 1 < n) d[i + 1] = (int32_t)z1; }
      continue;
    }
    bert_philox(seed, offset + (uint64_t)i, r);
    if (kind == BERT_RAND_UNIFORM) v = a + (b - a) * unit(r[0]);
    else {
      uint64_t span = (uint64_t)(b - a);
      uint64_t x = ((uint64_t)r[0] << 32) | r[1];
      v = a + (double)(x % span);   /* bias at most span / 2^64 */
    }
    if (f) f[i] = (float)v; else d[i] = (int32_t)v;
  }
}

int bert_fill_random(bert_tensor *t, bert_rand_kind kind, uint64_t seed, uint64_t offset,
                     double a, double b) {
  char buf[160];
  if (!bert_is_host(t)) {   /* a device's own generator, when it has one */
    const bert_backend *be;
    const bert_tensor *args[1] = {t};
    if (!BERT_DISPATCH(be, FILL_RANDOM, "fill_random", 1, args)) return -1;
    return be->fill_random(t, kind, seed, offset, a, b);
  }
  if (!bert_is_contiguous(t)) {
    bert_set_error("random fill needs a contiguous tensor, got strides of %s",
                   bert_shape_str(buf, sizeof buf, t->ndim, t->shape));
    return -1;
  }
  int64_t n = bert_numel(t);
  if (kind == BERT_RAND_INT && !(b > a)) {
    bert_set_error("randint: empty range [%.17g, %.17g)", a, b);
    return -1;
  }
  float *f = t->dtype == BERT_F32 ? bert_f32(t) : NULL;
  int32_t *d = t->dtype == BERT_I32 ? bert_i32(t) : NULL;
  /* Counters are offset + i for uniform and integer draws; normals come in
  ** Box-Muller pairs, elements 2k and 2k+1 sharing the block offset + 2k
  ** (cosine and sine of one draw), so each element still has a fixed counter. */
  fill_job job = {f, d, n, kind, seed, offset, a, b};
  bert_parallel_for(n, bert_parallel_grain(8), fill_range, &job);
  return 0;
}
