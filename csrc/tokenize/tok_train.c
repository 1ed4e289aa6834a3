/*
** Trainers: HF's BpeTrainer algorithm (byte-level BPE, and WordPiece as a
** BPE with the "##" continuing prefix whose merges are dropped).
**
** Determinism: words are processed in byte order of their text (HF walks
** a hash map), so new "##x" ids and ties no longer depend on hashing; for
** byte-level BPE the result equals HF's.  Alphabet ties under
** limit_alphabet drop the higher code point first.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

/* ---------- word counts: string -> count ---------- */

typedef struct { char *key; uint32_t len; uint64_t hash; int64_t count; } wc_entry;
typedef struct { wc_entry *e; size_t mask, n; } wc_map;

static int wc_add(wc_map *m, const char *s, size_t len, uint64_t h, int64_t c) {
  if (!m->e || (m->n + 1) * 2 > m->mask + 1) {
    size_t ns = m->e ? (m->mask + 1) * 2 : 4096;
    wc_entry *ne = calloc(ns, sizeof *ne);
    if (!ne) return -1;
    for (size_t i = 0; m->e && i <= m->mask; i++) {
      if (!m->e[i].key) continue;
      size_t j = (size_t)m->e[i].hash & (ns - 1);
      while (ne[j].key) j = (j + 1) & (ns - 1);
      ne[j] = m->e[i];
    }
    free(m->e); m->e = ne; m->mask = ns - 1;
  }
  size_t j = (size_t)h & m->mask;
  while (m->e[j].key) {
    wc_entry *x = &m->e[j];
    if (x->hash == h && x->len == len && memcmp(x->key, s, len) == 0) {
      x->count += c; return 0;
    }
    j = (j + 1) & m->mask;
  }
  char *k = malloc(len + 1);
  if (!k) return -1;
  memcpy(k, s, len); k[len] = '\0';
  m->e[j].key = k; m->e[j].len = (uint32_t)len; m->e[j].hash = h;
  m->e[j].count = c; m->n++;
  return 0;
}

static void wc_free(wc_map *m, int keys) {
  for (size_t i = 0; keys && m->e && i <= m->mask; i++) free(m->e[i].key);
  free(m->e); memset(m, 0, sizeof *m);
}

struct bt_trainer {
  bt_train_opts o;
  char **specials;
  bt_tokenizer *pre;                    /* normalizer + pre-tokenizer */
  wc_map words;
  int failed;
};

bt_trainer *bt_trainer_new(const bt_train_opts *o) {
  bt_trainer *tr = calloc(1, sizeof *tr);
  if (!tr) return NULL;
  tr->o = *o;
  tr->specials = calloc((size_t)o->nspecials + 1, sizeof *tr->specials);
  if (!tr->specials) { free(tr); return NULL; }
  for (int i = 0; i < o->nspecials; i++) tr->specials[i] = strdup(o->specials[i]);
  tr->o.specials = tr->specials;
  bt_tokenizer *t = bt_tokenizer_new(o->kind);
  tr->pre = t;
  if (!t) { bt_trainer_free(tr); return NULL; }
  if (o->kind == BT_MODEL_BPE) t->pre = BT_PRE_BYTELEVEL;
  else if (o->kind == BT_MODEL_UNIGRAM) {
    /* the chain the trained tokenizer gets (lua/bert/tokenizer.lua,
    ** unigram_train_config): tabs and newlines to spaces, lowercase,
    ** space runs folded, then Metaspace */
    t->pre = BT_PRE_METASPACE;
    if (bt_add_norm_step(t, BT_NORM_REPLACE, "\t", 1, " ", 1) ||
        bt_add_norm_step(t, BT_NORM_REPLACE, "\n", 1, " ", 1) ||
        bt_add_norm_step(t, BT_NORM_REPLACE, "\r", 1, " ", 1) ||
        (o->lowercase && bt_add_norm_step(t, BT_NORM_LOWERCASE, NULL, 0, NULL, 0)) ||
        bt_add_norm_step(t, BT_NORM_SPACES, NULL, 0, " ", 1)) {
      bt_trainer_free(tr); return NULL;
    }
  } else {
    t->pre = BT_PRE_BERT; t->has_normalizer = 1; t->clean_text = 1;
    t->handle_chinese = 1; t->lowercase = o->lowercase;
    t->strip_accents = o->strip_accents;
  }
  if (bt_tokenizer_finish(t)) { bt_trainer_free(tr); return NULL; }
  return tr;
}

void bt_trainer_free(bt_trainer *tr) {
  if (!tr) return;
  for (int i = 0; i < tr->o.nspecials; i++) free(tr->specials[i]);
  free(tr->specials);
  bt_tokenizer_free(tr->pre);
  wc_free(&tr->words, 1);
  free(tr);
}

typedef struct { wc_map *m; int fail; } count_ctx;

static void count_word(void *ctx, const char *w, size_t len) {
  count_ctx *c = ctx;
  if (len && wc_add(c->m, w, len, bt_hash(w, len), 1)) c->fail = 1;
}

/* Splits into lines (each keeps its '\n') and counts words, in parallel. */
int bt_trainer_feed(bt_trainer *tr, const char *text, size_t len) {
  int nt = tr->pre->nworkers;
  size_t nchunks = (size_t)nt * 8;
  if (len < 65536) nchunks = 1;
  size_t *cut = malloc((nchunks + 1) * sizeof *cut);
  wc_map *maps = calloc(nchunks, sizeof *maps);
  if (!cut || !maps) { free(cut); free(maps); return -1; }
  cut[0] = 0;
  for (size_t c = 1; c < nchunks; c++) {
    size_t p = len / nchunks * c;
    if (p < cut[c - 1]) p = cut[c - 1];
    while (p < len && p > 0 && text[p - 1] != '\n') p++;
    cut[c] = p;
  }
  cut[nchunks] = len;
  int fail = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(|:fail)
  for (size_t c = 0; c < nchunks; c++) {
    int wid = 0;
#ifdef _OPENMP
    wid = omp_get_thread_num();
#endif
    count_ctx cc = {&maps[c], 0};
    size_t p = cut[c], end = cut[c + 1];
    while (p < end) {
      const char *nl = memchr(text + p, '\n', end - p);
      size_t q = nl ? (size_t)(nl - text) + 1 : end;
      if (bt_pretok_words(tr->pre, tr->pre->workers[wid], text + p, q - p,
                          count_word, &cc)) cc.fail = 1;
      p = q;
    }
    fail |= cc.fail;
  }
  for (size_t c = 0; c < nchunks; c++) {
    wc_map *m = &maps[c];
    for (size_t i = 0; m->e && i <= m->mask; i++)
      if (m->e[i].key && wc_add(&tr->words, m->e[i].key, m->e[i].len,
                                m->e[i].hash, m->e[i].count)) fail = 1;
    wc_free(m, 1);
  }
  free(maps); free(cut);
  return fail ? -1 : 0;
}

/* ---------- training ---------- */

typedef struct { const char *s; uint32_t len; int64_t count; } word_t;

static int cmp_word(const void *a, const void *b) {
  const word_t *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, n);
  if (c) return c;
  return (x->len > y->len) - (x->len < y->len);
}

typedef struct { uint32_t cp; uint64_t count; } achar;

static int cmp_achar_count(const void *a, const void *b) {
  const achar *x = a, *y = b;
  if (x->count != y->count) return x->count < y->count ? -1 : 1;
  return (x->cp < y->cp) - (x->cp > y->cp);   /* higher cp removed first */
}

static int cmp_achar_cp(const void *a, const void *b) {
  const achar *x = a, *y = b;
  return (x->cp > y->cp) - (x->cp < y->cp);
}

/* pair table: u64 pair -> count (int64), the counts in insertion order */
typedef struct { bt_map map; int64_t *c; size_t cap; } pair_map;

/* The count of a pair (a new pair: 0); NULL on no memory.  The pointer
** lives until the next new pair. */
static int64_t *pm_slot(pair_map *m, uint64_t key) {
  int added;
  int32_t *i = bt_map_put(&m->map, key, (int32_t)m->map.n, 16, &added);
  if (!i) return NULL;
  if (added) {
    if (bt_grow((void **)&m->c, &m->cap, m->map.n, sizeof *m->c)) return NULL;
    m->c[*i] = 0;
  }
  return &m->c[*i];
}

static void pm_free(pair_map *m) {
  bt_map_free(&m->map); free(m->c);
  memset(m, 0, sizeof *m);
}

/* a position list per queue entry */
typedef struct { int32_t *v; int32_t n, cap; } poslist;

static int pl_add(poslist *p, int32_t w) {
  if (p->n && p->v[p->n - 1] == w) return 0;
  if (p->n == p->cap) {
    int32_t nc = p->cap ? p->cap * 2 : 4;
    int32_t *v = realloc(p->v, (size_t)nc * sizeof *v);
    if (!v) return -1;
    p->v = v; p->cap = nc;
  }
  p->v[p->n++] = w;
  return 0;
}

/* where_to_update: pair -> poslist index, insertion-ordered */
typedef struct {
  bt_map map;
  uint64_t *order; poslist *lists; size_t n, cap;
} wtu_map;

static poslist *wtu_get(wtu_map *m, uint64_t key) {
  int added;
  int32_t *i = bt_map_put(&m->map, key, (int32_t)m->n, 10, &added);
  if (!i) return NULL;
  if (added) {
    if (m->n == m->cap) {
      size_t nc = m->cap ? m->cap * 2 : 1024;
      uint64_t *o = realloc(m->order, nc * sizeof *o);
      if (!o) return NULL;
      m->order = o;
      poslist *l = realloc(m->lists, nc * sizeof *l);
      if (!l) return NULL;
      m->lists = l; m->cap = nc;
    }
    m->order[m->n] = key;
    memset(&m->lists[m->n], 0, sizeof(poslist));
    m->n++;
  }
  return &m->lists[*i];
}

static void wtu_reset(wtu_map *m) {
  bt_map_clear(&m->map);
  m->n = 0;
}

/* the queue */
typedef struct { int64_t count; uint64_t pair; poslist pos; } qentry;
typedef struct { qentry *e; size_t n, cap; } queue;

static int q_less(const qentry *a, const qentry *b) {   /* a below b */
  if (a->count != b->count) return a->count < b->count;
  return a->pair > b->pair;
}

static int q_push(queue *q, qentry x) {
  if (q->n == q->cap) {
    size_t nc = q->cap ? q->cap * 2 : 4096;
    qentry *e = realloc(q->e, nc * sizeof *e);
    if (!e) return -1;
    q->e = e; q->cap = nc;
  }
  size_t i = q->n++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!q_less(&q->e[p], &x)) break;
    q->e[i] = q->e[p]; i = p;
  }
  q->e[i] = x;
  return 0;
}

static qentry q_pop(queue *q) {
  qentry top = q->e[0], x = q->e[--q->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= q->n) break;
    if (c + 1 < q->n && q_less(&q->e[c], &q->e[c + 1])) c++;
    if (!q_less(&x, &q->e[c])) break;
    q->e[i] = q->e[c]; i = c;
  }
  if (q->n) q->e[i] = x;
  return top;
}

#define PAIR(a, b) ((uint64_t)(uint32_t)(a) << 32 | (uint32_t)(b))

static int vocab_add(bt_vocab *v, int32_t *nid, const char *s, size_t len) {
  int32_t id = bt_vocab_get(v, s, len);
  if (id >= 0) return id;
  if (bt_vocab_set(v, s, len, *nid)) return -1;
  return (*nid)++;
}

int bt_trainer_train(bt_trainer *tr, bt_vocab *vocab, int32_t **merges_out,
                     int32_t *nmerges_out, char *err, size_t errlen) {
  const bt_train_opts *o = &tr->o;
  const char *prefix = o->kind == BT_MODEL_WORDPIECE ? "##" : NULL;
  size_t plen = prefix ? 2 : 0;
  int rc = -1;
  size_t nw = tr->words.n;
  word_t *words = malloc((nw + 1) * sizeof *words);
  int32_t **syms = calloc(nw + 1, sizeof *syms);
  int32_t *nsyms = calloc(nw + 1, sizeof *nsyms);
  achar *al = NULL; size_t nal = 0, alcap = 0;
  pair_map pc = {0};
  wtu_map wtu = {0};
  queue q = {0};
  int32_t *merges = NULL; size_t nm = 0, mcap = 0;
  uint32_t *cps = NULL; size_t cpcap = 0;
  int32_t nid = 0;
  bt_vocab_init(vocab);
  if (!words || !syms || !nsyms) goto oom;
  nw = 0;
  for (size_t i = 0; tr->words.e && i <= tr->words.mask; i++) {
    wc_entry *e = &tr->words.e[i];
    if (!e->key) continue;
    words[nw].s = e->key; words[nw].len = e->len; words[nw].count = e->count;
    nw++;
  }
  if (nw > 1) qsort(words, nw, sizeof *words, cmp_word);
  /* 1. special tokens */
  for (int i = 0; i < o->nspecials; i++)
    if (vocab_add(vocab, &nid, o->specials[i], strlen(o->specials[i])) < 0) goto oom;
  /* 2. alphabet: char -> summed count (byte-level: mapped bytes) */
  {
    uint64_t *cnt = calloc(0x110000, sizeof *cnt);
    if (!cnt) goto oom;
    for (size_t i = 0; i < nw; i++) {
      if (o->kind == BT_MODEL_BPE) {
        for (uint32_t k = 0; k < words[i].len; k++)
          cnt[bt_byte_to_cp((unsigned char)words[i].s[k])] += (uint64_t)words[i].count;
      } else {
        if (bt_grow((void **)&cps, &cpcap, words[i].len + 1, sizeof *cps)) { free(cnt); goto oom; }
        size_t n = bt_utf8_decode(words[i].s, words[i].len, cps);
        for (size_t k = 0; k < n; k++) cnt[cps[k]] += (uint64_t)words[i].count;
      }
    }
    if (o->kind == BT_MODEL_BPE && o->initial_alphabet)
      for (int b = 0; b < 256; b++) cnt[bt_byte_to_cp(b)] = UINT64_MAX;
    for (uint32_t c = 0; c < 0x110000; c++) {
      if (!cnt[c]) continue;
      if (nal == alcap) {
        alcap = alcap ? alcap * 2 : 1024;
        achar *x = realloc(al, alcap * sizeof *x);
        if (!x) { free(cnt); goto oom; }
        al = x;
      }
      al[nal].cp = c; al[nal].count = cnt[c]; nal++;
    }
    free(cnt);
    size_t start = 0;
    if (o->limit_alphabet > 0 && nal > (size_t)o->limit_alphabet) {
      qsort(al, nal, sizeof *al, cmp_achar_count);
      start = nal - (size_t)o->limit_alphabet;
    }
    if (nal > start + 1) qsort(al + start, nal - start, sizeof *al, cmp_achar_cp);
    for (size_t i = start; i < nal; i++) {
      char u[4]; int k = bt_utf8_encode(al[i].cp, u);
      if (vocab_add(vocab, &nid, u, (size_t)k) < 0) goto oom;
    }
  }
  /* 3. words -> symbols */
  for (size_t i = 0; i < nw; i++) {
    size_t n;
    if (bt_grow((void **)&cps, &cpcap, words[i].len + 1, sizeof *cps)) goto oom;
    if (o->kind == BT_MODEL_BPE) {
      n = words[i].len;
      for (size_t k = 0; k < n; k++) cps[k] = bt_byte_to_cp((unsigned char)words[i].s[k]);
    } else n = bt_utf8_decode(words[i].s, words[i].len, cps);
    syms[i] = malloc((n + 1) * sizeof **syms);
    if (!syms[i]) goto oom;
    int32_t ns = 0;
    for (size_t k = 0; k < n; k++) {
      char u[16]; int ul = bt_utf8_encode(cps[k], u + plen);
      if (bt_vocab_get(vocab, u + plen, (size_t)ul) < 0) continue;
      const char *s = u + plen; size_t sl = (size_t)ul;
      if (k > 0 && prefix) { memcpy(u, prefix, plen); s = u; sl += plen; }
      int32_t id = vocab_add(vocab, &nid, s, sl);
      if (id < 0) goto oom;
      syms[i][ns++] = id;
    }
    nsyms[i] = ns;
  }
  /* 4. pair counts and positions */
  for (size_t i = 0; i < nw; i++)
    for (int32_t k = 0; k + 1 < nsyms[i]; k++) {
      uint64_t p = PAIR(syms[i][k], syms[i][k + 1]);
      int64_t *c = pm_slot(&pc, p);
      if (!c) goto oom;
      *c += words[i].count;
      poslist *l = wtu_get(&wtu, p);
      if (!l || pl_add(l, (int32_t)i)) goto oom;
    }
  for (size_t i = 0; i < wtu.n; i++) {
    int64_t c = *pm_slot(&pc, wtu.order[i]);
    qentry x = {c, wtu.order[i], wtu.lists[i]};
    if (c > 0) { if (q_push(&q, x)) goto oom; }
    else free(wtu.lists[i].v);
  }
  wtu_reset(&wtu);
  /* 5. merges */
  char *buf = NULL; size_t bufcap = 0;
  while ((int)nid < o->vocab_size && q.n > 0) {
    qentry top = q_pop(&q);
    int64_t cur = *pm_slot(&pc, top.pair);
    if (top.count != cur) {
      top.count = cur;
      if (q_push(&q, top)) goto oom;
      continue;
    }
    if (top.count < 1 || (int64_t)o->min_frequency > top.count) {
      free(top.pos.v);
      break;
    }
    int32_t a = (int32_t)(top.pair >> 32), b = (int32_t)(top.pair & 0xffffffffu);
    size_t la, lb;
    const char *sa = bt_vocab_token(vocab, a, &la), *sb = bt_vocab_token(vocab, b, &lb);
    if (prefix && lb >= plen && memcmp(sb, prefix, plen) == 0) { sb += plen; lb -= plen; }
    if (bt_grow((void **)&buf, &bufcap, la + lb + 1, 1)) { free(top.pos.v); goto oom; }
    memcpy(buf, sa, la); memcpy(buf + la, sb, lb);
    int32_t newid = vocab_add(vocab, &nid, buf, la + lb);
    if (newid < 0) { free(top.pos.v); goto oom; }
    if (bt_grow((void **)&merges, &mcap, nm * 3 + 3, sizeof *merges)) { free(top.pos.v); goto oom; }
    merges[3 * nm] = a; merges[3 * nm + 1] = b; merges[3 * nm + 2] = newid; nm++;
    for (int32_t pi = 0; pi < top.pos.n; pi++) {
      int32_t iw = top.pos.v[pi];
      int32_t *s = syms[iw], n = nsyms[iw];
      int64_t wc = words[iw].count;
      for (int32_t i = 0; i < n; i++) {
        if (!(s[i] == a && i + 1 < n && s[i + 1] == b)) continue;
        if (i > 0) {
          int64_t *c = pm_slot(&pc, PAIR(s[i - 1], a));
          if (!c) goto oom;
          *c -= wc;
          c = pm_slot(&pc, PAIR(s[i - 1], newid));
          if (!c) goto oom;
          *c += wc;
          poslist *l = wtu_get(&wtu, PAIR(s[i - 1], newid));
          if (!l || pl_add(l, iw)) goto oom;
        }
        s[i] = newid;
        memmove(s + i + 1, s + i + 2, (size_t)(n - i - 2) * sizeof *s);
        n--;
        if (i < n - 1) {
          int64_t *c = pm_slot(&pc, PAIR(b, s[i + 1]));
          if (!c) goto oom;
          *c -= wc;
          c = pm_slot(&pc, PAIR(newid, s[i + 1]));
          if (!c) goto oom;
          *c += wc;
          poslist *l = wtu_get(&wtu, PAIR(newid, s[i + 1]));
          if (!l || pl_add(l, iw)) goto oom;
        }
      }
      nsyms[iw] = n;
    }
    free(top.pos.v);
    for (size_t i = 0; i < wtu.n; i++) {
      int64_t c = *pm_slot(&pc, wtu.order[i]);
      qentry x = {c, wtu.order[i], wtu.lists[i]};
      if (c > 0) { if (q_push(&q, x)) goto oom; }
      else free(wtu.lists[i].v);
    }
    wtu_reset(&wtu);
  }
  free(buf);
  /* a pair merged twice keeps its later rank (HF's HashMap) */
  {
    pair_map last = {0};
    for (size_t i = 0; i < nm; i++) {
      int64_t *c = pm_slot(&last, PAIR(merges[3 * i], merges[3 * i + 1]));
      if (!c) { pm_free(&last); goto oom; }
      *c = (int64_t)i;
    }
    size_t k = 0;
    for (size_t i = 0; i < nm; i++)
      if (*pm_slot(&last, PAIR(merges[3 * i], merges[3 * i + 1])) == (int64_t)i) {
        merges[3 * k] = merges[3 * i]; merges[3 * k + 1] = merges[3 * i + 1];
        merges[3 * k + 2] = merges[3 * i + 2]; k++;
      }
    nm = k;
    pm_free(&last);
  }
  *merges_out = merges; merges = NULL;
  *nmerges_out = (int32_t)nm;
  rc = 0;
  goto done;
oom:
  snprintf(err, errlen, "out of memory");
  bt_vocab_free(vocab);
done:
  for (size_t i = 0; syms && i < tr->words.n; i++) free(syms[i]);
  free(syms); free(nsyms); free(words); free(al); free(cps); free(merges);
  for (size_t i = 0; i < q.n; i++) free(q.e[i].pos.v);
  free(q.e);
  for (size_t i = 0; i < wtu.n; i++) free(wtu.lists[i].v);
  bt_map_free(&wtu.map); free(wtu.order); free(wtu.lists);
  pm_free(&pc);
  return rc;
}

int bt_trainer_train_unigram(bt_trainer *tr, const bt_unigram_train_opts *o,
                             char ***pieces, uint32_t **lens, double **scores,
                             int32_t *n, char *err, size_t errlen) {
  size_t nw = tr->words.n, k = 0;
  word_t *words = malloc((nw + 1) * sizeof *words);
  const char **ws = malloc((nw + 1) * sizeof *ws);
  uint32_t *wl = malloc((nw + 1) * sizeof *wl);
  double *wc = malloc((nw + 1) * sizeof *wc);
  int rc = -1;
  if (!words || !ws || !wl || !wc) { snprintf(err, errlen, "out of memory"); goto done; }
  for (size_t i = 0; tr->words.e && i <= tr->words.mask; i++) {
    wc_entry *e = &tr->words.e[i];
    if (!e->key) continue;
    words[k].s = e->key; words[k].len = e->len; words[k].count = e->count;
    k++;
  }
  if (k > 1) qsort(words, k, sizeof *words, cmp_word);   /* deterministic */
  for (size_t i = 0; i < k; i++) {
    ws[i] = words[i].s; wl[i] = words[i].len; wc[i] = (double)words[i].count;
  }
  rc = bt_unigram_train(o, ws, wl, wc, k, pieces, lens, scores, n, err, errlen);
done:
  free(words); free(ws); free(wl); free(wc);
  return rc;
}
