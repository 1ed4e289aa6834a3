/*
** The strict JSON reader of safetensors headers: it decodes the parts a
** header uses (strings, non-negative integers) and checks the syntax of the
** rest.  Errors go to bert_set_error, naming the file and the byte.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "core/tensor.h"

size_t bert_json_utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len; uint32_t cp, min;
  if (c >= 0xc2 && c <= 0xdf) { len = 2; cp = c & 0x1f; min = 0x80; }
  else if (c >= 0xe0 && c <= 0xef) { len = 3; cp = c & 0x0f; min = 0x800; }
  else if (c >= 0xf0 && c <= 0xf4) { len = 4; cp = c & 0x07; min = 0x10000; }
  else return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}


int bert_json_fail(bert_json *p, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  bert_set_error("%s: malformed safetensors header: bad JSON at byte %zu of the header: %s",
                 p->path, p->pos, msg);
  return -1;
}

void bert_json_skip_ws(bert_json *p) {
  while (p->pos < p->n) {
    char c = p->s[p->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->pos++;
  }
}

const char *bert_json_describe(bert_json *p, char *buf, size_t size) {
  if (p->pos >= p->n) return "the end of the header";
  unsigned char c = (unsigned char)p->s[p->pos];
  if (c >= 0x20 && c < 0x7f) snprintf(buf, size, "'%c'", c);
  else snprintf(buf, size, "byte 0x%02x", c);
  return buf;
}

int bert_json_expect(bert_json *p, char c, const char *what) {
  bert_json_skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == c) { p->pos++; return 0; }
  char b[32];
  return bert_json_fail(p, "expected %s, found %s", what, bert_json_describe(p, b, sizeof b));
}

static int hex4(bert_json *p, uint32_t *out) {
  if (p->n - p->pos < 4) return bert_json_fail(p, "truncated \\u escape");
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p->s[p->pos + (size_t)i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return bert_json_fail(p, "bad hex digit in \\u escape");
  }
  p->pos += 4;
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xc0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f)); return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Parses a string; *out (malloc'ed, NUL-terminated) receives its decoded
** value.  Decoded text is never longer than its source, which sizes the
** buffer.  Strings holding NUL are refused: names and metadata are C
** strings here. */
int bert_json_string(bert_json *p, char **out, size_t *outlen) {
  if (bert_json_expect(p, '"', "a string") != 0) return -1;
  size_t start = p->pos, end = start;
  while (end < p->n && p->s[end] != '"') end += (p->s[end] == '\\') ? 2 : 1;
  if (end >= p->n) { p->pos = p->n; return bert_json_fail(p, "unterminated string"); }
  char *buf = malloc(end - start + 1);
  if (buf == NULL) { bert_set_error("%s: out of memory reading the header", p->path); return -1; }
  size_t o = 0;
  while (p->pos < end) {
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c < 0x20) { free(buf); return bert_json_fail(p, "control character 0x%02x in a string", c); }
    if (c >= 0x80) {
      size_t k = bert_json_utf8_len((const unsigned char *)p->s + p->pos, end - p->pos);
      if (k == 0) { free(buf); return bert_json_fail(p, "invalid UTF-8 in a string"); }
      memcpy(buf + o, p->s + p->pos, k);
      o += k; p->pos += k;
      continue;
    }
    if (c != '\\') { buf[o++] = (char)c; p->pos++; continue; }
    p->pos++;
    char e = p->s[p->pos++];
    switch (e) {
      case '"': buf[o++] = '"'; break;
      case '\\': buf[o++] = '\\'; break;
      case '/': buf[o++] = '/'; break;
      case 'b': buf[o++] = '\b'; break;
      case 'f': buf[o++] = '\f'; break;
      case 'n': buf[o++] = '\n'; break;
      case 'r': buf[o++] = '\r'; break;
      case 't': buf[o++] = '\t'; break;
      case 'u': {
        uint32_t cp, lo;
        if (hex4(p, &cp) != 0) { free(buf); return -1; }
        if (cp >= 0xdc00 && cp <= 0xdfff) { free(buf); return bert_json_fail(p, "lone low surrogate \\u%04X", cp); }
        if (cp >= 0xd800 && cp <= 0xdbff) {
          if (end - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
            free(buf); return bert_json_fail(p, "high surrogate \\u%04X not followed by a low one", cp);
          }
          p->pos += 2;
          if (hex4(p, &lo) != 0) { free(buf); return -1; }
          if (lo < 0xdc00 || lo > 0xdfff) {
            free(buf); return bert_json_fail(p, "high surrogate \\u%04X followed by \\u%04X", cp, lo);
          }
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        if (cp == 0) { free(buf); return bert_json_fail(p, "\\u0000 (NUL) is not allowed in names or metadata"); }
        o += put_utf8(buf + o, cp);
        break;
      }
      default:
        p->pos--;
        free(buf);
        return bert_json_fail(p, "invalid escape '\\%c'", (e >= 0x20 && e < 0x7f) ? e : '?');
    }
  }
  if (p->pos > end) { free(buf); return bert_json_fail(p, "unterminated escape"); }
  p->pos = end + 1;
  buf[o] = '\0';
  *out = buf;
  if (outlen) *outlen = o;
  return 0;
}

/* Parses a number.  *is_uint tells whether it is a non-negative integer
** without fraction or exponent that fits int64; then *val holds it. */
int bert_json_number(bert_json *p, int *is_uint, int *negative, int64_t *val) {
  bert_json_skip_ws(p);
  const char *s = p->s;
  size_t i = p->pos;
  int neg = 0, frac = 0, overflow = 0;
  uint64_t v = 0;
  if (i < p->n && s[i] == '-') { neg = 1; i++; }
  if (i >= p->n || s[i] < '0' || s[i] > '9') { p->pos = i; return bert_json_fail(p, "expected a digit"); }
  if (s[i] == '0') {
    i++;
    if (i < p->n && s[i] >= '0' && s[i] <= '9') { p->pos = i; return bert_json_fail(p, "leading zero in a number"); }
  } else {
    while (i < p->n && s[i] >= '0' && s[i] <= '9') {
      unsigned d = (unsigned)(s[i] - '0');
      if (v > ((uint64_t)INT64_MAX - d) / 10) overflow = 1;
      else v = v * 10 + d;
      i++;
    }
  }
  if (i < p->n && s[i] == '.') {
    frac = 1; i++;
    if (i >= p->n || s[i] < '0' || s[i] > '9') { p->pos = i; return bert_json_fail(p, "expected a digit after '.'"); }
    while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < p->n && (s[i] == 'e' || s[i] == 'E')) {
    frac = 1; i++;
    if (i < p->n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= p->n || s[i] < '0' || s[i] > '9') { p->pos = i; return bert_json_fail(p, "expected a digit in an exponent"); }
    while (i < p->n && s[i] >= '0' && s[i] <= '9') i++;
  }
  p->pos = i;
  *negative = neg;
  *is_uint = !neg && !frac && !overflow;
  *val = (int64_t)v;
  return 0;
}

static int skip_container(bert_json *p, char close) {
  if (++p->depth > BERT_JSON_MAX_DEPTH) return bert_json_fail(p, "nesting deeper than %d levels", BERT_JSON_MAX_DEPTH);
  p->pos++;
  bert_json_skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == close) { p->pos++; p->depth--; return 0; }
  for (;;) {
    if (close == '}') {
      char *k;
      if (bert_json_string(p, &k, NULL) != 0) return -1;
      free(k);
      if (bert_json_expect(p, ':', "':' after an object key") != 0) return -1;
    }
    if (bert_json_skip_value(p) != 0) return -1;
    bert_json_skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ',') { p->pos++; continue; }
    if (p->pos < p->n && p->s[p->pos] == close) { p->pos++; p->depth--; return 0; }
    char b[32];
    return bert_json_fail(p, close == '}' ? "expected ',' or '}' in an object, found %s"
                                     : "expected ',' or ']' in an array, found %s",
                     bert_json_describe(p, b, sizeof b));
  }
}

int bert_json_literal(bert_json *p, const char *lit) {
  size_t len = strlen(lit);
  if (p->n - p->pos < len || memcmp(p->s + p->pos, lit, len) != 0) {
    char b[32];
    return bert_json_fail(p, "expected a value, found %s", bert_json_describe(p, b, sizeof b));
  }
  p->pos += len;
  return 0;
}

int bert_json_skip_value(bert_json *p) {
  bert_json_skip_ws(p);
  if (p->pos >= p->n) return bert_json_fail(p, "expected a value, found the end of the header");
  char c = p->s[p->pos];
  if (c == '{') return skip_container(p, '}');
  if (c == '[') return skip_container(p, ']');
  if (c == '"') { char *s; if (bert_json_string(p, &s, NULL) != 0) return -1; free(s); return 0; }
  if (c == '-' || (c >= '0' && c <= '9')) { int u, ng; int64_t v; return bert_json_number(p, &u, &ng, &v); }
  if (c == 't') return bert_json_literal(p, "true");
  if (c == 'f') return bert_json_literal(p, "false");
  if (c == 'n') return bert_json_literal(p, "null");
  char b[32];
  return bert_json_fail(p, "expected a value, found %s", bert_json_describe(p, b, sizeof b));
}

int bert_json_accept(bert_json *p, char c) {
  bert_json_skip_ws(p);
  if (p->pos < p->n && p->s[p->pos] == c) { p->pos++; return 1; }
  return 0;
}

int bert_json_next_or_close(bert_json *p, char close) {
  if (bert_json_accept(p, ',')) return 1;
  if (bert_json_accept(p, close)) return 0;
  char b[32];
  bert_json_fail(p, close == '}' ? "expected ',' or '}' in an object, found %s"
                            : "expected ',' or ']' in an array, found %s",
            bert_json_describe(p, b, sizeof b));
  return -1;
}

