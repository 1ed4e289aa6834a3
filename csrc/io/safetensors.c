/*
** safetensors: a strict JSON header parser, validation, memory-mapped
** loading with dtype conversion, and atomic writing.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "io/json.h"
#include "core/checked.h"

/* The format is little-endian; so are the hosts we build for, which lets
** F32/I32 data be used in place. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

/* {====================================================== dtypes */

static const struct { const char *name; size_t size; } st_dtypes[] = {
  {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I32", 4}, {"I64", 8}, {"U8", 1}, {"BOOL", 1}
};
#define N_ST_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

const char *bert_st_dtype_name(bert_st_dtype dt) { return st_dtypes[dt].name; }
size_t bert_st_dtype_size(bert_st_dtype dt) { return st_dtypes[dt].size; }

int bert_st_dtype_from_name(const char *name, bert_st_dtype *out) {
  for (size_t i = 0; i < N_ST_DTYPES; i++)
    if (strcmp(name, st_dtypes[i].name) == 0) { *out = (bert_st_dtype)i; return 0; }
  return -1;
}

bert_dtype bert_st_load_dtype(bert_st_dtype dt) {
  return (dt == BERT_ST_F32 || dt == BERT_ST_F16 || dt == BERT_ST_BF16) ? BERT_F32 : BERT_I32;
}

static float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

float bert_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {
    /* zero or subnormal: mant * 2^-24, exact in float32 */
    float v = (float)mant * 0x1p-24f;
    return bits_to_f32(f32_to_bits(v) | sign);
  }
  if (exp == 31)   /* inf, or nan with its payload kept */
    return bits_to_f32(sign | 0x7f800000u | (mant << 13));
  return bits_to_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

float bert_bf16_to_f32(uint16_t h) { return bits_to_f32((uint32_t)h << 16); }

uint16_t bert_f32_to_f16(float f) {
  uint32_t x = f32_to_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {                      /* inf, nan (kept quiet) */
    if (ax == 0x7f800000u) return sign | 0x7c00;
    return (uint16_t)(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
  }
  if (ax >= 0x477ff000u) return sign | 0x7c00;  /* >= 65520 rounds to inf */
  uint32_t e = ax >> 23;
  if (e < 113) {                                /* below 2^-14: subnormal */
    if (e < 102) return sign;                   /* below 2^-25: rounds to 0 */
    uint32_t m = (ax & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;                   /* 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ff), rem = ax & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* carries into the exponent */
  return (uint16_t)(sign | h);
}

uint16_t bert_f32_to_bf16(float f) {
  uint32_t x = f32_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);   /* quiet nan */
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
/* }====================================================== */

/* {====================================================== UTF-8 */

int bert_st_valid_utf8(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    size_t k = bert_json_utf8_len(u + i, len - i);
    if (k == 0) return 0;
    i += k;
  }
  return 1;
}
/* }====================================================== */

/* {====================================================== the header (JSON read by json.c) */

/* Errors about well-formed JSON with the wrong content. */
static int hdr_fail(const char *path, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;
static int hdr_fail(const char *path, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  bert_set_error("%s: invalid safetensors header: %s", path, msg);
  return -1;
}

/* A name for messages: truncated to fit size (room is kept for "..." and
** the NUL), with non-printing bytes escaped as \xNN. */
static const char *printable(const char *s, char *buf, size_t size) {
  size_t j = 0, room = size - 4;
  for (size_t i = 0; s[i]; i++) {
    unsigned char c = (unsigned char)s[i];
    size_t w = (c < 0x20 || c == 0x7f) ? 4 : 1;
    if (j + w > room) { memcpy(buf + j, "...", 3); j += 3; break; }
    if (w == 4) snprintf(buf + j, 5, "\\x%02x", c);
    else buf[j] = (char)c;
    j += w;
  }
  buf[j] = '\0';
  return buf;
}

/* An array of at most max non-negative integers. */
static int parse_uint_array(bert_json *p, const char *tname, const char *field,
                            int64_t *out, int max, int *count) {
  char nb[96];
  bert_json_skip_ws(p);
  if (p->pos >= p->n || p->s[p->pos] != '[') {
    if (bert_json_skip_value(p) != 0) return -1;
    return hdr_fail(p->path, "tensor '%s': \"%s\" is not an array",
                    printable(tname, nb, sizeof nb), field);
  }
  p->pos++;
  int k = 0;
  if (bert_json_accept(p, ']')) { *count = 0; return 0; }
  for (;;) {
    bert_json_skip_ws(p);
    if (p->pos >= p->n || (p->s[p->pos] != '-' && (p->s[p->pos] < '0' || p->s[p->pos] > '9'))) {
      if (bert_json_skip_value(p) != 0) return -1;
      return hdr_fail(p->path, "tensor '%s': \"%s\" holds something other than a number",
                      printable(tname, nb, sizeof nb), field);
    }
    size_t at = p->pos;
    int is_uint, neg;
    int64_t v;
    if (bert_json_number(p, &is_uint, &neg, &v) != 0) return -1;
    if (!is_uint)
      return hdr_fail(p->path, "tensor '%s': \"%s\" holds %.*s, not a non-negative integer%s",
                      printable(tname, nb, sizeof nb), field,
                      (int)(p->pos - at > 40 ? 40 : p->pos - at), p->s + at,
                      neg ? "" : " that fits in 64 bits");
    if (k == max) {
      if (max == 2)
        return hdr_fail(p->path, "tensor '%s': \"%s\" must hold exactly 2 integers",
                        printable(tname, nb, sizeof nb), field);
      return hdr_fail(p->path, "tensor '%s': more than %d dimensions (at most %d supported)",
                      printable(tname, nb, sizeof nb), max, max);
    }
    out[k++] = v;
    int r = bert_json_next_or_close(p, ']');
    if (r < 0) return -1;
    if (r == 0) break;
  }
  *count = k;
  return 0;
}

static int parse_entry(bert_json *p, bert_st_entry *e) {
  char nb[96];
  const char *tname = e->name;
  int have_dtype = 0, have_shape = 0, have_offsets = 0;
  bert_json_skip_ws(p);
  if (p->pos >= p->n || p->s[p->pos] != '{') {
    if (bert_json_skip_value(p) != 0) return -1;
    return hdr_fail(p->path, "tensor '%s': the entry is not an object", printable(tname, nb, sizeof nb));
  }
  p->pos++;
  if (!bert_json_accept(p, '}')) for (;;) {
    char *key;
    if (bert_json_string(p, &key, NULL) != 0) return -1;
    if (bert_json_expect(p, ':', "':' after an object key") != 0) { free(key); return -1; }
    int *seen = strcmp(key, "dtype") == 0 ? &have_dtype
              : strcmp(key, "shape") == 0 ? &have_shape
              : strcmp(key, "data_offsets") == 0 ? &have_offsets : NULL;
    if (seen && *seen) {
      hdr_fail(p->path, "tensor '%s': key \"%s\" appears twice", printable(tname, nb, sizeof nb), key);
      free(key);
      return -1;
    }
    if (seen) *seen = 1;
    int rc = 0;
    if (seen == &have_dtype) {
      bert_json_skip_ws(p);
      if (p->pos >= p->n || p->s[p->pos] != '"') {
        rc = bert_json_skip_value(p);
        if (rc == 0) rc = hdr_fail(p->path, "tensor '%s': \"dtype\" is not a string",
                                   printable(tname, nb, sizeof nb));
      } else {
        char *d;
        rc = bert_json_string(p, &d, NULL);
        if (rc == 0) {
          if (bert_st_dtype_from_name(d, &e->dtype) != 0) {
            char db[40];
            rc = hdr_fail(p->path, "tensor '%s': unknown dtype \"%s\" (supported: F32, F16, BF16, I32, I64, U8, BOOL)",
                          printable(tname, nb, sizeof nb), printable(d, db, sizeof db));
          }
          free(d);
        }
      }
    } else if (seen == &have_shape) {
      rc = parse_uint_array(p, tname, "shape", e->shape, BERT_MAX_DIMS, &e->ndim);
    } else if (seen == &have_offsets) {
      int64_t off[2];
      int cnt = 0;
      rc = parse_uint_array(p, tname, "data_offsets", off, 2, &cnt);
      if (rc == 0 && cnt != 2)
        rc = hdr_fail(p->path, "tensor '%s': \"data_offsets\" must hold exactly 2 integers",
                      printable(tname, nb, sizeof nb));
      if (rc == 0) { e->begin = (uint64_t)off[0]; e->end = (uint64_t)off[1]; }
    } else {
      rc = bert_json_skip_value(p);   /* unknown keys are tolerated, as serde does */
    }
    free(key);
    if (rc != 0) return -1;
    int r = bert_json_next_or_close(p, '}');
    if (r < 0) return -1;
    if (r == 0) break;
  }
  const char *missing = !have_dtype ? "dtype" : !have_shape ? "shape" : !have_offsets ? "data_offsets" : NULL;
  if (missing)
    return hdr_fail(p->path, "tensor '%s': missing \"%s\"", printable(tname, nb, sizeof nb), missing);
  return 0;
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Duplicate metadata keys, found by sorting: a header of millions of keys
** must not take quadratic time. */
static int unique_meta_keys(const bert_st_header *h, const char *path) {
  if (h->nmeta < 2) return 0;
  char **keys = malloc(h->nmeta * sizeof *keys), kb[96];
  if (keys == NULL) { bert_set_error("%s: out of memory reading the header", path); return -1; }
  memcpy(keys, h->meta_keys, h->nmeta * sizeof *keys);
  qsort(keys, h->nmeta, sizeof *keys, cmp_str_ptr);
  int rc = 0;
  for (size_t i = 1; i < h->nmeta && rc == 0; i++)
    if (strcmp(keys[i - 1], keys[i]) == 0)
      rc = hdr_fail(path, "\"__metadata__\" key '%s' appears twice", printable(keys[i], kb, sizeof kb));
  free(keys);
  return rc;
}

static int parse_metadata(bert_json *p, bert_st_header *h) {
  bert_json_skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == 'n') return bert_json_literal(p, "null");
  if (p->pos >= p->n || p->s[p->pos] != '{') {
    if (bert_json_skip_value(p) != 0) return -1;
    return hdr_fail(p->path, "\"__metadata__\" is not an object");
  }
  p->pos++;
  if (bert_json_accept(p, '}')) return 0;
  size_t cap = 0;
  for (;;) {
    char *k, *v;
    char kb[96];
    if (bert_json_string(p, &k, NULL) != 0) return -1;
    if (bert_json_expect(p, ':', "':' after an object key") != 0) { free(k); return -1; }
    bert_json_skip_ws(p);
    if (p->pos >= p->n || p->s[p->pos] != '"') {
      int rc = bert_json_skip_value(p);
      if (rc == 0) hdr_fail(p->path, "\"__metadata__\" value for key '%s' is not a string",
                            printable(k, kb, sizeof kb));
      free(k);
      return -1;
    }
    if (bert_json_string(p, &v, NULL) != 0) { free(k); return -1; }
    if (h->nmeta == cap) {
      size_t nc = cap ? cap * 2 : 8;
      char **nk = realloc(h->meta_keys, nc * sizeof *nk);
      if (nk) h->meta_keys = nk;
      char **nv = nk ? realloc(h->meta_values, nc * sizeof *nv) : NULL;
      if (nv) h->meta_values = nv;
      if (!nk || !nv) {
        free(k); free(v);
        bert_set_error("%s: out of memory reading the header", p->path);
        return -1;
      }
      cap = nc;
    }
    h->meta_keys[h->nmeta] = k;
    h->meta_values[h->nmeta] = v;
    h->nmeta++;
    int r = bert_json_next_or_close(p, '}');
    if (r < 0) return -1;
    if (r == 0) return unique_meta_keys(h, p->path);
  }
}
/* }====================================================== */

/* {====================================================== validation */

static int cmp_name(const void *a, const void *b) {
  const bert_st_entry *x = *(bert_st_entry *const *)a, *y = *(bert_st_entry *const *)b;
  return strcmp(x->name, y->name);
}

static int cmp_begin(const void *a, const void *b) {
  const bert_st_entry *x = *(bert_st_entry *const *)a, *y = *(bert_st_entry *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : 0;
}

/* Shapes, sizes and ranges of every entry; names unique; no overlaps. */
static int validate_entries(bert_st_header *h, uint64_t data_size, const char *path) {
  char nb[96], nb2[96], sb[160];
  for (size_t i = 0; i < h->n; i++) {
    bert_st_entry *e = &h->entries[i];
    int64_t count;
    if (bert_shape_numel(e->ndim, e->shape, &count) != 0)
      return hdr_fail(path, "tensor '%s': shape %s is too large (more than 2^40 elements, "
                      "counting size-0 dimensions as 1)",
                      printable(e->name, nb, sizeof nb), bert_shape_str(sb, sizeof sb, e->ndim, e->shape));
    uint64_t numel = (uint64_t)count, esz = bert_st_dtype_size(e->dtype);   /* product < 2^44 */
    if (e->begin > e->end)
      return hdr_fail(path, "tensor '%s': data_offsets [%llu, %llu] begin after they end",
                      printable(e->name, nb, sizeof nb), (unsigned long long)e->begin,
                      (unsigned long long)e->end);
    if (e->end > data_size)
      return hdr_fail(path, "tensor '%s': data_offsets [%llu, %llu] extend past the end of the "
                      "data region (%llu bytes; file truncated?)",
                      printable(e->name, nb, sizeof nb), (unsigned long long)e->begin,
                      (unsigned long long)e->end, (unsigned long long)data_size);
    if (e->end - e->begin != numel * esz)
      return hdr_fail(path, "tensor '%s': data_offsets [%llu, %llu] span %llu bytes but %s %s "
                      "needs %llu",
                      printable(e->name, nb, sizeof nb), (unsigned long long)e->begin,
                      (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                      bert_st_dtype_name(e->dtype), bert_shape_str(sb, sizeof sb, e->ndim, e->shape),
                      (unsigned long long)(numel * esz));
  }
  if (h->n < 2) return 0;
  bert_st_entry **idx = malloc(h->n * sizeof *idx);
  if (idx == NULL) { bert_set_error("%s: out of memory reading the header", path); return -1; }
  for (size_t i = 0; i < h->n; i++) idx[i] = &h->entries[i];
  int rc = 0;
  qsort(idx, h->n, sizeof *idx, cmp_name);
  for (size_t i = 1; i < h->n && rc == 0; i++)
    if (strcmp(idx[i - 1]->name, idx[i]->name) == 0)
      rc = hdr_fail(path, "tensor name '%s' appears twice", printable(idx[i]->name, nb, sizeof nb));
  if (rc == 0) {
    /* empty ranges hold no bytes and cannot overlap anything */
    qsort(idx, h->n, sizeof *idx, cmp_begin);
    const bert_st_entry *prev = NULL;
    for (size_t i = 0; i < h->n && rc == 0; i++) {
      const bert_st_entry *e = idx[i];
      if (e->begin == e->end) continue;
      if (prev && e->begin < prev->end)
        rc = hdr_fail(path, "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                      printable(prev->name, nb, sizeof nb), (unsigned long long)prev->begin,
                      (unsigned long long)prev->end, printable(e->name, nb2, sizeof nb2),
                      (unsigned long long)e->begin, (unsigned long long)e->end);
      if (!prev || e->end > prev->end) prev = e;
    }
  }
  free(idx);
  return rc;
}

void bert_st_header_free(bert_st_header *h) {
  for (size_t i = 0; i < h->n; i++) free(h->entries[i].name);
  for (size_t i = 0; i < h->nmeta; i++) { free(h->meta_keys[i]); free(h->meta_values[i]); }
  free(h->entries);
  free(h->meta_keys);
  free(h->meta_values);
  memset(h, 0, sizeof *h);
}

int bert_st_parse_header(const char *json, size_t len, uint64_t data_size,
                         const char *path, bert_st_header *h) {
  bert_json p = {json, len, 0, 0, path};
  size_t cap = 0;
  int seen_meta = 0;
  memset(h, 0, sizeof *h);
  if (bert_json_expect(&p, '{', "'{' opening the header object") != 0) goto fail;
  if (!bert_json_accept(&p, '}')) for (;;) {
    char *name;
    size_t name_len;
    if (bert_json_string(&p, &name, &name_len) != 0) goto fail;
    if (bert_json_expect(&p, ':', "':' after an object key") != 0) { free(name); goto fail; }
    if (strcmp(name, "__metadata__") == 0) {
      free(name);
      if (seen_meta) { hdr_fail(path, "\"__metadata__\" appears twice"); goto fail; }
      seen_meta = 1;
      if (parse_metadata(&p, h) != 0) goto fail;
    } else {
      if (h->n == cap) {
        size_t nc = cap ? cap * 2 : 16;
        bert_st_entry *ne = realloc(h->entries, nc * sizeof *ne);
        if (ne == NULL) { free(name); bert_set_error("%s: out of memory reading the header", path); goto fail; }
        h->entries = ne;
        cap = nc;
      }
      bert_st_entry *e = &h->entries[h->n++];
      memset(e, 0, sizeof *e);
      e->name = name;
      e->name_len = name_len;
      if (parse_entry(&p, e) != 0) goto fail;
    }
    int r = bert_json_next_or_close(&p, '}');
    if (r < 0) goto fail;
    if (r == 0) break;
  }
  bert_json_skip_ws(&p);
  if (p.pos != p.n) {
    char b[32];
    bert_json_fail(&p, "unexpected %s after the header object", bert_json_describe(&p, b, sizeof b));
    goto fail;
  }
  if (validate_entries(h, data_size, path) != 0) goto fail;
  h->header_len = len;
  h->data_start = 8 + (uint64_t)len;
  h->file_size = h->data_start + data_size;
  return 0;
fail:
  bert_st_header_free(h);
  return -1;
}
/* }====================================================== */

/* {====================================================== reading */

/* Opens path and checks the length prefix; returns the fd, or -1. */
static int open_checked(const char *path, uint64_t *file_size, uint64_t *hlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { bert_set_error("%s: cannot open: %s", path, strerror(errno)); return -1; }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    bert_set_error("%s: cannot stat: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (S_ISDIR(st.st_mode)) { bert_set_error("%s: is a directory, not a safetensors file", path); close(fd); return -1; }
  if (!S_ISREG(st.st_mode)) { bert_set_error("%s: not a regular file", path); close(fd); return -1; }
  uint64_t size = (uint64_t)st.st_size;
  if (size < 8) {
    bert_set_error("%s: not a safetensors file: %llu bytes, shorter than the 8-byte header length",
                   path, (unsigned long long)size);
    close(fd);
    return -1;
  }
  unsigned char b[8];
  ssize_t got = pread(fd, b, 8, 0);
  if (got != 8) {
    bert_set_error("%s: cannot read the header length: %s", path, got < 0 ? strerror(errno) : "short read");
    close(fd);
    return -1;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | b[i];
  if (n > size - 8) {
    bert_set_error("%s: not a safetensors file or truncated: the header length %llu exceeds the "
                   "%llu bytes after the length prefix", path, (unsigned long long)n,
                   (unsigned long long)(size - 8));
    close(fd);
    return -1;
  }
  if (n > BERT_ST_MAX_HEADER) {
    bert_set_error("%s: header length %llu exceeds the %u-byte limit", path, (unsigned long long)n,
                   BERT_ST_MAX_HEADER);
    close(fd);
    return -1;
  }
  *file_size = size;
  *hlen = n;
  return fd;
}

int bert_st_read_header(const char *path, bert_st_header *out) {
  uint64_t size, n;
  memset(out, 0, sizeof *out);
  int fd = open_checked(path, &size, &n);
  if (fd < 0) return -1;
  char *buf = malloc(n ? n : 1);
  if (buf == NULL) { close(fd); bert_set_error("%s: out of memory reading the header", path); return -1; }
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, buf + done, n - done, (off_t)(8 + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      bert_set_error("%s: cannot read the header: %s", path, r < 0 ? strerror(errno) : "file shrank");
      free(buf); close(fd);
      return -1;
    }
    done += (size_t)r;
  }
  close(fd);
  int rc = bert_st_parse_header(buf, n, size - 8 - n, path, out);
  free(buf);
  return rc;
}

/* Converts one entry's bytes (src, possibly unaligned) into a new tensor. */
static bert_tensor *convert_entry(const bert_st_entry *e, const unsigned char *src, const char *path) {
  bert_tensor *t = bert_tensor_empty(bert_st_load_dtype(e->dtype), e->ndim, e->shape);
  if (t == NULL) return NULL;
  int64_t n = bert_numel(t);
  float *f = bert_f32(t);
  int32_t *q = bert_i32(t);
  switch (e->dtype) {
    case BERT_ST_F32: case BERT_ST_I32:
      memcpy(bert_data(t), src, (size_t)n * 4);
      break;
    case BERT_ST_F16:
      for (int64_t i = 0; i < n; i++) {
        uint16_t h; memcpy(&h, src + 2 * i, 2); f[i] = bert_f16_to_f32(h);
      }
      break;
    case BERT_ST_BF16:
      for (int64_t i = 0; i < n; i++) {
        uint16_t h; memcpy(&h, src + 2 * i, 2); f[i] = bert_bf16_to_f32(h);
      }
      break;
    case BERT_ST_I64:
      for (int64_t i = 0; i < n; i++) {
        int64_t v; memcpy(&v, src + 8 * i, 8);
        if (v < INT32_MIN || v > INT32_MAX) {
          char nb[96];
          bert_set_error("%s: tensor '%s' (I64): value %lld at flat index %lld does not fit in int32",
                         path, printable(e->name, nb, sizeof nb), (long long)v, (long long)i);
          bert_tensor_release(t);
          return NULL;
        }
        q[i] = (int32_t)v;
      }
      break;
    case BERT_ST_U8:
      for (int64_t i = 0; i < n; i++) q[i] = src[i];
      break;
    case BERT_ST_BOOL:
      for (int64_t i = 0; i < n; i++) q[i] = src[i] != 0;
      break;
  }
  return t;
}

void bert_st_loaded_free(bert_st_loaded *f) {
  if (f->tensors)
    for (size_t i = 0; i < f->hdr.n; i++) bert_tensor_release(f->tensors[i]);
  free(f->tensors);
  f->tensors = NULL;
  bert_st_header_free(&f->hdr);
}

int bert_load_safetensors(const char *path, bert_st_loaded *out) {
  uint64_t size, n;
  memset(out, 0, sizeof *out);
  int fd = open_checked(path, &size, &n);
  if (fd < 0) return -1;
  /* Private and writable: in-place ops on loaded tensors copy the pages
  ** they touch and never reach the file. */
  void *base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  int err = errno;
  close(fd);
  if (base == MAP_FAILED) { bert_set_error("%s: cannot map: %s", path, strerror(err)); return -1; }
  bert_storage *map = bert_storage_wrap_mmap(base, (size_t)size, base, (size_t)size);
  if (map == NULL) { munmap(base, (size_t)size); return -1; }
  if (bert_st_parse_header((const char *)base + 8, (size_t)n, size - 8 - n, path, &out->hdr) != 0) {
    bert_storage_release(map);
    return -1;
  }
  out->tensors = calloc(out->hdr.n ? out->hdr.n : 1, sizeof *out->tensors);
  if (out->tensors == NULL) {
    bert_set_error("%s: out of memory", path);
    bert_storage_release(map);
    bert_st_loaded_free(out);
    return -1;
  }
  for (size_t i = 0; i < out->hdr.n; i++) {
    const bert_st_entry *e = &out->hdr.entries[i];
    uint64_t at = out->hdr.data_start + e->begin;
    bert_tensor *t;
    if ((e->dtype == BERT_ST_F32 || e->dtype == BERT_ST_I32) && at % 4 == 0)
      t = bert_tensor_view_of(map, bert_st_load_dtype(e->dtype), (int64_t)(at / 4),
                              e->ndim, e->shape, NULL);
    else
      t = convert_entry(e, (const unsigned char *)base + at, path);
    if (t == NULL) {
      bert_storage_release(map);
      bert_st_loaded_free(out);
      return -1;
    }
    out->tensors[i] = t;
  }
  bert_storage_release(map);   /* the views keep the mapping alive */
  return 0;
}
/* }====================================================== */

/* {====================================================== writing */

/* A growable text buffer for the header. */
typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
  if (b->oom) return;
  if (b->n + len + 1 > b->cap) {
    size_t nc = b->cap ? b->cap : 256;
    while (nc < b->n + len + 1) nc *= 2;
    char *np = realloc(b->p, nc);
    if (np == NULL) { b->oom = 1; return; }
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, len);
  b->n += len;
  b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_printf(sbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;
static void sb_printf(sbuf *b, const char *fmt, ...) {
  char tmp[160];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) { b->oom = 1; return; }
  sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static void sb_json_string(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const char *c = s; *c; c++) {
    unsigned char u = (unsigned char)*c;
    if (u == '"') sb_put(b, "\\\"", 2);
    else if (u == '\\') sb_put(b, "\\\\", 2);
    else if (u == '\n') sb_put(b, "\\n", 2);
    else if (u == '\t') sb_put(b, "\\t", 2);
    else if (u == '\r') sb_put(b, "\\r", 2);
    else if (u < 0x20) sb_printf(b, "\\u%04x", u);
    else sb_put(b, c, 1);
  }
  sb_put(b, "\"", 1);
}

typedef struct {
  const char *name;
  const bert_tensor *t;
  bert_st_dtype dt;
  uint64_t begin, end;
} wentry;

static int cmp_write(const void *a, const void *b) {
  const wentry *x = a, *y = b;
  size_t sx = bert_st_dtype_size(x->dt), sy = bert_st_dtype_size(y->dt);
  if (sx != sy) return sx > sy ? -1 : 1;   /* larger alignment first */
  return strcmp(x->name, y->name);
}

/* Sorts pointers to string pointers, so the sorted order maps back to
** positions in the caller's arrays. */
static int cmp_cstr(const void *a, const void *b) {
  return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* Writes t's elements, in row-major order, converted to dt. */
static int write_tensor(FILE *f, const bert_tensor *t, bert_st_dtype dt,
                        unsigned char *buf, size_t bufsize) {
  int64_t n = bert_numel(t);
  if (n == 0) return 0;
  size_t esz = bert_st_dtype_size(dt);
  int native = (dt == BERT_ST_F32 && t->dtype == BERT_F32) || (dt == BERT_ST_I32 && t->dtype == BERT_I32);
  if (native && bert_is_contiguous(t))
    return fwrite(bert_data(t), 4, (size_t)n, f) == (size_t)n ? 0 : -1;
  const float *fs = (const float *)t->storage->data;
  const int32_t *is = (const int32_t *)t->storage->data;
  int64_t idx[BERT_MAX_DIMS] = {0};
  int64_t off = t->offset;
  size_t used = 0;
  for (int64_t i = 0; i < n; i++) {
    unsigned char *o = buf + used;
    switch (dt) {
      case BERT_ST_F32: memcpy(o, &fs[off], 4); break;
      case BERT_ST_I32: memcpy(o, &is[off], 4); break;
      case BERT_ST_F16: { uint16_t h = bert_f32_to_f16(fs[off]); memcpy(o, &h, 2); break; }
      case BERT_ST_BF16: { uint16_t h = bert_f32_to_bf16(fs[off]); memcpy(o, &h, 2); break; }
      case BERT_ST_I64: { int64_t v = is[off]; memcpy(o, &v, 8); break; }
      default: break;
    }
    used += esz;
    if (used + esz > bufsize) {
      if (fwrite(buf, 1, used, f) != used) return -1;
      used = 0;
    }
    for (int d = t->ndim - 1; d >= 0; d--) {   /* step the row-major index */
      off += t->stride[d];
      if (++idx[d] < t->shape[d]) break;
      off -= t->stride[d] * t->shape[d];
      idx[d] = 0;
    }
  }
  if (used && fwrite(buf, 1, used, f) != used) return -1;
  return 0;
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) return strdup(".");
  if (slash == path) return strdup("/");
  char *d = malloc((size_t)(slash - path) + 1);
  if (d) { memcpy(d, path, (size_t)(slash - path)); d[slash - path] = '\0'; }
  return d;
}

int bert_save_safetensors(const char *path, const char *const *names,
                          bert_tensor *const *tensors, size_t n,
                          const char *const *meta_keys, const char *const *meta_values,
                          size_t nmeta, const bert_st_dtype *dtypes) {
  char nb[96];
  wentry *w = calloc(n ? n : 1, sizeof *w);
  const char *const **nk = calloc(n ? n : 1, sizeof *nk);
  const char *const **mk = calloc(nmeta ? nmeta : 1, sizeof *mk);
  sbuf hb = {0};
  unsigned char *buf = NULL;
  char *tmp = NULL, *dir = NULL;
  FILE *f = NULL;
  int fd = -1, rc = -1;
  if (!w || !nk || !mk) { bert_set_error("%s: out of memory", path); goto done; }

  /* check and lay out the tensors */
  for (size_t i = 0; i < n; i++) {
    const bert_tensor *t = tensors[i];
    bert_st_dtype dt = dtypes ? dtypes[i] : (t->dtype == BERT_F32 ? BERT_ST_F32 : BERT_ST_I32);
    int ok = t->dtype == BERT_F32 ? (dt == BERT_ST_F32 || dt == BERT_ST_F16 || dt == BERT_ST_BF16)
                                  : (dt == BERT_ST_I32 || dt == BERT_ST_I64);
    if (!ok) {
      bert_set_error("%s: tensor '%s': cannot store a %s tensor as %s", path,
                     printable(names[i], nb, sizeof nb), bert_dtype_name(t->dtype), bert_st_dtype_name(dt));
      goto done;
    }
    if (t->storage == NULL) {
      bert_set_error("%s: tensor '%s' has been freed", path, printable(names[i], nb, sizeof nb));
      goto done;
    }
    if (strcmp(names[i], "__metadata__") == 0) {
      bert_set_error("%s: '__metadata__' cannot be a tensor name", path);
      goto done;
    }
    w[i].name = names[i];
    w[i].t = t;
    w[i].dt = dt;
  }
  for (size_t i = 0; i < n; i++) nk[i] = &names[i];
  qsort(nk, n, sizeof *nk, cmp_cstr);
  for (size_t i = 1; i < n; i++)
    if (strcmp(*nk[i], *nk[i - 1]) == 0) {
      bert_set_error("%s: tensor name '%s' given twice", path, printable(*nk[i], nb, sizeof nb));
      goto done;
    }
  for (size_t i = 0; i < nmeta; i++) mk[i] = &meta_keys[i];
  qsort(mk, nmeta, sizeof *mk, cmp_cstr);
  for (size_t i = 1; i < nmeta; i++)
    if (strcmp(*mk[i], *mk[i - 1]) == 0) {
      bert_set_error("%s: metadata key '%s' given twice", path, printable(*mk[i], nb, sizeof nb));
      goto done;
    }
  qsort(w, n, sizeof *w, cmp_write);
  uint64_t off = 0;
  for (size_t i = 0; i < n; i++) {
    w[i].begin = off;
    off += (uint64_t)bert_numel(w[i].t) * bert_st_dtype_size(w[i].dt);
    w[i].end = off;
  }

  /* the header: metadata first (keys sorted), then tensors in data order */
  sb_puts(&hb, "{");
  if (nmeta > 0) {
    sb_puts(&hb, "\"__metadata__\":{");
    for (size_t i = 0; i < nmeta; i++) {
      size_t j = (size_t)(mk[i] - meta_keys);
      if (i) sb_puts(&hb, ",");
      sb_json_string(&hb, meta_keys[j]);
      sb_puts(&hb, ":");
      sb_json_string(&hb, meta_values[j]);
    }
    sb_puts(&hb, "}");
  }
  for (size_t i = 0; i < n; i++) {
    if (i || nmeta) sb_puts(&hb, ",");
    sb_json_string(&hb, w[i].name);
    sb_printf(&hb, ":{\"dtype\":\"%s\",\"shape\":[", bert_st_dtype_name(w[i].dt));
    for (int d = 0; d < w[i].t->ndim; d++) sb_printf(&hb, d ? ",%lld" : "%lld", (long long)w[i].t->shape[d]);
    sb_printf(&hb, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)w[i].begin,
              (unsigned long long)w[i].end);
  }
  sb_puts(&hb, "}");
  while (!hb.oom && hb.n % 8 != 0) sb_puts(&hb, " ");   /* keeps the data region 8-aligned */
  if (hb.oom) { bert_set_error("%s: out of memory building the header", path); goto done; }
  if (hb.n > BERT_ST_MAX_HEADER) {
    bert_set_error("%s: the header would be %zu bytes, over the %u-byte limit", path, hb.n, BERT_ST_MAX_HEADER);
    goto done;
  }

  /* write a temporary file beside the target, then rename it over */
  size_t plen = strlen(path);
  tmp = malloc(plen + 16);
  dir = dir_of(path);
  buf = malloc(1 << 16);
  if (!tmp || !dir || !buf) { bert_set_error("%s: out of memory", path); goto done; }
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp.XXXXXX", 12);
  fd = mkstemp(tmp);
  if (fd < 0) {
    bert_set_error("%s: cannot create a temporary file in '%s': %s", path, dir, strerror(errno));
    free(tmp); tmp = NULL;   /* nothing to remove */
    goto done;
  }
  struct stat st;
  mode_t mode = (stat(path, &st) == 0 && S_ISREG(st.st_mode)) ? (st.st_mode & 07777) : 0644;
  if (fchmod(fd, mode) != 0) { bert_set_error("%s: cannot set permissions: %s", tmp, strerror(errno)); goto done; }
  f = fdopen(fd, "wb");
  if (f == NULL) { bert_set_error("%s: %s", tmp, strerror(errno)); goto done; }
  fd = -1;   /* owned by f now */
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hb.n >> (8 * i));
  errno = 0;
  if (fwrite(len8, 1, 8, f) != 8 || fwrite(hb.p, 1, hb.n, f) != hb.n) goto io_error;
  for (size_t i = 0; i < n; i++)
    if (write_tensor(f, w[i].t, w[i].dt, buf, 1 << 16) != 0) goto io_error;
  if (fflush(f) != 0 || fsync(fileno(f)) != 0) goto io_error;
  int cr = fclose(f);
  f = NULL;
  if (cr != 0) goto io_error;
  if (rename(tmp, path) != 0) {
    bert_set_error("%s: cannot rename the temporary file into place: %s", path, strerror(errno));
    goto done;
  }
  free(tmp); tmp = NULL;   /* renamed: nothing to remove */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) { (void)fsync(dfd); close(dfd); }   /* best effort: persist the rename */
  rc = 0;
  goto done;
io_error:
  bert_set_error("%s: write failed: %s", path, errno ? strerror(errno) : "I/O error");
done:
  if (f) fclose(f);
  if (fd >= 0) close(fd);
  if (tmp) { unlink(tmp); free(tmp); }
  free(dir);
  free(buf);
  free(hb.p);
  free(w);
  free(nk);
  free(mk);
  return rc;
}
/* }====================================================== */
