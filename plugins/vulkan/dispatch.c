/*
 * dispatch.c - assembling and recording one kernel launch.
 *
 * Each tensor is bound from its byte offset rounded down to the device's
 * minStorageBufferOffsetAlignment, over just the bytes it spans, so element
 * indices in a kernel stay 32-bit and relative to the tensor. Slots an op
 * leaves empty get a small dummy buffer; binding 8 is always the error word.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

void vk_call_init(vk_call *call, gllmk_plugin_device *dev, vk_kernel kernel, int32_t dtype,
                  uint32_t workgroup_size) {
  memset(call, 0, sizeof *call);
  call->dev = dev;
  call->key.kernel = kernel;
  call->key.workgroup_size = workgroup_size;
  call->key.dtype = (uint32_t)dtype;
  call->key.dtype_out = (uint32_t)dtype;
  for (uint32_t i = 0; i < VK_BINDINGS; i++)
    call->bindings[i] = (VkDescriptorBufferInfo){dev->null_buffer.buffer, 0, VK_WHOLE_SIZE};
}

static void vk_call_failed(vk_call *call, gllmk_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void vk_call_failed(vk_call *call, gllmk_status status, const char *format, ...) {
  if (call->status != GLLMK_OK) return;
  call->status = status;
  va_list ap;
  va_start(ap, format);
  vsnprintf(call->message, sizeof call->message, format, ap);
  va_end(ap);
}

uint32_t vk_call_u32(vk_call *call, int64_t value, const char *what) {
  if (value < 0 || value > (int64_t)UINT32_MAX) {
    vk_call_failed(call, GLLMK_ERR_UNSUPPORTED,
                   "vulkan: %s %lld does not fit the 32-bit indices of the kernels", what,
                   (long long)value);
    return 0;
  }
  return (uint32_t)value;
}

uint32_t vk_call_stride(vk_call *call, const gllmk_tensor *t, int32_t dim) {
  return t->shape[dim] == 1 ? 0 : vk_call_u32(call, t->strides[dim], "a stride");
}

/* Binds bytes [offset, offset + size) of `mem` to `slot` from the offset
 * rounded down to the device alignment; returns that rounded offset. */
static uint64_t vk_call_bind_range(vk_call *call, uint32_t slot, VkBuffer buffer,
                                   uint64_t buffer_size, uint64_t offset, uint64_t size) {
  const VkPhysicalDeviceLimits *lim = &call->dev->phys->limits;
  uint64_t align = lim->minStorageBufferOffsetAlignment ? lim->minStorageBufferOffsetAlignment : 1;
  uint64_t base = offset - offset % align;
  uint64_t range = (offset - base + size + 3) & ~(uint64_t)3;
  /* A dry run (supports) has not grown the scratch space to what the call
   * would: its binding keeps the range the call would bind. */
  int unsized = call->dev->dry_run && buffer == call->dev->scratch.buffer;
  if (!unsized && range > buffer_size - base) range = buffer_size - base;
  if (range > lim->maxStorageBufferRange)
    vk_call_failed(call, GLLMK_ERR_UNSUPPORTED,
                   "vulkan: a tensor spanning %llu bytes exceeds this device's "
                   "maxStorageBufferRange (%u)",
                   (unsigned long long)range, lim->maxStorageBufferRange);
  call->bindings[slot] = (VkDescriptorBufferInfo){buffer, base, range};
  return base;
}

uint32_t vk_call_tensor(vk_call *call, uint32_t slot, const gllmk_tensor *t) {
  gllmk_plugin_memory *mem = gllmk_plugin_tensor_memory(t);
  uint64_t esize = gllmk_plugin_dtype_size(t->dtype);
  uint64_t span = 1; /* elements from the first to one past the last */
  for (int32_t i = 0; i < t->ndim; i++)
    span += (uint64_t)(t->shape[i] - 1) * (uint64_t)t->strides[i];
  uint64_t base = vk_call_bind_range(call, slot, mem->buffer, mem->size, t->offset, span * esize);
  return vk_call_u32(call, (int64_t)((t->offset - base) / esize), "a tensor offset");
}

void vk_call_memory(vk_call *call, uint32_t slot, gllmk_plugin_memory *mem, uint64_t offset,
                    uint64_t size) {
  vk_call_bind_range(call, slot, mem->buffer, mem->size, offset, size);
}

static gllmk_status vk_descriptor_set(gllmk_plugin_device *dev, vk_frame **frame,
                                      VkDescriptorSet *out) {
  gllmk_status s = vk_frame_get(dev, frame);
  if (s == GLLMK_OK && (*frame)->sets_used == VK_FRAME_SETS) {
    s = vk_submit(dev); /* this frame's pool is used up: move to the next frame */
    if (s == GLLMK_OK) s = vk_frame_get(dev, frame);
  }
  if (s != GLLMK_OK) return s;
  VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                    .descriptorPool = (*frame)->descriptor_pool,
                                    .descriptorSetCount = 1,
                                    .pSetLayouts = &dev->set_layout};
  VkResult r = dev->fn.vkAllocateDescriptorSets(dev->device, &ai, out);
  if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateDescriptorSets");
  (*frame)->sets_used++;
  return GLLMK_OK;
}

static uint32_t vk_clamp_groups(uint64_t groups, uint32_t limit) {
  return groups > limit ? limit : (uint32_t)groups;
}

gllmk_status vk_call_run(vk_call *call, const void *push, uint32_t push_size, uint64_t groups_x,
                         uint64_t groups_y, uint64_t groups_z) {
  gllmk_plugin_device *dev = call->dev;
  if (call->status != GLLMK_OK) return vk_host->fail(call->status, "%s", call->message);
  if (dev->dry_run) return GLLMK_OK; /* supports(): the launch would be accepted */
  VkPipeline pipeline;
  gllmk_status s = vk_pipeline_get(dev, &call->key, &pipeline);
  if (s != GLLMK_OK) return s;
  /* Into the frame being recorded, or while capturing into the recording's
   * command buffer, with a descriptor set the recording owns. */
  vk_frame *frame = NULL;
  VkDescriptorSet set;
  VkCommandBuffer cmd;
  if (dev->capture) {
    s = vk_capture_set(dev, call->bindings, &set);
    cmd = dev->capture->cmd;
  } else {
    s = vk_descriptor_set(dev, &frame, &set);
    cmd = frame ? frame->cmd : VK_NULL_HANDLE;
  }
  if (s != GLLMK_OK) return s;

  VkDescriptorBufferInfo infos[VK_BINDINGS];
  memcpy(infos, call->bindings, sizeof call->bindings);
  infos[VK_ERROR_BINDING] = (VkDescriptorBufferInfo){dev->error_word.buffer, 0, VK_WHOLE_SIZE};
  /* One write covers the consecutive bindings 0..10. */
  VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                            .dstSet = set,
                            .dstBinding = 0,
                            .descriptorCount = VK_BINDINGS,
                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                            .pBufferInfo = infos};
  dev->fn.vkUpdateDescriptorSets(dev->device, 1, &w, 0, NULL);

  const uint32_t *max = dev->phys->limits.maxComputeWorkGroupCount;
  if (frame) vk_cmd_order(dev, frame);
  else vk_cmd_barrier(dev, cmd);
  dev->fn.vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
  dev->fn.vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, dev->pipeline_layout, 0, 1,
                                  &set, 0, NULL);
  dev->fn.vkCmdPushConstants(cmd, dev->pipeline_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size,
                             push);
  dev->fn.vkCmdDispatch(cmd, vk_clamp_groups(groups_x, max[0]), vk_clamp_groups(groups_y, max[1]),
                        vk_clamp_groups(groups_z, max[2]));
  return frame ? vk_command_recorded(dev, frame) : GLLMK_OK;
}
