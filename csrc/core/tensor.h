/*
** The tensor core: refcounted storage, strided views, dtypes, errors and
** memory accounting.  Pure C, no Lua: the binding layer (csrc/lua/) turns
** a failed call (NULL or -1 return) into a Lua error carrying
** bert_last_error().
*/
#ifndef BERT_TENSOR_H
#define BERT_TENSOR_H

#include <stddef.h>
#include <stdint.h>


#define BERT_MAX_DIMS 8

/* Computation dtypes.  float16, bfloat16 and int64 exist only in files and
** are converted on load (io/safetensors.c). */
typedef enum { BERT_F32 = 0, BERT_I32 = 1 } bert_dtype;

typedef enum {
  BERT_STORAGE_HEAP = 0,   /* malloc'ed, owned */
  BERT_STORAGE_MMAP = 1,   /* a private mapping of a file, munmap'ed at release */
  BERT_STORAGE_ANON = 2,   /* large zeroed memory mapped on demand (accounted) */
  BERT_STORAGE_DEVICE = 3  /* a device's memory (backend): data is NULL, never read on the host */
} bert_storage_kind;

typedef struct bert_storage {
  void *data;
  size_t nbytes;
  int refcount;
  bert_storage_kind kind;
  void *map_base;          /* BERT_STORAGE_MMAP: what to munmap */
  size_t map_len;
  uint64_t version;        /* bumped by in-place writes (autograd checks it) */
  void *device;            /* BERT_STORAGE_DEVICE: the backend's allocation */
  const struct bert_backend *backend;   /* the device it lives on; NULL: host memory */
} bert_storage;

struct bert_node;

typedef struct bert_tensor {
  bert_storage *storage;
  int64_t offset;                  /* in elements */
  int ndim;
  int64_t shape[BERT_MAX_DIMS];
  int64_t stride[BERT_MAX_DIMS];   /* in elements; 0 for expanded dims */
  bert_dtype dtype;
  int refcount;
  /* autograd (autograd.h) */
  int requires_grad;
  int graph_freed;                 /* backward already ran through this tensor */
  struct bert_tensor *grad;        /* accumulated gradient, or NULL */
  struct bert_node *grad_fn;       /* the op that produced it, NULL for leaves */
  uint64_t visit;                  /* traversal stamp used by backward */
} bert_tensor;

/* ---- errors: a thread-local message set by the failing function ---- */
const char *bert_last_error(void);
void bert_set_error(const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 1, 2)))
#endif
  ;
/* Writes "[2 x 3]" into buf (size >= 128 is always enough). */
char *bert_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);

/* ---- memory accounting (bytes currently held by storages) ---- */
size_t bert_mem_in_use(void);
size_t bert_mem_allocated_total(void);
void *bert_malloc(size_t nbytes);          /* accounted; sets error on failure */
void bert_free(void *p, size_t nbytes);
/* Accounts bytes held elsewhere (device memory): +n allocated, -n freed. */
void bert_mem_account(int64_t delta);
/* Freed large blocks are cached for reuse (see tensor.c); these inspect,
** bound and release that cache. */
size_t bert_mem_cached(void);
void bert_set_cache_limit(size_t bytes);      /* a fixed limit (0: cache nothing) */
void bert_set_cache_limit_auto(void);         /* the default: the peak bytes in use, 2 GB .. RAM / 2 */
size_t bert_cache_limit(void);
void bert_empty_cache(void);

/* ---- dtypes ---- */
size_t bert_dtype_size(bert_dtype dt);
const char *bert_dtype_name(bert_dtype dt);
int bert_dtype_from_name(const char *name, bert_dtype *out);   /* 0 ok, -1 unknown */

/* ---- storage ---- */
bert_storage *bert_storage_new(size_t nbytes);
bert_storage *bert_storage_wrap_mmap(void *base, size_t len, void *data, size_t nbytes);
void bert_storage_retain(bert_storage *s);
void bert_storage_release(bert_storage *s);

/* ---- tensor lifetime ---- */
/* Checks shape (non-negative sizes, overflow) and allocates zeroed memory. */
bert_tensor *bert_tensor_new(bert_dtype dt, int ndim, const int64_t *shape);
bert_tensor *bert_tensor_empty(bert_dtype dt, int ndim, const int64_t *shape);
/* A new tensor header over an existing storage (retains it). */
bert_tensor *bert_tensor_view_of(bert_storage *s, bert_dtype dt, int64_t offset,
                                 int ndim, const int64_t *shape, const int64_t *stride);
/* A second header over the same storage, shape and strides. */
bert_tensor *bert_alias(const bert_tensor *t);
void bert_tensor_retain(bert_tensor *t);
void bert_tensor_release(bert_tensor *t);

/* ---- inspection ---- */
int64_t bert_numel(const bert_tensor *t);
/* t seen as [outer, R, inner] around dim (0-based; dim < 0: everything is R),
** the layout every reduction and softmax walks. */
void bert_split_at_dim(const bert_tensor *t, int dim, int64_t *outer, int64_t *R, int64_t *inner);
int bert_is_contiguous(const bert_tensor *t);
static inline void *bert_data(const bert_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * bert_dtype_size(t->dtype);
}
static inline float *bert_f32(const bert_tensor *t) { return (float *)bert_data(t); }
static inline int32_t *bert_i32(const bert_tensor *t) { return (int32_t *)bert_data(t); }
/* Element at a flat row-major logical index, honouring strides, as double. */
double bert_get_flat(const bert_tensor *t, int64_t i);
void bert_set_flat(bert_tensor *t, int64_t i, double v);
int64_t bert_flat_offset(const bert_tensor *t, int64_t i);   /* elements */

/* ---- views (share storage; dims are 0-based here, the binding maps) ---- */
bert_tensor *bert_view(bert_tensor *t, int ndim, const int64_t *shape); /* -1 infers */
/* A view when the strides allow it, otherwise a contiguous copy viewed. */
bert_tensor *bert_reshape_copy(bert_tensor *t, int ndim, const int64_t *shape);
bert_tensor *bert_transpose(bert_tensor *t, int d0, int d1);
bert_tensor *bert_permute(bert_tensor *t, const int *perm);
bert_tensor *bert_narrow(bert_tensor *t, int dim, int64_t start, int64_t len);
bert_tensor *bert_select(bert_tensor *t, int dim, int64_t index);
bert_tensor *bert_squeeze(bert_tensor *t, int dim);      /* dim < 0: all size-1 dims */
bert_tensor *bert_unsqueeze(bert_tensor *t, int dim);
bert_tensor *bert_expand(bert_tensor *t, int ndim, const int64_t *shape);

/* ---- copies ---- */
bert_tensor *bert_contiguous(bert_tensor *t);   /* retains t itself when already contiguous */
bert_tensor *bert_clone(const bert_tensor *t);
bert_tensor *bert_to_dtype(const bert_tensor *t, bert_dtype dt);
/* dst[...] = src broadcast to dst's shape, converting dtype. */
int bert_copy_(bert_tensor *dst, const bert_tensor *src);
/* Does t have two indices mapping to one element (an expanded view)? */
int bert_has_overlap(const bert_tensor *t);

#endif
