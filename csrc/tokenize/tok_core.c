/*
** The tokenizer pipeline: added tokens, BERT normalizer, pre-tokenizers,
** WordPiece, byte-level BPE words, post-processing, decoding.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

bt_worker *bt_worker_new(void) {
  return calloc(1, sizeof(bt_worker));
}

void bt_worker_free(bt_worker *w) {
  if (!w) return;
  free(w->ocp); free(w->ncp); free(w->nos); free(w->noe); free(w->nbs);
  free(w->nb); free(w->scratch); free(w->ends); free(w->wb); free(w->wbs); free(w->wbe);
  free(w->sid); free(w->sstart); free(w->slen); free(w->sprev);
  free(w->snext); free(w->srank); free(w->heap); free(w->toks);
  free(w->ub); free(w->uos); free(w->uoe);
  for (int k = 0; k < 2; k++) { free(w->tcp[k]); free(w->tos[k]); free(w->toe[k]); }
  free(w->vscore); free(w->vsec); free(w->vstart); free(w->vid); free(w->ic);
  free(w->uc);
  if (w->cache) {
    for (size_t j = 0; j <= w->cache_mask; j++)
      free(w->cache[j].toks);           /* key lives in the same block */
    free(w->cache);
  }
  free(w);
}

/* ---------- tokenizer lifetime ---------- */

bt_tokenizer *bt_tokenizer_new(int model) {
  bt_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->model = model;
  bt_vocab_init(&t->vocab);
  t->unk_id = -1;
  t->max_input_chars = 100;
  t->cache_capacity = 10000;
  t->strip_accents = -1;
  t->use_regex = 1;
  for (int i = 0; i < 256; i++) t->byte_id[i] = t->byte_piece[i] = -1;
  t->meta_repl = 0x2581;
  t->prepend_scheme = BT_PREPEND_ALWAYS;
  t->meta_split = 1;
  t->max_windows = 1000;
  return t;
}

static void free_pieces(bt_piece *p, int n) {
  for (int i = 0; i < n; i++) {
    free(p[i].ids);
    for (int k = 0; k < p[i].nids; k++) if (p[i].tokens) free(p[i].tokens[k]);
    free(p[i].tokens);
  }
  free(p);
}

void bt_tokenizer_free(bt_tokenizer *t) {
  if (!t) return;
  bt_vocab_free(&t->vocab);
  bt_merge_free(&t->merges);
  bt_unigram_free(t);
  bt_trie_free(&t->added_trie);
  bt_trie_free(&t->norm_trie);
  bt_vocab_free(&t->added_index);
  bt_map_free(&t->added_by_id);
  bt_map_free(&t->special_ids);
  free(t->merge_a); free(t->merge_b);
  free(t->unk_token); free(t->prefix); free(t->dec_prefix);
  free_pieces(t->single, t->nsingle);
  free_pieces(t->pair, t->npair);
  for (int i = 0; i < t->nadded; i++) {
    free(t->added[i].content); free(t->added[i].cps); free(t->added[i].ncontent);
  }
  free(t->added);
  for (int i = 0; i < t->nworkers; i++) bt_worker_free(t->workers[i]);
  free(t->workers);
  free(t);
}

int bt_add_merge(bt_tokenizer *t, const char *a, size_t alen,
                 const char *b, size_t blen) {
  int32_t ia = bt_vocab_get(&t->vocab, a, alen);
  int32_t ib = bt_vocab_get(&t->vocab, b, blen);
  if (ia < 0 || ib < 0) {
    snprintf(t->err, sizeof t->err, "merge token '%.*s' not in vocabulary",
             (int)(ia < 0 ? alen : blen), ia < 0 ? a : b);
    return -1;
  }
  char buf[512]; char *m = buf;
  if (alen + blen > sizeof buf && !(m = malloc(alen + blen))) return -1;
  memcpy(m, a, alen); memcpy(m + alen, b, blen);
  int32_t nid = bt_vocab_get(&t->vocab, m, alen + blen);
  if (m != buf) free(m);
  if (nid < 0) {
    snprintf(t->err, sizeof t->err, "merged token '%.*s%.*s' not in vocabulary",
             (int)alen, a, (int)blen, b);
    return -1;
  }
  if (bt_grow((void **)&t->merge_a, &t->merge_cap_a, (size_t)t->nmerges + 1,
              sizeof(int32_t)) ||
      bt_grow((void **)&t->merge_b, &t->merge_cap_b, (size_t)t->nmerges + 1,
              sizeof(int32_t)) ||
      bt_merge_put(&t->merges, ia, ib, t->nmerges, nid)) {
    snprintf(t->err, sizeof t->err, "out of memory");
    return -1;
  }
  t->merge_a[t->nmerges] = ia; t->merge_b[t->nmerges] = ib;
  t->nmerges++;
  return 0;
}

int bt_add_added(bt_tokenizer *t, const char *s, size_t len, int32_t id,
                 int special, int lstrip, int rstrip, int single_word,
                 int normalized, int in_text) {
  if (len == 0) return 0;
  int32_t same = bt_vocab_get(&t->added_index, s, len);
  if (same >= 0) {                      /* same content: update */
    t->added[same].id = id; t->added[same].special = special;
    return 0;
  }
  if (t->nadded == INT32_MAX ||
      bt_grow((void **)&t->added, &t->added_cap, (size_t)t->nadded + 1, sizeof *t->added) ||
      bt_vocab_set(&t->added_index, s, len, t->nadded)) return -1;
  bt_added *x = &t->added[t->nadded];
  memset(x, 0, sizeof *x);
  x->content = malloc(len + 1);
  x->cps = malloc((len + 1) * sizeof *x->cps);
  if (!x->content || !x->cps) { free(x->content); free(x->cps); return -1; }
  memcpy(x->content, s, len); x->content[len] = '\0'; x->len = len;
  x->ncps = (int)bt_utf8_decode(s, len, x->cps);
  x->id = id; x->special = special; x->lstrip = lstrip; x->rstrip = rstrip;
  x->single_word = single_word; x->normalized = normalized; x->in_text = in_text;
  t->nadded++;
  return 0;
}

/* The normalized form of an added token's content (HF matches `normalized`
** tokens by it in normalized text), malloc'd, in *out / *outlen. */
static int normalized_content(bt_tokenizer *t, const bt_added *a, char **out,
                              size_t *outlen);

/* The lookups of added tokens: by id (the first token of an id answers,
** as the scan that this replaces did), special ids, and the two tries
** that text is matched against. */
static int index_added(bt_tokenizer *t) {
  bt_map_free(&t->added_by_id); bt_map_free(&t->special_ids);
  bt_trie_free(&t->added_trie); bt_trie_free(&t->norm_trie);
  for (int i = 0; i < t->nadded; i++) {
    bt_added *a = &t->added[i];
    int fresh;
    if (!bt_map_put(&t->added_by_id, (uint32_t)a->id, i, 10, &fresh)) return -1;
    if (a->special && !bt_map_put(&t->special_ids, (uint32_t)a->id, 1, 10, &fresh)) return -1;
    if (!a->in_text) continue;
    if (!a->normalized || t->uni_spm) {
      if (bt_trie_insert(&t->added_trie, a->content, a->len, i)) return -1;
      continue;
    }
    free(a->ncontent); a->ncontent = NULL;
    if (normalized_content(t, a, &a->ncontent, &a->nlen)) return -1;
    /* a content that normalizes to nothing is never found (HF alike) */
    if (bt_trie_insert(&t->norm_trie, a->ncontent, a->nlen, i)) return -1;
  }
  return 0;
}

void bt_set_template(bt_tokenizer *t, int which, bt_piece *p, int n) {
  if (which == 0) { free_pieces(t->single, t->nsingle); t->single = p; t->nsingle = n; }
  else { free_pieces(t->pair, t->npair); t->pair = p; t->npair = n; }
  t->has_post = 1;
}

int bt_tokenizer_finish(bt_tokenizer *t) {
  if (t->model == BT_MODEL_UNIGRAM) bt_charsmap_plain(t);
  if (t->unk_token && t->unk_id < 0)
    t->unk_id = bt_vocab_get(&t->vocab, t->unk_token, strlen(t->unk_token));
  if (t->prefix) t->prefix_len = strlen(t->prefix);
  for (int b = 0; b < 256; b++) {
    char u[4]; int k = bt_utf8_encode(bt_byte_to_cp(b), u);
    t->byte_id[b] = bt_vocab_get(&t->vocab, u, (size_t)k);
  }
  int nw = 1;
#ifdef _OPENMP
  nw = omp_get_max_threads();
  if (nw < 1) nw = 1;
#endif
  t->workers = calloc((size_t)nw, sizeof *t->workers);
  if (!t->workers) return -1;
  t->nworkers = nw;
  for (int i = 0; i < nw; i++)
    if (!(t->workers[i] = bt_worker_new())) return -1;
  return index_added(t);
}

int bt_num_added_tokens(const bt_tokenizer *t, int is_pair) {
  const bt_piece *p = is_pair ? t->pair : t->single;
  int n = is_pair ? t->npair : t->nsingle, k = 0;
  for (int i = 0; i < n; i++) if (p[i].seq < 0) k += p[i].nids;
  return k;
}

const bt_added *bt_added_of(const bt_tokenizer *t, int32_t id) {
  int32_t i = id < 0 ? -1 : bt_map_get(&t->added_by_id, (uint32_t)id);
  return i < 0 ? NULL : &t->added[i];
}

const char *bt_id_to_token(const bt_tokenizer *t, int32_t id, size_t *len) {
  const bt_added *a = bt_added_of(t, id);
  if (a) { if (len) *len = a->len; return a->content; }
  return bt_vocab_token(&t->vocab, id, len);
}

int32_t bt_token_to_id(const bt_tokenizer *t, const char *s, size_t len) {
  int32_t i = bt_vocab_get(&t->added_index, s, len);
  return i >= 0 ? t->added[i].id : bt_vocab_get(&t->vocab, s, len);
}

int bt_is_special_id(const bt_tokenizer *t, int32_t id) {
  return id >= 0 && bt_map_get(&t->special_ids, (uint32_t)id) > 0;
}

int bt_vocab_size(const bt_tokenizer *t) {
  int n = 0;
  for (size_t e = 0; e < t->vocab.n; e++) if (t->vocab.sid[e] >= 0) n++;
  for (int i = 0; i < t->nadded; i++)
    if (bt_vocab_get(&t->vocab, t->added[i].content, t->added[i].len) < 0) n++;
  return n;
}

/* ---------- normalization ---------- */

static int norm_reserve(bt_worker *w, size_t n) {
  size_t c = w->n_cap;
  if (n <= c) return 0;
  if (bt_grow((void **)&w->ncp, &c, n, sizeof(uint32_t))) return -1;
#define G(f) c = w->n_cap; if (bt_grow((void **)&w->f, &c, n, sizeof(int32_t))) return -1;
  G(nos) G(noe) G(nbs)
#undef G
  w->n_cap = c;
  return 0;
}

static size_t npush(bt_worker *w, size_t k, uint32_t c, int32_t s, int32_t e) {
  w->ncp[k] = c; w->nos[k] = s; w->noe[k] = e;
  return k + 1;
}

/* Normalizes ocp[from, to) into ncp/nos/noe; returns the count. */
static long normalize(const bt_tokenizer *t, bt_worker *w, int32_t from,
                      int32_t to) {
  size_t n = (size_t)(to - from);
  if (t->nnorms) {                      /* an HF normalizer chain */
    const uint32_t *cp; const int32_t *os, *oe; size_t m;
    if (bt_norm_chain(t, w, from, to, &cp, &os, &oe, &m) || norm_reserve(w, m + 2)) return -1;
    memcpy(w->ncp, cp, m * sizeof *cp);
    memcpy(w->nos, os, m * sizeof *os);
    memcpy(w->noe, oe, m * sizeof *oe);
    return (long)m;
  }
  if (!t->has_normalizer) {
    if (norm_reserve(w, n + 2)) return -1;
    for (size_t i = 0; i < n; i++)
      npush(w, i, w->ocp[from + (int32_t)i], from + (int32_t)i, from + (int32_t)i + 1);
    return (long)n;
  }
  int strip = t->strip_accents < 0 ? t->lowercase : t->strip_accents;
  size_t k = 0, cap = n * 3 + 8;
  if (norm_reserve(w, cap)) return -1;
  for (int32_t i = from; i < to; i++) {
    uint32_t c = w->ocp[i];
    if (k + 24 > w->n_cap && norm_reserve(w, w->n_cap * 2)) return -1;
    if (c < 0x80) {                     /* ASCII fast path */
      if (t->clean_text) {
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
        else if (c < 32 || c == 127) continue;
      }
      if (t->lowercase && c >= 'A' && c <= 'Z') c += 32;
      k = npush(w, k, c, i, i + 1);
      continue;
    }
    if (t->clean_text) {
      if (c == 0xFFFD || bt_is_control(c)) continue;
      if (bt_is_whitespace(c)) c = ' ';
    }
    if (t->handle_chinese && bt_is_chinese(c)) {
      k = npush(w, k, ' ', i, i + 1);
      k = npush(w, k, c, i, i + 1);
      k = npush(w, k, ' ', i, i + 1);
      continue;
    }
    utf8proc_int32_t dec[20]; utf8proc_ssize_t nd = 1;
    dec[0] = (utf8proc_int32_t)c;
    if (strip) {
      int bc = 0;
      nd = utf8proc_decompose_char((utf8proc_int32_t)c, dec, 20,
                                   UTF8PROC_DECOMPOSE, &bc);
      if (nd < 1 || nd > 20) { dec[0] = (utf8proc_int32_t)c; nd = 1; }
    }
    for (utf8proc_ssize_t d = 0; d < nd; d++) {
      uint32_t x = (uint32_t)dec[d];
      if (strip && utf8proc_category((utf8proc_int32_t)x) == UTF8PROC_CATEGORY_MN)
        continue;
      if (t->lowercase) {
        if (x == 0x130) {               /* İ -> i + combining dot above */
          k = npush(w, k, 'i', i, i + 1);
          x = 0x307;
        } else x = (uint32_t)utf8proc_tolower((utf8proc_int32_t)x);
      }
      k = npush(w, k, x, i, i + 1);
    }
  }
  return (long)k;
}

/* UTF-8 of the normalized chars [0, n) into nb, with nbs[i] byte starts. */
static int norm_utf8(bt_worker *w, size_t n) {
  if (bt_grow((void **)&w->nb, &w->nb_cap, n * 4 + 8, 1)) return -1;
  if (norm_reserve(w, n + 1)) return -1;
  int32_t b = 0;
  for (size_t i = 0; i < n; i++) {
    w->nbs[i] = b;
    uint32_t c = w->ncp[i];
    if (c < 0x80) w->nb[b++] = (char)c;
    else b += bt_utf8_encode(c, w->nb + b);
  }
  w->nbs[n] = b;
  return 0;
}

/* ---------- models ---------- */

static int push_unk(bt_tokenizer *t, bt_encoding *e, int32_t s, int32_t end,
                    int32_t word, char *err, size_t errlen) {
  if (t->unk_id < 0) {
    snprintf(err, errlen, "WordPiece: unknown token and no unk_token ('%s') "
             "in the vocabulary", t->unk_token ? t->unk_token : "");
    return -1;
  }
  return bt_enc_push(e, t->unk_id, 0, s, end, word, 0);
}

/* Greedy longest-match-first over normalized chars [ws, we). */
static int wordpiece(bt_tokenizer *t, bt_worker *w, int32_t ws, int32_t we,
                     bt_encoding *e, int32_t word, char *err, size_t errlen) {
  const int32_t *nbs = w->nbs;
  if (we - ws > t->max_input_chars)
    return push_unk(t, e, w->nos[ws], w->noe[we - 1], word, err, errlen);
  int32_t mark = e->n, start = ws;
  size_t maxlen = (size_t)t->vocab.maxlen;
  size_t need = (size_t)(nbs[we] - nbs[ws]) + t->prefix_len + 1;
  if (bt_grow((void **)&w->scratch, &w->scratch_cap, need, 1)) return -1;
  if (t->prefix_len) memcpy(w->scratch, t->prefix, t->prefix_len);
  while (start < we) {
    int32_t end = we, id = -1;
    size_t plen = start > ws ? t->prefix_len : 0;
    if (plen) memcpy(w->scratch + plen, w->nb + nbs[start],
                     (size_t)(nbs[we] - nbs[start]));
    const char *base = plen ? w->scratch : w->nb + nbs[start];
    while (end > start) {
      size_t blen = (size_t)(nbs[end] - nbs[start]) + plen;
      if (blen <= maxlen && (id = bt_vocab_get(&t->vocab, base, blen)) >= 0)
        break;
      end--;
    }
    if (id < 0) {
      e->n = mark;
      return push_unk(t, e, w->nos[ws], w->noe[we - 1], word, err, errlen);
    }
    if (bt_enc_push(e, id, 0, w->nos[start], w->noe[end - 1], word, 0)) return -1;
    start = end;
  }
  return 0;
}

/* Byte-level BPE over normalized chars [ws, we) (ncp/nos/noe). */
static int bytelevel_word(bt_tokenizer *t, bt_worker *w, int32_t ws,
                          int32_t we, bt_encoding *e, int32_t word) {
  size_t need = (size_t)(we - ws) * 4 + 4;
  size_t c = w->wb_cap;
  if (bt_grow((void **)&w->wb, &c, need, 1)) return -1;
  c = w->wb_cap;
  if (bt_grow((void **)&w->wbs, &c, need, sizeof(int32_t))) return -1;
  c = w->wb_cap;
  if (bt_grow((void **)&w->wbe, &c, need, sizeof(int32_t))) return -1;
  w->wb_cap = c;
  size_t n = 0;
  for (int32_t i = ws; i < we; i++) {
    char u[4]; int k = bt_utf8_encode(w->ncp[i], u);
    for (int j = 0; j < k; j++) {
      w->wb[n] = (unsigned char)u[j]; w->wbs[n] = w->nos[i]; w->wbe[n] = w->noe[i];
      n++;
    }
  }
  int nt = bt_bpe_word(t, w, n);
  if (nt < 0) return -1;
  if (bt_enc_reserve(e, e->n + nt)) return -1;
  /* token spans are in UTF-8 bytes of the mapped chars (1 or 2 each):
  ** map them back to word bytes (nbs is free to use here) */
  if (norm_reserve(w, 2 * n + 2)) return -1;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    w->nbs[m++] = (int32_t)i;
    if (bt_byte_to_cp(w->wb[i]) >= 0x80) w->nbs[m++] = (int32_t)i;
  }
  for (int i = 0; i < nt; i++) {
    int32_t st = w->toks[3 * i + 1], ln = w->toks[3 * i + 2];
    int32_t a = w->nbs[st], b = w->nbs[st + ln - 1];
    bt_enc_push(e, w->toks[3 * i], 0, w->wbs[a], w->wbe[b], word, 0);
  }
  return 0;
}

static int model_word(bt_tokenizer *t, bt_worker *w, int32_t ws, int32_t we,
                      bt_encoding *e, int32_t word, char *err, size_t errlen) {
  if (t->model == BT_MODEL_BPE) return bytelevel_word(t, w, ws, we, e, word);
  return wordpiece(t, w, ws, we, e, word, err, errlen);
}

/* ---------- one text segment (between added tokens) ---------- */

/* Rust regex's \w (Whitespace's `\w+|[^\w\s]+`): Alphabetic, marks,
** decimal digits, connector punctuation, the joiners. */
static int is_regex_word(uint32_t c) {
  if (c < 0x80) return bt_is_letter(c) || (c >= '0' && c <= '9') || c == '_';
  if (c == 0x200C || c == 0x200D) return 1;
  /* the symbols that are Other_Alphabetic (circled and squared letters) */
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
      (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189)) return 1;
  switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC: return 1;
    default: return 0;
  }
}

/* What a splitting pre-tokenizer does with a char: drops it (whitespace),
** makes it a piece of its own, or puts it in a run of its class. */
enum { SPLIT_DROP, SPLIT_ALONE, SPLIT_RUN_A, SPLIT_RUN_B };

static int split_class(int kind, uint32_t c) {
  switch (kind) {
  case BT_SPLIT_WHITESPACE_SPLIT: return bt_is_whitespace(c) ? SPLIT_DROP : SPLIT_RUN_A;
  case BT_SPLIT_WHITESPACE:
    return bt_is_whitespace(c) ? SPLIT_DROP : is_regex_word(c) ? SPLIT_RUN_A : SPLIT_RUN_B;
  case BT_SPLIT_BERT:
    return bt_is_whitespace(c) ? SPLIT_DROP : bt_is_punctuation(c) ? SPLIT_ALONE : SPLIT_RUN_A;
  case BT_SPLIT_PUNCTUATION: return bt_is_punctuation(c) ? SPLIT_ALONE : SPLIT_RUN_A;
  case BT_SPLIT_DIGITS: return bt_is_number(c) ? SPLIT_RUN_B : SPLIT_RUN_A;
  default: return bt_is_number(c) ? SPLIT_ALONE : SPLIT_RUN_A;   /* BT_SPLIT_DIGITS_EACH */
  }
}

/* Splitting pre-tokenizers k.. over normalized chars [a, b) (each splits
** the pieces of the one before, as HF's Sequence), the model on each
** final piece. */
static int split_steps(bt_tokenizer *t, bt_worker *w, int k, int32_t a, int32_t b,
                       bt_encoding *e, int32_t *word, char *err, size_t errlen) {
  if (k == t->nsplits) return model_word(t, w, a, b, e, (*word)++, err, errlen);
  int32_t s = -1;
  int cls = SPLIT_DROP;
  for (int32_t i = a; i <= b; i++) {
    int c = i < b ? split_class(t->splits[k], w->ncp[i]) : SPLIT_DROP;
    if (s >= 0 && (c != cls || c == SPLIT_ALONE)) {
      if (split_steps(t, w, k + 1, s, i, e, word, err, errlen)) return -1;
      s = -1;
    }
    if (c != SPLIT_DROP && s < 0) { s = i; cls = c; }
  }
  return 0;
}

/* The pre-tokenizer and the model over normalized chars [a, b) of ncp
** (for WordPiece, nb/nbs hold their UTF-8). */
static int encode_split(bt_tokenizer *t, bt_worker *w, int32_t a, int32_t b,
                        bt_encoding *e, int32_t *word, char *err, size_t errlen) {
  if (t->pre == BT_PRE_BYTELEVEL) {
    if (!t->use_regex) return bytelevel_word(t, w, a, b, e, (*word)++);
    if (bt_grow((void **)&w->ends, &w->ends_cap, (size_t)(b - a) + 1, sizeof *w->ends))
      return -1;
    int np = bt_gpt2_split(w->ncp + a, b - a, w->ends);
    int32_t s = a;
    for (int p = 0; p < np; p++) {
      int32_t end = a + w->ends[p];
      if (end > s && bytelevel_word(t, w, s, end, e, (*word)++)) return -1;
      s = end;
    }
    return 0;
  }
  if (t->nsplits) return split_steps(t, w, 0, a, b, e, word, err, errlen);
  /* BERT pre-tokenizer: split on whitespace, isolate punctuation */
  int32_t s = -1;
  for (int32_t i = a; i <= b; i++) {
    uint32_t c = i < b ? w->ncp[i] : ' ';
    int sp = c == ' ' || (c >= 0x80 && bt_is_whitespace(c)) || (c >= 9 && c <= 13);
    int pu = !sp && t->pre == BT_PRE_BERT && bt_is_punctuation(c);
    if (sp || pu) {
      if (s >= 0) {
        if (model_word(t, w, s, i, e, (*word)++, err, errlen)) return -1;
        s = -1;
      }
      if (pu && model_word(t, w, i, i + 1, e, (*word)++, err, errlen)) return -1;
    } else if (s < 0) s = i;
  }
  return 0;
}

/* Original chars [from, to): normalized, then split at the `normalized`
** added tokens found in the normalized text (HF's second pass), the
** pieces between them pre-tokenized and encoded. */
static int encode_segment(bt_tokenizer *t, bt_worker *w, int32_t from,
                          int32_t to, bt_encoding *e, int32_t *word,
                          char *err, size_t errlen) {
  if (t->model == BT_MODEL_UNIGRAM)
    return bt_unigram_segment(t, w, from, to, e, word, err, errlen);
  long ln = normalize(t, w, from, to);
  if (ln < 0) return -1;
  int32_t n = (int32_t)ln;
  if (t->model == BT_MODEL_WORDPIECE && n > 0 && norm_utf8(w, (size_t)n)) return -1;
  for (int32_t pos = 0; pos < n;) {
    int32_t ms = n, me = n;
    int a = bt_find_added(t, &t->norm_trie, w->ncp, n, pos, &ms, &me);
    if (a < 0) ms = me = n;
    if (ms > pos) {
      if (t->pre == BT_PRE_BYTELEVEL && t->add_prefix_space && w->ncp[pos] != ' ') {
        /* each split gets its space: in the slot of the added token just
        ** consumed, or at the start by shifting the text */
        if (pos == 0) {
          if (norm_reserve(w, (size_t)n + 2)) return -1;
          memmove(w->ncp + 1, w->ncp, (size_t)n * sizeof *w->ncp);
          memmove(w->nos + 1, w->nos, (size_t)n * sizeof *w->nos);
          memmove(w->noe + 1, w->noe, (size_t)n * sizeof *w->noe);
          n++; ms++; me++; pos++;
        }
        pos--;
        w->ncp[pos] = ' '; w->nos[pos] = w->nos[pos + 1]; w->noe[pos] = w->noe[pos + 1];
      }
      if (encode_split(t, w, pos, ms, e, word, err, errlen)) return -1;
    }
    if (a >= 0 && bt_push_added(t, w, e, a, w->nos[ms], w->noe[me - 1], word)) return -1;
    pos = me;
  }
  return 0;
}

/* Calls cb for each pre-token of text (normalized UTF-8; for byte-level,
** the word's raw UTF-8 bytes).  Used by the trainers. */
int bt_pretok_words(bt_tokenizer *t, bt_worker *w, const char *s, size_t len,
                    bt_word_cb cb, void *ctx) {
  if (bt_grow((void **)&w->ocp, &w->ocp_cap, len + 1, sizeof *w->ocp)) return -1;
  int32_t n = (int32_t)bt_utf8_decode(s, len, w->ocp);
  if (t->model == BT_MODEL_UNIGRAM) return bt_unigram_pretok(t, w, n, cb, ctx);
  long ln = normalize(t, w, 0, n);
  if (ln < 0) return -1;
  int32_t m = (int32_t)ln;
  if (m == 0) return 0;
  if (norm_utf8(w, (size_t)m)) return -1;
  if (t->pre == BT_PRE_BYTELEVEL) {
    int32_t *ends = malloc(((size_t)m + 1) * sizeof *ends);
    if (!ends) return -1;
    int np = t->use_regex ? bt_gpt2_split(w->ncp, m, ends) : 1;
    if (!t->use_regex) ends[0] = m;
    int32_t st = 0;
    for (int p = 0; p < np; p++) {
      cb(ctx, w->nb + w->nbs[st], (size_t)(w->nbs[ends[p]] - w->nbs[st]));
      st = ends[p];
    }
    free(ends);
    return 0;
  }
  int32_t st = -1;
  for (int32_t i = 0; i <= m; i++) {
    uint32_t c = i < m ? w->ncp[i] : ' ';
    int sp = c == ' ' || (c >= 0x80 && bt_is_whitespace(c)) || (c >= 9 && c <= 13);
    int pu = !sp && t->pre == BT_PRE_BERT && bt_is_punctuation(c);
    if (sp || pu) {
      if (st >= 0) { cb(ctx, w->nb + w->nbs[st], (size_t)(w->nbs[i] - w->nbs[st])); st = -1; }
      if (pu) cb(ctx, w->nb + w->nbs[i], (size_t)(w->nbs[i + 1] - w->nbs[i]));
    } else if (st < 0) st = i;
  }
  return 0;
}

static int normalized_content(bt_tokenizer *t, const bt_added *a, char **out,
                              size_t *outlen) {
  bt_worker *w = t->workers[0];
  if (bt_grow((void **)&w->ocp, &w->ocp_cap, a->len + 1, sizeof *w->ocp)) return -1;
  int32_t n = (int32_t)bt_utf8_decode(a->content, a->len, w->ocp);
  const uint32_t *cp;
  size_t m;
  if (t->model == BT_MODEL_UNIGRAM) {
    const int32_t *os, *oe;
    if (bt_norm_chain(t, w, 0, n, &cp, &os, &oe, &m)) return -1;
  } else {
    long ln = normalize(t, w, 0, n);
    if (ln < 0) return -1;
    m = (size_t)ln;
    cp = w->ncp;
  }
  char *s = malloc(m * 4 + 1);
  if (!s) return -1;
  size_t k = 0;
  for (size_t i = 0; i < m; i++) k += (size_t)bt_utf8_encode(cp[i], s + k);
  *out = s; *outlen = k;
  return 0;
}

/* One sequence: added tokens, segments, model. */
static int encode_sequence(bt_tokenizer *t, bt_worker *w, const char *s,
                           size_t len, bt_encoding *e, char *err,
                           size_t errlen) {
  if (bt_grow((void **)&w->ocp, &w->ocp_cap, len + 1, sizeof *w->ocp)) return -1;
  int32_t n = (int32_t)bt_utf8_decode(s, len, w->ocp);
  /* room for about one token per 4 characters up front: a few doublings
  ** of seven arrays were a tenth of the time on short lines */
  if (e->cap == 0 && bt_enc_reserve(e, n / 4 + 16)) return -1;
  int32_t pos = 0, word = 0;
  while (pos < n) {
    int32_t ms = n, me = n;
    int a = bt_find_added(t, &t->added_trie, w->ocp, n, pos, &ms, &me);
    if (a < 0) ms = me = n;
    if (ms > pos && encode_segment(t, w, pos, ms, e, &word, err, errlen))
      return -1;
    if (a >= 0 && bt_push_added(t, w, e, a, ms, me, &word)) return -1;
    pos = me;
  }
  return 0;
}

/* ---------- post-processing ---------- */

/* ByteLevel trim_offsets (HF process_offsets). */
static void trim_offsets(const bt_tokenizer *t, bt_encoding *e, int aps) {
  for (int32_t i = 0; i < e->n; i++) {
    size_t len;
    const char *tok = bt_id_to_token(t, e->ids[i], &len);
    if (!tok || e->special[i] == 2) continue;   /* added: trimmed already */
    int lead = 0, trail = 0;
    size_t k = 0, m = len;
    while (k + 1 < len && (unsigned char)tok[k] == 0xC4 &&
           (unsigned char)tok[k + 1] == 0xA0) { lead++; k += 2; }
    while (m >= k + 2 && (unsigned char)tok[m - 2] == 0xC4 &&
           (unsigned char)tok[m - 1] == 0xA0) { trail++; m -= 2; }
    if ((size_t)lead * 2 == len) trail = lead;   /* all spaces */
    int32_t *o = e->offsets + 2 * i;
    if (lead > 0) {
      int first = i == 0 || o[0] == 0;
      if (first && aps && lead == 1) lead = 0;
      o[0] = o[0] + lead < o[1] ? o[0] + lead : o[1];
    }
    if (trail > 0 && o[1] >= trail)
      o[1] = o[1] - trail > o[0] ? o[1] - trail : o[0];
  }
}

static int apply_template(const bt_tokenizer *t, const bt_piece *tp, int np,
                          const bt_encoding *a, const bt_encoding *b,
                          int add_special, bt_encoding *out) {
  int32_t need = out->n;   /* the whole result, reserved at once */
  for (int p = 0; p < np; p++)
    need += tp[p].seq >= 0 ? (tp[p].seq == 0 ? (a ? a->n : 0) : (b ? b->n : 0)) : (add_special ? tp[p].nids : 0);
  if (bt_enc_reserve(out, need)) return -1;
  for (int p = 0; p < np; p++) {
    if (tp[p].seq >= 0) {
      const bt_encoding *src = tp[p].seq == 0 ? a : b;
      if (!src) continue;
      int32_t n0 = out->n;
      if (bt_enc_append(out, src, 0, src->n)) return -1;
      for (int32_t i = n0; i < out->n; i++) {
        out->type_ids[i] = tp[p].type_id;
        out->seqs[i] = (int8_t)tp[p].seq;
      }
    } else if (add_special) {
      for (int k = 0; k < tp[p].nids; k++)
        if (bt_enc_push(out, tp[p].ids[k], tp[p].type_id, 0, 0, -1, 1)) return -1;
    }
  }
  (void)t;
  return 0;
}

static int post_one(const bt_tokenizer *t, const bt_encoding *a,
                    const bt_encoding *b, int add_special, bt_encoding *out) {
  if (t->has_post) {
    const bt_piece *tp = b ? t->pair : t->single;
    int np = b ? t->npair : t->nsingle;
    return apply_template(t, tp, np, a, b, add_special, out);
  }
  if (bt_enc_append(out, a, 0, a->n)) return -1;
  for (int32_t i = 0; i < out->n; i++) out->seqs[i] = 0;
  if (b) {
    int32_t n0 = out->n;
    if (bt_enc_append(out, b, 0, b->n)) return -1;
    for (int32_t i = n0; i < out->n; i++) { out->type_ids[i] = 1; out->seqs[i] = 1; }
  }
  return 0;
}

static int add_over(bt_encoding *out, const bt_tokenizer *t,
                    const bt_encoding *a, const bt_encoding *b, int add_special) {
  bt_encoding *o = realloc(out->over, (size_t)(out->nover + 1) * sizeof *o);
  if (!o) return -1;
  out->over = o;
  memset(&o[out->nover], 0, sizeof *o);
  out->nover++;
  return post_one(t, a, b, add_special, &o[out->nover - 1]);
}

static int truncate_seq(bt_encoding *e, int n, const bt_options *o, char *err,
                 size_t errlen) {
  if (n < e->n && n > 0 && o->stride >= n) {
    snprintf(err, errlen, "stride %d must be smaller than the length %d a "
             "sequence is truncated to", o->stride, n);
    return -1;
  }
  if (n > 0 && n < e->n) {               /* windows this cut will make */
    long cap = o->max_windows > 0 ? o->max_windows : 1000;
    long step = n - o->stride, windows = 1 + (e->n - n + step - 1) / step;
    if (windows > cap) {
      snprintf(err, errlen, "truncation with stride gives %ld windows for one "
               "sequence, more than max_windows = %ld (raise max_windows, "
               "shorten the input or use a smaller stride)", windows, cap);
      return -1;
    }
  }
  return bt_enc_truncate(e, n, o->stride, o->trunc_left);
}

int bt_encode(bt_tokenizer *t, int worker, const char *a, size_t alen,
              const char *b, size_t blen, const bt_options *o,
              bt_encoding *out, char *err, size_t errlen) {
  bt_worker *w = t->workers[worker < t->nworkers ? worker : 0];
  bt_encoding ea, eb;
  memset(&ea, 0, sizeof ea); memset(&eb, 0, sizeof eb);
  memset(out, 0, sizeof *out);
  int rc = -1;
  err[0] = '\0';
  if (encode_sequence(t, w, a, alen, &ea, err, errlen)) goto done;
  if (b && encode_sequence(t, w, b, blen, &eb, err, errlen)) goto done;
  if (o->truncation != BT_TRUNC_NONE) {
    int added = o->add_special_tokens ? bt_num_added_tokens(t, b != NULL) : 0;
    int max = o->max_length - added;
    if (max < 0) {
      snprintf(err, errlen, "max_length %d is smaller than the %d special "
               "tokens to add", o->max_length, added);
      goto done;
    }
    int total = ea.n + (b ? eb.n : 0);
    if (max == 0) {
      if (truncate_seq(&ea, 0, o, err, errlen)) goto done;
      if (b && truncate_seq(&eb, 0, o, err, errlen)) goto done;
    } else if (total > max) {
      int remove = total - max;
      if (o->truncation == BT_TRUNC_LONGEST_FIRST) {
        if (b) {
          int n1 = ea.n, n2 = eb.n, swap = 0;
          if (n1 > n2) { swap = 1; int x = n1; n1 = n2; n2 = x; }
          if (n1 > max) n2 = n1;
          else n2 = n1 > max - n1 ? n1 : max - n1;
          if (n1 + n2 > max) { n1 = max / 2; n2 = n1 + max % 2; }
          if (swap) { int x = n1; n1 = n2; n2 = x; }
          if (truncate_seq(&ea, n1, o, err, errlen) ||
              truncate_seq(&eb, n2, o, err, errlen)) goto done;
        } else if (truncate_seq(&ea, total - remove, o, err, errlen))
          goto done;
      } else {
        bt_encoding *target = &ea;
        if (o->truncation == BT_TRUNC_ONLY_SECOND) {
          if (!b) {
            snprintf(err, errlen, "truncation 'only_second' needs a pair "
                     "of sequences");
            goto done;
          }
          target = &eb;
        }
        if (target->n > remove) {
          if (truncate_seq(target, target->n - remove, o, err, errlen))
            goto done;
        } else {
          snprintf(err, errlen, "truncation '%s': the sequence to truncate "
                   "(%d tokens) is shorter than the %d tokens to remove",
                   target == &ea ? "only_first" : "only_second", target->n, remove);
          goto done;
        }
      }
    }
  }
  {
    long cap = o->max_windows > 0 ? o->max_windows : 1000;
    long wa = 1 + (long)ea.nover, wb = b ? 1 + (long)eb.nover : 1;
    long windows = b ? wa + wb - 1 + (long)ea.nover * (long)eb.nover : wa;
    if (windows > cap) {
      snprintf(err, errlen, "truncation with stride gives %ld windows, more than "
               "max_windows = %ld (raise max_windows, shorten the input or use a "
               "smaller stride)", windows, cap);
      goto done;
    }
  }
  if (t->trim_offsets) {
    trim_offsets(t, &ea, t->post_add_prefix_space);
    for (int i = 0; i < ea.nover; i++)
      trim_offsets(t, &ea.over[i], t->post_add_prefix_space);
    if (b) {
      trim_offsets(t, &eb, t->post_add_prefix_space);
      for (int i = 0; i < eb.nover; i++)
        trim_offsets(t, &eb.over[i], t->post_add_prefix_space);
    }
  }
  int add = o->add_special_tokens;
  if (post_one(t, &ea, b ? &eb : NULL, add, out)) goto done;
  /* overflowing windows, in HF's merge order */
  for (int i = 0; i < ea.nover; i++) {
    if (add_over(out, t, &ea.over[i], b ? &eb : NULL, add)) goto done;
    if (b)
      for (int j = 0; j < eb.nover; j++)
        if (add_over(out, t, &ea.over[i], &eb.over[j], add)) goto done;
  }
  if (b)
    for (int j = 0; j < eb.nover; j++)
      if (add_over(out, t, &ea, &eb.over[j], add)) goto done;
  rc = 0;
done:
  if (rc && !err[0]) snprintf(err, errlen, "out of memory");
  bt_encoding_free(&ea);
  bt_encoding_free(&eb);
  if (rc) bt_encoding_free(out);
  return rc;
}
