/*
** bert.core.data: the C side of bert.data.pretraining (csrc/data/).
**
**   data.corpus() -> Corpus        c:add_document({ids, ids, ...}), c:stats()
**   data.create(corpus, opts) -> Instances
**   data.read_shards({path, ...}) -> Instances (validated; nil, msg on bad files)
**   Instances: s:stats(), s:get(i), s:write(path, first, count),
**              s:unigram_counts(special_bytes)
**   data.loader(instances, opts) -> Loader (takes the instances)
**   Loader: l:next(), l:position(), l:seek(epoch, batch), l:batches_per_epoch(), l:close()
**   data.phrases({{ids}, ...}) -> Phrases (a phrase table for mask_mode 'phrase')
**   Phrases: p:count(), p:get(i) -> ids, p:max_id(), p:checksum() -> 16 hex digits
*/
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "lbert.h"
#include "data/ptdata.h"

#define CORPUS_MT "bert.data.Corpus"
#define INST_MT "bert.data.Instances"
#define LOADER_MT "bert.data.Loader"
#define PHRASES_MT "bert.data.Phrases"

static void *check_box(lua_State *L, int arg, const char *mt, const char *what) {
  void **box = luaL_checkudata(L, arg, mt);
  if (*box == NULL) luaL_error(L, "%s has been closed", what);
  return *box;
}

static void **new_box(lua_State *L, const char *mt) {
  void **box = lua_newuserdatauv(L, sizeof(void *), 0);
  *box = NULL;
  luaL_setmetatable(L, mt);
  return box;
}

/* ------------------------------------------------------------ options */

static lua_Integer opt_int(lua_State *L, int t, const char *key, lua_Integer def) {
  lua_getfield(L, t, key);
  lua_Integer v = def;
  if (!lua_isnil(L, -1)) {
    int ok;
    v = lua_tointegerx(L, -1, &ok);
    if (!ok) luaL_error(L, "option '%s' expected integer, got %s", key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

/* An option stored in a C int: out-of-range values are errors, not wraps. */
static int32_t opt_i32(lua_State *L, int t, const char *key, lua_Integer def) {
  lua_Integer v = opt_int(L, t, key, def);
  if (v < INT32_MIN || v > INT32_MAX)
    luaL_error(L, "option '%s' = %I is outside the int32 range", key, v);
  return (int32_t)v;
}

static double opt_num(lua_State *L, int t, const char *key, double def) {
  lua_getfield(L, t, key);
  double v = def;
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1))
      luaL_error(L, "option '%s' expected number, got %s", key, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static int opt_bool(lua_State *L, int t, const char *key, int def) {
  lua_getfield(L, t, key);
  int v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* A byte string of length vocab_size (flags per id), or NULL when absent.
** The string stays referenced by the options table. */
static const uint8_t *opt_flags(lua_State *L, int t, const char *key, int32_t vocab) {
  lua_getfield(L, t, key);
  const uint8_t *p = NULL;
  if (!lua_isnil(L, -1)) {
    size_t len;
    p = (const uint8_t *)luaL_checklstring(L, -1, &len);
    if ((lua_Integer)len != vocab)
      luaL_error(L, "option '%s' must have vocab_size (%d) bytes, got %d", key, (int)vocab,
                 (int)len);
  }
  lua_pop(L, 1);
  return p;
}

/* The keys of create's and loader's options tables (each with the masker's
** at the end: read_mask_cfg's), checked so that a misspelt one is an error
** naming it, not a default (the Lua wrappers check their own). */
#define MASK_KEYS "vocab_size", "mask_id", "masked_lm_prob", "max_predictions_per_seq", "whole_word_mask", \
  "special", "continuation", "mask_mode", "phrases", "max_span", "span_p"
static const char *const create_keys[] = {"objective", "max_seq_length", "short_seq_prob", "dupe_factor",
  "static_masking", "seed", "cls_id", "sep_id", MASK_KEYS, NULL};
static const char *const loader_keys[] = {"batch_size", "seq_len", "prefetch", "dynamic", "shuffle", "seed",
  "pad_id", "shard_first", "shard_rows", MASK_KEYS, NULL};

static void read_mask_cfg(lua_State *L, int t, bd_mask_cfg *m) {
  m->vocab_size = opt_i32(L, t, "vocab_size", 0);
  if (m->vocab_size < 1) luaL_error(L, "option 'vocab_size' must be positive");
  m->mask_id = opt_i32(L, t, "mask_id", -1);
  if (m->mask_id < 0 || m->mask_id >= m->vocab_size)
    luaL_error(L, "option 'mask_id' (%d) outside the vocabulary", (int)m->mask_id);
  m->masked_lm_prob = opt_num(L, t, "masked_lm_prob", 0.15);
  m->max_predictions = opt_i32(L, t, "max_predictions_per_seq", 20);
  if (m->max_predictions < 1) luaL_error(L, "option 'max_predictions_per_seq' must be positive");
  m->whole_word = opt_bool(L, t, "whole_word_mask", 0);
  m->special = opt_flags(L, t, "special", m->vocab_size);
  if (!m->special) luaL_error(L, "option 'special' is required");
  m->cont = opt_flags(L, t, "continuation", m->vocab_size);
  {
    const char *mode = NULL;
    lua_getfield(L, t, "mask_mode");
    if (!lua_isnil(L, -1)) mode = luaL_checkstring(L, -1);
    lua_pop(L, 1);
    if (!mode || strcmp(mode, "tokens") == 0) m->mode = BD_MASK_TOKENS;
    else if (strcmp(mode, "span") == 0) m->mode = BD_MASK_SPAN;
    else if (strcmp(mode, "ngram") == 0) m->mode = BD_MASK_NGRAM;
    else if (strcmp(mode, "phrase") == 0) m->mode = BD_MASK_PHRASE;
    else luaL_error(L, "option 'mask_mode' must be 'tokens', 'span', 'ngram' or 'phrase', got '%s'", mode);
  }
  lua_getfield(L, t, "phrases");   /* kept alive by the options table */
  m->phrases = lua_isnil(L, -1) ? NULL : check_box(L, -1, PHRASES_MT, "phrase table");
  lua_pop(L, 1);
  if (m->mode == BD_MASK_PHRASE) {
    if (!m->phrases) luaL_error(L, "option 'phrases' (a phrase table) is required with mask_mode 'phrase'");
    if (!m->cont) luaL_error(L, "option 'continuation' (the word boundaries) is required with mask_mode 'phrase'");
    if (bd_phrases_max_id(m->phrases) >= m->vocab_size)
      luaL_error(L, "option 'phrases': id %d outside the vocabulary (%d)", (int)bd_phrases_max_id(m->phrases),
                 (int)m->vocab_size);
  }
  m->max_span = (int)opt_int(L, t, "max_span", m->mode == BD_MASK_NGRAM ? 3 : 10);
  if (m->max_span < 1 || m->max_span > 64) luaL_error(L, "option 'max_span' must be in 1..64, got %d", m->max_span);
  m->span_p = opt_num(L, t, "span_p", 0.2);
  if (!(m->span_p > 0 && m->span_p <= 1)) luaL_error(L, "option 'span_p' must be in (0, 1], got %g", m->span_p);
}

/* -------------------------------------------------------------- corpus */

static int l_corpus(lua_State *L) {
  void **box = new_box(L, CORPUS_MT);
  *box = bd_corpus_new();
  if (!*box) return lbert_core_error(L, "corpus");
  return 1;
}

/* c:add_document(list of id lists): empty sentences and documents are dropped. */
static int c_add_document(lua_State *L) {
  bd_corpus *c = check_box(L, 1, CORPUS_MT, "corpus");
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Integer ns = luaL_len(L, 2);
  int32_t stackbuf[512];
  for (lua_Integer s = 1; s <= ns; s++) {
    lua_rawgeti(L, 2, s);
    if (!lua_istable(L, -1))
      return luaL_error(L, "add_document: sentence %d expected a table of ids, got %s", (int)s,
                        luaL_typename(L, -1));
    lua_Integer n = luaL_len(L, -1);
    int32_t *ids = n <= 512 ? stackbuf : lua_newuserdatauv(L, (size_t)n * sizeof(int32_t), 0);
    int top = lua_gettop(L);
    int tbl = n <= 512 ? top : top - 1;
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, tbl, i);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok || v < 0 || v > INT32_MAX)
        return luaL_error(L, "add_document: sentence %d: id %d is not a valid token id", (int)s,
                          (int)i);
      ids[i - 1] = (int32_t)v;
      lua_pop(L, 1);
    }
    if (bd_corpus_add_sentence(c, ids, n)) return lbert_core_error(L, "add_document");
    lua_settop(L, 2);
  }
  if (bd_corpus_end_document(c)) return lbert_core_error(L, "add_document");
  return 0;
}

static int c_stats(lua_State *L) {
  bd_corpus *c = check_box(L, 1, CORPUS_MT, "corpus");
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, c->ndocs); lua_setfield(L, -2, "documents");
  lua_pushinteger(L, c->nsents); lua_setfield(L, -2, "sentences");
  lua_pushinteger(L, c->ntok); lua_setfield(L, -2, "tokens");
  return 1;
}

static int c_gc(lua_State *L) {
  void **box = luaL_checkudata(L, 1, CORPUS_MT);
  bd_corpus_free(*box);
  *box = NULL;
  return 0;
}

/* ----------------------------------------------------------- instances */

static int parse_objective(lua_State *L, const char *s) {
  if (strcmp(s, "none") == 0) return BD_OBJ_NONE;
  if (strcmp(s, "nsp") == 0) return BD_OBJ_NSP;
  if (strcmp(s, "sop") == 0) return BD_OBJ_SOP;
  return luaL_error(L, "option 'objective' must be 'nsp', 'sop' or 'none', got '%s'", s);
}

static const char *objective_name(int o) {
  return o == BD_OBJ_NSP ? "nsp" : o == BD_OBJ_SOP ? "sop" : "none";
}

static int l_create(lua_State *L) {
  bd_corpus *c = check_box(L, 1, CORPUS_MT, "corpus");
  luaL_checktype(L, 2, LUA_TTABLE);
  lbert_check_options(L, 2, "create", create_keys);
  bd_create_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  lua_getfield(L, 2, "objective");
  cfg.objective = parse_objective(L, luaL_optstring(L, -1, "nsp"));
  lua_pop(L, 1);
  cfg.max_seq_length = opt_i32(L, 2, "max_seq_length", 128);
  if (cfg.max_seq_length < 5 || cfg.max_seq_length > (1 << 20))
    return luaL_error(L, "option 'max_seq_length' must be in 5 .. 2^20, got %d", cfg.max_seq_length);
  cfg.short_seq_prob = opt_num(L, 2, "short_seq_prob", 0.1);
  cfg.dupe_factor = opt_i32(L, 2, "dupe_factor", 10);
  if (cfg.dupe_factor < 1) return luaL_error(L, "option 'dupe_factor' must be positive");
  cfg.static_masking = opt_bool(L, 2, "static_masking", 1);
  cfg.seed = (uint64_t)opt_int(L, 2, "seed", 12345);
  read_mask_cfg(L, 2, &cfg.mask);
  cfg.cls_id = opt_i32(L, 2, "cls_id", -1);
  cfg.sep_id = opt_i32(L, 2, "sep_id", -1);
  if (cfg.cls_id < 0 || cfg.cls_id >= cfg.mask.vocab_size || cfg.sep_id < 0 ||
      cfg.sep_id >= cfg.mask.vocab_size)
    return luaL_error(L, "options 'cls_id' and 'sep_id' must be ids of the vocabulary");
  for (int64_t i = 0; i < c->ntok; i++)
    if (c->tokens[i] >= cfg.mask.vocab_size)
      return luaL_error(L, "create: token id %d outside the vocabulary (%d)", (int)c->tokens[i],
                        (int)cfg.mask.vocab_size);
  void **box = new_box(L, INST_MT);
  *box = bd_create_instances(c, &cfg);
  if (!*box) return lbert_core_error(L, "create");
  return 1;
}

static int l_read_shards(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  void **box = new_box(L, INST_MT);
  bd_instances *s = bd_instances_new();
  if (!s) return lbert_core_error(L, "read_shards");
  *box = s;
  lua_Integer n = luaL_len(L, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    const char *path = luaL_checkstring(L, -1);
    if (bd_shard_read(s, path)) {
      lua_pushnil(L);
      lua_pushstring(L, bert_last_error());
      return 2;
    }
    lua_pop(L, 1);
  }
  return 1;
}

static int s_stats(lua_State *L) {
  bd_instances *s = check_box(L, 1, INST_MT, "instances");
  int64_t labels[2] = {0, 0};
  for (int64_t i = 0; i < s->n; i++)
    if (s->label[i] == 0 || s->label[i] == 1) labels[s->label[i]]++;
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, s->n); lua_setfield(L, -2, "instances");
  lua_pushinteger(L, s->ntok); lua_setfield(L, -2, "tokens");
  lua_pushinteger(L, s->npred); lua_setfield(L, -2, "predictions");
  lua_pushstring(L, objective_name(s->objective)); lua_setfield(L, -2, "objective");
  lua_pushinteger(L, s->max_seq_length); lua_setfield(L, -2, "max_seq_length");
  lua_pushinteger(L, s->vocab_size); lua_setfield(L, -2, "vocab_size");
  lua_pushboolean(L, s->masked); lua_setfield(L, -2, "static_masks");
  lua_pushinteger(L, labels[0]); lua_setfield(L, -2, "label0");
  lua_pushinteger(L, labels[1]); lua_setfield(L, -2, "label1");
  return 1;
}

static void push_ints(lua_State *L, const int32_t *v, int64_t n) {
  lua_createtable(L, (int)n, 0);
  for (int64_t i = 0; i < n; i++) {
    lua_pushinteger(L, v[i]);
    lua_rawseti(L, -2, i + 1);
  }
}

/* s:get(i) -> {tokens, token_type_ids, label, masked_positions (0-based),
** masked_ids (input ids there), masked_labels (the originals)} */
static int s_get(lua_State *L) {
  bd_instances *s = check_box(L, 1, INST_MT, "instances");
  lua_Integer i = luaL_checkinteger(L, 2);
  luaL_argcheck(L, i >= 1 && i <= s->n, 2, "instance index out of range");
  int64_t k = i - 1, t0 = s->tok_off[k], n = s->tok_off[k + 1] - t0;
  int64_t p0 = s->pred_off[k], np = s->pred_off[k + 1] - p0;
  lua_createtable(L, 0, 6);
  push_ints(L, s->tokens + t0, n); lua_setfield(L, -2, "tokens");
  lua_createtable(L, (int)n, 0);
  for (int64_t j = 0; j < n; j++) {
    lua_pushinteger(L, j < s->len_a[k] ? 0 : 1);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "token_type_ids");
  lua_pushinteger(L, s->label[k]); lua_setfield(L, -2, "label");
  push_ints(L, s->pred_pos + p0, np); lua_setfield(L, -2, "masked_positions");
  push_ints(L, s->pred_repl + p0, np); lua_setfield(L, -2, "masked_ids");
  lua_createtable(L, (int)np, 0);
  for (int64_t j = 0; j < np; j++) {
    lua_pushinteger(L, s->tokens[t0 + s->pred_pos[p0 + j]]);
    lua_rawseti(L, -2, j + 1);
  }
  lua_setfield(L, -2, "masked_labels");
  return 1;
}

/* s:write(path, first, count): instances first .. first + count - 1 (1-based) */
static int s_write(lua_State *L) {
  bd_instances *s = check_box(L, 1, INST_MT, "instances");
  const char *path = luaL_checkstring(L, 2);
  lua_Integer first = luaL_optinteger(L, 3, 1), count = luaL_optinteger(L, 4, s->n - first + 1);
  if (bd_shard_write(s, first - 1, count, path)) {
    lua_pushnil(L);
    lua_pushstring(L, bert_last_error());
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* Counts of prediction targets per id: the masked originals with static
** masks; every non-special token otherwise (dynamic masking may pick any). */
static int s_unigram_counts(lua_State *L) {
  bd_instances *s = check_box(L, 1, INST_MT, "instances");
  size_t slen;
  const char *special = luaL_checklstring(L, 2, &slen);
  int64_t V = s->vocab_size;
  if ((int64_t)slen != V) return luaL_error(L, "unigram_counts: special flags need %d bytes", (int)V);
  int64_t shape[1] = {V};
  bert_tensor *t = bert_tensor_empty(BERT_I32, 1, shape);
  if (!t) return lbert_core_error(L, "unigram_counts");
  int32_t *c = bert_i32(t);
  memset(c, 0, (size_t)V * sizeof(int32_t));
  if (s->masked) {
    for (int64_t i = 0; i < s->n; i++)
      for (int64_t p = s->pred_off[i]; p < s->pred_off[i + 1]; p++)
        c[s->tokens[s->tok_off[i] + s->pred_pos[p]]]++;
  } else {
    for (int64_t i = 0; i < s->ntok; i++)
      if (!special[s->tokens[i]]) c[s->tokens[i]]++;
  }
  lbert_push_tensor(L, t);
  return 1;
}

static int s_gc(lua_State *L) {
  void **box = luaL_checkudata(L, 1, INST_MT);
  bd_instances_free(*box);
  *box = NULL;
  return 0;
}

/* ------------------------------------------------------------- phrases */

/* data.phrases({{id, ...}, ...}): a table of phrases (lists of ids). */
static int l_phrases(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = luaL_len(L, 1);
  if (n < 0 || n > INT32_MAX) return luaL_error(L, "phrases: %I phrases is too many", n);
  int64_t *off = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof(int64_t), 0);
  off[0] = 0;
  for (lua_Integer k = 1; k <= n; k++) {
    if (lua_rawgeti(L, 1, k) != LUA_TTABLE)
      return luaL_error(L, "phrases: phrase %I expected a table of ids, got %s", k, luaL_typename(L, -1));
    lua_Integer len = luaL_len(L, -1);
    if (len < 1 || len > BD_PHRASE_MAX_TOKENS)
      return luaL_error(L, "phrases: phrase %I has %I tokens (1..%d allowed)", k, len, BD_PHRASE_MAX_TOKENS);
    off[k] = off[k - 1] + len;
    lua_pop(L, 1);
  }
  int32_t *tok = lua_newuserdatauv(L, (size_t)(off[n] + 1) * sizeof(int32_t), 0);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, 1, k);
    for (int64_t i = 0; i < off[k] - off[k - 1]; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      int ok;
      lua_Integer v = lua_tointegerx(L, -1, &ok);
      if (!ok || v < 0 || v > INT32_MAX)
        return luaL_error(L, "phrases: phrase %I: id %d is not a valid token id", k, (int)i + 1);
      tok[off[k - 1] + i] = (int32_t)v;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  void **box = new_box(L, PHRASES_MT);
  *box = bd_phrases_new(tok, off, n);
  if (!*box) return lbert_core_error(L, "phrases");
  return 1;
}

static int ph_count(lua_State *L) {
  lua_pushinteger(L, bd_phrases_count(check_box(L, 1, PHRASES_MT, "phrase table")));
  return 1;
}

static int ph_max_id(lua_State *L) {
  lua_pushinteger(L, bd_phrases_max_id(check_box(L, 1, PHRASES_MT, "phrase table")));
  return 1;
}

static int ph_checksum(lua_State *L) {
  char hex[17];
  snprintf(hex, sizeof hex, "%016llx",
           (unsigned long long)bd_phrases_checksum(check_box(L, 1, PHRASES_MT, "phrase table")));
  lua_pushstring(L, hex);
  return 1;
}

static int ph_get(lua_State *L) {
  bd_phrases *p = check_box(L, 1, PHRASES_MT, "phrase table");
  lua_Integer i = luaL_checkinteger(L, 2);
  luaL_argcheck(L, i >= 1 && i <= bd_phrases_count(p), 2, "phrase index out of range");
  int len;
  const int32_t *ids = bd_phrases_get(p, i - 1, &len);
  push_ints(L, ids, len);
  return 1;
}

static int ph_gc(lua_State *L) {
  void **box = luaL_checkudata(L, 1, PHRASES_MT);
  bd_phrases_free(*box);
  *box = NULL;
  return 0;
}

/* -------------------------------------------------------------- loader */

static int l_loader(lua_State *L) {
  void **ibox = luaL_checkudata(L, 1, INST_MT);
  if (*ibox == NULL) return luaL_error(L, "loader: the instances were already used or freed");
  luaL_checktype(L, 2, LUA_TTABLE);
  lbert_check_options(L, 2, "loader", loader_keys);
  bd_loader_cfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.batch_size = opt_i32(L, 2, "batch_size", 8);
  cfg.seq_len = opt_i32(L, 2, "seq_len", 128);
  cfg.prefetch = opt_i32(L, 2, "prefetch", 4);
  cfg.dynamic = opt_bool(L, 2, "dynamic", 0);
  cfg.shuffle = opt_bool(L, 2, "shuffle", 1);
  cfg.seed = (uint64_t)opt_int(L, 2, "seed", 1);
  cfg.pad_id = opt_i32(L, 2, "pad_id", 0);
  cfg.shard_first = opt_i32(L, 2, "shard_first", 0);
  cfg.shard_rows = opt_i32(L, 2, "shard_rows", 0);
  read_mask_cfg(L, 2, &cfg.mask);
  bd_instances *s = *ibox;
  if (cfg.seq_len < s->max_seq_length)
    return luaL_error(L, "loader: seq_len %d is shorter than the shards' max_seq_length %d",
                      cfg.seq_len, s->max_seq_length);
  if (cfg.mask.vocab_size != s->vocab_size)
    return luaL_error(L, "loader: vocab_size %d differs from the shards' %d",
                      (int)cfg.mask.vocab_size, s->vocab_size);
  if (!cfg.dynamic && !s->masked)
    return luaL_error(L, "loader: masking 'static' needs shards created with static masks "
                         "(these were created with masking = 'dynamic')");
  void **box = new_box(L, LOADER_MT);
  *ibox = NULL;   /* the loader owns the instances now */
  *box = bd_loader_new(s, &cfg);
  if (!*box) return lbert_core_error(L, "loader");
  return 1;
}

/* l:next() -> {input_ids, token_type_ids, attention_mask, labels [B, T],
** next_sentence_label [B] (not for objective none)} */
static int ld_next(lua_State *L) {
  bd_loader *l = check_box(L, 1, LOADER_MT, "loader");
  const bd_instances *d = bd_loader_data(l);
  int64_t B, T;
  bd_loader_shape(l, &B, &T);
  static const char *names[5] = {"input_ids", "token_type_ids", "attention_mask", "labels",
                                 "next_sentence_label"};
  int nt = d->objective == BD_OBJ_NONE ? 4 : 5;
  int64_t shape[2] = {B, T};
  int32_t *p[5] = {NULL, NULL, NULL, NULL, NULL};
  lua_createtable(L, 0, nt);
  for (int i = 0; i < nt; i++) {
    bert_tensor *t = bert_tensor_empty(BERT_I32, i == 4 ? 1 : 2, shape);
    if (!t) return lbert_core_error(L, "next");
    lbert_push_tensor(L, t);
    lua_setfield(L, -2, names[i]);
    p[i] = bert_i32(t);
  }
  if (bd_loader_next(l, p[0], p[1], p[2], p[3], p[4])) return lbert_core_error(L, "next");
  return 1;
}

static int ld_gc(lua_State *L) {
  void **box = luaL_checkudata(L, 1, LOADER_MT);
  bd_loader_free(*box);
  *box = NULL;
  return 0;
}

static int ld_position(lua_State *L) {
  bd_loader *l = check_box(L, 1, LOADER_MT, "loader");
  int64_t e, b;
  bd_loader_position(l, &e, &b);
  lua_pushinteger(L, e);
  lua_pushinteger(L, b);
  return 2;
}

static int ld_seek(lua_State *L) {
  bd_loader *l = check_box(L, 1, LOADER_MT, "loader");
  lua_Integer e = luaL_checkinteger(L, 2), b = luaL_checkinteger(L, 3);
  if (bd_loader_seek(l, e, b)) return lbert_core_error(L, "set_state");
  return 0;
}

static int ld_batches(lua_State *L) {
  bd_loader *l = check_box(L, 1, LOADER_MT, "loader");
  lua_pushinteger(L, bd_loader_batches_per_epoch(l));
  return 1;
}


static const luaL_Reg corpus_m[] = {
  {"add_document", c_add_document}, {"stats", c_stats}, {"__gc", c_gc}, {NULL, NULL}};
static const luaL_Reg inst_m[] = {
  {"stats", s_stats}, {"get", s_get}, {"write", s_write},
  {"unigram_counts", s_unigram_counts}, {"__gc", s_gc}, {NULL, NULL}};
static const luaL_Reg loader_m[] = {
  {"next", ld_next}, {"position", ld_position}, {"seek", ld_seek},
  {"batches_per_epoch", ld_batches}, {"close", ld_gc}, {"__gc", ld_gc}, {"__close", ld_gc},
  {NULL, NULL}};
static const luaL_Reg phrases_m[] = {
  {"count", ph_count}, {"max_id", ph_max_id}, {"checksum", ph_checksum}, {"get", ph_get},
  {"__gc", ph_gc}, {NULL, NULL}};
static const luaL_Reg funcs[] = {
  {"corpus", l_corpus}, {"create", l_create}, {"read_shards", l_read_shards},
  {"loader", l_loader}, {"phrases", l_phrases}, {NULL, NULL}};

static void new_class(lua_State *L, const char *name, const luaL_Reg *m) {
  luaL_newmetatable(L, name);
  luaL_setfuncs(L, m, 0);
  lua_pushvalue(L, -1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

void lbert_open_data(lua_State *L) {
  new_class(L, CORPUS_MT, corpus_m);
  new_class(L, INST_MT, inst_m);
  new_class(L, LOADER_MT, loader_m);
  new_class(L, PHRASES_MT, phrases_m);
  luaL_newlib(L, funcs);
  lua_setfield(L, -2, "data");
}
