/*
** The device layer (vk_device.c) as the kernels (vk_kernels.h) use it: no
** Vulkan types here, so the op layer compiles without the headers.
*/
#ifndef BERT_VK_INTERNAL_H
#define BERT_VK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct vkx_alloc vkx_alloc;    /* a sub-allocated range of device memory */

typedef struct {
  char name[256];
  char type[32];                       /* "discrete", "integrated", "virtual", "cpu", "other" */
  uint32_t api_version, vendor_id, device_id;
  uint64_t max_storage_range;          /* maxStorageBufferRange */
  uint64_t max_range;                  /* the range the ops split to: maxStorageBufferRange, or less
                                       ** (BERT_VK_MAX_RANGE at device creation, vkx_set_max_range) */
  uint64_t max_alloc;                  /* maxMemoryAllocationSize */
  uint32_t max_shared;                 /* maxComputeSharedMemorySize */
  uint32_t max_invocations;            /* maxComputeWorkGroupInvocations */
  uint32_t max_groups[3];
  uint32_t subgroup_size;
  uint32_t offset_align;               /* minStorageBufferOffsetAlignment */
  uint64_t device_local_bytes;         /* the largest device-local heap */
  int index;                           /* among the physical devices */
  int ndevices;
} vkx_info;

int vkx_init(const char **reason);     /* 0 ready, -1 unavailable (*reason) */
const vkx_info *vkx_get_info(void);
/* Sets the range ops split to (0: the device's limit); clamped to
** [4096, maxStorageBufferRange].  Returns the range now in force. */
uint64_t vkx_set_max_range(uint64_t bytes);
vkx_alloc *vkx_alloc_new(size_t nbytes);          /* NULL + bert_set_error */
void vkx_alloc_free(vkx_alloc *a);
size_t vkx_alloc_size(const vkx_alloc *a);

/* Recorded into the current command buffer (executed at the next flush). */
int vkx_fill(vkx_alloc *a, size_t off, size_t n, uint32_t word);
int vkx_upload(vkx_alloc *a, size_t off, const void *src, size_t n);
int vkx_copy(vkx_alloc *dst, size_t doff, vkx_alloc *src, size_t soff, size_t n);
/* Flushes, waits, and copies device bytes to host memory. */
int vkx_download(vkx_alloc *a, size_t off, void *dst, size_t n);
int vkx_flush(void);                   /* submit and wait */

typedef struct { vkx_alloc *a; size_t off, len; } vkx_bind;   /* bytes */
/* Records one dispatch of shader `name` with specialization constants
** spec[0..nspec) (ids 0..), storage buffers b[0..nbind) at bindings
** 0..nbind, and push constants: the first nbind words are filled with each
** binding's element (4-byte) offset from its aligned start, then `push`. */
int vkx_dispatch(const char *name, const uint32_t *spec, int nspec, int nbind, const vkx_bind *b,
                 const void *push, uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);
uint64_t vkx_dispatch_count(void);

#endif
