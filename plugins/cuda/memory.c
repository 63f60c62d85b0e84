/*
 * memory.c - device memory of the cuda backend: allocation, and copies and
 * fills queued on the context's stream (host writes through pinned staging
 * memory). Memory the caller owns is wrapped in graph.c.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ------------------------------------------------------------- memory */

gllmk_status cuda_mem_alloc(gllmk_plugin_device *dev, uint64_t size, gllmk_plugin_memory **out) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  gllmk_plugin_memory *memory = malloc(sizeof *memory);
  if (!memory) status = cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  CUdeviceptr pointer = 0;
  if (status == GLLMK_OK) status = cuda_check(cu.cuMemAlloc(&pointer, size), "cuMemAlloc");
  cuda_leave(dev);
  if (status != GLLMK_OK) {
    free(memory);
    return status;
  }
  *memory = (gllmk_plugin_memory){.address = pointer, .owned = 1};
  *out = memory;
  return GLLMK_OK;
}

void cuda_mem_free(gllmk_plugin_device *dev, gllmk_plugin_memory *memory) {
  if (memory->owned && cuda_enter(dev) == GLLMK_OK) {
    cu.cuStreamSynchronize(dev->stream);
    cu.cuMemFree(cuda_memory_address(memory));
    cuda_leave(dev);
  }
  free(memory);
}

/* Copies through the pinned staging halves in turn, so the call returns as
 * soon as `src` has been copied out, while earlier work keeps running. */
static gllmk_status write_staged(gllmk_plugin_device *dev, CUdeviceptr dst, const unsigned char *src, uint64_t size) {
  gllmk_status status = GLLMK_OK;
  while (size > 0 && status == GLLMK_OK) {
    const size_t n = size < CUDA_STAGING_BYTES ? (size_t)size : CUDA_STAGING_BYTES;
    const int half = dev->staging_next;
    dev->staging_next ^= 1;
    status = cuda_check(cu.cuEventSynchronize(dev->staging_done[half]), "cuEventSynchronize");
    if (status != GLLMK_OK) break;
    memcpy(dev->staging[half], src, n);
    status = cuda_check(cu.cuMemcpyHtoDAsync(dst, dev->staging[half], n, dev->stream), "cuMemcpyHtoDAsync");
    if (status == GLLMK_OK)
      status = cuda_check(cu.cuEventRecord(dev->staging_done[half], dev->stream), "cuEventRecord");
    dst += n;
    src += n;
    size -= n;
  }
  return status;
}

gllmk_status cuda_mem_write(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset,
                            const void *src, uint64_t size) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = write_staged(dev, cuda_memory_address(dst) + offset, src, size);
  cuda_leave(dev);
  return status;
}

gllmk_status cuda_mem_read(gllmk_plugin_device *dev, gllmk_plugin_memory *src, uint64_t offset, void *dst,
                           uint64_t size) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuMemcpyDtoHAsync(dst, cuda_memory_address(src) + offset, size, dev->stream),
                      "cuMemcpyDtoHAsync");
  if (status == GLLMK_OK) status = cuda_check(cu.cuStreamSynchronize(dev->stream), "cuStreamSynchronize");
  cuda_leave(dev);
  return status;
}

gllmk_status cuda_mem_copy(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                           gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuMemcpyDtoDAsync(cuda_memory_address(dst) + dst_offset, cuda_memory_address(src) + src_offset,
                                           size, dev->stream),
                      "cuMemcpyDtoDAsync");
  cuda_leave(dev);
  return status;
}

gllmk_status cuda_mem_fill(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset, uint64_t size,
                           uint8_t value) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuMemsetD8Async(cuda_memory_address(dst) + offset, value, size, dev->stream),
                      "cuMemsetD8Async");
  cuda_leave(dev);
  return status;
}
