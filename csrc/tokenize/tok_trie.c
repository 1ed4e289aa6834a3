/*
** The byte trie of pieces and user-defined symbols: children found by
** hashing (node, byte) while it is built, then compiled into a double
** array for lookups.
*/
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"
#include "tokenize/tok_internal.h"

static uint64_t trie_key(int32_t node, unsigned char b) {
  return (uint64_t)(uint32_t)node << 8 | b;
}

int32_t bt_trie_step(const bt_trie *tr, int32_t node, unsigned char b) {
  if (tr->da_base) {
    int32_t t = tr->da_base[node] + b + 1;
    return t < tr->da_n && tr->da_check[t] == node ? t : -1;
  }
  if (node == 0) return tr->root[b] ? tr->root[b] : -1;
  return bt_map_get(&tr->kids, trie_key(node, b));
}

static int32_t trie_new_node(bt_trie *tr) {
  if (tr->nnodes == 0) tr->nnodes = 1;  /* node 0 is the root */
  if (tr->nnodes >= tr->vcap) {
    int32_t nc = tr->vcap ? tr->vcap * 2 : 256;
    int32_t *v = realloc(tr->value, (size_t)nc * sizeof *v);
    if (!v) return -1;
    tr->value = v; tr->vcap = nc;
  }
  tr->value[tr->nnodes] = -1;
  return tr->nnodes++;
}

int bt_trie_insert(bt_trie *tr, const char *s, size_t len, int32_t value) {
  if (tr->da_base) return -1;                      /* compiled: read-only */
  if (tr->vcap == 0) {
    if (trie_new_node(tr) < 0) return -1;          /* allocates the root */
    tr->nnodes = 1;
    tr->value[0] = -1;
  }
  int32_t node = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char b = (unsigned char)s[i];
    int32_t next = bt_trie_step(tr, node, b);
    if (next < 0) {
      if ((next = trie_new_node(tr)) < 0) return -1;
      if (node == 0) tr->root[b] = next;
      else {
        int added;
        if (!bt_map_put(&tr->kids, trie_key(node, b), next, 10, &added)) return -1;
      }
    }
    node = next;
  }
  if (len > 0) tr->value[node] = value;
  return 0;
}

int bt_trie_compile(bt_trie *tr) {
  int32_t n = tr->nnodes;
  if (n <= 1 || tr->da_base) return 0;
  /* children of each node, by label */
  int32_t *cnt = calloc((size_t)n + 1, sizeof *cnt);
  int32_t *first = malloc(((size_t)n + 1) * sizeof *first);
  int32_t *kid = malloc(((size_t)n + 1) * sizeof *kid);
  uint8_t *lab = malloc((size_t)n + 1);
  int32_t *par = malloc(((size_t)n + 1) * sizeof *par);
  uint8_t *plab = malloc((size_t)n + 1);
  int32_t *pos = malloc(((size_t)n + 1) * sizeof *pos);
  int32_t *queue = malloc(((size_t)n + 1) * sizeof *queue);
  int32_t cap = n * 2 + 512, *base = NULL, *check = NULL, *val = NULL;
  int rc = -1;
  if (!cnt || !first || !kid || !lab || !par || !plab || !pos || !queue) goto done;
  for (int32_t i = 0; i < n; i++) par[i] = -1;
  for (int b = 0; b < 256; b++) if (tr->root[b]) { par[tr->root[b]] = 0; plab[tr->root[b]] = (uint8_t)b; }
  for (size_t i = 0; tr->kids.keys && i <= tr->kids.mask; i++) {
    uint64_t k = tr->kids.keys[i];
    if (k == BT_MAP_NONE) continue;
    par[tr->kids.vals[i]] = (int32_t)(k >> 8); plab[tr->kids.vals[i]] = (uint8_t)(k & 255);
  }
  for (int32_t i = 1; i < n; i++) if (par[i] >= 0) cnt[par[i]]++;
  for (int32_t i = 0, acc = 0; i < n; i++) { first[i] = acc; acc += cnt[i]; cnt[i] = 0; }
  for (int32_t i = 1; i < n; i++) {
    if (par[i] < 0) continue;
    int32_t p = par[i], k = first[p] + cnt[p]++;
    /* insertion by label: children stay sorted */
    while (k > first[p] && lab[k - 1] > plab[i]) { kid[k] = kid[k - 1]; lab[k] = lab[k - 1]; k--; }
    kid[k] = i; lab[k] = plab[i];
  }
  base = calloc((size_t)cap, sizeof *base);
  check = malloc((size_t)cap * sizeof *check);
  val = malloc((size_t)cap * sizeof *val);
  if (!base || !check || !val) goto done;
  for (int32_t i = 0; i < cap; i++) { check[i] = -1; val[i] = -1; }
  check[0] = -2; val[0] = tr->value[0]; pos[0] = 0;
  int32_t qh = 0, qt = 0, next_free = 1, used = 1;
  queue[qt++] = 0;
  while (qh < qt) {
    int32_t node = queue[qh++], s = pos[node], nk = cnt[node];
    if (nk == 0) continue;
    const uint8_t *L = lab + first[node];
    int32_t b = next_free - (int32_t)L[0] - 1;
    if (b < 0) b = 0;
    for (;;) {
      if (b + 257 >= cap) {
        int32_t nc = cap * 2;
        int32_t *nb = realloc(base, (size_t)nc * sizeof *nb);
        if (nb) base = nb;
        int32_t *nch = realloc(check, (size_t)nc * sizeof *nch);
        if (nch) check = nch;
        int32_t *nv = realloc(val, (size_t)nc * sizeof *nv);
        if (nv) val = nv;
        if (!nb || !nch || !nv) goto done;
        for (int32_t i = cap; i < nc; i++) { base[i] = 0; check[i] = -1; val[i] = -1; }
        cap = nc;
      }
      int ok = 1;
      for (int32_t k = 0; k < nk && ok; k++) ok = check[b + L[k] + 1] == -1;
      if (ok) break;
      b++;
    }
    base[s] = b;
    for (int32_t k = 0; k < nk; k++) {
      int32_t t = b + L[k] + 1, c = kid[first[node] + k];
      check[t] = s; pos[c] = t; val[t] = tr->value[c];
      if (t + 1 > used) used = t + 1;
      queue[qt++] = c;
    }
    while (next_free < cap && check[next_free] != -1) next_free++;
  }
  tr->da_base = base; tr->da_check = check; tr->da_value = val; tr->da_n = used;
  base = check = val = NULL;
  /* lookups now use positions: value[] by position */
  free(tr->value); tr->value = tr->da_value; tr->da_value = NULL;
  tr->vcap = used;
  bt_map_free(&tr->kids);
  rc = 0;
done:
  free(cnt); free(first); free(kid); free(lab); free(par); free(plab); free(pos);
  free(queue); free(base); free(check); free(val);
  return rc;
}

void bt_trie_free(bt_trie *tr) {
  free(tr->da_base); free(tr->da_check); free(tr->da_value);
  bt_map_free(&tr->kids); free(tr->value);
  memset(tr, 0, sizeof *tr);
}
