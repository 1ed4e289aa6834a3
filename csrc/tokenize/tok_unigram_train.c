/*
** Unigram training, SentencePiece's algorithm (unigram_model_trainer.cc)
** over pre-tokenized words ("▁word", as spm does with split_by_whitespace):
**  0. the alphabet: every character, or with character_coverage < 1 the
**     most frequent ones covering that fraction of all occurrences (the
**     rest stay unknown: no piece holds them);
**  1. seeds: the alphabet, then the substrings (2..max_piece_length
**     chars, seen at least twice, not crossing a script or a digit
**     boundary) with the highest frequency x length, as log-probabilities;
**  2. EM: forward-backward over each word's lattice gives expected counts
**     (weighted by the word's count); the M-step drops pieces expected
**     less than 0.5 times and scores the rest digamma(c) - digamma(sum);
**  3. pruning while the vocabulary is above 1.1 x the target: a piece
**     whose own best segmentation is not itself goes; the others are
**     ranked by the likelihood lost when their count moves to their
**     second-best segmentation; the best max(target, 0.75 x size) stay;
**  4. finalize: every alphabet character is kept (missing ones at the
**     minimum score plus 1e-4 steps), then the highest-scoring pieces up
**     to the size.
** Deterministic: every sort breaks ties by the piece's bytes, and nothing
** is sampled, so the same input gives the same model.
** One difference from spm, on purpose: the pruning loss uses the number of
** alternative pieces of *that* piece (spm multiplies by the size of the
** whole alternatives table, a known slip; HF's port uses the piece's own).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

typedef struct { const char *s; uint32_t len; double count; } uword;
typedef struct { char *s; uint32_t len; double score; } upiece;

/* ---------- helpers ---------- */

static double digamma(double x) {
  double r = 0.0;
  while (x < 7.0) { r -= 1.0 / x; x += 1.0; }
  x -= 0.5;
  double xx = 1.0 / x, xx2 = xx * xx, xx4 = xx2 * xx2;
  r += log(x) + (1.0 / 24.0) * xx2 - (7.0 / 960.0) * xx4 +
       (31.0 / 8064.0) * xx4 * xx2 - (127.0 / 30720.0) * xx4 * xx4;
  return r;
}

static double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  double m = a > b ? a : b;
  return m + log1p(exp(-fabs(a - b)));
}

static int utf8_len(unsigned char b) {
  return b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
}

static int cmp_piece(const void *a, const void *b) {
  const upiece *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, n);
  if (c) return c;
  return x->len < y->len ? -1 : x->len > y->len;
}

/* A coarse script class (spm: split_by_unicode_script, split_by_number):
** digits, common (punctuation, symbols), marks (inherit), letters by
** script block. */
static int char_class(uint32_t c) {
  int cat = utf8proc_category((utf8proc_int32_t)c);
  if (cat == UTF8PROC_CATEGORY_ND) return 1;
  if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
      cat == UTF8PROC_CATEGORY_ME) return 0;
  if (cat < UTF8PROC_CATEGORY_LU || cat > UTF8PROC_CATEGORY_LO) return 2;
  if (c < 0x250 || (c >= 0x1E00 && c <= 0x1EFF) || (c >= 0xFF21 && c <= 0xFF5A)) return 3;
  if ((c >= 0x3040 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x9FFF) ||
      (c >= 0xF900 && c <= 0xFAFF) || c >= 0x20000) return 4;   /* Han + kana */
  if (c >= 0xAC00 && c <= 0xD7AF) return 5;
  return 16 + (int)(c >> 7);
}

/* ---------- the model during training ---------- */

typedef struct {
  upiece *p; int32_t n;
  bt_trie trie;
  double min_score;
} umodel;

static void um_free(umodel *m) {
  for (int32_t i = 0; i < m->n; i++) free(m->p[i].s);
  free(m->p);
  bt_trie_free(&m->trie);
  memset(m, 0, sizeof *m);
}

/* Takes ownership of p[0, n). */
static int um_set(umodel *m, upiece *p, int32_t n) {
  bt_trie_free(&m->trie);
  m->p = p; m->n = n;
  m->min_score = INFINITY;
  for (int32_t i = 0; i < n; i++) {
    if (bt_trie_insert(&m->trie, p[i].s, p[i].len, i)) return -1;
    if (p[i].score < m->min_score) m->min_score = p[i].score;
  }
  if (n == 0) m->min_score = 0.0;
  return 0;
}

/* Lattice nodes of s[0, len): (start, end, id, score); id -1 = unknown. */
typedef struct { int32_t s, e, id; double sc; } lnode;
typedef struct { lnode *v; size_t n, cap; } lnodes;

static int lattice(const umodel *m, const char *s, uint32_t len, lnodes *L) {
  L->n = 0;
  double unk = m->min_score - 10.0;
  for (uint32_t at = 0; at < len;) {
    int mb = utf8_len((unsigned char)s[at]);
    if ((uint32_t)mb > len - at) mb = (int)(len - at);
    int single = 0;
    int32_t node = 0;
    for (uint32_t k = at; k < len; k++) {
      if ((node = bt_trie_step(&m->trie, node, (unsigned char)s[k])) < 0) break;
      int32_t id = m->trie.value[node];
      if (id < 0) continue;
      if (bt_grow((void **)&L->v, &L->cap, L->n + 1, sizeof *L->v)) return -1;
      L->v[L->n++] = (lnode){(int32_t)at, (int32_t)k + 1, id, m->p[id].score};
      if ((int)(k + 1 - at) == mb) single = 1;
    }
    if (!single) {
      if (bt_grow((void **)&L->v, &L->cap, L->n + 1, sizeof *L->v)) return -1;
      L->v[L->n++] = (lnode){(int32_t)at, (int32_t)at + mb, -1, unk};
    }
    at += (uint32_t)mb;
  }
  return 0;
}

/* Viterbi over a lattice (nodes sorted by start): ids into out (count). */
static int viterbi_ids(const lnodes *L, uint32_t len, double *best, int32_t *from,
                       int32_t *out) {
  for (uint32_t i = 0; i <= len; i++) { best[i] = -INFINITY; from[i] = -1; }
  best[0] = 0.0;
  for (size_t k = 0; k < L->n; k++) {
    const lnode *x = &L->v[k];
    if (best[x->s] == -INFINITY) continue;
    double c = best[x->s] + x->sc;
    if (from[x->e] < 0 || c > best[x->e]) { best[x->e] = c; from[x->e] = (int32_t)k; }
  }
  int cnt = 0;
  for (int32_t e = (int32_t)len; e > 0 && from[e] >= 0; e = L->v[from[e]].s) cnt++;
  int k = cnt;
  for (int32_t e = (int32_t)len; e > 0 && from[e] >= 0; e = L->v[from[e]].s)
    out[--k] = L->v[from[e]].id;
  return cnt;
}

/* ---------- the trainer ---------- */

typedef struct {
  const uword *w; size_t nw;
  double total;                         /* sum of word counts */
} corpus;

/* E-step: expected count of every piece.  Words are cut into fixed blocks;
** each block's contributions are kept in word order and summed block by
** block, so the floating-point sums (and the model) do not depend on the
** number of threads or their timing. */
#define EBLOCK 512
typedef struct { int32_t *id; double *v; size_t n, cap, cap2; } contrib;

static int e_step(const umodel *m, const corpus *C, double *expected) {
  size_t nb = (C->nw + EBLOCK - 1) / EBLOCK;
  contrib *blk = calloc(nb + 1, sizeof *blk);
  int fail = 0;
  if (!blk) return -1;
#pragma omp parallel
  {
    lnodes L = {0};
    double *alpha = NULL, *beta = NULL; size_t acap = 0, bcap = 0;
#pragma omp for schedule(dynamic, 1)
    for (size_t b = 0; b < nb; b++) {
      contrib *cb = &blk[b];
      size_t hi = (b + 1) * EBLOCK < C->nw ? (b + 1) * EBLOCK : C->nw;
      for (size_t i = b * EBLOCK; i < hi; i++) {
        const uword *w = &C->w[i];
        if (lattice(m, w->s, w->len, &L) ||
            bt_grow((void **)&alpha, &acap, w->len + 1, sizeof *alpha) ||
            bt_grow((void **)&beta, &bcap, w->len + 1, sizeof *beta) ||
            bt_grow((void **)&cb->id, &cb->cap, cb->n + L.n + 1, sizeof *cb->id) ||
            bt_grow((void **)&cb->v, &cb->cap2, cb->n + L.n + 1, sizeof *cb->v)) {
#pragma omp atomic write
          fail = 1;
          break;
        }
        for (uint32_t k = 0; k <= w->len; k++) alpha[k] = beta[k] = -INFINITY;
        alpha[0] = 0.0; beta[w->len] = 0.0;
        for (size_t k = 0; k < L.n; k++) {
          const lnode *x = &L.v[k];
          alpha[x->e] = log_add(alpha[x->e], alpha[x->s] + x->sc);
        }
        for (size_t k = L.n; k-- > 0;) {
          const lnode *x = &L.v[k];
          beta[x->s] = log_add(beta[x->s], x->sc + beta[x->e]);
        }
        double z = alpha[w->len];
        if (z == -INFINITY) continue;
        for (size_t k = 0; k < L.n; k++) {
          const lnode *x = &L.v[k];
          if (x->id < 0) continue;
          cb->id[cb->n] = x->id;
          cb->v[cb->n++] = w->count * exp(alpha[x->s] + x->sc + beta[x->e] - z);
        }
      }
    }
    free(L.v); free(alpha); free(beta);
  }
  for (int32_t id = 0; id < m->n; id++) expected[id] = 0.0;
  for (size_t b = 0; b < nb; b++) {
    for (size_t k = 0; k < blk[b].n; k++) expected[blk[b].id[k]] += blk[b].v[k];
    free(blk[b].id); free(blk[b].v);
  }
  free(blk);
  return fail ? -1 : 0;
}

static int m_step(umodel *m, const double *expected) {
  upiece *np = malloc(((size_t)m->n + 1) * sizeof *np);
  if (!np) return -1;
  int32_t k = 0;
  double sum = 0.0;
  for (int32_t i = 0; i < m->n; i++) {
    if (expected[i] < 0.5) { free(m->p[i].s); continue; }
    np[k] = m->p[i];
    np[k].score = expected[i];
    sum += expected[i];
    k++;
  }
  double ls = digamma(sum);
  for (int32_t i = 0; i < k; i++) np[i].score = digamma(np[i].score) - ls;
  free(m->p);
  m->p = NULL; m->n = 0;
  return um_set(m, np, k);
}

/* 2-best segmentation of piece i's own string: *nbest paths (0, 1 or 2),
** the best path's length, and the second path's ids in alt (count *nalt). */
static int two_best(const umodel *m, int32_t i, int *nbest, int *best_len,
                    int32_t *alt, int *nalt) {
  const upiece *p = &m->p[i];
  lnodes L = {0};
  if (lattice(m, p->s, p->len, &L)) return -1;
  uint32_t n = p->len;
  /* top[pos][r]: score, node, rank of the previous position */
  double (*sc)[2] = malloc((n + 1) * sizeof *sc);
  int32_t (*nd)[2] = malloc((n + 1) * sizeof *nd);
  int8_t (*pr)[2] = malloc((n + 1) * sizeof *pr);
  if (!sc || !nd || !pr) { free(sc); free(nd); free(pr); free(L.v); return -1; }
  for (uint32_t k = 0; k <= n; k++) { sc[k][0] = sc[k][1] = -INFINITY; nd[k][0] = nd[k][1] = -1; }
  sc[0][0] = 0.0;
  for (size_t k = 0; k < L.n; k++) {
    const lnode *x = &L.v[k];
    for (int r = 0; r < 2; r++) {
      if (sc[x->s][r] == -INFINITY) continue;
      if (x->s > 0 && nd[x->s][r] < 0) continue;
      double c = sc[x->s][r] + x->sc;
      int32_t e = x->e;
      if (nd[e][0] < 0 || c > sc[e][0]) {
        sc[e][1] = sc[e][0]; nd[e][1] = nd[e][0]; pr[e][1] = pr[e][0];
        sc[e][0] = c; nd[e][0] = (int32_t)k; pr[e][0] = (int8_t)r;
      } else if (nd[e][1] < 0 || c > sc[e][1]) {
        sc[e][1] = c; nd[e][1] = (int32_t)k; pr[e][1] = (int8_t)r;
      }
    }
  }
  *nbest = nd[n][0] < 0 ? 0 : nd[n][1] < 0 ? 1 : 2;
  *best_len = 0; *nalt = 0;
  for (int r0 = 0; r0 < *nbest; r0++) {
    int32_t e = (int32_t)n; int r = r0, cnt = 0;
    int32_t tmp[64];
    while (e > 0 && nd[e][r] >= 0) {
      const lnode *x = &L.v[nd[e][r]];
      if (cnt < 64) tmp[cnt] = x->id;
      cnt++;
      int rr = pr[e][r];
      e = x->s; r = rr;
    }
    if (r0 == 0) *best_len = cnt;
    else {
      int c = cnt < 64 ? cnt : 64;
      for (int k = 0; k < c; k++) alt[k] = tmp[c - 1 - k];
      *nalt = c;
    }
  }
  free(sc); free(nd); free(pr); free(L.v);
  return 0;
}

typedef struct { int32_t id; double loss; const upiece *p; } cand;

static int cmp_cand(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->loss != y->loss) return x->loss > y->loss ? -1 : 1;
  return cmp_piece(x->p, y->p) ;
}

static int prune(umodel *m, const corpus *C, int32_t desired, double shrink) {
  int32_t n = m->n;
  uint8_t *keep = malloc((size_t)n + 1);
  int32_t *altoff = malloc(((size_t)n + 1) * sizeof *altoff);
  int32_t *altlen = calloc((size_t)n + 1, sizeof *altlen);
  int32_t *alts = NULL; size_t nalts = 0, altcap = 0;
  double *freq = calloc((size_t)n + 1, sizeof *freq);
  double *occ = calloc((size_t)n + 1, sizeof *occ);
  cand *cands = malloc(((size_t)n + 1) * sizeof *cands);
  upiece *np = malloc(((size_t)n + 1) * sizeof *np);
  uint8_t *taken = calloc((size_t)n + 1, 1);
  int rc = -1;
  if (!keep || !altoff || !altlen || !freq || !occ || !cands || !np || !taken) goto done;
  for (int32_t i = 0; i < n; i++) {
    int nb, bl, na; int32_t alt[64];
    if (two_best(m, i, &nb, &bl, alt, &na)) goto done;
    altoff[i] = (int32_t)nalts;
    if (nb == 1) keep[i] = 1;                 /* no alternative: keep */
    else if (bl >= 2) keep[i] = 0;            /* split by its own Viterbi */
    else {
      keep[i] = 1;
      if (bt_grow((void **)&alts, &altcap, nalts + (size_t)na + 1, sizeof *alts)) goto done;
      memcpy(alts + nalts, alt, (size_t)na * sizeof *alts);
      nalts += (size_t)na; altlen[i] = na;
    }
  }
  /* Viterbi over the corpus: piece frequencies and occurrence weights */
  {
    lnodes L = {0};
    double *best = NULL; int32_t *from = NULL, *ids = NULL;
    size_t bc = 0, fc = 0, ic = 0;
    for (size_t w = 0; w < C->nw; w++) {
      const uword *x = &C->w[w];
      if (lattice(m, x->s, x->len, &L) ||
          bt_grow((void **)&best, &bc, x->len + 1, sizeof *best) ||
          bt_grow((void **)&from, &fc, x->len + 1, sizeof *from) ||
          bt_grow((void **)&ids, &ic, x->len + 1, sizeof *ids)) {
        free(L.v); free(best); free(from); free(ids); goto done;
      }
      int k = viterbi_ids(&L, x->len, best, from, ids);
      for (int j = 0; j < k; j++) if (ids[j] >= 0) {
        freq[ids[j]] += x->count;
        occ[ids[j]] += x->count;
      }
    }
    free(L.v); free(best); free(from); free(ids);
  }
  double sum = 0.0;
  for (int32_t i = 0; i < n; i++) sum += freq[i];
  double logsum = log(sum);
  int32_t nn = 0, nc = 0;
  for (int32_t i = 0; i < n; i++) {
    if (freq[i] == 0 || !keep[i]) continue;
    if (altlen[i] == 0) { np[nn++] = m->p[i]; taken[i] = 1; continue; }
    double F = occ[i] / C->total;
    double lp = log(freq[i]) - logsum;
    double logsum_alt = log(sum + freq[i] * (altlen[i] - 1));
    double lalt = 0.0;
    for (int32_t k = 0; k < altlen[i]; k++) {
      int32_t a = alts[altoff[i] + k];
      lalt += log((a >= 0 ? freq[a] : 0.0) + freq[i]) - logsum_alt;
    }
    cands[nc++] = (cand){i, F * (lp - lalt), &m->p[i]};
  }
  qsort(cands, (size_t)nc, sizeof *cands, cmp_cand);
  int32_t target = (int32_t)(shrink * n);
  if (target < desired) target = desired;
  for (int32_t k = 0; k < nc && nn < target; k++) {
    np[nn++] = m->p[cands[k].id];
    taken[cands[k].id] = 1;
  }
  for (int32_t i = 0; i < n; i++) if (!taken[i]) free(m->p[i].s);
  free(m->p);
  m->p = NULL; m->n = 0;
  rc = um_set(m, np, nn);
  np = NULL;
done:
  free(keep); free(altoff); free(altlen); free(alts); free(freq); free(occ);
  free(cands); free(np); free(taken);
  return rc;
}

/* ---------- seeds ---------- */

typedef struct { uint32_t cp; double f; } cfreq;

static int cmp_cfreq(const void *a, const void *b) {
  const cfreq *x = a, *y = b;
  if (x->f != y->f) return x->f > y->f ? -1 : 1;
  return x->cp < y->cp ? -1 : x->cp > y->cp;
}

/* substring -> weighted count (open addressing) */
typedef struct { const char *s; uint32_t len; uint64_t h; double c; } sentry;
typedef struct { sentry *e; size_t mask, n; } smap;

static int smap_add(smap *m, const char *s, uint32_t len, double c) {
  if (!m->e || (m->n + 1) * 2 > m->mask + 1) {
    size_t ns = m->e ? (m->mask + 1) * 2 : 1 << 16;
    sentry *ne = calloc(ns, sizeof *ne);
    if (!ne) return -1;
    for (size_t i = 0; m->e && i <= m->mask; i++) {
      if (!m->e[i].s) continue;
      size_t j = (size_t)m->e[i].h & (ns - 1);
      while (ne[j].s) j = (j + 1) & (ns - 1);
      ne[j] = m->e[i];
    }
    free(m->e); m->e = ne; m->mask = ns - 1;
  }
  uint64_t h = bt_hash(s, len);
  size_t j = (size_t)h & m->mask;
  while (m->e[j].s) {
    sentry *x = &m->e[j];
    if (x->h == h && x->len == len && memcmp(x->s, s, len) == 0) { x->c += c; return 0; }
    j = (j + 1) & m->mask;
  }
  m->e[j] = (sentry){s, len, h, c};
  m->n++;
  return 0;
}

static int seeds(const corpus *C, const bt_unigram_train_opts *o, umodel *m,
                 cfreq **chars_out, size_t *nchars_out, char *err, size_t errlen) {
  /* characters */
  double *cf = calloc(0x110000, sizeof *cf);
  smap sm = {0};
  upiece *p = NULL; size_t np = 0, pcap = 0;
  cfreq *chars = NULL; size_t nchars = 0;
  double lone = 0.0;                      /* count of the words "▁" */
  uint32_t *cps = NULL; size_t cpcap = 0;
  int32_t *starts = NULL; size_t stcap = 0;
  int rc = -1;
  if (!cf) goto oom;
  for (size_t i = 0; i < C->nw; i++) {
    const uword *w = &C->w[i];
    if (bt_grow((void **)&cps, &cpcap, w->len + 1, sizeof *cps)) goto oom;
    size_t n = bt_utf8_decode(w->s, w->len, cps);
    for (size_t k = 0; k < n; k++) cf[cps[k]] += w->count;
    if (w->len == 3 && memcmp(w->s, "\xE2\x96\x81", 3) == 0) lone += w->count;
  }
  for (uint32_t c = 0; c < 0x110000; c++) if (cf[c] > 0) nchars++;
  chars = malloc((nchars + 1) * sizeof *chars);
  if (!chars) goto oom;
  nchars = 0;
  for (uint32_t c = 0; c < 0x110000; c++) if (cf[c] > 0) chars[nchars++] = (cfreq){c, cf[c]};
  qsort(chars, nchars, sizeof *chars, cmp_cfreq);
  if (o->character_coverage > 0.0 && o->character_coverage < 1.0) {
    /* spm's rule: the most frequent characters (ties by code point) until
    ** they cover the fraction, the running share compared in float as spm
    ** does; the lone ▁ words (a line's newline) are not counted, spm strips
    ** that space.  The rest are no piece's part (cf < 0): unknown. */
    cfreq *rank = malloc((nchars + 1) * sizeof *rank);
    if (!rank) goto oom;
    memcpy(rank, chars, nchars * sizeof *rank);
    double all = 0.0, acc = 0.0;
    for (size_t k = 0; k < nchars; k++) {
      if (rank[k].cp == 0x2581) rank[k].f -= lone;
      all += rank[k].f;
    }
    qsort(rank, nchars, sizeof *rank, cmp_cfreq);
    size_t keep = 0;
    while (keep < nchars && (float)(acc / all) < (float)o->character_coverage)
      acc += rank[keep++].f;
    for (size_t k = keep; k < nchars; k++) cf[rank[k].cp] = -1.0;
    free(rank);
    size_t kept = 0;
    for (size_t k = 0; k < nchars; k++) if (cf[chars[k].cp] > 0) chars[kept++] = chars[k];
    nchars = kept;
  }
  /* substrings of each distinct word */
  for (size_t i = 0; i < C->nw; i++) {
    const uword *w = &C->w[i];
    if (bt_grow((void **)&cps, &cpcap, w->len + 1, sizeof *cps) ||
        bt_grow((void **)&starts, &stcap, w->len + 2, sizeof *starts)) goto oom;
    size_t n = 0;
    for (uint32_t b = 0; b < w->len;) {
      starts[n] = (int32_t)b;
      int k = utf8_len((unsigned char)w->s[b]);
      if ((uint32_t)k > w->len - b) k = (int)(w->len - b);
      bt_utf8_decode(w->s + b, (size_t)k, &cps[n]);
      n++; b += (uint32_t)k;
    }
    starts[n] = (int32_t)w->len;
    for (size_t a = 0; a < n; a++) {
      int cls = -1;
      for (size_t e = a + 1; e <= n && e - a <= (size_t)o->max_piece_length; e++) {
        uint32_t c = cps[e - 1];
        if (c == 0x2581 && e - 1 != 0) break;            /* ▁ only first */
        if (c == 0xFFFD || c == 0 || cf[c] < 0) break;
        if (c != 0x2581) {
          int k = char_class(c);
          if (k != 0) {
            if (cls >= 0 && k != cls) break;
            cls = k;
          }
        }
        if (e - a < 2) continue;
        if (smap_add(&sm, w->s + starts[a], (uint32_t)(starts[e] - starts[a]), w->count)) goto oom;
      }
    }
  }
  /* all characters, then the substrings by frequency x length */
  if (bt_grow((void **)&p, &pcap, nchars + 1, sizeof *p)) goto oom;
  for (size_t k = 0; k < nchars; k++) {
    char u[4]; int len = bt_utf8_encode(chars[k].cp, u);
    if (!(p[np].s = malloc((size_t)len))) goto oom;
    memcpy(p[np].s, u, (size_t)len);
    p[np].len = (uint32_t)len; p[np].score = chars[k].f;
    np++;
  }
  {
    upiece *cl = NULL; size_t nc = 0;
    if (sm.n) {
      cl = malloc(sm.n * sizeof *cl);
      if (!cl) goto oom;
      for (size_t i = 0; i <= sm.mask; i++) {
        sentry *x = &sm.e[i];
        if (!x->s || x->c < 2) continue;
        size_t chars_in = 0;
        for (uint32_t b = 0; b < x->len; b += (uint32_t)utf8_len((unsigned char)x->s[b])) chars_in++;
        cl[nc++] = (upiece){(char *)x->s, x->len, x->c * (double)chars_in};
      }
      qsort(cl, nc, sizeof *cl, cmp_piece);
    }
    size_t room = (size_t)o->seed_size > np ? (size_t)o->seed_size - np : 0;
    if (nc > room) nc = room;
    if (bt_grow((void **)&p, &pcap, np + nc + 1, sizeof *p)) { free(cl); goto oom; }
    for (size_t k = 0; k < nc; k++) {
      /* back to the plain frequency for the log-probabilities */
      size_t chars_in = 0;
      for (uint32_t b = 0; b < cl[k].len; b += (uint32_t)utf8_len((unsigned char)cl[k].s[b])) chars_in++;
      if (!(p[np].s = malloc(cl[k].len))) { free(cl); goto oom; }
      memcpy(p[np].s, cl[k].s, cl[k].len);
      p[np].len = cl[k].len; p[np].score = cl[k].score / (double)chars_in;
      np++;
    }
    free(cl);
  }
  {
    double sum = 0.0;
    for (size_t k = 0; k < np; k++) sum += p[k].score;
    double ls = log(sum);
    for (size_t k = 0; k < np; k++) p[k].score = log(p[k].score) - ls;
  }
  if (um_set(m, p, (int32_t)np)) { p = NULL; goto oom; }
  p = NULL;
  *chars_out = chars; *nchars_out = nchars;
  chars = NULL;
  rc = 0;
  goto done;
oom:
  snprintf(err, errlen, "out of memory");
done:
  for (size_t k = 0; p && k < np; k++) free(p[k].s);
  free(p); free(cf); free(sm.e); free(chars); free(cps); free(starts);
  return rc;
}

int bt_unigram_train(const bt_unigram_train_opts *o, const char *const *words,
                     const uint32_t *lens, const double *counts, size_t nw,
                     char ***pieces_out, uint32_t **lens_out, double **scores_out,
                     int32_t *n_out, char *err, size_t errlen) {
  umodel m = {0};
  cfreq *chars = NULL; size_t nchars = 0;
  double *expected = NULL;
  upiece *fin = NULL;
  int rc = -1;
  uword *w = malloc((nw + 1) * sizeof *w);
  if (!w) { snprintf(err, errlen, "out of memory"); return -1; }
  corpus C = {w, nw, 0.0};
  for (size_t i = 0; i < nw; i++) {
    w[i] = (uword){words[i], lens[i], counts[i]};
    C.total += counts[i];
  }
  if (nw == 0) {
    snprintf(err, errlen, "no words to train on (empty input)");
    goto done;
  }
  if (seeds(&C, o, &m, &chars, &nchars, err, errlen)) goto done;
  if ((int64_t)nchars > (int64_t)o->vocab_size) {
    snprintf(err, errlen, "vocab_size %d is smaller than the %zu characters "
             "of the alphabet (every one is kept)", o->vocab_size, nchars);
    goto done;
  }
  int32_t desired = (int32_t)(o->vocab_size * 1.1);
  for (int round = 0; round < 200; round++) {
    for (int it = 0; it < o->num_sub_iterations; it++) {
      free(expected);
      if (!(expected = malloc(((size_t)m.n + 1) * sizeof *expected))) goto oom;
      if (e_step(&m, &C, expected) || m_step(&m, expected)) goto oom;
    }
    if (m.n <= desired) break;
    if (prune(&m, &C, desired, o->shrinking_factor)) goto oom;
  }
  /* finalize: characters first (missing ones just above the minimum) */
  {
    size_t cap = (size_t)m.n + nchars + 1, nf = 0;
    fin = calloc(cap, sizeof *fin);
    uint8_t *used = calloc((size_t)m.n + 1, 1);
    if (!fin || !used) { free(used); goto oom; }
    double penalty = 0.0;
    for (size_t k = 0; k < nchars; k++) {
      char u[4]; int len = bt_utf8_encode(chars[k].cp, u);
      int32_t node = 0;
      for (int b = 0; b < len && node >= 0; b++) node = bt_trie_step(&m.trie, node, (unsigned char)u[b]);
      int32_t id = node >= 0 ? m.trie.value[node] : -1;
      double sc;
      if (id >= 0) { sc = m.p[id].score; used[id] = 1; }
      else { sc = m.min_score + penalty; penalty += 0.0001; }
      if (!(fin[nf].s = malloc((size_t)len))) { free(used); goto oom; }
      memcpy(fin[nf].s, u, (size_t)len);
      fin[nf].len = (uint32_t)len; fin[nf].score = sc;
      nf++;
    }
    upiece *rest = malloc(((size_t)m.n + 1) * sizeof *rest);
    if (!rest) { free(used); goto oom; }
    size_t nr = 0;
    for (int32_t i = 0; i < m.n; i++) if (!used[i]) rest[nr++] = m.p[i];
    qsort(rest, nr, sizeof *rest, cmp_piece);
    for (size_t k = 0; k < nr && nf < (size_t)o->vocab_size; k++) {
      if (!(fin[nf].s = malloc(rest[k].len))) { free(rest); free(used); goto oom; }
      memcpy(fin[nf].s, rest[k].s, rest[k].len);
      fin[nf].len = rest[k].len; fin[nf].score = rest[k].score;
      nf++;
    }
    free(rest); free(used);
    qsort(fin, nf, sizeof *fin, cmp_piece);
    char **ps = malloc((nf + 1) * sizeof *ps);
    uint32_t *pl = malloc((nf + 1) * sizeof *pl);
    double *sc = malloc((nf + 1) * sizeof *sc);
    if (!ps || !pl || !sc) { free(ps); free(pl); free(sc); goto oom; }
    for (size_t k = 0; k < nf; k++) {
      ps[k] = fin[k].s; pl[k] = fin[k].len; sc[k] = fin[k].score;
      fin[k].s = NULL;
    }
    *pieces_out = ps; *lens_out = pl; *scores_out = sc; *n_out = (int32_t)nf;
  }
  rc = 0;
  goto done;
oom:
  snprintf(err, errlen, "out of memory");
done:
  if (fin) {
    for (int32_t k = 0; k < m.n + (int32_t)nchars; k++) if (fin[k].s) free(fin[k].s);
    free(fin);
  }
  free(expected); free(chars); free(w);
  um_free(&m);
  return rc;
}
