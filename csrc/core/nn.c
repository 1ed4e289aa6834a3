/*
** The fused nn ops (core/nn.h), device-independent: each op's argument
** checks, its autograd node (a node type with the op's own saved state)
** and its backward, side by side.  Forward and backward kernels are the
** backends' (cpu/linear.c ..., vulkan/vk_nn.c ...), reached through the
** backend table, so one node serves every device.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ag_ops.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "core/nn.h"
#include "core/checked.h"

#define SHAPE(buf, t) bert_shape_str((buf), sizeof(buf), (t)->ndim, (t)->shape)

/* t itself when it is in host memory, else a host copy (new reference). */
static bert_tensor *on_host(const bert_tensor *t) {
  if (bert_is_host(t)) { bert_tensor_retain((bert_tensor *)t); return (bert_tensor *)t; }
  return t->storage->backend->to_host(t);
}

/* Contiguous forms of up to n optional tensors: 0, or -1 with all released. */
static int contiguous_all(int n, bert_tensor *const *in, bert_tensor **out) {
  int ok = 1;
  for (int i = 0; i < n; i++) {
    out[i] = in[i] ? bert_contiguous(in[i]) : NULL;
    if (in[i] && out[i] == NULL) ok = 0;
  }
  if (ok) return 0;
  for (int i = 0; i < n; i++) bert_tensor_release(out[i]);
  return -1;
}

static void release_all(int n, bert_tensor **t) {
  for (int i = 0; i < n; i++) bert_tensor_release(t[i]);
}

/* {====================================================== linear */

static int linear_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *x = bert_node_saved(node, 0), *w = bert_node_saved(node, 1);
  if (x == NULL || w == NULL) return -1;
  const bert_tensor *ts[3] = {x, w, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, LINEAR, "linear", 3, ts)) return -1;
  (void)out;
  return be->linear_backward(node->inputs, x, w, g);
}

static const bert_node_type linear_node = {"linear", linear_backward, 0, 0};

bert_tensor *bert_linear(bert_tensor *x_in, bert_tensor *w_in, bert_tensor *b_in) {
  char s1[160], s2[160];
  bert_tensor *in[3] = {x_in, w_in, b_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, LINEAR, "linear", 3, (const bert_tensor *const *)in)) return NULL;
  if (x_in->dtype != BERT_F32 || w_in->dtype != BERT_F32 || (b_in && b_in->dtype != BERT_F32)) {
    bert_set_error("linear: expects float32 tensors, got input %s, weight %s%s%s",
                   bert_dtype_name(x_in->dtype), bert_dtype_name(w_in->dtype),
                   b_in ? ", bias " : "", b_in ? bert_dtype_name(b_in->dtype) : "");
    return NULL;
  }
  if (w_in->ndim != 2) {
    bert_set_error("linear: weight must be 2-D [out x in], got %s", SHAPE(s1, w_in));
    return NULL;
  }
  if (x_in->ndim < 1) {
    bert_set_error("linear: input must have at least 1 dimension, got a scalar");
    return NULL;
  }
  int64_t outf = w_in->shape[0], inf = w_in->shape[1];
  if (x_in->shape[x_in->ndim - 1] != inf) {
    bert_set_error("linear: input %s and weight %s: in_features differ (%lld vs %lld)",
                   SHAPE(s1, x_in), SHAPE(s2, w_in), (long long)x_in->shape[x_in->ndim - 1], (long long)inf);
    return NULL;
  }
  if (b_in && (b_in->ndim != 1 || b_in->shape[0] != outf)) {
    bert_set_error("linear: bias %s does not match weight %s (expected [%lld])",
                   SHAPE(s1, b_in), SHAPE(s2, w_in), (long long)outf);
    return NULL;
  }
  bert_tensor *c[3];
  if (contiguous_all(3, in, c) != 0) return NULL;
  bert_node *node;
  bert_tensor *y = bert_record(be->linear(c[0], c[1], c[2]), &node, &linear_node, 3, in);
  if (node) { bert_node_save(node, c[0]); bert_node_save(node, c[1]); }
  release_all(3, c);
  return y;
}
/* }====================================================== */

/* {====================================================== layer norm */

typedef struct { int has_residual, has_gamma; } layer_norm_state;

/* saved: 0 = x, 1 = stats, then residual and gamma when present */
static int layer_norm_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  layer_norm_state *st = node->state;
  int k = 2;
  bert_tensor *x = bert_node_saved(node, 0), *stats = bert_node_saved(node, 1);
  bert_tensor *res = st->has_residual ? bert_node_saved(node, k++) : NULL;
  bert_tensor *gamma = st->has_gamma ? bert_node_saved(node, k++) : NULL;
  if (!x || !stats || (st->has_residual && !res) || (st->has_gamma && !gamma)) return -1;
  const bert_tensor *ts[3] = {x, stats, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, LAYER_NORM, "layer_norm", 3, ts)) return -1;
  (void)out;
  return be->layer_norm_backward(node->inputs, x, res, gamma, stats, g);
}

static const bert_node_type layer_norm_node = {"layer_norm", layer_norm_backward, sizeof(layer_norm_state), 0};

/* A norm's weight or bias p (NULL: absent) is float32 [H], H x's last dim. */
static int check_norm_param(const char *op, const char *what, bert_tensor *p, bert_tensor *x, int64_t H) {
  char s1[160], s2[160];
  if (p == NULL) return 0;
  if (p->dtype != BERT_F32) {
    bert_set_error("%s: %s must be float32, got %s", op, what, bert_dtype_name(p->dtype));
    return -1;
  }
  if (p->ndim != 1 || p->shape[0] != H) {
    bert_set_error("%s: %s %s does not match the last dim of input %s (expected [%lld])",
                   op, what, SHAPE(s1, p), SHAPE(s2, x), (long long)H);
    return -1;
  }
  return 0;
}

bert_tensor *bert_layer_norm(bert_tensor *x_in, bert_tensor *g_in, bert_tensor *b_in, double eps,
                             bert_tensor *r_in) {
  char s1[160], s2[160];
  bert_tensor *in[4] = {x_in, g_in, b_in, r_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, LAYER_NORM, "layer_norm", 4, (const bert_tensor *const *)in)) return NULL;
  if (x_in->dtype != BERT_F32) {
    bert_set_error("layer_norm: input must be float32, got %s", bert_dtype_name(x_in->dtype));
    return NULL;
  }
  if (x_in->ndim < 1) { bert_set_error("layer_norm: input must have at least 1 dimension"); return NULL; }
  if (!(eps >= 0)) { bert_set_error("layer_norm: eps must be >= 0, got %g", eps); return NULL; }
  int64_t H = x_in->shape[x_in->ndim - 1];
  if (check_norm_param("layer_norm", "weight", g_in, x_in, H) ||
      check_norm_param("layer_norm", "bias", b_in, x_in, H))
    return NULL;
  if (r_in) {
    int same = r_in->ndim == x_in->ndim;
    for (int d = 0; same && d < x_in->ndim; d++) same = r_in->shape[d] == x_in->shape[d];
    if (!same || r_in->dtype != BERT_F32) {
      bert_set_error("layer_norm: residual %s %s must match input %s float32",
                     SHAPE(s1, r_in), bert_dtype_name(r_in->dtype), SHAPE(s2, x_in));
      return NULL;
    }
  }
  bert_tensor *c[4], *stats = NULL;
  if (contiguous_all(4, in, c) != 0) return NULL;
  bert_node *node;
  bert_tensor *y = be->layer_norm(c[0], c[1], c[2], eps, c[3], &stats);
  y = bert_record(y, &node, &layer_norm_node, 4, in);
  if (node) {
    layer_norm_state *st = node->state;
    bert_node_save(node, c[0]);
    bert_node_save(node, stats);
    if ((st->has_residual = c[3] != NULL)) bert_node_save(node, c[3]);
    if ((st->has_gamma = c[1] != NULL)) bert_node_save(node, c[1]);
  }
  bert_tensor_release(stats);
  release_all(4, c);
  return y;
}
/* }====================================================== */

/* {====================================================== RMS norm */

/* saved: 0 = x, 1 = rstd, 2 = weight */
static int rms_norm_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *x = bert_node_saved(node, 0), *rstd = bert_node_saved(node, 1), *w = bert_node_saved(node, 2);
  if (!x || !rstd || !w) return -1;
  const bert_tensor *ts[3] = {x, rstd, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, RMS_NORM, "rms_norm", 3, ts)) return -1;
  (void)out;
  return be->rms_norm_backward(node->inputs, x, w, rstd, g);
}

static const bert_node_type rms_norm_node = {"rms_norm", rms_norm_backward, 0, 0};

bert_tensor *bert_rms_norm(bert_tensor *x_in, bert_tensor *w_in, double eps) {
  bert_tensor *in[2] = {x_in, w_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, RMS_NORM, "rms_norm", 2, (const bert_tensor *const *)in)) return NULL;
  if (x_in->dtype != BERT_F32) {
    bert_set_error("rms_norm: input must be float32, got %s", bert_dtype_name(x_in->dtype));
    return NULL;
  }
  if (x_in->ndim < 1) { bert_set_error("rms_norm: input must have at least 1 dimension"); return NULL; }
  if (!(eps > 0 && isfinite(eps))) {
    bert_set_error("rms_norm: eps must be finite and > 0, got %g", eps);
    return NULL;
  }
  if (w_in == NULL) { bert_set_error("rms_norm: weight is required"); return NULL; }
  if (check_norm_param("rms_norm", "weight", w_in, x_in, x_in->shape[x_in->ndim - 1])) return NULL;
  bert_tensor *c[2], *rstd = NULL;
  if (contiguous_all(2, in, c) != 0) return NULL;
  bert_node *node;
  bert_tensor *y = bert_record(be->rms_norm(c[0], c[1], eps, &rstd), &node, &rms_norm_node, 2, in);
  if (node) {
    bert_node_save(node, c[0]);
    bert_node_save(node, rstd);
    bert_node_save(node, c[1]);
  }
  bert_tensor_release(rstd);
  release_all(2, c);
  return y;
}
/* }====================================================== */

/* {====================================================== LSTM */

/* t = {x, h0, c0, w_ih, w_hh, b, w_hr, lengths} */
enum { LSTM_X, LSTM_H0, LSTM_C0, LSTM_WIH, LSTM_WHH, LSTM_B, LSTM_WHR, LSTM_LEN, LSTM_NT };

/* saved: t in its order, those present, b left out, then ws */
typedef struct { int has[LSTM_NT]; bert_lstm_opts o; } lstm_state;

static int lstm_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  lstm_state *st = node->state;
  const bert_tensor *t[LSTM_NT] = {NULL};
  int k = 0;
  for (int i = 0; i < LSTM_NT; i++)
    if (st->has[i] && i != LSTM_B && (t[i] = bert_node_saved(node, k++)) == NULL) return -1;
  bert_tensor *ws = bert_node_saved(node, k);
  if (ws == NULL) return -1;
  const bert_tensor *ts[3] = {t[LSTM_X], ws, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, LSTM, "lstm", 3, ts)) return -1;
  return be->lstm_backward(node->inputs, t, &st->o, ws, out, g);
}

static const bert_node_type lstm_node = {"lstm", lstm_backward, sizeof(lstm_state), 0};

int bert_lstm_row_order(const int32_t *len, int64_t B, int64_t T, int32_t *order) {
  if (len == NULL) {
    for (int64_t b = 0; b < B; b++) order[b] = (int32_t)b;
    return 0;
  }
  int64_t *first = calloc((size_t)T + 2, sizeof *first);   /* first[k]: rows before those of length T - k */
  if (first == NULL) return -1;
  for (int64_t b = 0; b < B; b++) first[T - len[b] + 1]++;
  for (int64_t k = 1; k <= T; k++) first[k] += first[k - 1];
  for (int64_t b = 0; b < B; b++) order[first[T - len[b]]++] = (int32_t)b;
  free(first);
  return 0;
}

/* p (NULL: absent) is float32 of shape [n0, n1] (n1 < 0: 1-D [n0]). */
static int check_lstm_shape(const char *what, bert_tensor *p, int64_t n0, int64_t n1, const char *dims) {
  char s1[160];
  if (p == NULL) return 0;
  if (p->dtype != BERT_F32) {
    bert_set_error("lstm: %s must be float32, got %s", what, bert_dtype_name(p->dtype));
    return -1;
  }
  if (p->ndim != (n1 < 0 ? 1 : 2) || p->shape[0] != n0 || (n1 >= 0 && p->shape[1] != n1)) {
    if (n1 < 0) bert_set_error("lstm: %s must be [%lld] (%s), got %s", what, (long long)n0, dims, SHAPE(s1, p));
    else bert_set_error("lstm: %s must be [%lld x %lld] (%s), got %s", what, (long long)n0, (long long)n1, dims,
                        SHAPE(s1, p));
    return -1;
  }
  return 0;
}

/* lengths: int32 [B], each in [0, T]; a host contiguous copy (new reference) */
static bert_tensor *lstm_lengths(bert_tensor *len, int64_t B, int64_t T) {
  char s1[160];
  if (len->dtype != BERT_I32 || len->ndim != 1 || len->shape[0] != B) {
    bert_set_error("lstm: lengths must be int32 [%lld] (one per sequence), got %s %s", (long long)B,
                   bert_dtype_name(len->dtype), SHAPE(s1, len));
    return NULL;
  }
  bert_tensor *h = on_host(len), *c = h ? bert_contiguous(h) : NULL;
  bert_tensor_release(h);
  if (c == NULL) return NULL;
  for (int64_t b = 0; b < B; b++) {
    int32_t n = bert_i32(c)[b];
    if (n < 0 || n > T) {
      bert_set_error("lstm: lengths[%lld] = %d is out of range for %lld steps (valid: 0..%lld)", (long long)b + 1,
                     (int)n, (long long)T, (long long)T);
      bert_tensor_release(c);
      return NULL;
    }
  }
  return c;
}

bert_tensor *bert_lstm(bert_tensor *x, bert_tensor *h0, bert_tensor *c0, bert_tensor *w_ih, bert_tensor *w_hh,
                       bert_tensor *b, bert_tensor *w_hr, bert_tensor *lengths, const bert_lstm_opts *o) {
  char s1[160], s2[160];
  bert_tensor *in[LSTM_NT] = {x, h0, c0, w_ih, w_hh, b, w_hr, lengths};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, LSTM, "lstm", LSTM_NT, (const bert_tensor *const *)in)) return NULL;
  if (x->dtype != BERT_F32) {
    bert_set_error("lstm: input must be float32, got %s", bert_dtype_name(x->dtype));
    return NULL;
  }
  if (x->ndim != 3) {
    bert_set_error("lstm: input must be 3-D [batch x steps x features], got %s", SHAPE(s1, x));
    return NULL;
  }
  if (w_ih == NULL || w_hh == NULL) { bert_set_error("lstm: w_ih and w_hh are required"); return NULL; }
  if (w_ih->dtype != BERT_F32) {
    bert_set_error("lstm: w_ih must be float32, got %s", bert_dtype_name(w_ih->dtype));
    return NULL;
  }
  const int64_t B = x->shape[0], T = x->shape[1], I = x->shape[2];
  if (w_ih->ndim != 2 || w_ih->shape[0] % 4 != 0 || w_ih->shape[0] == 0 || w_ih->shape[1] != I) {
    bert_set_error("lstm: w_ih must be [4*hidden x %lld] (the input's features), got %s (input %s)", (long long)I,
                   SHAPE(s1, w_ih), SHAPE(s2, x));
    return NULL;
  }
  const int64_t H = w_ih->shape[0] / 4;
  if (w_hr && w_hr->dtype != BERT_F32) {
    bert_set_error("lstm: w_hr must be float32, got %s", bert_dtype_name(w_hr->dtype));
    return NULL;
  }
  if (w_hr && (w_hr->ndim != 2 || w_hr->shape[0] == 0 || w_hr->shape[1] != H)) {
    bert_set_error("lstm: w_hr must be [proj x %lld] (hidden %lld from w_ih %s), got %s", (long long)H,
                   (long long)H, SHAPE(s1, w_ih), SHAPE(s2, w_hr));
    return NULL;
  }
  const int64_t O = w_hr ? w_hr->shape[0] : H;
  const char *odims = w_hr ? "4*hidden x proj" : "4*hidden x hidden";
  if (check_lstm_shape("w_hh", w_hh, 4 * H, O, odims) || check_lstm_shape("b", b, 4 * H, -1, "4*hidden") ||
      check_lstm_shape("h0", h0, B, O, w_hr ? "batch x proj" : "batch x hidden") ||
      check_lstm_shape("c0", c0, B, H, "batch x hidden"))
    return NULL;
  if (!(o->clip >= 0)) { bert_set_error("lstm: clip must be >= 0 (0: none), got %g", o->clip); return NULL; }
  if (!(o->proj_clip >= 0)) {
    bert_set_error("lstm: proj_clip must be >= 0 (0: none), got %g", o->proj_clip);
    return NULL;
  }
  if (o->proj_clip > 0 && w_hr == NULL) {
    bert_set_error("lstm: proj_clip %g clips the projected state: it needs w_hr", o->proj_clip);
    return NULL;
  }
  bert_tensor *len = lengths ? lstm_lengths(lengths, B, T) : NULL;
  if (lengths && len == NULL) return NULL;
  bert_tensor *c[LSTM_NT], *ws = NULL;
  if (contiguous_all(LSTM_NT - 1, in, c) != 0) { bert_tensor_release(len); return NULL; }
  c[LSTM_LEN] = len;
  bert_node *node;
  bert_tensor *y = bert_record(be->lstm((const bert_tensor *const *)c, o, &ws), &node, &lstm_node,
                               LSTM_LEN, in);
  if (node) {
    lstm_state *st = node->state;
    st->o = *o;
    for (int i = 0; i < LSTM_NT; i++) {
      st->has[i] = c[i] != NULL;
      if (c[i] && i != LSTM_B) bert_node_save(node, c[i]);
    }
    bert_node_save(node, ws);
  }
  bert_tensor_release(ws);
  release_all(LSTM_NT, c);
  return y;
}
/* }====================================================== */

/* {====================================================== bias + GELU */

typedef struct { int tanh_mode, has_bias; } bias_gelu_state;

/* saved: 0 = x, 1 = b when present */
static int bias_gelu_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bias_gelu_state *st = node->state;
  bert_tensor *x = bert_node_saved(node, 0), *b = st->has_bias ? bert_node_saved(node, 1) : NULL;
  if (x == NULL || (st->has_bias && b == NULL)) return -1;
  const bert_tensor *ts[2] = {x, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, BIAS_GELU, "bias_gelu", 2, ts)) return -1;
  (void)out;
  return be->bias_gelu_backward(node->inputs, x, b, st->tanh_mode, g);
}

static const bert_node_type bias_gelu_node = {"bias_gelu", bias_gelu_backward, sizeof(bias_gelu_state), 0};

bert_tensor *bert_bias_gelu(bert_tensor *x_in, bert_tensor *b_in, int tanh_mode) {
  char s1[160], s2[160];
  bert_tensor *in[2] = {x_in, b_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, BIAS_GELU, "bias_gelu", 2, (const bert_tensor *const *)in)) return NULL;
  if (x_in->dtype != BERT_F32 || (b_in && b_in->dtype != BERT_F32)) {
    bert_set_error("bias_gelu: expects float32 tensors, got input %s%s%s", bert_dtype_name(x_in->dtype),
                   b_in ? " and bias " : "", b_in ? bert_dtype_name(b_in->dtype) : "");
    return NULL;
  }
  if (x_in->ndim < 1) { bert_set_error("bias_gelu: input must have at least 1 dimension"); return NULL; }
  int64_t N = x_in->shape[x_in->ndim - 1];
  if (b_in && (b_in->ndim != 1 || b_in->shape[0] != N)) {
    bert_set_error("bias_gelu: bias %s does not match the last dim of input %s (expected [%lld])",
                   SHAPE(s1, b_in), SHAPE(s2, x_in), (long long)N);
    return NULL;
  }
  bert_tensor *c[2];
  if (contiguous_all(2, in, c) != 0) return NULL;
  bert_node *node;
  bert_tensor *y = bert_record(be->bias_gelu(c[0], c[1], tanh_mode != 0), &node, &bias_gelu_node, 2, in);
  if (node) {
    bias_gelu_state *st = node->state;
    st->tanh_mode = tanh_mode != 0;
    bert_node_save(node, c[0]);
    if ((st->has_bias = c[1] != NULL)) bert_node_save(node, c[1]);
  }
  release_all(2, c);
  return y;
}
/* }====================================================== */

/* {====================================================== dropout */

/* the mask is a pure function of the stream: backward regenerates it */
typedef struct { double p; bert_stream stream; } dropout_state;

static int dropout_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  dropout_state *st = node->state;
  const bert_backend *be;
  if (!BERT_DISPATCH(be, DROPOUT, "dropout backward", 1, (const bert_tensor *const *)&g)) return -1;
  bert_tensor *gc = bert_contiguous(g);
  bert_tensor *dx = gc ? be->dropout(gc, st->p, st->stream) : NULL;
  bert_tensor_release(gc);
  (void)out;
  return dx ? bert_accumulate_grad_steal(node->inputs[0], dx) : -1;
}

static const bert_node_type dropout_node = {"dropout", dropout_backward, sizeof(dropout_state), 0};

bert_tensor *bert_dropout(bert_tensor *x_in, double p, int training) {
  const bert_backend *be;
  if (!BERT_DISPATCH(be, DROPOUT, "dropout", 1, (const bert_tensor *const *)&x_in)) return NULL;
  if (x_in->dtype != BERT_F32) {
    bert_set_error("dropout: input must be float32, got %s", bert_dtype_name(x_in->dtype));
    return NULL;
  }
  if (!(p >= 0.0 && p <= 1.0)) {
    bert_set_error("dropout: probability must be in [0, 1], got %g", p);
    return NULL;
  }
  if (p == 0.0 || !training) {
    bert_tensor_retain(x_in);
    return x_in;
  }
  bert_tensor *x = bert_contiguous(x_in);
  if (x == NULL) return NULL;
  bert_stream s;
  uint64_t unused;
  bert_rng_get_state(&s.seed, &unused);
  int64_t rows = x->ndim > 0 ? x->shape[0] : 1;   /* masks keyed by global sample (data parallelism) */
  s.offset = bert_rng_reserve_batch(rows, rows > 0 ? bert_numel(x) / rows : 0);
  bert_node *node;
  bert_tensor *y = bert_record(be->dropout(x, p, s), &node, &dropout_node, 1, &x_in);
  if (node) {
    dropout_state *st = node->state;
    st->p = p;
    st->stream = s;
  }
  bert_tensor_release(x);
  return y;
}

/* saved: 0 = rows (contiguous, host) */
static int dropout_rows_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  dropout_state *st = node->state;
  (void)out;
  bert_tensor *rows = bert_node_saved(node, 0);
  const bert_backend *be;
  if (rows == NULL || !BERT_DISPATCH(be, DROPOUT_ROWS, "dropout_rows backward", 1, (const bert_tensor *const *)&g))
    return -1;
  bert_tensor *gc = bert_contiguous(g);
  bert_tensor *dx = gc ? be->dropout_rows(gc, st->p, st->stream, rows) : NULL;
  bert_tensor_release(gc);
  if (dx == NULL) return -1;
  return bert_accumulate_grad_steal(node->inputs[0], dx);
}

static const bert_node_type dropout_rows_node = {"dropout_rows", dropout_rows_backward, sizeof(dropout_state), 0};

bert_tensor *bert_dropout_rows(bert_tensor *x_in, double p, int training, bert_tensor *rows_in, int64_t B,
                               int64_t T) {
  char s1[160], s2[160];
  const bert_tensor *args[2] = {x_in, rows_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, DROPOUT_ROWS, "dropout_rows", 2, args)) return NULL;
  if (x_in->dtype != BERT_F32 || x_in->ndim != 2) {
    bert_set_error("dropout_rows: x must be float32 [rows x width], got %s %s", SHAPE(s1, x_in),
                   bert_dtype_name(x_in->dtype));
    return NULL;
  }
  if (!(p >= 0.0 && p <= 1.0)) {
    bert_set_error("dropout_rows: probability must be in [0, 1], got %g", p);
    return NULL;
  }
  int64_t N = x_in->shape[0], W = x_in->shape[1];
  if (rows_in->dtype != BERT_I32 || rows_in->ndim != 1 || rows_in->shape[0] != N) {
    bert_set_error("dropout_rows: rows must be int32 [%lld] (one per row of x %s), got %s %s", (long long)N,
                   SHAPE(s1, x_in), SHAPE(s2, rows_in), bert_dtype_name(rows_in->dtype));
    return NULL;
  }
  int64_t BT, TW;
  if (B < 1 || T < 1 || bert_mul_i64(B, T, &BT) != 0 || bert_mul_i64(T, W, &TW) != 0) {
    bert_set_error("dropout_rows: batch and seq must be positive and batch x seq x width (%lld) fit in 64 bits, "
                   "got %lld and %lld", (long long)W, (long long)B, (long long)T);
    return NULL;
  }
  if (p == 0.0 || !training) {
    bert_tensor_retain(x_in);
    return x_in;
  }
  bert_tensor *rows = bert_contiguous(rows_in);
  if (rows == NULL) return NULL;
  const int32_t *r = bert_i32(rows);
  for (int64_t n = 0; n < N; n++)
    if (r[n] < 0 || r[n] >= BT) {
      bert_set_error("dropout_rows: rows[%lld] = %d is outside the %lld x %lld batch", (long long)n + 1, (int)r[n],
                     (long long)B, (long long)T);
      bert_tensor_release(rows);
      return NULL;
    }
  bert_tensor *x = bert_contiguous(x_in);
  if (x == NULL) { bert_tensor_release(rows); return NULL; }
  /* the stream bert_dropout reserves for a [B, T, W] tensor: the same masks */
  bert_stream s;
  uint64_t unused;
  bert_rng_get_state(&s.seed, &unused);
  s.offset = bert_rng_reserve_batch(B, TW);
  bert_node *node;
  bert_tensor *y = bert_record(be->dropout_rows(x, p, s, rows), &node, &dropout_rows_node, 1, &x_in);
  if (node) {
    dropout_state *st = node->state;
    st->p = p;
    st->stream = s;
    bert_node_save(node, rows);
  }
  bert_tensor_release(x);
  bert_tensor_release(rows);
  return y;
}
/* }====================================================== */

/* {====================================================== embedding */

/* saved: 0 = ids (contiguous) */
static int embedding_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  bert_tensor *w = node->inputs[1], *ids = bert_node_saved(node, 0);
  if (ids == NULL) return -1;
  if (!w || !w->requires_grad) return 0;
  const bert_tensor *ts[3] = {w, ids, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, EMBEDDING, "embedding", 3, ts)) return -1;
  bert_tensor *gc = bert_contiguous(g);
  int rc = gc ? be->embedding_backward(w, ids, gc) : -1;
  bert_tensor_release(gc);
  (void)out;
  return rc;
}

static const bert_node_type embedding_node = {"embedding", embedding_backward, 0, 0};

bert_tensor *bert_embedding(bert_tensor *ids_in, bert_tensor *w_in) {
  char s1[160];
  bert_tensor *in[2] = {ids_in, w_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, EMBEDDING, "embedding", 2, (const bert_tensor *const *)in)) return NULL;
  if (ids_in->dtype != BERT_I32) {
    bert_set_error("embedding: ids must be int32, got %s", bert_dtype_name(ids_in->dtype));
    return NULL;
  }
  if (w_in->dtype != BERT_F32 || w_in->ndim != 2) {
    bert_set_error("embedding: weight must be a 2-D float32 [num_embeddings x dim], got %s %s",
                   SHAPE(s1, w_in), bert_dtype_name(w_in->dtype));
    return NULL;
  }
  if (ids_in->ndim + 1 > BERT_MAX_DIMS) {
    bert_set_error("embedding: ids have too many dimensions (%d)", ids_in->ndim);
    return NULL;
  }
  int64_t V = w_in->shape[0];
  bert_tensor *h = on_host(ids_in);
  if (h == NULL) return NULL;
  int64_t n = bert_numel(h);
  for (int64_t t = 0; t < n; t++) {
    int64_t id = (int64_t)bert_get_flat(h, t);
    if (id < 0 || id >= V) {
      bert_set_error("embedding: id %lld at position %lld is out of range for %lld embeddings "
                     "(valid ids are 0..%lld)", (long long)id, (long long)t + 1, (long long)V, (long long)V - 1);
      bert_tensor_release(h);
      return NULL;
    }
  }
  bert_tensor_release(h);
  bert_tensor *c[2];
  if (contiguous_all(2, in, c) != 0) return NULL;
  bert_tensor *rec[2] = {NULL, w_in};
  bert_node *node;
  bert_tensor *y = bert_record(be->embedding(c[0], c[1]), &node, &embedding_node, 2, rec);
  if (node) bert_node_save(node, c[0]);
  release_all(2, c);
  return y;
}
/* }====================================================== */

/* {====================================================== cross entropy */

/* lse: the backend's per-row log-sum-exp, when it keeps one */
typedef struct { int64_t ignore_index, count; bert_reduction reduction; int has_lse; } cross_entropy_state;

/* saved: 0 = logits, 1 = labels (contiguous), 2 = the per-row lse when kept */
static int cross_entropy_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  cross_entropy_state *st = node->state;
  if (!bert_node_wants(node, 0)) return 0;
  bert_tensor *l = bert_node_saved(node, 0), *y = bert_node_saved(node, 1);
  bert_tensor *lse = st->has_lse ? bert_node_saved(node, 2) : NULL;
  if (!l || !y || (st->has_lse && !lse)) return -1;
  const bert_tensor *ts[4] = {l, y, g, lse};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, CROSS_ENTROPY, "cross_entropy", 4, ts)) return -1;
  bert_tensor *gc = bert_contiguous(g);
  bert_tensor *dl = gc ? be->cross_entropy_backward(l, y, lse, st->ignore_index, st->reduction, st->count, gc) : NULL;
  bert_tensor_release(gc);
  (void)out;
  return dl ? bert_accumulate_grad_steal(node->inputs[0], dl) : -1;
}

static const bert_node_type cross_entropy_node = {"cross_entropy", cross_entropy_backward,
                                                  sizeof(cross_entropy_state), 0};

bert_tensor *bert_cross_entropy(bert_tensor *l_in, bert_tensor *y_in, int64_t ignore, bert_reduction red) {
  char s1[160], s2[160];
  bert_tensor *in[2] = {l_in, y_in};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, CROSS_ENTROPY, "cross_entropy", 2, (const bert_tensor *const *)in))
    return NULL;
  if (l_in->dtype != BERT_F32) {
    bert_set_error("cross_entropy: logits must be float32, got %s", bert_dtype_name(l_in->dtype));
    return NULL;
  }
  if (y_in->dtype != BERT_I32) {
    bert_set_error("cross_entropy: labels must be int32, got %s", bert_dtype_name(y_in->dtype));
    return NULL;
  }
  int same = l_in->ndim >= 1 && y_in->ndim == l_in->ndim - 1;
  for (int d = 0; same && d < y_in->ndim; d++) same = y_in->shape[d] == l_in->shape[d];
  if (!same) {
    bert_set_error("cross_entropy: logits %s and labels %s: labels must have the logits' shape "
                   "without the class dim", SHAPE(s1, l_in), SHAPE(s2, y_in));
    return NULL;
  }
  int64_t C = l_in->shape[l_in->ndim - 1];
  if (C == 0) { bert_set_error("cross_entropy: logits %s have no classes", SHAPE(s1, l_in)); return NULL; }
  if (red != BERT_REDUCE_NONE && red != BERT_REDUCE_MEAN && red != BERT_REDUCE_SUM) {
    bert_set_error("cross_entropy: unknown reduction %d", (int)red);
    return NULL;
  }
  /* every label in range (or ignore_index), read once on the host */
  bert_tensor *h = on_host(y_in);
  if (h == NULL) return NULL;
  int64_t N = bert_numel(h), count = 0;
  for (int64_t r = 0; r < N; r++) {
    int64_t y = (int64_t)bert_get_flat(h, r);
    if (y == ignore) continue;
    if (y < 0 || y >= C) {
      bert_set_error("cross_entropy: label %lld at position %lld is out of range for %lld classes "
                     "(valid: 0..%lld, or ignore_index %lld)", (long long)y, (long long)r + 1,
                     (long long)C, (long long)C - 1, (long long)ignore);
      bert_tensor_release(h);
      return NULL;
    }
    count++;
  }
  bert_tensor_release(h);
  bert_tensor *c[2], *lse = NULL;
  if (contiguous_all(2, in, c) != 0) return NULL;
  bert_node *node;
  bert_tensor *loss = be->cross_entropy(c[0], c[1], ignore, red, count, &lse);
  loss = bert_record(loss, &node, &cross_entropy_node, 1, in);
  if (node) {
    cross_entropy_state *st = node->state;
    st->ignore_index = ignore;
    st->count = count;
    st->reduction = red;
    bert_node_save(node, c[0]);
    bert_node_save(node, c[1]);
    if ((st->has_lse = lse != NULL)) bert_node_save(node, lse);
  }
  bert_tensor_release(lse);
  release_all(2, c);
  return loss;
}
/* }====================================================== */

/* {====================================================== attention */

/* opts.mask and opts.cu_seqlens are saved (after lse) rather than kept as pointers */
typedef struct { bert_attention_opts opts; bert_stream stream; int has_mask, has_cu; } attention_state;

/* The options saved with a node (attention_save), the mask and the offsets
** from saved index `at` on. */
static int attention_saved_opts(bert_node *node, int at, bert_attention_opts *o) {
  const attention_state *st = node->state;
  *o = st->opts;
  o->mask = st->has_mask ? bert_node_saved(node, at++) : NULL;
  o->cu_seqlens = st->has_cu ? bert_node_saved(node, at++) : NULL;
  return (st->has_mask && !o->mask) || (st->has_cu && !o->cu_seqlens) ? -1 : 0;
}

/* saved: 0 = q, 1 = k, 2 = v, 3 = lse, then the mask and the offsets when present */
static int attention_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  attention_state *st = node->state;
  bert_tensor *q = bert_node_saved(node, 0), *k = bert_node_saved(node, 1), *v = bert_node_saved(node, 2);
  bert_tensor *lse = bert_node_saved(node, 3);
  bert_attention_opts o;
  if (!q || !k || !v || !lse || attention_saved_opts(node, 4, &o) != 0) return -1;
  const bert_tensor *ts[5] = {q, k, v, lse, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, ATTENTION, "attention", 5, ts)) return -1;
  /* g as it comes (the backend lays it out as it needs: the CPU kernel
  ** reads the usual transposed view of a [B, T, H] gradient in place) */
  bert_tensor *dq = NULL, *dk = NULL, *dv = NULL;
  if (be->attention_backward(q, k, v, &o, st->stream, out, lse, g, &dq, &dk, &dv) != 0) return -1;
  int e1 = bert_accumulate_grad_steal(node->inputs[0], dq);
  int e2 = bert_accumulate_grad_steal(node->inputs[1], dk);
  int e3 = bert_accumulate_grad_steal(node->inputs[2], dv);
  return (e1 || e2 || e3) ? -1 : 0;
}

static const bert_node_type attention_node = {"attention", attention_backward, sizeof(attention_state), 1};

static int check_qkv(const char *name, const bert_tensor *t) {
  char s1[160];
  if (t->dtype != BERT_F32 || t->ndim != 4) {
    bert_set_error("attention: %s must be a 4-D float32 [batch x heads x seq x head_dim], got %s %s",
                   name, SHAPE(s1, t), bert_dtype_name(t->dtype));
    return -1;
  }
  return 0;
}

/* Checks the mask against [B, Tk]. */
static int check_mask(const bert_tensor *m, const bert_tensor *q, int64_t B, int64_t Tk) {
  char s1[160], s2[160];
  int keep = m->ndim == 2;
  int bias4 = m->ndim == 4 && m->shape[1] == 1 && m->shape[2] == 1;
  int64_t Bm = m->ndim > 0 ? m->shape[0] : 0;
  if ((!keep && !bias4) || (Bm != B && Bm != 1) || m->shape[m->ndim - 1] != Tk) {
    bert_set_error("attention: mask %s does not fit query %s with %lld keys: expected a [%lld x %lld] "
                   "keep mask or a [%lld x 1 x 1 x %lld] additive bias", SHAPE(s1, m), SHAPE(s2, q),
                   (long long)Tk, (long long)B, (long long)Tk, (long long)B, (long long)Tk);
    return -1;
  }
  if (bias4 && m->dtype != BERT_F32) {
    bert_set_error("attention: an additive mask [%lld x 1 x 1 x %lld] must be float32, got %s",
                   (long long)Bm, (long long)Tk, bert_dtype_name(m->dtype));
    return -1;
  }
  return 0;
}

/* The offsets as a short list for errors: "{0, 3, 2, 9}" (the first 12). */
static void offsets_str(char *buf, size_t size, const int32_t *c, int64_t n) {
  size_t at = 0;
  at += (size_t)snprintf(buf, size, "{");
  for (int64_t i = 0; i < n && i < 12 && at < size; i++)
    at += (size_t)snprintf(buf + at, size - at, "%s%d", i ? ", " : "", (int)c[i]);
  if (at < size) snprintf(buf + at, size - at, "%s}", n > 12 ? ", ..." : "");
}

/* Packed sequences: q, k, v 3-D [total, A, d] alike; cu an int32 [B + 1]
** of offsets from 0 to total, non-decreasing.  *max_len: the longest. */
static int check_varlen(const bert_tensor *q, const bert_tensor *k, const bert_tensor *v, const bert_tensor *cu,
                        const bert_tensor *mask, int64_t *max_len) {
  char s1[160], s2[160], s3[160], list[200];
  const bert_tensor *t[3] = {q, k, v};
  for (int i = 0; i < 3; i++) {
    if (t[i]->dtype != BERT_F32 || t[i]->ndim != 3 || t[i]->shape[0] != q->shape[0] ||
        t[i]->shape[1] != q->shape[1] || t[i]->shape[2] != q->shape[2]) {
      bert_set_error("attention: with cu_seqlens, query, key and value must be float32 [total_tokens x heads x "
                     "head_dim] of one shape, got query %s %s, key %s, value %s", SHAPE(s1, q),
                     bert_dtype_name(q->dtype), SHAPE(s2, k), SHAPE(s3, v));
      return -1;
    }
  }
  if (mask) {
    bert_set_error("attention: mask and cu_seqlens do not go together (packed sequences have no padding)");
    return -1;
  }
  if (cu->dtype != BERT_I32 || cu->ndim != 1 || cu->shape[0] < 2) {
    bert_set_error("attention: cu_seqlens must be an int32 [batch + 1] tensor of offsets (at least 2), got %s %s",
                   SHAPE(s1, cu), bert_dtype_name(cu->dtype));
    return -1;
  }
  bert_tensor *h = on_host(cu);
  if (h == NULL) return -1;
  bert_tensor *hc = bert_contiguous(h);
  bert_tensor_release(h);
  if (hc == NULL) return -1;
  const int32_t *c = bert_i32(hc);
  int64_t n = cu->shape[0], total = q->shape[0], longest = 0;
  offsets_str(list, sizeof list, c, n);
  int rc = -1;
  if (c[0] != 0) {
    bert_set_error("attention: cu_seqlens must start at 0, got %s", list);
    goto done;
  }
  for (int64_t i = 1; i < n; i++) {
    if (c[i] < c[i - 1]) {
      bert_set_error("attention: cu_seqlens must be non-decreasing, got %d after %d (entries %lld and %lld of %s)",
                     (int)c[i], (int)c[i - 1], (long long)i, (long long)i + 1, list);
      goto done;
    }
    if (c[i] - c[i - 1] > longest) longest = c[i] - c[i - 1];
  }
  if (c[n - 1] != total) {
    bert_set_error("attention: cu_seqlens must end at the %lld packed tokens of query %s, got %s",
                   (long long)total, SHAPE(s1, q), list);
    goto done;
  }
  *max_len = longest;
  rc = 0;
done:
  bert_tensor_release(hc);
  return rc;
}

/* Checks q, k, v and the options, prepares them (*oc: the mask and offsets
** contiguous, new references the caller releases; *s the dropout stream)
** and runs the backend's forward: the result, unrecorded, and *lse. */
static bert_tensor *attention_forward(const bert_backend *be, bert_tensor *q, bert_tensor *k, bert_tensor *v,
                                      const bert_attention_opts *o, bert_attention_opts *oc, bert_stream *s,
                                      bert_tensor **lse) {
  char s1[160], s2[160], s3[160];
  int64_t B, A, Tq, Tk, max_len = 0;
  if (o->cu_seqlens) {
    if (check_varlen(q, k, v, o->cu_seqlens, o->mask, &max_len) != 0) return NULL;
    B = o->cu_seqlens->shape[0] - 1;
    A = q->shape[1];
    Tq = Tk = max_len;
  } else {
    if (check_qkv("query", q) || check_qkv("key", k) || check_qkv("value", v)) return NULL;
    B = q->shape[0]; A = q->shape[1]; Tq = q->shape[2]; Tk = k->shape[2];
    for (int i = 0; i < 4; i++) {
      int64_t want = i == 2 ? Tk : q->shape[i];
      if (k->shape[i] != want || v->shape[i] != want) {
        bert_set_error("attention: query %s, key %s and value %s must agree in batch, heads and "
                       "head_dim, and key and value in length", SHAPE(s1, q), SHAPE(s2, k), SHAPE(s3, v));
        return NULL;
      }
    }
    if (Tk == 0 && Tq > 0) {
      bert_set_error("attention: no keys (key %s)", SHAPE(s1, k));
      return NULL;
    }
    if (o->mask && check_mask(o->mask, q, B, Tk) != 0) return NULL;
  }
  if (!(o->dropout_p >= 0 && o->dropout_p < 1)) {
    bert_set_error("attention: dropout must be in [0, 1), got %g", o->dropout_p);
    return NULL;
  }
  *oc = *o;
  oc->causal = o->causal != 0;
  oc->max_seqlen = max_len;
  oc->mask = o->mask ? bert_contiguous(o->mask) : NULL;
  oc->cu_seqlens = o->cu_seqlens ? bert_contiguous(o->cu_seqlens) : NULL;
  if ((o->mask && oc->mask == NULL) || (o->cu_seqlens && oc->cu_seqlens == NULL)) {
    bert_tensor_release(oc->mask);
    bert_tensor_release(oc->cu_seqlens);
    return NULL;
  }
  s->seed = s->offset = 0;
  if (o->training && o->dropout_p > 0) {
    uint64_t unused;
    bert_rng_get_state(&s->seed, &unused);
    s->offset = bert_rng_reserve_batch(B, A * Tq * Tk);   /* keyed by global sample */
  }
  bert_tensor *out = be->attention(q, k, v, oc, *s, lse);
  if (out == NULL) {
    bert_tensor_release(oc->mask);
    bert_tensor_release(oc->cu_seqlens);
  }
  return out;
}

/* What backward needs besides the saved q, k, v (or qkv): the options, the
** stream, lse, and the mask and offsets (saved after the tensors). */
static void attention_save(bert_node *node, const bert_attention_opts *oc, bert_stream s, bert_tensor *lse) {
  attention_state *st = node->state;
  st->opts = *oc;
  st->opts.mask = NULL;
  st->opts.cu_seqlens = NULL;
  st->stream = s;
  bert_node_save(node, lse);
  if ((st->has_mask = oc->mask != NULL)) bert_node_save(node, oc->mask);
  if ((st->has_cu = oc->cu_seqlens != NULL)) bert_node_save(node, oc->cu_seqlens);
}

bert_tensor *bert_attention(bert_tensor *q, bert_tensor *k, bert_tensor *v, const bert_attention_opts *o) {
  bert_tensor *in[5] = {q, k, v, o->mask, o->cu_seqlens};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, ATTENTION, "attention", 5, (const bert_tensor *const *)in)) return NULL;
  bert_attention_opts oc;
  bert_stream s;
  bert_tensor *lse = NULL;
  bert_node *node;
  bert_tensor *out = bert_record(attention_forward(be, q, k, v, o, &oc, &s, &lse), &node, &attention_node, 3, in);
  if (out == NULL) return NULL;
  if (node) {
    bert_node_save(node, q);
    bert_node_save(node, k);
    bert_node_save(node, v);
    attention_save(node, &oc, s, lse);
  }
  bert_tensor_release(lse);
  bert_tensor_release(oc.mask);
  bert_tensor_release(oc.cu_seqlens);
  return out;
}

/* {------------------------------------------------------ self-attention from one fused projection */

/* q, k, v as views of a contiguous qkv [B, T, 3H] ([total, 3H]): [B, A, T,
** d] ([total, A, d]), head a of slice i at column i * H + a * d. */
static int qkv_views(bert_tensor *qkv, int64_t A, bert_tensor *views[3]) {
  int packed = qkv->ndim == 2;
  int64_t W = qkv->shape[qkv->ndim - 1], H = W / 3, d = H / A;
  for (int i = 0; i < 3; i++) {
    int64_t shape4[4] = {qkv->shape[0], A, packed ? 0 : qkv->shape[1], d}, stride4[4] = {packed ? 0 : qkv->shape[1] * W, d, W, 1};
    int64_t shape3[3] = {qkv->shape[0], A, d}, stride3[3] = {W, d, 1};
    views[i] = bert_tensor_view_of(qkv->storage, BERT_F32, qkv->offset + i * H, packed ? 3 : 4,
                                   packed ? shape3 : shape4, packed ? stride3 : stride4);
    if (views[i] == NULL) {
      for (int j = 0; j < i; j++) bert_tensor_release(views[j]);
      return -1;
    }
  }
  return 0;
}

static void release3(bert_tensor *t[3]) {
  for (int i = 0; i < 3; i++) bert_tensor_release(t[i]);
}

/* saved: 0 = qkv (contiguous), 1 = lse, then the mask and the offsets when present */
static int attention_qkv_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  attention_state *st = node->state;
  bert_tensor *qkv = bert_node_saved(node, 0), *lse = bert_node_saved(node, 1);
  bert_attention_opts o;
  if (!qkv || !lse || attention_saved_opts(node, 2, &o) != 0) return -1;
  const bert_tensor *ts[3] = {qkv, lse, g};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, ATTENTION_BACKWARD_INTO, "attention_qkv backward", 3, ts)) return -1;
  int64_t A = out->shape[1];   /* heads: out is [B, A, T, d] or [total, A, d] */
  bert_tensor *in[3], *gv[3], *grad = be->empty(BERT_F32, qkv->ndim, qkv->shape);
  if (grad == NULL) return -1;
  if (qkv_views(qkv, A, in) != 0) { bert_tensor_release(grad); return -1; }
  int rc = -1;
  if (qkv_views(grad, A, gv) == 0) {
    rc = be->attention_backward_into(in[0], in[1], in[2], &o, st->stream, out, lse, g, gv[0], gv[1], gv[2]);
    release3(gv);
  }
  release3(in);
  if (rc != 0) { bert_tensor_release(grad); return -1; }
  return bert_accumulate_grad_steal(node->inputs[0], grad);
}

static const bert_node_type attention_qkv_node = {"attention_qkv", attention_qkv_backward,
                                                  sizeof(attention_state), 1};

bert_tensor *bert_attention_qkv(bert_tensor *qkv, int64_t heads, const bert_attention_opts *o) {
  char s1[160];
  int packed = o->cu_seqlens != NULL;
  int64_t W = qkv->ndim > 0 ? qkv->shape[qkv->ndim - 1] : 0;
  if (qkv->dtype != BERT_F32 || qkv->ndim != (packed ? 2 : 3)) {
    bert_set_error("attention_qkv: qkv must be float32 %s, got %s %s",
                   packed ? "[total_tokens x 3*hidden] (with cu_seqlens)" : "[batch x seq x 3*hidden]",
                   SHAPE(s1, qkv), bert_dtype_name(qkv->dtype));
    return NULL;
  }
  if (heads < 1 || W == 0 || W % (3 * heads) != 0) {
    bert_set_error("attention_qkv: the last size of qkv %s must be a positive multiple of 3 x heads (%lld)",
                   SHAPE(s1, qkv), (long long)heads);
    return NULL;
  }
  bert_tensor *in[3] = {qkv, o->mask, o->cu_seqlens};
  const bert_backend *be = bert_backend_for("attention_qkv", 3, (const bert_tensor *const *)in);
  if (be == NULL) return NULL;
  bert_tensor *v3[3], *out = NULL;
  if (be->attention_backward_into == NULL) {
    /* three autograd views of qkv and the plain op */
    int64_t H = W / 3, d = H / heads;
    for (int i = 0; i < 3; i++) {
      int64_t s4[4] = {qkv->shape[0], packed ? 0 : qkv->shape[1], heads, d}, s3[3] = {qkv->shape[0], heads, d};
      bert_tensor *n = bert_ag_narrow(qkv, qkv->ndim - 1, i * H, H);
      bert_tensor *r = n ? bert_ag_view(n, packed ? 3 : 4, packed ? s3 : s4) : NULL;
      v3[i] = r && !packed ? bert_ag_transpose(r, 1, 2) : r;
      if (r && !packed) bert_tensor_release(r);
      bert_tensor_release(n);
      if (v3[i] == NULL) { for (int j = 0; j < i; j++) bert_tensor_release(v3[j]); return NULL; }
    }
    out = bert_attention(v3[0], v3[1], v3[2], o);
    release3(v3);
    return out;
  }
  bert_tensor *qc = bert_contiguous(qkv);
  if (qc == NULL) return NULL;
  if (qkv_views(qc, heads, v3) != 0) { bert_tensor_release(qc); return NULL; }
  const bert_tensor *args[5] = {v3[0], v3[1], v3[2], o->mask, o->cu_seqlens};
  if (bert_backend_check(be, BERT_OP_ATTENTION, "attention_qkv", 5, args) != 0) {
    release3(v3);
    bert_tensor_release(qc);
    return NULL;
  }
  bert_attention_opts oc;
  bert_stream s;
  bert_tensor *lse = NULL;
  bert_node *node;
  out = bert_record(attention_forward(be, v3[0], v3[1], v3[2], o, &oc, &s, &lse), &node, &attention_qkv_node, 1, in);
  release3(v3);
  if (out != NULL) {
    if (node) {
      bert_node_save(node, qc);
      attention_save(node, &oc, s, lse);
    }
    bert_tensor_release(lse);
    bert_tensor_release(oc.mask);
    bert_tensor_release(oc.cu_seqlens);
  }
  bert_tensor_release(qc);
  return out;
}

/* {------------------------------------------------------ DeBERTa's disentangled attention */

/* saved: 0 q, 1 k, 2 v, 3 lse, 4 rows, then kr, qr and the mask when present */
typedef struct { bert_attention_opts opts; bert_stream stream; int has_kr, has_qr, has_mask; } attention_rel_state;

static int attention_rel_backward(bert_node *node, bert_tensor *out, bert_tensor *g) {
  attention_rel_state *st = node->state;
  int at = 5;
  bert_tensor *q = bert_node_saved(node, 0), *k = bert_node_saved(node, 1), *v = bert_node_saved(node, 2);
  bert_tensor *lse = bert_node_saved(node, 3), *rows = bert_node_saved(node, 4);
  bert_tensor *kr = st->has_kr ? bert_node_saved(node, at++) : NULL;
  bert_tensor *qr = st->has_qr ? bert_node_saved(node, at++) : NULL;
  bert_tensor *mask = st->has_mask ? bert_node_saved(node, at++) : NULL;
  if (!q || !k || !v || !lse || !rows || (st->has_kr && !kr) || (st->has_qr && !qr) || (st->has_mask && !mask))
    return -1;
  const bert_tensor *ts[6] = {q, k, v, lse, rows, g};
  const bert_backend *be;
  if (!BERT_DISPATCH_BACKWARD(be, ATTENTION_REL, "attention_rel", 6, ts)) return -1;
  bert_attention_opts o = st->opts;
  o.mask = mask;
  /* g as it comes (a transposed view): the kernel reads it through its strides */
  bert_tensor *dq = NULL, *dk = NULL, *dv = NULL, *dkr = NULL, *dqr = NULL;
  if (be->attention_rel_backward(q, k, v, kr, qr, rows, &o, st->stream, out, lse, g, &dq, &dk, &dv, &dkr, &dqr) != 0)
    return -1;
  int e1 = bert_accumulate_grad_steal(node->inputs[0], dq);
  int e2 = bert_accumulate_grad_steal(node->inputs[1], dk);
  int e3 = bert_accumulate_grad_steal(node->inputs[2], dv);
  int e4 = dkr ? bert_accumulate_grad_steal(node->inputs[3], dkr) : 0;
  int e5 = dqr ? bert_accumulate_grad_steal(node->inputs[4], dqr) : 0;
  return (e1 || e2 || e3 || e4 || e5) ? -1 : 0;
}

static const bert_node_type attention_rel_node = {"attention_rel", attention_rel_backward,
                                                  sizeof(attention_rel_state), 0};

bert_tensor *bert_attention_rel(bert_tensor *q, bert_tensor *k, bert_tensor *v, bert_tensor *kr, bert_tensor *qr,
                                bert_tensor *rows_in, const bert_attention_opts *o) {
  char s1[160], s2[160], s3[160];
  bert_tensor *in[7] = {q, k, v, kr, qr, rows_in, o->mask};
  const bert_backend *be;
  if (!BERT_DISPATCH(be, ATTENTION_REL, "attention_rel", 7, (const bert_tensor *const *)in))
    return NULL;
  if (check_qkv("query", q) || check_qkv("key", k) || check_qkv("value", v)) return NULL;
  int64_t B = q->shape[0], A = q->shape[1], Tq = q->shape[2], d = q->shape[3], Tk = k->shape[2];
  for (int i = 0; i < 4; i++) {
    int64_t want = i == 2 ? Tk : q->shape[i];
    if (k->shape[i] != want || v->shape[i] != want) {
      bert_set_error("attention_rel: query %s, key %s and value %s must agree in batch, heads and head_dim, "
                     "and key and value in length", SHAPE(s1, q), SHAPE(s2, k), SHAPE(s3, v));
      return NULL;
    }
  }
  if (Tk == 0 || Tq == 0) {
    bert_set_error("attention_rel: empty query %s or key %s", SHAPE(s1, q), SHAPE(s2, k));
    return NULL;
  }
  int64_t R = kr ? kr->shape[kr->ndim > 1 ? 1 : 0] : qr ? qr->shape[qr->ndim > 1 ? 1 : 0] : 1;
  for (int w = 0; w < 2; w++) {
    bert_tensor *t = w == 0 ? kr : qr;
    if (t && (t->dtype != BERT_F32 || t->ndim != 3 || t->shape[0] != A || t->shape[1] != R || t->shape[2] != d)) {
      bert_set_error("attention_rel: %s %s must be float32 [heads %lld x rows %lld x head_dim %lld]",
                     w == 0 ? "kr" : "qr", SHAPE(s1, t), (long long)A, (long long)R, (long long)d);
      return NULL;
    }
  }
  if (rows_in->dtype != BERT_I32 || rows_in->ndim != 2 || rows_in->shape[0] != Tq || rows_in->shape[1] != Tk) {
    bert_set_error("attention_rel: rows must be int32 [%lld x %lld], got %s %s", (long long)Tq, (long long)Tk,
                   SHAPE(s1, rows_in), bert_dtype_name(rows_in->dtype));
    return NULL;
  }
  if (!(o->dropout_p >= 0 && o->dropout_p < 1)) {
    bert_set_error("attention_rel: dropout must be in [0, 1), got %g", o->dropout_p);
    return NULL;
  }
  if (o->mask && (o->mask->ndim != 2 || o->mask->shape[0] != B || o->mask->shape[1] != Tk)) {
    bert_set_error("attention_rel: mask %s must be a [%lld x %lld] keep mask", SHAPE(s1, o->mask), (long long)B,
                   (long long)Tk);
    return NULL;
  }
  bert_tensor *rows = bert_contiguous(rows_in);
  if (rows == NULL) return NULL;
  bert_tensor *host = on_host(rows);
  if (host == NULL) { bert_tensor_release(rows); return NULL; }
  const int32_t *rw = bert_i32(host);
  for (int64_t x = 0; x < Tq * Tk; x++) {
    if (rw[x] < 0 || rw[x] >= R) {
      bert_set_error("attention_rel: rows[%lld][%lld] = %d is outside the %lld rows of the relative table",
                     (long long)(x / Tk), (long long)(x % Tk), (int)rw[x], (long long)R);
      bert_tensor_release(host);
      bert_tensor_release(rows);
      return NULL;
    }
  }
  bert_tensor_release(host);
  bert_attention_opts oc = *o;
  oc.mask = o->mask ? bert_contiguous(o->mask) : NULL;
  if (o->mask && oc.mask == NULL) { bert_tensor_release(rows); return NULL; }
  bert_stream s = {0, 0};
  if (o->training && o->dropout_p > 0) {
    uint64_t unused;
    bert_rng_get_state(&s.seed, &unused);
    s.offset = bert_rng_reserve_batch(B, A * Tq * Tk);   /* keyed by global sample, as attention's */
  }
  bert_tensor *lse = NULL;
  bert_node *node;
  bert_tensor *grad_in[5] = {q, k, v, kr, qr};
  bert_tensor *out = bert_record(be->attention_rel(q, k, v, kr, qr, rows, &oc, s, &lse), &node,
                                 &attention_rel_node, 5, grad_in);
  if (node) {
    attention_rel_state *st = node->state;
    st->opts = oc;
    st->opts.mask = NULL;
    st->stream = s;
    bert_node_save(node, q);
    bert_node_save(node, k);
    bert_node_save(node, v);
    bert_node_save(node, lse);
    bert_node_save(node, rows);
    if ((st->has_kr = kr != NULL)) bert_node_save(node, kr);
    if ((st->has_qr = qr != NULL)) bert_node_save(node, qr);
    if ((st->has_mask = oc.mask != NULL)) bert_node_save(node, oc.mask);
  }
  bert_tensor_release(lse);
  bert_tensor_release(rows);
  bert_tensor_release(oc.mask);
  return out;
}
/* }------------------------------------------------------ */
/* }====================================================== */
