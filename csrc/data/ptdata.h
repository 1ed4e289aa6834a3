/*
** Pretraining data: instance creation (Google's create_pretraining_data
** algorithm, RoBERTa FULL-SENTENCES, ALBERT SOP), masked-LM masking, the
** binary shard format and a prefetching batch loader.  Plain C, no Lua.
**
** Errors: functions returning int give 0 on success and -1 with
** bert_set_error() on failure; pointer-returning ones give NULL.
*/
#ifndef BERT_PTDATA_H
#define BERT_PTDATA_H

#include <stddef.h>
#include <stdint.h>

/* ---- a sequential stream over Philox4x32-10 (bert_philox) ---- */
typedef struct {
  uint64_t key, counter;
  uint32_t buf[4];
  int left;
} bd_rng;

void bd_rng_init(bd_rng *r, uint64_t key, uint64_t counter);
uint32_t bd_rng_u32(bd_rng *r);
double bd_rng_uniform(bd_rng *r);                    /* [0, 1), 53 bits */
int64_t bd_rng_randint(bd_rng *r, int64_t lo, int64_t hi);   /* inclusive */
uint64_t bd_mix64(uint64_t x);                       /* splitmix64 finaliser */

/* ---- phrase tables (phrases.c) ---- */
/* A set of token-id sequences (whole-word phrases), found by hash. */
typedef struct bd_phrases bd_phrases;
#define BD_PHRASE_MAX_TOKENS 64

/* Copies n phrases, phrase k = tokens[off[k] .. off[k+1]) (off[0] = 0); a
** phrase of 0 or more than BD_PHRASE_MAX_TOKENS tokens, a negative id or a
** repeated phrase is an error naming it (1-based). */
bd_phrases *bd_phrases_new(const int32_t *tokens, const int64_t *off, int64_t n);
bd_phrases *bd_phrases_copy(const bd_phrases *p);
void bd_phrases_free(bd_phrases *p);
int64_t bd_phrases_count(const bd_phrases *p);
int32_t bd_phrases_max_id(const bd_phrases *p);      /* -1 when empty */
uint64_t bd_phrases_checksum(const bd_phrases *p);   /* of the phrases in order */
const int32_t *bd_phrases_get(const bd_phrases *p, int64_t i, int *len);   /* 0-based */
/* The phrase index of ids[0..len), or -1.  The running hash lets a caller
** grow a candidate: running = bd_phrase_hash_add(bd_phrase_hash_start(), ids, len). */
uint64_t bd_phrase_hash_start(void);
uint64_t bd_phrase_hash_add(uint64_t h, const int32_t *ids, int n);
int64_t bd_phrases_lookup(const bd_phrases *p, const int32_t *ids, int len, uint64_t running);

/* ---- masking ---- */
typedef struct {
  int32_t vocab_size;
  int32_t mask_id;
  double masked_lm_prob;
  int max_predictions;
  int whole_word;
  const uint8_t *special;   /* [vocab]: never masked ([CLS], [SEP], [PAD], [MASK]) */
  const uint8_t *cont;      /* [vocab]: continues the previous word (WWM), or NULL */
  int mode;                 /* BD_MASK_TOKENS, BD_MASK_SPAN or BD_MASK_NGRAM */
  int max_span;             /* SPAN: the longest span in units (SpanBERT: 10); NGRAM: n's maximum */
  double span_p;            /* SPAN: the geometric distribution's p (SpanBERT: 0.2) */
  const bd_phrases *phrases;   /* PHRASE: the table (needs cont for the word boundaries) */
} bd_mask_cfg;

/* Masking modes.  The units are words when whole_word is set (and cont
** given), else tokens; a span never crosses a special token.
** TOKENS: Google's, units chosen one by one at random.
** SPAN:   SpanBERT's: a span's length in units is drawn from a geometric
**         distribution (span_p) clipped at max_span, its start at random.
** NGRAM:  ALBERT's: the length n in 1..max_span with p(n) proportional to 1/n.
** PHRASE: ERNIE 1.0's: the units are whole words, and a run of adjacent
**         words that forms a phrase of the table (the longest from the
**         left) is one unit; units are chosen one by one at random.
** In SPAN, NGRAM and PHRASE the 80/10/10 replacement is decided once per
** span or unit. */
enum { BD_MASK_TOKENS = 0, BD_MASK_SPAN = 1, BD_MASK_NGRAM = 2, BD_MASK_PHRASE = 3 };

/* Google's create_masked_lm_predictions on tokens[0..n): fills pos[]
** (ascending) and repl[] (the id that goes into the input at pos: [MASK],
** a random vocab id or the original) and returns their count (at most
** max_predictions).  scratch: 3 * n ints. */
int bd_mask(const bd_mask_cfg *c, bd_rng *r, const int32_t *tokens, int n,
            int32_t *pos, int32_t *repl, int32_t *scratch);

/* ---- a set of instances (in memory) ---- */
enum { BD_OBJ_NONE = 0, BD_OBJ_NSP = 1, BD_OBJ_SOP = 2 };

typedef struct {
  int64_t n, cap, ocap;
  int64_t ntok, tokcap;
  int64_t npred, predcap;
  int64_t *tok_off;      /* [n + 1] */
  int32_t *tokens;       /* original ids, [CLS] A [SEP] B [SEP] */
  int32_t *len_a;        /* [n]: leading tokens with token type 0 */
  int32_t *label;        /* [n]: 0/1, or -1 for objective none */
  int64_t *pred_off;     /* [n + 1] */
  int32_t *pred_pos, *pred_repl;
  /* shard metadata */
  int objective, max_seq_length, vocab_size, masked;
} bd_instances;

bd_instances *bd_instances_new(void);
void bd_instances_free(bd_instances *s);
/* Room for more instances, tokens and predictions. */
int bd_instances_reserve(bd_instances *s, int64_t more, int64_t tok, int64_t pred);
/* Appends one instance (np masked positions, or 0). */
int bd_instances_push(bd_instances *s, const int32_t *tok, int n, int32_t len_a, int32_t label,
                      const int32_t *pos, const int32_t *repl, int np);

/* ---- the tokenised corpus and instance creation ---- */
typedef struct {
  int64_t ndocs, nsents, ntok;
  int64_t dcap, scap, tcap;
  int64_t *doc_off;      /* [ndocs + 1]: sentence index of each document */
  int64_t *sent_off;     /* [nsents + 1]: token offset of each sentence */
  int32_t *tokens;
} bd_corpus;

bd_corpus *bd_corpus_new(void);
void bd_corpus_free(bd_corpus *c);
int bd_corpus_add_sentence(bd_corpus *c, const int32_t *ids, int64_t n); /* n > 0 */
int bd_corpus_end_document(bd_corpus *c);   /* closes a document (no-op when empty) */

typedef struct {
  int objective;
  int max_seq_length;
  double short_seq_prob;
  int dupe_factor;
  int static_masking;
  uint64_t seed;
  int32_t cls_id, sep_id;
  bd_mask_cfg mask;
} bd_create_cfg;

/* Builds the instances (shuffled, as Google's code emits them).  The
** corpus' documents are shuffled in place first. */
bd_instances *bd_create_instances(bd_corpus *c, const bd_create_cfg *cfg);

/* ---- shards ---- */
/* Writes instances [first, first + count) of s to path (temp + rename). */
int bd_shard_write(const bd_instances *s, int64_t first, int64_t count, const char *path);
/* Reads a shard, validating everything, and appends it to dst (whose
** metadata must match when dst is not empty). */
int bd_shard_read(bd_instances *dst, const char *path);
/* The same over a file's bytes in memory (buf 4-byte aligned); path only
** labels errors. */
int bd_shard_parse(bd_instances *dst, const unsigned char *buf, size_t size, const char *path);

/* ---- the loader ---- */
typedef struct bd_loader bd_loader;

typedef struct {
  int batch_size, seq_len, prefetch;
  int dynamic, shuffle;
  uint64_t seed;
  int32_t pad_id;
  bd_mask_cfg mask;      /* dynamic masking; the tables are copied */
  /* data parallelism: produce rows [shard_first, shard_first + shard_rows)
  ** of each global batch of batch_size (shard_rows 0: the whole batch) */
  int shard_first, shard_rows;
} bd_loader_cfg;

/* Takes ownership of data. */
bd_loader *bd_loader_new(bd_instances *data, const bd_loader_cfg *cfg);
void bd_loader_free(bd_loader *l);
/* Copies the next batch into the caller's buffers ([B*T] each, nsl [B];
** B is the shard's rows when sharded, see bd_loader_shape). */
int bd_loader_next(bd_loader *l, int32_t *ids, int32_t *types, int32_t *attn,
                   int32_t *labels, int32_t *nsl);
void bd_loader_position(bd_loader *l, int64_t *epoch, int64_t *batch);
int bd_loader_seek(bd_loader *l, int64_t epoch, int64_t batch);
int64_t bd_loader_batches_per_epoch(const bd_loader *l);
void bd_loader_shape(const bd_loader *l, int64_t *batch, int64_t *seq_len);
const bd_instances *bd_loader_data(const bd_loader *l);

#endif
