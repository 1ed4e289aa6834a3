/* Growing arrays and the open-addressing map that the tokenizer's files
** share; it depends on nothing else of the tokenizer. */
#ifndef BT_TOK_UTIL_H
#define BT_TOK_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Grows *p (elements of size sz) to at least n, doubling from 64; 0 or -1. */
int bt_grow(void **p, size_t *cap, size_t n, size_t sz);

#endif
