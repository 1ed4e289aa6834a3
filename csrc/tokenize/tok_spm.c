/*
** SentencePiece .model files: a small protobuf reader for ModelProto
** (sentencepiece_model.proto) — the pieces with their scores and types,
** the trainer spec fields encoding needs, the normalizer spec with its
** precompiled charsmap.  Every length is checked against the bytes left,
** so a truncated or hostile file gives an error, never a read past the
** end.  Unknown fields are skipped as the wire format says.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenize/tok.h"

typedef struct { const uint8_t *p, *end; char *err; size_t errlen; } pb;

static int pb_fail(pb *r, const char *what) {
  snprintf(r->err, r->errlen, "%s", what);
  return -1;
}

static int pb_varint(pb *r, uint64_t *v) {
  uint64_t x = 0;
  for (int sh = 0; sh < 64; sh += 7) {
    if (r->p >= r->end) return pb_fail(r, "truncated varint");
    uint8_t b = *r->p++;
    x |= (uint64_t)(b & 0x7F) << sh;
    if (!(b & 0x80)) { *v = x; return 0; }
  }
  return pb_fail(r, "varint longer than 10 bytes");
}

/* Reads a length-delimited field's bounds. */
static int pb_bytes(pb *r, const uint8_t **s, size_t *len) {
  uint64_t n;
  if (pb_varint(r, &n)) return -1;
  if (n > (uint64_t)(r->end - r->p)) {
    snprintf(r->err, r->errlen, "a field of %llu bytes runs past the end "
             "(%zu bytes left)", (unsigned long long)n, (size_t)(r->end - r->p));
    return -1;
  }
  *s = r->p; *len = (size_t)n;
  r->p += n;
  return 0;
}

static int pb_fixed32(pb *r, uint32_t *v) {
  if (r->end - r->p < 4) return pb_fail(r, "truncated fixed32");
  *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
       (uint32_t)r->p[3] << 24;
  r->p += 4;
  return 0;
}

static int pb_skip(pb *r, int wt) {
  uint64_t v; const uint8_t *s; size_t n;
  switch (wt) {
  case 0: return pb_varint(r, &v);
  case 1: if (r->end - r->p < 8) return pb_fail(r, "truncated fixed64");
          r->p += 8; return 0;
  case 2: return pb_bytes(r, &s, &n);
  case 5: if (r->end - r->p < 4) return pb_fail(r, "truncated fixed32");
          r->p += 4; return 0;
  default:
    snprintf(r->err, r->errlen, "unsupported wire type %d", wt);
    return -1;
  }
}

/* Reads a tag; wire type check for known fields. */
static int pb_tag(pb *r, uint32_t *field, int *wt) {
  uint64_t t;
  if (pb_varint(r, &t)) return -1;
  *field = (uint32_t)(t >> 3); *wt = (int)(t & 7);
  if (*field == 0) return pb_fail(r, "field number 0");
  return 0;
}

static int want(pb *r, const char *msg, uint32_t f, int wt, int expect) {
  if (wt == expect) return 0;
  snprintf(r->err, r->errlen, "%s field %u: wire type %d, expected %d "
           "(wrong field type)", msg, f, wt, expect);
  return -1;
}

static int read_int(pb *r, const char *msg, uint32_t f, int wt, int32_t *out) {
  uint64_t v;
  if (want(r, msg, f, wt, 0) || pb_varint(r, &v)) return -1;
  *out = (int32_t)(int64_t)v;         /* negatives are 10-byte varints */
  return 0;
}

static char *dup_bytes(const uint8_t *s, size_t n) {
  char *c = malloc(n + 1);
  if (c) { memcpy(c, s, n); c[n] = '\0'; }
  return c;
}

void bt_spm_free(bt_spm_model *m) {
  for (int32_t i = 0; m->pieces && i < m->npieces; i++) free(m->pieces[i]);
  free(m->pieces); free(m->piece_len); free(m->scores); free(m->types);
  free(m->norm_name); free(m->charsmap);
  memset(m, 0, sizeof *m);
}

static int read_piece(pb *r, bt_spm_model *m, const uint8_t *s, size_t n) {
  pb sub = {s, s + n, r->err, r->errlen};
  int32_t i = m->npieces;
  const uint8_t *ps = NULL; size_t pl = 0;
  float score = 0.0f; int32_t type = BT_PIECE_NORMAL;
  int have_piece = 0;
  while (sub.p < sub.end) {
    uint32_t f; int wt;
    if (pb_tag(&sub, &f, &wt)) return -1;
    if (f == 1) {
      if (want(&sub, "piece", f, wt, 2) || pb_bytes(&sub, &ps, &pl)) return -1;
      have_piece = 1;
    } else if (f == 2) {
      uint32_t u;
      if (want(&sub, "piece", f, wt, 5) || pb_fixed32(&sub, &u)) return -1;
      memcpy(&score, &u, 4);
    } else if (f == 3) {
      if (read_int(&sub, "piece", f, wt, &type)) return -1;
    } else if (pb_skip(&sub, wt)) return -1;
  }
  if (!have_piece || pl == 0) {
    snprintf(r->err, r->errlen, "piece %d: empty piece string", (int)i);
    return -1;
  }
  if (type < BT_PIECE_NORMAL || type > BT_PIECE_BYTE) {
    snprintf(r->err, r->errlen, "piece %d: type %d not in 1..6", (int)i, (int)type);
    return -1;
  }
  if (score != score) {
    snprintf(r->err, r->errlen, "piece %d: score is NaN", (int)i);
    return -1;
  }
  size_t need = (size_t)i + 1;
  if ((need & (need - 1)) == 0 || i == 0) {   /* grow at powers of two */
    size_t nc = need * 2;
    char **a = realloc(m->pieces, nc * sizeof *a);
    if (a) m->pieces = a;
    uint32_t *b = realloc(m->piece_len, nc * sizeof *b);
    if (b) m->piece_len = b;
    float *c = realloc(m->scores, nc * sizeof *c);
    if (c) m->scores = c;
    uint8_t *d = realloc(m->types, nc);
    if (d) m->types = d;
    if (!a || !b || !c || !d) return pb_fail(r, "out of memory");
  }
  if (!(m->pieces[i] = dup_bytes(ps, pl))) return pb_fail(r, "out of memory");
  m->piece_len[i] = (uint32_t)pl;
  m->scores[i] = score;
  m->types[i] = (uint8_t)type;
  m->npieces++;
  return 0;
}

static int read_trainer(pb *r, bt_spm_model *m, const uint8_t *s, size_t n) {
  pb sub = {s, s + n, r->err, r->errlen};
  while (sub.p < sub.end) {
    uint32_t f; int wt; int32_t v;
    if (pb_tag(&sub, &f, &wt)) return -1;
    switch (f) {
    case 3: if (read_int(&sub, "trainer_spec", f, wt, &m->model_type)) return -1; break;
    case 4: if (read_int(&sub, "trainer_spec", f, wt, &m->vocab_size)) return -1; break;
    case 24: if (read_int(&sub, "trainer_spec", f, wt, &v)) return -1;
             m->treat_ws_as_suffix = v != 0; break;
    case 35: if (read_int(&sub, "trainer_spec", f, wt, &v)) return -1;
             m->byte_fallback = v != 0; break;
    case 40: if (read_int(&sub, "trainer_spec", f, wt, &m->unk_id)) return -1; break;
    case 41: if (read_int(&sub, "trainer_spec", f, wt, &m->bos_id)) return -1; break;
    case 42: if (read_int(&sub, "trainer_spec", f, wt, &m->eos_id)) return -1; break;
    case 43: if (read_int(&sub, "trainer_spec", f, wt, &m->pad_id)) return -1; break;
    default: if (pb_skip(&sub, wt)) return -1;
    }
  }
  return 0;
}

static int read_normalizer(pb *r, bt_spm_model *m, const uint8_t *s, size_t n) {
  pb sub = {s, s + n, r->err, r->errlen};
  while (sub.p < sub.end) {
    uint32_t f; int wt; int32_t v;
    const uint8_t *bs; size_t bl;
    if (pb_tag(&sub, &f, &wt)) return -1;
    switch (f) {
    case 1:
      if (want(&sub, "normalizer_spec", f, wt, 2) || pb_bytes(&sub, &bs, &bl)) return -1;
      free(m->norm_name);
      if (!(m->norm_name = dup_bytes(bs, bl))) return pb_fail(r, "out of memory");
      break;
    case 2:
      if (want(&sub, "normalizer_spec", f, wt, 2) || pb_bytes(&sub, &bs, &bl)) return -1;
      free(m->charsmap);
      if (!(m->charsmap = malloc(bl + 1))) return pb_fail(r, "out of memory");
      memcpy(m->charsmap, bs, bl);
      m->charsmap_len = bl;
      break;
    case 3: if (read_int(&sub, "normalizer_spec", f, wt, &v)) return -1;
            m->add_dummy_prefix = v != 0; break;
    case 4: if (read_int(&sub, "normalizer_spec", f, wt, &v)) return -1;
            m->remove_extra_ws = v != 0; break;
    case 5: if (read_int(&sub, "normalizer_spec", f, wt, &v)) return -1;
            m->escape_ws = v != 0; break;
    default: if (pb_skip(&sub, wt)) return -1;
    }
  }
  return 0;
}

int bt_spm_parse(const uint8_t *data, size_t len, bt_spm_model *m,
                 char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  /* proto defaults */
  m->model_type = 1; m->vocab_size = 8000;
  m->unk_id = 0; m->bos_id = 1; m->eos_id = 2; m->pad_id = -1;
  m->add_dummy_prefix = 1; m->remove_extra_ws = 1; m->escape_ws = 1;
  pb r = {data, data + len, err, errlen};
  char inner[200];
  while (r.p < r.end) {
    uint32_t f; int wt;
    const uint8_t *s; size_t n;
    if (pb_tag(&r, &f, &wt)) goto fail;
    if (f >= 1 && f <= 3) {
      if (want(&r, "ModelProto", f, wt, 2) || pb_bytes(&r, &s, &n)) goto fail;
      pb sub = {s, s + n, inner, sizeof inner};
      int rc = f == 1 ? read_piece(&sub, m, s, n)
             : f == 2 ? read_trainer(&sub, m, s, n) : read_normalizer(&sub, m, s, n);
      if (rc) {
        snprintf(err, errlen, "%s: %s", f == 1 ? "pieces" : f == 2 ?
                 "trainer_spec" : "normalizer_spec", inner);
        goto fail;
      }
    } else if (pb_skip(&r, wt)) goto fail;
  }
  if (m->npieces == 0) {
    snprintf(err, errlen, "no pieces (not a SentencePiece model?)");
    goto fail;
  }
  if (m->model_type != 1) {
    snprintf(err, errlen, "model_type %d is not Unigram (1); BPE/word/char "
             ".model files are not supported", (int)m->model_type);
    goto fail;
  }
  int unk = 0;
  for (int32_t i = 0; i < m->npieces; i++) unk += m->types[i] == BT_PIECE_UNKNOWN;
  if (unk != 1) {
    snprintf(err, errlen, "%d pieces of type UNKNOWN, expected exactly one", unk);
    goto fail;
  }
  return 0;
fail:
  bt_spm_free(m);
  return -1;
}

/* Builds a tokenizer with SentencePiece's semantics from a parsed model. */
static bt_tokenizer *spm_build(const bt_spm_model *m, char *err, size_t errlen) {
  bt_tokenizer *t = bt_tokenizer_new(BT_MODEL_UNIGRAM);
  double *sc = NULL;
  if (!t) { snprintf(err, errlen, "out of memory"); return NULL; }
  t->uni_spm = 1;
  t->byte_fallback = m->byte_fallback;
  t->add_dummy_prefix = m->add_dummy_prefix;
  t->remove_extra_ws = m->remove_extra_ws;
  t->escape_ws = m->escape_ws;
  t->ws_as_suffix = m->treat_ws_as_suffix;
  t->decoder = BT_DEC_METASPACE;
  for (int32_t i = 0; i < m->npieces; i++) {
    if (bt_vocab_get(&t->vocab, m->pieces[i], m->piece_len[i]) >= 0) {
      snprintf(err, errlen, "piece %d ('%.40s') is a duplicate", (int)i, m->pieces[i]);
      goto fail;
    }
    if (bt_vocab_set(&t->vocab, m->pieces[i], m->piece_len[i], i)) goto oom;
  }
  if (!(sc = malloc(((size_t)m->npieces + 1) * sizeof *sc))) goto oom;
  for (int32_t i = 0; i < m->npieces; i++) sc[i] = m->scores[i];
  if (bt_unigram_setup(t, sc, m->types, m->npieces)) {
    snprintf(err, errlen, "%s", t->err);
    goto fail;
  }
  if (bt_charsmap_load(&t->charsmap, m->charsmap, m->charsmap_len, err, errlen))
    goto fail;
  if (bt_tokenizer_finish(t)) goto oom;
  free(sc);
  return t;
oom:
  snprintf(err, errlen, "out of memory");
fail:
  free(sc);
  bt_tokenizer_free(t);
  return NULL;
}

bt_tokenizer *bt_unigram_load_model(const uint8_t *data, size_t len,
                                    char *err, size_t errlen) {
  bt_spm_model m;
  if (bt_spm_parse(data, len, &m, err, errlen)) return NULL;
  bt_tokenizer *t = spm_build(&m, err, errlen);
  bt_spm_free(&m);
  return t;
}
