/*
** embedding: rows of weight gathered by int32 ids; backward adds the
** output gradient rows into the weight's gradient (in place when it
** exists, else a dense [V, H] one), threads owning disjoint column ranges
** (no races, deterministic).
*/
#include <string.h>

#include "core/autograd.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/nn_internal.h"

/* win: the weight as the caller passed it; ids, gout contiguous */
#define SCATTER_COLS 64

typedef struct {
  const int32_t *I;
  const float *G;
  float *DW;
  int64_t n, H, ld;
} scatter_job;

static void scatter_cols(void *ctx, int64_t lo, int64_t hi) {
  const scatter_job *s = ctx;
  int64_t j0 = lo * SCATTER_COLS, j1 = hi * SCATTER_COLS < s->H ? hi * SCATTER_COLS : s->H;
  for (int64_t t = 0; t < s->n; t++) {
    float *d = s->DW + (int64_t)s->I[t] * s->ld;
    const float *g = s->G + t * s->H;
    for (int64_t j = j0; j < j1; j++) d[j] += g[j];
  }
}

typedef struct {
  const int32_t *I;
  const float *W;
  float *Y;
  int64_t H;
} gather_job;

static void gather_rows(void *ctx, int64_t lo, int64_t hi) {
  const gather_job *g = ctx;
  for (int64_t t = lo; t < hi; t++)
    memcpy(g->Y + t * g->H, g->W + (int64_t)g->I[t] * g->H, (size_t)g->H * sizeof(float));
}

int cpu_embedding_backward(bert_tensor *win, const bert_tensor *ids, const bert_tensor *gout) {
  int64_t V = win->shape[0], H = win->shape[1], n = bert_numel(ids);
  /* When the weight already has a gradient (the tied MLM decoder wrote
  ** one, or an earlier step's is being accumulated) add the rows into it
  ** in place: no dense [V, H] temporary to zero and add. */
  bert_tensor *acc = win->grad, *dw = NULL;
  int inplace = acc && acc->dtype == BERT_F32 && acc->ndim == 2 && acc->shape[0] == V &&
                acc->shape[1] == H && (acc->stride[1] == 1 || H == 1) && acc->stride[0] >= H;
  int64_t ld = inplace ? acc->stride[0] : H;
  if (!inplace) {
    int64_t shape[2] = {V, H};
    if ((dw = bert_tensor_new(BERT_F32, 2, shape)) == NULL) return -1;
  }
  const int32_t *I = bert_i32(ids);
  const float *G = bert_f32(gout);
  float *DW = bert_f32(inplace ? acc : dw);
  /* threads own disjoint column blocks, so repeated ids never race */
  scatter_job job = {I, G, DW, n, H, ld};
  bert_parallel_for((H + SCATTER_COLS - 1) / SCATTER_COLS,
                    bert_parallel_grain(n * SCATTER_COLS), scatter_cols, &job);
  if (inplace) { bert_bump_version(acc); return 0; }
  return bert_accumulate_grad_steal(win, dw);
}

bert_tensor *cpu_embedding(const bert_tensor *ids, const bert_tensor *w) {
  int64_t H = w->shape[1], n = bert_numel(ids);
  const int32_t *I = bert_i32(ids);
  bert_tensor *y;
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof(int64_t));
  shape[ids->ndim] = H;
  y = bert_tensor_empty(BERT_F32, ids->ndim + 1, shape);
  if (y == NULL) return NULL;
  const float *W = bert_f32(w);
  float *Y = bert_f32(y);
  gather_job job = {I, W, Y, H};
  bert_parallel_for(n, bert_parallel_grain(H), gather_rows, &job);
  return y;
}
