/*
** dropout on the CPU: the keep mask is a pure function of (seed, offset,
** element), so backward (the same kernel on the gradient) regenerates it.
*/
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

#define DROP_CHUNK 1024   /* elements per mask block (a multiple of 4) */

/* A pass over n elements (flat), or over N rows of W picked out of a
** larger [R, W] tensor: row n of in/out is row rows[n] there and takes that
** row's mask (packed sequences draw the masks of their padded batch
** without forming it). */
typedef struct {
  const float *in;
  float *out;
  int64_t n;              /* flat: elements */
  const int32_t *rows;    /* rows: [N], or NULL for flat */
  int64_t W;
  uint64_t seed, offset;
  double p;
  uint32_t thr;
  float scale;
} mask_job;

/* out[k] = in[k] * keep(element `counter` + k) * scale, len <= DROP_CHUNK */
static void mask_span(const mask_job *j, const float *in, float *out, uint64_t counter, int64_t len) {
  float m[DROP_CHUNK];
  if (j->p >= 1.0) { for (int64_t k = 0; k < len; k++) out[k] = 0.0f; return; }
  nn_dropout_row(j->seed, j->offset, counter, len, j->thr, j->scale, m);
  for (int64_t k = 0; k < len; k++) out[k] = in[k] * m[k];
}

static void mask_chunks(void *ctx, int64_t lo, int64_t hi) {
  const mask_job *j = ctx;
  for (int64_t c = lo; c < hi; c++) {
    int64_t i0 = c * DROP_CHUNK, len = i0 + DROP_CHUNK <= j->n ? DROP_CHUNK : j->n - i0;
    mask_span(j, j->in + i0, j->out + i0, (uint64_t)i0, len);
  }
}

static void mask_rows(void *ctx, int64_t lo, int64_t hi) {
  const mask_job *j = ctx;
  for (int64_t n = lo; n < hi; n++) {
    uint64_t base = (uint64_t)j->rows[n] * (uint64_t)j->W;
    for (int64_t c0 = 0; c0 < j->W; c0 += DROP_CHUNK) {
      int64_t len = c0 + DROP_CHUNK <= j->W ? DROP_CHUNK : j->W - c0;
      mask_span(j, j->in + n * j->W + c0, j->out + n * j->W + c0, base + (uint64_t)c0, len);
    }
  }
}

static mask_job make_job(const bert_tensor *x, bert_tensor *y, double p, bert_stream s) {
  mask_job j = {bert_f32(x), bert_f32(y), bert_numel(x), NULL, 0, s.seed, s.offset, p, nn_keep_threshold(p),
                p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p))};
  return j;
}

bert_tensor *cpu_dropout(const bert_tensor *x, double p, bert_stream s) {
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
  mask_job j = make_job(x, y, p, s);
  bert_parallel_for((j.n + DROP_CHUNK - 1) / DROP_CHUNK, bert_parallel_grain(DROP_CHUNK), mask_chunks, &j);
  return y;
}

bert_tensor *cpu_dropout_rows(const bert_tensor *x, double p, bert_stream s, const bert_tensor *rows) {
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
  mask_job j = make_job(x, y, p, s);
  j.rows = bert_i32(rows);
  j.W = x->shape[1];
  bert_parallel_for(x->shape[0], bert_parallel_grain(j.W), mask_rows, &j);
  return y;
}
