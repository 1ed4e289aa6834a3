/* Internal declarations shared by the tokenizer's C files. */
#ifndef BT_TOK_INTERNAL_H
#define BT_TOK_INTERNAL_H

#include <string.h>

#include "tokenize/tok.h"
#include "tokenize/tok_util.h"

int bt_enc_reserve(bt_encoding *e, int32_t need);
int bt_enc_push(bt_encoding *e, int32_t id, int32_t type_id, int32_t s,
                int32_t t, int32_t word, int special);
/* bt_enc_push for a token shown by text[0, len) (encoding's surface). */
int bt_enc_push_text(bt_encoding *e, int32_t id, int32_t s, int32_t t,
                     int32_t word, const char *text, size_t len);
int bt_enc_append(bt_encoding *dst, const bt_encoding *src, int32_t from,
                  int32_t to);
int bt_enc_truncate(bt_encoding *e, int max_len, int stride, int left);

/* BPE word cache entry. */
typedef struct bt_cache_entry {
  uint64_t hash;
  char *key; uint32_t klen;
  int32_t *toks; int ntoks;                     /* id, start, len triples */
} bt_cache_entry;

/* Unigram word cache entry, one cache line: a word of up to 24 bytes, its
** up to 4 tokens (id and byte length; id -2 is an unknown) and, for spm's
** float scores, the margin that makes them safe to reuse. */
#define BT_UC_KEY 24
#define BT_UC_TOKS 4
typedef struct bt_uentry {
  uint64_t h;
  uint8_t klen, ntoks, used, pad_;
  float gap, mag;
  uint8_t len[BT_UC_TOKS];
  int32_t id[BT_UC_TOKS];
  char key[BT_UC_KEY];
} bt_uentry;

/* Per-thread scratch space. */
typedef struct bt_worker {
  uint32_t *ocp; size_t ocp_cap;                /* original code points */
  uint32_t *ncp; int32_t *nos, *noe, *nbs; size_t n_cap;  /* normalized */
  char *nb; size_t nb_cap;                      /* normalized UTF-8 */
  char *scratch; size_t scratch_cap;
  int32_t *ends; size_t ends_cap;               /* pre-token ends */
  /* byte-level word: bytes and the char span of each byte */
  unsigned char *wb; int32_t *wbs, *wbe; size_t wb_cap;
  /* BPE symbols */
  int32_t *sid, *sstart, *slen, *sprev, *snext, *srank; size_t s_cap;
  uint64_t *heap; size_t heap_cap;
  int32_t *toks; size_t toks_cap;               /* id, start, len triples */
  bt_cache_entry *cache; size_t cache_mask, cache_n;
  /* Unigram: normalized UTF-8 with each byte's original char span, the
  ** code-point ping-pong buffers of the normalizer chain, Viterbi state */
  char *ub; int32_t *uos, *uoe; size_t ub_cap;
  uint32_t *tcp[2]; int32_t *tos[2], *toe[2]; size_t t_cap[2];
  double *vscore, *vsec; int32_t *vstart, *vid; size_t v_cap;
  bt_uentry *uc; size_t uc_mask, uc_n;
  int32_t *ic; size_t ic_cap;                   /* byte -> original char */
} bt_worker;

bt_worker *bt_worker_new(void);
void bt_worker_free(bt_worker *w);

/* BPE over the bytes w->wb[0, n): tokens (id, start, len) in w->toks.
** Returns the number of tokens, or -1 on no memory. */
int bt_bpe_word(bt_tokenizer *t, bt_worker *w, size_t n);
int32_t bt_merge_lookup(const bt_merge_map *m, int32_t a, int32_t b,
                        int32_t *newid);
int bt_merge_put(bt_merge_map *m, int32_t a, int32_t b, int32_t rank,
                 int32_t newid);
void bt_merge_free(bt_merge_map *m);

/* Byte-level pre-tokenizer: splits cps[0,n) into pieces; ends[] gets the
** end of each piece; returns the count. */
int bt_gpt2_split(const uint32_t *cps, int n, int32_t *ends);

/* Unigram over original chars [from, to) of w->ocp (tok_unigram.c). */
int bt_unigram_segment(bt_tokenizer *t, bt_worker *w, int32_t from,
                       int32_t to, bt_encoding *e, int32_t *word,
                       char *err, size_t errlen);
void bt_unigram_free(bt_tokenizer *t);
/* The child of node by byte b, or -1 (tok_trie.c). */
int32_t bt_trie_step(const bt_trie *tr, int32_t node, unsigned char b);
/* Fills t->cm_plain and t->hf_plain from the charsmap (tok_charsmap.c). */
void bt_charsmap_plain(bt_tokenizer *t);

/* Finds the leftmost-longest added token of trie tr (added_trie over the
** original text, norm_trie over normalized text) at or after pos in
** c[0, n), walking the trie from each position (one pass: the work per
** position is bounded by the longest token).  Returns its index, with its
** span [*ms, *me) (lstrip/rstrip whitespace included), or -1. */
int bt_find_added(const bt_tokenizer *t, const bt_trie *tr, const uint32_t *c,
                  int32_t n, int32_t pos, int32_t *ms, int32_t *me);
/* Appends added token a over original chars [ms, me) as word *word. */
int bt_push_added(const bt_tokenizer *t, const bt_worker *w, bt_encoding *e,
                  int a, int32_t ms, int32_t me, int32_t *word);
/* HF's normalizer chain (t->norms) over w->ocp[from, to) (tok_unigram.c):
** code points cp[0, *n) with original spans [os, oe), in the worker's
** buffers. */
int bt_norm_chain(const bt_tokenizer *t, bt_worker *w, int32_t from, int32_t to,
                  const uint32_t **cp, const int32_t **os, const int32_t **oe,
                  size_t *n);

typedef void (*bt_word_cb)(void *ctx, const char *word, size_t len);
/* Unigram pre-tokens (normalizer chain + Metaspace) of ocp[0, n). */
int bt_unigram_pretok(bt_tokenizer *t, bt_worker *w, int32_t n, bt_word_cb cb,
                      void *ctx);
int bt_pretok_words(bt_tokenizer *t, bt_worker *w, const char *s, size_t len,
                    bt_word_cb cb, void *ctx);

#define BT_META_CP 0x2581u              /* ▁, SentencePiece's space */

/* Length of the valid UTF-8 char at s[0, n), or 0 if invalid. */
static inline int bt_utf8_valid_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  int need; unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) need = 1;
  else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
  else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
  else return 0;
  if ((size_t)need >= n) return 0;
  for (int k = 1; k <= need; k++) {
    unsigned x = s[k];
    if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF)) return 0;
  }
  return need + 1;
}

/* The precompiled charsmap's darts-clone units (tok_charsmap.c). */
static inline uint32_t bt_du_offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static inline uint32_t bt_du_label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static inline int bt_du_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t bt_du_value(uint32_t u) { return u & ((1u << 31) - 1); }

/* Matches a prefix of s[0, n): the longest rule (spm) or the shortest one
** (HF's spm_precompiled takes the first result).  Returns the matched
** length, 0 if none, with the replacement in *rep / *replen. */
static inline size_t bt_charsmap_prefix(const bt_charsmap *m,
                                        const unsigned char *s, size_t n, int longest,
                                        const char **rep, size_t *replen) {
  if (!m->units) return 0;
  size_t id = bt_du_offset(m->units[0]), best = 0;
  uint32_t bestv = 0;
  for (size_t i = 0; i < n; i++) {
    if (!longest && s[i] == 0) break;
    id ^= s[i];
    if (id >= m->nunits) break;
    uint32_t u = m->units[id];
    if (bt_du_label(u) != s[i]) break;
    id ^= bt_du_offset(u);
    if (id >= m->nunits) break;
    if (bt_du_has_leaf(u)) {
      best = i + 1; bestv = bt_du_value(m->units[id]);
      if (!longest) break;
    }
  }
  if (!best || bestv >= m->nnorm + 1) return 0;
  *rep = m->norm + bestv;
  *replen = strlen(m->norm + bestv);    /* norm[nnorm] is a NUL */
  return best;
}

#endif
