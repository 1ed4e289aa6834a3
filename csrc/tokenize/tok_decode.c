/*
** Decoding ids back into text: WordPiece (with HF's cleanup), byte-level
** BPE (bytes made valid UTF-8 as Rust's from_utf8_lossy does) and Unigram
** pieces (Metaspace, byte fallback).
*/
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

typedef struct { char *p; size_t n, cap; int fail; } sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->fail) return;
  if (bt_grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) { b->fail = 1; return; }
  memcpy(b->p + b->n, s, n); b->n += n;
}

/* HF's WordPiece cleanup, applied to each token (with its leading space). */
static void sb_add_clean(sbuf *b, const char *s, size_t n) {
  static const char *from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm",
                               " do not", " 's", " 've", " 're"};
  static const char *to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't",
                             "'s", "'ve", "'re"};
  char *cur = malloc(n * 2 + 8);
  if (!cur) { b->fail = 1; return; }
  memcpy(cur, s, n);
  size_t len = n;
  for (int r = 0; r < 11; r++) {
    size_t fl = strlen(from[r]), tl = strlen(to[r]), k = 0, o = 0;
    char *nx = malloc(len * 2 + 8);
    if (!nx) { free(cur); b->fail = 1; return; }
    while (k < len) {
      if (k + fl <= len && memcmp(cur + k, from[r], fl) == 0) {
        memcpy(nx + o, to[r], tl); o += tl; k += fl;
      } else nx[o++] = cur[k++];
    }
    free(cur); cur = nx; len = o;
  }
  sb_add(b, cur, len);
  free(cur);
}

/* Rust's String::from_utf8_lossy: each maximal invalid prefix -> U+FFFD. */
static void sb_add_lossy(sbuf *b, const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) { sb_add(b, (const char *)s + i, 1); i++; continue; }
    int need = 0; unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F;
    }
    size_t k = 1;
    if (need) {
      for (; k <= (size_t)need && i + k < n; k++) {
        unsigned cc = s[i + k];
        unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
        if (cc < l || cc > h) break;
      }
    }
    if (need && k == (size_t)need + 1) { sb_add(b, (const char *)s + i, k); i += k; }
    else { sb_add(b, "\xEF\xBF\xBD", 3); i += k; }
  }
}

/* ---------- Unigram (SentencePiece) pieces ---------- */

/* A run of byte pieces: valid UTF-8 as is, else one U+FFFD per byte (HF's
** ByteFallback decoder). */
static void flush_bytes(sbuf *b, const unsigned char *by, size_t n) {
  size_t i = 0;
  int ok = 1;
  while (i < n) {
    int k = bt_utf8_valid_len(by + i, n - i);
    if (!k) { ok = 0; break; }
    i += (size_t)k;
  }
  if (ok) { sb_add(b, (const char *)by, n); return; }
  for (size_t j = 0; j < n; j++) sb_add(b, "\xEF\xBF\xBD", 3);
}

static int byte_piece_value(const char *s, size_t len) {
  if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; k++) {
    char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else return -1;
  }
  return v;
}

static char *unigram_decode(const bt_tokenizer *t, const int32_t *ids, size_t n,
                            int skip_special, size_t *outlen) {
  sbuf b = {0};
  unsigned char *pend = malloc(n + 1);
  size_t np = 0;
  int first = 1;
  char repl[4];
  int rl = bt_utf8_encode(t->meta_repl ? t->meta_repl : BT_META_CP, repl);
  int strip_first = t->uni_spm ? t->add_dummy_prefix
                               : t->prepend_scheme != BT_PREPEND_NEVER;
  if (!pend) return NULL;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const char *tok = bt_id_to_token(t, ids[i], &len);
    if (!tok) continue;
    if (skip_special && bt_is_special_id(t, ids[i])) continue;
    int ty = ids[i] >= 0 && ids[i] < t->uni_n ? t->uni_type[ids[i]] : 0;
    if (t->uni_spm && ty == BT_PIECE_CONTROL) continue;
    int bv = (t->uni_spm ? t->byte_fallback || ty == BT_PIECE_BYTE : t->dec_byte_fallback)
             ? byte_piece_value(tok, len) : -1;
    if (bv >= 0) { pend[np++] = (unsigned char)bv; first = 0; continue; }
    if (np) { flush_bytes(&b, pend, np); np = 0; }
    if (t->uni_spm && ids[i] == t->unk_id) {
      sb_add(&b, " \xE2\x81\x87 ", 5);   /* spm's unk surface */
      first = 0;
      continue;
    }
    size_t k = 0;
    if (first && strip_first && len >= (size_t)rl && memcmp(tok, repl, (size_t)rl) == 0)
      k = (size_t)rl;
    for (; k < len;) {
      if (k + (size_t)rl <= len && memcmp(tok + k, repl, (size_t)rl) == 0) {
        sb_add(&b, " ", 1); k += (size_t)rl;
      } else { sb_add(&b, tok + k, 1); k++; }
    }
    first = 0;
  }
  if (np) flush_bytes(&b, pend, np);
  free(pend);
  if (b.fail) { free(b.p); return NULL; }
  if (!b.p) { b.p = malloc(1); if (!b.p) return NULL; }
  b.p[b.n] = '\0';
  *outlen = b.n;
  return b.p;
}

/* ---------- the decoders' entry ---------- */

char *bt_decode(const bt_tokenizer *t, const int32_t *ids, size_t n,
                int skip_special, size_t *outlen) {
  if (t->model == BT_MODEL_UNIGRAM)
    return unigram_decode(t, ids, n, skip_special, outlen);
  sbuf b = {0}, raw = {0};
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const char *tok = bt_id_to_token(t, ids[i], &len);
    if (!tok) continue;
    if (skip_special && bt_is_special_id(t, ids[i])) continue;
    if (t->decoder == BT_DEC_BYTELEVEL) {
      /* map chars back to bytes; a token with an unmapped char goes raw */
      uint32_t cps[256]; uint32_t *cp = cps;
      if (len > 256 && !(cp = malloc(len * sizeof *cp))) { raw.fail = 1; break; }
      size_t nc = bt_utf8_decode(tok, len, cp), k;
      for (k = 0; k < nc; k++) if (bt_cp_to_byte(cp[k]) < 0) break;
      if (k < nc) sb_add(&raw, tok, len);
      else for (k = 0; k < nc; k++) {
        char by = (char)bt_cp_to_byte(cp[k]);
        sb_add(&raw, &by, 1);
      }
      if (cp != cps) free(cp);
    } else if (t->decoder == BT_DEC_WORDPIECE) {
      const char *pre = t->dec_prefix ? t->dec_prefix : "##";
      size_t pl = strlen(pre);
      if (!first && len >= pl && memcmp(tok, pre, pl) == 0) {
        if (t->cleanup) sb_add_clean(&b, tok + pl, len - pl);
        else sb_add(&b, tok + pl, len - pl);
      } else {
        char *tmp = malloc(len + 2);
        if (!tmp) { b.fail = 1; break; }
        size_t k = 0;
        if (!first) tmp[k++] = ' ';
        memcpy(tmp + k, tok, len); k += len;
        if (t->cleanup) sb_add_clean(&b, tmp, k); else sb_add(&b, tmp, k);
        free(tmp);
      }
    } else {
      if (!first) sb_add(&b, " ", 1);
      sb_add(&b, tok, len);
    }
    first = 0;
  }
  if (t->decoder == BT_DEC_BYTELEVEL) {
    if (!raw.fail) sb_add_lossy(&b, (const unsigned char *)raw.p, raw.n);
    free(raw.p);
  }
  if (b.fail || raw.fail) { free(b.p); return NULL; }
  if (!b.p) { b.p = malloc(1); if (!b.p) return NULL; }
  b.p[b.n] = '\0';
  *outlen = b.n;
  return b.p;
}
