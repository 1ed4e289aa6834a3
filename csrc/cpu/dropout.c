/*
** dropout on the CPU: the keep mask is a pure function of (seed, offset,
** element), so backward (the same kernel on the gradient) regenerates it.
*/
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

#define DROP_CHUNK 1024   /* elements per mask block (a multiple of 4) */

/* out = in * keep(i) * scale for every element, in parallel over chunks. */
static void apply_mask(const float *in, float *out, int64_t n, uint64_t seed, uint64_t offset,
                       double p) {
  uint32_t thr = nn_keep_threshold(p);
  float scale = p >= 1.0 ? 0.0f : (float)(1.0 / (1.0 - p));
  int64_t nchunks = (n + DROP_CHUNK - 1) / DROP_CHUNK;
  #pragma omp parallel for schedule(static) if (n >= BERT_PARALLEL_MIN)
  for (int64_t c = 0; c < nchunks; c++) {
    float m[DROP_CHUNK];
    int64_t i0 = c * DROP_CHUNK, len = i0 + DROP_CHUNK <= n ? DROP_CHUNK : n - i0;
    if (p >= 1.0) { for (int64_t j = 0; j < len; j++) out[i0 + j] = 0.0f; continue; }
    nn_dropout_row(seed, offset, (uint64_t)i0, len, thr, scale, m);
    for (int64_t j = 0; j < len; j++) out[i0 + j] = in[i0 + j] * m[j];
  }
}

bert_tensor *cpu_dropout(const bert_tensor *x, double p, bert_stream s) {
  bert_tensor *y = bert_tensor_empty(BERT_F32, x->ndim, x->shape);
  if (y == NULL) return NULL;
  apply_mask(bert_f32(x), bert_f32(y), bert_numel(x), s.seed, s.offset, p);
  return y;
}
