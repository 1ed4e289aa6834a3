/*
** The strict JSON reader of safetensors headers (json.c).  A bert_json
** walks json/n from pos; every function returns 0 (or the value it reads),
** or -1 with bert_set_error naming path and the byte of the header.
*/
#ifndef BERT_IO_JSON_H
#define BERT_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#define BERT_JSON_MAX_DEPTH 64

typedef struct {
  const char *s;
  size_t n, pos;
  int depth;
  const char *path;
} bert_json;

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), 0 if
** malformed. */
size_t bert_json_utf8_len(const unsigned char *s, size_t n);

int bert_json_fail(bert_json *p, const char *fmt, ...)
#if defined(__GNUC__)
  __attribute__((format(printf, 2, 3)))
#endif
  ;
void bert_json_skip_ws(bert_json *p);
/* The next token for a message ("'x'", "byte 0x01", "the end of the header"). */
const char *bert_json_describe(bert_json *p, char *buf, size_t size);
/* Consumes c (after whitespace), else fails saying what was expected. */
int bert_json_expect(bert_json *p, char c, const char *what);
/* A string, decoded into *out (malloc'ed, NUL-terminated; NUL refused). */
int bert_json_string(bert_json *p, char **out, size_t *outlen);
/* A number; *is_uint when it is a non-negative integer fitting int64 (*val). */
int bert_json_number(bert_json *p, int *is_uint, int *negative, int64_t *val);
/* The literal lit (true, false, null) at pos. */
int bert_json_literal(bert_json *p, const char *lit);
/* Checks the syntax of any value and steps over it. */
int bert_json_skip_value(bert_json *p);
/* Is the next token c (after whitespace)?  Consumes it if so. */
int bert_json_accept(bert_json *p, char c);
/* After an element of an object or array: 1 for ',', 0 for close, -1. */
int bert_json_next_or_close(bert_json *p, char close);

#endif
