/*
** libFuzzer target: a whole safetensors file (length prefix, header, data).
** The bytes go into a memfd so the real reader runs: open, size checks,
** mmap, header parse and validation, views and dtype conversions.
*/
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("fuzz.safetensors", 0);
    if (fd < 0) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  bert_st_loaded f;
  if (bert_load_safetensors(path, &f) == 0) {
    /* touch every element, as a caller would */
    volatile double sink = 0;
    for (size_t i = 0; i < f.hdr.n; i++) {
      int64_t n = bert_numel(f.tensors[i]);
      for (int64_t k = 0; k < n; k++) sink += bert_get_flat(f.tensors[i], k);
    }
    (void)sink;
    bert_st_loaded_free(&f);
  }
  return 0;
}
