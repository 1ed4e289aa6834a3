/*
** Finding added tokens in text and appending them: shared by the
** WordPiece / BPE pipeline (tok_core.c) and Unigram's (tok_unigram.c).
*/
#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

static int is_word_char(uint32_t c) {
  return bt_is_letter(c) || bt_is_number(c) || c == '_';
}

int bt_find_added(const bt_tokenizer *t, const bt_trie *tr, const uint32_t *c,
                  int32_t n, int32_t pos, int32_t *ms, int32_t *me) {
  if (tr->nnodes <= 1) return -1;       /* no tokens */
  const int32_t lo = pos;
  for (int32_t i = pos; i < n; i++) {
    if (c[i] < 0x80 && tr->root[c[i]] == 0) continue;   /* starts no token */
    int best = -1; int32_t blen = 0, node = 0;
    for (int32_t j = i; j < n && node >= 0; j++) {
      char u[4];
      int k = bt_utf8_encode(c[j], u);
      for (int b = 0; b < k && node >= 0; b++) node = bt_trie_step(tr, node, (unsigned char)u[b]);
      if (node < 0) break;
      int a = tr->value[node];
      if (a < 0) continue;
      int32_t len = j + 1 - i;
      const bt_added *x = &t->added[a];
      if (x->single_word &&
          ((i > 0 && is_word_char(c[i - 1])) || (i + len < n && is_word_char(c[i + len]))))
        continue;
      best = a; blen = len;
    }
    if (best >= 0) {
      int32_t s = i, e = i + blen;
      if (t->added[best].lstrip)
        while (s > lo && bt_is_whitespace(c[s - 1])) s--;
      if (t->added[best].rstrip)
        while (e < n && bt_is_whitespace(c[e])) e++;
      *ms = s; *me = e;
      return best;
    }
  }
  return -1;
}

int bt_push_added(const bt_tokenizer *t, const bt_worker *w, bt_encoding *e,
                  int a, int32_t ms, int32_t me, int32_t *word) {
  if (bt_enc_push(e, t->added[a].id, 0, ms, me, (*word)++, 0)) return -1;
  e->special[e->n - 1] = 2;             /* "added token": its text by offsets */
  if (t->trim_offsets) {                /* HF trims the stripped spaces too */
    int32_t lead = 0, trail = 0, *o = e->offsets + 2 * (e->n - 1);
    while (ms + lead < me && bt_is_whitespace(w->ocp[ms + lead])) lead++;
    while (me - trail > ms + lead && bt_is_whitespace(w->ocp[me - 1 - trail])) trail++;
    if (lead == 1 && t->post_add_prefix_space && (e->n == 1 || ms == 0)) lead = 0;
    o[0] = ms + lead; o[1] = me - trail;
  }
  return 0;
}
