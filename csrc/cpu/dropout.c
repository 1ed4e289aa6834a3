/*
** dropout on the CPU: the keep mask is a pure function of (seed, offset,
** element), so backward (the same kernel on the gradient) regenerates it.
*/
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

#define DROP_CHUNK 1024   /* elements per mask block (a multiple of 4) */

typedef struct {
  const float *in;
  float *out;
  int64_t n;
  uint64_t seed, offset;
  double p;
  uint32_t thr;
  float scale;
} mask_job;

static void mask_chunks(void *ctx, int64_t lo, int64_t hi) {
  const mask_job *j = ctx;
  for (int64_t c = lo; c < hi; c++) {
    float m[DROP_CHUNK];
    int64_t i0 = c * DROP_CHUNK, len = i0 + DROP_CHUNK <= j->n ? DROP_CHUNK : j->n - i0;
    if (j->p >= 1.0) { for (int64_t k = 0; k < len; k++) j->out[i0 + k] = 0.0f; continue; }
    nn_dropout_row(j->seed, j->offset, (uint64_t)i0, len, j->thr, j->scale, m);
    for (int64_t k = 0; k < len; k++) j->out[i0 + k] = j->in[i0 + k] * m[k];
  }
}

/* out = in * keep(i) * scale for every element, in parallel over chunks. */
static void apply_mask(const float *in, float *out, int64_t n, uint64_t seed, uint64_t offset,
                       double p) {
  mask_job j = {in, out, n, seed, offset, p, nn_keep_threshold(p),
                p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p))};
  bert_parallel_for((n + DROP_CHUNK - 1) / DROP_CHUNK, bert_parallel_grain(DROP_CHUNK), mask_chunks, &j);
}

bert_tensor *cpu_dropout(const bert_tensor *x, double p, bert_stream s) {
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
  apply_mask(bert_f32(x), bert_f32(y), bert_numel(x), s.seed, s.offset, p);
  return y;
}

/* Dropout on rows picked out of a larger [R, W] tensor: row n of x is row
** rows[n] there and takes that row's mask (packed sequences draw the masks
** of their padded batch without forming it). */
typedef struct {
  const float *in;
  float *out;
  const int32_t *rows;
  int64_t W;
  uint64_t seed, offset;
  double p;
  uint32_t thr;
  float scale;
} rows_job;

static void mask_rows(void *ctx, int64_t lo, int64_t hi) {
  const rows_job *j = ctx;
  float m[DROP_CHUNK];
  for (int64_t n = lo; n < hi; n++) {
    const float *x = j->in + n * j->W;
    float *y = j->out + n * j->W;
    uint64_t base = (uint64_t)j->rows[n] * (uint64_t)j->W;
    for (int64_t c0 = 0; c0 < j->W; c0 += DROP_CHUNK) {
      int64_t len = c0 + DROP_CHUNK <= j->W ? DROP_CHUNK : j->W - c0;
      if (j->p >= 1.0) { for (int64_t k = 0; k < len; k++) y[c0 + k] = 0.0f; continue; }
      nn_dropout_row(j->seed, j->offset, base + (uint64_t)c0, len, j->thr, j->scale, m);
      for (int64_t k = 0; k < len; k++) y[c0 + k] = x[c0 + k] * m[k];
    }
  }
}

bert_tensor *cpu_dropout_rows(const bert_tensor *x, double p, bert_stream s, const bert_tensor *rows) {
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
  int64_t N = x->shape[0], W = x->shape[1];
  rows_job j = {bert_f32(x), bert_f32(y), bert_i32(rows), W, s.seed, s.offset, p, nn_keep_threshold(p),
                p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p))};
  bert_parallel_for(N, bert_parallel_grain(W), mask_rows, &j);
  return y;
}
