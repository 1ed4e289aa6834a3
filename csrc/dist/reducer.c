/*
** Gradient buckets reduced while backward is still running (see dist.h).
**
** At the first backward step the reducer reads the graph once: every leaf
** whose gradient lives in the flat buffer, with the last step that writes
** it (backward runs order[n-1] .. order[0], so the smallest index among
** the nodes that take the leaf as an input).  A bucket is final when all
** the leaves overlapping it are; buckets start strictly from the last one
** down, the same sequence on every rank whatever the timing, as MPI
** requires of collectives.  Each backward step also tests the requests in
** flight, which is what moves a non-blocking reduction along.
*/
#include <stdlib.h>
#include <string.h>

#include "core/autograd.h"
#include "dist/dist.h"
#include "dist/mpi_abi.h"

typedef struct {
  const bert_tensor *t;
  int64_t lo, hi;     /* element range in the flat buffer */
  size_t last;        /* order index of the last node writing it */
} leaf;

struct bert_dist_reducer {
  bert_tensor *grad;  /* retained; contiguous float32 on the CPU */
  float *base;
  int64_t n, bucket;
  int nb;
  MPI_Request *req;
  int *pending;       /* per bucket: overlapping leaves not final yet */
  int next;           /* the next bucket to start (counts down) */
  int scanned, started_in_backward;
  leaf *leaves;
  size_t nleaves, cap, cursor;
};

static bert_dist_reducer *armed;   /* the reducer whose hook is installed */

bert_dist_reducer *bert_dist_reducer_new(bert_tensor *g, int64_t bucket_elems) {
  char b1[160];
  if (g->dtype != BERT_F32 || g->ndim != 1 || !bert_is_contiguous(g) || g->storage->backend != NULL) {
    bert_set_error("distributed.reducer: the gradient buffer must be a contiguous 1-D float32 CPU tensor, got %s %s",
                   bert_dtype_name(g->dtype), bert_shape_str(b1, sizeof b1, g->ndim, g->shape));
    return NULL;
  }
  if (bucket_elems < 1) {
    bert_set_error("distributed.reducer: bucket size must be positive, got %lld", (long long)bucket_elems);
    return NULL;
  }
  bert_dist_reducer *r = calloc(1, sizeof *r);
  if (r == NULL) { bert_set_error("distributed.reducer: out of memory"); return NULL; }
  r->n = bert_numel(g);
  r->bucket = bucket_elems;
  r->nb = (int)((r->n + bucket_elems - 1) / bucket_elems);
  if (r->nb < 1) r->nb = 1;
  r->req = calloc((size_t)r->nb, sizeof *r->req);
  r->pending = calloc((size_t)r->nb, sizeof *r->pending);
  if (r->req == NULL || r->pending == NULL) {
    bert_dist_reducer_free(r);
    bert_set_error("distributed.reducer: out of memory");
    return NULL;
  }
  bert_tensor_retain(g);
  r->grad = g;
  r->base = bert_f32(g);
  r->next = r->nb - 1;
  return r;
}

void bert_dist_reducer_free(bert_dist_reducer *r) {
  if (r == NULL) return;
  if (armed == r) { bert_set_backward_hook(NULL, NULL); armed = NULL; }
  if (r->grad) bert_tensor_release(r->grad);
  free(r->req);
  free(r->pending);
  free(r->leaves);
  free(r);
}

int bert_dist_reducer_buckets(const bert_dist_reducer *r) { return r->nb; }

static int start_bucket(bert_dist_reducer *r, int b) {
  int64_t lo = (int64_t)b * r->bucket, hi = lo + r->bucket < r->n ? lo + r->bucket : r->n;
  int rc = mpi.Iallreduce(MPI_IN_PLACE, r->base + lo, (int)(hi - lo), mpi.type[BERT_DIST_F32],
                          mpi.op[BERT_DIST_SUM], mpi.comm_world, &r->req[b]);
  if (rc != MPI_SUCCESS) {
    bert_set_error("distributed: MPI_Iallreduce of gradient bucket %d failed with error %d", b, rc);
    return -1;
  }
  return 0;
}

static int start_ready(bert_dist_reducer *r) {
  while (r->next >= 0 && r->pending[r->next] == 0) {
    if (start_bucket(r, r->next)) return -1;
    r->next--;
  }
  return 0;
}

static int by_tensor(const void *a, const void *b) {
  const leaf *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->last < y->last ? -1 : x->last > y->last;
}

static int by_last_desc(const void *a, const void *b) {
  const leaf *x = a, *y = b;
  return x->last < y->last ? 1 : x->last > y->last ? -1 : 0;
}

static int add_leaf(bert_dist_reducer *r, const bert_tensor *t, size_t at) {
  const bert_tensor *g = t->grad;
  if (g == NULL || g->storage != r->grad->storage) return 0;
  int64_t lo = g->offset - r->grad->offset, hi = lo + bert_numel(g);
  if (lo < 0 || hi > r->n || hi <= lo) return 0;
  if (r->nleaves == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 256;
    leaf *p = realloc(r->leaves, cap * sizeof *p);
    if (p == NULL) { bert_set_error("distributed: out of memory"); return -1; }
    r->leaves = p;
    r->cap = cap;
  }
  r->leaves[r->nleaves++] = (leaf){t, lo, hi, at};
  return 0;
}

/* Finds the flat-buffer leaves of the graph and when each becomes final. */
static int scan(bert_dist_reducer *r, bert_tensor *const *order, size_t n) {
  r->nleaves = 0;
  for (size_t j = 0; j < n; j++) {
    const bert_node *node = order[j]->grad_fn;
    if (node == NULL) continue;
    for (int i = 0; i < node->ninputs; i++) {
      const bert_tensor *in = node->inputs[i];
      if (in && in->grad_fn == NULL && in->requires_grad && add_leaf(r, in, j)) return -1;
    }
  }
  /* one entry per leaf, keeping its smallest index (its last write) */
  qsort(r->leaves, r->nleaves, sizeof *r->leaves, by_tensor);
  size_t m = 0;
  for (size_t i = 0; i < r->nleaves; i++)
    if (m == 0 || r->leaves[m - 1].t != r->leaves[i].t) r->leaves[m++] = r->leaves[i];
  r->nleaves = m;
  qsort(r->leaves, m, sizeof *r->leaves, by_last_desc);
  memset(r->pending, 0, (size_t)r->nb * sizeof *r->pending);
  for (size_t i = 0; i < m; i++)
    for (int64_t b = r->leaves[i].lo / r->bucket; b <= (r->leaves[i].hi - 1) / r->bucket; b++) r->pending[b]++;
  r->cursor = 0;
  r->scanned = 1;
  return 0;
}

static int hook(void *ud, bert_tensor *const *order, size_t n, size_t k) {
  bert_dist_reducer *r = ud;
  if (!r->scanned && scan(r, order, n)) return -1;
  while (r->cursor < r->nleaves && r->leaves[r->cursor].last >= k) {
    const leaf *l = &r->leaves[r->cursor++];
    for (int64_t b = l->lo / r->bucket; b <= (l->hi - 1) / r->bucket; b++) r->pending[b]--;
  }
  if (start_ready(r)) return -1;
  int started = r->nb - 1 - r->next;
  if (started > 0) {
    int done = 0;
    int rc = mpi.Testall(started, r->req + r->next + 1, &done, NULL);
    if (rc != MPI_SUCCESS) {
      bert_set_error("distributed: testing gradient reductions failed with MPI error %d", rc);
      return -1;
    }
  }
  return 0;
}

int bert_dist_reducer_arm(bert_dist_reducer *r) {
  r->scanned = 0;
  r->next = r->nb - 1;
  if (bert_dist_using_mpi() && bert_dist_size() > 1) {
    bert_set_backward_hook(hook, r);
    armed = r;
  }
  return 0;
}

int bert_dist_reducer_finish(bert_dist_reducer *r, int *overlapped, double *wait_seconds) {
  if (armed == r) { bert_set_backward_hook(NULL, NULL); armed = NULL; }
  if (overlapped) *overlapped = 0;
  if (!bert_dist_using_mpi() || bert_dist_size() < 2) return 0;
  int before = r->nb - 1 - r->next;
  if (overlapped) *overlapped = before;
  while (r->next >= 0) {
    if (start_bucket(r, r->next)) return -1;
    r->next--;
  }
  r->scanned = 0;
  r->next = r->nb - 1;   /* not armed next time: nothing starts before finish */
  if (bert_dist_wait("all_reduce (gradients)", r->nb, r->req, wait_seconds)) return -1;
  float inv = 1.0f / (float)bert_dist_size();
  for (int64_t i = 0; i < r->n; i++) r->base[i] *= inv;
  return 0;
}
