/*
** safetensors reading and writing (pure C, no Lua).
**
** Layout of a file: an 8-byte little-endian header length N, N bytes of
** UTF-8 JSON naming each tensor's dtype, shape and [begin, end) byte range
** (relative to the data region), optionally "__metadata__" (string ->
** string), then the data region.  Failures return -1 with bert_last_error()
** set to a message that starts with the file's path.
*/
#ifndef BERT_SAFETENSORS_H
#define BERT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

/* Dtypes that can appear in a file.  F16/BF16 load as float32; I64, U8 and
** BOOL load as int32.  Only the first five can be written. */
typedef enum {
  BERT_ST_F32 = 0, BERT_ST_F16, BERT_ST_BF16, BERT_ST_I32, BERT_ST_I64,
  BERT_ST_U8, BERT_ST_BOOL
} bert_st_dtype;

#define BERT_ST_MAX_HEADER (100u * 1000u * 1000u)   /* bytes of JSON */

const char *bert_st_dtype_name(bert_st_dtype dt);               /* "F32", ... */
int bert_st_dtype_from_name(const char *name, bert_st_dtype *out); /* 0 ok, -1 unknown */
size_t bert_st_dtype_size(bert_st_dtype dt);
/* The computation dtype a file dtype loads as. */
bert_dtype bert_st_load_dtype(bert_st_dtype dt);

typedef struct {
  char *name;                       /* NUL-terminated, never contains NUL */
  size_t name_len;
  bert_st_dtype dtype;
  int ndim;
  int64_t shape[BERT_MAX_DIMS];
  uint64_t begin, end;              /* bytes, relative to the data region */
} bert_st_entry;

typedef struct {
  bert_st_entry *entries;           /* in header order */
  size_t n;
  char **meta_keys, **meta_values;  /* "__metadata__", in header order */
  size_t nmeta;
  uint64_t header_len;              /* N */
  uint64_t data_start;              /* 8 + N: file offset of the data region */
  uint64_t file_size;
} bert_st_header;

/* Parses and validates a header held in memory.  json/len is the N bytes
** after the length prefix; data_size is the size of the data region.
** path only labels error messages. */
int bert_st_parse_header(const char *json, size_t len, uint64_t data_size,
                         const char *path, bert_st_header *out);

/* Reads and validates the header of a file without touching its data. */
int bert_st_read_header(const char *path, bert_st_header *out);
void bert_st_header_free(bert_st_header *h);

/* A loaded file: tensors[i] belongs to hdr.entries[i].  F32/I32 tensors
** whose data is 4-byte aligned are views into one private mapping of the
** file (the mapping lives as long as any of them); the others are
** converted into fresh storage.  Take a tensor by setting its slot to NULL
** after retaining or adopting it; bert_st_loaded_free releases the rest. */
typedef struct {
  bert_st_header hdr;
  bert_tensor **tensors;
} bert_st_loaded;

int bert_load_safetensors(const char *path, bert_st_loaded *out);
void bert_st_loaded_free(bert_st_loaded *f);

/* Writes n tensors and nmeta metadata pairs to path atomically (a temporary
** file in the same directory, fsync, rename).  dtypes[i] is the dtype to
** store tensor i as (NULL: F32 for float32 tensors, I32 for int32); float32
** tensors can be stored as F32, F16 or BF16 (rounded to nearest even),
** int32 ones as I32 or I64.  Tensors are laid out as the Python
** implementation does: by dtype size, largest first, then by name, so
** every tensor's data stays aligned to its element size.  Strided and
** expanded tensors are written in row-major order. */
int bert_save_safetensors(const char *path, const char *const *names,
                          bert_tensor *const *tensors, size_t n,
                          const char *const *meta_keys, const char *const *meta_values,
                          size_t nmeta, const bert_st_dtype *dtypes);

/* Conversions, exposed for tests and other callers. */
float bert_f16_to_f32(uint16_t h);
float bert_bf16_to_f32(uint16_t h);
uint16_t bert_f32_to_f16(float f);     /* round to nearest even */
uint16_t bert_f32_to_bf16(float f);    /* round to nearest even */

/* Is s[0..len) well-formed UTF-8 (no surrogates, no overlongs)? */
int bert_st_valid_utf8(const char *s, size_t len);

#endif
