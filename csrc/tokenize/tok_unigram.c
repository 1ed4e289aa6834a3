/*
** Unigram (SentencePiece) tokenization: Viterbi segmentation over the
** pieces' trie (tok_trie.c), unknown handling (unk piece, byte fallback),
** the normalizers that Unigram files use (the precompiled charsmap is in
** tok_charsmap.c) and the Metaspace pre-tokenizer; tok_decode.c decodes.
**
** Two semantics, chosen by t->uni_spm:
**  - SentencePiece (.model files, uni_spm = 1): spm's normalizer (user
**    symbols, then the longest precompiled-charsmap rule, whitespace
**    folding, `▁` escaping, dummy prefix) over the whole segment, Viterbi
**    scores kept in float32 as spm keeps them, user-defined pieces scored
**    len * max(FLT_MIN, max score) - 0.1, unused pieces skipped, control /
**    unknown / byte pieces never matched in text.
**  - Hugging Face (tokenizer.json, uni_spm = 0): a chain of normalizers
**    with HF's alignment rules, Metaspace splitting, f64 Viterbi over every
**    vocab piece, consecutive unknowns fused.
** Offsets: each normalized byte carries the original char span [uos, uoe)
** it came from; a token's span runs from its first byte's start to its
** last byte's end.
*/
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

#define UNK_PENALTY 10.0f

/* ---------- setup ---------- */

int bt_add_norm_step(bt_tokenizer *t, int kind, const char *from,
                     size_t flen, const char *to, size_t tlen) {
  bt_norm_step *n = realloc(t->norms, (size_t)(t->nnorms + 1) * sizeof *n);
  if (!n) return -1;
  t->norms = n;
  bt_norm_step *x = &n[t->nnorms];
  memset(x, 0, sizeof *x);
  x->from = malloc((flen + 1) * sizeof *x->from);
  x->to = malloc((tlen + 1) * sizeof *x->to);
  if (!x->from || !x->to) { free(x->from); free(x->to); return -1; }
  x->nfrom = (int)bt_utf8_decode(from ? from : "", flen, x->from);
  x->nto = (int)bt_utf8_decode(to ? to : "", tlen, x->to);
  x->kind = kind;
  t->nnorms++;
  return 0;
}

int bt_unigram_setup(bt_tokenizer *t, const double *scores,
                     const uint8_t *types, int32_t n) {
  free(t->uni_score); free(t->uni_type);
  bt_trie_free(&t->trie); bt_trie_free(&t->user_trie);
  free(t->uni_vs);
  t->uni_score = malloc(((size_t)n + 1) * sizeof *t->uni_score);
  t->uni_type = malloc((size_t)n + 1);
  t->uni_vs = malloc(((size_t)n + 1) * sizeof *t->uni_vs);
  if (!t->uni_score || !t->uni_type || !t->uni_vs) goto oom;
  t->uni_n = n;
  float fmin = FLT_MAX, fmax = FLT_MIN;
  double hmin = INFINITY;
  for (int32_t id = 0; id < n; id++) {
    size_t len;
    const char *s = bt_vocab_token(&t->vocab, id, &len);
    if (!s) {
      snprintf(t->err, sizeof t->err, "Unigram: no piece with id %d "
               "(ids must run from 0 to %d)", (int)id, (int)n - 1);
      return -1;
    }
    double sc = scores ? scores[id] : 0.0;
    int ty = types ? types[id] : BT_PIECE_NORMAL;
    if (ty < BT_PIECE_NORMAL || ty > BT_PIECE_BYTE) ty = BT_PIECE_NORMAL;
    t->uni_score[id] = sc; t->uni_type[id] = (uint8_t)ty;
    if (t->uni_spm) {
      if (ty == BT_PIECE_NORMAL) {
        if ((float)sc < fmin) fmin = (float)sc;
        if ((float)sc > fmax) fmax = (float)sc;
      }
      if (ty == BT_PIECE_UNKNOWN && t->unk_id < 0) t->unk_id = id;
      /* unused pieces are skipped by spm's Viterbi: leave them out */
      if (ty == BT_PIECE_NORMAL || ty == BT_PIECE_USER_DEFINED)
        if (bt_trie_insert(&t->trie, s, len, id)) goto oom;
      if (ty == BT_PIECE_USER_DEFINED &&
          bt_trie_insert(&t->user_trie, s, len, id)) goto oom;
    } else {
      if (sc < hmin) hmin = sc;
      if (bt_trie_insert(&t->trie, s, len, id)) goto oom;
    }
  }
  t->ws_splits = 1;
  for (int32_t id = 0; t->uni_spm && id < n; id++) {
    int ty = t->uni_type[id];
    if (ty != BT_PIECE_NORMAL && ty != BT_PIECE_USER_DEFINED) continue;
    size_t len;
    const char *p = bt_vocab_token(&t->vocab, id, &len);
    for (size_t k = 1; k + 3 <= len && t->ws_splits; k++)
      if (memcmp(p + k, "\xE2\x96\x81", 3) == 0) t->ws_splits = 0;
  }
  if (t->uni_spm) { t->uni_min = fmin; t->uni_max = fmax; }
  else { t->uni_min = n > 0 ? hmin : 0.0; t->uni_max = 0.0; }
  for (int32_t id = 0; id < n; id++) {
    if (!t->uni_spm) { t->uni_vs[id] = t->uni_score[id]; continue; }
    size_t len = 0;
    bt_vocab_token(&t->vocab, id, &len);
    /* spm: user-defined pieces get len * max(FLT_MIN, max score) - 0.1
    ** (len in bytes, the product in float); the others their float score */
    t->uni_vs[id] = t->uni_type[id] == BT_PIECE_USER_DEFINED
      ? (double)((float)len * (float)t->uni_max) - 0.1 : (double)(float)t->uni_score[id];
  }
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_piece[b] = bt_vocab_get(&t->vocab, name, 6);
  }
  if (bt_trie_compile(&t->trie) || bt_trie_compile(&t->user_trie)) goto oom;
  return 0;
oom:
  snprintf(t->err, sizeof t->err, "out of memory");
  return -1;
}

void bt_unigram_free(bt_tokenizer *t) {
  free(t->uni_score); free(t->uni_type); free(t->uni_vs);
  t->uni_score = NULL; t->uni_type = NULL; t->uni_vs = NULL;
  bt_trie_free(&t->trie); bt_trie_free(&t->user_trie);
  bt_charsmap_free(&t->charsmap);
  for (int i = 0; i < t->nnorms; i++) { free(t->norms[i].from); free(t->norms[i].to); }
  free(t->norms);
  t->norms = NULL; t->nnorms = 0;
}

/* ---------- buffers ---------- */

static int ub_reserve(bt_worker *w, size_t n) {
  size_t c = w->ub_cap;
  if (n <= c) return 0;
  if (bt_grow((void **)&w->ub, &c, n, 1)) return -1;
  c = w->ub_cap;
  if (bt_grow((void **)&w->uos, &c, n, sizeof(int32_t))) return -1;
  c = w->ub_cap;
  if (bt_grow((void **)&w->uoe, &c, n, sizeof(int32_t))) return -1;
  w->ub_cap = c;
  return 0;
}

static int t_reserve(bt_worker *w, int k, size_t n) {
  size_t c = w->t_cap[k];
  if (n <= c) return 0;
  if (bt_grow((void **)&w->tcp[k], &c, n, sizeof(uint32_t))) return -1;
  c = w->t_cap[k];
  if (bt_grow((void **)&w->tos[k], &c, n, sizeof(int32_t))) return -1;
  c = w->t_cap[k];
  if (bt_grow((void **)&w->toe[k], &c, n, sizeof(int32_t))) return -1;
  w->t_cap[k] = c;
  return 0;
}

/* ---------- SentencePiece's normalizer ---------- */

typedef struct { const char *s; size_t len, consumed; } prefix_t;

static prefix_t spm_prefix(const bt_tokenizer *t, const unsigned char *in,
                           size_t n) {
  prefix_t p = {0};
  if (in[0] < 128 && t->cm_plain[in[0]] && (n == 1 || in[1] < 128)) {
    p.s = (const char *)in; p.len = p.consumed = 1;
    return p;
  }
  if (t->user_trie.nnodes > 1) {        /* user-defined symbols: verbatim */
    int32_t node = 0; size_t best = 0;
    for (size_t i = 0; i < n; i++) {
      if ((node = bt_trie_step(&t->user_trie, node, in[i])) < 0) break;
      if (t->user_trie.value[node] >= 0) best = i + 1;
    }
    if (best) { p.s = (const char *)in; p.len = p.consumed = best; return p; }
  }
  if (n >= 3 && in[0] == 0xEF && in[1] == 0xBF && in[2] == 0xBD) {
    /* U+FFFD stands for an invalid byte of the original text, which spm
    ** replaces without a charsmap lookup */
    p.s = "\xEF\xBF\xBD"; p.len = 3; p.consumed = 3;
    return p;
  }
  const char *rep; size_t rlen;
  size_t m = bt_charsmap_prefix(&t->charsmap, in, n, 1, &rep, &rlen);
  if (m) { p.s = rep; p.len = rlen; p.consumed = m; return p; }
  int k = bt_utf8_valid_len(in, n);
  if (k == 0) { p.s = "\xEF\xBF\xBD"; p.len = 3; p.consumed = 1; }
  else { p.s = (const char *)in; p.len = p.consumed = (size_t)k; }
  return p;
}

/* Normalizes in[0, n) (ic[k]: original char of byte k, ic[n] the end) into
** w->ub with spans; returns the normalized length or -1. */
static long spm_normalize(const bt_tokenizer *t, bt_worker *w,
                          const unsigned char *in, const int32_t *ic,
                          size_t n) {
  static const char WS[] = "\xE2\x96\x81";
  size_t cap = n * 3 + 16, k = 0, consumed = 0;
  if (ub_reserve(w, cap)) return -1;
  int32_t *n2o = w->uos;                /* byte offsets first, spans below */
  if (t->remove_extra_ws) {
    while (consumed < n) {
      prefix_t p = spm_prefix(t, in + consumed, n - consumed);
      if (!(p.len == 1 && p.s[0] == ' ')) break;
      consumed += p.consumed;
    }
  }
  if (consumed == n) return 0;
#define PUSH(ch) do { if (k + 8 > w->ub_cap) { if (ub_reserve(w, w->ub_cap * 2)) return -1; n2o = w->uos; } \
                      w->ub[k] = (ch); n2o[k] = (int32_t)consumed; k++; } while (0)
#define ADD_WS() do { if (t->escape_ws) { PUSH(WS[0]); PUSH(WS[1]); PUSH(WS[2]); } else PUSH(' '); } while (0)
  if (!t->ws_as_suffix && t->add_dummy_prefix) ADD_WS();
  int prev_space = t->remove_extra_ws;
  while (consumed < n) {
    unsigned char c0 = in[consumed];
    if (c0 < 128 && t->cm_plain[c0] && (consumed + 1 == n || in[consumed + 1] < 128) &&
        c0 != ' ') {                                    /* the common case */
      /* a run of plain ASCII (not space) bytes is copied as it is; its last
      ** byte only when no multi-byte character follows (the charsmap may
      ** have a rule starting with it) */
      size_t end = consumed + 1;
      while (end < n && in[end] < 128 && t->cm_plain[in[end]] && in[end] != ' ') end++;
      if (end < n && in[end] >= 128 && end - 1 > consumed) end--;
      size_t run = end - consumed;
      if (k + run + 8 > w->ub_cap) {
        if (ub_reserve(w, (k + run) * 2 + 8)) return -1;
        n2o = w->uos;
      }
      memcpy(w->ub + k, in + consumed, run);
      for (size_t j = 0; j < run; j++) n2o[k + j] = (int32_t)(consumed + j);
      k += run;
      consumed = end;
      prev_space = 0;
      continue;
    }
    prefix_t p = spm_prefix(t, in + consumed, n - consumed);
    const char *s = p.s; size_t len = p.len;
    if (prev_space) while (len > 0 && s[0] == ' ') { s++; len--; }
    if (len > 0) {
      for (size_t j = 0; j < len; j++) {
        if (t->escape_ws && s[j] == ' ') ADD_WS();
        else PUSH(s[j]);
      }
      prev_space = s[len - 1] == ' ';
    }
    consumed += p.consumed;
    if (!t->remove_extra_ws) prev_space = 0;
  }
  if (t->remove_extra_ws) {
    size_t wl = t->escape_ws ? 3 : 1;
    const char *ws = t->escape_ws ? WS : " ";
    while (k >= wl && memcmp(w->ub + k - wl, ws, wl) == 0) {
      k -= wl;
      consumed = (size_t)n2o[k];
    }
  }
  if (t->ws_as_suffix && t->add_dummy_prefix) ADD_WS();
#undef ADD_WS
#undef PUSH
  if (ub_reserve(w, k + 1)) return -1;
  n2o = w->uos;
  n2o[k] = (int32_t)consumed;
  /* spans: byte j covers original [n2o[j], n2o[j + 1]) as spm reports */
  for (size_t j = 0; j < k; j++) w->uoe[j] = ic[n2o[j + 1]];
  for (size_t j = 0; j <= k; j++) n2o[j] = ic[n2o[j]];
  return (long)k;
}

/* ---------- Hugging Face normalizers over code points ---------- */

typedef struct { uint32_t *cp; int32_t *os, *oe; size_t n; int buf; } cpbuf;

/* Output buffer helper: appends c with span (s, e). */
static inline int cb_push(bt_worker *w, cpbuf *o, uint32_t c, int32_t s, int32_t e) {
  if (o->n >= w->t_cap[o->buf]) {
    if (t_reserve(w, o->buf, (o->n + 1) * 2)) return -1;
    o->cp = w->tcp[o->buf]; o->os = w->tos[o->buf]; o->oe = w->toe[o->buf];
  }
  o->cp[o->n] = c; o->os[o->n] = s; o->oe[o->n] = e; o->n++;
  return 0;
}

static cpbuf cb_start(bt_worker *w, int buf) {
  cpbuf o = {w->tcp[buf], w->tos[buf], w->toe[buf], 0, buf};
  return o;
}

/* Sequential transform as HF's NormalizedString::transform: (c, change)
** pairs consume the input chars: change <= 0 takes the span of the next
** input char and skips -change more; change > 0 inserts c with the span
** of the previous input char. */
typedef struct { const cpbuf *in; cpbuf *out; size_t i; int32_t base; } xform;

static int xf(bt_worker *w, xform *x, uint32_t c, int change) {
  int32_t s, e;
  if (change > 0) {
    if (x->i == 0) { s = e = x->base; }
    else { s = x->in->os[x->i - 1]; e = x->in->oe[x->i - 1]; }
  } else {
    if (x->i >= x->in->n) return 0;
    s = x->in->os[x->i]; e = x->in->oe[x->i];
    x->i += 1 + (size_t)(-change);
  }
  return cb_push(w, x->out, c, s, e);
}

static int match_at(const cpbuf *in, size_t i, const uint32_t *p, int np) {
  if (np == 0 || i + (size_t)np > in->n) return 0;
  for (int k = 0; k < np; k++) if (in->cp[i + (size_t)k] != p[k]) return 0;
  return 1;
}

/* HF's Precompiled: per extended grapheme cluster (under 6 bytes) the
** first charsmap rule matching a prefix replaces the whole cluster; else
** each char is looked up alone. */
static int precompiled(const bt_tokenizer *t, bt_worker *w, const cpbuf *in,
                       cpbuf *out, int32_t base) {
  size_t n = in->n;
  /* the change list: chars and changes (HF's `replace` helper) */
  uint32_t *lc = NULL; int *lchg = NULL; size_t ln = 0, lcap = 0, lcap2 = 0;
  int rc = -1;
  size_t g = 0;
  if (bt_grow((void **)&lc, &lcap, n + 16, sizeof *lc) ||
      bt_grow((void **)&lchg, &lcap2, n + 16, sizeof *lchg)) goto done;
  while (g < n) {
    size_t ge = g + 1;
    utf8proc_int32_t state = 0;
    /* ASCII before ASCII is a cluster of its own (but CR LF is one) */
    int alone = in->cp[g] < 0x80 && (ge == n || (in->cp[ge] < 0x80 &&
                                                !(in->cp[g] == '\r' && in->cp[ge] == '\n')));
    if (alone && t->hf_plain[in->cp[g]]) {      /* no rule: kept as it is */
      if (ln + 1 > lcap && (bt_grow((void **)&lc, &lcap, ln + 1, sizeof *lc) ||
                            bt_grow((void **)&lchg, &lcap2, ln + 1, sizeof *lchg))) goto done;
      lc[ln] = in->cp[g]; lchg[ln++] = 0;
      g++;
      continue;
    }
    while (!alone && ge < n && !utf8proc_grapheme_break_stateful(
             (utf8proc_int32_t)in->cp[ge - 1], (utf8proc_int32_t)in->cp[ge], &state))
      ge++;
    char gb[64];
    size_t glen = 0;
    int whole = 0;
    for (size_t k = g; k < ge && glen < 6; k++) glen += (size_t)bt_utf8_encode(in->cp[k], gb + glen);
    for (int pass = 0; pass < 2; pass++) {
      size_t from = g, to = ge;
      if (pass == 0 && glen >= 6) continue;
      if (pass == 1 && whole) break;
      for (size_t k = from; k < to; k++) {
        char cb[8]; size_t clen;
        const char *src; size_t slen;
        size_t ks = pass == 0 ? g : k, ke = pass == 0 ? ge : k + 1;
        if (pass == 0) { src = gb; slen = glen; }
        else { clen = (size_t)bt_utf8_encode(in->cp[k], cb); src = cb; slen = clen; }
        const char *rep; size_t rlen;
        size_t m = bt_charsmap_prefix(&t->charsmap, (const unsigned char *)src, slen, 0, &rep, &rlen);
        if (pass == 0 && !m) break;
        long old_count = (long)(ke - ks), new_count = 0;
        if (bt_grow((void **)&lc, &lcap, ln + (m ? rlen : 1) + 1, sizeof *lc) ||
            bt_grow((void **)&lchg, &lcap2, ln + (m ? rlen : 1) + 1, sizeof *lchg))
          goto done;
        if (m) {
          size_t first = ln;
          uint32_t tmp[64];
          size_t nc = rlen <= 64 ? bt_utf8_decode(rep, rlen, tmp) : 0;
          if (rlen > 64) {             /* long rules: decode in place */
            uint32_t *big = malloc((rlen + 1) * sizeof *big);
            if (!big) goto done;
            nc = bt_utf8_decode(rep, rlen, big);
            if (bt_grow((void **)&lc, &lcap, ln + nc + 1, sizeof *lc) ||
                bt_grow((void **)&lchg, &lcap2, ln + nc + 1, sizeof *lchg)) { free(big); goto done; }
            for (size_t j = 0; j < nc; j++) { lc[ln] = big[j]; lchg[ln++] = 0; }
            free(big);
          } else {
            for (size_t j = 0; j < nc; j++) { lc[ln] = tmp[j]; lchg[ln++] = 0; }
          }
          new_count = (long)nc;
          long diff = new_count - old_count;
          if (diff > 0) {
            for (size_t j = ln; j > first && diff > 0; j--, diff--) lchg[j - 1] = 1;
          } else if (diff < 0 && ln > 0) {
            lchg[ln - 1] += (int)diff;
          }
          if (pass == 0) { whole = 1; break; }
        } else {
          lc[ln] = in->cp[k]; lchg[ln++] = 0;
        }
      }
    }
    g = ge;
  }
  {
    xform x = {in, out, 0, base};
    for (size_t j = 0; j < ln; j++) if (xf(w, &x, lc[j], lchg[j])) goto done;
  }
  rc = 0;
done:
  free(lc); free(lchg);
  return rc;
}

static int is_combining_mark(uint32_t c) {
  int cat = utf8proc_category((utf8proc_int32_t)c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC ||
         cat == UTF8PROC_CATEGORY_ME;
}

/* Two chars' primary composite (Hangul included), or 0.  No composite
** has a second part below U+0300. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (b < 0x300) return 0;
  utf8proc_int32_t pair[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
  return utf8proc_normalize_utf32(pair, 2, UTF8PROC_COMPOSE) == 1 ? (uint32_t)pair[0] : 0;
}

/* The (char, change) stream of a normalization form, as HF's
** NormalizedString builds it (unicode-normalization-alignments). */
typedef struct { uint32_t *c; int *chg; uint8_t *ccc; size_t n, cap[3]; } ustream;

static int us_push(ustream *s, uint32_t c, int chg, uint8_t ccc) {
  if (bt_grow((void **)&s->c, &s->cap[0], s->n + 1, sizeof *s->c) ||
      bt_grow((void **)&s->chg, &s->cap[1], s->n + 1, sizeof *s->chg) ||
      bt_grow((void **)&s->ccc, &s->cap[2], s->n + 1, 1)) return -1;
  s->c[s->n] = c; s->chg[s->n] = chg; s->ccc[s->n] = ccc; s->n++;
  return 0;
}

static uint8_t ccc_of(uint32_t c) {
  return c < 0x300 ? 0 : (uint8_t)utf8proc_get_property((utf8proc_int32_t)c)->combining_class;
}

/* NFD / NFKD / NFC / NFKC.  Each char is decomposed (its first part keeps
** the char, change 0; the others are inserted, +1), each run of marks is
** sorted by combining class (stable); NFC / NFKC then recompose as the
** Unicode algorithm does, a composite carrying its parts' changes - 1 and
** marks that were blocked following their starter. */
static int unicode_form(bt_worker *w, const cpbuf *in, cpbuf *out, int32_t base,
                        int compat, int compose) {
  ustream d = {0}, o = {0};
  int rc = -1;
  for (size_t i = 0; i < in->n; i++) {
    uint32_t c = in->cp[i];
    utf8proc_int32_t dec[32]; int bc = 0;
    utf8proc_ssize_t nd = 1;
    dec[0] = (utf8proc_int32_t)c;
    if (c >= 0x80) {
      nd = utf8proc_decompose_char((utf8proc_int32_t)c, dec, 32,
                                   UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0), &bc);
      if (nd < 1 || nd > 32) { dec[0] = (utf8proc_int32_t)c; nd = 1; }
    }
    for (utf8proc_ssize_t k = 0; k < nd; k++)
      if (us_push(&d, (uint32_t)dec[k], k > 0, ccc_of((uint32_t)dec[k]))) goto done;
  }
  for (size_t i = 1; i < d.n; i++) {          /* canonical order */
    if (d.ccc[i] == 0) continue;
    for (size_t j = i; j > 0 && d.ccc[j - 1] > d.ccc[j]; j--) {
      uint32_t c = d.c[j]; d.c[j] = d.c[j - 1]; d.c[j - 1] = c;
      int g = d.chg[j]; d.chg[j] = d.chg[j - 1]; d.chg[j - 1] = g;
      uint8_t k = d.ccc[j]; d.ccc[j] = d.ccc[j - 1]; d.ccc[j - 1] = k;
    }
  }
  const ustream *res = &d;
  if (compose) {
    /* blocked marks wait in d itself: [blk, blk + nblk) never overlaps the
    ** unread part, since they are read before they are kept */
    int have = 0, starter_chg = 0, last = -1;   /* last: ccc of the last blocked, -1 none */
    uint32_t starter = 0;
    size_t nblk = 0;
    uint32_t *bc = malloc((d.n + 1) * sizeof *bc);
    int *bg = malloc((d.n + 1) * sizeof *bg);
    if (!bc || !bg) { free(bc); free(bg); goto done; }
#define FLUSH() do { if (have && us_push(&o, starter, starter_chg, 0)) goto fail; \
                     for (size_t q = 0; q < nblk; q++) if (us_push(&o, bc[q], bg[q], 1)) goto fail; \
                     nblk = 0; } while (0)
    for (size_t i = 0; i < d.n; i++) {
      uint32_t c = d.c[i]; int g = d.chg[i], ccc = d.ccc[i];
      if (!have) {
        if (ccc != 0) { if (us_push(&o, c, g, 1)) goto fail; continue; }
        starter = c; starter_chg = g; have = 1;
        continue;
      }
      uint32_t r;
      if ((last < 0 || last < ccc) && (r = compose_pair(starter, c)) != 0) {
        starter = r; starter_chg += g - 1;
        continue;
      }
      if (ccc == 0) {
        FLUSH();
        starter = c; starter_chg = g; last = -1;
        continue;
      }
      bc[nblk] = c; bg[nblk] = g; nblk++;
      last = ccc;
    }
    FLUSH();
#undef FLUSH
    free(bc); free(bg);
    res = &o;
    goto composed;
fail:
    free(bc); free(bg);
    goto done;
  }
composed:
  {
    xform x = {in, out, 0, base};
    for (size_t i = 0; i < res->n; i++) if (xf(w, &x, res->c[i], res->chg[i])) goto done;
  }
  rc = 0;
done:
  free(d.c); free(d.chg); free(d.ccc); free(o.c); free(o.chg); free(o.ccc);
  return rc;
}

/* Nmt: ASCII and C1 controls removed, other spaces and invisibles to ' '. */
static int nmt_removes(uint32_t c) {
  return (c >= 1 && c <= 8) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
         c == 0x8F || c == 0x9F;
}

static int nmt_space(uint32_t c) {
  return c == 9 || c == 10 || c == 12 || c == 13 || c == 0x1680 ||
         (c >= 0x200B && c <= 0x200F) || c == 0x2028 || c == 0x2029 || c == 0x2581 ||
         c == 0xFEFF || c == 0xFFFD;
}

/* Runs one step from buffer in to buffer out. */
static int norm_step(const bt_tokenizer *t, bt_worker *w, const bt_norm_step *st,
                     const cpbuf *in, cpbuf *out, int32_t base) {
  size_t n = in->n;
  switch (st->kind) {
  case BT_NORM_REPLACE:
  case BT_NORM_SPACES:
    for (size_t i = 0; i < n;) {
      size_t m = 0;
      if (st->kind == BT_NORM_REPLACE) {
        if (match_at(in, i, st->from, st->nfrom)) m = (size_t)st->nfrom;
      } else if (in->cp[i] == ' ' && i + 1 < n && in->cp[i + 1] == ' ') {
        m = 2;
        while (i + m < n && in->cp[i + m] == ' ') m++;
      }
      if (!m) {
        if (cb_push(w, out, in->cp[i], in->os[i], in->oe[i])) return -1;
        i++;
        continue;
      }
      /* inserted chars share the span of the match's last char */
      for (int k = 0; k < st->nto; k++)
        if (cb_push(w, out, st->to[k], in->os[i + m - 1], in->oe[i + m - 1])) return -1;
      i += m;
    }
    return 0;
  case BT_NORM_LOWERCASE:
    for (size_t i = 0; i < n; i++) {
      uint32_t c = in->cp[i];
      if (c < 0x80) { if (c >= 'A' && c <= 'Z') c += 32; }
      else if (c == 0x130) {
        if (cb_push(w, out, 'i', in->os[i], in->oe[i])) return -1;
        c = 0x307;
      } else c = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
      if (cb_push(w, out, c, in->os[i], in->oe[i])) return -1;
    }
    return 0;
  case BT_NORM_NFKD:
  case BT_NORM_NFD:
  case BT_NORM_NFKC:
  case BT_NORM_NFC:
    return unicode_form(w, in, out, base, st->kind == BT_NORM_NFKD || st->kind == BT_NORM_NFKC,
                        st->kind == BT_NORM_NFC || st->kind == BT_NORM_NFKC);
  case BT_NORM_NMT:
    for (size_t i = 0; i < n; i++) {
      uint32_t c = in->cp[i];
      if (nmt_removes(c)) continue;
      if (cb_push(w, out, nmt_space(c) ? ' ' : c, in->os[i], in->oe[i])) return -1;
    }
    return 0;
  case BT_NORM_STRIP_ACCENTS:
    for (size_t i = 0; i < n; i++) {
      if (in->cp[i] >= 0x300 && is_combining_mark(in->cp[i])) continue;
      if (cb_push(w, out, in->cp[i], in->os[i], in->oe[i])) return -1;
    }
    return 0;
  case BT_NORM_PRECOMPILED:
    return precompiled(t, w, in, out, base);
  case BT_NORM_STRIP: {
    size_t a = 0, b = n;
    if (st->strip_left) while (a < b && bt_is_whitespace(in->cp[a])) a++;
    if (st->strip_right) while (b > a && bt_is_whitespace(in->cp[b - 1])) b--;
    for (size_t i = a; i < b; i++)
      if (cb_push(w, out, in->cp[i], in->os[i], in->oe[i])) return -1;
    return 0;
  }
  case BT_NORM_PREPEND:
    for (size_t i = 0; i < n; i++) {
      if (i == 0)
        for (int k = 0; k < st->nto; k++)
          if (cb_push(w, out, st->to[k], in->os[0], in->oe[0])) return -1;
      if (cb_push(w, out, in->cp[i], in->os[i], in->oe[i])) return -1;
    }
    return 0;
  }
  return 0;
}

/* ---------- Viterbi ---------- */

/* Viterbi over s[0, n) from a starting score `base`.  round: keep each
** best score in float32 as spm does.  Appends the tokens, as (id, start +
** at, len) triples with id -2 for an unknown, to w->toks from *ntok on.
** *final gets the best score at n; with gap != NULL, the smallest margin
** between the winner and the runner-up at any position (0 on a tie) and
** the largest score magnitude seen, for the word cache. */
static int viterbi(const bt_tokenizer *t, bt_worker *w, const unsigned char *s,
                   int32_t n, int32_t at0, double base, int round, int *ntok,
                   double *final, double *gap, double *mag) {
  size_t need = (size_t)n + 1, c = w->v_cap;
  if (bt_grow((void **)&w->vscore, &c, need, sizeof(double))) return -1;
  c = w->v_cap;
  if (bt_grow((void **)&w->vstart, &c, need, sizeof(int32_t))) return -1;
  c = w->v_cap;
  if (bt_grow((void **)&w->vid, &c, need, sizeof(int32_t))) return -1;
  c = w->v_cap;
  if (bt_grow((void **)&w->vsec, &c, need, sizeof(double))) return -1;
  w->v_cap = c;
  double *best = w->vscore, *sec = w->vsec;
  int32_t *start = w->vstart, *vid = w->vid;
  for (int32_t i = 0; i <= n; i++) start[i] = -1;
  best[0] = base;
  const int spm = t->uni_spm;
  const double unk_score = spm ? (double)((float)t->uni_min - UNK_PENALTY)
                               : t->uni_min - 10.0;
  const bt_trie *tr = &t->trie;
  const double *vs = t->uni_vs;
  const int32_t *dbase = tr->da_base, *check = tr->da_check, *val = tr->value;
  const int32_t dn = tr->da_n;
  double big = 0.0;
  if (gap) for (int32_t i = 0; i <= n; i++) sec[i] = -INFINITY;
#define OFFER(E, CAND, AT, ID) do {                                          \
    double cand_ = (CAND); int32_t e_ = (E);                               \
    if (gap) {                                                             \
      if (fabs(cand_) > big) big = fabs(cand_);                            \
      if (start[e_] < 0) sec[e_] = -INFINITY;                              \
      else if (cand_ > best[e_]) sec[e_] = best[e_];                       \
      else if (cand_ > sec[e_]) sec[e_] = cand_;                           \
    }                                                                      \
    if (start[e_] < 0 || cand_ > best[e_]) {                               \
      best[e_] = round ? (double)(float)cand_ : cand_;                     \
      start[e_] = (AT); vid[e_] = (ID);                                    \
    }                                                                      \
  } while (0)
  for (int32_t at = 0; at < n;) {
    double here = best[at];
    int mblen = 1;
    unsigned char b0 = s[at];
    if (b0 >= 0xF0) mblen = 4; else if (b0 >= 0xE0) mblen = 3; else if (b0 >= 0xC0) mblen = 2;
    if (mblen > n - at) mblen = n - at;
    int single = 0;
    int32_t node = 0;
    for (int32_t k = at; k < n; k++) {
      if (dbase) {                              /* the double array, inline */
        int32_t x = dbase[node] + s[k] + 1;
        if (x >= dn || check[x] != node) break;
        node = x;
      } else if ((node = bt_trie_step(tr, node, s[k])) < 0) break;
      int32_t id = val[node];
      if (id < 0) continue;
      OFFER(k + 1, vs[id] + here, at, id);
      if (k + 1 - at == mblen) single = 1;
    }
    if (!single) OFFER(at + mblen, unk_score + here, at, -2);
    at += mblen;
  }
#undef OFFER
  if (gap) {
    double g = INFINITY;
    for (int32_t i = 1; i <= n; i++) {
      if (start[i] < 0) continue;
      double d = best[i] - sec[i];
      if (d < g) g = d;
    }
    *gap = g; *mag = big;
  }
  *final = best[n];
  int cnt = 0;
  for (int32_t e = n; e > 0; e = start[e]) cnt++;
  if (bt_grow((void **)&w->toks, &w->toks_cap, (size_t)(*ntok + cnt) * 3 + 3, sizeof(int32_t)))
    return -1;
  int k = *ntok + cnt;
  for (int32_t e = n; e > 0; e = start[e]) {
    k--;
    w->toks[3 * k] = vid[e]; w->toks[3 * k + 1] = start[e] + at0;
    w->toks[3 * k + 2] = e - start[e];
  }
  *ntok += cnt;
  return 0;
}

/* ---------- the word cache ---------- */

#define UCACHE_ENTRIES 32768             /* words per worker, then cleared */

/* a[0, len) == b[0, len) for len <= BT_UC_KEY (24), in 8-byte loads that
** stay inside both (the library's memcmp call cost more than the words) */
static inline int key_equal(const char *a, const unsigned char *b, uint32_t len) {
  if (len < 8) {
    for (uint32_t k = 0; k < len; k++)
      if (a[k] != (char)b[k]) return 0;
    return 1;
  }
  uint64_t x, y;
  for (uint32_t k = 0; k + 8 <= len; k += 8) {
    memcpy(&x, a + k, 8); memcpy(&y, b + k, 8);
    if (x != y) return 0;
  }
  memcpy(&x, a + len - 8, 8); memcpy(&y, b + len - 8, 8);   /* the tail, overlapping */
  return x == y;
}

static bt_uentry *ucache_get(bt_worker *w, uint64_t h, const unsigned char *key,
                             uint32_t len) {
  if (!w->uc) return NULL;
  for (size_t j = (size_t)h & w->uc_mask;; j = (j + 1) & w->uc_mask) {
    bt_uentry *c = &w->uc[j];
    if (!c->used) return NULL;
    if (c->h == h && c->klen == len && key_equal(c->key, key, len)) return c;
  }
}

/* Stores a segmentation (tokens from w->toks[3 * first], ntok of them).
** Returns the entry, or NULL when it does not fit an entry. */
static bt_uentry *ucache_put(bt_worker *w, uint64_t h, const unsigned char *key,
                             uint32_t len, const int32_t *toks, int ntok,
                             double gap, double mag) {
  if (len > BT_UC_KEY || ntok > BT_UC_TOKS) return NULL;
  if (!w->uc) {
    size_t size = 16;
    while (size < (size_t)UCACHE_ENTRIES * 2) size *= 2;
    /* an entry is one cache line: aligned, a lookup touches one line */
    if (!(w->uc = aligned_alloc(64, size * sizeof *w->uc))) return NULL;
    memset(w->uc, 0, size * sizeof *w->uc);
    w->uc_mask = size - 1;
  }
  if (w->uc_n >= (size_t)UCACHE_ENTRIES) {          /* full: start over */
    memset(w->uc, 0, (w->uc_mask + 1) * sizeof *w->uc);
    w->uc_n = 0;
  }
  size_t j = (size_t)h & w->uc_mask;
  while (w->uc[j].used) j = (j + 1) & w->uc_mask;
  bt_uentry *c = &w->uc[j];
  c->h = h; c->klen = (uint8_t)len; c->ntoks = (uint8_t)ntok; c->used = 1;
  /* a float margin rounded down and magnitude rounded up stay safe */
  c->gap = gap == INFINITY ? INFINITY : nextafterf((float)gap, 0.0f);
  c->mag = nextafterf((float)mag, INFINITY);
  if (c->gap < 0) c->gap = 0;
  for (int i = 0; i < ntok; i++) { c->id[i] = toks[3 * i]; c->len[i] = (uint8_t)toks[3 * i + 2]; }
  memcpy(c->key, key, len);
  w->uc_n++;
  return c;
}

/* Segments one word s[0, n) (a span that no piece crosses) at offset at0
** from score *B, appending to w->toks.  A cached segmentation is reused
** when it is exact: always for HF (each word starts at 0 there), and for
** spm when its smallest margin beats the float rounding that the base
** can cause. */
static int word_viterbi_hashed(const bt_tokenizer *t, bt_worker *w, const unsigned char *s,
                               int32_t n, int32_t at0, double *B, int *ntok, uint64_t h);

static int word_viterbi(const bt_tokenizer *t, bt_worker *w, const unsigned char *s,
                        int32_t n, int32_t at0, double *B, int *ntok) {
  if (n > BT_UC_KEY || t->cache_capacity <= 0)
    return viterbi(t, w, s, n, at0, *B, t->uni_spm, ntok, B, NULL, NULL);
  return word_viterbi_hashed(t, w, s, n, at0, B, ntok, bt_hash(s, (size_t)n));
}

/* The cache slot where a word of hash h is looked up first: fetched ahead
** of time, it is in cache when the word's turn comes (the table is a few
** MB, and most lookups of rarer words would otherwise wait on memory). */
static void ucache_prefetch(const bt_worker *w, uint64_t h) {
  if (w->uc) __builtin_prefetch(&w->uc[(size_t)h & w->uc_mask]);
}

/* word_viterbi for a word whose hash h = bt_hash(s, n) is known (n <= BT_UC_KEY). */
static int word_viterbi_hashed(const bt_tokenizer *t, bt_worker *w, const unsigned char *s,
                               int32_t n, int32_t at0, double *B, int *ntok, uint64_t h) {
  const int spm = t->uni_spm;
  double fin;
  bt_uentry *c = ucache_get(w, h, s, (uint32_t)n);
  double unk_score = spm ? (double)((float)t->uni_min - UNK_PENALTY) : t->uni_min - 10.0;
  if (!c) {
    /* once from 0 in double precision: the tokens, the margin */
    int before = *ntok;
    double gap, mag;
    if (viterbi(t, w, s, n, at0, 0.0, 0, ntok, &fin, &gap, &mag)) return -1;
    c = ucache_put(w, h, s, (uint32_t)n, w->toks + 3 * before, *ntok - before, gap, mag);
    *ntok = before;
    if (!c) return viterbi(t, w, s, n, at0, *B, spm, ntok, B, NULL, NULL);
  }
  if (spm) {
    /* each float rounding moves a path by at most half an ulp of the
    ** magnitude; (n + 2) of them on each side is a safe bound */
    double slack = (fabs(*B) + (double)c->mag + 1.0) * (double)(n + 2) * 2.4e-7;
    if (!((double)c->gap > slack)) return viterbi(t, w, s, n, at0, *B, 1, ntok, B, NULL, NULL);
  }
  if (bt_grow((void **)&w->toks, &w->toks_cap, (size_t)(*ntok + c->ntoks) * 3 + 3, sizeof(int32_t)))
    return -1;
  double b = *B;
  int32_t pos = at0;
  for (int i = 0; i < c->ntoks; i++) {
    int32_t id = c->id[i];
    int k = *ntok + i;
    w->toks[3 * k] = id; w->toks[3 * k + 1] = pos; w->toks[3 * k + 2] = c->len[i];
    pos += c->len[i];
    double sc = id == -2 ? unk_score : t->uni_vs[id];
    b = spm ? (double)(float)(sc + b) : sc + b;   /* replay the scores */
  }
  *ntok += c->ntoks;
  *B = b;
  return 0;
}

static int need_unk(const bt_tokenizer *t, char *err, size_t errlen) {
  if (t->unk_id >= 0) return 0;
  snprintf(err, errlen, "Unigram: an unknown character and no unk_id in the "
           "model");
  return -1;
}

/* Viterbi over w->ub[0, n) and tokens into e. */
static int unigram_piece(bt_tokenizer *t, bt_worker *w, int32_t n,
                         bt_encoding *e, int32_t *word, char *err,
                         size_t errlen) {
  if (n <= 0) return 0;
  int nt = 0;
  const unsigned char *s = (const unsigned char *)w->ub;
  double B = 0.0;
  if (t->uni_spm && t->ws_splits) {
    /* no piece crosses a ▁ that starts a word: word by word, cached.  The
    ** words are found WORD_AHEAD ahead of their segmentation, and their
    ** cache slots prefetched then. */
    enum { WORD_AHEAD = 4 };
    int32_t wp[WORD_AHEAD], wq[WORD_AHEAD];
    uint64_t wh[WORD_AHEAD];
    int32_t next = 0;   /* where the next word to find starts */
    int found = 0, done = 0;
    const int cached = t->cache_capacity > 0;
    while (done < found || next < n) {
      while (found - done < WORD_AHEAD && next < n) {
        int32_t q = next + 1;
        for (;;) {   /* the next ▁ (E2 96 81), by memchr for its first byte */
          const unsigned char *x = q < n ? memchr(s + q, 0xE2, (size_t)(n - q)) : NULL;
          if (x == NULL) { q = n; break; }
          q = (int32_t)(x - s);
          if (q + 2 < n && s[q + 1] == 0x96 && s[q + 2] == 0x81) break;
          q++;
        }
        int slot = found % WORD_AHEAD;
        wp[slot] = next;
        wq[slot] = q;
        wh[slot] = 0;
        if (cached && q - next <= BT_UC_KEY) {
          wh[slot] = bt_hash(s + next, (size_t)(q - next));
          ucache_prefetch(w, wh[slot]);
        }
        found++;
        next = q;
      }
      int slot = done % WORD_AHEAD;
      int32_t p = wp[slot], q = wq[slot];
      int rc = cached && q - p <= BT_UC_KEY
                   ? word_viterbi_hashed(t, w, s + p, q - p, p, &B, &nt, wh[slot])
                   : word_viterbi(t, w, s + p, q - p, p, &B, &nt);
      if (rc) return -1;
      done++;
    }
  } else if (t->uni_spm) {
    if (viterbi(t, w, s, n, 0, 0.0, 1, &nt, &B, NULL, NULL)) return -1;
  } else {
    if (word_viterbi(t, w, s, n, 0, &B, &nt)) return -1;
  }
  const int32_t *os = w->uos, *oe = w->uoe;
  int32_t hf_word = t->uni_spm ? 0 : (*word)++;
  for (int i = 0; i < nt; i++) {
    int32_t id = w->toks[3 * i], st = w->toks[3 * i + 1], ln = w->toks[3 * i + 2];
    int32_t wd = hf_word;
    if (t->uni_spm) {   /* a piece starting with ▁ starts a word */
      if (i == 0 || (ln >= 3 && s[st] == 0xE2 && s[st + 1] == 0x96 && s[st + 2] == 0x81)) (*word)++;
      wd = *word - 1;
    }
    if (id == -2) {                       /* unknown */
      if (t->uni_spm && t->byte_fallback) {
        for (int32_t b = 0; b < ln; b++) {
          int32_t bid = t->byte_piece[s[st + b]];
          if (bid < 0) { if (need_unk(t, err, errlen)) return -1; bid = t->unk_id; }
          int last = b == ln - 1;
          if (bt_enc_push(e, bid, 0, os[st], last ? oe[st + ln - 1] : os[st], wd, 0)) return -1;
        }
        continue;
      }
      /* fuse a run of unknowns (spm and HF both do) */
      int j = i;
      while (j + 1 < nt && w->toks[3 * (j + 1)] == -2) j++;
      int32_t fe = w->toks[3 * j + 1] + w->toks[3 * j + 2];
      int32_t fid = -1;
      if (!t->uni_spm) {
        fid = bt_vocab_get(&t->vocab, (const char *)s + st, (size_t)(fe - st));
        if (fid < 0 && t->byte_fallback) {
          int ok = 1;
          for (int32_t b = st; b < fe && ok; b++) ok = t->byte_piece[s[b]] >= 0;
          if (ok) {
            for (int32_t b = st; b < fe; b++)
              if (bt_enc_push(e, t->byte_piece[s[b]], 0, os[st], oe[fe - 1], wd, 0)) return -1;
            i = j;
            continue;
          }
        }
      }
      if (fid < 0) {   /* shown by the normalized text it covers, as HF and spm do */
        if (need_unk(t, err, errlen)) return -1;
        if (bt_enc_push_text(e, t->unk_id, os[st], oe[fe - 1], wd, (const char *)s + st, (size_t)(fe - st)))
          return -1;
      } else if (bt_enc_push(e, fid, 0, os[st], oe[fe - 1], wd, 0)) return -1;
      i = j;
      continue;
    }
    if (bt_enc_push(e, id, 0, os[st], oe[st + ln - 1], wd, 0)) return -1;
  }
  return 0;
}

/* Code points [a, b) of buffer p to UTF-8 in w->ub with spans, after
** lead (when not 0) with the span of p's char a. */
static int32_t to_bytes(bt_worker *w, const cpbuf *p, size_t a, size_t b, uint32_t lead) {
  if (ub_reserve(w, (b - a) * 4 + 12)) return -1;
  int32_t k = 0;
  if (lead) {
    k = bt_utf8_encode(lead, w->ub);
    for (int j = 0; j < k; j++) { w->uos[j] = p->os[a]; w->uoe[j] = p->oe[a]; }
  }
  for (size_t i = a; i < b; i++) {
    int len = bt_utf8_encode(p->cp[i], w->ub + k);
    for (int j = 0; j < len; j++) { w->uos[k + j] = p->os[i]; w->uoe[k + j] = p->oe[i]; }
    k += len;
  }
  return k;
}

/* The normalizer chain over original chars [from, to) into *cur. */
static int run_chain(const bt_tokenizer *t, bt_worker *w, int32_t from,
                     int32_t to, cpbuf *cur) {
  size_t n = (size_t)(to - from);
  if (t_reserve(w, 0, n + 8) || t_reserve(w, 1, n + 8)) return -1;
  *cur = cb_start(w, 0);
  for (size_t i = 0; i < n; i++) {
    cur->cp[i] = w->ocp[from + (int32_t)i];
    cur->os[i] = from + (int32_t)i; cur->oe[i] = from + (int32_t)i + 1;
  }
  cur->n = n;
  int ascii = 1;
  for (size_t i = 0; i < n && ascii; i++) ascii = cur->cp[i] < 0x80;
  for (int s = 0; s < t->nnorms; s++) {
    int k = t->norms[s].kind;
    /* on ASCII text these steps change nothing */
    if (ascii && (k == BT_NORM_NFKD || k == BT_NORM_NFD || k == BT_NORM_NFKC ||
                  k == BT_NORM_NFC || k == BT_NORM_STRIP_ACCENTS)) continue;
    if (t_reserve(w, 1 - cur->buf, cur->n + 16)) return -1;
    cpbuf out = cb_start(w, 1 - cur->buf);
    if (norm_step(t, w, &t->norms[s], cur, &out, from)) return -1;
    *cur = out;
    cur->cp = w->tcp[cur->buf]; cur->os = w->tos[cur->buf]; cur->oe = w->toe[cur->buf];
    if (k == BT_NORM_PRECOMPILED || k == BT_NORM_REPLACE || k == BT_NORM_PREPEND)
      for (size_t i = 0; i < cur->n && ascii; i++) ascii = cur->cp[i] < 0x80;
  }
  return 0;
}

/* HF's pre-tokenizer and the model over chars [a, b) of the normalized
** text p (its spaces become the Metaspace replacement here); first: the
** split starts the original text (Metaspace's prepend_scheme "first"). */
static int hf_split(bt_tokenizer *t, bt_worker *w, cpbuf *p, size_t a, size_t b,
                    int first, bt_encoding *e, int32_t *word, char *err, size_t errlen) {
  if (t->pre == BT_PRE_METASPACE) {
    uint32_t r = t->meta_repl ? t->meta_repl : BT_META_CP;
    for (size_t i = a; i < b; i++) if (p->cp[i] == ' ') p->cp[i] = r;
    int prepend = (t->prepend_scheme == BT_PREPEND_ALWAYS ||
                   (t->prepend_scheme == BT_PREPEND_FIRST && first)) && p->cp[a] != r;
    uint32_t lead = prepend ? r : 0;
    if (!t->meta_split) {
      int32_t m = to_bytes(w, p, a, b, lead);
      return m < 0 ? -1 : unigram_piece(t, w, m, e, word, err, errlen);
    }
    size_t s = a;
    for (size_t i = a + 1; i <= b; i++) {
      if (i < b && p->cp[i] != r) continue;
      int32_t m = to_bytes(w, p, s, i, s == a ? lead : 0);
      if (m < 0 || unigram_piece(t, w, m, e, word, err, errlen)) return -1;
      s = i;
    }
    return 0;
  }
  if (t->pre == BT_PRE_WHITESPACE) {
    size_t s = a; int in = 0;
    for (size_t i = a; i <= b; i++) {
      int sp = i == b || bt_is_whitespace(p->cp[i]);
      if (sp && in) {
        int32_t m = to_bytes(w, p, s, i, 0);
        if (m < 0 || unigram_piece(t, w, m, e, word, err, errlen)) return -1;
        in = 0;
      } else if (!sp && !in) { s = i; in = 1; }
    }
    return 0;
  }
  int32_t m = to_bytes(w, p, a, b, 0);
  return m < 0 ? -1 : unigram_piece(t, w, m, e, word, err, errlen);
}

int bt_unigram_segment(bt_tokenizer *t, bt_worker *w, int32_t from,
                       int32_t to, bt_encoding *e, int32_t *word,
                       char *err, size_t errlen) {
  cpbuf cur;
  if (t->uni_spm) {
    /* spm works on UTF-8 (invalid original bytes are U+FFFD here); an
    ** optional chain first (ALBERT's preprocess_text) */
    const uint32_t *cp = w->ocp + from;
    size_t n = (size_t)(to - from);
    const int32_t *os = NULL;
    if (t->nnorms) {
      if (run_chain(t, w, from, to, &cur)) return -1;
      cp = cur.cp; n = cur.n; os = cur.os;
    }
    size_t cap = n * 4 + 8;
    if (bt_grow((void **)&w->scratch, &w->scratch_cap, cap, 1)) return -1;
    size_t icap = w->ic_cap;
    if (bt_grow((void **)&w->ic, &icap, cap + 1, sizeof *w->ic)) return -1;
    w->ic_cap = icap;
    int32_t *ic = w->ic;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      int32_t at = os ? os[i] : from + (int32_t)i;
      if (cp[i] < 0x80) { w->scratch[k] = (char)cp[i]; ic[k++] = at; continue; }
      int len = bt_utf8_encode(cp[i], w->scratch + k);
      for (int j = 0; j < len; j++) ic[k + (size_t)j] = at;
      k += (size_t)len;
    }
    ic[k] = to;
    long m = spm_normalize(t, w, (const unsigned char *)w->scratch, ic, k);
    if (m < 0) return -1;
    return unigram_piece(t, w, (int32_t)m, e, word, err, errlen);
  }
  /* HF: normalizer chain over code points, then the `normalized` added
  ** tokens found in its output, then the pre-tokenizer between them */
  if (run_chain(t, w, from, to, &cur)) return -1;
  for (size_t pos = 0; pos < cur.n;) {
    int32_t ms = (int32_t)cur.n, me = ms;
    int a = bt_find_added(t, &t->norm_trie, cur.cp, (int32_t)cur.n, (int32_t)pos, &ms, &me);
    if (a < 0) ms = me = (int32_t)cur.n;
    if ((size_t)ms > pos &&
        hf_split(t, w, &cur, pos, (size_t)ms, pos == 0 && from == 0, e, word, err, errlen))
      return -1;
    if (a >= 0 && bt_push_added(t, w, e, a, cur.os[ms], cur.oe[me - 1], word)) return -1;
    pos = (size_t)me;
  }
  return 0;
}

int bt_norm_chain(const bt_tokenizer *t, bt_worker *w, int32_t from, int32_t to,
                  const uint32_t **cp, const int32_t **os, const int32_t **oe,
                  size_t *n) {
  cpbuf cur;
  if (run_chain(t, w, from, to, &cur)) return -1;
  *cp = cur.cp; *os = cur.os; *oe = cur.oe; *n = cur.n;
  return 0;
}

int bt_unigram_pretok(bt_tokenizer *t, bt_worker *w, int32_t n, bt_word_cb cb,
                      void *ctx) {
  cpbuf cur;
  if (run_chain(t, w, 0, n, &cur)) return -1;
  if (cur.n == 0) return 0;
  uint32_t r = t->meta_repl ? t->meta_repl : BT_META_CP;
  for (size_t i = 0; i < cur.n; i++) if (cur.cp[i] == ' ') cur.cp[i] = r;
  char *buf = malloc(cur.n * 4 + 8);
  if (!buf) return -1;
  size_t k = 0, a = 0;
  if (cur.cp[0] != r && t->prepend_scheme != BT_PREPEND_NEVER) k += (size_t)bt_utf8_encode(r, buf);
  for (size_t i = 0; i <= cur.n; i++) {
    if (i == cur.n || (cur.cp[i] == r && i > a)) {
      if (k) cb(ctx, buf, k);
      k = 0; a = i;
    }
    if (i < cur.n) k += (size_t)bt_utf8_encode(cur.cp[i], buf + k);
  }
  free(buf);
  return 0;
}
