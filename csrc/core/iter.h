/*
** A strided, broadcasting loop over up to four operands (operand 0 is the
** output).  Shapes are aligned to the output, dims are coalesced, and the
** work is split into rows of the innermost dim, in parallel above
** BERT_PARALLEL_MIN elements.  Each row is handed to a kernel with the
** operands' base pointers and element strides.
*/
#ifndef BERT_ITER_H
#define BERT_ITER_H

#include "core/tensor.h"

#define BERT_ITER_MAX_OPS 4

typedef void (*bert_row_kernel)(void *ctx, int64_t n, char **ptr, const int64_t *stride);

typedef struct {
  int nops;
  int ndim;
  int64_t shape[BERT_MAX_DIMS];
  int64_t stride[BERT_ITER_MAX_OPS][BERT_MAX_DIMS];   /* in bytes */
  char *base[BERT_ITER_MAX_OPS];
  size_t esize[BERT_ITER_MAX_OPS];
} bert_iter;

/* ops[0] is the output, whose shape all others broadcast to. */
void bert_iter_init(bert_iter *it, int nops, const bert_tensor *const *ops);
void bert_iter_run(const bert_iter *it, bert_row_kernel kernel, void *ctx);

#endif
