/*
 * record.c - native recordings (a reused command buffer). supports(), which
 * runs an op in a dry run (dev->dry_run), is in plugin.c with the op table.
 *
 * Between record_begin and record_end the device is in capture mode
 * (dev->capture): vk_call_run records each launch into the recording's own
 * command buffer, with a descriptor set from the recording's own pools,
 * instead of into a frame; nothing is submitted. Whatever a launch binds
 * must outlive the device's reuse of it:
 *  - tensors: the caller's buffers; the core refuses a replay once one of
 *    them was freed, so they are not the recording's concern;
 *  - dev->scratch (packed matmul operands, argmax and decode partials): the
 *    recording takes a reference, so that a later, larger scratch replaces
 *    it for the device while the recording keeps the old one;
 *  - host-written parameters (rope's table): vk_upload_reserve gives
 *    memory the recording owns instead of the frame's arena, which the
 *    device rewrites every few frames;
 *  - the error word, the arrival counters and the null buffer live as long
 *    as the device.
 * A launch that binds the frame arena, or any command recorded into a frame
 * (vk_frame_get) while capturing, fails the capture with
 * GLLMK_ERR_UNSUPPORTED; the core then replays that recording call by call.
 *
 * A replay submits the frame being recorded (work queued before) and the
 * recording's command buffer in one batch, so it runs after that work and
 * before anything queued later; its first barrier orders it after earlier
 * submissions like any frame's. Its launches write the device's error word
 * like direct calls, which synchronize reports. The command buffer is
 * recorded with SIMULTANEOUS_USE, so a replay may be submitted while the
 * previous one still runs (the barriers keep them in order).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Host-visible upload memory a recording takes at a time. */
#define VK_RECORD_UPLOAD_CHUNK (64u << 10)

/* Grows the array `field` of rec (of `count` elements) by one element;
 * fails the calling function with GLLMK_ERR_OUT_OF_MEMORY. */
#define VK_GROW(field, count)                                                 \
  do {                                                                        \
    void *grown_ = realloc(field, ((size_t)(count) + 1) * sizeof *(field));   \
    if (!grown_)                                                              \
      return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: out of host memory"); \
    field = grown_;                                                           \
  } while (0)

void vk_recording_destroy(gllmk_plugin_device *dev, gllmk_plugin_recording *rec) {
  if (!rec) return;
  /* A failure here has no caller to go to: the device is lost and its
   * objects may be destroyed anyway. */
  if (rec->done_value) (void)vk_wait_value(dev, rec->done_value);
  if (rec->command_pool) dev->fn.vkDestroyCommandPool(dev->device, rec->command_pool, NULL);
  for (uint32_t i = 0; i < rec->pool_count; i++)
    dev->fn.vkDestroyDescriptorPool(dev->device, rec->pools[i], NULL);
  for (uint32_t i = 0; i < rec->upload_count; i++) vk_buffer_destroy(dev, &rec->uploads[i]);
  for (uint32_t i = 0; i < rec->scratch_count; i++) vk_shared_release(dev, rec->scratch[i]);
  free(rec->pools);
  free(rec->uploads);
  free(rec->upload_maps);
  free(rec->scratch);
  free(rec);
}

/* Makes the recording hold dev->scratch (its buffer is bound by a launch). */
static gllmk_status vk_capture_hold_scratch(gllmk_plugin_device *dev,
                                            gllmk_plugin_recording *rec) {
  if (!dev->scratch_shared) {
    vk_shared_memory *shared = malloc(sizeof *shared);
    if (!shared) return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    shared->mem = dev->scratch;
    shared->refs = 1; /* the device's */
    dev->scratch_shared = shared;
  }
  for (uint32_t i = 0; i < rec->scratch_count; i++)
    if (rec->scratch[i] == dev->scratch_shared) return GLLMK_OK;
  VK_GROW(rec->scratch, rec->scratch_count);
  rec->scratch[rec->scratch_count++] = dev->scratch_shared;
  dev->scratch_shared->refs++;
  return GLLMK_OK;
}

gllmk_status vk_capture_set(gllmk_plugin_device *dev, const VkDescriptorBufferInfo *bindings,
                            VkDescriptorSet *out_set) {
  gllmk_plugin_recording *rec = dev->capture;
  for (uint32_t i = 0; i < VK_BINDINGS; i++) {
    VkBuffer b = bindings[i].buffer;
    if (b == dev->arena.buffer)
      return vk_host->fail(GLLMK_ERR_UNSUPPORTED,
                           "vulkan: a launch reading the per-frame arena cannot be captured");
    if (b == dev->scratch.buffer && b != VK_NULL_HANDLE) {
      gllmk_status s = vk_capture_hold_scratch(dev, rec);
      if (s != GLLMK_OK) return s;
    }
  }
  if (rec->pool_count == 0 || rec->sets_in_last == VK_FRAME_SETS) {
    VK_GROW(rec->pools, rec->pool_count);
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                               .descriptorCount = VK_FRAME_SETS * VK_BINDINGS};
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = VK_FRAME_SETS,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &ps};
    VkResult r =
        dev->fn.vkCreateDescriptorPool(dev->device, &pi, NULL, &rec->pools[rec->pool_count]);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateDescriptorPool");
    rec->pool_count++;
    rec->sets_in_last = 0;
  }
  VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                    .descriptorPool = rec->pools[rec->pool_count - 1],
                                    .descriptorSetCount = 1,
                                    .pSetLayouts = &dev->set_layout};
  VkResult r = dev->fn.vkAllocateDescriptorSets(dev->device, &ai, out_set);
  if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateDescriptorSets");
  rec->sets_in_last++;
  rec->commands++;
  return GLLMK_OK;
}

gllmk_status vk_capture_upload(gllmk_plugin_device *dev, uint64_t size, vk_upload *out) {
  gllmk_plugin_recording *rec = dev->capture;
  uint64_t need = (size + 255) & ~(uint64_t)255;
  if (need == 0) need = 256;
  if (rec->upload_count == 0 ||
      rec->upload_used + need > rec->uploads[rec->upload_count - 1].size) {
    VK_GROW(rec->uploads, rec->upload_count);
    VK_GROW(rec->upload_maps, rec->upload_count);
    gllmk_plugin_memory *mem = &rec->uploads[rec->upload_count];
    uint64_t chunk = need > VK_RECORD_UPLOAD_CHUNK ? need : VK_RECORD_UPLOAD_CHUNK;
    gllmk_status s =
        vk_buffer_create(dev, chunk, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, VK_MEMORY_HOST, mem);
    if (s != GLLMK_OK) return s;
    void *map = NULL;
    VkResult r = dev->fn.vkMapMemory(dev->device, mem->memory, 0, VK_WHOLE_SIZE, 0, &map);
    if (r != VK_SUCCESS) {
      vk_buffer_destroy(dev, mem);
      return vk_fail(r, "vkMapMemory");
    }
    rec->upload_maps[rec->upload_count++] = map;
    rec->upload_used = 0;
  }
  uint32_t last = rec->upload_count - 1;
  *out = (vk_upload){&rec->uploads[last], rec->upload_used,
                     rec->upload_maps[last] + rec->upload_used};
  rec->upload_used += need;
  return GLLMK_OK;
}

/* ------------------------------------------------------------- the entries */

gllmk_status vk_record_begin(gllmk_plugin_device *dev) {
  if (dev->capture)
    return vk_host->fail(GLLMK_ERR_INTERNAL, "vulkan: record_begin while capturing");
  gllmk_plugin_recording *rec = calloc(1, sizeof *rec);
  if (!rec) return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .queueFamilyIndex = dev->phys->queue_family};
  VkResult r = dev->fn.vkCreateCommandPool(dev->device, &ci, NULL, &rec->command_pool);
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = rec->command_pool,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  if (r == VK_SUCCESS) r = dev->fn.vkAllocateCommandBuffers(dev->device, &ai, &rec->cmd);
  /* SIMULTANEOUS_USE: a replay may be submitted while the last one runs. */
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
  if (r == VK_SUCCESS) r = dev->fn.vkBeginCommandBuffer(rec->cmd, &bi);
  if (r != VK_SUCCESS) {
    vk_recording_destroy(dev, rec);
    return vk_fail(r, "creating a recording's command buffer");
  }
  dev->capture = rec;
  return GLLMK_OK;
}

gllmk_status vk_record_end(gllmk_plugin_device *dev, gllmk_plugin_recording **out_recording) {
  gllmk_plugin_recording *rec = dev->capture;
  if (!rec) return vk_host->fail(GLLMK_ERR_INTERNAL, "vulkan: record_end without record_begin");
  dev->capture = NULL;
  vk_cmd_host_barrier(dev, rec->cmd);
  VkResult r = dev->fn.vkEndCommandBuffer(rec->cmd);
  if (r != VK_SUCCESS) {
    vk_recording_destroy(dev, rec);
    return vk_fail(r, "vkEndCommandBuffer");
  }
  *out_recording = rec;
  return GLLMK_OK;
}

gllmk_status vk_record_replay(gllmk_plugin_device *dev, gllmk_plugin_recording *rec) {
  if (dev->capture)
    return vk_host->fail(GLLMK_ERR_INTERNAL, "vulkan: record_replay while capturing");
  uint64_t value;
  gllmk_status s = vk_submit_with(dev, rec->cmd, &value);
  if (s == GLLMK_OK) rec->done_value = value;
  return s;
}

void vk_record_free(gllmk_plugin_device *dev, gllmk_plugin_recording *rec) {
  vk_recording_destroy(dev, rec);
}
