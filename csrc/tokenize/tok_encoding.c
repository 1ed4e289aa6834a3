/*
** Encodings: growable token arrays, truncation (HF semantics, with
** stride and overflowing windows), padding.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

void bt_encoding_free(bt_encoding *e) {
  free(e->ids); free(e->type_ids); free(e->offsets); free(e->words);
  free(e->special); free(e->attn); free(e->seqs);
  free(e->surface); free(e->text);
  for (int i = 0; i < e->nover; i++) bt_encoding_free(&e->over[i]);
  free(e->over);
  memset(e, 0, sizeof *e);
}

int bt_enc_reserve(bt_encoding *e, int32_t need) {
  if (need <= e->cap) return 0;
  int32_t nc = e->cap ? e->cap : 16;
  while (nc < need) nc *= 2;
  void *p;
#define GROW(f, k) \
  p = realloc(e->f, (size_t)nc * (k) * sizeof *e->f); if (!p) return -1; \
  e->f = p;
  GROW(ids, 1) GROW(type_ids, 1) GROW(offsets, 2) GROW(words, 1)
  GROW(special, 1) GROW(attn, 1) GROW(seqs, 1) GROW(surface, 2)
#undef GROW
  e->cap = nc;
  return 0;
}

int bt_enc_push(bt_encoding *e, int32_t id, int32_t type_id, int32_t s,
                int32_t t, int32_t word, int special) {
  if (e->n == e->cap && bt_enc_reserve(e, e->n + 1)) return -1;
  int32_t i = e->n++;
  e->ids[i] = id; e->type_ids[i] = type_id;
  e->offsets[2 * i] = s; e->offsets[2 * i + 1] = t;
  e->words[i] = word; e->special[i] = (uint8_t)special; e->attn[i] = 1;
  e->seqs[i] = -1;
  e->surface[2 * i] = e->surface[2 * i + 1] = -1;
  return 0;
}

/* Appends len bytes to e's text; their start, or -1 on no memory. */
static int32_t add_text(bt_encoding *e, const char *text, size_t len) {
  if (e->text_len + len > INT32_MAX) return -1;
  if (e->text_len + len > e->text_cap) {
    size_t nc = e->text_cap ? e->text_cap : 64;
    while (nc < e->text_len + len) nc *= 2;
    char *p = realloc(e->text, nc);
    if (!p) return -1;
    e->text = p;
    e->text_cap = nc;
  }
  memcpy(e->text + e->text_len, text, len);
  e->text_len += len;
  return (int32_t)(e->text_len - len);
}

int bt_enc_push_text(bt_encoding *e, int32_t id, int32_t s, int32_t t,
                     int32_t word, const char *text, size_t len) {
  int32_t at = add_text(e, text, len);
  if (at < 0 || bt_enc_push(e, id, 0, s, t, word, 0)) return -1;
  e->surface[2 * (e->n - 1)] = at;
  e->surface[2 * (e->n - 1) + 1] = (int32_t)len;
  return 0;
}

/* Appends src[from, to) to dst. */
int bt_enc_append(bt_encoding *dst, const bt_encoding *src, int32_t from,
                  int32_t to) {
  int32_t k = to - from, n = dst->n;
  if (k <= 0) return 0;
  if (bt_enc_reserve(dst, n + k)) return -1;
  memcpy(dst->ids + n, src->ids + from, (size_t)k * sizeof *dst->ids);
  memcpy(dst->type_ids + n, src->type_ids + from, (size_t)k * sizeof *dst->ids);
  memcpy(dst->offsets + 2 * n, src->offsets + 2 * from,
         (size_t)k * 2 * sizeof *dst->ids);
  memcpy(dst->words + n, src->words + from, (size_t)k * sizeof *dst->ids);
  memcpy(dst->special + n, src->special + from, (size_t)k);
  memcpy(dst->attn + n, src->attn + from, (size_t)k);
  memcpy(dst->seqs + n, src->seqs + from, (size_t)k);
  for (int32_t i = 0; i < k; i++) {   /* texts copied, their starts moved */
    const int32_t *sf = src->surface + 2 * (from + i);
    int32_t at = -1;
    if (sf[0] >= 0 && (at = add_text(dst, src->text + sf[0], (size_t)sf[1])) < 0) return -1;
    dst->surface[2 * (n + i)] = at;
    dst->surface[2 * (n + i) + 1] = at < 0 ? -1 : sf[1];
  }
  dst->n = n + k;
  return 0;
}

/* HF Encoding::truncate: keep the first window, the others overflow. */
int bt_enc_truncate(bt_encoding *e, int max_len, int stride, int left) {
  int32_t len = e->n;
  if (max_len >= len) return 0;
  bt_encoding all = *e;
  memset(e, 0, sizeof *e);
  if (max_len == 0) {                  /* everything overflows */
    e->over = malloc(sizeof *e->over);
    if (!e->over) { *e = all; return -1; }
    e->over[0] = all; e->nover = 1;
    return 0;
  }
  int32_t offset = max_len - stride, nparts = 0;
  int32_t (*parts)[2] = malloc(((size_t)len / (size_t)offset + 2) * sizeof *parts);
  if (!parts) { *e = all; return -1; }
  parts[0][0] = 0; parts[0][1] = len;
  if (!left) {
    for (int32_t start = 0; start < len; start += offset) {
      int32_t stop = start + max_len < len ? start + max_len : len;
      parts[nparts][0] = start; parts[nparts][1] = stop; nparts++;
      if (stop == len) break;
    }
  } else {
    for (int32_t s = len - 1; s >= 0; s -= offset) {
      int32_t stop = s + 1, start = stop < max_len ? 0 : stop - max_len;
      parts[nparts][0] = start; parts[nparts][1] = stop; nparts++;
      if (start == 0) break;
    }
  }
  int rc = bt_enc_append(e, &all, parts[0][0], parts[0][1]);
  if (!rc && nparts > 1) {
    e->over = calloc((size_t)nparts - 1, sizeof *e->over);
    if (!e->over) rc = -1;
    for (int32_t i = 1; !rc && i < nparts; i++) {
      rc = bt_enc_append(&e->over[i - 1], &all, parts[i][0], parts[i][1]);
      e->nover = i;
    }
  }
  free(parts);
  all.over = NULL; all.nover = 0;
  bt_encoding_free(&all);
  return rc;
}

static int pad_one(bt_encoding *e, int32_t target, int32_t pad_id,
                   int32_t pad_type, int left) {
  for (int i = 0; i < e->nover; i++)
    if (pad_one(&e->over[i], target, pad_id, pad_type, left)) return -1;
  if (e->n >= target) return 0;
  int32_t k = target - e->n, n = e->n;
  if (bt_enc_reserve(e, target)) return -1;
  if (left) {
    memmove(e->ids + k, e->ids, (size_t)n * sizeof *e->ids);
    memmove(e->type_ids + k, e->type_ids, (size_t)n * sizeof *e->ids);
    memmove(e->offsets + 2 * k, e->offsets, (size_t)n * 2 * sizeof *e->ids);
    memmove(e->words + k, e->words, (size_t)n * sizeof *e->ids);
    memmove(e->special + k, e->special, (size_t)n);
    memmove(e->attn + k, e->attn, (size_t)n);
    memmove(e->seqs + k, e->seqs, (size_t)n);
    memmove(e->surface + 2 * k, e->surface, (size_t)n * 2 * sizeof *e->ids);
  }
  int32_t from = left ? 0 : n;
  for (int32_t i = from; i < from + k; i++) {
    e->ids[i] = pad_id; e->type_ids[i] = pad_type;
    e->offsets[2 * i] = e->offsets[2 * i + 1] = 0;
    e->words[i] = -1; e->special[i] = 1; e->attn[i] = 0; e->seqs[i] = -1;
    e->surface[2 * i] = e->surface[2 * i + 1] = -1;
  }
  e->n = target;
  return 0;
}

void bt_pad_batch(const bt_tokenizer *t, bt_encoding *e, int n,
                  const bt_options *o) {
  if (o->padding == BT_PAD_NONE || n == 0) return;
  int32_t len = 0;
  if (o->padding == BT_PAD_FIXED) len = o->pad_length;
  else for (int i = 0; i < n; i++) if (e[i].n > len) len = e[i].n;
  if (o->pad_multiple > 0 && len % o->pad_multiple)
    len += o->pad_multiple - len % o->pad_multiple;
  for (int i = 0; i < n; i++)
    pad_one(&e[i], len, t->pad_id, t->pad_type_id, o->pad_left);
}
