/*
** Byte-level BPE: merge table, the GPT-2 split pattern written by hand,
** and merging a word by rank (leftmost lowest rank first, as HF's heap).
*/
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

/* ---------- merge map: (a, b) -> (rank, new id) ---------- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return x;
}

#define EMPTY_KEY UINT64_MAX

int bt_merge_put(bt_merge_map *m, int32_t a, int32_t b, int32_t rank,
                 int32_t newid) {
  if (!m->keys || (m->n + 1) * 2 > m->mask + 1) {
    size_t nsize = m->keys ? (m->mask + 1) * 2 : 1024;
    uint64_t *k = malloc(nsize * sizeof *k);
    int32_t *r = malloc(nsize * sizeof *r), *d = malloc(nsize * sizeof *d);
    if (!k || !r || !d) { free(k); free(r); free(d); return -1; }
    for (size_t i = 0; i < nsize; i++) k[i] = EMPTY_KEY;
    for (size_t i = 0; m->keys && i <= m->mask; i++) {
      if (m->keys[i] == EMPTY_KEY) continue;
      size_t j = (size_t)mix64(m->keys[i]) & (nsize - 1);
      while (k[j] != EMPTY_KEY) j = (j + 1) & (nsize - 1);
      k[j] = m->keys[i]; r[j] = m->rank[i]; d[j] = m->newid[i];
    }
    free(m->keys); free(m->rank); free(m->newid);
    m->keys = k; m->rank = r; m->newid = d; m->mask = nsize - 1;
  }
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t j = (size_t)mix64(key) & m->mask;
  while (m->keys[j] != EMPTY_KEY && m->keys[j] != key) j = (j + 1) & m->mask;
  if (m->keys[j] == EMPTY_KEY) { m->n++; m->keys[j] = key; }
  /* else: a later line wins, as in HF (HashMap collect) */
  m->rank[j] = rank; m->newid[j] = newid;
  return 0;
}

int32_t bt_merge_lookup(const bt_merge_map *m, int32_t a, int32_t b,
                        int32_t *newid) {
  if (!m->keys) return -1;
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  size_t j = (size_t)mix64(key) & m->mask;
  for (;;) {
    uint64_t k = m->keys[j];
    if (k == key) { if (newid) *newid = m->newid[j]; return m->rank[j]; }
    if (k == EMPTY_KEY) return -1;
    j = (j + 1) & m->mask;
  }
}

void bt_merge_free(bt_merge_map *m) {
  free(m->keys); free(m->rank); free(m->newid);
  memset(m, 0, sizeof *m);
}

/* ---------- merging one word ---------- */

static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (h[p] <= v) break;
    h[i] = h[p]; i = p;
  }
  h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
  uint64_t top = h[0], v = h[--(*n)];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1] < h[c]) c++;
    if (h[c] >= v) break;
    h[i] = h[c]; i = c;
  }
  h[i] = v;
  return top;
}

/* Short words: scan for the leftmost lowest-rank pair each round. */
static int merge_small(const bt_tokenizer *t, bt_worker *w, int ns) {
  int32_t *id = w->sid, *st = w->sstart, *ln = w->slen, *rk = w->srank;
  int32_t *nid = w->sprev;              /* new id of pair i */
  for (int i = 0; i + 1 < ns; i++)
    rk[i] = bt_merge_lookup(&t->merges, id[i], id[i + 1], &nid[i]);
  for (;;) {
    int best = -1; int32_t br = INT32_MAX;
    for (int i = 0; i + 1 < ns; i++)
      if (rk[i] >= 0 && rk[i] < br) { br = rk[i]; best = i; }
    if (best < 0) break;
    id[best] = nid[best]; ln[best] += ln[best + 1];
    for (int i = best + 1; i + 1 < ns; i++) {
      id[i] = id[i + 1]; st[i] = st[i + 1]; ln[i] = ln[i + 1];
      rk[i] = rk[i + 1]; nid[i] = nid[i + 1];
    }
    ns--;
    if (best > 0)
      rk[best - 1] = bt_merge_lookup(&t->merges, id[best - 1], id[best],
                                     &nid[best - 1]);
    if (best + 1 < ns)
      rk[best] = bt_merge_lookup(&t->merges, id[best], id[best + 1], &nid[best]);
  }
  return ns;
}

/* Long words: linked list + heap of (rank, position), O(n log n). */
static int merge_heap(const bt_tokenizer *t, bt_worker *w, int ns) {
  int32_t *id = w->sid, *ln = w->slen, *pv = w->sprev, *nx = w->snext;
  size_t hn = 0;
  for (int i = 0; i < ns; i++) { pv[i] = i - 1; nx[i] = i + 1 < ns ? i + 1 : -1; }
  for (int i = 0; i + 1 < ns; i++) {
    int32_t r = bt_merge_lookup(&t->merges, id[i], id[i + 1], NULL);
    if (r >= 0) heap_push(w->heap, &hn, (uint64_t)r << 32 | (uint32_t)i);
  }
  while (hn > 0) {
    uint64_t top = heap_pop(w->heap, &hn);
    int32_t r = (int32_t)(top >> 32), i = (int32_t)(top & 0xffffffffu);
    if (ln[i] == 0 || nx[i] < 0) continue;          /* dead or last */
    int32_t j = nx[i], newid = 0;
    if (bt_merge_lookup(&t->merges, id[i], id[j], &newid) != r) continue;
    id[i] = newid; ln[i] += ln[j]; ln[j] = 0;
    nx[i] = nx[j]; if (nx[j] >= 0) pv[nx[j]] = i;
    if (pv[i] >= 0) {
      int32_t rr = bt_merge_lookup(&t->merges, id[pv[i]], id[i], NULL);
      if (rr >= 0) heap_push(w->heap, &hn, (uint64_t)rr << 32 | (uint32_t)pv[i]);
    }
    if (nx[i] >= 0) {
      int32_t rr = bt_merge_lookup(&t->merges, id[i], id[nx[i]], NULL);
      if (rr >= 0) heap_push(w->heap, &hn, (uint64_t)rr << 32 | (uint32_t)i);
    }
  }
  int k = 0;
  for (int i = 0; i >= 0 && i < ns; i = nx[i]) {
    id[k] = id[i]; w->sstart[k] = w->sstart[i]; ln[k] = ln[i]; k++;
    if (nx[i] < 0) break;
  }
  return k;
}

static int cache_get(bt_worker *w, uint64_t h, const unsigned char *key,
                     size_t n) {
  if (!w->cache) return -1;
  size_t j = (size_t)h & w->cache_mask;
  for (;;) {
    bt_cache_entry *c = &w->cache[j];
    if (!c->key) return -1;
    if (c->hash == h && c->klen == n && memcmp(c->key, key, n) == 0) {
      if (bt_grow((void **)&w->toks, &w->toks_cap, (size_t)c->ntoks * 3,
                  sizeof *w->toks)) return -1;
      memcpy(w->toks, c->toks, (size_t)c->ntoks * 3 * sizeof *w->toks);
      return c->ntoks;
    }
    j = (j + 1) & w->cache_mask;
  }
}

static void cache_clear(bt_worker *w) {
  for (size_t j = 0; w->cache && j <= w->cache_mask; j++) {
    free(w->cache[j].toks);             /* the key lives in the same block */
    w->cache[j].key = NULL; w->cache[j].toks = NULL;
  }
  w->cache_n = 0;
}

static void cache_put(bt_worker *w, int capacity, uint64_t h,
                      const unsigned char *key, size_t n, int ntoks) {
  if (capacity <= 0) return;
  if (!w->cache) {
    size_t size = 1024;
    while (size < (size_t)capacity * 2) size *= 2;
    w->cache = calloc(size, sizeof *w->cache);
    if (!w->cache) return;
    w->cache_mask = size - 1;
  }
  if (w->cache_n >= (size_t)capacity) cache_clear(w);
  char *mem = malloc(n + (size_t)ntoks * 3 * sizeof(int32_t) + 8);
  if (!mem) return;
  size_t j = (size_t)h & w->cache_mask;
  while (w->cache[j].key) j = (j + 1) & w->cache_mask;
  bt_cache_entry *c = &w->cache[j];
  size_t koff = (size_t)ntoks * 3 * sizeof(int32_t);
  c->toks = (int32_t *)(void *)mem;
  memcpy(c->toks, w->toks, koff);
  c->key = mem + koff;
  memcpy(c->key, key, n);
  c->klen = (uint32_t)n; c->hash = h; c->ntoks = ntoks;
  w->cache_n++;
}

int bt_bpe_word(bt_tokenizer *t, bt_worker *w, size_t n) {
  uint64_t h = 0;
  int cacheable = n < 256 && t->cache_capacity > 0;
  if (cacheable) {
    h = bt_hash(w->wb, n);
    int k = cache_get(w, h, w->wb, n);
    if (k >= 0) return k;
  }
  if (n + 1 > w->s_cap) {
    size_t c = w->s_cap;
    if (bt_grow((void **)&w->sid, &c, n + 1, sizeof(int32_t))) return -1;
#define G(f) c = w->s_cap; if (bt_grow((void **)&w->f, &c, n + 1, sizeof(int32_t))) return -1;
    G(sstart) G(slen) G(sprev) G(snext) G(srank)
#undef G
    w->s_cap = c;
  }
  int ns = 0;
  for (size_t i = 0; i < n; i++) {
    int32_t id = t->byte_id[w->wb[i]];
    if (id < 0) id = t->unk_id;
    /* unknown byte, no unk: dropped, and (as in HF, whose offsets add up
    ** the kept symbols' lengths) later offsets shift left */
    if (id < 0) continue;
    int ml = bt_byte_to_cp(w->wb[i]) < 0x80 ? 1 : 2;   /* UTF-8 of its char */
    w->sid[ns] = id; w->sstart[ns] = ns ? w->sstart[ns - 1] + w->slen[ns - 1] : 0;
    w->slen[ns] = ml; ns++;
  }
  if (ns <= 48) ns = merge_small(t, w, ns);
  else {
    if (bt_grow((void **)&w->heap, &w->heap_cap, (size_t)ns * 3 + 8,
                sizeof *w->heap)) return -1;
    ns = merge_heap(t, w, ns);
  }
  if (bt_grow((void **)&w->toks, &w->toks_cap, (size_t)ns * 3 + 3,
              sizeof *w->toks)) return -1;
  for (int i = 0; i < ns; i++) {
    w->toks[3 * i] = w->sid[i]; w->toks[3 * i + 1] = w->sstart[i];
    w->toks[3 * i + 2] = w->slen[i];
  }
  if (cacheable) cache_put(w, t->cache_capacity, h, w->wb, n, ns);
  return ns;
}

/* ---------- the GPT-2 pattern ----------
** 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
*/
enum { C_SPACE = 1, C_L = 2, C_N = 4, C_O = 8 };

static int cls(uint32_t c) {
  if (bt_is_whitespace(c)) return C_SPACE;
  if (bt_is_letter(c)) return C_L;
  if (bt_is_number(c)) return C_N;
  return C_O;
}

static int contraction(const uint32_t *c, int i, int n) {
  if (c[i] != '\'' || i + 1 >= n) return 0;
  uint32_t a = c[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < n) {
    uint32_t b = c[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
        (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

int bt_gpt2_split(const uint32_t *c, int n, int32_t *ends) {
  int np = 0, i = 0;
  while (i < n) {
    int k = contraction(c, i, n), j;
    if (k) { i += k; ends[np++] = i; continue; }
    int ci = cls(c[i]);
    int lead = c[i] == ' ' && i + 1 < n ? cls(c[i + 1]) : 0;
    if (lead == C_L || lead == C_N || lead == C_O || ci != C_SPACE) {
      int want = (c[i] == ' ' && lead != C_SPACE && lead) ? lead : ci;
      j = (c[i] == ' ' && want != C_SPACE) ? i + 1 : i;
      while (j < n && cls(c[j]) == want) j++;
      i = j; ends[np++] = i; continue;
    }
    /* whitespace run */
    j = i;
    while (j < n && bt_is_whitespace(c[j])) j++;
    if (j == n || j - 1 == i) { i = j; ends[np++] = i; continue; }
    i = j - 1; ends[np++] = i;
  }
  return np;
}
