/*
** SentencePiece's precompiled charsmap: loading the blob (a darts-clone
** double array and its replacement strings) and the ASCII bytes it leaves
** as they are.  The prefix matcher is inline in tok_internal.h.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

void bt_charsmap_free(bt_charsmap *m) {
  free(m->units); free(m->norm);
  memset(m, 0, sizeof *m);
}

int bt_charsmap_load(bt_charsmap *m, const uint8_t *blob, size_t len,
                     char *err, size_t errlen) {
  bt_charsmap_free(m);
  if (len == 0) return 0;               /* identity normalization */
  if (len < 4) {
    snprintf(err, errlen, "precompiled charsmap: %zu bytes, too short for "
             "its 4-byte header", len);
    return -1;
  }
  uint32_t ts = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 |
                (uint32_t)blob[2] << 16 | (uint32_t)blob[3] << 24;
  if (ts == 0 || ts % 4 != 0 || ts > len - 4) {
    snprintf(err, errlen, "precompiled charsmap: trie size %u does not fit "
             "the %zu-byte blob (or is not a multiple of 4)", ts, len);
    return -1;
  }
  m->nunits = ts / 4;
  m->units = malloc(ts);
  m->nnorm = len - 4 - ts;
  m->norm = malloc(m->nnorm + 1);
  if (!m->units || !m->norm) {
    bt_charsmap_free(m);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < m->nunits; i++) {
    const uint8_t *p = blob + 4 + 4 * i;
    m->units[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                  (uint32_t)p[3] << 24;
  }
  memcpy(m->norm, blob + 4 + ts, m->nnorm);
  m->norm[m->nnorm] = '\0';             /* a last string without its NUL */
  return 0;
}

/* 1 when the charsmap has no rule "c" alone and no rule going on from c
** with an ASCII byte: then c followed by an ASCII byte (or the end) is
** copied as it is. */
static int charsmap_ascii_plain(const bt_charsmap *m, unsigned char c) {
  if (!m->units) return 1;
  size_t id = bt_du_offset(m->units[0]) ^ c;
  if (id >= m->nunits || bt_du_label(m->units[id]) != c) return 1;   /* no rule */
  uint32_t u = m->units[id];
  if (bt_du_has_leaf(u)) return 0;                                   /* "c" alone */
  size_t nx = id ^ bt_du_offset(u);
  for (unsigned a = 0; a < 128; a++) {
    size_t j = nx ^ a;
    if (j < m->nunits && bt_du_label(m->units[j]) == a) return 0;
  }
  return 1;
}

/* Marks the ASCII bytes that, before an ASCII byte, start no charsmap rule
** and no user-defined symbol: spm's normalizer copies them as they are. */
void bt_charsmap_plain(bt_tokenizer *t) {
  for (int b = 0; b < 128; b++) {
    unsigned char c = (unsigned char)b;
    const char *rep; size_t rl;
    t->hf_plain[b] = bt_charsmap_prefix(&t->charsmap, &c, 1, 0, &rep, &rl) == 0;
    t->cm_plain[b] = b != 0 && t->user_trie.root[b] == 0 &&
      (t->user_trie.da_base == NULL || bt_trie_step(&t->user_trie, 0, c) < 0) &&
      charsmap_ascii_plain(&t->charsmap, c);
  }
}
