/*
** Lua binding of the C tokenizers: bert.core.tokenizer.
**
** core.tokenizer.new(config)      -> Tokenizer (userdata "bert.Tokenizer")
** core.tokenizer.trainer(opts)    -> Trainer  (userdata "bert.TokenizerTrainer")
** core.tokenizer.methods          -> the Tokenizer method table (the Lua
**                                    facade adds save, get_vocab, ...)
** Offsets are {start, stop}: 0-based start, exclusive stop, in characters
** (code points) of the original string, as in Hugging Face.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "lbert.h"
#include "tokenize/tok.h"

#define TOKENIZER_MT "bert.Tokenizer"
#define TRAINER_MT "bert.TokenizerTrainer"

typedef struct { bt_tokenizer *t; } LTok;
typedef struct { bt_trainer *tr; int kind; bt_unigram_train_opts uo; } LTrainer;

/* ---------- argument helpers ---------- */

static int arg_error(lua_State *L, const char *fname, int arg,
                     const char *name, const char *expected) {
  return luaL_error(L, "%s: argument #%d (%s) expected %s, got %s", fname,
                    arg, name, expected, luaL_typename(L, arg));
}

static const char *check_str(lua_State *L, int arg, const char *fname,
                             const char *name, size_t *len) {
  if (lua_type(L, arg) != LUA_TSTRING)
    arg_error(L, fname, arg, name, "string");
  return lua_tolstring(L, arg, len);
}

static void check_table(lua_State *L, int arg, const char *fname,
                        const char *name) {
  if (!lua_istable(L, arg)) arg_error(L, fname, arg, name, "table");
}

static bt_tokenizer *check_tok(lua_State *L, const char *fname) {
  LTok *u = luaL_testudata(L, 1, TOKENIZER_MT);
  if (!u) luaL_error(L, "%s: argument #1 (self) expected bert.Tokenizer, "
                     "got %s (use tok:%s(...))", fname, luaL_typename(L, 1), fname);
  if (!u->t) luaL_error(L, "%s: the tokenizer is closed", fname);
  return u->t;
}

/* Field helpers on the table at index idx. */
static int opt_bool(lua_State *L, int idx, const char *k, int def) {
  lua_getfield(L, idx, k);
  int v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static long opt_int(lua_State *L, int idx, const char *fname, const char *k,
                    long def, long lo, long hi) {
  lua_getfield(L, idx, k);
  long v = def;
  if (!lua_isnil(L, -1)) {
    int ok;
    lua_Integer x = lua_tointegerx(L, -1, &ok);
    if (!ok) luaL_error(L, "%s: option '%s' expected integer, got %s", fname,
                        k, luaL_typename(L, -1));
    if (x < lo || x > hi) luaL_error(L, "%s: option '%s' = %d out of range "
                                     "[%d, %d]", fname, k, (int)x, (int)lo, (int)hi);
    v = (long)x;
  }
  lua_pop(L, 1);
  return v;
}

/* Returns a malloc'd copy of string field k, or NULL. */
static char *opt_strdup(lua_State *L, int idx, const char *k) {
  lua_getfield(L, idx, k);
  char *r = NULL;
  if (lua_type(L, -1) == LUA_TSTRING) {
    size_t n; const char *s = lua_tolstring(L, -1, &n);
    r = malloc(n + 1);
    if (r) { memcpy(r, s, n); r[n] = '\0'; }
  }
  lua_pop(L, 1);
  return r;
}

/* ---------- construction ---------- */

static void push_tok(lua_State *L, bt_tokenizer *t) {
  LTok *u = lua_newuserdatauv(L, sizeof *u, 1);
  u->t = t;
  luaL_setmetatable(L, TOKENIZER_MT);
}

static bt_piece *read_template(lua_State *L, int idx, int *n) {
  int cnt = (int)luaL_len(L, idx);
  bt_piece *p = calloc((size_t)cnt + 1, sizeof *p);
  if (!p) luaL_error(L, "tokenizer.new: out of memory");
  for (int i = 0; i < cnt; i++) {
    lua_rawgeti(L, idx, i + 1);
    int it = lua_gettop(L);
    if (!lua_istable(L, it)) { free(p); luaL_error(L, "tokenizer.new: template item %d is not a table", i + 1); }
    p[i].type_id = (int32_t)opt_int(L, it, "tokenizer.new", "type_id", 0, 0, 1 << 30);
    lua_getfield(L, it, "seq");
    if (!lua_isnil(L, -1)) {
      p[i].seq = (int)lua_tointeger(L, -1);
    } else {
      p[i].seq = -1;
      lua_getfield(L, it, "ids");
      int k = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
      p[i].ids = calloc((size_t)k + 1, sizeof *p[i].ids);
      p[i].nids = k;
      for (int j = 0; p[i].ids && j < k; j++) {
        lua_rawgeti(L, -1, j + 1);
        int ok; lua_Integer v = lua_tointegerx(L, -1, &ok);
        p[i].ids[j] = ok && v >= 0 && v <= INT32_MAX ? (int32_t)v : -1;
        lua_pop(L, 1);
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
  }
  *n = cnt;
  return p;
}

/* Raises after freeing t. */
static int new_fail(lua_State *L, bt_tokenizer *t, const char *msg) {
  lua_pushfstring(L, "tokenizer.new: %s", msg);
  bt_tokenizer_free(t);
  return lua_error(L);
}


/* Unigram parts of the config: scores, types, unk, charsmap, the spm
** normalizer flags and the HF normalizer chain. */
static void unigram_config(lua_State *L, bt_tokenizer *t) {
  t->uni_spm = opt_bool(L, 1, "spm", 0);
  t->byte_fallback = opt_bool(L, 1, "byte_fallback", 0);
  t->dec_byte_fallback = opt_bool(L, 1, "decoder_byte_fallback", 0);
  t->add_dummy_prefix = opt_bool(L, 1, "add_dummy_prefix", 1);
  t->remove_extra_ws = opt_bool(L, 1, "remove_extra_whitespaces", 1);
  t->escape_ws = opt_bool(L, 1, "escape_whitespaces", 1);
  t->ws_as_suffix = opt_bool(L, 1, "treat_whitespace_as_suffix", 0);
  lua_getfield(L, 1, "unk_id");
  if (!lua_isnil(L, -1)) {
    int ok; lua_Integer u = lua_tointegerx(L, -1, &ok);
    if (!ok || u < 0 || u > INT32_MAX) {
      lua_pop(L, 1);
      new_fail(L, t, "unk_id: expected a non-negative integer or nil");
    }
    t->unk_id = (int32_t)u;
  }
  lua_pop(L, 1);
  int32_t n = 0;
  for (size_t i = 0; i < t->vocab.nid; i++) if (t->vocab.by_id[i] >= 0) n = (int32_t)i + 1;
  double *sc = calloc((size_t)n + 1, sizeof *sc);
  uint8_t *ty = malloc((size_t)n + 1);
  if (!sc || !ty) { free(sc); free(ty); new_fail(L, t, "out of memory"); }
  memset(ty, BT_PIECE_NORMAL, (size_t)n + 1);
  lua_getfield(L, 1, "scores");
  if (lua_istable(L, -1)) {
    for (int32_t i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      int ok; lua_Number v = lua_tonumberx(L, -1, &ok);
      if (!ok || v != v) {
        char msg[120];
        snprintf(msg, sizeof msg, "scores[%d]: expected a number, got %s",
                 (int)i + 1, luaL_typename(L, -1));
        free(sc); free(ty);
        new_fail(L, t, msg);
        return;
      }
      sc[i] = v;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "types");
  if (lua_istable(L, -1)) {
    for (int32_t i = 0; i < n; i++) {
      lua_rawgeti(L, -1, i + 1);
      if (!lua_isnil(L, -1)) {
        int ok; lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok || v < BT_PIECE_NORMAL || v > BT_PIECE_BYTE) {
          free(sc); free(ty);
          new_fail(L, t, "types: piece types must be integers 1..6");
        }
        ty[i] = (uint8_t)v;
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  int rc = bt_unigram_setup(t, sc, ty, n);
  free(sc); free(ty);
  if (rc) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s", t->err);
    new_fail(L, t, msg);
  }
  if (t->unk_id >= n && n > 0) {
    char msg[120];
    snprintf(msg, sizeof msg, "unk_id %d is outside the vocabulary (%d pieces)",
             (int)t->unk_id, (int)n);
    new_fail(L, t, msg);
  }
  lua_getfield(L, 1, "charsmap");
  if (lua_type(L, -1) == LUA_TSTRING) {
    size_t len; const char *cm = lua_tolstring(L, -1, &len);
    char err[256];
    if (bt_charsmap_load(&t->charsmap, (const uint8_t *)cm, len, err, sizeof err)) {
      lua_pop(L, 1);
      new_fail(L, t, err);
    }
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "replacement");
  if (lua_type(L, -1) == LUA_TSTRING) {
    size_t len; const char *r = lua_tolstring(L, -1, &len);
    uint32_t cps[8];
    if (len == 0 || len > 4 || bt_utf8_decode(r, len, cps) != 1)
      new_fail(L, t, "replacement: expected a single character");
    t->meta_repl = cps[0];
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "prepend_scheme");
  const char *ps = lua_tostring(L, -1);
  if (ps) {
    if (strcmp(ps, "always") == 0) t->prepend_scheme = BT_PREPEND_ALWAYS;
    else if (strcmp(ps, "first") == 0) t->prepend_scheme = BT_PREPEND_FIRST;
    else if (strcmp(ps, "never") == 0) t->prepend_scheme = BT_PREPEND_NEVER;
    else new_fail(L, t, "prepend_scheme: expected 'always', 'first' or 'never'");
  }
  lua_pop(L, 1);
  t->meta_split = opt_bool(L, 1, "split", 1);
}

/* The HF normalizer chain: normalizers = {{kind =, pattern =, content =,
** left =, right =}, ...} (Unigram files; WordPiece / BPE ones whose
** normalizer is not BertNormalizer). */
static void config_norm_steps(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "normalizers");
  if (lua_istable(L, -1)) {
    int li = lua_gettop(L);
    lua_Integer k = luaL_len(L, li);
    for (lua_Integer i = 1; i <= k; i++) {
      lua_rawgeti(L, li, i);
      int it = lua_gettop(L);
      if (!lua_istable(L, it)) new_fail(L, t, "normalizers: each step must be a table");
      lua_getfield(L, it, "kind");
      const char *kind = lua_tostring(L, -1);
      static const char *const names[] = {"replace", "spaces", "lowercase", "nfkd",
                                          "nfd", "strip_accents", "precompiled",
                                          "prepend", "strip", "nfc", "nfkc",
                                          "nmt", NULL};
      int kd = -1;
      for (int j = 0; kind && names[j]; j++) if (strcmp(kind, names[j]) == 0) kd = j;
      if (kd < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "normalizers[%d]: unknown kind '%s'", (int)i,
                 kind ? kind : "(none)");
        new_fail(L, t, msg);
      }
      lua_getfield(L, it, "pattern");
      lua_getfield(L, it, "content");
      size_t fl = 0, tl = 0;
      const char *from = lua_tolstring(L, -2, &fl), *to = lua_tolstring(L, -1, &tl);
      if (bt_add_norm_step(t, kd, from, from ? fl : 0, to, to ? tl : 0))
        new_fail(L, t, "out of memory");
      t->norms[t->nnorms - 1].strip_left = opt_bool(L, it, "left", 1);
      t->norms[t->nnorms - 1].strip_right = opt_bool(L, it, "right", 1);
      lua_pop(L, 4);
    }
  }
  lua_pop(L, 1);
}

/* Splitting pre-tokenizers: pre_tokenizers = {"whitespace", "digits", ...}. */
static void config_splits(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "pre_tokenizers");
  if (lua_istable(L, -1)) {
    static const char *const names[] = {"whitespace_split", "whitespace", "bert",
                                        "punctuation", "digits", "digits_each", NULL};
    lua_Integer k = luaL_len(L, -1);
    if (k > BT_MAX_SPLITS) new_fail(L, t, "pre_tokenizers: more than 8 steps");
    for (lua_Integer i = 1; i <= k; i++) {
      lua_rawgeti(L, -1, i);
      const char *name = lua_tostring(L, -1);
      int kd = -1;
      for (int j = 0; name && names[j]; j++) if (strcmp(name, names[j]) == 0) kd = j;
      if (kd < 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "pre_tokenizers[%d]: unknown kind '%s'", (int)i,
                 name ? name : luaL_typename(L, -1));
        new_fail(L, t, msg);
      }
      t->splits[t->nsplits++] = (uint8_t)kd;
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

/* The vocabulary: vocab_list (array, id = index - 1) and/or vocab (map). */
static void config_vocab(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "vocab_list");
  if (lua_istable(L, -1)) {
    lua_Integer n = luaL_len(L, -1);
    if (n > INT32_MAX) new_fail(L, t, "vocab_list: too many entries");
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      if (lua_type(L, -1) != LUA_TSTRING && !(lua_isboolean(L, -1) && !lua_toboolean(L, -1))) {
        char msg[160];
        snprintf(msg, sizeof msg, "vocab_list[%d]: expected a string (or false "
                 "for a hole), got %s", (int)i, luaL_typename(L, -1));
        new_fail(L, t, msg);
      }
      size_t len; const char *s = lua_tolstring(L, -1, &len);
      if (s && bt_vocab_set(&t->vocab, s, len, (int32_t)(i - 1)))
        new_fail(L, t, "out of memory");
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "vocab");
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      int ok; lua_Integer id = lua_tointegerx(L, -1, &ok);
      if (lua_type(L, -2) != LUA_TSTRING || !ok || id < 0 || id > INT32_MAX) {
        char msg[200];
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        snprintf(msg, sizeof msg, "vocab: entry %s%.60s%s has id %s; ids must be "
                 "integers in [0, 2^31)", k ? "'" : "(a ", k ? k : luaL_typename(L, -2),
                 k ? "'" : " key)", lua_type(L, -1) == LUA_TNUMBER ?
                 lua_tostring(L, -1) : luaL_typename(L, -1));
        new_fail(L, t, msg);
      }
      size_t len; const char *s = lua_tolstring(L, -2, &len);
      if (bt_vocab_set(&t->vocab, s, len, (int32_t)id))
        new_fail(L, t, "out of memory");
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

/* merges: flat {a1, b1, a2, b2, ...} */
static void config_merges(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "merges");
  if (lua_istable(L, -1)) {
    lua_Integer n = luaL_len(L, -1);
    for (lua_Integer i = 1; i + 1 <= n; i += 2) {
      lua_rawgeti(L, -1, i); lua_rawgeti(L, -2, i + 1);
      size_t la, lb;
      const char *a = lua_tolstring(L, -2, &la), *b = lua_tolstring(L, -1, &lb);
      if (!a || !b) new_fail(L, t, "merges must be strings");
      if (bt_add_merge(t, a, la, b, lb)) {
        char msg[400];
        snprintf(msg, sizeof msg, "merge %d: %s", (int)(i + 1) / 2, t->err);
        new_fail(L, t, msg);
      }
      lua_pop(L, 2);
    }
  }
  lua_pop(L, 1);
}

/* The BERT normalizer, the pre-tokenizer, the decoder and their flags. */
static void config_pipeline(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "normalizer");
  if (lua_istable(L, -1)) {
    int n = lua_gettop(L);
    t->has_normalizer = 1;
    t->clean_text = opt_bool(L, n, "clean_text", 1);
    t->handle_chinese = opt_bool(L, n, "handle_chinese_chars", 1);
    t->lowercase = opt_bool(L, n, "lowercase", 1);
    lua_getfield(L, n, "strip_accents");
    t->strip_accents = lua_isnil(L, -1) ? -1 : lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_getfield(L, 1, "pre_tokenizer");
  const char *pre = lua_tostring(L, -1);
  t->pre = !pre ? BT_PRE_NONE : strcmp(pre, "bert") == 0 ? BT_PRE_BERT
         : strcmp(pre, "byte_level") == 0 ? BT_PRE_BYTELEVEL
         : strcmp(pre, "whitespace_split") == 0 ? BT_PRE_WHITESPACE
         : strcmp(pre, "metaspace") == 0 ? BT_PRE_METASPACE : BT_PRE_NONE;
  lua_pop(L, 1);
  if (t->pre == BT_PRE_NONE && t->model == BT_MODEL_WORDPIECE) t->pre = BT_PRE_WHITESPACE;
  t->add_prefix_space = opt_bool(L, 1, "add_prefix_space", 0);
  t->use_regex = opt_bool(L, 1, "use_regex", 1);
  t->trim_offsets = opt_bool(L, 1, "trim_offsets", 0);
  t->post_add_prefix_space = opt_bool(L, 1, "post_add_prefix_space", t->add_prefix_space);
  lua_getfield(L, 1, "decoder");
  const char *dec = lua_tostring(L, -1);
  t->decoder = !dec ? BT_DEC_NONE : strcmp(dec, "wordpiece") == 0 ? BT_DEC_WORDPIECE
             : strcmp(dec, "byte_level") == 0 ? BT_DEC_BYTELEVEL
             : strcmp(dec, "metaspace") == 0 ? BT_DEC_METASPACE : BT_DEC_NONE;
  lua_pop(L, 1);
  t->dec_prefix = opt_strdup(L, 1, "decoder_prefix");
  t->cleanup = opt_bool(L, 1, "cleanup", 1);
}

static void config_added_tokens(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "added_tokens");
  if (lua_istable(L, -1)) {
    lua_Integer n = luaL_len(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      int it = lua_gettop(L);
      if (lua_istable(L, it)) {
        lua_getfield(L, it, "content");
        size_t len; const char *s = lua_tolstring(L, -1, &len);
        lua_getfield(L, it, "id");
        int ok; lua_Integer id = lua_tointegerx(L, -1, &ok);
        if (s && ok && id >= 0 &&
            bt_add_added(t, s, len, (int32_t)id, opt_bool(L, it, "special", 1),
                         opt_bool(L, it, "lstrip", 0), opt_bool(L, it, "rstrip", 0),
                         opt_bool(L, it, "single_word", 0),
                         opt_bool(L, it, "normalized", 0), opt_bool(L, it, "in_text", 1)))
          new_fail(L, t, "out of memory");
        lua_pop(L, 2);
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
}

/* The post-processor's templates; every special token they name must exist. */
static void config_post(lua_State *L, bt_tokenizer *t) {
  lua_getfield(L, 1, "post");
  if (lua_istable(L, -1)) {
    int pi = lua_gettop(L), n;
    lua_getfield(L, pi, "single");
    if (lua_istable(L, -1)) { bt_piece *p = read_template(L, lua_gettop(L), &n); bt_set_template(t, 0, p, n); }
    lua_pop(L, 1);
    lua_getfield(L, pi, "pair");
    if (lua_istable(L, -1)) { bt_piece *p = read_template(L, lua_gettop(L), &n); bt_set_template(t, 1, p, n); }
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  for (int which = 0; which < 2; which++) {
    const bt_piece *p = which ? t->pair : t->single;
    int np = which ? t->npair : t->nsingle;
    for (int i = 0; i < np; i++)
      for (int k = 0; k < p[i].nids; k++)
        if (!bt_id_to_token(t, p[i].ids[k], NULL)) {
          char msg[200];
          snprintf(msg, sizeof msg, "post.%s item %d: special token id %d is "
                   "not in the vocabulary", which ? "pair" : "single", i + 1,
                   (int)p[i].ids[k]);
          new_fail(L, t, msg);
        }
  }
}

static int tok_new(lua_State *L) {
  check_table(L, 1, "tokenizer.new", "config");
  lua_getfield(L, 1, "model");
  const char *model = lua_tostring(L, -1);
  int kind;
  if (model && strcmp(model, "wordpiece") == 0) kind = BT_MODEL_WORDPIECE;
  else if (model && strcmp(model, "bpe") == 0) kind = BT_MODEL_BPE;
  else if (model && strcmp(model, "unigram") == 0) kind = BT_MODEL_UNIGRAM;
  else return luaL_error(L, "tokenizer.new: config.model must be 'wordpiece', "
                         "'bpe' or 'unigram', got %s", model ? model : luaL_typename(L, -1));
  lua_pop(L, 1);
  bt_tokenizer *t = bt_tokenizer_new(kind);
  if (!t) return luaL_error(L, "tokenizer.new: out of memory");
  config_vocab(L, t);
  t->unk_token = opt_strdup(L, 1, "unk_token");
  t->prefix = opt_strdup(L, 1, "continuing_subword_prefix");
  if (kind == BT_MODEL_WORDPIECE && !t->prefix) t->prefix = strdup("##");
  if (kind == BT_MODEL_UNIGRAM) unigram_config(L, t);
  t->max_input_chars = (int)opt_int(L, 1, "tokenizer.new",
                                    "max_input_chars_per_word", 100, 1, 1 << 30);
  t->cache_capacity = (int)opt_int(L, 1, "tokenizer.new", "cache_capacity",
                                   10000, 0, 1 << 24);
  config_merges(L, t);
  config_norm_steps(L, t);
  config_pipeline(L, t);
  config_splits(L, t);
  t->pad_id = (int32_t)opt_int(L, 1, "tokenizer.new", "pad_id", 0, 0, INT32_MAX);
  t->pad_type_id = (int32_t)opt_int(L, 1, "tokenizer.new", "pad_type_id", 0, 0, INT32_MAX);
  config_added_tokens(L, t);
  config_post(L, t);
  if (bt_tokenizer_finish(t)) return new_fail(L, t, "out of memory");
  push_tok(L, t);
  lua_pushvalue(L, 1);                  /* keep the config for save() */
  lua_setiuservalue(L, -2, 1);
  return 1;
}

/* ---------- encoding ---------- */

typedef struct { bt_options o; int overflow; } enc_opts;

/* The options encode reads; encode_batch reads these and its own. */
#define ENCODE_OPTIONS "add_special_tokens", "max_length", "truncation", "truncation_side", \
  "stride", "return_overflowing_tokens", "max_windows", "padding", "padding_side", "pad_to_multiple_of"
static const char *const encode_options[] = {ENCODE_OPTIONS, NULL};
static const char *const encode_batch_options[] = {ENCODE_OPTIONS, "return_tensors",
  "return_offsets_mapping", "return_special_tokens_mask", NULL};

/* "left" or "right" (nil: right) for option k. */
static int opt_left(lua_State *L, int idx, const char *fname, const char *k) {
  lua_getfield(L, idx, k);
  const char *side = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  int left = side && strcmp(side, "left") == 0;
  if (!lua_isnil(L, -1) && !left && !(side && strcmp(side, "right") == 0))
    luaL_error(L, "%s: option '%s' must be 'left' or 'right', got %s", fname, k,
               side ? lua_pushfstring(L, "'%s'", side) : luaL_typename(L, -1));
  lua_pop(L, 1);
  return left;
}

static void read_opts(lua_State *L, int idx, const char *fname, const char *const known[],
                      enc_opts *eo) {
  bt_options *o = &eo->o;
  memset(eo, 0, sizeof *eo);
  o->add_special_tokens = 1;
  o->max_windows = 1000;
  if (lua_isnoneornil(L, idx)) return;
  if (!lua_istable(L, idx)) arg_error(L, fname, idx, "options", "table or nil");
  lbert_check_options(L, idx, fname, known);
  o->add_special_tokens = opt_bool(L, idx, "add_special_tokens", 1);
  long max = opt_int(L, idx, fname, "max_length", -1, 0, INT32_MAX);
  o->stride = (int)opt_int(L, idx, fname, "stride", 0, 0, INT32_MAX);
  eo->overflow = opt_bool(L, idx, "return_overflowing_tokens", 0);
  o->max_windows = (int)opt_int(L, idx, fname, "max_windows", 1000, 1, INT32_MAX);
  lua_getfield(L, idx, "truncation");
  if (lua_isboolean(L, -1) || lua_isnil(L, -1)) {
    o->truncation = lua_toboolean(L, -1) ? BT_TRUNC_LONGEST_FIRST : BT_TRUNC_NONE;
  } else {
    const char *s = lua_tostring(L, -1);
    if (s && strcmp(s, "longest_first") == 0) o->truncation = BT_TRUNC_LONGEST_FIRST;
    else if (s && strcmp(s, "only_first") == 0) o->truncation = BT_TRUNC_ONLY_FIRST;
    else if (s && strcmp(s, "only_second") == 0) o->truncation = BT_TRUNC_ONLY_SECOND;
    else luaL_error(L, "%s: option 'truncation' must be true, false, "
                    "'longest_first', 'only_first' or 'only_second', got %s",
                    fname, s ? s : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  if (o->truncation && max < 0)
    luaL_error(L, "%s: option 'truncation' needs 'max_length'", fname);
  o->max_length = (int)max;
  o->trunc_left = opt_left(L, idx, fname, "truncation_side");
  lua_getfield(L, idx, "padding");
  if (lua_isboolean(L, -1) || lua_isnil(L, -1)) {
    o->padding = lua_toboolean(L, -1) ? BT_PAD_LONGEST : BT_PAD_NONE;
  } else {
    const char *s = lua_tostring(L, -1);
    if (s && strcmp(s, "longest") == 0) o->padding = BT_PAD_LONGEST;
    else if (s && strcmp(s, "max_length") == 0) o->padding = BT_PAD_FIXED;
    else luaL_error(L, "%s: option 'padding' must be false, true, 'longest' "
                    "or 'max_length', got %s", fname, s ? s : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  if (o->padding == BT_PAD_FIXED) {
    if (max < 0) luaL_error(L, "%s: padding 'max_length' needs 'max_length'", fname);
    o->pad_length = (int)max;
  }
  o->pad_multiple = (int)opt_int(L, idx, fname, "pad_to_multiple_of", 0, 0, INT32_MAX);
  o->pad_left = opt_left(L, idx, fname, "padding_side");
}

static void push_int_array(lua_State *L, const int32_t *v, int32_t n) {
  lua_createtable(L, n, 0);
  for (int32_t i = 0; i < n; i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

static void push_u8_array(lua_State *L, const uint8_t *v, int32_t n) {
  lua_createtable(L, n, 0);
  for (int32_t i = 0; i < n; i++) {
    lua_pushinteger(L, v[i] == 1);      /* 2 marks an added token in text */
    lua_rawseti(L, -2, i + 1);
  }
}

typedef struct { const char *a, *b; size_t alen, blen; } batch_item;

/* Char -> byte starts of a text, computed once per encoding that needs
** them (added tokens report the text they matched). */
typedef struct { uint32_t *cp; size_t *starts; size_t n; } char_index;

static int char_index_of(char_index *ci, const char *x, size_t xl) {
  if (ci->starts) return 0;
  ci->cp = malloc((xl + 1) * sizeof *ci->cp);
  ci->starts = malloc((xl + 2) * sizeof *ci->starts);
  if (!ci->cp || !ci->starts) {
    free(ci->cp); free(ci->starts); ci->cp = NULL; ci->starts = NULL;
    return -1;
  }
  ci->n = bt_utf8_decode_starts(x, xl, ci->cp, ci->starts);
  return 0;
}

static void push_encoding(lua_State *L, const bt_tokenizer *t,
                          const bt_encoding *e, const batch_item *txt,
                          int with_overflow) {
  lua_createtable(L, 0, 9);
  push_int_array(L, e->ids, e->n); lua_setfield(L, -2, "ids");
  push_int_array(L, e->type_ids, e->n); lua_setfield(L, -2, "type_ids");
  push_u8_array(L, e->attn, e->n); lua_setfield(L, -2, "attention_mask");
  push_u8_array(L, e->special, e->n); lua_setfield(L, -2, "special_tokens_mask");
  lua_createtable(L, e->n, 0);
  char_index ci[2] = {{0}, {0}};
  for (int32_t i = 0; i < e->n; i++) {
    size_t len;
    const char *s = bt_id_to_token(t, e->ids[i], &len);
    const bt_added *ad = e->special[i] == 2 ? bt_added_of(t, e->ids[i]) : NULL;
    if (e->surface[2 * i] >= 0) { s = e->text + e->surface[2 * i]; len = (size_t)e->surface[2 * i + 1]; }
    else if (ad && ad->ncontent) { s = ad->ncontent; len = ad->nlen; }
    else if (ad && e->seqs[i] >= 0 && txt) {
      /* an added token keeps the text it matched (lstrip/rstrip spaces);
      ** one matched in normalized text its normalized content, as HF's */
      int q = e->seqs[i];
      const char *x = q == 0 ? txt->a : txt->b;
      size_t xl = q == 0 ? txt->alen : txt->blen;
      if (x && char_index_of(&ci[q], x, xl) == 0) {
        size_t c0 = (size_t)e->offsets[2 * i], c1 = (size_t)e->offsets[2 * i + 1];
        const uint32_t *cp = ci[q].cp;
        size_t nc = ci[q].n;
        if (ad->lstrip) while (c0 > 0 && bt_is_whitespace(cp[c0 - 1])) c0--;
        if (ad->rstrip) while (c1 < nc && bt_is_whitespace(cp[c1])) c1++;
        if (c0 > nc) c0 = nc;
        if (c1 > nc) c1 = nc;
        size_t b0 = ci[q].starts[c0], b1 = ci[q].starts[c1];
        s = x + b0; len = b1 > b0 ? b1 - b0 : 0;
      }
    }
    if (s) lua_pushlstring(L, s, len); else lua_pushliteral(L, "");
    lua_rawseti(L, -2, i + 1);
  }
  for (int q = 0; q < 2; q++) { free(ci[q].cp); free(ci[q].starts); }
  lua_setfield(L, -2, "tokens");
  lua_createtable(L, e->n, 0);
  for (int32_t i = 0; i < e->n; i++) {
    if (e->seqs[i] < 0) lua_pushboolean(L, 0);
    else lua_pushinteger(L, e->seqs[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "sequence_ids");
  lua_createtable(L, e->n, 0);
  for (int32_t i = 0; i < e->n; i++) {
    lua_createtable(L, 2, 0);
    lua_pushinteger(L, e->offsets[2 * i]); lua_rawseti(L, -2, 1);
    lua_pushinteger(L, e->offsets[2 * i + 1]); lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "offsets");
  lua_createtable(L, e->n, 0);
  for (int32_t i = 0; i < e->n; i++) {
    if (e->words[i] < 0) lua_pushboolean(L, 0);
    else lua_pushinteger(L, e->words[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "word_ids");
  if (with_overflow) {
    lua_createtable(L, e->nover, 0);
    for (int i = 0; i < e->nover; i++) {
      push_encoding(L, t, &e->over[i], txt, 0);
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "overflowing");
  }
}

static int m_encode(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "encode");
  size_t alen, blen = 0;
  const char *a = check_str(L, 2, "encode", "text", &alen), *b = NULL;
  int oi = 4;
  if (lua_istable(L, 3) && lua_isnoneornil(L, 4)) oi = 3;   /* encode(text, opts) */
  else if (!lua_isnoneornil(L, 3)) b = check_str(L, 3, "encode", "pair", &blen);
  enc_opts eo;
  read_opts(L, oi, "encode", encode_options, &eo);
  bt_encoding e;
  char err[256];
  if (bt_encode(t, 0, a, alen, b, blen, &eo.o, &e, err, sizeof err))
    return luaL_error(L, "encode: %s", err);
  bt_pad_batch(t, &e, 1, &eo.o);
  batch_item txt = {a, b, alen, blen};
  push_encoding(L, t, &e, &txt, eo.overflow);
  bt_encoding_free(&e);
  return 1;
}

/* Flattened rows of a batch (overflowing windows after their text) as
** int32 tensors: no Lua value per token.  Padding to the longest row by
** default (the rows must have one length). */
typedef struct { const bt_encoding *e; int32_t sample; } row_ref;

static void push_i32(lua_State *L, const char *name, int ndim,
                     const int64_t *shape, bert_tensor **out) {
  bert_tensor *x = bert_tensor_new(BERT_I32, ndim, shape);
  if (!x) { *out = NULL; luaL_error(L, "encode_batch: out of memory for '%s'", name); }
  lbert_push_tensor(L, x);
  lua_setfield(L, -2, name);
  *out = x;
}

static int push_tensors(lua_State *L, const bt_tokenizer *t, bt_encoding *encs,
                        int n, const enc_opts *eo, int want_offsets, int want_special) {
  const bt_options *o = &eo->o;
  int64_t rows = 0;
  for (int i = 0; i < n; i++) rows += 1 + (eo->overflow ? encs[i].nover : 0);
  row_ref *rr = malloc(((size_t)rows + 1) * sizeof *rr);
  if (!rr) return luaL_error(L, "encode_batch: out of memory");
  int64_t r = 0, width = 0;
  for (int i = 0; i < n; i++) {
    rr[r++] = (row_ref){&encs[i], i};
    for (int k = 0; eo->overflow && k < encs[i].nover; k++) rr[r++] = (row_ref){&encs[i].over[k], i};
  }
  for (int64_t k = 0; k < rows; k++) if (rr[k].e->n > width) width = rr[k].e->n;
  if (o->padding == BT_PAD_FIXED && o->pad_length > width) width = o->pad_length;
  if (o->pad_multiple > 0 && width % o->pad_multiple) width += o->pad_multiple - width % o->pad_multiple;
  lua_createtable(L, 0, 6);
  int64_t shape[3] = {rows, width, 2};
  bert_tensor *ids, *mask, *types, *offs = NULL, *spec = NULL, *map = NULL;
  push_i32(L, "input_ids", 2, shape, &ids);
  push_i32(L, "attention_mask", 2, shape, &mask);
  push_i32(L, "token_type_ids", 2, shape, &types);
  if (want_offsets) push_i32(L, "offset_mapping", 3, shape, &offs);
  if (want_special) push_i32(L, "special_tokens_mask", 2, shape, &spec);
  if (eo->overflow) push_i32(L, "overflow_to_sample_mapping", 1, shape, &map);
  int32_t *I = bert_data(ids), *M = bert_data(mask), *Ty = bert_data(types);
  int32_t *O = offs ? bert_data(offs) : NULL, *S = spec ? bert_data(spec) : NULL;
  int32_t *Mp = map ? bert_data(map) : NULL;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < rows; k++) {
    const bt_encoding *e = rr[k].e;
    int64_t pad = width - e->n, at = o->pad_left ? pad : 0;
    int32_t *ir = I + k * width, *mr = M + k * width, *tr = Ty + k * width;
    for (int64_t j = 0; j < width; j++) {
      ir[j] = t->pad_id; mr[j] = 0; tr[j] = t->pad_type_id;
      if (O) O[2 * (k * width + j)] = O[2 * (k * width + j) + 1] = 0;
      if (S) S[k * width + j] = 1;
    }
    for (int32_t j = 0; j < e->n; j++) {
      ir[at + j] = e->ids[j]; mr[at + j] = e->attn[j]; tr[at + j] = e->type_ids[j];
      if (O) { O[2 * (k * width + at + j)] = e->offsets[2 * j]; O[2 * (k * width + at + j) + 1] = e->offsets[2 * j + 1]; }
      if (S) S[k * width + at + j] = e->special[j] == 1;
    }
    if (Mp) Mp[k] = rr[k].sample;
  }
  free(rr);
  return 1;
}

static int m_encode_batch(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "encode_batch");
  check_table(L, 2, "encode_batch", "texts");
  /* encode_batch(texts[, pairs][, opts]): a pairs list has an array part */
  int pi = 0, oi = 3;
  if (lua_istable(L, 3) && lua_rawlen(L, 3) > 0) { pi = 3; oi = 4; }
  enc_opts eo;
  read_opts(L, oi, "encode_batch", encode_batch_options, &eo);
  int tensors = 0, want_offsets = 0, want_special = 0;
  if (lua_istable(L, oi)) {
    tensors = opt_bool(L, oi, "return_tensors", 0);
    want_offsets = opt_bool(L, oi, "return_offsets_mapping", 0);
    want_special = opt_bool(L, oi, "return_special_tokens_mask", 0);
  }
  int n = (int)luaL_len(L, 2);
  if (pi && (int)luaL_len(L, pi) != n)
    return luaL_error(L, "encode_batch: argument #3 (pairs) has %d items, texts has %d",
                      (int)luaL_len(L, pi), n);
  batch_item *items = calloc((size_t)n + 1, sizeof *items);
  bt_encoding *encs = calloc((size_t)n + 1, sizeof *encs);
  int *fail = calloc((size_t)n + 1, sizeof *fail);
  if (!items || !encs || !fail) {
    free(items); free(encs); free(fail);
    return luaL_error(L, "encode_batch: out of memory");
  }
  /* the strings stay referenced by the argument tables during the call */
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      items[i].a = lua_tolstring(L, -1, &items[i].alen);
    } else if (lua_istable(L, -1) && !pi) {
      lua_rawgeti(L, -1, 1); lua_rawgeti(L, -2, 2);
      if (lua_type(L, -2) == LUA_TSTRING) items[i].a = lua_tolstring(L, -2, &items[i].alen);
      if (lua_type(L, -1) == LUA_TSTRING) items[i].b = lua_tolstring(L, -1, &items[i].blen);
      int bad = !items[i].a || (!lua_isnil(L, -1) && !items[i].b);
      lua_pop(L, 2);
      if (bad) goto badarg;
    } else goto badarg;
    lua_pop(L, 1);
    if (pi) {
      lua_rawgeti(L, pi, i + 1);
      if (lua_type(L, -1) != LUA_TSTRING) {
        free(items); free(encs); free(fail);
        return luaL_error(L, "encode_batch: argument #3 (pairs) item %d expected "
                          "string, got %s", i + 1, luaL_typename(L, -1));
      }
      items[i].b = lua_tolstring(L, -1, &items[i].blen);
      lua_pop(L, 1);
    }
    continue;
  badarg:
    free(items); free(encs); free(fail);
    return luaL_error(L, "encode_batch: argument #2 (texts) item %d expected "
                      "string%s, got %s", i + 1, pi ? "" : " or {string, string}",
                      luaL_typename(L, -1));
  }
  char err[256] = "";
  int firstfail = -1;
#pragma omp parallel for schedule(dynamic, 16)
  for (int i = 0; i < n; i++) {
    int wid = 0;
#ifdef _OPENMP
    wid = omp_get_thread_num();
#endif
    char e2[256];
    if (bt_encode(t, wid, items[i].a, items[i].alen, items[i].b,
                  items[i].blen, &eo.o, &encs[i], e2, sizeof e2)) {
      fail[i] = 1;
#pragma omp critical
      {
        if (firstfail < 0 || i < firstfail) {
          firstfail = i;
          memcpy(err, e2, sizeof err);
        }
      }
    }
  }
  if (firstfail >= 0) {
    for (int i = 0; i < n; i++) bt_encoding_free(&encs[i]);
    free(items); free(encs); free(fail);
    return luaL_error(L, "encode_batch: item %d: %s", firstfail + 1, err);
  }
  if (tensors) {
    /* error paths in push_tensors raise: keep the encodings reachable */
    int ok = lua_checkstack(L, 4);
    (void)ok;
    push_tensors(L, t, encs, n, &eo, want_offsets, want_special);
    for (int i = 0; i < n; i++) bt_encoding_free(&encs[i]);
    free(items); free(encs); free(fail);
    return 1;
  }
  bt_pad_batch(t, encs, n, &eo.o);
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    push_encoding(L, t, &encs[i], &items[i], eo.overflow);
    lua_rawseti(L, -2, i + 1);
    bt_encoding_free(&encs[i]);
  }
  free(items); free(encs); free(fail);
  return 1;
}

/* Encodes a batch and returns only the token count (benchmarks). */
static int m_count_tokens(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "count_tokens");
  check_table(L, 2, "count_tokens", "texts");
  int threads = (int)luaL_optinteger(L, 3, 0);
  int n = (int)luaL_len(L, 2);
  batch_item *items = calloc((size_t)n + 1, sizeof *items);
  if (!items) return luaL_error(L, "count_tokens: out of memory");
  for (int i = 0; i < n; i++) {
    lua_rawgeti(L, 2, i + 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      free(items);
      return luaL_error(L, "count_tokens: texts[%d] is a %s, not a string", i + 1, luaL_typename(L, -1));
    }
    items[i].a = lua_tolstring(L, -1, &items[i].alen);   /* the table keeps it alive */
    lua_pop(L, 1);
  }
  bt_options o; memset(&o, 0, sizeof o);
  long total = 0;
  int failed = 0;
#ifdef _OPENMP
  if (threads <= 0) threads = omp_get_max_threads();
  if (threads > t->nworkers) threads = t->nworkers;
#endif
#pragma omp parallel for schedule(dynamic, 16) reduction(+:total, failed) num_threads(threads > 0 ? threads : 1)
  for (int i = 0; i < n; i++) {
    int wid = 0;
#ifdef _OPENMP
    wid = omp_get_thread_num();
#endif
    bt_encoding e; char err[256];
    if (bt_encode(t, wid, items[i].a, items[i].alen, NULL, 0, &o, &e, err, sizeof err))
      failed++;
    else { total += e.n; bt_encoding_free(&e); }
  }
  free(items);
  if (failed) return luaL_error(L, "count_tokens: %d texts failed", failed);
  lua_pushinteger(L, total);
  return 1;
}

/* ---------- decoding and vocabulary ---------- */

static int32_t *read_ids(lua_State *L, int idx, const char *fname, size_t *n) {
  check_table(L, idx, fname, "ids");
  *n = (size_t)luaL_len(L, idx);
  int32_t *ids = malloc((*n + 1) * sizeof *ids);
  if (!ids) luaL_error(L, "%s: out of memory", fname);
  for (size_t i = 0; i < *n; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i + 1);
    int ok; lua_Integer v = lua_tointegerx(L, -1, &ok);
    if (!ok) {
      free(ids);
      luaL_error(L, "%s: argument #%d (ids) item %d expected integer, got %s",
                 fname, idx, (int)i + 1, luaL_typename(L, -1));
    }
    ids[i] = v < 0 || v > INT32_MAX ? -1 : (int32_t)v;
    lua_pop(L, 1);
  }
  return ids;
}

static int m_decode(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "decode");
  size_t n;
  int skip = 1;
  if (!lua_isnoneornil(L, 3)) {
    if (lua_istable(L, 3)) {
      static const char *const known[] = {"skip_special_tokens", NULL};
      lbert_check_options(L, 3, "decode", known);
      skip = opt_bool(L, 3, "skip_special_tokens", 1);
    }
    else if (lua_isboolean(L, 3)) skip = lua_toboolean(L, 3);
    else arg_error(L, "decode", 3, "options", "table, boolean or nil");
  }
  int32_t *ids = read_ids(L, 2, "decode", &n);
  size_t len;
  char *s = bt_decode(t, ids, n, skip, &len);
  free(ids);
  if (!s) return luaL_error(L, "decode: out of memory");
  lua_pushlstring(L, s, len);
  free(s);
  return 1;
}

static int m_vocab_size(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "vocab_size");
  lua_pushinteger(L, bt_vocab_size(t));
  return 1;
}

static int m_token_to_id(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "token_to_id");
  size_t len; const char *s = check_str(L, 2, "token_to_id", "token", &len);
  int32_t id = bt_token_to_id(t, s, len);
  if (id < 0) lua_pushnil(L); else lua_pushinteger(L, id);
  return 1;
}

static int m_id_to_token(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "id_to_token");
  int ok; lua_Integer id = lua_tointegerx(L, 2, &ok);
  if (!ok) return arg_error(L, "id_to_token", 2, "id", "integer");
  size_t len;
  const char *s = id < 0 || id > INT32_MAX ? NULL : bt_id_to_token(t, (int32_t)id, &len);
  if (!s) lua_pushnil(L); else lua_pushlstring(L, s, len);
  return 1;
}

/* The model vocabulary as an array by id: tokens[id + 1] (false = hole). */
static int m_vocab_list(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "vocab_list");
  lua_createtable(L, (int)t->vocab.nid, 0);
  int32_t last = -1;
  for (size_t i = 0; i < t->vocab.nid; i++) if (t->vocab.by_id[i] >= 0) last = (int32_t)i;
  for (int32_t i = 0; i <= last; i++) {
    size_t len; const char *s = bt_vocab_token(&t->vocab, i, &len);
    if (s) lua_pushlstring(L, s, len); else lua_pushboolean(L, 0);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* Merges in rank order, flat {a1, b1, a2, b2, ...}. */
static int m_merges(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "merges");
  lua_createtable(L, t->nmerges * 2, 0);
  for (int32_t i = 0; i < t->nmerges; i++) {
    size_t len; const char *s = bt_vocab_token(&t->vocab, t->merge_a[i], &len);
    lua_pushlstring(L, s ? s : "", s ? len : 0); lua_rawseti(L, -2, 2 * i + 1);
    s = bt_vocab_token(&t->vocab, t->merge_b[i], &len);
    lua_pushlstring(L, s ? s : "", s ? len : 0); lua_rawseti(L, -2, 2 * i + 2);
  }
  return 1;
}

static int m_config(lua_State *L) {
  check_tok(L, "config");
  lua_getiuservalue(L, 1, 1);
  return 1;
}

static int m_num_special_tokens_to_add(lua_State *L) {
  bt_tokenizer *t = check_tok(L, "num_special_tokens_to_add");
  lua_pushinteger(L, bt_num_added_tokens(t, lua_toboolean(L, 2)));
  return 1;
}

static int m_gc(lua_State *L) {
  LTok *u = luaL_checkudata(L, 1, TOKENIZER_MT);
  bt_tokenizer_free(u->t);
  u->t = NULL;
  return 0;
}

static int m_tostring(lua_State *L) {
  LTok *u = luaL_checkudata(L, 1, TOKENIZER_MT);
  if (!u->t) lua_pushliteral(L, "bert.Tokenizer (closed)");
  else lua_pushfstring(L, "bert.Tokenizer (%s, %d tokens)",
                       u->t->model == BT_MODEL_BPE ? "bpe" :
                       u->t->model == BT_MODEL_UNIGRAM ? "unigram" : "wordpiece",
                       bt_vocab_size(u->t));
  return 1;
}

/* ---------- training ---------- */

static bt_trainer *check_trainer(lua_State *L, const char *fname) {
  LTrainer *u = luaL_testudata(L, 1, TRAINER_MT);
  if (!u) luaL_error(L, "%s: argument #1 (self) expected bert.TokenizerTrainer, "
                     "got %s", fname, luaL_typename(L, 1));
  if (!u->tr) luaL_error(L, "%s: the trainer is finished", fname);
  return u->tr;
}

static int t_new(lua_State *L) {
  const char *fn = "tokenizer.trainer";
  check_table(L, 1, fn, "options");
  bt_train_opts o;
  memset(&o, 0, sizeof o);
  lua_getfield(L, 1, "kind");
  const char *k = lua_tostring(L, -1);
  if (k && strcmp(k, "wordpiece") == 0) o.kind = BT_MODEL_WORDPIECE;
  else if (k && strcmp(k, "bpe") == 0) o.kind = BT_MODEL_BPE;
  else if (k && strcmp(k, "unigram") == 0) o.kind = BT_MODEL_UNIGRAM;
  else return luaL_error(L, "%s: option 'kind' must be 'wordpiece', 'bpe' or "
                         "'unigram', got %s", fn, k ? k : luaL_typename(L, -1));
  lua_pop(L, 1);
  o.vocab_size = (int)opt_int(L, 1, fn, "vocab_size", 30000, 1, 1 << 24);
  o.min_frequency = (int)opt_int(L, 1, fn, "min_frequency", 0, 0, INT32_MAX);
  o.limit_alphabet = (int)opt_int(L, 1, fn, "limit_alphabet", 0, 0, INT32_MAX);
  o.lowercase = opt_bool(L, 1, "lowercase", 1);
  o.initial_alphabet = opt_bool(L, 1, "initial_alphabet", 1);
  o.strip_accents = -1;
  lua_getfield(L, 1, "strip_accents");
  if (!lua_isnil(L, -1)) o.strip_accents = lua_toboolean(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, 1, "special_tokens");
  int ns = lua_istable(L, -1) ? (int)luaL_len(L, -1) : 0;
  char **sp = calloc((size_t)ns + 1, sizeof *sp);
  for (int i = 0; sp && i < ns; i++) {
    lua_rawgeti(L, -1, i + 1);
    const char *s = lua_tostring(L, -1);
    sp[i] = strdup(s ? s : "");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  o.specials = sp; o.nspecials = ns;
  bt_unigram_train_opts uo;
  uo.vocab_size = o.vocab_size;
  uo.max_piece_length = (int)opt_int(L, 1, fn, "max_piece_length", 16, 1, 1024);
  uo.seed_size = (int)opt_int(L, 1, fn, "seed_size", 1000000, 1, 1 << 28);
  uo.num_sub_iterations = (int)opt_int(L, 1, fn, "num_sub_iterations", 2, 1, 100);
  lua_getfield(L, 1, "shrinking_factor");
  uo.shrinking_factor = lua_isnil(L, -1) ? 0.75 : lua_tonumber(L, -1);
  lua_pop(L, 1);
  lua_getfield(L, 1, "character_coverage");
  int cov_ok = 1;
  uo.character_coverage = lua_isnil(L, -1) ? 1.0 : lua_tonumberx(L, -1, &cov_ok);
  const char *bad = NULL;
  if (!(uo.shrinking_factor > 0.0 && uo.shrinking_factor < 1.0))
    bad = lua_pushfstring(L, "option 'shrinking_factor' must be in (0, 1)");
  else if (!cov_ok)
    bad = lua_pushfstring(L, "option 'character_coverage' expected a number, got %s",
                          luaL_typename(L, -1));
  else if (!(uo.character_coverage > 0.0 && uo.character_coverage <= 1.0))
    bad = lua_pushfstring(L, "option 'character_coverage' must be in (0, 1], got %s",
                          lua_tostring(L, -1));
  if (bad) {
    for (int i = 0; sp && i < ns; i++) free(sp[i]);
    free(sp);
    return luaL_error(L, "%s: %s", fn, bad);
  }
  lua_pop(L, 1);
  LTrainer *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->tr = NULL; u->kind = o.kind; u->uo = uo;
  luaL_setmetatable(L, TRAINER_MT);
  u->tr = sp ? bt_trainer_new(&o) : NULL;
  for (int i = 0; sp && i < ns; i++) free(sp[i]);
  free(sp);
  if (!u->tr) return luaL_error(L, "%s: out of memory", fn);
  return 1;
}

static int t_feed(lua_State *L) {
  bt_trainer *tr = check_trainer(L, "feed");
  size_t len; const char *s = check_str(L, 2, "feed", "text", &len);
  if (bt_trainer_feed(tr, s, len)) return luaL_error(L, "feed: out of memory");
  return 0;
}

/* Reads a whole file and feeds it; returns true or nil, message. */
static int t_feed_file(lua_State *L) {
  bt_trainer *tr = check_trainer(L, "feed_file");
  const char *path = check_str(L, 2, "feed_file", "path", NULL);
  FILE *f = fopen(path, "rb");
  if (!f) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  size_t cap = 1 << 20, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t r = fread(buf + n, 1, cap - n, f);
    n += r;
    if (n < cap) break;
    char *nb = realloc(buf, cap * 2);
    if (!nb) { free(buf); buf = NULL; break; }
    buf = nb; cap *= 2;
  }
  int rerr = ferror(f);
  fclose(f);
  if (!buf) return luaL_error(L, "feed_file: out of memory");
  if (rerr) {
    free(buf);
    lua_pushnil(L);
    lua_pushfstring(L, "%s: read error", path);
    return 2;
  }
  int rc = bt_trainer_feed(tr, buf, n);
  free(buf);
  if (rc) return luaL_error(L, "feed_file: out of memory");
  lua_pushboolean(L, 1);
  return 1;
}

/* Returns the vocabulary (array by id) and the merges (flat {a, b, ...}). */
static int t_finish(lua_State *L) {
  bt_trainer *tr = check_trainer(L, "finish");
  char err[256];
  LTrainer *u = luaL_testudata(L, 1, TRAINER_MT);
  if (u->kind == BT_MODEL_UNIGRAM) {
    /* the pieces sorted by score, and their scores */
    char **ps; uint32_t *pl; double *sc; int32_t n;
    if (bt_trainer_train_unigram(tr, &u->uo, &ps, &pl, &sc, &n, err, sizeof err))
      return luaL_error(L, "finish: %s", err);
    lua_createtable(L, n, 0);
    for (int32_t i = 0; i < n; i++) {
      lua_pushlstring(L, ps[i], pl[i]); lua_rawseti(L, -2, i + 1);
      free(ps[i]);
    }
    lua_createtable(L, n, 0);
    for (int32_t i = 0; i < n; i++) { lua_pushnumber(L, sc[i]); lua_rawseti(L, -2, i + 1); }
    free(ps); free(pl); free(sc);
    return 2;
  }
  bt_vocab v;
  int32_t *merges = NULL, nm = 0;
  if (bt_trainer_train(tr, &v, &merges, &nm, err, sizeof err))
    return luaL_error(L, "finish: %s", err);
  lua_createtable(L, (int)v.nid, 0);
  for (size_t i = 0; i < v.nid; i++) {
    size_t len; const char *s = bt_vocab_token(&v, (int32_t)i, &len);
    if (!s) break;
    lua_pushlstring(L, s, len);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_createtable(L, nm * 2, 0);
  for (int32_t i = 0; i < nm; i++) {
    for (int k = 0; k < 2; k++) {
      size_t len; const char *s = bt_vocab_token(&v, merges[3 * i + k], &len);
      lua_pushlstring(L, s ? s : "", s ? len : 0);
      lua_rawseti(L, -2, 2 * i + k + 1);
    }
  }
  free(merges);
  bt_vocab_free(&v);
  return 2;
}

static int t_gc(lua_State *L) {
  LTrainer *u = luaL_checkudata(L, 1, TRAINER_MT);
  bt_trainer_free(u->tr);
  u->tr = NULL;
  return 0;
}


/* core.tokenizer.from_spm_bytes(bytes) -> a tokenizer with spm's semantics
** built by bt_unigram_load_model (the fuzz entry point), or nil, msg */
static int tok_from_spm_bytes(lua_State *L) {
  size_t len;
  const char *d = check_str(L, 1, "tokenizer.from_spm_bytes", "bytes", &len);
  char err[300];
  bt_tokenizer *t = bt_unigram_load_model((const uint8_t *)d, len, err, sizeof err);
  if (!t) { lua_pushnil(L); lua_pushstring(L, err); return 2; }
  push_tok(L, t);
  lua_createtable(L, 0, 2);
  lua_pushliteral(L, "unigram"); lua_setfield(L, -2, "model");
  lua_pushboolean(L, 1); lua_setfield(L, -2, "spm");
  lua_setiuservalue(L, -2, 1);
  return 1;
}

/* core.tokenizer.parse_spm(bytes) -> table of the ModelProto, or nil, msg */
static int tok_parse_spm(lua_State *L) {
  size_t len;
  const char *d = check_str(L, 1, "tokenizer.parse_spm", "bytes", &len);
  bt_spm_model m;
  char err[300];
  if (bt_spm_parse((const uint8_t *)d, len, &m, err, sizeof err)) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_createtable(L, 0, 16);
  lua_createtable(L, m.npieces, 0);
  for (int32_t i = 0; i < m.npieces; i++) {
    lua_pushlstring(L, m.pieces[i], m.piece_len[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "pieces");
  lua_createtable(L, m.npieces, 0);
  for (int32_t i = 0; i < m.npieces; i++) {
    lua_pushnumber(L, (lua_Number)m.scores[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "scores");
  lua_createtable(L, m.npieces, 0);
  for (int32_t i = 0; i < m.npieces; i++) {
    lua_pushinteger(L, m.types[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "types");
#define SETI(k, v) (lua_pushinteger(L, (v)), lua_setfield(L, -2, k))
#define SETB(k, v) (lua_pushboolean(L, (v)), lua_setfield(L, -2, k))
  SETI("model_type", m.model_type); SETI("vocab_size", m.vocab_size);
  SETI("unk_id", m.unk_id); SETI("bos_id", m.bos_id);
  SETI("eos_id", m.eos_id); SETI("pad_id", m.pad_id);
  SETB("byte_fallback", m.byte_fallback);
  SETB("treat_whitespace_as_suffix", m.treat_ws_as_suffix);
  SETB("add_dummy_prefix", m.add_dummy_prefix);
  SETB("remove_extra_whitespaces", m.remove_extra_ws);
  SETB("escape_whitespaces", m.escape_ws);
#undef SETI
#undef SETB
  lua_pushstring(L, m.norm_name ? m.norm_name : "");
  lua_setfield(L, -2, "normalizer_name");
  lua_pushlstring(L, m.charsmap ? (const char *)m.charsmap : "", m.charsmap_len);
  lua_setfield(L, -2, "charsmap");
  bt_spm_free(&m);
  return 1;
}

static const luaL_Reg tok_methods[] = {
  {"encode", m_encode},
  {"encode_batch", m_encode_batch},
  {"count_tokens", m_count_tokens},
  {"decode", m_decode},
  {"vocab_size", m_vocab_size},
  {"token_to_id", m_token_to_id},
  {"id_to_token", m_id_to_token},
  {"vocab_list", m_vocab_list},
  {"merges", m_merges},
  {"config", m_config},
  {"num_special_tokens_to_add", m_num_special_tokens_to_add},
  {"close", m_gc},
  {NULL, NULL}
};

static const luaL_Reg tok_meta[] = {
  {"__gc", m_gc},
  {"__close", m_gc},
  {"__tostring", m_tostring},
  {NULL, NULL}
};

static const luaL_Reg trainer_methods[] = {
  {"feed", t_feed},
  {"feed_file", t_feed_file},
  {"finish", t_finish},
  {NULL, NULL}
};

static const luaL_Reg trainer_meta[] = {
  {"__gc", t_gc},
  {"__close", t_gc},
  {NULL, NULL}
};

static const luaL_Reg tok_funcs[] = {
  {"new", tok_new},
  {"parse_spm", tok_parse_spm},
  {"from_spm_bytes", tok_from_spm_bytes},
  {"trainer", t_new},
  {NULL, NULL}
};

void lbert_open_tokenizer(lua_State *L) {
  lua_newtable(L);                      /* core.tokenizer */
  luaL_setfuncs(L, tok_funcs, 0);
  luaL_newmetatable(L, TOKENIZER_MT);
  luaL_setfuncs(L, tok_meta, 0);
  luaL_newlib(L, tok_methods);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "__index");
  lua_setfield(L, -3, "methods");       /* core.tokenizer.methods */
  lua_pop(L, 1);                        /* metatable */
  luaL_newmetatable(L, TRAINER_MT);
  luaL_setfuncs(L, trainer_meta, 0);
  luaL_newlib(L, trainer_methods);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
  lua_setfield(L, -2, "tokenizer");
}
