/* Growing arrays and the open-addressing map (tok_util.h). */
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok_util.h"

int bt_grow(void **p, size_t *cap, size_t n, size_t sz) {
  if (n <= *cap) return 0;
  size_t nc = *cap ? *cap : 64;
  while (nc < n) nc *= 2;
  void *q = realloc(*p, nc * sz);
  if (!q) return -1;
  *p = q; *cap = nc;
  return 0;
}

int bt_map_grow(bt_map *m, int bits) {
  size_t ns = m->keys ? (m->mask + 1) * 2 : (size_t)1 << bits;
  bt_map g = {malloc(ns * sizeof *g.keys), malloc(ns * sizeof *g.vals), ns - 1, m->n};
  if (!g.keys || !g.vals) { free(g.keys); free(g.vals); return -1; }
  memset(g.keys, 0xff, ns * sizeof *g.keys);           /* BT_MAP_NONE */
  for (size_t i = 0; m->keys && i <= m->mask; i++) {
    if (m->keys[i] == BT_MAP_NONE) continue;
    size_t j = bt_map_slot(&g, m->keys[i]);
    g.keys[j] = m->keys[i]; g.vals[j] = m->vals[i];
  }
  free(m->keys); free(m->vals);
  *m = g;
  return 0;
}

void bt_map_clear(bt_map *m) {
  if (m->keys) memset(m->keys, 0xff, (m->mask + 1) * sizeof *m->keys);
  m->n = 0;
}

void bt_map_free(bt_map *m) {
  free(m->keys); free(m->vals);
  memset(m, 0, sizeof *m);
}
