/* Growing arrays and the open-addressing map (tok_util.h). */
#include <stdlib.h>

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
