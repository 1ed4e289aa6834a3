/* Growing arrays and the open-addressing map that the tokenizer's files
** share; it depends on nothing else of the tokenizer. */
#ifndef BT_TOK_UTIL_H
#define BT_TOK_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Grows *p (elements of size sz) to at least n, doubling from 64; 0 or -1. */
int bt_grow(void **p, size_t *cap, size_t n, size_t sz);

/* A map from 64-bit keys to int32 values (usually an index into the user's
** own arrays): open addressing over a power-of-two table, probed linearly
** from the key's mixed bits, doubled when half full.  Lookups allocate
** nothing.  A zeroed bt_map is empty. */
#define BT_MAP_NONE UINT64_MAX          /* an empty slot's key: never a key */
typedef struct bt_map {
  uint64_t *keys; int32_t *vals;
  size_t mask, n;
} bt_map;

/* MurmurHash3's finalizer: every key bit reaches the slot bits. */
static inline uint64_t bt_map_mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return x;
}

/* The slot holding key, or the empty slot where it would go. */
static inline size_t bt_map_slot(const bt_map *m, uint64_t key) {
  size_t j = (size_t)bt_map_mix(key) & m->mask;
  while (m->keys[j] != BT_MAP_NONE && m->keys[j] != key) j = (j + 1) & m->mask;
  return j;
}

/* The value of key, or -1. */
static inline int32_t bt_map_get(const bt_map *m, uint64_t key) {
  if (!m->keys) return -1;
  size_t j = bt_map_slot(m, key);
  return m->keys[j] == key ? m->vals[j] : -1;
}

/* Doubles the table (the first: 2^bits slots); 0 or -1. */
int bt_map_grow(bt_map *m, int bits);

/* The value of key, set to v first when key is new (then *added = 1).
** NULL on no memory.  The pointer lives until the next insert. */
static inline int32_t *bt_map_put(bt_map *m, uint64_t key, int32_t v, int bits, int *added) {
  if ((!m->keys || (m->n + 1) * 2 > m->mask + 1) && bt_map_grow(m, bits)) return NULL;
  size_t j = bt_map_slot(m, key);
  *added = m->keys[j] == BT_MAP_NONE;
  if (*added) { m->keys[j] = key; m->vals[j] = v; m->n++; }
  return &m->vals[j];
}

/* Empties the map, keeping its table. */
void bt_map_clear(bt_map *m);
void bt_map_free(bt_map *m);

#endif
