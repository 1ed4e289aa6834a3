/*
** Reverse-mode automatic differentiation: graph building, gradient
** accumulation and the backward pass (see autograd.h).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/backend.h"

static int grad_enabled = 1;

int bert_grad_enabled(void) { return grad_enabled; }
void bert_set_grad_enabled(int on) { grad_enabled = on != 0; }

int bert_needs_grad(int n, bert_tensor *const *inputs) {
  if (!grad_enabled) return 0;
  for (int k = 0; k < n; k++)
    if (inputs[k] && inputs[k]->requires_grad) return 1;
  return 0;
}

/* {====================================================== nodes */

bert_node *bert_node_new(const bert_node_type *type, int n, bert_tensor *const *inputs) {
  /* the node and its state in one block */
  size_t head = (sizeof(bert_node) + 15) / 16 * 16;
  bert_node *node = calloc(1, head + type->state_size);
  if (node == NULL) { bert_set_error("%s: out of memory recording the graph", type->name); return NULL; }
  node->type = type;
  node->name = type->name;
  node->state = type->state_size ? (char *)node + head : NULL;
  node->refcount = 1;
  node->ninputs = n;
  for (int k = 0; k < n; k++) {
    node->inputs[k] = inputs[k];
    if (inputs[k]) bert_tensor_retain(inputs[k]);
  }
  return node;
}

void bert_node_save(bert_node *node, bert_tensor *t) {
  int k = node->nsaved++;
  node->saved[k] = t;
  node->saved_version[k] = t->storage ? t->storage->version : 0;
  bert_tensor_retain(t);
}

bert_tensor *bert_node_saved(bert_node *node, int k) {
  bert_tensor *t = node->saved[k];
  if (t->storage == NULL || t->storage->version != node->saved_version[k]) {
    bert_set_error("%s backward: a tensor saved for the gradient was modified in place "
                   "(or freed) after the forward pass", node->name);
    return NULL;
  }
  return t;
}

bert_tensor *bert_record(bert_tensor *out, bert_node **node, const bert_node_type *type, int n,
                         bert_tensor *const *inputs) {
  *node = NULL;
  if (out == NULL || !bert_needs_grad(n, inputs)) return out;
  *node = bert_node_new(type, n, inputs);
  if (*node == NULL) { bert_tensor_release(out); return NULL; }
  bert_attach(out, *node);
  return out;
}

void bert_attach(bert_tensor *out, bert_node *node) {
  if (out->grad_fn) bert_node_release(out->grad_fn);
  out->grad_fn = node;
  out->requires_grad = 1;
}

/* Releasing a node releases its inputs, which may release their nodes:
** a long chain would recurse once per node, so nodes whose count drops to
** zero are queued and freed by the outermost call instead. */
static bert_node **dead;
static size_t ndead, capdead;
static int draining;

void bert_node_release(bert_node *node) {
  if (node == NULL || --node->refcount > 0) return;
  if (ndead == capdead) {
    size_t cap = capdead ? 2 * capdead : 64;
    bert_node **p = realloc(dead, cap * sizeof *p);
    if (p == NULL) return;   /* leak rather than crash under memory exhaustion */
    dead = p;
    capdead = cap;
  }
  dead[ndead++] = node;
  if (draining) return;
  draining = 1;
  while (ndead > 0) {
    bert_node *n = dead[--ndead];
    if (n->on_free) n->on_free(n);
    for (int k = 0; k < n->ninputs; k++) bert_tensor_release(n->inputs[k]);
    for (int k = 0; k < n->nsaved; k++) bert_tensor_release(n->saved[k]);
    free(n);
  }
  draining = 0;
}
/* }====================================================== */

/* {====================================================== gradients */

bert_tensor *bert_sum_to_shape(const bert_tensor *g, int ndim, const int64_t *shape) {
  bert_tensor *cur = (bert_tensor *)g;
  bert_tensor_retain(cur);
  int lead = cur->ndim - ndim;
  /* sum away extra leading dims, then dims that were broadcast from 1 */
  for (int d = 0; d < cur->ndim; d++) {
    int td = d - lead;
    int reduce = td < 0 || (shape[td] == 1 && cur->shape[d] != 1);
    if (!reduce) continue;
    bert_tensor *r = bert_reduce(BERT_SUM, cur, d, 1, 0, NULL);
    bert_tensor_release(cur);
    if (r == NULL) return NULL;
    cur = r;
  }
  if (cur->ndim != ndim) {
    bert_tensor *v = bert_view(cur, ndim, shape);
    if (v == NULL) {   /* not contiguous after reductions: copy first */
      bert_tensor *c = bert_contiguous(cur);
      v = c ? bert_view(c, ndim, shape) : NULL;
      bert_tensor_release(c);
    }
    bert_tensor_release(cur);
    cur = v;
  }
  return cur;
}

bert_tensor *bert_grad_target(bert_tensor *t) {
  bert_tensor *g = t ? t->grad : NULL;
  if (g == NULL || g->dtype != BERT_F32 || !bert_is_contiguous(g) || g->ndim != t->ndim ||
      g->storage->backend != t->storage->backend ||
      memcmp(g->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)) != 0)
    return NULL;
  return g;
}

float *bert_grad_buffer(bert_tensor *t, int *accumulate) {
  *accumulate = 0;
  if (t == NULL || !t->requires_grad || !bert_is_host(t)) return NULL;   /* device: no host pointer */
  if (t->grad == NULL) {
    t->grad = bert_tensor_empty(BERT_F32, t->ndim, t->shape);
    return t->grad ? bert_f32(t->grad) : NULL;
  }
  bert_tensor *g = t->grad;
  if (g->dtype != BERT_F32 || !bert_is_contiguous(g) || bert_has_overlap(g) || g->ndim != t->ndim ||
      memcmp(g->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)) != 0)
    return NULL;
  *accumulate = 1;
  return bert_f32(g);
}

int bert_accumulate_grads_steal(bert_tensor *const *in, bert_tensor **grad, int n) {
  int rc = 0;
  for (int k = 0; k < n; k++) {
    if (grad[k] && rc == 0) rc = bert_accumulate_grad_steal(in[k], grad[k]);
    else bert_tensor_release(grad[k]);
    grad[k] = NULL;
  }
  return rc;
}

int bert_accumulate_grad_steal(bert_tensor *t, bert_tensor *g) {
  int rc = 0;
  /* a leaf's gradient is contiguous (optimizers and users read it); an
  ** intermediate one may keep any non-overlapping strides (a transposed
  ** view of attention's result), for a view's backward to see through */
  int layout_ok = bert_is_contiguous(g) || (t && t->grad_fn != NULL && !bert_has_overlap(g));
  if (t && t->requires_grad && t->grad == NULL && layout_ok && g->refcount == 1 &&
      g->ndim == t->ndim && memcmp(g->shape, t->shape, (size_t)t->ndim * sizeof(int64_t)) == 0) {
    t->grad = g;   /* the first contribution becomes the gradient, no copy */
    return 0;
  }
  rc = bert_accumulate_grad(t, g);
  bert_tensor_release(g);
  return rc;
}

int bert_accumulate_grad(bert_tensor *t, const bert_tensor *g) {
  char b1[160], b2[160];
  if (t == NULL || !t->requires_grad) return 0;
  bert_tensor *gs = bert_sum_to_shape(g, t->ndim, t->shape);
  if (gs == NULL) return -1;
  int same = gs->ndim == t->ndim;
  for (int d = 0; same && d < t->ndim; d++) same = gs->shape[d] == t->shape[d];
  if (!same) {
    bert_set_error("gradient of shape %s does not match its tensor %s",
                   bert_shape_str(b1, sizeof b1, g->ndim, g->shape),
                   bert_shape_str(b2, sizeof b2, t->ndim, t->shape));
    bert_tensor_release(gs);
    return -1;
  }
  if (t->grad == NULL) {
    /* first contribution: keep a private contiguous copy (or the sum itself) */
    if (gs != g && bert_is_contiguous(gs) && gs->refcount == 1) { t->grad = gs; return 0; }
    t->grad = bert_clone(gs);
    bert_tensor_release(gs);
    return t->grad ? 0 : -1;
  }
  bert_tensor *r = bert_binary(BERT_ADD, t->grad, gs, 1.0, t->grad);
  bert_tensor_release(gs);
  if (r == NULL) return -1;
  bert_tensor_release(r);
  return 0;
}
/* }====================================================== */

/* {====================================================== backward */

typedef struct { bert_tensor **v; size_t n, cap; } tlist;

static int tlist_push(tlist *l, bert_tensor *t) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 256;
    bert_tensor **p = realloc(l->v, cap * sizeof *p);
    if (p == NULL) { bert_set_error("backward: out of memory"); return -1; }
    l->v = p;
    l->cap = cap;
  }
  l->v[l->n++] = t;
  return 0;
}

/* Post-order of the graph from root (iterative DFS; stamps mark visits). */
static int topo_sort(bert_tensor *root, tlist *order, uint64_t stamp) {
  tlist stack = {0}, next = {0};   /* next[i]: index of the next input to visit */
  int rc = 0;
  root->visit = stamp;
  if (tlist_push(&stack, root) || tlist_push(&next, NULL)) { rc = -1; goto done; }
  while (stack.n > 0) {
    bert_tensor *t = stack.v[stack.n - 1];
    size_t k = (size_t)next.v[next.n - 1];
    bert_node *node = t->grad_fn;
    if (node && k < (size_t)node->ninputs) {
      next.v[next.n - 1] = (bert_tensor *)(k + 1);
      bert_tensor *in = node->inputs[k];
      if (in && in->graph_freed) {
        bert_set_error("part of this graph was freed by an earlier backward: a result of an "
                       "earlier forward pass was reused (run the forward pass again)");
        rc = -1;
        goto done;
      }
      if (in && in->requires_grad && in->visit != stamp) {
        in->visit = stamp;
        if (tlist_push(&stack, in) || tlist_push(&next, NULL)) { rc = -1; goto done; }
      }
      continue;
    }
    stack.n--;
    next.n--;
    bert_tensor_retain(t);
    if (tlist_push(order, t)) { bert_tensor_release(t); rc = -1; goto done; }
  }
done:
  free(stack.v);
  free(next.v);
  return rc;
}

/* {====================================================== anomaly detection */

/* With anomaly detection on (bert.set_detect_anomaly(true)), backward checks
** the gradient each node hands to its inputs and remembers the first op
** whose backward produced a NaN or Inf; bert_nonfinite_origin() walks a
** graph in forward order for the first op whose output went non-finite
** from finite inputs.  Host tensors only (device tensors are skipped). */
static int anomaly_on;
static _Thread_local char anomaly_msg[400];

void bert_set_detect_anomaly(int on) { anomaly_on = on != 0; }
int bert_detect_anomaly(void) { return anomaly_on; }
const char *bert_anomaly_report(void) { return anomaly_msg[0] ? anomaly_msg : NULL; }

int64_t bert_first_nonfinite(const bert_tensor *t) {
  if (t == NULL || t->storage == NULL || !bert_is_host(t) || t->dtype != BERT_F32) return -1;
  int64_t n = bert_numel(t);
  if (bert_is_contiguous(t)) {
    const float *p = bert_f32(t);
    for (int64_t i = 0; i < n; i++) if (!isfinite(p[i])) return i;
    return -1;
  }
  for (int64_t i = 0; i < n; i++) if (!isfinite(bert_get_flat(t, i))) return i;
  return -1;
}

static void note_backward_anomaly(const bert_node *node) {
  if (anomaly_msg[0]) return;   /* the first one is the one to fix */
  for (int j = 0; j < node->ninputs; j++) {
    const bert_tensor *in = node->inputs[j];
    if (in == NULL || in->grad == NULL) continue;
    int64_t k = bert_first_nonfinite(in->grad);
    if (k < 0) continue;
    char b[160];
    snprintf(anomaly_msg, sizeof anomaly_msg,
             "%s backward gave a non-finite gradient (%g at flat index %lld) for its input %d %s",
             node->name, bert_get_flat(in->grad, k), (long long)k, j + 1,
             bert_shape_str(b, sizeof b, in->ndim, in->shape));
    return;
  }
}

static int topo_sort(bert_tensor *root, tlist *order, uint64_t stamp);
static uint64_t backward_stamp;

int bert_nonfinite_origin(bert_tensor *root, char *buf, size_t size) {
  tlist order = {0};
  if (topo_sort(root, &order, ++backward_stamp) != 0) return -1;
  buf[0] = '\0';
  for (size_t k = 0; k < order.n && !buf[0]; k++) {
    bert_tensor *t = order.v[k];
    int64_t at = bert_first_nonfinite(t);
    if (at < 0) continue;
    char b[160];
    bert_node *node = t->grad_fn;
    if (node == NULL) {
      snprintf(buf, size, "a leaf tensor %s (a parameter or an input that requires grad) already holds %g",
               bert_shape_str(b, sizeof b, t->ndim, t->shape), bert_get_flat(t, at));
      break;
    }
    int bad_input = 0;
    for (int j = 0; j < node->ninputs && !bad_input; j++)
      bad_input = bert_first_nonfinite(node->inputs[j]) >= 0;
    if (!bad_input)
      snprintf(buf, size, "%s gave %g at flat index %lld of its output %s from finite inputs",
               node->name, bert_get_flat(t, at), (long long)at,
               bert_shape_str(b, sizeof b, t->ndim, t->shape));
  }
  for (size_t k = 0; k < order.n; k++) bert_tensor_release(order.v[k]);
  free(order.v);
  return 0;
}
/* }====================================================== */

/* BERT_PROFILE set: the time spent in each kind of node, summed over the
** outermost backward passes (a recomputation's inner pass is inside its
** "recompute" node) until bert_backward_profile reads and resets it. */
#define PROF_MAX 96
static bert_prof_entry prof[PROF_MAX];
static int nprof;

static void prof_add(const char *name, double dt) {
  for (int k = 0; k < nprof; k++)
    if (prof[k].name == name || strcmp(prof[k].name, name) == 0) { prof[k].seconds += dt; prof[k].calls++; return; }
  if (nprof < PROF_MAX) { prof[nprof].name = name; prof[nprof].seconds = dt; prof[nprof].calls = 1; nprof++; }
}

int bert_backward_profile(bert_prof_entry *out, int max, int reset) {
  int n = nprof < max ? nprof : max;
  for (int k = 0; k < n; k++) out[k] = prof[k];
  if (reset) nprof = 0;
  return n;
}

static int profiling = -1;   /* -1: not decided yet (BERT_PROFILE read on first use) */

int bert_profiling(void) {
  if (profiling < 0) profiling = getenv("BERT_PROFILE") != NULL;
  return profiling;
}

void bert_set_profiling(int on) { profiling = on != 0; }

static bert_backward_hook backward_hook;
static void *backward_hook_ud;

void bert_set_backward_hook(bert_backward_hook fn, void *ud) {
  backward_hook = fn;
  backward_hook_ud = ud;
}

int bert_backward(bert_tensor *root, const bert_tensor *grad) {
  int profile = bert_profiling();
  char b1[160], b2[160];
  anomaly_msg[0] = '\0';
  if (root->graph_freed) {
    bert_set_error("the graph behind this tensor was already freed by an earlier backward "
                   "(run the forward pass again)");
    return -1;
  }
  if (!root->requires_grad) {
    bert_set_error("the tensor does not require grad and has no grad_fn "
                   "(no input of its computation has requires_grad set)");
    return -1;
  }
  bert_tensor *seed;
  if (grad == NULL) {
    if (bert_numel(root) != 1) {
      bert_set_error("backward without a gradient needs a 1-element tensor, got %s "
                     "(pass the gradient of the output)",
                     bert_shape_str(b1, sizeof b1, root->ndim, root->shape));
      return -1;
    }
    seed = bert_backend_of(root)->empty(BERT_F32, root->ndim, root->shape);
    if (seed == NULL || bert_fill_(seed, 1.0) != 0) { bert_tensor_release(seed); return -1; }
  } else {
    int same = grad->ndim == root->ndim;
    for (int d = 0; same && d < root->ndim; d++) same = grad->shape[d] == root->shape[d];
    if (!same) {
      bert_set_error("gradient %s does not match the tensor %s",
                     bert_shape_str(b1, sizeof b1, grad->ndim, grad->shape),
                     bert_shape_str(b2, sizeof b2, root->ndim, root->shape));
      return -1;
    }
    seed = bert_to_dtype(grad, BERT_F32);
    if (seed == NULL) return -1;
    if (!bert_is_host(root) && bert_is_host(seed)) {   /* the gradient of a device root, on the device */
      bert_tensor *d = root->storage->backend->from_host(seed);
      bert_tensor_release(seed);
      if ((seed = d) == NULL) return -1;
    }
  }
  tlist order = {0};
  int rc = topo_sort(root, &order, ++backward_stamp);
  if (rc == 0 && root->grad_fn == NULL) {
    /* a leaf: backward just accumulates the seed */
    rc = bert_accumulate_grad(root, seed);
  } else if (rc == 0) {
    /* non-leaf gradients live in ->grad during the pass, then are dropped */
    bert_tensor_release(root->grad);
    root->grad = seed;
    bert_tensor_retain(seed);
    /* the hook (gradient reduction while backward runs) sees only outermost
    ** passes whose graph names every leaf it writes: a nested backward (a
    ** recomputation's) or a graph holding one would make leaves final
    ** later than the graph says; their gradients are then reduced after
    ** the pass */
    static int depth;
    bert_backward_hook hook = depth == 0 ? backward_hook : NULL;
    for (size_t k = 0; hook && k < order.n; k++)
      if (order.v[k]->grad_fn && order.v[k]->grad_fn->hidden_grads) hook = NULL;
    depth++;
    for (size_t k = order.n; k-- > 0 && rc == 0;) {
      bert_tensor *t = order.v[k];
      bert_node *node = t->grad_fn;
      if (node == NULL || t->grad == NULL) continue;
      double t0 = profile && depth == 1 ? omp_get_wtime() : 0;
      bert_tensor *g = t->grad;
      if (node->type->strided_grad) bert_tensor_retain(g);
      else if ((g = bert_contiguous(t->grad)) == NULL) { rc = -1; break; }
      int brc = node->type->backward(node, t, g);
      if (profile && depth == 1) prof_add(node->name, omp_get_wtime() - t0);
      if (anomaly_on && brc == 0) note_backward_anomaly(node);
      if (brc != 0) {
        if (strncmp(bert_last_error(), node->name, strlen(node->name)) != 0) {
          char msg[512];
          snprintf(msg, sizeof msg, "%s backward: %s", node->name, bert_last_error());
          bert_set_error("%s", msg);
        }
        rc = -1;
      }
      bert_tensor_release(g);
      if (rc == 0 && hook) rc = hook(backward_hook_ud, order.v, order.n, k);
    }
    depth--;
  }
  /* free the graph: every non-leaf drops its node and its gradient */
  for (size_t k = 0; k < order.n; k++) {
    bert_tensor *t = order.v[k];
    if (t->grad_fn) {
      bert_node_release(t->grad_fn);
      t->grad_fn = NULL;
      bert_tensor_release(t->grad);
      t->grad = NULL;
      t->graph_freed = 1;
    }
  }
  for (size_t k = 0; k < order.n; k++) bert_tensor_release(order.v[k]);
  free(order.v);
  bert_tensor_release(seed);
  return rc;
}
/* }====================================================== */
