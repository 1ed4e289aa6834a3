/*
** Overflow-checked size arithmetic.  Every shape product, stride,
** allocation size and file offset computed from outside input (shapes from
** Lua, headers of files) goes through these: a wrapped product would make a
** huge view look small (numel 0) and then index far outside its storage.
**
** Each returns 0 and stores the result, or -1 (and stores nothing useful)
** when the result does not fit.
*/
#ifndef BERT_CHECKED_H
#define BERT_CHECKED_H

#include <stddef.h>
#include <stdint.h>

/* The largest element count a tensor may describe: 2^40 (4 TiB of float32).
** Shapes are bounded by the product of their non-zero sizes, so a view with
** a size-0 dimension cannot carry strides that overflow either. */
#define BERT_MAX_NUMEL (INT64_C(1) << 40)

static inline int bert_mul_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int bert_add_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

static inline int bert_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

static inline int bert_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

static inline int bert_mul_size(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

/* The element count of a shape.  0 when every size is >= 0 and the product
** of the sizes (zeros counted as 1) is at most BERT_MAX_NUMEL; -1 otherwise.
** Callers report the error (they know the function and argument). */
static inline int bert_shape_numel(int ndim, const int64_t *shape, int64_t *numel) {
  int64_t n = 1, bound = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (shape[i] == 0) { n = 0; continue; }
    if (bert_mul_i64(bound, shape[i], &bound) != 0 || bound > BERT_MAX_NUMEL) return -1;
    n *= shape[i];   /* n <= bound: cannot overflow */
  }
  *numel = n;
  return 0;
}

#endif
