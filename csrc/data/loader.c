/*
** The batch loader: a background thread fills a small ring of ready
** batches (gathering instances, padding, dynamic masking), so taking a
** batch is a copy.
**
** Order: epoch e visits the instances in a permutation drawn from
** (seed, e) (identity without shuffle); batch b of the epoch holds
** positions [b*B, (b+1)*B) of it (the last partial batch is dropped).
** Dynamic masks are drawn from Philox keyed by the seed with the counter
** block of the global sample index e*N + b*B + k, so the masks depend on
** the position alone and a resumed run masks identically.  A shard (data
** parallelism) fills only its rows of each global batch: the same samples,
** masks and order as the rows of the unsharded batch.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "core/checked.h"
#include "data/ptdata.h"

typedef struct {
  int64_t epoch, batch;
  int32_t *buf;   /* ids, types, attn, labels [B*T] each, then nsl [B] */
} slot;

struct bd_loader {
  bd_instances *data;
  bd_loader_cfg cfg;
  uint8_t *special, *cont;
  bd_phrases *phrases;     /* PHRASE masking: a copy of the table, or NULL */
  int64_t nbatches;          /* per epoch */
  /* ring */
  slot *slots;
  int nslots, head, count;
  int stop, running, sync;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t not_full, not_empty;
  /* positions: the next batch the worker fills / the consumer takes */
  int64_t w_epoch, w_batch, c_epoch, c_batch;
  /* worker-only */
  int64_t *perm, perm_epoch;
  int32_t *pos, *repl, *scratch;
};

#define SHUFFLE_KEY 0x53485546464c4531ULL
#define MASK_KEY 0x4d41534b44594e31ULL

static void make_perm(bd_loader *l, int64_t epoch) {
  int64_t n = l->data->n;
  for (int64_t i = 0; i < n; i++) l->perm[i] = i;
  if (l->cfg.shuffle) {
    bd_rng r;
    bd_rng_init(&r, bd_mix64(l->cfg.seed ^ SHUFFLE_KEY), (uint64_t)epoch << 40);
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = bd_rng_randint(&r, 0, i), t = l->perm[i];
      l->perm[i] = l->perm[j];
      l->perm[j] = t;
    }
  }
  l->perm_epoch = epoch;
}

static void fill(bd_loader *l, slot *s) {
  const bd_instances *d = l->data;
  int B = l->cfg.shard_rows, T = l->cfg.seq_len;
  int32_t *ids = s->buf, *types = ids + (size_t)B * T, *attn = types + (size_t)B * T;
  int32_t *labels = attn + (size_t)B * T, *nsl = labels + (size_t)B * T;
  if (l->perm_epoch != s->epoch) make_perm(l, s->epoch);
  for (int k = 0; k < B; k++) {
    int64_t at = s->batch * l->cfg.batch_size + l->cfg.shard_first + k;
    int64_t i = l->perm[at];
    int64_t t0 = d->tok_off[i];
    int n = (int)(d->tok_off[i + 1] - t0);
    int la = d->len_a[i];
    int32_t *ri = ids + (size_t)k * T, *rt = types + (size_t)k * T;
    int32_t *ra = attn + (size_t)k * T, *rl = labels + (size_t)k * T;
    const int32_t *tok = d->tokens + t0;
    for (int j = 0; j < T; j++) {
      if (j < n) { ri[j] = tok[j]; rt[j] = j < la ? 0 : 1; ra[j] = 1; }
      else { ri[j] = l->cfg.pad_id; rt[j] = 0; ra[j] = 0; }
      rl[j] = -100;
    }
    nsl[k] = d->label[i];
    const int32_t *pos, *repl;
    int np;
    if (l->cfg.dynamic) {
      bd_rng r;
      uint64_t g = (uint64_t)(s->epoch * d->n + at);
      bd_rng_init(&r, bd_mix64(l->cfg.seed ^ MASK_KEY), g << 24);
      np = bd_mask(&l->cfg.mask, &r, tok, n, l->pos, l->repl, l->scratch);
      pos = l->pos;
      repl = l->repl;
    } else {
      int64_t p0 = d->pred_off[i];
      np = (int)(d->pred_off[i + 1] - p0);
      /* a shard with no predictions has no arrays: no arithmetic on NULL */
      pos = np > 0 ? d->pred_pos + p0 : NULL;
      repl = np > 0 ? d->pred_repl + p0 : NULL;
    }
    for (int q = 0; q < np; q++) {
      rl[pos[q]] = tok[pos[q]];
      ri[pos[q]] = repl[q];
    }
  }
}

static void *worker(void *arg) {
  bd_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (l->count == l->nslots && !l->stop) pthread_cond_wait(&l->not_full, &l->mu);
    if (l->stop) break;
    slot *s = &l->slots[(l->head + l->count) % l->nslots];
    s->epoch = l->w_epoch;
    s->batch = l->w_batch;
    if (++l->w_batch == l->nbatches) { l->w_batch = 0; l->w_epoch++; }
    pthread_mutex_unlock(&l->mu);
    fill(l, s);   /* the slot is outside [head, head + count): the consumer leaves it alone */
    pthread_mutex_lock(&l->mu);
    l->count++;
    pthread_cond_signal(&l->not_empty);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static int start(bd_loader *l) {
  l->stop = 0;
  l->head = l->count = 0;
  l->w_epoch = l->c_epoch;
  l->w_batch = l->c_batch;
  if (pthread_create(&l->thread, NULL, worker, l) != 0) {
    bert_set_error("loader: cannot start the worker thread");
    return -1;
  }
  l->running = 1;
  return 0;
}

static void stop(bd_loader *l) {
  if (!l->running) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_broadcast(&l->not_full);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  l->running = 0;
}

bd_loader *bd_loader_new(bd_instances *data, const bd_loader_cfg *cfg) {
  int B = cfg->batch_size, T = cfg->seq_len;
  if (B < 1 || T < 1 || cfg->prefetch < 1) {
    bert_set_error("loader: batch_size, seq_len and prefetch must be positive");
    bd_instances_free(data);
    return NULL;
  }
  if (cfg->shard_first < 0 || cfg->shard_rows < 0 || cfg->shard_first + cfg->shard_rows > B) {
    bert_set_error("loader: shard rows [%d, %d) outside the batch of %d", cfg->shard_first,
                   cfg->shard_first + cfg->shard_rows, B);
    bd_instances_free(data);
    return NULL;
  }
  if (data->n < B) {
    bert_set_error("loader: %lld instances, fewer than one batch of %d", (long long)data->n, B);
    bd_instances_free(data);
    return NULL;
  }
  /* a slot holds 4 [B, T] int32 arrays and one [B]; scratch is [3 T] int32 */
  size_t bt, slot_bytes, scratch_bytes;
  if (bert_mul_size((size_t)B, (size_t)T, &bt) || bert_mul_size(bt, 4 * sizeof(int32_t), &slot_bytes) ||
      __builtin_add_overflow(slot_bytes, (size_t)B * sizeof(int32_t), &slot_bytes) ||
      bert_mul_size((size_t)T, 3 * sizeof(int32_t), &scratch_bytes)) {
    bert_set_error("loader: batch_size %d x seq_len %d is too large", B, T);
    bd_instances_free(data);
    return NULL;
  }
  bd_loader *l = calloc(1, sizeof *l);
  if (!l) { bd_instances_free(data); bert_set_error("out of memory"); return NULL; }
  l->data = data;
  l->cfg = *cfg;
  if (cfg->shard_rows == 0) { l->cfg.shard_first = 0; l->cfg.shard_rows = B; }
  l->nbatches = data->n / B;
  l->nslots = cfg->prefetch;
  l->perm_epoch = -1;
  size_t V = (size_t)cfg->mask.vocab_size;
  l->special = calloc(V, 1);
  l->cont = calloc(V, 1);
  l->perm = malloc((size_t)data->n * sizeof(int64_t));
  l->pos = malloc((size_t)(cfg->mask.max_predictions + 1) * sizeof(int32_t));
  l->repl = malloc((size_t)(cfg->mask.max_predictions + 1) * sizeof(int32_t));
  l->scratch = malloc(scratch_bytes + 16);
  l->slots = calloc((size_t)l->nslots, sizeof(slot));
  int ok = l->special && l->cont && l->perm && l->pos && l->repl && l->scratch && l->slots;
  for (int i = 0; ok && i < l->nslots; i++) {
    l->slots[i].buf = malloc(slot_bytes);
    ok = l->slots[i].buf != NULL;
  }
  if (!ok) { bd_loader_free(l); bert_set_error("out of memory"); return NULL; }
  if (cfg->mask.special) memcpy(l->special, cfg->mask.special, V);
  if (cfg->mask.cont) memcpy(l->cont, cfg->mask.cont, V);
  l->cfg.mask.special = l->special;
  l->cfg.mask.cont = cfg->mask.cont ? l->cont : NULL;
  if (cfg->mask.phrases) {   /* the loader's own copy, as the flag tables */
    l->phrases = bd_phrases_copy(cfg->mask.phrases);
    if (!l->phrases) { bd_loader_free(l); return NULL; }
  }
  l->cfg.mask.phrases = l->phrases;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->not_full, NULL);
  pthread_cond_init(&l->not_empty, NULL);
  l->sync = 1;
  if (start(l)) { bd_loader_free(l); return NULL; }
  return l;
}

void bd_loader_free(bd_loader *l) {
  if (!l) return;
  stop(l);
  if (l->sync) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->not_full);
    pthread_cond_destroy(&l->not_empty);
  }
  if (l->slots)
    for (int i = 0; i < l->nslots; i++) free(l->slots[i].buf);
  free(l->slots); free(l->special); free(l->cont); free(l->perm);
  bd_phrases_free(l->phrases);
  free(l->pos); free(l->repl); free(l->scratch);
  bd_instances_free(l->data);
  free(l);
}

int bd_loader_next(bd_loader *l, int32_t *ids, int32_t *types, int32_t *attn,
                   int32_t *labels, int32_t *nsl) {
  if (!l->running) { bert_set_error("loader: closed"); return -1; }
  size_t bt = (size_t)l->cfg.shard_rows * l->cfg.seq_len;
  pthread_mutex_lock(&l->mu);
  while (l->count == 0) pthread_cond_wait(&l->not_empty, &l->mu);
  slot *s = &l->slots[l->head];
  pthread_mutex_unlock(&l->mu);
  memcpy(ids, s->buf, bt * sizeof(int32_t));
  memcpy(types, s->buf + bt, bt * sizeof(int32_t));
  memcpy(attn, s->buf + 2 * bt, bt * sizeof(int32_t));
  memcpy(labels, s->buf + 3 * bt, bt * sizeof(int32_t));
  if (nsl) memcpy(nsl, s->buf + 4 * bt, (size_t)l->cfg.shard_rows * sizeof(int32_t));
  pthread_mutex_lock(&l->mu);
  l->c_epoch = s->epoch;
  l->c_batch = s->batch + 1;
  if (l->c_batch == l->nbatches) { l->c_batch = 0; l->c_epoch++; }
  l->head = (l->head + 1) % l->nslots;
  l->count--;
  pthread_cond_signal(&l->not_full);
  pthread_mutex_unlock(&l->mu);
  return 0;
}

void bd_loader_position(bd_loader *l, int64_t *epoch, int64_t *batch) {
  *epoch = l->c_epoch;
  *batch = l->c_batch;
}

int bd_loader_seek(bd_loader *l, int64_t epoch, int64_t batch) {
  if (epoch < 0 || batch < 0 || batch >= l->nbatches) {
    bert_set_error("loader: position (epoch %lld, batch %lld) outside 0.. %lld batches per epoch",
                   (long long)epoch, (long long)batch, (long long)l->nbatches);
    return -1;
  }
  stop(l);
  l->c_epoch = epoch;
  l->c_batch = batch;
  return start(l);
}

int64_t bd_loader_batches_per_epoch(const bd_loader *l) { return l->nbatches; }
const bd_instances *bd_loader_data(const bd_loader *l) { return l->data; }

void bd_loader_shape(const bd_loader *l, int64_t *batch, int64_t *seq_len) {
  *batch = l->cfg.shard_rows;
  *seq_len = l->cfg.seq_len;
}
