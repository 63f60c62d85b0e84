/*
 * device.c - opening a device, command frames, submission and
 * synchronisation with the device's error word.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* ------------------------------------------------------------ memory types */

/* The first memory type allowed by `allowed` that has every `want` flag. */
static uint32_t vk_find_memory_type(const VkPhysicalDeviceMemoryProperties *mp, uint32_t allowed,
                                    VkMemoryPropertyFlags want) {
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++)
    if ((allowed & (1u << i)) && (mp->memoryTypes[i].propertyFlags & want) == want) return i;
  return UINT32_MAX;
}

/* Device memory: device-local where there is any. Host memory (staging, the
 * error word): coherent, and cached where offered since reads come back
 * through it. */
static uint32_t vk_choose_memory_type(const gllmk_plugin_device *dev, uint32_t allowed,
                                      vk_memory_kind kind) {
  const VkPhysicalDeviceMemoryProperties *mp = &dev->memory_properties;
  const VkMemoryPropertyFlags visible =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type;
  if (kind == VK_MEMORY_DEVICE) {
    type = vk_find_memory_type(mp, allowed, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    return type != UINT32_MAX ? type : vk_find_memory_type(mp, allowed, 0);
  }
  type = vk_find_memory_type(mp, allowed, visible | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
  return type != UINT32_MAX ? type : vk_find_memory_type(mp, allowed, visible);
}

gllmk_status vk_buffer_create(gllmk_plugin_device *dev, uint64_t size, VkBufferUsageFlags usage,
                              vk_memory_kind kind, gllmk_plugin_memory *out) {
  memset(out, 0, sizeof *out);
  out->size = (size + 15) & ~(uint64_t)15;
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = out->size,
                           .usage = usage,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkResult r = dev->fn.vkCreateBuffer(dev->device, &bi, NULL, &out->buffer);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateBuffer");
  VkMemoryRequirements req;
  dev->fn.vkGetBufferMemoryRequirements(dev->device, out->buffer, &req);
  uint32_t memory_type = vk_choose_memory_type(dev, req.memoryTypeBits, kind);
  if (memory_type == UINT32_MAX) {
    vk_buffer_destroy(dev, out);
    return vk_host->fail(GLLMK_ERR_BACKEND, "vulkan: no %s memory type for a buffer",
                         kind == VK_MEMORY_DEVICE ? "device" : "host-visible");
  }
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .allocationSize = req.size,
                             .memoryTypeIndex = memory_type};
  r = dev->fn.vkAllocateMemory(dev->device, &ai, NULL, &out->memory);
  if (r == VK_SUCCESS) r = dev->fn.vkBindBufferMemory(dev->device, out->buffer, out->memory, 0);
  if (r != VK_SUCCESS) {
    vk_buffer_destroy(dev, out);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
      return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: cannot allocate %llu bytes: %s",
                           (unsigned long long)size, vk_result_name(r));
    return vk_fail(r, "vkAllocateMemory");
  }
  return GLLMK_OK;
}

void vk_buffer_destroy(gllmk_plugin_device *dev, gllmk_plugin_memory *mem) {
  if (mem->buffer) dev->fn.vkDestroyBuffer(dev->device, mem->buffer, NULL);
  if (mem->memory) dev->fn.vkFreeMemory(dev->device, mem->memory, NULL);
  mem->buffer = VK_NULL_HANDLE;
  mem->memory = VK_NULL_HANDLE;
}

void vk_shared_release(gllmk_plugin_device *dev, vk_shared_memory *shared) {
  if (--shared->refs > 0) return;
  vk_buffer_destroy(dev, &shared->mem);
  free(shared);
}

/* Lets go of dev->scratch: destroyed, or left to the recordings holding it. */
static void vk_scratch_drop(gllmk_plugin_device *dev) {
  if (dev->scratch_shared) {
    vk_shared_release(dev, dev->scratch_shared);
    dev->scratch_shared = NULL;
    memset(&dev->scratch, 0, sizeof dev->scratch);
  } else {
    vk_buffer_destroy(dev, &dev->scratch);
  }
}

gllmk_status vk_scratch_reserve(gllmk_plugin_device *dev, uint64_t size) {
  if (dev->dry_run || (dev->scratch.buffer && dev->scratch.size >= size)) return GLLMK_OK;
  if (dev->scratch.buffer) {
    /* Queued work may use it. Recordings captured with it keep it alive
     * (vk_capture_set), each waiting for its own replays when freed. */
    gllmk_status s = vk_wait_idle(dev);
    if (s != GLLMK_OK) return s;
    vk_scratch_drop(dev);
  }
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  return vk_buffer_create(dev, size + size / 4, usage, VK_MEMORY_DEVICE, &dev->scratch);
}

/* ---------------------------------------------------------------- frames */

/* The timeline value the device has reached. */
static gllmk_status vk_reached(gllmk_plugin_device *dev, uint64_t *out_value) {
  VkResult r = dev->fn.vkGetSemaphoreCounterValue(dev->device, dev->timeline, out_value);
  return r == VK_SUCCESS ? GLLMK_OK : vk_fail(r, "vkGetSemaphoreCounterValue");
}

static double vk_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits until the timeline reaches `value`: polls the counter for up to
 * VK_POLL_SECONDS, then blocks in vkWaitSemaphores. On an H200 through
 * NVIDIA's driver 580 a blocking wait returned 30 us after an empty submit
 * (10 us polled) and 50-400 us late after a few hundred microseconds of
 * work, which cost gllmk-bench's bandwidth rows up to 40%; polling did not
 * slow the device. Like CUDA's default, a wait spins while the work is
 * short, and only a long one leaves the core. */
gllmk_status vk_wait_value(gllmk_plugin_device *dev, uint64_t value) {
  if (value == 0) return GLLMK_OK;
  double deadline = 0.0;
  for (;;) {
    uint64_t reached;
    gllmk_status s = vk_reached(dev, &reached);
    if (s != GLLMK_OK || reached >= value) return s;
    double now = vk_seconds();
    if (deadline == 0.0)
      deadline = now + VK_POLL_SECONDS;
    else if (now > deadline)
      break;
  }
  VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                            .semaphoreCount = 1,
                            .pSemaphores = &dev->timeline,
                            .pValues = &value};
  VkResult r = dev->fn.vkWaitSemaphores(dev->device, &wi, UINT64_MAX);
  return r == VK_SUCCESS ? GLLMK_OK : vk_fail(r, "vkWaitSemaphores");
}

gllmk_status vk_frame_get(gllmk_plugin_device *dev, vk_frame **out_frame) {
  if (dev->capture)
    return vk_host->fail(GLLMK_ERR_UNSUPPORTED,
                         "vulkan: a command outside a kernel launch cannot be captured");
  vk_frame *f = &dev->frames[dev->frame_index];
  *out_frame = f;
  if (f->recording) return GLLMK_OK;
  gllmk_status s = vk_wait_value(dev, f->done_value);
  if (s != GLLMK_OK) return s;
  VkResult r = dev->fn.vkResetCommandPool(dev->device, f->command_pool, 0);
  if (r == VK_SUCCESS) r = dev->fn.vkResetDescriptorPool(dev->device, f->descriptor_pool, 0);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  if (r == VK_SUCCESS) r = dev->fn.vkBeginCommandBuffer(f->cmd, &bi);
  if (r != VK_SUCCESS) return vk_fail(r, "beginning a command buffer");
  f->recording = 1;
  f->commands = 0;
  f->sets_used = 0;
  f->arena_used = 0;
  return GLLMK_OK;
}

void vk_cmd_barrier(gllmk_plugin_device *dev, VkCommandBuffer cmd) {
  /* The first command of a frame (or of a recording's command buffer) is
   * ordered after the previous submissions too: a barrier's first scope
   * covers everything earlier on the queue. */
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_READ_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT};
  dev->fn.vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

void vk_cmd_order(gllmk_plugin_device *dev, vk_frame *frame) {
  vk_cmd_barrier(dev, frame->cmd);
  frame->commands++;
}

void vk_cmd_host_barrier(gllmk_plugin_device *dev, VkCommandBuffer cmd) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
  const VkPipelineStageFlags device_stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  dev->fn.vkCmdPipelineBarrier(cmd, device_stages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL,
                               0, NULL);
}

gllmk_status vk_submit_with(gllmk_plugin_device *dev, VkCommandBuffer extra,
                            uint64_t *out_value) {
  if (out_value) *out_value = 0;
  vk_frame *f = &dev->frames[dev->frame_index];
  VkCommandBuffer cmds[2];
  uint32_t count = 0;
  int frame_ended = f->recording;
  if (f->recording) {
    f->recording = 0;
    /* Make every device write visible to the host once the frame is done. */
    vk_cmd_host_barrier(dev, f->cmd);
    VkResult r = dev->fn.vkEndCommandBuffer(f->cmd);
    if (r != VK_SUCCESS) return vk_fail(r, "vkEndCommandBuffer");
    cmds[count++] = f->cmd;
  }
  if (extra) cmds[count++] = extra;
  if (count == 0) return GLLMK_OK;
  uint64_t value = dev->last_submitted + 1;
  VkTimelineSemaphoreSubmitInfo ts = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .signalSemaphoreValueCount = 1,
                                      .pSignalSemaphoreValues = &value};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ts,
                     .commandBufferCount = count,
                     .pCommandBuffers = cmds,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &dev->timeline};
  VkResult r = dev->fn.vkQueueSubmit(dev->queue, 1, &si, VK_NULL_HANDLE);
  if (r != VK_SUCCESS) return vk_fail(r, "vkQueueSubmit");
  dev->last_submitted = value;
  if (frame_ended) {
    f->done_value = value;
    dev->frame_index = (dev->frame_index + 1) % VK_FRAMES;
  }
  if (out_value) *out_value = value;
  return GLLMK_OK;
}

gllmk_status vk_submit(gllmk_plugin_device *dev) {
  return vk_submit_with(dev, VK_NULL_HANDLE, NULL);
}

gllmk_status vk_command_recorded(gllmk_plugin_device *dev, vk_frame *frame) {
  if (frame->commands >= VK_FRAME_SUBMIT_AFTER) return vk_submit(dev);
  if (frame->commands < VK_IDLE_SUBMIT_MIN) return GLLMK_OK;
  uint64_t reached;
  gllmk_status s = vk_reached(dev, &reached);
  if (s == GLLMK_OK && reached >= dev->last_submitted) s = vk_submit(dev);
  return s;
}

gllmk_status vk_wait_idle(gllmk_plugin_device *dev) {
  gllmk_status s = vk_submit(dev);
  if (s != GLLMK_OK) return s;
  return vk_wait_value(dev, dev->last_submitted);
}

gllmk_status vk_arena_reserve(gllmk_plugin_device *dev, uint64_t size, vk_frame **out_frame,
                              uint64_t *out_offset) {
  vk_frame *f;
  gllmk_status s = vk_frame_get(dev, &f);
  /* A full descriptor pool would move the kernel that reads this space to
   * the next frame, which may still run after this frame's arena is reused. */
  if (s == GLLMK_OK && (f->arena_used + size > VK_ARENA_BYTES || f->sets_used == VK_FRAME_SETS)) {
    s = vk_submit(dev);
    if (s == GLLMK_OK) s = vk_frame_get(dev, &f);
  }
  if (s != GLLMK_OK) return s;
  *out_frame = f;
  *out_offset = f->arena_offset + f->arena_used;
  f->arena_used += (size + 255) & ~(uint64_t)255;
  return GLLMK_OK;
}

gllmk_status vk_upload_reserve(gllmk_plugin_device *dev, uint64_t size, vk_upload *out) {
  if (dev->dry_run) {
    *out = (vk_upload){&dev->arena, 0, NULL};
    return GLLMK_OK;
  }
  if (dev->capture) return vk_capture_upload(dev, size, out);
  vk_frame *f;
  uint64_t at;
  gllmk_status s = vk_arena_reserve(dev, size, &f, &at);
  if (s != GLLMK_OK) return s;
  *out = (vk_upload){&dev->arena, at, dev->arena_map + at};
  return GLLMK_OK;
}

/* ------------------------------------------------------------ synchronize */

/* What the kernels' error codes (common.glsl) mean: two %d, the value and
 * the limit the kernel recorded. */
static const char *vk_error_format(uint32_t code) {
  switch (code) {
    case 1: return "gllmk_embedding: id %d is outside the table's %d rows";
    case 2: return "gllmk_kv_append: slot %d is past the cache's %d slots";
    case 3: return "gllmk_paged_attention: block_table entry %d is outside the cache of %d blocks";
    case 4: return "gllmk_paged_attention: seq_lens entry %d needs more than the table's %d slots";
    case 5: return "gllmk_paged_attention: q_starts ends at %d, expected T=%d, or a sequence has "
                   "more new tokens than its length";
    case 6: return "gllmk_attention: kv_lens entry %d is outside [0, %d]";
    default: return "vulkan: a kernel raised an unknown error (%d, %d)";
  }
}

gllmk_status vk_synchronize(gllmk_plugin_device *dev) {
  gllmk_status s = vk_wait_idle(dev);
  if (s != GLLMK_OK) return s;
  uint32_t code = dev->error_map[0];
  if (code == 0) return GLLMK_OK;
  int32_t value = (int32_t)dev->error_map[1], limit = (int32_t)dev->error_map[2];
  dev->error_map[0] = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  return vk_host->fail(GLLMK_ERR_OUT_OF_RANGE, vk_error_format(code), value, limit);
#pragma GCC diagnostic pop
}

/* ------------------------------------------------------------ open, close */

static gllmk_status vk_create_device(gllmk_plugin_device *dev) {
  const vk_physical *p = dev->phys;
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = p->queue_family,
                                .queueCount = 1,
                                .pQueuePriorities = &priority};
  /* The cooperative-matrix matmuls also need F16 arithmetic (the NV and the
   * KHR F16 kernels) and the Vulkan memory model; the KHR BF16 kernel needs
   * BF16 as a type and in cooperative matrices. */
  int khr = p->coopmat_khr_f16 || p->coopmat_khr_bf16;
  int any_coopmat = p->coopmat_nv || khr;
  VkPhysicalDeviceShaderBfloat16FeaturesKHR bf16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR,
      .shaderBFloat16Type = VK_TRUE,
      .shaderBFloat16CooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm_khr = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
      .pNext = p->coopmat_khr_bf16 ? &bf16 : NULL,
      .cooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_nv = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
      .pNext = khr ? &cm_khr : NULL,
      .cooperativeMatrix = VK_TRUE};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .pNext = p->coopmat_nv ? (void *)&cm_nv : khr ? (void *)&cm_khr : NULL,
      .timelineSemaphore = VK_TRUE,
      .shaderFloat16 = p->coopmat_nv || p->coopmat_khr_f16 ? VK_TRUE : VK_FALSE,
      .vulkanMemoryModel = any_coopmat ? VK_TRUE : VK_FALSE};
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
      .pNext = &f12,
      .storageBuffer16BitAccess = p->native ? VK_TRUE : VK_FALSE};
  const char *extensions[3];
  uint32_t extension_count = 0;
  if (p->coopmat_nv) extensions[extension_count++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
  if (khr) extensions[extension_count++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
  if (p->coopmat_khr_bf16) extensions[extension_count++] = VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME;
  VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .pNext = &f11,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi,
                           .enabledExtensionCount = extension_count,
                           .ppEnabledExtensionNames = extensions};
  VkResult r = vk_api.vkCreateDevice(p->handle, &di, NULL, &dev->device);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateDevice");
  atomic_fetch_add(&vk_devices_open, 1);
  int missing = 0;
#define VK_LOADER(n)
#define VK_INSTANCE(n)
#define VK_INSTANCE_EXT(n)
#define VK_DEVICE(n) missing |= !(dev->fn.n = (PFN_##n)vk_api.vkGetDeviceProcAddr(dev->device, #n));
#include "symbols.def"
  if (missing) {
    /* vkDestroyDevice may be the one missing: leave the device to the driver. */
    if (dev->fn.vkDestroyDevice) {
      dev->fn.vkDestroyDevice(dev->device, NULL);
      atomic_fetch_sub(&vk_devices_open, 1);
    }
    dev->device = VK_NULL_HANDLE;
    return vk_host->fail(GLLMK_ERR_BACKEND, "vulkan: the driver lacks Vulkan 1.2 device functions");
  }
  dev->fn.vkGetDeviceQueue(dev->device, p->queue_family, 0, &dev->queue);
  return GLLMK_OK;
}

static gllmk_status vk_create_frames(gllmk_plugin_device *dev) {
  VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                             .descriptorCount = VK_FRAME_SETS * VK_BINDINGS};
  for (uint32_t i = 0; i < VK_FRAMES; i++) {
    vk_frame *f = &dev->frames[i];
    f->arena_offset = (uint64_t)i * VK_ARENA_BYTES;
    VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                  .queueFamilyIndex = dev->phys->queue_family};
    VkResult r = dev->fn.vkCreateCommandPool(dev->device, &ci, NULL, &f->command_pool);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = f->command_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    r = dev->fn.vkAllocateCommandBuffers(dev->device, &ai, &f->cmd);
    if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateCommandBuffers");
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = VK_FRAME_SETS,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &ps};
    r = dev->fn.vkCreateDescriptorPool(dev->device, &pi, NULL, &f->descriptor_pool);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateDescriptorPool");
  }
  return GLLMK_OK;
}

static gllmk_status vk_create_layouts(gllmk_plugin_device *dev) {
  VkDescriptorSetLayoutBinding b[VK_BINDINGS];
  for (uint32_t i = 0; i < VK_BINDINGS; i++)
    b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo li = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = VK_BINDINGS,
      .pBindings = b};
  VkResult r = dev->fn.vkCreateDescriptorSetLayout(dev->device, &li, NULL, &dev->set_layout);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreateDescriptorSetLayout");
  VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 128};
  VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &dev->set_layout,
                                   .pushConstantRangeCount = 1,
                                   .pPushConstantRanges = &pr};
  r = dev->fn.vkCreatePipelineLayout(dev->device, &pi, NULL, &dev->pipeline_layout);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreatePipelineLayout");
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  r = dev->fn.vkCreatePipelineCache(dev->device, &ci, NULL, &dev->pipeline_cache);
  if (r != VK_SUCCESS) return vk_fail(r, "vkCreatePipelineCache");
  return GLLMK_OK;
}

static gllmk_status vk_create_buffers(gllmk_plugin_device *dev) {
  const VkBufferUsageFlags staging = VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                     VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                     VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  gllmk_status s = vk_buffer_create(dev, (uint64_t)VK_FRAMES * VK_ARENA_BYTES, staging,
                                    VK_MEMORY_HOST, &dev->arena);
  if (s == GLLMK_OK)
    s = vk_buffer_create(dev, 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, VK_MEMORY_HOST,
                         &dev->error_word);
  if (s == GLLMK_OK)
    s = vk_buffer_create(dev, 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, VK_MEMORY_DEVICE,
                         &dev->null_buffer);
  const uint64_t arrivals = VK_ARRIVAL_WORDS * sizeof(uint32_t);
  if (s == GLLMK_OK)
    s = vk_buffer_create(dev, arrivals,
                         VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                         VK_MEMORY_DEVICE, &dev->arrivals);
  if (s == GLLMK_OK) s = vk_mem_fill(dev, &dev->arrivals, 0, arrivals, 0);
  if (s != GLLMK_OK) return s;
  void *map = NULL;
  VkResult r = dev->fn.vkMapMemory(dev->device, dev->arena.memory, 0, VK_WHOLE_SIZE, 0, &map);
  if (r != VK_SUCCESS) return vk_fail(r, "vkMapMemory");
  dev->arena_map = map;
  r = dev->fn.vkMapMemory(dev->device, dev->error_word.memory, 0, VK_WHOLE_SIZE, 0, &map);
  if (r != VK_SUCCESS) return vk_fail(r, "vkMapMemory");
  dev->error_map = map;
  memset(map, 0, 16);
  return GLLMK_OK;
}

gllmk_status vk_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out_device) {
  if (options->device_index >= vk_physical_count)
    return vk_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "vulkan: no device %u (%u found)",
                         options->device_index, vk_physical_count);
  gllmk_plugin_device *dev = calloc(1, sizeof *dev);
  if (!dev) return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
  dev->phys = &vk_physicals[options->device_index];
  vk_api.vkGetPhysicalDeviceMemoryProperties(dev->phys->handle, &dev->memory_properties);
  gllmk_status s = vk_create_device(dev);
  VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
  if (s == GLLMK_OK) {
    VkResult r = dev->fn.vkCreateSemaphore(dev->device, &si, NULL, &dev->timeline);
    if (r != VK_SUCCESS) s = vk_fail(r, "vkCreateSemaphore");
  }
  if (s == GLLMK_OK) s = vk_create_frames(dev);
  if (s == GLLMK_OK) s = vk_create_layouts(dev);
  if (s == GLLMK_OK) s = vk_create_buffers(dev);
  if (s != GLLMK_OK) {
    vk_close(dev);
    return s;
  }
  vk_timestamps_init(dev);
  *out_device = dev;
  return GLLMK_OK;
}

void vk_close(gllmk_plugin_device *dev) {
  if (!dev) return;
  if (dev->device) {
    if (dev->capture) vk_recording_destroy(dev, dev->capture); /* never ended */
    dev->capture = NULL;
    if (dev->queue) vk_wait_idle(dev); /* a failure here leaves nothing to report it to */
    for (uint32_t i = 0; i < VK_FRAMES; i++)
      if (dev->frames[i].recording) dev->fn.vkEndCommandBuffer(dev->frames[i].cmd);
    dev->fn.vkDeviceWaitIdle(dev->device);
    vk_pipelines_destroy(dev);
    vk_timestamps_destroy(dev);
    for (uint32_t i = 0; i < VK_FRAMES; i++) {
      vk_frame *f = &dev->frames[i];
      if (f->descriptor_pool)
        dev->fn.vkDestroyDescriptorPool(dev->device, f->descriptor_pool, NULL);
      if (f->command_pool) dev->fn.vkDestroyCommandPool(dev->device, f->command_pool, NULL);
    }
    vk_buffer_destroy(dev, &dev->arena);
    vk_buffer_destroy(dev, &dev->error_word);
    vk_buffer_destroy(dev, &dev->null_buffer);
    vk_scratch_drop(dev); /* recordings are freed before their device */
    vk_buffer_destroy(dev, &dev->arrivals);
    if (dev->pipeline_cache) dev->fn.vkDestroyPipelineCache(dev->device, dev->pipeline_cache, NULL);
    if (dev->pipeline_layout)
      dev->fn.vkDestroyPipelineLayout(dev->device, dev->pipeline_layout, NULL);
    if (dev->set_layout) dev->fn.vkDestroyDescriptorSetLayout(dev->device, dev->set_layout, NULL);
    if (dev->timeline) dev->fn.vkDestroySemaphore(dev->device, dev->timeline, NULL);
    dev->fn.vkDestroyDevice(dev->device, NULL);
    atomic_fetch_sub(&vk_devices_open, 1);
  }
  free(dev);
}
