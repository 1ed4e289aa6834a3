/*
** Vocabulary: an open-addressing hash from token bytes to id, plus the
** reverse table.  Strings live in one arena.
*/
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"

/* A small multiply-mix hash over 8-byte words: fast for short tokens. */
uint64_t bt_hash(const void *p, size_t len) {
  const unsigned char *s = (const unsigned char *)p;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (len * 0xff51afd7ed558ccdull);
  while (len >= 8) {
    uint64_t w; memcpy(&w, s, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull; h ^= h >> 31;
    s += 8; len -= 8;
  }
  uint64_t w = 0;
  memcpy(&w, s, len);
  h = (h ^ w ^ (uint64_t)len << 56) * 0x94d049bb133111ebull;
  h ^= h >> 29; h *= 0xbf58476d1ce4e5b9ull; h ^= h >> 32;
  return h;
}

void bt_vocab_init(bt_vocab *v) {
  memset(v, 0, sizeof *v);
}

void bt_vocab_free(bt_vocab *v) {
  free(v->arena); free(v->soff); free(v->slen); free(v->sid);
  free(v->table); free(v->by_id);
  memset(v, 0, sizeof *v);
}

static int32_t find_slot(const bt_vocab *v, const char *s, size_t len,
                         size_t *slot) {
  size_t i = (size_t)bt_hash(s, len) & v->mask;
  for (;;) {
    int32_t e = v->table[i];
    if (e < 0) { *slot = i; return -1; }
    if (v->slen[e] == len && memcmp(v->arena + v->soff[e], s, len) == 0) {
      *slot = i; return e;
    }
    i = (i + 1) & v->mask;
  }
}

static int rehash(bt_vocab *v, size_t newsize) {
  int32_t *t = malloc(newsize * sizeof *t);
  if (!t) return -1;
  memset(t, 0xff, newsize * sizeof *t);
  free(v->table);
  v->table = t; v->mask = newsize - 1;
  for (size_t e = 0; e < v->n; e++) {
    size_t slot;
    find_slot(v, v->arena + v->soff[e], v->slen[e], &slot);
    v->table[slot] = (int32_t)e;
  }
  return 0;
}

static int set_by_id(bt_vocab *v, int32_t id, int32_t e) {
  if ((size_t)id >= v->nid) {
    size_t nn = v->nid ? v->nid : 64;
    while (nn <= (size_t)id) nn *= 2;
    int32_t *b = realloc(v->by_id, nn * sizeof *b);
    if (!b) return -1;
    for (size_t i = v->nid; i < nn; i++) b[i] = -1;
    v->by_id = b; v->nid = nn;
  }
  v->by_id[id] = e;
  return 0;
}

int bt_vocab_set(bt_vocab *v, const char *s, size_t len, int32_t id) {
  if (id < 0) return -1;
  if ((v->n + 1) * 2 > v->mask + 1 || !v->table)
    if (rehash(v, v->table ? (v->mask + 1) * 2 : 1024)) return -1;
  size_t slot;
  int32_t e = find_slot(v, s, len, &slot);
  if (e >= 0) {                     /* later wins: the old id loses its token */
    int32_t old = v->sid[e];
    if (old >= 0 && (size_t)old < v->nid && v->by_id[old] == e)
      v->by_id[old] = -1;
    v->sid[e] = id;
    return set_by_id(v, id, e);
  }
  if (v->n == v->cap) {
    size_t nc = v->cap ? v->cap * 2 : 1024;
    uint32_t *a = realloc(v->soff, nc * sizeof *a); if (!a) return -1;
    v->soff = a;
    a = realloc(v->slen, nc * sizeof *a); if (!a) return -1;
    v->slen = a;
    int32_t *d = realloc(v->sid, nc * sizeof *d); if (!d) return -1;
    v->sid = d;
    v->cap = nc;
  }
  if (v->arena_len + len + 1 > v->arena_cap) {
    size_t nc = v->arena_cap ? v->arena_cap * 2 : 65536;
    while (nc < v->arena_len + len + 1) nc *= 2;
    char *a = realloc(v->arena, nc); if (!a) return -1;
    v->arena = a; v->arena_cap = nc;
  }
  memcpy(v->arena + v->arena_len, s, len);
  v->arena[v->arena_len + len] = '\0';
  e = (int32_t)v->n++;
  v->soff[e] = (uint32_t)v->arena_len; v->slen[e] = (uint32_t)len;
  v->sid[e] = id;
  v->arena_len += len + 1;
  v->table[slot] = e;
  if ((int)len > v->maxlen) v->maxlen = (int)len;
  /* a previous token with this id loses it */
  if ((size_t)id < v->nid && v->by_id[id] >= 0 && v->by_id[id] != e)
    v->sid[v->by_id[id]] = -1;
  return set_by_id(v, id, e);
}

int32_t bt_vocab_get(const bt_vocab *v, const char *s, size_t len) {
  if (!v->table) return -1;
  size_t slot;
  int32_t e = find_slot(v, s, len, &slot);
  return e < 0 ? -1 : v->sid[e];
}

const char *bt_vocab_token(const bt_vocab *v, int32_t id, size_t *len) {
  if (id < 0 || (size_t)id >= v->nid || v->by_id[id] < 0) return NULL;
  int32_t e = v->by_id[id];
  if (len) *len = v->slen[e];
  return v->arena + v->soff[e];
}
