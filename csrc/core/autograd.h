/*
** Reverse-mode automatic differentiation.
**
** The graph is owned by the tensors: an op whose inputs require grad
** attaches a node (grad_fn) to its output; the node holds references to
** its inputs and to tensors saved for backward, never to its own output
** (which backward receives as an argument), so there are no cycles and
** an unused graph is freed with its tensors.  backward() sorts the graph
** reachable from the root, runs each node once in reverse topological
** order, accumulates into the .grad of leaves, then frees the graph.
*/
#ifndef BERT_AUTOGRAD_H
#define BERT_AUTOGRAD_H

#include "core/tensor.h"

#define BERT_NODE_MAX_INPUTS 8
#define BERT_NODE_MAX_SAVED 8

typedef struct bert_node bert_node;

/* Computes the gradients of node->inputs from grad_out (the gradient of
** out, out's shape; contiguous unless the node type takes strided_grad) and hands each to bert_accumulate_grad.
** Returns 0, or -1 with bert_set_error. */
typedef int (*bert_backward_fn)(bert_node *node, bert_tensor *out, bert_tensor *grad_out);

/* One per differentiable op, defined in the op's own file next to its
** forward: its name, its backward, and the size of its saved parameters
** (a small struct of the op's own, e.g. { int dim; int keepdim; }). */
typedef struct bert_node_type {
  const char *name;
  bert_backward_fn backward;
  size_t state_size;
  int strided_grad;   /* backward takes its output's gradient with any strides (views,
                      ** attention); otherwise it is made contiguous first */
} bert_node_type;

struct bert_node {
  const bert_node_type *type;
  const char *name;                              /* type->name, for errors */
  int ninputs;
  bert_tensor *inputs[BERT_NODE_MAX_INPUTS];     /* retained; NULL allowed */
  int nsaved;
  bert_tensor *saved[BERT_NODE_MAX_SAVED];       /* retained */
  uint64_t saved_version[BERT_NODE_MAX_SAVED];   /* storage versions at save time */
  void *state;                                   /* type->state_size zeroed bytes (plain data) */
  int refcount;
  void (*on_free)(bert_node *node);              /* optional, set by the creator: called once before
                                                    the node is freed (e.g. to drop a host reference) */
  int hidden_grads;                              /* its backward also writes gradients of tensors that
                                                    are not its inputs (a recomputation runs a backward
                                                    of its own): no backward hook sees such a pass */
};

/* ---- grad mode ---- */
int bert_grad_enabled(void);
void bert_set_grad_enabled(int on);
/* Grad mode is on and some input requires grad: the op must record. */
int bert_needs_grad(int n, bert_tensor *const *inputs);

/* ---- building the graph ---- */
/* A node of the given type over inputs (retained; NULL entries allowed for
** non-tensor args), with zeroed state. */
bert_node *bert_node_new(const bert_node_type *type, int n, bert_tensor *const *inputs);
/* Records a node on out when grad mode is on and an input requires grad:
** returns out; NULL (out released) when the node cannot be allocated.
** *node receives it (NULL when nothing was recorded). */
bert_tensor *bert_record(bert_tensor *out, bert_node **node, const bert_node_type *type, int n,
                         bert_tensor *const *inputs);
/* Does input k of node want a gradient? */
static inline int bert_node_wants(const bert_node *node, int k) {
  return node->inputs[k] != NULL && node->inputs[k]->requires_grad;
}
/* Saves a tensor for backward (retained), remembering its storage version
** so backward can detect in-place modification. */
void bert_node_save(bert_node *node, bert_tensor *t);
/* out->grad_fn = node (takes the caller's reference), out requires grad. */
void bert_attach(bert_tensor *out, bert_node *node);
void bert_node_release(bert_node *node);
/* The saved tensor k, or NULL with an error if it was modified in place. */
bert_tensor *bert_node_saved(bert_node *node, int k);

/* ---- gradients ---- */
/* Adds g into t->grad, first summing g over broadcast dims down to t's
** shape; allocates t->grad (zeros) when absent.  No-op when t is NULL or
** does not require grad. */
int bert_accumulate_grad(bert_tensor *t, const bert_tensor *g);
/* The same, taking ownership of g (released, or kept as the gradient
** itself when it is the first contribution): saves a copy per node. */
int bert_accumulate_grad_steal(bert_tensor *t, bert_tensor *g);
/* A backward's n gradients handed over to their inputs (in[k] <- grad[k],
** NULL entries skipped): each stolen or released exactly once, even after
** a failure, and every grad[k] left NULL; 0, or the first failure. */
int bert_accumulate_grads_steal(bert_tensor *const *in, bert_tensor **grad, int n);
/* Direct accumulation for kernels that can write (or add) their result in
** place: returns t's gradient buffer, creating it when absent.  *accumulate
** is set to 1 when the buffer already holds a gradient (add into it, e.g.
** GEMM beta = 1) and 0 when it is fresh and uninitialised (overwrite it).
** NULL when t needs no gradient, or when its buffer cannot be written
** directly (the caller then falls back to bert_accumulate_grad). */
float *bert_grad_buffer(bert_tensor *t, int *accumulate);
/* t's gradient when a kernel of any device can add into it in place: a
** contiguous float32 tensor of t's shape on t's device (borrowed), else NULL. */
bert_tensor *bert_grad_target(bert_tensor *t);
/* Sums g down to shape (reverse broadcasting); returns a new reference. */
bert_tensor *bert_sum_to_shape(const bert_tensor *g, int ndim, const int64_t *shape);
/* Runs backward from root; grad may be NULL only for a 1-element root. */
int bert_backward(bert_tensor *root, const bert_tensor *grad);

/* Profiling (the environment variable BERT_PROFILE set): bert_backward
** sums the wall time of each kind of node over its outermost passes.
** bert_backward_profile copies up to max entries (returns how many) and,
** when reset, starts the sums again. */
typedef struct bert_prof_entry { const char *name; double seconds; int calls; } bert_prof_entry;
int bert_profiling(void);
void bert_set_profiling(int on);   /* a tool that profiles without the environment variable */
int bert_backward_profile(bert_prof_entry *out, int max, int reset);
/* Called during backward after the node of order[k] ran (k goes down from
** n - 1 to 0; nodes that received no gradient are skipped), the graph
** still whole; non-zero stops the pass.  Data parallelism (csrc/dist/)
** starts reducing gradients that are final.  NULL removes it. */
typedef int (*bert_backward_hook)(void *ud, bert_tensor *const *order, size_t n, size_t k);
void bert_set_backward_hook(bert_backward_hook fn, void *ud);

/* ---- anomaly detection (NaN/Inf) ---- */
void bert_set_detect_anomaly(int on);
int bert_detect_anomaly(void);
/* The first op of the last backward (this thread) whose gradient went
** non-finite, as a message; NULL when none (or detection is off). */
const char *bert_anomaly_report(void);
/* Flat index of the first NaN/Inf of a host float tensor, or -1. */
int64_t bert_first_nonfinite(const bert_tensor *t);
/* Writes into buf the first op (forward order) of root's graph whose output
** is non-finite while its inputs are finite; "" when none.  -1 on error. */
int bert_nonfinite_origin(bert_tensor *root, char *buf, size_t size);

/* Bumps the storage version: every in-place write calls this. */
static inline void bert_bump_version(bert_tensor *t) { t->storage->version++; }

#endif
