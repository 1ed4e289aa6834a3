/*
** Differentiable forms of the tensor ops: each computes the op (ops.h,
** on the tensors' device) and, when an input requires grad, records a node
** whose backward is written out by hand in ag_ops.c.  Same arguments and results as the
** plain ops; dims are 0-based.
*/
#ifndef BERT_AG_OPS_H
#define BERT_AG_OPS_H

#include "core/ops.h"

bert_tensor *bert_ag_binary(bert_binop op, bert_tensor *a, bert_tensor *b, double alpha);
bert_tensor *bert_ag_unary(bert_unop op, bert_tensor *a);
bert_tensor *bert_ag_masked_fill(bert_tensor *a, bert_tensor *mask, double value);
bert_tensor *bert_ag_where(bert_tensor *cond, bert_tensor *a, bert_tensor *b);
bert_tensor *bert_ag_reduce(bert_redop op, bert_tensor *t, int dim, int keepdim,
                            int correction, bert_tensor **indices);
bert_tensor *bert_ag_softmax(bert_tensor *t, int dim, int log_space);
bert_tensor *bert_ag_matmul(bert_tensor *a, bert_tensor *b);

bert_tensor *bert_ag_view(bert_tensor *t, int ndim, const int64_t *shape);
bert_tensor *bert_ag_reshape(bert_tensor *t, int ndim, const int64_t *shape);
bert_tensor *bert_ag_transpose(bert_tensor *t, int d0, int d1);
bert_tensor *bert_ag_permute(bert_tensor *t, const int *perm);
bert_tensor *bert_ag_narrow(bert_tensor *t, int dim, int64_t start, int64_t len);
bert_tensor *bert_ag_select(bert_tensor *t, int dim, int64_t index);
bert_tensor *bert_ag_squeeze(bert_tensor *t, int dim);
bert_tensor *bert_ag_unsqueeze(bert_tensor *t, int dim);
bert_tensor *bert_ag_expand(bert_tensor *t, int ndim, const int64_t *shape);
bert_tensor *bert_ag_contiguous(bert_tensor *t);
bert_tensor *bert_ag_clone(bert_tensor *t);

bert_tensor *bert_ag_index_select(bert_tensor *t, int dim, bert_tensor *index);
bert_tensor *bert_ag_gather(bert_tensor *t, int dim, bert_tensor *index);
bert_tensor *bert_ag_cat(bert_tensor *const *ts, int n, int dim);
bert_tensor *bert_ag_stack(bert_tensor *const *ts, int n, int dim);

#endif
