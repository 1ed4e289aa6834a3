/*
** Phrase tables for ERNIE 1.0's phrase-level masking: a set of token-id
** sequences, each the tokens of a run of whole words that
** lua/bert/data/chunker.lua found to be a phrase, looked up by hash while
** masking (bd_mask, mode BD_MASK_PHRASE).  The hash of a sequence is
** FNV-1a over its ids, so that it grows token by token: the masker extends
** a candidate one word at a time without rehashing from the start.
*/
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "data/ptdata.h"

struct bd_phrases {
  int64_t n;
  int64_t *off;        /* [n + 1]: token offset of each phrase */
  int32_t *tokens;
  int32_t max_len;     /* tokens in the longest phrase */
  int32_t max_id;
  int64_t cap;         /* hash slots, a power of two, at least 2n */
  int64_t *slot;       /* phrase index, or -1 for an empty slot */
  uint64_t *slot_hash;
  uint64_t checksum;   /* over the phrases in order */
};

#define FNV_OFFSET 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL

uint64_t bd_phrase_hash_start(void) { return FNV_OFFSET; }

uint64_t bd_phrase_hash_add(uint64_t h, const int32_t *ids, int n) {
  for (int i = 0; i < n; i++) {
    h ^= (uint32_t)ids[i];
    h *= FNV_PRIME;
  }
  return h;
}

/* The slot key: the running hash finished with the length, so that a
** prefix and its extension never share a key by construction. */
static uint64_t finish(uint64_t h, int len) { return bd_mix64(h ^ (uint64_t)len); }

int64_t bd_phrases_lookup(const bd_phrases *p, const int32_t *ids, int len, uint64_t running) {
  if (len < 1 || len > p->max_len) return -1;
  uint64_t key = finish(running, len);
  for (int64_t i = (int64_t)(key & (uint64_t)(p->cap - 1));; i = (i + 1) & (p->cap - 1)) {
    int64_t s = p->slot[i];
    if (s < 0) return -1;
    if (p->slot_hash[i] == key && p->off[s + 1] - p->off[s] == len &&
        memcmp(p->tokens + p->off[s], ids, (size_t)len * sizeof(int32_t)) == 0)
      return s;
  }
}

bd_phrases *bd_phrases_new(const int32_t *tokens, const int64_t *off, int64_t n) {
  if (n < 0) { bert_set_error("phrases: negative count"); return NULL; }
  bd_phrases *p = calloc(1, sizeof *p);
  if (!p) { bert_set_error("out of memory"); return NULL; }
  int64_t ntok = n > 0 ? off[n] : 0;
  p->n = n;
  p->off = malloc((size_t)(n + 1) * sizeof(int64_t));
  p->tokens = malloc((size_t)(ntok + 1) * sizeof(int32_t));
  p->cap = 16;
  while (p->cap < 2 * n + 16) p->cap *= 2;
  p->slot = malloc((size_t)p->cap * sizeof(int64_t));
  p->slot_hash = malloc((size_t)p->cap * sizeof(uint64_t));
  if (!p->off || !p->tokens || !p->slot || !p->slot_hash) {
    bd_phrases_free(p);
    bert_set_error("out of memory (%lld phrases)", (long long)n);
    return NULL;
  }
  for (int64_t i = 0; i < p->cap; i++) p->slot[i] = -1;
  p->off[0] = 0;
  p->max_id = -1;
  p->checksum = FNV_OFFSET;
  for (int64_t k = 0; k < n; k++) {
    int64_t len = off[k + 1] - off[k];
    if (off[k] != p->off[k] || len < 1 || len > BD_PHRASE_MAX_TOKENS) {
      bd_phrases_free(p);
      bert_set_error("phrases: phrase %lld has %lld tokens (1..%d allowed)", (long long)k + 1,
                     (long long)len, BD_PHRASE_MAX_TOKENS);
      return NULL;
    }
    const int32_t *ids = tokens + off[k];
    for (int64_t i = 0; i < len; i++) {
      if (ids[i] < 0) {
        bd_phrases_free(p);
        bert_set_error("phrases: phrase %lld holds the negative id %d", (long long)k + 1, (int)ids[i]);
        return NULL;
      }
      if (ids[i] > p->max_id) p->max_id = ids[i];
    }
    memcpy(p->tokens + off[k], ids, (size_t)len * sizeof(int32_t));
    p->off[k + 1] = off[k + 1];
    if (len > p->max_len) p->max_len = (int32_t)len;
    uint64_t h = bd_phrase_hash_add(FNV_OFFSET, ids, (int)len), key = finish(h, (int)len);
    int64_t i = (int64_t)(key & (uint64_t)(p->cap - 1));
    for (; p->slot[i] >= 0; i = (i + 1) & (p->cap - 1)) {
      int64_t s = p->slot[i];
      if (p->slot_hash[i] == key && p->off[s + 1] - p->off[s] == len &&
          memcmp(p->tokens + p->off[s], ids, (size_t)len * sizeof(int32_t)) == 0) {
        bd_phrases_free(p);
        bert_set_error("phrases: phrase %lld repeats phrase %lld", (long long)k + 1, (long long)s + 1);
        return NULL;
      }
    }
    p->slot[i] = k;
    p->slot_hash[i] = key;
    p->checksum = bd_mix64(p->checksum ^ key) * FNV_PRIME;
  }
  return p;
}

bd_phrases *bd_phrases_copy(const bd_phrases *p) { return bd_phrases_new(p->tokens, p->off, p->n); }

void bd_phrases_free(bd_phrases *p) {
  if (!p) return;
  free(p->off); free(p->tokens); free(p->slot); free(p->slot_hash);
  free(p);
}

int64_t bd_phrases_count(const bd_phrases *p) { return p->n; }
int32_t bd_phrases_max_id(const bd_phrases *p) { return p->max_id; }
uint64_t bd_phrases_checksum(const bd_phrases *p) { return p->checksum; }

const int32_t *bd_phrases_get(const bd_phrases *p, int64_t i, int *len) {
  *len = (int)(p->off[i + 1] - p->off[i]);
  return p->tokens + p->off[i];
}
