/*
** Pretraining instances: google-research/bert create_pretraining_data.py
** (create_instances_from_document, truncate_seq_pair,
** create_masked_lm_predictions), ALBERT's sentence-order variant and
** RoBERTa's FULL-SENTENCES packing.  The random stream is Philox keyed by
** the seed, so the same corpus and seed give the same instances on every
** machine (not Python's random module: the draws differ, the algorithm
** is the same).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"
#include "core/tensor.h"
#include "data/ptdata.h"

/* ---------------------------------------------------------------- rng */

void bd_rng_init(bd_rng *r, uint64_t key, uint64_t counter) {
  r->key = key;
  r->counter = counter;
  r->left = 0;
}

uint32_t bd_rng_u32(bd_rng *r) {
  if (r->left == 0) {
    bert_philox(r->key, r->counter++, r->buf);
    r->left = 4;
  }
  return r->buf[4 - r->left--];
}

double bd_rng_uniform(bd_rng *r) {
  uint32_t a = bd_rng_u32(r) >> 5, b = bd_rng_u32(r) >> 6;
  return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

int64_t bd_rng_randint(bd_rng *r, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  uint64_t x = ((uint64_t)bd_rng_u32(r) << 32) | bd_rng_u32(r);
  return lo + (int64_t)(x % span);   /* bias at most span / 2^64 */
}

uint64_t bd_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/* ------------------------------------------------------------ masking */

/* Sorts pos[0..cnt) ascending, repl[] along. */
static void sort_positions(int32_t *pos, int32_t *repl, int cnt) {
  for (int i = 1; i < cnt; i++) {
    int32_t p = pos[i], v = repl[i];
    int j = i - 1;
    while (j >= 0 && pos[j] > p) { pos[j + 1] = pos[j]; repl[j + 1] = repl[j]; j--; }
    pos[j + 1] = p;
    repl[j + 1] = v;
  }
}

/* A span length in units, at least 1: geometric(p) clipped at max
** (SpanBERT), or n in 1..max with p(n) proportional to 1/n (ALBERT). */
static int span_length(const bd_mask_cfg *c, bd_rng *r) {
  int max = c->max_span > 0 ? c->max_span : 1;
  if (c->mode == BD_MASK_SPAN) {
    int len = 1;
    while (len < max && bd_rng_uniform(r) >= c->span_p) len++;
    return len;
  }
  double total = 0, u;
  for (int k = 1; k <= max; k++) total += 1.0 / k;
  u = bd_rng_uniform(r) * total;
  for (int k = 1; k <= max; k++) {
    u -= 1.0 / k;
    if (u < 0) return k;
  }
  return max;
}

/* How many of n positions to mask: n * masked_lm_prob rounded half to even
** (Python's round(), as create_pretraining_data.py), at least 1, at most
** max_predictions. */
static int mask_budget(const bd_mask_cfg *c, int n) {
  int num = (int)nearbyint((double)n * c->masked_lm_prob);
  if (num < 1) num = 1;
  if (num > c->max_predictions) num = c->max_predictions;
  return num;
}

/* order[0..ng) = 0..ng-1 shuffled as Python's random.shuffle does. */
static void shuffled_order(bd_rng *r, int32_t *order, int ng) {
  for (int g = 0; g < ng; g++) order[g] = g;
  for (int i = ng - 1; i > 0; i--) {
    int j = (int)bd_rng_randint(r, 0, i);
    int32_t tmp = order[i]; order[i] = order[j]; order[j] = tmp;
  }
}

/* SPAN and NGRAM masking over the units (groups) gstart/glen[0..ng):
** spans of adjacent unused units at random starts until the budget is met
** (a span that would pass it is cut to fit), then single units in order
** from a random start if random draws left it short.  used: ng ints. */
static int mask_spans(const bd_mask_cfg *c, bd_rng *r, const int32_t *tokens, int n, int32_t *pos,
                      int32_t *repl, const int32_t *gstart, const int32_t *glen, int32_t *used, int ng) {
  int num = mask_budget(c, n);
  int cnt = 0;
  for (int g = 0; g < ng; g++) used[g] = 0;
  for (int attempt = 0; attempt < 4 * ng + 16 && cnt < num && ng > 0; attempt++) {
    int len = span_length(c, r);
    int g0 = (int)bd_rng_randint(r, 0, ng - 1);
    if (used[g0]) continue;
    int g1 = g0, tok = glen[g0];   /* grow right over adjacent unused units */
    if (cnt + tok > num) continue;
    while (g1 + 1 < ng && g1 + 1 - g0 < len && !used[g1 + 1] && gstart[g1] + glen[g1] == gstart[g1 + 1] &&
           cnt + tok + glen[g1 + 1] <= num) {
      g1++;
      tok += glen[g1];
    }
    double u = bd_rng_uniform(r);   /* one choice for the whole span */
    int how = u < 0.8 ? 0 : (u < 0.9 ? 1 : 2);
    for (int g = g0; g <= g1; g++) {
      used[g] = 1;
      for (int p = gstart[g]; p < gstart[g] + glen[g]; p++) {
        pos[cnt] = p;
        repl[cnt] = how == 0 ? c->mask_id : how == 1 ? tokens[p] : (int32_t)bd_rng_randint(r, 0, c->vocab_size - 1);
        cnt++;
      }
    }
  }
  if (ng > 0 && cnt < num) {   /* short after the random draws (fragmented units): fill unit by unit */
    int start = (int)bd_rng_randint(r, 0, ng - 1);
    for (int k = 0; k < ng && cnt < num; k++) {
      int g = (start + k) % ng;
      if (used[g] || cnt + glen[g] > num) continue;
      used[g] = 1;
      for (int p = gstart[g]; p < gstart[g] + glen[g]; p++) {
        double u = bd_rng_uniform(r);
        pos[cnt] = p;
        repl[cnt] = u < 0.8 ? c->mask_id : u < 0.9 ? tokens[p] : (int32_t)bd_rng_randint(r, 0, c->vocab_size - 1);
        cnt++;
      }
    }
  }
  sort_positions(pos, repl, cnt);
  return cnt;
}

/* PHRASE: merges the word units gstart/glen[0..ng) in place, left to
** right: at each word the longest run of two or more adjacent words whose
** tokens form a phrase of the table becomes one unit (the running hash
** grows a word at a time).  Returns the new unit count. */
static int merge_phrases(const bd_phrases *ph, const int32_t *tokens, int32_t *gstart, int32_t *glen, int ng) {
  int out = 0;
  for (int g = 0; g < ng;) {
    int best = g, len = glen[g];
    uint64_t h = bd_phrase_hash_add(bd_phrase_hash_start(), tokens + gstart[g], glen[g]);
    for (int j = g + 1; j < ng && gstart[j - 1] + glen[j - 1] == gstart[j]; j++) {
      len += glen[j];
      if (len > BD_PHRASE_MAX_TOKENS) break;
      h = bd_phrase_hash_add(h, tokens + gstart[j], glen[j]);
      if (bd_phrases_lookup(ph, tokens + gstart[g], len, h) >= 0) best = j;
    }
    int32_t start = gstart[g], stop = gstart[best] + glen[best];
    gstart[out] = start;   /* out <= g: nothing still to be read is overwritten */
    glen[out] = stop - start;
    out++;
    g = best + 1;
  }
  return out;
}

/* PHRASE masking over the units: shuffled, taken whole while they fit in
** the budget (as Google's whole-word masking), the 80/10/10 replacement
** decided once per unit. */
static int mask_units(const bd_mask_cfg *c, bd_rng *r, const int32_t *tokens, int n, int32_t *pos,
                      int32_t *repl, const int32_t *gstart, const int32_t *glen, int32_t *order, int ng) {
  shuffled_order(r, order, ng);
  int num = mask_budget(c, n);
  int cnt = 0;
  for (int k = 0; k < ng && cnt < num; k++) {
    int g = order[k];
    if (cnt + glen[g] > num) continue;
    double u = bd_rng_uniform(r);
    int how = u < 0.8 ? 0 : (u < 0.9 ? 1 : 2);
    for (int p = gstart[g]; p < gstart[g] + glen[g]; p++) {
      pos[cnt] = p;
      repl[cnt] = how == 0 ? c->mask_id : how == 1 ? tokens[p] : (int32_t)bd_rng_randint(r, 0, c->vocab_size - 1);
      cnt++;
    }
  }
  sort_positions(pos, repl, cnt);
  return cnt;
}

int bd_mask(const bd_mask_cfg *c, bd_rng *r, const int32_t *tokens, int n,
            int32_t *pos, int32_t *repl, int32_t *scratch) {
  int32_t *gstart = scratch, *glen = scratch + n, *order = scratch + 2 * n;
  int ng = 0;
  /* candidate groups: single tokens, or whole words (with whole_word, and
  ** always for PHRASE) when a continuation piece directly follows a
  ** candidate (never across [SEP]) */
  for (int i = 0; i < n; i++) {
    int32_t t = tokens[i];
    if (t < 0 || t >= c->vocab_size || c->special[t]) continue;
    if ((c->whole_word || c->mode == BD_MASK_PHRASE) && c->cont && c->cont[t] && ng > 0 &&
        gstart[ng - 1] + glen[ng - 1] == i) {
      glen[ng - 1]++;
    } else {
      gstart[ng] = i;
      glen[ng] = 1;
      ng++;
    }
  }
  if (c->mode == BD_MASK_SPAN || c->mode == BD_MASK_NGRAM)
    return mask_spans(c, r, tokens, n, pos, repl, gstart, glen, order, ng);
  if (c->mode == BD_MASK_PHRASE) {
    if (c->phrases) ng = merge_phrases(c->phrases, tokens, gstart, glen, ng);
    return mask_units(c, r, tokens, n, pos, repl, gstart, glen, order, ng);
  }
  shuffled_order(r, order, ng);
  int num = mask_budget(c, n);
  int cnt = 0;
  for (int k = 0; k < ng && cnt < num; k++) {
    int g = order[k];
    if (cnt + glen[g] > num) continue;
    for (int p = gstart[g]; p < gstart[g] + glen[g]; p++) {
      int32_t v;
      if (bd_rng_uniform(r) < 0.8) v = c->mask_id;
      else if (bd_rng_uniform(r) < 0.5) v = tokens[p];
      else v = (int32_t)bd_rng_randint(r, 0, c->vocab_size - 1);
      pos[cnt] = p;
      repl[cnt] = v;
      cnt++;
    }
  }
  for (int i = 1; i < cnt; i++) {     /* positions ascending */
    int32_t p = pos[i], v = repl[i];
    int j = i - 1;
    while (j >= 0 && pos[j] > p) { pos[j + 1] = pos[j]; repl[j + 1] = repl[j]; j--; }
    pos[j + 1] = p;
    repl[j + 1] = v;
  }
  return cnt;
}

/* ---------------------------------------------------------- growables */

static int grow(void **p, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 0;
  int64_t nc = *cap ? *cap : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * elem);
  if (!q) { bert_set_error("out of memory (%lld items)", (long long)nc); return -1; }
  *p = q;
  *cap = nc;
  return 0;
}

/* Grows two arrays of the same element size that share one capacity. */
static int grow2(void **p, void **q, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 0;
  int64_t c1 = *cap, c2 = *cap;
  if (grow(p, &c1, need, elem) || grow(q, &c2, need, elem)) return -1;
  *cap = c1;
  return 0;
}

bd_instances *bd_instances_new(void) {
  bd_instances *s = calloc(1, sizeof *s);
  if (!s) { bert_set_error("out of memory"); return NULL; }
  void *a = NULL, *b = NULL;
  if (grow2(&a, &b, &s->ocap, 1, sizeof(int64_t))) { free(a); free(b); free(s); return NULL; }
  s->tok_off = a;
  s->pred_off = b;
  s->tok_off[0] = s->pred_off[0] = 0;
  return s;
}

void bd_instances_free(bd_instances *s) {
  if (!s) return;
  free(s->tok_off); free(s->tokens); free(s->len_a); free(s->label);
  free(s->pred_off); free(s->pred_pos); free(s->pred_repl);
  free(s);
}

/* Room for `more` instances, `tok` tokens and `pred` predictions. */
int bd_instances_reserve(bd_instances *s, int64_t more, int64_t tok, int64_t pred) {
  void *a = s->len_a, *b = s->label, *c = s->tok_off, *d = s->pred_off;
  int rc = grow2(&a, &b, &s->cap, s->n + more, sizeof(int32_t));
  s->len_a = a; s->label = b;
  if (rc) return -1;
  rc = grow2(&c, &d, &s->ocap, s->n + more + 1, sizeof(int64_t));
  s->tok_off = c; s->pred_off = d;
  if (rc) return -1;
  void *t = s->tokens;
  rc = grow(&t, &s->tokcap, s->ntok + tok, sizeof(int32_t));
  s->tokens = t;
  if (rc) return -1;
  void *p1 = s->pred_pos, *p2 = s->pred_repl;
  rc = grow2(&p1, &p2, &s->predcap, s->npred + pred, sizeof(int32_t));
  s->pred_pos = p1; s->pred_repl = p2;
  return rc;
}

int bd_instances_push(bd_instances *s, const int32_t *tok, int n, int32_t len_a, int32_t label,
                     const int32_t *pos, const int32_t *repl, int np) {
  if (bd_instances_reserve(s, 1, n, np)) return -1;
  memcpy(s->tokens + s->ntok, tok, (size_t)n * sizeof(int32_t));
  if (np > 0) {
    memcpy(s->pred_pos + s->npred, pos, (size_t)np * sizeof(int32_t));
    memcpy(s->pred_repl + s->npred, repl, (size_t)np * sizeof(int32_t));
  }
  s->len_a[s->n] = len_a;
  s->label[s->n] = label;
  s->ntok += n;
  s->npred += np;
  s->n++;
  s->tok_off[s->n] = s->ntok;
  s->pred_off[s->n] = s->npred;
  return 0;
}

/* ------------------------------------------------------------- corpus */

bd_corpus *bd_corpus_new(void) {
  bd_corpus *c = calloc(1, sizeof *c);
  if (!c) { bert_set_error("out of memory"); return NULL; }
  c->dcap = 64;
  c->scap = 64;
  c->doc_off = calloc((size_t)c->dcap, sizeof(int64_t));
  c->sent_off = calloc((size_t)c->scap, sizeof(int64_t));
  if (!c->doc_off || !c->sent_off) { bd_corpus_free(c); bert_set_error("out of memory"); return NULL; }
  return c;
}

void bd_corpus_free(bd_corpus *c) {
  if (!c) return;
  free(c->doc_off); free(c->sent_off); free(c->tokens);
  free(c);
}

int bd_corpus_add_sentence(bd_corpus *c, const int32_t *ids, int64_t n) {
  if (n <= 0) return 0;
  void *t = c->tokens, *so = c->sent_off;
  if (grow(&t, &c->tcap, c->ntok + n, sizeof(int32_t))) return -1;
  c->tokens = t;
  if (grow(&so, &c->scap, c->nsents + 2, sizeof(int64_t))) return -1;
  c->sent_off = so;
  memcpy(c->tokens + c->ntok, ids, (size_t)n * sizeof(int32_t));
  c->ntok += n;
  c->nsents++;
  c->sent_off[c->nsents] = c->ntok;
  return 0;
}

int bd_corpus_end_document(bd_corpus *c) {
  if (c->nsents == c->doc_off[c->ndocs]) return 0;   /* empty documents are dropped */
  void *d = c->doc_off;
  if (grow(&d, &c->dcap, c->ndocs + 2, sizeof(int64_t))) return -1;
  c->doc_off = d;
  c->ndocs++;
  c->doc_off[c->ndocs] = c->nsents;
  return 0;
}

/* ----------------------------------------------------------- creation */

typedef struct {        /* a growable token list with a movable front */
  int32_t *v;
  int64_t b, e, cap;
} tokbuf;

static int tb_append(tokbuf *t, const int32_t *src, int64_t n) {
  if (n <= 0) return 0;
  void *p = t->v;
  if (grow(&p, &t->cap, t->e + n, sizeof(int32_t))) return -1;
  t->v = p;
  memcpy(t->v + t->e, src, (size_t)n * sizeof(int32_t));
  t->e += n;
  return 0;
}

typedef struct {
  const bd_create_cfg *cfg;
  bd_corpus *c;
  const int64_t *order;     /* shuffled document order */
  bd_rng rng;
  bd_instances *out;
  tokbuf a, b, seq;
  int32_t *pos, *repl, *scratch;
} creator;

static int64_t doc_nsent(const creator *k, int64_t d) {
  int64_t doc = k->order[d];
  return k->c->doc_off[doc + 1] - k->c->doc_off[doc];
}

static const int32_t *sent_tokens(const creator *k, int64_t d, int64_t s, int64_t *n) {
  int64_t gs = k->c->doc_off[k->order[d]] + s;
  *n = k->c->sent_off[gs + 1] - k->c->sent_off[gs];
  return k->c->tokens + k->c->sent_off[gs];
}

/* Masks (when static) and appends [CLS]/... already in seq. */
static int emit(creator *k, int32_t len_a, int32_t label) {
  int n = (int)(k->seq.e - k->seq.b);
  int np = 0;
  if (k->cfg->static_masking)
    np = bd_mask(&k->cfg->mask, &k->rng, k->seq.v + k->seq.b, n, k->pos, k->repl, k->scratch);
  return bd_instances_push(k->out, k->seq.v + k->seq.b, n, len_a, label, k->pos, k->repl, np);
}

static void truncate_seq_pair(creator *k, int64_t max_num_tokens) {
  for (;;) {
    int64_t la = k->a.e - k->a.b, lb = k->b.e - k->b.b;
    if (la + lb <= max_num_tokens) break;
    tokbuf *t = la > lb ? &k->a : &k->b;
    if (bd_rng_uniform(&k->rng) < 0.5) t->b++;
    else t->e--;
  }
}

static int from_document(creator *k, int64_t d) {
  const bd_create_cfg *cfg = k->cfg;
  int64_t nsent = doc_nsent(k, d), ndocs = k->c->ndocs;
  int64_t max_num_tokens = cfg->max_seq_length - 3;
  int64_t target = max_num_tokens;
  if (bd_rng_uniform(&k->rng) < cfg->short_seq_prob)
    target = bd_rng_randint(&k->rng, 2, max_num_tokens);
  int64_t chunk_start = 0, chunk_n = 0, cur_len = 0;
  for (int64_t i = 0; i < nsent; i++) {
    int64_t sl;
    sent_tokens(k, d, i, &sl);
    if (chunk_n == 0) chunk_start = i;
    chunk_n++;
    cur_len += sl;
    if (i != nsent - 1 && cur_len < target) continue;
    int64_t a_end = 1;
    if (chunk_n >= 2) a_end = bd_rng_randint(&k->rng, 1, chunk_n - 1);
    k->a.b = k->a.e = k->b.b = k->b.e = 0;
    for (int64_t j = 0; j < a_end; j++) {
      int64_t n;
      const int32_t *t = sent_tokens(k, d, chunk_start + j, &n);
      if (tb_append(&k->a, t, n)) return -1;
    }
    int label = 0, random_next = 0, swap = 0;
    if (chunk_n == 1) random_next = 1;
    else if (cfg->objective == BD_OBJ_NSP) random_next = bd_rng_uniform(&k->rng) < 0.5;
    else swap = bd_rng_uniform(&k->rng) < 0.5;
    if (random_next) {
      label = 1;
      int64_t target_b = target - (k->a.e - k->a.b);
      int64_t rd = 0;
      for (int tries = 0; tries < 10; tries++) {
        rd = bd_rng_randint(&k->rng, 0, ndocs - 1);
        if (rd != d) break;
      }
      int64_t rn = doc_nsent(k, rd);
      int64_t rstart = bd_rng_randint(&k->rng, 0, rn - 1);
      for (int64_t j = rstart; j < rn; j++) {
        int64_t n;
        const int32_t *t = sent_tokens(k, rd, j, &n);
        if (tb_append(&k->b, t, n)) return -1;
        if (k->b.e - k->b.b >= target_b) break;
      }
      i -= chunk_n - a_end;   /* put the unused segments back */
    } else {
      for (int64_t j = a_end; j < chunk_n; j++) {
        int64_t n;
        const int32_t *t = sent_tokens(k, d, chunk_start + j, &n);
        if (tb_append(&k->b, t, n)) return -1;
      }
      if (swap) {
        tokbuf tmp = k->a; k->a = k->b; k->b = tmp;
        label = 1;
      }
    }
    truncate_seq_pair(k, max_num_tokens);
    k->seq.b = k->seq.e = 0;
    int32_t cls = cfg->cls_id, sep = cfg->sep_id;
    if (tb_append(&k->seq, &cls, 1) || tb_append(&k->seq, k->a.v + k->a.b, k->a.e - k->a.b) ||
        tb_append(&k->seq, &sep, 1) || tb_append(&k->seq, k->b.v + k->b.b, k->b.e - k->b.b) ||
        tb_append(&k->seq, &sep, 1))
      return -1;
    if (emit(k, (int32_t)(k->a.e - k->a.b + 2), label)) return -1;
    chunk_n = 0;
    cur_len = 0;
  }
  return 0;
}

/* FULL-SENTENCES: whole sentences packed into [CLS] ... [SEP] blocks,
** crossing documents with a [SEP] between them; a sentence longer than a
** block is cut into block-sized pieces. */
static int full_sentences(creator *k) {
  const bd_create_cfg *cfg = k->cfg;
  int64_t cap = cfg->max_seq_length - 2;
  int32_t cls = cfg->cls_id, sep = cfg->sep_id;
  int pending_sep = 0;
  k->seq.b = k->seq.e = 0;
  if (tb_append(&k->seq, &cls, 1)) return -1;
#define CONTENT (k->seq.e - 1)
#define FLUSH() do { if (tb_append(&k->seq, &sep, 1) || emit(k, (int32_t)k->seq.e, -1)) return -1; \
                     k->seq.e = 1; pending_sep = 0; } while (0)
  for (int64_t d = 0; d < k->c->ndocs; d++) {
    if (CONTENT > 0) pending_sep = 1;
    int64_t ns = doc_nsent(k, d);
    for (int64_t s = 0; s < ns; s++) {
      int64_t n;
      const int32_t *t = sent_tokens(k, d, s, &n);
      if (CONTENT + n + pending_sep > cap && CONTENT > 0) FLUSH();
      if (pending_sep) { if (tb_append(&k->seq, &sep, 1)) return -1; pending_sep = 0; }
      while (n > cap - CONTENT) {
        int64_t take = cap - CONTENT;
        if (tb_append(&k->seq, t, take)) return -1;
        t += take;
        n -= take;
        FLUSH();
      }
      if (n > 0 && tb_append(&k->seq, t, n)) return -1;
    }
  }
  if (CONTENT > 0) FLUSH();
#undef FLUSH
#undef CONTENT
  return 0;
}

bd_instances *bd_create_instances(bd_corpus *c, const bd_create_cfg *cfg) {
  if (cfg->max_seq_length < 5) { bert_set_error("max_seq_length must be at least 5"); return NULL; }
  if (c->ndocs == 0) { bert_set_error("the corpus has no non-empty documents"); return NULL; }
  creator k;
  memset(&k, 0, sizeof k);
  k.cfg = cfg;
  k.c = c;
  bd_rng_init(&k.rng, cfg->seed, 0);
  int64_t *order = malloc((size_t)c->ndocs * sizeof(int64_t));
  k.pos = malloc((size_t)(cfg->mask.max_predictions + 1) * sizeof(int32_t));
  k.repl = malloc((size_t)(cfg->mask.max_predictions + 1) * sizeof(int32_t));
  k.scratch = malloc((size_t)cfg->max_seq_length * 3 * sizeof(int32_t));
  bd_instances *all = bd_instances_new(), *out = bd_instances_new();
  int64_t *perm = NULL;
  int ok = 0;
  if (!order || !k.pos || !k.repl || !k.scratch || !all || !out) {
    bert_set_error("out of memory");
    goto done;
  }
  for (int64_t i = 0; i < c->ndocs; i++) order[i] = i;
  for (int64_t i = c->ndocs - 1; i > 0; i--) {   /* documents shuffled once */
    int64_t j = bd_rng_randint(&k.rng, 0, i), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  k.order = order;
  k.out = all;
  for (int pass = 0; pass < cfg->dupe_factor; pass++) {
    if (cfg->objective == BD_OBJ_NONE) {
      if (full_sentences(&k)) goto done;
    } else {
      for (int64_t d = 0; d < c->ndocs; d++)
        if (from_document(&k, d)) goto done;
    }
  }
  /* all instances shuffled at the end */
  perm = malloc((size_t)(all->n + 1) * sizeof(int64_t));
  if (!perm) { bert_set_error("out of memory"); goto done; }
  for (int64_t i = 0; i < all->n; i++) perm[i] = i;
  for (int64_t i = all->n - 1; i > 0; i--) {
    int64_t j = bd_rng_randint(&k.rng, 0, i), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  if (bd_instances_reserve(out, all->n, all->ntok, all->npred)) goto done;
  for (int64_t i = 0; i < all->n; i++) {
    int64_t s = perm[i];
    int64_t t0 = all->tok_off[s], p0 = all->pred_off[s];
    if (bd_instances_push(out, all->tokens + t0, (int)(all->tok_off[s + 1] - t0), all->len_a[s],
                  all->label[s], all->pred_pos + p0, all->pred_repl + p0,
                  (int)(all->pred_off[s + 1] - p0)))
      goto done;
  }
  out->objective = cfg->objective;
  out->max_seq_length = cfg->max_seq_length;
  out->vocab_size = cfg->mask.vocab_size;
  out->masked = cfg->static_masking;
  ok = 1;
done:
  free(order); free(k.pos); free(k.repl); free(k.scratch); free(perm);
  free(k.a.v); free(k.b.v); free(k.seq.v);
  bd_instances_free(all);
  if (!ok) { bd_instances_free(out); return NULL; }
  return out;
}
