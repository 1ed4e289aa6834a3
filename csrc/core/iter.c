/*
** The broadcasting loop behind every elementwise op (see iter.h).
*/
#include <string.h>

#include "core/iter.h"
#include "core/parallel.h"

void bert_iter_init(bert_iter *it, int nops, const bert_tensor *const *ops) {
  const bert_tensor *out = ops[0];
  int nd = out->ndim;
  int64_t shape[BERT_MAX_DIMS];
  int64_t stride[BERT_ITER_MAX_OPS][BERT_MAX_DIMS];
  memcpy(shape, out->shape, sizeof shape);
  it->nops = nops;
  for (int k = 0; k < nops; k++) {
    const bert_tensor *t = ops[k];
    size_t es = bert_dtype_size(t->dtype);
    int lead = nd - t->ndim;   /* operands are right-aligned, as in NumPy */
    for (int d = 0; d < nd; d++) {
      int td = d - lead;
      stride[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td] * (int64_t)es;
    }
    it->base[k] = (char *)bert_data(t);
    it->esize[k] = es;
  }
  /* drop size-1 dims, then merge neighbours that are contiguous for every operand */
  int n = 0;
  for (int d = 0; d < nd; d++) {
    if (shape[d] == 1) continue;
    if (n > 0) {
      int mergeable = 1;
      for (int k = 0; k < nops; k++)
        if (it->stride[k][n - 1] != stride[k][d] * shape[d]) { mergeable = 0; break; }
      if (mergeable) {
        it->shape[n - 1] *= shape[d];
        for (int k = 0; k < nops; k++) it->stride[k][n - 1] = stride[k][d];
        continue;
      }
    }
    it->shape[n] = shape[d];
    for (int k = 0; k < nops; k++) it->stride[k][n] = stride[k][d];
    n++;
  }
  if (n == 0) {   /* a scalar, or all dims of size 1 */
    it->shape[0] = 1;
    for (int k = 0; k < nops; k++) it->stride[k][0] = 0;
    n = 1;
  }
  for (int d = 0; d < nd; d++) if (out->shape[d] == 0) { it->shape[0] = 0; break; }
  it->ndim = n;
}

/* Runs rows [first, last) of chunks: each row of the inner dim is split into
** `chunks` pieces so a single long row still parallelises. */
static void run_range(const bert_iter *it, bert_row_kernel kernel, void *ctx,
                      int64_t first, int64_t last, int64_t chunks) {
  int nops = it->nops, nd = it->ndim;
  int64_t inner = it->shape[nd - 1];
  int64_t piece = (inner + chunks - 1) / chunks;
  int64_t elem_stride[BERT_ITER_MAX_OPS];
  for (int k = 0; k < nops; k++) elem_stride[k] = it->stride[k][nd - 1] / (int64_t)it->esize[k];
  for (int64_t w = first; w < last; w++) {
    int64_t row = w / chunks, c = w % chunks;
    int64_t begin = c * piece, len = inner - begin < piece ? inner - begin : piece;
    if (len <= 0) continue;
    char *ptr[BERT_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) ptr[k] = it->base[k] + begin * it->stride[k][nd - 1];
    int64_t r = row;
    for (int d = nd - 2; d >= 0; d--) {
      int64_t i = r % it->shape[d];
      r /= it->shape[d];
      for (int k = 0; k < nops; k++) ptr[k] += i * it->stride[k][d];
    }
    kernel(ctx, len, ptr, elem_stride);
  }
}

typedef struct {
  const bert_iter *it;
  bert_row_kernel kernel;
  void *ctx;
  int64_t chunks;
} iter_job;

static void iter_work(void *p, int64_t lo, int64_t hi) {
  const iter_job *j = p;
  run_range(j->it, j->kernel, j->ctx, lo, hi, j->chunks);
}

void bert_iter_run(const bert_iter *it, bert_row_kernel kernel, void *ctx) {
  int64_t numel = 1;
  for (int d = 0; d < it->ndim; d++) numel *= it->shape[d];
  if (numel == 0) return;
  int64_t rows = numel / it->shape[it->ndim - 1];
  int threads = bert_parallel_width();
  if (numel < BERT_PARALLEL_MIN || threads == 1) {
    run_range(it, kernel, ctx, 0, rows, 1);
    return;
  }
  int64_t chunks = rows >= 4 * threads ? 1 : (4 * threads + rows - 1) / rows;
  int64_t inner = it->shape[it->ndim - 1];
  iter_job job = {it, kernel, ctx, chunks};
  /* grain: about BERT_PARALLEL_MIN / 2 elements per pool chunk */
  bert_parallel_for(rows * chunks, bert_parallel_grain((inner + chunks - 1) / chunks), iter_work, &job);
}
