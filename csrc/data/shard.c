/*
** Shard files: a set of pretraining instances, no Lua serialisation.
**
** Little-endian throughout (the byte order of every host this builds on).
**
**   offset  size  field
**        0     8  magic "BERTSHRD"
**        8     4  u32 version (1)
**       12     4  u32 objective: 0 none, 1 nsp, 2 sop
**       16     4  u32 max_seq_length
**       20     4  u32 flags: bit 0 = static masks present
**       24     8  u64 n, the number of instances
**       32     8  u64 T, the number of tokens (all instances)
**       40     8  u64 P, the number of masked positions (0 unless static)
**       48     4  u32 vocab_size
**       52     4  u32 reserved (0)
**       56     8  u64 checksum: FNV-1a over the payload's 32-bit words
**       64        payload:
**                 u32 length[n]     tokens per instance, specials included
**                 u32 len_a[n]      leading tokens of token type 0 ([CLS] A [SEP])
**                 i32 label[n]      NSP: 1 = random next; SOP: 1 = swapped; none: -1
**                 u32 npred[n]      masked positions per instance (0 when not static)
**                 i32 tokens[T]     original token ids, instance after instance
**                 i32 pos[P]        masked positions, 0-based, ascending per instance
**                 i32 repl[P]       the input id at each: [MASK], random or original
**
** The file size is exactly 64 + 4 * (4n + T + 2P).  Files are written to a
** temporary name and renamed, so a shard is never seen half-written.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tensor.h"
#include "data/ptdata.h"

#define HEADER 64
static const char MAGIC[8] = {'B', 'E', 'R', 'T', 'S', 'H', 'R', 'D'};

typedef struct { uint64_t h; } fnv;

static void fnv_words(fnv *f, const void *p, size_t nwords) {
  const uint32_t *w = p;
  uint64_t h = f->h;
  for (size_t i = 0; i < nwords; i++) {
    h ^= w[i];
    h *= 0x100000001b3ULL;
  }
  f->h = h;
}

static int put(FILE *fp, fnv *f, const void *p, size_t nwords) {
  if (nwords == 0) return 0;
  fnv_words(f, p, nwords);
  return fwrite(p, 4, nwords, fp) == nwords ? 0 : -1;
}

int bd_shard_write(const bd_instances *s, int64_t first, int64_t count, const char *path) {
  if (first < 0 || count < 0 || first + count > s->n) {
    bert_set_error("shard range [%lld, %lld) outside %lld instances", (long long)first,
                   (long long)(first + count), (long long)s->n);
    return -1;
  }
  size_t tmplen = strlen(path) + 32;
  char *tmp = malloc(tmplen);
  uint32_t *meta = malloc((size_t)(4 * count + 1) * sizeof(uint32_t));
  FILE *fp = NULL;
  int rc = -1;
  if (!tmp || !meta) { bert_set_error("out of memory"); goto done; }
  snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid());
  int64_t t0 = s->tok_off[first], t1 = s->tok_off[first + count];
  int64_t p0 = s->pred_off[first], p1 = s->pred_off[first + count];
  uint32_t *len = meta, *la = meta + count, *npred = meta + 3 * count;
  int32_t *lab = (int32_t *)(meta + 2 * count);
  for (int64_t i = 0; i < count; i++) {
    int64_t k = first + i;
    len[i] = (uint32_t)(s->tok_off[k + 1] - s->tok_off[k]);
    la[i] = (uint32_t)s->len_a[k];
    lab[i] = s->label[k];
    npred[i] = (uint32_t)(s->pred_off[k + 1] - s->pred_off[k]);
  }
  fnv f = {0xcbf29ce484222325ULL};
  fnv_words(&f, meta, (size_t)(4 * count));
  fnv_words(&f, s->tokens + t0, (size_t)(t1 - t0));
  fnv_words(&f, s->pred_pos + p0, (size_t)(p1 - p0));
  fnv_words(&f, s->pred_repl + p0, (size_t)(p1 - p0));
  unsigned char h[HEADER];
  memset(h, 0, sizeof h);
  uint32_t u32;
  uint64_t u64;
  memcpy(h, MAGIC, 8);
  u32 = 1; memcpy(h + 8, &u32, 4);
  u32 = (uint32_t)s->objective; memcpy(h + 12, &u32, 4);
  u32 = (uint32_t)s->max_seq_length; memcpy(h + 16, &u32, 4);
  u32 = s->masked ? 1u : 0u; memcpy(h + 20, &u32, 4);
  u64 = (uint64_t)count; memcpy(h + 24, &u64, 8);
  u64 = (uint64_t)(t1 - t0); memcpy(h + 32, &u64, 8);
  u64 = (uint64_t)(p1 - p0); memcpy(h + 40, &u64, 8);
  u32 = (uint32_t)s->vocab_size; memcpy(h + 48, &u32, 4);
  memcpy(h + 56, &f.h, 8);
  fp = fopen(tmp, "wb");
  if (!fp) { bert_set_error("%s: %s", tmp, strerror(errno)); goto done; }
  fnv dummy = {0};
  if (fwrite(h, 1, HEADER, fp) != HEADER || put(fp, &dummy, meta, (size_t)(4 * count)) ||
      put(fp, &dummy, s->tokens + t0, (size_t)(t1 - t0)) ||
      put(fp, &dummy, s->pred_pos + p0, (size_t)(p1 - p0)) ||
      put(fp, &dummy, s->pred_repl + p0, (size_t)(p1 - p0)) || fflush(fp) != 0 ||
      fsync(fileno(fp)) != 0) {
    bert_set_error("%s: write failed: %s", tmp, strerror(errno));
    goto done;
  }
  if (fclose(fp) != 0) {
    fp = NULL;
    bert_set_error("%s: write failed: %s", tmp, strerror(errno));
    goto done;
  }
  fp = NULL;
  if (rename(tmp, path) != 0) { bert_set_error("%s: %s", path, strerror(errno)); goto done; }
  rc = 0;
done:
  if (fp) fclose(fp);
  if (rc != 0 && tmp) remove(tmp);
  free(tmp);
  free(meta);
  return rc;
}

/* ---------------------------------------------------------------- read */

static uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

int bd_shard_read(bd_instances *dst, const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) { bert_set_error("%s: %s", path, strerror(errno)); return -1; }
  unsigned char *buf = NULL;
  int rc = -1;
  long size;
  if (fseek(fp, 0, SEEK_END) != 0 || (size = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) {
    bert_set_error("%s: cannot determine the size", path);
    goto done;
  }
  buf = malloc(size > 0 ? (size_t)size : 1);
  if (!buf) { bert_set_error("%s: out of memory (%ld bytes)", path, size); goto done; }
  if (fread(buf, 1, (size_t)size, fp) != (size_t)size) {
    bert_set_error("%s: read error", path);
    goto done;
  }
  rc = bd_shard_parse(dst, buf, (size_t)size, path);
done:
  fclose(fp);
  free(buf);
  return rc;
}

/* buf must be 4-byte aligned (malloc'ed). */
int bd_shard_parse(bd_instances *dst, const unsigned char *buf, size_t size, const char *path) {
  int rc = -1;
  if (size < HEADER) {
    bert_set_error("%s: truncated shard (%zu bytes, the header alone is %d)", path, size, HEADER);
    goto done;
  }
  if (memcmp(buf, MAGIC, 8) != 0) { bert_set_error("%s: not a shard file (bad magic)", path); goto done; }
  uint32_t version = rd32(buf + 8), objective = rd32(buf + 12), maxlen = rd32(buf + 16);
  uint32_t flags = rd32(buf + 20), vocab = rd32(buf + 48);
  uint64_t n = rd64(buf + 24), T = rd64(buf + 32), P = rd64(buf + 40), sum = rd64(buf + 56);
  if (version != 1) { bert_set_error("%s: unsupported shard version %u", path, version); goto done; }
  if (objective > 2 || flags > 1 || maxlen < 5 || maxlen > (1u << 24) || vocab == 0 ||
      vocab > (1u << 30)) {
    bert_set_error("%s: corrupt shard header", path);
    goto done;
  }
  if (n > ((uint64_t)1 << 40) || T > ((uint64_t)1 << 40) || P > ((uint64_t)1 << 40)) {
    bert_set_error("%s: corrupt shard header (counts)", path);
    goto done;
  }
  uint64_t expect = HEADER + 4 * (4 * n + T + 2 * P);   /* counts < 2^40: no overflow */
  if ((uint64_t)size != expect) {
    bert_set_error("%s: %s shard (%zu bytes, the header says %llu)", path,
                   (uint64_t)size < expect ? "truncated" : "oversized", size,
                   (unsigned long long)expect);
    goto done;
  }
  fnv f = {0xcbf29ce484222325ULL};
  fnv_words(&f, buf + HEADER, (size_t)((expect - HEADER) / 4));
  if (f.h != sum) { bert_set_error("%s: checksum mismatch (corrupt shard)", path); goto done; }
  if (dst->n > 0 && (dst->objective != (int)objective || dst->max_seq_length != (int)maxlen ||
                     dst->vocab_size != (int)vocab || dst->masked != (int)(flags & 1))) {
    bert_set_error("%s: objective, max_seq_length, vocab_size or masking differ from the "
                   "other shards", path);
    goto done;
  }
  const uint32_t *len = (const uint32_t *)(buf + HEADER), *la = len + n, *npred = len + 3 * n;
  const int32_t *lab = (const int32_t *)(len + 2 * n), *tok = (const int32_t *)(len + 4 * n);
  const int32_t *pos = tok + T, *repl = pos + P;
  uint64_t tsum = 0, psum = 0;
  for (uint64_t i = 0; i < n; i++) {
    int lbad = objective == 0 ? lab[i] != -1 : (lab[i] != 0 && lab[i] != 1);
    if (len[i] < 2 || len[i] > maxlen || la[i] > len[i] || lbad || npred[i] > len[i] ||
        (!(flags & 1) && npred[i] != 0) || len[i] > T - tsum || npred[i] > P - psum) {
      bert_set_error("%s: corrupt instance %llu", path, (unsigned long long)i);
      goto done;
    }
    for (uint32_t j = 0; j < npred[i]; j++) {
      int32_t p = pos[psum + j];
      if (p < 0 || (uint32_t)p >= len[i] || (j > 0 && p <= pos[psum + j - 1]) ||
          repl[psum + j] < 0 || (uint32_t)repl[psum + j] >= vocab) {
        bert_set_error("%s: corrupt masks of instance %llu", path, (unsigned long long)i);
        goto done;
      }
    }
    tsum += len[i];
    psum += npred[i];
  }
  if (tsum != T || psum != P) { bert_set_error("%s: corrupt shard (counts)", path); goto done; }
  for (uint64_t i = 0; i < T; i++) {
    if (tok[i] < 0 || (uint32_t)tok[i] >= vocab) {
      bert_set_error("%s: token id %d outside the vocabulary (%u)", path, tok[i], vocab);
      goto done;
    }
  }
  if (dst->n == 0) {
    dst->objective = (int)objective;
    dst->max_seq_length = (int)maxlen;
    dst->vocab_size = (int)vocab;
    dst->masked = (int)(flags & 1);
  }
  if (bd_instances_reserve(dst, (int64_t)n, (int64_t)T, (int64_t)P)) goto done;
  {
    uint64_t t = 0, p = 0;
    for (uint64_t i = 0; i < n; i++) {
      if (bd_instances_push(dst, tok + t, (int)len[i], (int32_t)la[i], lab[i], pos + p,
                            repl + p, (int)npred[i]))
        goto done;
      t += len[i];
      p += npred[i];
    }
  }
  rc = 0;
done:
  return rc;
}
