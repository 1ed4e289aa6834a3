/*
** libFuzzer target: a pretraining shard file (csrc/data/shard.c).  The
** checksum field is recomputed over the payload unless bit 0 of the
** reserved word is set, so the fuzzer reaches the validation behind it
** and can still test the checksum check itself.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/ptdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *buf = malloc(size ? size : 1);
  if (buf == NULL) return 0;
  memcpy(buf, data, size);
  if (size >= 64 && (size - 64) % 4 == 0 && !(buf[52] & 1)) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 64; i < size; i += 4) {
      uint32_t w;
      memcpy(&w, buf + i, 4);
      h ^= w;
      h *= 0x100000001b3ULL;
    }
    memcpy(buf + 56, &h, 8);
  }
  bd_instances *s = bd_instances_new();
  if (s) {
    bd_shard_parse(s, buf, size, "fuzz.bin");
    bd_instances_free(s);
  }
  free(buf);
  return 0;
}
