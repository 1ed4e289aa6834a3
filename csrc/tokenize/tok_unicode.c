/*
** UTF-8 and character classes for the tokenizers (via libutf8proc).
** ASCII is answered from tables; the rest from utf8proc's properties.
*/
#include <utf8proc.h>

#include "tokenize/tok.h"

/* Decodes one character at s[i]; returns its byte length (invalid: 1,
** with U+FFFD). */
static size_t next_char(const unsigned char *s, size_t len, size_t i,
                        uint32_t *out) {
  unsigned c = s[i];
  if (c < 0x80) { *out = c; return 1; }
  uint32_t cp, min; int need;
  if (c >= 0xC2 && c <= 0xDF) { cp = c & 0x1F; need = 1; min = 0x80; }
  else if (c >= 0xE0 && c <= 0xEF) { cp = c & 0x0F; need = 2; min = 0x800; }
  else if (c >= 0xF0 && c <= 0xF4) { cp = c & 0x07; need = 3; min = 0x10000; }
  else { *out = 0xFFFD; return 1; }
  int k, ok = (len - i) > (size_t)need;
  for (k = 1; ok && k <= need; k++) {
    unsigned cc = s[i + k];
    if ((cc & 0xC0) != 0x80) ok = 0;
    else cp = (cp << 6) | (cc & 0x3F);
  }
  if (!ok || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    *out = 0xFFFD; return 1;
  }
  *out = cp;
  return (size_t)need + 1;
}

size_t bt_utf8_decode(const char *str, size_t len, uint32_t *out) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0, n = 0;
  while (i < len) {
    if (s[i] < 0x80) { out[n++] = s[i++]; continue; }
    i += next_char(s, len, i, &out[n++]);
  }
  return n;
}

size_t bt_utf8_decode_starts(const char *str, size_t len, uint32_t *out,
                             size_t *starts) {
  const unsigned char *s = (const unsigned char *)str;
  size_t i = 0, n = 0;
  while (i < len) {
    starts[n] = i;
    if (s[i] < 0x80) { out[n++] = s[i++]; continue; }
    i += next_char(s, len, i, &out[n++]);
  }
  starts[n] = len;
  return n;
}

int bt_utf8_encode(uint32_t cp, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F)); return 3;
  }
  o[0] = (unsigned char)(0xF0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F)); return 4;
}

/* White_Space property (Rust char::is_whitespace, Oniguruma \s). */
int bt_is_whitespace(uint32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029:
    case 0x202F: case 0x205F: case 0x3000: return 1;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

int bt_is_punctuation(uint32_t c) {
  if (c < 0x80)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) ||
           (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO: return 1;
    default: return 0;
  }
}

/* Cc, Cf or Co (HF's is_other on its Unicode 8 table). */
int bt_is_control(uint32_t c) {
  if (c < 0x80) return c < 32 || c == 127;
  switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CO: return 1;
    default: return 0;
  }
}

/* HF's ranges (note 2B920, not Google's 2B820). */
int bt_is_chinese(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

int bt_is_letter(uint32_t c) {
  if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
  switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return 1;
    default: return 0;
  }
}

int bt_is_number(uint32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO: return 1;
    default: return 0;
  }
}

/* GPT-2 byte <-> unicode map. */
uint32_t bt_byte_to_cp(int b) {
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
    return (uint32_t)b;
  /* the 68 others, in ascending order, from U+0100 */
  int k;
  if (b <= 32) k = b;                           /* 0..32 -> 0..32 */
  else if (b <= 160) k = 33 + (b - 127);        /* 127..160 -> 33..66 */
  else k = 67;                                  /* 173 */
  return 0x100 + (uint32_t)k;
}

int bt_cp_to_byte(uint32_t cp) {
  if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) ||
      (cp >= 174 && cp <= 255)) return (int)cp;
  if (cp < 0x100 || cp > 0x100 + 67) return -1;
  int k = (int)(cp - 0x100);
  if (k <= 32) return k;
  if (k <= 66) return 127 + (k - 33);
  return 173;
}
