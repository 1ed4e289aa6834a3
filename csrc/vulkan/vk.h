/*
** The Vulkan backend as the binding sees it: its table
** (bert_vulkan_backend, registered like any backend) and the device
** tensors and kernels the binding reaches directly (bert.vulkan.*).  The
** core never includes this header.  Built without Vulkan (-DBERT_NO_VULKAN)
** every entry fails with an error, and no tensor can ever be on the device.
*/
#ifndef BERT_VK_H
#define BERT_VK_H

#include "vulkan/vk_kernels.h"

extern const bert_backend bert_vulkan_backend;

static inline int bert_is_vk(const bert_tensor *t) {
  return t != NULL && t->storage != NULL && t->storage->backend == &bert_vulkan_backend;
}

#endif
