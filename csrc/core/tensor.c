/*
** Tensor core: storage, views, copies, errors, memory accounting.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/tensor.h"
#include "core/checked.h"
#include "core/autograd.h"
#include "core/iter.h"
#include "core/backend.h"

/* {====================================================== errors */

static _Thread_local char error_buf[512];

const char *bert_last_error(void) { return error_buf; }

void bert_set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_buf, sizeof error_buf, fmt, ap);
  va_end(ap);
}

char *bert_shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
  size_t n = 0;
  n += (size_t)snprintf(buf + n, size - n, "[");
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, i ? " x %lld" : "%lld", (long long)shape[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}
/* }====================================================== */

/* {====================================================== memory */

static size_t mem_in_use;   /* updated with atomic builtins */
static size_t mem_total;    /* bytes ever allocated: paces the Lua GC */

size_t bert_mem_in_use(void) { return __atomic_load_n(&mem_in_use, __ATOMIC_RELAXED); }
size_t bert_mem_allocated_total(void) { return __atomic_load_n(&mem_total, __ATOMIC_RELAXED); }

/* Freed blocks of CACHE_MIN bytes or more are kept for reuse, by size: a
** training step allocates the same activation sizes every step, and fresh
** pages from the kernel cost a page fault and a zeroing each.  FIFO
** eviction above the limit; everything is given back when memory runs out.
** Large blocks come in eight size classes per power of two (at most 12.5%
** more than asked, in pages never touched unless a larger request reuses
** the block), so shapes that vary a little from step to step, such as
** packed batches of [real tokens, H], still find a block.
** The limit follows the most bytes ever in use at once (at least 2 GB, at
** most half the machine's memory) unless set: a step's activations are
** freed in its backward and wanted again in the next forward, and a cache
** smaller than them sends the rest back to the kernel every step (BERT-base
** at B 32 x T 256 spent half its CPU time in page faults with a 2 GB cache:
** 35-36 s a step against 24-25 s). */
#define CACHE_MIN ((size_t)256 << 10)
#define CACHE_SLOTS 1024
#define CACHE_LIMIT_FLOOR ((size_t)2 << 30)

static struct { void *p; size_t size; } cache[CACHE_SLOTS];
static int cache_n;
static size_t cache_bytes, cache_limit;   /* cache_limit 0 with cache_auto: follow the peak */
static int cache_auto = 1;
static size_t mem_peak;                   /* the most bytes in use at once (atomic builtins) */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t half_physical_memory(void) {
  static size_t half;
  if (half == 0) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    half = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 2 : CACHE_LIMIT_FLOOR;
  }
  return half;
}

static size_t current_cache_limit(void) {   /* cache_lock held */
  if (!cache_auto) return cache_limit;
  size_t limit = __atomic_load_n(&mem_peak, __ATOMIC_RELAXED);
  if (limit < CACHE_LIMIT_FLOOR) limit = CACHE_LIMIT_FLOOR;
  if (limit > half_physical_memory()) limit = half_physical_memory();
  return limit;
}

static size_t block_size(size_t nbytes) {
  size_t align = 64;
  if (nbytes >= CACHE_MIN) {
    align = 4096;
    while (align <= nbytes / 16) align <<= 1;   /* the largest power of two <= nbytes / 8 */
  }
  size_t r = (nbytes + align - 1) & ~(align - 1);
  return r ? r : 64;
}

static void cache_drop_oldest(void) {   /* cache_lock held */
  free(cache[0].p);
  cache_bytes -= cache[0].size;
  memmove(cache, cache + 1, (size_t)(cache_n - 1) * sizeof cache[0]);
  cache_n--;
}

void bert_empty_cache(void) {
  pthread_mutex_lock(&cache_lock);
  while (cache_n > 0) cache_drop_oldest();
  pthread_mutex_unlock(&cache_lock);
}

size_t bert_mem_cached(void) { return cache_bytes; }

void bert_set_cache_limit(size_t bytes) {
  pthread_mutex_lock(&cache_lock);
  cache_limit = bytes;
  cache_auto = 0;
  while (cache_n > 0 && cache_bytes > cache_limit) cache_drop_oldest();
  pthread_mutex_unlock(&cache_lock);
}

void bert_set_cache_limit_auto(void) {
  pthread_mutex_lock(&cache_lock);
  cache_auto = 1;
  pthread_mutex_unlock(&cache_lock);
}

size_t bert_cache_limit(void) {
  pthread_mutex_lock(&cache_lock);
  size_t limit = current_cache_limit();
  pthread_mutex_unlock(&cache_lock);
  return limit;
}

/* Blocks of HUGE_MIN bytes or more sit on 2 MB boundaries and ask the kernel
** for transparent huge pages (where THP is "madvise", the common default,
** memory gets 4 KB pages otherwise): the GEMMs' packing and the elementwise
** passes walk tens of megabytes per op, and with 4 KB pages every 4 KB is a
** TLB entry (a second-level TLB covers 6-8 MB).  Smaller blocks keep the
** 64-byte alignment that suits AVX-512 loads and BLAS. */
#define HUGE_MIN ((size_t)4 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

static void *fresh_block(size_t size) {
  if (size < HUGE_MIN) return aligned_alloc(64, size);
  void *p = aligned_alloc(HUGE_PAGE, (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);   /* advice only */
#endif
  return p;
}

void *bert_malloc(size_t nbytes) {
  size_t size = block_size(nbytes);
  void *p = NULL;
  if (size >= CACHE_MIN) {
    pthread_mutex_lock(&cache_lock);
    for (int k = cache_n - 1; k >= 0; k--)
      if (cache[k].size == size) {
        p = cache[k].p;
        cache_bytes -= size;
        memmove(cache + k, cache + k + 1, (size_t)(cache_n - k - 1) * sizeof cache[0]);
        cache_n--;
        break;
      }
    /* A miss takes fresh memory: first give back cached blocks until what is
    ** in use, what is cached and the new block fit the limit together.
    ** Otherwise a workload whose sizes change (padded, then packed batches)
    ** keeps the old sizes cached beside the new ones: BERT-base fine-tuning
    ** at B 32 x T 256 grew to the whole 24 GB machine and was killed. */
    if (p == NULL) {
      size_t limit = current_cache_limit(), used = __atomic_load_n(&mem_in_use, __ATOMIC_RELAXED);
      while (cache_n > 0 && used + cache_bytes + size > limit) cache_drop_oldest();
    }
    pthread_mutex_unlock(&cache_lock);
  }
  if (p == NULL) p = fresh_block(size);
  if (p == NULL && cache_n > 0) {   /* out of memory: give the cache back, retry */
    bert_empty_cache();
    p = fresh_block(size);
  }
  if (p == NULL) {
    bert_set_error("out of memory allocating %zu bytes", nbytes);
    return NULL;
  }
  size_t now = __atomic_add_fetch(&mem_in_use, nbytes, __ATOMIC_RELAXED);
  __atomic_add_fetch(&mem_total, nbytes, __ATOMIC_RELAXED);
  size_t peak = __atomic_load_n(&mem_peak, __ATOMIC_RELAXED);
  while (now > peak && !__atomic_compare_exchange_n(&mem_peak, &peak, now, 1, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED)) {}
  return p;
}

void bert_mem_account(int64_t delta) {
  if (delta >= 0) {
    __atomic_add_fetch(&mem_in_use, (size_t)delta, __ATOMIC_RELAXED);
    __atomic_add_fetch(&mem_total, (size_t)delta, __ATOMIC_RELAXED);
  } else __atomic_sub_fetch(&mem_in_use, (size_t)-delta, __ATOMIC_RELAXED);
}

void bert_free(void *p, size_t nbytes) {
  if (p == NULL) return;
  __atomic_sub_fetch(&mem_in_use, nbytes, __ATOMIC_RELAXED);
  size_t size = block_size(nbytes);
  if (size >= CACHE_MIN) {
    pthread_mutex_lock(&cache_lock);
    size_t limit = current_cache_limit();
    if (size <= limit) {
      while (cache_n > 0 && (cache_n == CACHE_SLOTS || cache_bytes + size > limit)) cache_drop_oldest();
      cache[cache_n].p = p;
      cache[cache_n].size = size;
      cache_n++;
      cache_bytes += size;
      pthread_mutex_unlock(&cache_lock);
      return;
    }
    pthread_mutex_unlock(&cache_lock);
  }
  free(p);
}
/* }====================================================== */

/* {====================================================== dtypes */

size_t bert_dtype_size(bert_dtype dt) { (void)dt; return 4; }

const char *bert_dtype_name(bert_dtype dt) {
  return dt == BERT_F32 ? "float32" : "int32";
}

int bert_dtype_from_name(const char *name, bert_dtype *out) {
  if (strcmp(name, "float32") == 0 || strcmp(name, "float") == 0) { *out = BERT_F32; return 0; }
  if (strcmp(name, "int32") == 0 || strcmp(name, "int") == 0) { *out = BERT_I32; return 0; }
  return -1;
}
/* }====================================================== */

/* {====================================================== storage */

bert_storage *bert_storage_new(size_t nbytes) {
  bert_storage *s = malloc(sizeof *s);
  if (s == NULL) { bert_set_error("out of memory"); return NULL; }
  s->data = bert_malloc(nbytes);
  if (s->data == NULL) { free(s); return NULL; }
  s->nbytes = nbytes;
  s->refcount = 1;
  s->kind = BERT_STORAGE_HEAP;
  s->map_base = NULL;
  s->map_len = 0;
  s->version = 0;
  s->device = NULL;
  s->backend = NULL;
  return s;
}

bert_storage *bert_storage_wrap_mmap(void *base, size_t len, void *data, size_t nbytes) {
  bert_storage *s = malloc(sizeof *s);
  if (s == NULL) { bert_set_error("out of memory"); return NULL; }
  s->data = data;
  s->nbytes = nbytes;
  s->refcount = 1;
  s->kind = BERT_STORAGE_MMAP;
  s->map_base = base;
  s->map_len = len;
  s->version = 0;
  s->device = NULL;
  s->backend = NULL;
  return s;
}

void bert_storage_retain(bert_storage *s) { s->refcount++; }

void bert_storage_release(bert_storage *s) {
  if (s == NULL || --s->refcount > 0) return;
  if (s->kind == BERT_STORAGE_HEAP) bert_free(s->data, s->nbytes);
  else if (s->kind == BERT_STORAGE_DEVICE) s->backend->storage_free(s);
  else {
    munmap(s->map_base, s->map_len);
    if (s->kind == BERT_STORAGE_ANON) __atomic_sub_fetch(&mem_in_use, s->nbytes, __ATOMIC_RELAXED);
  }
  free(s);
}
/* }====================================================== */

/* {====================================================== tensors */

static void set_contiguous_strides(bert_tensor *t) {
  int64_t st = 1;
  for (int i = t->ndim - 1; i >= 0; i--) { t->stride[i] = st; st *= t->shape[i]; }
}

/* Validates a shape; returns the element count or -1 with the error set. */
static int64_t checked_numel(int ndim, const int64_t *shape) {
  char buf[160];
  if (ndim < 0 || ndim > BERT_MAX_DIMS) {
    bert_set_error("%d dimensions requested, at most %d supported", ndim, BERT_MAX_DIMS);
    return -1;
  }
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) {
      bert_set_error("size %lld of dimension %d is negative in shape %s",
                     (long long)shape[i], i + 1, bert_shape_str(buf, sizeof buf, ndim, shape));
      return -1;
    }
  int64_t n;
  if (bert_shape_numel(ndim, shape, &n) != 0) {
    bert_set_error("shape %s is too large (more than 2^40 elements, counting size-0 dimensions as 1)",
                   bert_shape_str(buf, sizeof buf, ndim, shape));
    return -1;
  }
  return n;
}

/* Does a view of this shape and strides at offset stay inside s?  Every
** tensor header is made here, so get/set/select and the kernels may trust
** shape, strides and offset. */
static int view_in_bounds(const bert_storage *s, bert_dtype dt, int64_t offset, int ndim,
                          const int64_t *shape, const int64_t *stride) {
  int64_t lo = offset, hi = offset;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 0) return 1;   /* no elements: nothing to reach */
    int64_t reach;
    if (bert_mul_i64(shape[i] - 1, stride[i], &reach) != 0) return 0;
    if (bert_add_i64(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi) != 0) return 0;
  }
  int64_t esz = (int64_t)bert_dtype_size(dt);
  return lo >= 0 && hi < (int64_t)(s->nbytes / (size_t)esz);
}

bert_tensor *bert_tensor_view_of(bert_storage *s, bert_dtype dt, int64_t offset,
                                 int ndim, const int64_t *shape, const int64_t *stride) {
  if (checked_numel(ndim, shape) < 0) return NULL;
  bert_tensor *t = malloc(sizeof *t);
  if (t == NULL) { bert_set_error("out of memory"); return NULL; }
  memset(t, 0, sizeof *t);
  t->storage = s;
  if (s) bert_storage_retain(s);
  t->offset = offset;
  t->ndim = ndim;
  t->dtype = dt;
  t->refcount = 1;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  if (stride) for (int i = 0; i < ndim; i++) t->stride[i] = stride[i];
  else set_contiguous_strides(t);
  if (s && !view_in_bounds(s, dt, offset, ndim, t->shape, t->stride)) {
    char b[160];
    bert_set_error("a view of shape %s at offset %lld reaches outside its storage of %zu bytes",
                   bert_shape_str(b, sizeof b, ndim, shape), (long long)offset, s->nbytes);
    bert_tensor_release(t);
    return NULL;
  }
  return t;
}

bert_tensor *bert_tensor_empty(bert_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = checked_numel(ndim, shape);
  if (n < 0) return NULL;
  bert_storage *s = bert_storage_new((size_t)n * bert_dtype_size(dt));
  if (s == NULL) return NULL;
  bert_tensor *t = bert_tensor_view_of(s, dt, 0, ndim, shape, NULL);
  bert_storage_release(s);   /* the tensor holds the only reference now */
  return t;
}

/* Zeroed tensors of ANON_MIN bytes or more are mapped from the kernel's
** zero pages, which cost memory only once written: a model's flat
** gradient buffer takes no RAM until the first backward. */
#define ANON_MIN ((size_t)16 << 20)

/* nbytes of zero pages starting on a 2 MB boundary, with huge pages asked
** for (see fresh_block): the optimizer's passes stream over these buffers. */
static void *map_zeroed(size_t nbytes) {
  size_t len = nbytes + HUGE_PAGE;
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  char *start = (char *)(((uintptr_t)p + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  size_t page = (size_t)sysconf(_SC_PAGE_SIZE);
  size_t tail = (size_t)(p + len - (start + nbytes)) / page * page;   /* whole pages only */
  if (start > p) munmap(p, (size_t)(start - p));
  if (tail > 0) munmap(p + len - tail, tail);
#ifdef MADV_HUGEPAGE
  madvise(start, nbytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);   /* advice only */
#endif
  return start;
}

bert_tensor *bert_tensor_new(bert_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = checked_numel(ndim, shape);
  if (n < 0) return NULL;
  size_t nbytes = (size_t)n * bert_dtype_size(dt);
  if (nbytes >= ANON_MIN) {
    void *p = map_zeroed(nbytes);
    if (p != NULL) {
      bert_storage *s = bert_storage_wrap_mmap(p, nbytes, p, nbytes);
      if (s == NULL) { munmap(p, nbytes); return NULL; }
      s->kind = BERT_STORAGE_ANON;
      __atomic_add_fetch(&mem_in_use, nbytes, __ATOMIC_RELAXED);
      __atomic_add_fetch(&mem_total, nbytes, __ATOMIC_RELAXED);
      bert_tensor *t = bert_tensor_view_of(s, dt, 0, ndim, shape, NULL);
      bert_storage_release(s);
      return t;
    }
  }
  bert_tensor *t = bert_tensor_empty(dt, ndim, shape);
  if (t) memset(t->storage->data, 0, t->storage->nbytes);
  return t;
}

bert_tensor *bert_alias(const bert_tensor *t) {
  return bert_tensor_view_of(t->storage, t->dtype, t->offset, t->ndim, t->shape, t->stride);
}

void bert_tensor_retain(bert_tensor *t) { t->refcount++; }

void bert_tensor_release(bert_tensor *t) {
  if (t == NULL || --t->refcount > 0) return;
  bert_tensor_release(t->grad);
  if (t->grad_fn) bert_node_release(t->grad_fn);
  bert_storage_release(t->storage);
  free(t);
}

int64_t bert_numel(const bert_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

void bert_split_at_dim(const bert_tensor *t, int dim, int64_t *outer, int64_t *R, int64_t *inner) {
  *outer = *inner = 1;
  if (dim < 0) { *R = bert_numel(t); return; }
  *R = t->shape[dim];
  for (int d = 0; d < dim; d++) *outer *= t->shape[d];
  for (int d = dim + 1; d < t->ndim; d++) *inner *= t->shape[d];
}

int bert_is_contiguous(const bert_tensor *t) {
  int64_t st = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->stride[i] != st) return 0;
    st *= t->shape[i];
  }
  return 1;
}

int64_t bert_flat_offset(const bert_tensor *t, int64_t i) {
  int64_t off = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t sz = t->shape[d];
    off += (i % sz) * t->stride[d];
    i /= sz;
  }
  return off;
}

double bert_get_flat(const bert_tensor *t, int64_t i) {
  if (!bert_is_host(t)) return t->storage->backend->get_flat(t, i);
  int64_t off = bert_flat_offset(t, i);
  if (t->dtype == BERT_F32) return ((float *)t->storage->data)[off];
  return ((int32_t *)t->storage->data)[off];
}

void bert_set_flat(bert_tensor *t, int64_t i, double v) {
  int64_t off = bert_flat_offset(t, i);
  if (t->dtype == BERT_F32) ((float *)t->storage->data)[off] = (float)v;
  else   /* saturating: a double outside int32 (or NaN) converted directly is undefined */
    ((int32_t *)t->storage->data)[off] = v != v ? 0 : v >= 2147483647.0 ? INT32_MAX
                                       : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
}

int bert_has_overlap(const bert_tensor *t) {
  if (bert_numel(t) == 0) return 0;   /* no element at all (its strides may be 0) */
  for (int i = 0; i < t->ndim; i++)
    if (t->stride[i] == 0 && t->shape[i] > 1) return 1;
  return 0;
}
/* }====================================================== */

/* {====================================================== views */

static bert_tensor *derive(bert_tensor *t, int ndim, const int64_t *shape,
                           const int64_t *stride, int64_t offset) {
  return bert_tensor_view_of(t->storage, t->dtype, offset, ndim, shape, stride);
}

/* Can t be viewed with the new shape without a copy?  Follows the rule of
** torch's computeStride: each run of merged old dims must be contiguous. */
static int view_strides(const bert_tensor *t, int ndim, const int64_t *shape, int64_t *stride) {
  int64_t numel = bert_numel(t);
  if (numel == 0 || t->ndim == 0) {   /* nothing to preserve: fresh contiguous strides */
    int64_t st = 1;
    for (int i = ndim - 1; i >= 0; i--) { stride[i] = st; st *= shape[i] > 0 ? shape[i] : 1; }
    return 1;
  }
  int view_d = ndim - 1;
  int64_t chunk_base_stride = t->ndim ? t->stride[t->ndim - 1] : 1;
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = t->ndim - 1; d >= 0; d--) {
    tensor_numel *= t->shape[d];
    if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        stride[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return 0;
      if (d > 0) { chunk_base_stride = t->stride[d - 1]; tensor_numel = 1; view_numel = 1; }
    }
  }
  return view_d == -1;
}

bert_tensor *bert_view(bert_tensor *t, int ndim, const int64_t *shape_in) {
  char b1[160], b2[160];
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  if (ndim > BERT_MAX_DIMS) {
    bert_set_error("%d dimensions requested, at most %d supported", ndim, BERT_MAX_DIMS);
    return NULL;
  }
  int infer = -1;
  int64_t known = 1, bound = 1, numel = bert_numel(t);
  for (int i = 0; i < ndim; i++) {
    shape[i] = shape_in[i];
    /* bounded before any product is formed (zeros counted as 1) */
    if (shape[i] > 0 && (bert_mul_i64(bound, shape[i], &bound) != 0 || bound > BERT_MAX_NUMEL)) {
      bert_set_error("shape %s is too large (more than 2^40 elements, counting size-0 dimensions as 1)",
                     bert_shape_str(b1, sizeof b1, ndim, shape_in));
      return NULL;
    }
    if (shape[i] == -1) {
      if (infer >= 0) { bert_set_error("only one dimension can be -1, got shape %s",
                                       bert_shape_str(b1, sizeof b1, ndim, shape_in)); return NULL; }
      infer = i;
    } else if (shape[i] < 0) {
      bert_set_error("size %lld of dimension %d is negative in shape %s", (long long)shape[i],
                     i + 1, bert_shape_str(b1, sizeof b1, ndim, shape_in));
      return NULL;
    } else known *= shape[i];
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      bert_set_error("shape %s is invalid for a tensor of %lld elements %s",
                     bert_shape_str(b1, sizeof b1, ndim, shape_in), (long long)numel,
                     bert_shape_str(b2, sizeof b2, t->ndim, t->shape));
      return NULL;
    }
    shape[infer] = numel / known;
    known *= shape[infer];
  }
  if (known != numel) {
    bert_set_error("shape %s is invalid for a tensor of %lld elements %s",
                   bert_shape_str(b1, sizeof b1, ndim, shape_in), (long long)numel,
                   bert_shape_str(b2, sizeof b2, t->ndim, t->shape));
    return NULL;
  }
  if (!view_strides(t, ndim, shape, stride)) {
    bert_set_error("cannot view a non-contiguous tensor %s as %s without a copy (use reshape)",
                   bert_shape_str(b1, sizeof b1, t->ndim, t->shape),
                   bert_shape_str(b2, sizeof b2, ndim, shape));
    return NULL;
  }
  return derive(t, ndim, shape, stride, t->offset);
}

bert_tensor *bert_reshape_copy(bert_tensor *t, int ndim, const int64_t *shape) {
  if (bert_is_contiguous(t)) return bert_view(t, ndim, shape);
  bert_tensor *c = bert_clone(t);
  if (c == NULL) return NULL;
  bert_tensor *v = bert_view(c, ndim, shape);
  bert_tensor_release(c);
  return v;
}

static int check_dim(const bert_tensor *t, int dim, int extra) {
  char b[160];
  if (dim < 0 || dim >= t->ndim + extra) {
    bert_set_error("dimension %d out of range for a %dD tensor %s", dim + 1, t->ndim,
                   bert_shape_str(b, sizeof b, t->ndim, t->shape));
    return -1;
  }
  return 0;
}

bert_tensor *bert_transpose(bert_tensor *t, int d0, int d1) {
  if (check_dim(t, d0, 0) || check_dim(t, d1, 0)) return NULL;
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  memcpy(stride, t->stride, sizeof stride);
  shape[d0] = t->shape[d1]; shape[d1] = t->shape[d0];
  stride[d0] = t->stride[d1]; stride[d1] = t->stride[d0];
  return derive(t, t->ndim, shape, stride, t->offset);
}

bert_tensor *bert_permute(bert_tensor *t, const int *perm) {
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  int seen[BERT_MAX_DIMS] = {0};
  for (int i = 0; i < t->ndim; i++) {
    if (perm[i] < 0 || perm[i] >= t->ndim || seen[perm[i]]) {
      bert_set_error("the order is not a permutation of 1..%d", t->ndim);
      return NULL;
    }
    seen[perm[i]] = 1;
    shape[i] = t->shape[perm[i]];
    stride[i] = t->stride[perm[i]];
  }
  return derive(t, t->ndim, shape, stride, t->offset);
}

bert_tensor *bert_narrow(bert_tensor *t, int dim, int64_t start, int64_t len) {
  char b[160];
  if (check_dim(t, dim, 0)) return NULL;
  if (start < 0 || len < 0 || start + len > t->shape[dim]) {
    bert_set_error("range start %lld, length %lld does not fit dimension %d of size %lld in %s",
                   (long long)start + 1, (long long)len, dim + 1, (long long)t->shape[dim],
                   bert_shape_str(b, sizeof b, t->ndim, t->shape));
    return NULL;
  }
  int64_t shape[BERT_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[dim] = len;
  return derive(t, t->ndim, shape, t->stride, t->offset + start * t->stride[dim]);
}

bert_tensor *bert_select(bert_tensor *t, int dim, int64_t index) {
  char b[160];
  if (check_dim(t, dim, 0)) return NULL;
  if (index < 0 || index >= t->shape[dim]) {
    bert_set_error("index %lld out of range for dimension %d of size %lld in %s",
                   (long long)index + 1, dim + 1, (long long)t->shape[dim],
                   bert_shape_str(b, sizeof b, t->ndim, t->shape));
    return NULL;
  }
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; i++)
    if (i != dim) { shape[n] = t->shape[i]; stride[n] = t->stride[i]; n++; }
  return derive(t, n, shape, stride, t->offset + index * t->stride[dim]);
}

bert_tensor *bert_squeeze(bert_tensor *t, int dim) {
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  int n = 0;
  if (dim >= 0 && check_dim(t, dim, 0)) return NULL;
  for (int i = 0; i < t->ndim; i++) {
    int drop = (dim < 0 || dim == i) && t->shape[i] == 1;
    if (!drop) { shape[n] = t->shape[i]; stride[n] = t->stride[i]; n++; }
  }
  return derive(t, n, shape, stride, t->offset);
}

bert_tensor *bert_unsqueeze(bert_tensor *t, int dim) {
  if (check_dim(t, dim, 1)) return NULL;
  if (t->ndim >= BERT_MAX_DIMS) {
    bert_set_error("a %dD tensor cannot gain a dimension (at most %d)", t->ndim, BERT_MAX_DIMS);
    return NULL;
  }
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  int n = 0;
  for (int i = 0; i <= t->ndim; i++) {
    if (i == dim) {
      shape[n] = 1;
      stride[n] = i < t->ndim ? t->shape[i] * t->stride[i] : 1;
      n++;
    }
    if (i < t->ndim) { shape[n] = t->shape[i]; stride[n] = t->stride[i]; n++; }
  }
  return derive(t, n, shape, stride, t->offset);
}

bert_tensor *bert_expand(bert_tensor *t, int ndim, const int64_t *shape_in) {
  char b1[160], b2[160];
  if (ndim < t->ndim || ndim > BERT_MAX_DIMS) {
    bert_set_error("cannot expand %s to %s: fewer dimensions than the tensor",
                   bert_shape_str(b1, sizeof b1, t->ndim, t->shape),
                   bert_shape_str(b2, sizeof b2, ndim, shape_in));
    return NULL;
  }
  int64_t shape[BERT_MAX_DIMS], stride[BERT_MAX_DIMS];
  int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; i++) {
    int64_t want = shape_in[i];
    if (i < lead) {
      if (want < 0) goto bad;
      shape[i] = want; stride[i] = 0;
      continue;
    }
    int64_t have = t->shape[i - lead];
    if (want == -1) want = have;
    if (want == have) { shape[i] = have; stride[i] = t->stride[i - lead]; }
    else if (have == 1 && want >= 0) { shape[i] = want; stride[i] = 0; }
    else goto bad;
  }
  return derive(t, ndim, shape, stride, t->offset);
bad:
  bert_set_error("cannot expand %s to %s: only size-1 dimensions can grow",
                 bert_shape_str(b1, sizeof b1, t->ndim, t->shape),
                 bert_shape_str(b2, sizeof b2, ndim, shape_in));
  return NULL;
}
/* }====================================================== */

/* {====================================================== copies */

typedef struct { bert_dtype to, from; } copy_ctx;

static void copy_row(void *vctx, int64_t n, char **ptr, const int64_t *st) {
  const copy_ctx *c = vctx;
  if (c->to == BERT_F32 && c->from == BERT_F32) {
    float *d = (float *)ptr[0];
    const float *p = (const float *)ptr[1];
    if (st[0] == 1 && st[1] == 1) memcpy(d, p, (size_t)n * sizeof(float));
    else for (int64_t j = 0; j < n; j++) d[j * st[0]] = p[j * st[1]];
  } else if (c->to == BERT_I32 && c->from == BERT_I32) {
    int32_t *d = (int32_t *)ptr[0];
    const int32_t *p = (const int32_t *)ptr[1];
    for (int64_t j = 0; j < n; j++) d[j * st[0]] = p[j * st[1]];
  } else if (c->to == BERT_F32) {
    float *d = (float *)ptr[0];
    const int32_t *p = (const int32_t *)ptr[1];
    for (int64_t j = 0; j < n; j++) d[j * st[0]] = (float)p[j * st[1]];
  } else {   /* float -> int32: truncate toward zero, saturating */
    int32_t *d = (int32_t *)ptr[0];
    const float *p = (const float *)ptr[1];
    for (int64_t j = 0; j < n; j++) {
      float v = p[j * st[1]];
      d[j * st[0]] = v != v ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
    }
  }
}

int bert_copy_(bert_tensor *dst, const bert_tensor *src) {
  char b1[160], b2[160];
  /* broadcast src to dst's shape */
  bert_tensor *s = bert_expand((bert_tensor *)src, dst->ndim, dst->shape);
  if (s == NULL) {
    bert_set_error("cannot broadcast %s into %s",
                   bert_shape_str(b1, sizeof b1, src->ndim, src->shape),
                   bert_shape_str(b2, sizeof b2, dst->ndim, dst->shape));
    return -1;
  }
  int host_memmove = bert_is_host(dst) && bert_is_contiguous(dst) && bert_is_contiguous(s) &&
                     dst->dtype == s->dtype;
  if (dst->storage == s->storage && bert_numel(dst) > 0 && !host_memmove) {
    /* a copy within one storage, whose elements may overlap: read all of
    ** src first, so the result is memmove's on every device and layout */
    bert_tensor *tmp = bert_clone(s);
    bert_tensor_release(s);
    if (tmp == NULL) return -1;
    s = tmp;
  }
  if (!bert_is_host(dst) || !bert_is_host(s)) {   /* a device copy: its backend */
    const bert_backend *be = !bert_is_host(dst) ? dst->storage->backend : s->storage->backend;
    int rc = be->copy_(dst, s);
    bert_tensor_release(s);
    return rc;
  }
  int64_t n = bert_numel(dst);
  if (bert_is_contiguous(dst) && bert_is_contiguous(s) && dst->dtype == s->dtype) {
    memmove(bert_data(dst), bert_data(s), (size_t)n * bert_dtype_size(dst->dtype));
  } else {
    const bert_tensor *ops[2] = {dst, s};
    bert_iter it;
    bert_iter_init(&it, 2, ops);
    copy_ctx c = {dst->dtype, s->dtype};
    bert_iter_run(&it, copy_row, &c);
  }
  bert_tensor_release(s);
  return 0;
}

/* A new uninitialised tensor on t's device. */
static bert_tensor *empty_like_on(const bert_tensor *t, bert_dtype dt) {
  if (bert_is_host(t)) return bert_tensor_empty(dt, t->ndim, t->shape);
  return t->storage->backend->empty(dt, t->ndim, t->shape);
}

bert_tensor *bert_clone(const bert_tensor *t) {
  bert_tensor *c = empty_like_on(t, t->dtype);
  if (c && bert_copy_(c, t) != 0) { bert_tensor_release(c); return NULL; }
  return c;
}

bert_tensor *bert_contiguous(bert_tensor *t) {
  if (bert_is_contiguous(t)) { bert_tensor_retain(t); return t; }
  return bert_clone(t);
}

bert_tensor *bert_to_dtype(const bert_tensor *t, bert_dtype dt) {
  bert_tensor *c = empty_like_on(t, dt);
  if (c && bert_copy_(c, t) != 0) { bert_tensor_release(c); return NULL; }
  return c;
}
/* }====================================================== */
