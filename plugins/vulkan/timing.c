/*
 * timing.c - device timestamps for per-op timing (mark, marks_read).
 *
 * A mark records a query reset and a vkCmdWriteTimestamp at
 * BOTTOM_OF_PIPE into the frame being recorded: the time once everything
 * queued before it has finished. Marks count from 0 after each marks_read;
 * mark i is query i % VK_MARKS_PER_POOL of pool i / VK_MARKS_PER_POOL, pools
 * being added as needed and kept. marks_read waits for the queue, reads the
 * ticks, keeps timestampValidBits of them and scales by timestampPeriod.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void vk_timestamps_init(gllmk_plugin_device *dev) {
  vk_timestamps *t = &dev->timestamps;
  memset(t, 0, sizeof *t);
  int missing = 0;
#define VK_TIMESTAMP_RESOLVE(n) \
  missing |= !(t->n = (PFN_##n)vk_api.vkGetDeviceProcAddr(dev->device, #n));
  VK_TIMESTAMP_SYMBOLS(VK_TIMESTAMP_RESOLVE)
#undef VK_TIMESTAMP_RESOLVE
  VkQueueFamilyProperties families[64];
  uint32_t family_count = 64;
  vk_api.vkGetPhysicalDeviceQueueFamilyProperties(dev->phys->handle, &family_count, families);
  uint32_t bits = dev->phys->queue_family < family_count
                      ? families[dev->phys->queue_family].timestampValidBits
                      : 0;
  t->period = dev->phys->limits.timestampPeriod;
  t->mask = bits >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << bits) - 1;
  t->usable = !missing && bits > 0 && t->period > 0.0;
}

void vk_timestamps_destroy(gllmk_plugin_device *dev) {
  vk_timestamps *t = &dev->timestamps;
  for (uint32_t i = 0; i < t->pool_count; i++)
    t->vkDestroyQueryPool(dev->device, t->pools[i], NULL);
  free(t->pools);
  t->pools = NULL;
  t->pool_count = 0;
}

gllmk_status vk_mark(gllmk_plugin_device *dev, uint32_t *out_id) {
  vk_timestamps *t = &dev->timestamps;
  if (!t->usable)
    return vk_host->fail(GLLMK_ERR_UNSUPPORTED,
                         "vulkan: this device's compute queue has no timestamps "
                         "(timestampValidBits 0)");
  if (dev->capture)
    return vk_host->fail(GLLMK_ERR_UNSUPPORTED, "vulkan: no timestamps inside a recording");
  uint32_t id = t->marks, pool = id / VK_MARKS_PER_POOL, query = id % VK_MARKS_PER_POOL;
  if (pool >= t->pool_count) {
    VkQueryPool *grown = realloc(t->pools, (size_t)(t->pool_count + 1) * sizeof *grown);
    if (!grown) return vk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "vulkan: out of host memory");
    t->pools = grown;
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = VK_MARKS_PER_POOL};
    VkResult r = t->vkCreateQueryPool(dev->device, &qi, NULL, &t->pools[t->pool_count]);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateQueryPool");
    t->pool_count++;
  }
  vk_frame *f;
  gllmk_status s = vk_frame_get(dev, &f);
  if (s != GLLMK_OK) return s;
  t->vkCmdResetQueryPool(f->cmd, t->pools[pool], query, 1);
  t->vkCmdWriteTimestamp(f->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, t->pools[pool], query);
  t->marks++;
  *out_id = id;
  return GLLMK_OK;
}

/* Ticks to nanoseconds: period = whole + fraction, so that a tick count of
 * 64 bits keeps its precision where period is a whole number (1 on NVIDIA). */
static uint64_t vk_ticks_ns(const vk_timestamps *t, uint64_t ticks) {
  ticks &= t->mask;
  uint64_t whole = (uint64_t)t->period;
  double fraction = t->period - (double)whole;
  return ticks * whole + (uint64_t)((double)ticks * fraction);
}

gllmk_status vk_marks_read(gllmk_plugin_device *dev, uint32_t count, uint64_t *out_ns) {
  vk_timestamps *t = &dev->timestamps;
  if (count > t->marks)
    return vk_host->fail(GLLMK_ERR_INTERNAL, "vulkan: %u marks asked for, %u made", count,
                         t->marks);
  t->marks = 0;
  gllmk_status s = vk_wait_idle(dev);
  if (s != GLLMK_OK) return s;
  for (uint32_t first = 0; first < count; first += VK_MARKS_PER_POOL) {
    uint32_t n = count - first < VK_MARKS_PER_POOL ? count - first : VK_MARKS_PER_POOL;
    /* The queue is idle: every query is written, so no WAIT_BIT (which
     * would hang on one that was not). */
    VkResult r = t->vkGetQueryPoolResults(dev->device, t->pools[first / VK_MARKS_PER_POOL], 0, n,
                                          (size_t)n * sizeof *out_ns, out_ns + first,
                                          sizeof *out_ns, VK_QUERY_RESULT_64_BIT);
    if (r != VK_SUCCESS) return vk_fail(r, "vkGetQueryPoolResults");
    for (uint32_t i = 0; i < n; i++) out_ns[first + i] = vk_ticks_ns(t, out_ns[first + i]);
  }
  return GLLMK_OK;
}
