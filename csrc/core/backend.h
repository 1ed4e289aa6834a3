/*
** The backend interface: what a device gives the core.  Each device fills
** one table of function pointers (memory, host copies, and one entry per
** op or op family) and registers it; the core's op front-ends validate
** their arguments once, pick the backend of the tensors, ask it whether it
** supports the op (bert_backend_check: a clear error naming the op and the
** device, before any work), and call the entry.  The core knows no device:
** a tensor's storage points at its backend (NULL: host memory, the
** registered host backend, the CPU).
**
** Entries receive validated arguments (shapes, dtypes, ranges checked by
** the front-end).  A NULL entry means "not supported on this device".
** Backward entries compute the gradients of an op's inputs and hand them to
** bert_accumulate_grad*, or write into gradient buffers directly.
*/
#ifndef BERT_BACKEND_H
#define BERT_BACKEND_H

#include "core/tensor.h"
#include "core/types.h"

/* Every entry of the table below that a device may lack: X(ID, entry),
** entry the field of bert_backend.  BERT_DISPATCH checks a front-end's
** BERT_OP_<ID> against it (a NULL entry: "not supported on device"). */
#define BERT_OPS(X) \
  X(BINARY,                 binary) \
  X(UNARY,                  unary) \
  X(UNARY_BACKWARD,         unary_backward) \
  X(MASKED_FILL,            masked_fill) \
  X(WHERE,                  where) \
  X(FILL,                   fill_) \
  X(REDUCE,                 reduce) \
  X(SOFTMAX,                softmax) \
  X(MATMUL,                 matmul) \
  X(INDEX_SELECT,           index_select) \
  X(INDEX_ADD,              index_add_) \
  X(GATHER,                 gather) \
  X(SCATTER_ADD,            scatter_add_) \
  X(CAT,                    cat) \
  X(NONZERO,                nonzero) \
  X(SORT_INDICES,           sort_indices) \
  X(FILL_RANDOM,            fill_random) \
  X(LINEAR,                 linear) \
  X(LINEAR_BACKWARD,        linear_backward) \
  X(LAYER_NORM,             layer_norm) \
  X(LAYER_NORM_BACKWARD,    layer_norm_backward) \
  X(RMS_NORM,               rms_norm) \
  X(RMS_NORM_BACKWARD,      rms_norm_backward) \
  X(LSTM,                   lstm) \
  X(LSTM_BACKWARD,          lstm_backward) \
  X(BIAS_GELU,              bias_gelu) \
  X(BIAS_GELU_BACKWARD,     bias_gelu_backward) \
  X(DROPOUT,                dropout) \
  X(DROPOUT_ROWS,           dropout_rows) \
  X(EMBEDDING,              embedding) \
  X(EMBEDDING_BACKWARD,     embedding_backward) \
  X(CROSS_ENTROPY,          cross_entropy) \
  X(CROSS_ENTROPY_BACKWARD, cross_entropy_backward) \
  X(ATTENTION,              attention) \
  X(ATTENTION_BACKWARD,     attention_backward) \
  X(ATTENTION_BACKWARD_INTO, attention_backward_into) \
  X(ATTENTION_REL,          attention_rel) \
  X(ATTENTION_REL_BACKWARD, attention_rel_backward) \
  X(ADAMW,                  adamw_step) \
  X(LAMB,                   lamb_step) \
  X(SGD,                    sgd_step) \
  X(SUMSQ,                  sumsq) \
  X(SCALE,                  scale_)

typedef enum {
#define X(ID, entry) BERT_OP_##ID,
  BERT_OPS(X)
#undef X
  BERT_OP_COUNT
} bert_op;

/* The attention entries' types, long enough to be written once: backends
** declare their kernels with them (bert_attention_fn cpu_attention;). */
typedef bert_tensor *bert_attention_fn(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                                       const bert_attention_opts *o, bert_stream s, bert_tensor **lse);
typedef int bert_attention_backward_fn(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                                       const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                                       const bert_tensor *lse, const bert_tensor *g,
                                       bert_tensor **dq, bert_tensor **dk, bert_tensor **dv);
typedef int bert_attention_backward_into_fn(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                                            const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                                            const bert_tensor *lse, const bert_tensor *g,
                                            bert_tensor *dq, bert_tensor *dk, bert_tensor *dv);
typedef bert_tensor *bert_attention_rel_fn(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                                           const bert_tensor *kr, const bert_tensor *qr, const bert_tensor *rows,
                                           const bert_attention_opts *o, bert_stream s, bert_tensor **lse);
typedef int bert_attention_rel_backward_fn(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v,
                                           const bert_tensor *kr, const bert_tensor *qr, const bert_tensor *rows,
                                           const bert_attention_opts *o, bert_stream s, const bert_tensor *out,
                                           const bert_tensor *lse, const bert_tensor *g, bert_tensor **dq,
                                           bert_tensor **dk, bert_tensor **dv, bert_tensor **dkr,
                                           bert_tensor **dqr);

typedef struct bert_backend bert_backend;
struct bert_backend {
  const char *name;              /* "cpu", "vulkan": what t:device() says */
  int is_host;                   /* its tensors live in host memory */
  /* Finer than a missing entry: 0 when the device cannot run op on these
  ** arguments (a dtype, a rank); may set *why (a static string).  NULL:
  ** every non-NULL entry takes every validated argument. */
  int (*supports_op)(bert_op op, int n, const bert_tensor *const *args, const char **why);

  /* ---- memory ---- */
  bert_tensor *(*empty)(bert_dtype dt, int ndim, const int64_t *shape);
  void (*storage_free)(bert_storage *s);
  bert_tensor *(*from_host)(const bert_tensor *host);   /* a contiguous copy on the device */
  bert_tensor *(*to_host)(const bert_tensor *t);        /* a contiguous host copy */
  /* dst = src (dst's shape, src broadcast, dtype converted); one of them
  ** on this device, the other on it or on the host. */
  int (*copy_)(bert_tensor *dst, const bert_tensor *src);
  double (*get_flat)(const bert_tensor *t, int64_t i);
  int (*sync)(void);

  /* ---- elementwise (out prepared by the front-end: shape, dtype) ---- */
  int (*binary)(bert_binop op, const bert_tensor *a, const bert_tensor *b, double alpha, bert_tensor *out);
  int (*unary)(bert_unop op, const bert_tensor *a, bert_tensor *out);
  /* dx = dy * f'(x) (y = f(x) given too); float32, x's shape */
  bert_tensor *(*unary_backward)(bert_unop op, const bert_tensor *x, const bert_tensor *y, const bert_tensor *dy);
  int (*masked_fill)(const bert_tensor *a, const bert_tensor *mask, double value, bert_tensor *out);
  int (*where)(const bert_tensor *cond, const bert_tensor *a, const bert_tensor *b, bert_tensor *out);
  int (*fill_)(bert_tensor *t, double value);

  /* ---- reductions, matmul ---- */
  bert_tensor *(*reduce)(bert_redop op, const bert_tensor *t, int dim, int keepdim, int correction,
                         bert_tensor **indices);
  bert_tensor *(*softmax)(const bert_tensor *t, int dim, int log_space);
  bert_tensor *(*matmul)(const bert_tensor *a, const bert_tensor *b);

  /* ---- indexing ---- */
  bert_tensor *(*index_select)(const bert_tensor *t, int dim, const bert_tensor *index);
  int (*index_add_)(bert_tensor *z, int dim, const bert_tensor *index, const bert_tensor *src);
  bert_tensor *(*gather)(const bert_tensor *t, int dim, const bert_tensor *index);
  int (*scatter_add_)(bert_tensor *dst, int dim, const bert_tensor *index, const bert_tensor *src);
  bert_tensor *(*cat)(bert_tensor *const *ts, int n, int dim);
  bert_tensor *(*nonzero)(const bert_tensor *t);
  /* dim valid, 0 <= k <= shape[dim] <= INT32_MAX: int32 positions [.., k, ..] */
  bert_tensor *(*sort_indices)(const bert_tensor *t, int dim, int64_t k, int descending);
  int (*fill_random)(bert_tensor *t, bert_rand_kind kind, uint64_t seed, uint64_t offset, double a, double b);

  /* ---- fused nn ops (core/nn.h); inputs contiguous float32 unless noted ---- */
  bert_tensor *(*linear)(const bert_tensor *x, const bert_tensor *w, const bert_tensor *b);
  /* in = {x, w, b} as the caller passed them (gradient targets) */
  int (*linear_backward)(bert_tensor *const in[3], const bert_tensor *x, const bert_tensor *w,
                         const bert_tensor *g);
  /* *stats: the backend's per-row statistics, handed back to backward */
  bert_tensor *(*layer_norm)(const bert_tensor *x, const bert_tensor *gamma, const bert_tensor *beta,
                             double eps, const bert_tensor *residual, bert_tensor **stats);
  int (*layer_norm_backward)(bert_tensor *const in[4], const bert_tensor *x, const bert_tensor *residual,
                             const bert_tensor *gamma, const bert_tensor *stats, const bert_tensor *g);
  /* weight [H]; *rstd: the backend's per-row 1 / rms, handed back to backward;
  ** in = {x, weight} as the caller passed them (gradient targets) */
  bert_tensor *(*rms_norm)(const bert_tensor *x, const bert_tensor *weight, double eps, bert_tensor **rstd);
  int (*rms_norm_backward)(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *weight,
                           const bert_tensor *rstd, const bert_tensor *g);
  /* One LSTM layer, one direction (bert_lstm): t = {x, h0, c0, w_ih, w_hh,
  ** b, w_hr, lengths}, h0 / c0 / b / w_hr / lengths NULL when absent
  ** (lengths: host int32 [B], checked); o checked (proj_clip only with
  ** w_hr).  Returns the packed [B, T*O + O + H]; *ws: the backend's saved
  ** state, handed back to backward, whose t has b NULL; in = {x, h0, c0,
  ** w_ih, w_hh, b, w_hr} as the caller passed them (gradient targets) */
  bert_tensor *(*lstm)(const bert_tensor *const t[8], const bert_lstm_opts *o, bert_tensor **ws);
  int (*lstm_backward)(bert_tensor *const in[7], const bert_tensor *const t[8], const bert_lstm_opts *o,
                       const bert_tensor *ws, const bert_tensor *out, const bert_tensor *g);
  bert_tensor *(*bias_gelu)(const bert_tensor *x, const bert_tensor *b, int tanh_mode);
  int (*bias_gelu_backward)(bert_tensor *const in[2], const bert_tensor *x, const bert_tensor *b,
                            int tanh_mode, const bert_tensor *g);
  /* y = x * keep(stream, i) / (1 - p): forward and backward alike */
  bert_tensor *(*dropout)(const bert_tensor *x, double p, bert_stream s);
  /* x [N, W] contiguous; rows contiguous int32 [N] (checked): row n takes
  ** the mask of row rows[n] of a [*, W] dropout with stream s */
  bert_tensor *(*dropout_rows)(const bert_tensor *x, double p, bert_stream s, const bert_tensor *rows);
  bert_tensor *(*embedding)(const bert_tensor *ids, const bert_tensor *w);
  int (*embedding_backward)(bert_tensor *w_in, const bert_tensor *ids, const bert_tensor *g);
  /* *lse: per-row log-sum-exp for backward; count: rows not ignored */
  bert_tensor *(*cross_entropy)(const bert_tensor *logits, const bert_tensor *labels, int64_t ignore_index,
                                bert_reduction red, int64_t count, bert_tensor **lse);
  bert_tensor *(*cross_entropy_backward)(const bert_tensor *logits, const bert_tensor *labels,
                                         const bert_tensor *lse, int64_t ignore_index, bert_reduction red,
                                         int64_t count, const bert_tensor *g);
  /* attention (bert_attention): o->mask contiguous or NULL; o->causal; packed
  ** sequences when o->cu_seqlens is set (contiguous int32 [B + 1], checked;
  ** q, k, v [total, A, d]; o->max_seqlen the longest).  *lse: the per-row
  ** log-sum-exps in the backend's own layout, handed back to backward.  The
  ** result may be a strided view (the CPU's is); backward's g arrives with
  ** any strides, and the backend lays it out as it needs */
  bert_attention_fn *attention;
  bert_attention_backward_fn *attention_backward;
  /* attention_backward writing into views given: dq, dk, dv slices of one
  ** gradient of a fused [B, T, 3H] projection (bert_attention_qkv), time
  ** rows 3H apart.  NULL where a backend has none: bert_attention_qkv then
  ** runs as three autograd views and bert_attention. */
  bert_attention_backward_into_fn *attention_backward_into;
  /* DeBERTa's disentangled attention (bert_attention_rel): kr, qr [A, R, d]
  ** or NULL, rows contiguous int32 [Tq, Tk] in [0, R), o->mask a contiguous
  ** [B, Tk] keep mask or NULL; gradients of q, k, v and the two tables */
  bert_attention_rel_fn *attention_rel;
  bert_attention_rel_backward_fn *attention_rel_backward;

  /* ---- optimizers (core/optim.h; arguments checked) ---- */
  int (*adamw_step)(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                    const bert_adam_cfg *cfg);
  int (*lamb_step)(bert_tensor *p, const bert_tensor *g, bert_tensor *m, bert_tensor *v,
                   const bert_adam_cfg *cfg, int adapt, bert_tensor **trust_out);
  int (*sgd_step)(bert_tensor *p, const bert_tensor *g, bert_tensor *buf, const bert_sgd_cfg *cfg);
  int (*sumsq)(const bert_tensor *t, double *out);
  int (*scale_)(bert_tensor *t, double s);
};

/* ---- registry ---- */
/* Adds a backend (idempotent); the first with is_host serves host memory. */
int bert_backend_register(const bert_backend *be);
const bert_backend *bert_backend_find(const char *name);   /* NULL if none */
const bert_backend *bert_backend_host(void);
/* The backend t lives on. */
static inline const bert_backend *bert_backend_of(const bert_tensor *t) {
  return t->storage && t->storage->backend ? t->storage->backend : bert_backend_host();
}
static inline int bert_is_host(const bert_tensor *t) {
  return t == NULL || t->storage == NULL || t->storage->backend == NULL;
}

/* The cat entry for any backend with empty and copy_ (core/ops.c). */
bert_tensor *bert_cat_by_copies(bert_tensor *const *ts, int n, int dim);

/* The order of the LSTM entries' state rows, longest sequence first so
** that a step's GEMMs take the running rows only (core/nn.c): order[i] =
** the sequence of row i, equal lengths in batch order (a counting sort;
** len [B] in 0 .. T, NULL: all T).  -1 when out of memory. */
int bert_lstm_row_order(const int32_t *len, int64_t B, int64_t T, int32_t *order);

/* The backend an op on these tensors runs on (NULL entries skipped): the
** device one if any is on a device, else the host's.  Tensors on two
** different devices: NULL with an error naming op. */
const bert_backend *bert_backend_for(const char *op, int n, const bert_tensor *const *ts);
/* 0 when be has the entry of op (BERT_OPS) and runs it on these arguments,
** else -1 with "<name>: not supported on device <be> (...)". */
int bert_backend_check(const bert_backend *be, bert_op op, const char *name, int n,
                       const bert_tensor *const *args);

/* be for op BERT_OP_<OP> over args, checked: false with the error set.
** The common prologue of every front-end; its backward's, with name
** "<name> backward", is BERT_DISPATCH_BACKWARD (op <OP>_BACKWARD). */
#define BERT_DISPATCH(be, OP, name, n, args) \
  (((be) = bert_backend_for((name), (n), (args))) != NULL && \
   bert_backend_check((be), BERT_OP_##OP, (name), (n), (args)) == 0)
#define BERT_DISPATCH_BACKWARD(be, OP, name, n, args) \
  BERT_DISPATCH(be, OP##_BACKWARD, name " backward", n, args)

#endif
