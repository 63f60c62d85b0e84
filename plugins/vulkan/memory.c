/*
 * memory.c - device buffers and the transfers between host and device.
 *
 * Writes go through the current frame's slice of the host-visible arena and
 * a vkCmdCopyBuffer recorded in order with the kernels, so a write returns
 * as soon as the bytes are in the arena. Reads wait for all queued work,
 * then copy through the arena in slices. Copies and fills between device
 * buffers launch the elementwise family's kernels elementwise_copy.comp and
 * elementwise_fill_bytes.comp through dispatch.c (never the family's C).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const VkBufferUsageFlags vk_tensor_usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                                  VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                  VK_BUFFER_USAGE_TRANSFER_DST_BIT;

gllmk_status vk_mem_alloc(gllmk_plugin_device *dev, uint64_t size, gllmk_plugin_memory **out) {
  gllmk_plugin_memory *mem = malloc(sizeof *mem);
  if (!mem) return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  gllmk_status s = vk_buffer_create(dev, size, vk_tensor_usage, VK_MEMORY_DEVICE, mem);
  if (s != GLLMK_OK) {
    free(mem);
    return s;
  }
  *out = mem;
  return GLLMK_OK;
}

void vk_mem_free(gllmk_plugin_device *dev, gllmk_plugin_memory *mem) {
  if (!mem) return;
  /* Queued work may still use it. A failure here has no caller to go to;
   * the buffer is released anyway once the device is idle or lost. */
  vk_wait_idle(dev);
  vk_buffer_destroy(dev, mem);
  free(mem);
}

static void vk_record_copy(gllmk_plugin_device *dev, vk_frame *frame, VkBuffer src,
                           uint64_t src_offset, VkBuffer dst, uint64_t dst_offset, uint64_t size) {
  vk_cmd_order(dev, frame);
  VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
  dev->fn.vkCmdCopyBuffer(frame->cmd, src, dst, 1, &region);
}

gllmk_status vk_mem_write(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset,
                          const void *src, uint64_t size) {
  const uint8_t *bytes = src;
  while (size > 0) {
    uint64_t chunk = size < VK_ARENA_BYTES ? size : VK_ARENA_BYTES;
    uint64_t at;
    vk_frame *f;
    gllmk_status s = vk_arena_reserve(dev, chunk, &f, &at);
    if (s != GLLMK_OK) return s;
    memcpy(dev->arena_map + at, bytes, chunk);
    vk_record_copy(dev, f, dev->arena.buffer, at, dst->buffer, offset, chunk);
    s = vk_command_recorded(dev, f);
    if (s != GLLMK_OK) return s;
    bytes += chunk;
    offset += chunk;
    size -= chunk;
  }
  return GLLMK_OK;
}

gllmk_status vk_mem_read(gllmk_plugin_device *dev, gllmk_plugin_memory *src, uint64_t offset,
                         void *dst, uint64_t size) {
  uint8_t *bytes = dst;
  while (size > 0) {
    uint64_t chunk = size < VK_ARENA_BYTES ? size : VK_ARENA_BYTES;
    uint64_t at;
    vk_frame *f;
    gllmk_status s = vk_arena_reserve(dev, chunk, &f, &at);
    if (s != GLLMK_OK) return s;
    vk_record_copy(dev, f, src->buffer, offset, dev->arena.buffer, at, chunk);
    s = vk_wait_idle(dev);
    if (s != GLLMK_OK) return s;
    memcpy(bytes, dev->arena_map + at, chunk);
    bytes += chunk;
    offset += chunk;
    size -= chunk;
  }
  return GLLMK_OK;
}

gllmk_status vk_copy_words(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                           gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size) {
  const VkPhysicalDeviceLimits *lim = &dev->phys->limits;
  /* Each part is bound as one range, from its offset rounded down to the
   * binding alignment, and copied as F16 elements (the bits unchanged). */
  uint64_t part_max = lim->maxStorageBufferRange - lim->minStorageBufferOffsetAlignment;
  if (part_max > UINT32_MAX) part_max = UINT32_MAX;
  part_max &= ~(uint64_t)15;
  while (size > 0) {
    uint64_t part = size < part_max ? size : part_max;
    vk_call call;
    vk_call_init(&call, dev, VK_KERNEL_elementwise_copy, GLLMK_F16, VK_ELEMENTWISE_GROUP);
    call.key.variant = VK_COPY_DENSE8;
    vk_call_memory(&call, 0, dst, dst_offset, part);
    vk_call_memory(&call, 1, src, src_offset, part);
    vk_copy_push push;
    memset(&push, 0, sizeof push);
    push.count = (uint32_t)(part / 2);
    push.cols = push.count;
    push.out_row_stride = push.count;
    push.out_offset = (uint32_t)((dst_offset - call.bindings[0].offset) / 2);
    push.src_offset = (uint32_t)((src_offset - call.bindings[1].offset) / 2);
    push.ndim = 1;
    push.shape[0] = push.count;
    push.stride[0] = 1;
    gllmk_status s =
        vk_call_run(&call, &push, sizeof push, vk_copy_groups(&push, call.key.variant), 1, 1);
    if (s != GLLMK_OK) return s;
    dst_offset += part;
    src_offset += part;
    size -= part;
  }
  return GLLMK_OK;
}

/* Whether `offset` lies a multiple of 16 bytes after the binding start it
 * rounds down to (see dispatch.c), as elementwise_copy.comp's 16-byte words
 * need. */
static int vk_word_aligned(const gllmk_plugin_device *dev, uint64_t offset) {
  uint64_t align = dev->phys->limits.minStorageBufferOffsetAlignment;
  return offset % 16 == 0 && (align == 0 || (offset - offset % align) % 16 == 0);
}

/* Copies between device buffers run as a kernel where the offsets allow:
 * on an H200 through NVIDIA's driver 580, vkCmdCopyBuffer of 256 MiB moved
 * 846 GB/s (GPU timestamps), elementwise_copy.comp about 4000 GB/s (with
 * vk_copy_words above). The last size % 16 bytes, or an unaligned copy, go
 * through vkCmdCopyBuffer. */
gllmk_status vk_mem_copy(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                         gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size) {
  uint64_t words = 0;
  if (vk_word_aligned(dev, dst_offset) && vk_word_aligned(dev, src_offset))
    words = size & ~(uint64_t)15;
  if (words > 0) {
    gllmk_status s = vk_copy_words(dev, dst, dst_offset, src, src_offset, words);
    if (s != GLLMK_OK || words == size) return s;
  }
  vk_frame *f;
  gllmk_status s = vk_frame_get(dev, &f);
  if (s != GLLMK_OK) return s;
  vk_record_copy(dev, f, src->buffer, src_offset + words, dst->buffer, dst_offset + words,
                 size - words);
  return vk_command_recorded(dev, f);
}

/* Sets the bytes [begin, end) of the word at `word_offset` (a multiple of 4). */
static gllmk_status vk_fill_partial_word(gllmk_plugin_device *dev, gllmk_plugin_memory *dst,
                                         uint64_t word_offset, uint32_t begin, uint32_t end,
                                         uint8_t value) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_elementwise_fill_bytes, GLLMK_I32, 1);
  vk_call_memory(&call, 0, dst, word_offset, 4);
  uint32_t mask = 0;
  for (uint32_t b = begin; b < end; b++) mask |= 0xffu << (8 * b);
  /* vk_call_memory bound from the offset rounded down to the device alignment. */
  struct {
    uint32_t index, mask, value;
  } push = {(uint32_t)((word_offset - call.bindings[0].offset) / 4), mask, 0x01010101u * value};
  return vk_call_run(&call, &push, sizeof push, 1, 1, 1);
}

gllmk_status vk_mem_fill(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset,
                         uint64_t size, uint8_t value) {
  uint64_t end = offset + size;
  uint64_t first_word = offset & ~(uint64_t)3, last_word = (end - 1) & ~(uint64_t)3;
  if (first_word == last_word)
    return vk_fill_partial_word(dev, dst, first_word, (uint32_t)(offset - first_word),
                                (uint32_t)(end - first_word), value);
  gllmk_status s = GLLMK_OK;
  uint64_t middle_begin = first_word, middle_end = last_word + 4;
  if (offset != first_word) {
    s = vk_fill_partial_word(dev, dst, first_word, (uint32_t)(offset - first_word), 4, value);
    middle_begin += 4;
  }
  if (s == GLLMK_OK && end != last_word + 4) {
    s = vk_fill_partial_word(dev, dst, last_word, 0, (uint32_t)(end - last_word), value);
    middle_end -= 4;
  }
  if (s != GLLMK_OK || middle_begin == middle_end) return s;
  vk_frame *f;
  s = vk_frame_get(dev, &f);
  if (s != GLLMK_OK) return s;
  vk_cmd_order(dev, f);
  dev->fn.vkCmdFillBuffer(f->cmd, dst->buffer, middle_begin, middle_end - middle_begin,
                          0x01010101u * value);
  return vk_command_recorded(dev, f);
}
