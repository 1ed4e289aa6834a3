/*
** BERT-family tokenizers in plain C (no Lua here).
**
** A bt_tokenizer is the Hugging Face pipeline: added-token extraction on
** the raw text, normalizer, pre-tokenizer, model (WordPiece or byte-level
** BPE), truncation, post-processing (template), padding.  Offsets are
** character spans into the ORIGINAL string: 0-based start, exclusive end,
** counted in Unicode code points (what HF's Python/Node `encode` returns).
** Invalid UTF-8: every byte that does not start a valid sequence counts as
** one character U+FFFD (so offsets still index characters).
*/
#ifndef BT_TOK_H
#define BT_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "tokenize/tok_util.h"

/* ---------- vocabulary: string <-> id ---------- */
typedef struct bt_vocab {
  char *arena; size_t arena_len, arena_cap;     /* all token strings */
  uint32_t *soff, *slen;                        /* per entry */
  int32_t *sid;                                 /* per entry: its id */
  size_t n, cap;                                /* entries */
  int32_t *table; size_t mask;                  /* open addressing, -1 empty */
  int32_t *by_id; size_t nid;                   /* id -> entry, -1 hole */
  int maxlen;                                   /* longest token, bytes */
} bt_vocab;

void bt_vocab_init(bt_vocab *v);
void bt_vocab_free(bt_vocab *v);
/* Sets s -> id (a later set of the same string wins).  0 or -1 (no memory). */
int bt_vocab_set(bt_vocab *v, const char *s, size_t len, int32_t id);
int32_t bt_vocab_get(const bt_vocab *v, const char *s, size_t len);
/* Token of an id, or NULL. */
const char *bt_vocab_token(const bt_vocab *v, int32_t id, size_t *len);
uint64_t bt_hash(const void *p, size_t len);

/* ---------- encodings ---------- */
typedef struct bt_encoding {
  int32_t *ids, *type_ids, *offsets, *words;    /* offsets: 2 per token */
  uint8_t *special, *attn;
  int8_t *seqs;                                 /* sequence 0/1, -1 none */
  /* a token shown by text of its own rather than its id's string (a
  ** Unigram unknown shows the normalized text it covers, as HF and
  ** SentencePiece do): 2 per token, start and length in text, -1 none */
  int32_t *surface;
  char *text; size_t text_len, text_cap;
  int32_t n, cap;
  struct bt_encoding *over; int32_t nover;      /* overflowing windows */
} bt_encoding;

void bt_encoding_free(bt_encoding *e);

enum { BT_TRUNC_NONE, BT_TRUNC_LONGEST_FIRST, BT_TRUNC_ONLY_FIRST,
       BT_TRUNC_ONLY_SECOND };
enum { BT_PAD_NONE, BT_PAD_LONGEST, BT_PAD_FIXED };

typedef struct bt_options {
  int add_special_tokens;
  int truncation, max_length, stride, trunc_left;
  int padding, pad_length, pad_multiple, pad_left;
  int max_windows;        /* cap on overflowing windows (0: 1000) */
} bt_options;

/* ---------- the tokenizer ---------- */
enum { BT_MODEL_WORDPIECE, BT_MODEL_BPE, BT_MODEL_UNIGRAM };
enum { BT_PRE_NONE, BT_PRE_BERT, BT_PRE_BYTELEVEL, BT_PRE_WHITESPACE,
       BT_PRE_METASPACE };
enum { BT_DEC_NONE, BT_DEC_WORDPIECE, BT_DEC_BYTELEVEL, BT_DEC_METASPACE };

/* SentencePiece piece types (sentencepiece_model.proto numbering). */
enum { BT_PIECE_NORMAL = 1, BT_PIECE_UNKNOWN = 2, BT_PIECE_CONTROL = 3,
       BT_PIECE_USER_DEFINED = 4, BT_PIECE_UNUSED = 5, BT_PIECE_BYTE = 6 };

/* Normalizer steps of a Hugging Face `Sequence` (Unigram tokenizers, and
** WordPiece / BPE ones whose normalizer is not BertNormalizer). */
enum { BT_NORM_REPLACE, BT_NORM_SPACES, BT_NORM_LOWERCASE, BT_NORM_NFKD,
       BT_NORM_NFD, BT_NORM_STRIP_ACCENTS, BT_NORM_PRECOMPILED,
       BT_NORM_PREPEND, BT_NORM_STRIP, BT_NORM_NFC, BT_NORM_NFKC,
       BT_NORM_NMT };

/* Splitting pre-tokenizers of a WordPiece `Sequence` (applied in order,
** each to the pieces of the one before). */
enum { BT_SPLIT_WHITESPACE_SPLIT, BT_SPLIT_WHITESPACE, BT_SPLIT_BERT,
       BT_SPLIT_PUNCTUATION, BT_SPLIT_DIGITS, BT_SPLIT_DIGITS_EACH };
#define BT_MAX_SPLITS 8
typedef struct bt_norm_step {
  int kind;
  int strip_left, strip_right;                  /* Strip */
  uint32_t *from; int nfrom;                    /* Replace pattern */
  uint32_t *to; int nto;                        /* Replace / Prepend content */
} bt_norm_step;

/* A byte trie (pieces, user-defined symbols): children found by hashing
** (node, byte); the root's children in a direct table. */
typedef struct bt_trie {
  bt_map kids;                                  /* (node, byte) -> child */
  int32_t *value; int32_t nnodes, vcap;         /* per node: id or -1 */
  int32_t root[256];
  /* after bt_trie_compile: a double array (node = position; child of s by
  ** byte b at base[s] + b + 1 when check[] of it is s) */
  int32_t *da_base, *da_check, *da_value; int32_t da_n;
} bt_trie;

/* SentencePiece's precompiled charsmap: a darts-clone double array over
** UTF-8 prefixes whose values index NUL-terminated replacement strings. */
typedef struct bt_charsmap {
  uint32_t *units; size_t nunits;
  char *norm; size_t nnorm;
} bt_charsmap;

typedef struct bt_added {
  char *content; size_t len;
  uint32_t *cps; int ncps;                      /* content as code points */
  int32_t id;
  int special, lstrip, rstrip, single_word, normalized;
  int in_text;            /* 0: never matched in text (a .model's specials) */
  char *ncontent; size_t nlen;  /* `normalized`: the content normalized (what
                                ** is matched, and its token string in text) */
} bt_added;

/* One template item: a sequence ($A / $B) or a special token. */
typedef struct bt_piece {
  int seq;                                      /* 0 = A, 1 = B, -1 = special */
  int32_t type_id;
  int32_t *ids; char **tokens; int nids;        /* for specials */
} bt_piece;

typedef struct bt_merge_map {
  uint64_t *keys; int32_t *rank, *newid;        /* key = a<<32 | b */
  size_t mask, n;
} bt_merge_map;

typedef struct bt_tokenizer bt_tokenizer;

struct bt_tokenizer {
  int model;
  bt_vocab vocab;
  /* WordPiece */
  char *unk_token; int32_t unk_id;
  char *prefix; size_t prefix_len;              /* "##" */
  int max_input_chars;
  /* BPE (byte-level) */
  bt_merge_map merges;
  int32_t nmerges, *merge_a, *merge_b;          /* merges in rank order */
  size_t merge_cap_a, merge_cap_b;
  int32_t byte_id[256];                         /* id of each byte's char */
  int cache_capacity;
  /* normalizer */
  int has_normalizer, clean_text, handle_chinese, strip_accents, lowercase;
  /* pre-tokenizer */
  int pre, add_prefix_space, use_regex;
  uint8_t splits[BT_MAX_SPLITS]; int nsplits;   /* BT_SPLIT_*, when set */
  /* post-processor */
  bt_piece *single, *pair; int nsingle, npair;
  int trim_offsets, post_add_prefix_space, has_post;
  /* decoder */
  int decoder, cleanup;
  char *dec_prefix;
  /* Unigram (SentencePiece) */
  double *uni_score; uint8_t *uni_type; int32_t uni_n;
  double *uni_vs;         /* per id: the score Viterbi adds (spm's float rules) */
  uint8_t cm_plain[128];  /* ASCII bytes no charsmap or user rule starts with */
  uint8_t hf_plain[128];  /* ASCII bytes with no charsmap rule of their own */
  int uni_spm;            /* 1: SentencePiece semantics (.model files) */
  int ws_splits;          /* no piece holds ▁ past its start: words split */
  int byte_fallback, dec_byte_fallback;
  int32_t byte_piece[256];
  double uni_min, uni_max;                      /* see tok_unigram.c */
  bt_trie trie, user_trie;
  bt_charsmap charsmap;
  int add_dummy_prefix, remove_extra_ws, escape_ws, ws_as_suffix;
  bt_norm_step *norms; int nnorms;              /* HF normalizer chain */
  uint32_t meta_repl; int prepend_scheme, meta_split;  /* Metaspace */
  /* added tokens */
  bt_added *added; int nadded; size_t added_cap;
  bt_vocab added_index;   /* content -> index in added */
  bt_map added_by_id;     /* id -> index in added of its first token */
  bt_map special_ids;     /* id -> 1 for the ids of special added tokens */
  bt_trie added_trie;     /* raw-matched content -> index (one-pass matching) */
  bt_trie norm_trie;      /* normalized content of `normalized` tokens -> index */
  int max_windows;        /* cap on overflowing windows per encoding */
  /* padding defaults */
  int32_t pad_id, pad_type_id;
  /* per-thread scratch (BPE caches) */
  struct bt_worker **workers; int nworkers;
  char err[256];
};

/* Byte-level helpers. */
uint32_t bt_byte_to_cp(int b);
int bt_cp_to_byte(uint32_t cp);                 /* -1 if not in the map */

/* ---------- Unigram (tok_unigram.c, tok_spm.c) ---------- */
enum { BT_PREPEND_NEVER, BT_PREPEND_FIRST, BT_PREPEND_ALWAYS };
/* Sets the pieces' scores and types (types may be NULL: all normal) for
** the vocab entries 0..n-1, builds the tries.  0 or -1 with t->err. */
int bt_unigram_setup(bt_tokenizer *t, const double *scores,
                     const uint8_t *types, int32_t n);
/* Reads a precompiled charsmap blob.  0 or -1 with t->err. */
int bt_charsmap_load(bt_charsmap *m, const uint8_t *blob, size_t len,
                     char *err, size_t errlen);
void bt_charsmap_free(bt_charsmap *m);
/* Appends a normalizer step.  0 or -1 (no memory). */
int bt_add_norm_step(bt_tokenizer *t, int kind, const char *from,
                     size_t flen, const char *to, size_t tlen);

int bt_trie_insert(bt_trie *tr, const char *s, size_t len, int32_t value);
/* Turns the trie into a double array for lookups (no inserts after). */
int bt_trie_compile(bt_trie *tr);
void bt_trie_free(bt_trie *tr);

/* A SentencePiece ModelProto, as read from a .model file. */
typedef struct bt_spm_model {
  int32_t npieces;
  char **pieces; uint32_t *piece_len; float *scores; uint8_t *types;
  int model_type, byte_fallback, treat_ws_as_suffix;
  int32_t vocab_size, unk_id, bos_id, eos_id, pad_id;
  char *norm_name;
  uint8_t *charsmap; size_t charsmap_len;
  int add_dummy_prefix, remove_extra_ws, escape_ws;
} bt_spm_model;

/* Parses a .model file's bytes.  0, or -1 with err naming the problem
** (never crashes on malformed input). */
int bt_spm_parse(const uint8_t *data, size_t len, bt_spm_model *m,
                 char *err, size_t errlen);
void bt_spm_free(bt_spm_model *m);
/* Fuzz entry point: parses a .model file and builds a tokenizer with
** SentencePiece's semantics (no added tokens, no template).  NULL, with
** err filled, on malformed input. */
bt_tokenizer *bt_unigram_load_model(const uint8_t *data, size_t len,
                                    char *err, size_t errlen);

/* Creates an empty tokenizer of a model kind; configure fields, then
** bt_tokenizer_finish. */
bt_tokenizer *bt_tokenizer_new(int model);
void bt_tokenizer_free(bt_tokenizer *t);
/* Adds a merge (rank = order of calls).  0, or -1 with t->err set. */
int bt_add_merge(bt_tokenizer *t, const char *a, size_t alen,
                 const char *b, size_t blen);
int bt_add_added(bt_tokenizer *t, const char *s, size_t len, int32_t id,
                 int special, int lstrip, int rstrip, int single_word,
                 int normalized, int in_text);
/* Sets a template (which: 0 single, 1 pair); takes ownership of pieces. */
void bt_set_template(bt_tokenizer *t, int which, bt_piece *p, int n);
int bt_tokenizer_finish(bt_tokenizer *t);

/* Number of special tokens the post-processor adds. */
int bt_num_added_tokens(const bt_tokenizer *t, int is_pair);
/* Encodes text (and pair text, or NULL).  0, or -1 with err filled. */
int bt_encode(bt_tokenizer *t, int worker, const char *a, size_t alen,
              const char *b, size_t blen, const bt_options *o,
              bt_encoding *out, char *err, size_t errlen);
/* Pads a batch as o says (after all are encoded). */
void bt_pad_batch(const bt_tokenizer *t, bt_encoding *e, int n,
                  const bt_options *o);
/* Token string of an id (vocab or added tokens), or NULL. */
const char *bt_id_to_token(const bt_tokenizer *t, int32_t id, size_t *len);
int32_t bt_token_to_id(const bt_tokenizer *t, const char *s, size_t len);
int bt_is_special_id(const bt_tokenizer *t, int32_t id);
/* The added token of an id (the first one added with it), or NULL. */
const bt_added *bt_added_of(const bt_tokenizer *t, int32_t id);
/* Decodes ids into a malloc'd string (*len bytes). NULL on no memory. */
char *bt_decode(const bt_tokenizer *t, const int32_t *ids, size_t n,
                int skip_special, size_t *len);
int bt_vocab_size(const bt_tokenizer *t);       /* with added tokens */

/* ---------- UTF-8 and normalization helpers (tok_unicode.c) ---------- */
/* Decodes UTF-8 into code points (invalid bytes -> U+FFFD); returns count. */
size_t bt_utf8_decode(const char *s, size_t len, uint32_t *out);
/* Decodes like bt_utf8_decode and fills starts[k] with the byte start of
** char k (starts[n] = len; starts holds n + 1 entries). */
size_t bt_utf8_decode_starts(const char *s, size_t len, uint32_t *out,
                             size_t *starts);
int bt_utf8_encode(uint32_t cp, char *out);
int bt_is_whitespace(uint32_t c);
int bt_is_punctuation(uint32_t c);
int bt_is_control(uint32_t c);
int bt_is_chinese(uint32_t c);
int bt_is_letter(uint32_t c);
int bt_is_number(uint32_t c);

/* ---------- training (tok_train.c) ---------- */
typedef struct bt_trainer bt_trainer;
typedef struct bt_train_opts {
  int kind;                                     /* BT_MODEL_* */
  int vocab_size, min_frequency, limit_alphabet;
  int lowercase, strip_accents;                 /* wordpiece normalizer */
  int initial_alphabet;                         /* bpe: all 256 byte chars */
  char **specials; int nspecials;
} bt_train_opts;

bt_trainer *bt_trainer_new(const bt_train_opts *o);
void bt_trainer_free(bt_trainer *tr);
/* Feeds text: split into lines (each keeps its newline) and counts words. */
int bt_trainer_feed(bt_trainer *tr, const char *text, size_t len);
/* Runs training: fills vocab (initialized here) and, for BPE, the merges
** as (a, b, new) id triples in rank order (malloc'd).  0, or -1. */
int bt_trainer_train(bt_trainer *tr, bt_vocab *vocab, int32_t **merges,
                     int32_t *nmerges, char *err, size_t errlen);

/* Unigram training (tok_unigram_train.c): SentencePiece's algorithm over
** words ("▁word") with counts.  Returns the pieces sorted by score
** (malloc'd strings), their byte lengths and scores. */
typedef struct bt_unigram_train_opts {
  int vocab_size;                  /* pieces to produce, specials excluded */
  int max_piece_length, seed_size, num_sub_iterations;
  double shrinking_factor;
  double character_coverage;       /* (0, 1): spm's alphabet rule; 0 or 1: all */
} bt_unigram_train_opts;
int bt_unigram_train(const bt_unigram_train_opts *o, const char *const *words,
                     const uint32_t *lens, const double *counts, size_t nw,
                     char ***pieces, uint32_t **lens_out, double **scores,
                     int32_t *n, char *err, size_t errlen);
/* Runs bt_unigram_train over the words a unigram trainer was fed. */
int bt_trainer_train_unigram(bt_trainer *tr, const bt_unigram_train_opts *o,
                             char ***pieces, uint32_t **lens, double **scores,
                             int32_t *n, char *err, size_t errlen);

#endif
