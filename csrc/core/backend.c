/*
** The backend registry and the dispatch checks every op front-end runs
** (core/backend.h).
*/
#include <string.h>

#include "core/backend.h"

#define MAX_BACKENDS 8
static const bert_backend *backends[MAX_BACKENDS];
static int nbackends;
static const bert_backend *host;

int bert_backend_register(const bert_backend *be) {
  for (int i = 0; i < nbackends; i++)
    if (backends[i] == be) return 0;
  if (nbackends == MAX_BACKENDS) { bert_set_error("backend %s: too many backends", be->name); return -1; }
  backends[nbackends++] = be;
  if (be->is_host && host == NULL) host = be;
  return 0;
}

const bert_backend *bert_backend_find(const char *name) {
  for (int i = 0; i < nbackends; i++)
    if (strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}

const bert_backend *bert_backend_host(void) { return host; }

const bert_backend *bert_backend_for(const char *op, int n, const bert_tensor *const *ts) {
  const bert_backend *dev = NULL;
  for (int i = 0; i < n; i++) {
    const bert_tensor *t = ts[i];
    if (t == NULL || bert_is_host(t)) continue;
    if (dev && t->storage->backend != dev) {
      bert_set_error("%s: arguments on two devices (%s and %s): move them to one with t:to()", op,
                     dev->name, t->storage->backend->name);
      return NULL;
    }
    dev = t->storage->backend;
  }
  if (dev) return dev;
  if (host == NULL) { bert_set_error("%s: no cpu backend registered", op); return NULL; }
  return host;
}

/* be's entry for op is set (the list says which entry each op is). */
static int has_entry(const bert_backend *be, bert_op op) {
  switch (op) {
#define X(ID, entry) case BERT_OP_##ID: return be->entry != NULL;
    BERT_OPS(X)
#undef X
    default: return 0;
  }
}

int bert_backend_check(const bert_backend *be, bert_op op, const char *name, int n,
                       const bert_tensor *const *args) {
  const char *why = NULL;
  if (has_entry(be, op) && (be->supports_op == NULL || be->supports_op(op, n, args, &why))) return 0;
  bert_set_error("%s: not supported on device %s%s%s%s", name, be->name, why ? " (" : "", why ? why : "",
                 why ? ")" : be->is_host ? "" : " (move the tensors with t:to(\"cpu\"))");
  return -1;
}
