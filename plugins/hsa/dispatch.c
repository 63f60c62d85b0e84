/*
 * dispatch.c - kernel launches as AQL kernel-dispatch packets, and
 * waiting for them.
 *
 * Every packet has the barrier bit set, so the packet processor starts it
 * only when all earlier packets have completed: the queue runs in order,
 * as gllmk requires, and packets complete in order. All packets share one
 * completion signal, `pending`, which the host raises by one per packet and
 * the packet processor lowers by one per completion; pending == 0 means
 * idle. Kernel arguments live in a ring of slots, one per queue entry; at
 * most size - 1 packets are pending, so the slot (and the queue entry) of
 * the packet `size` places back has completed before it is reused.
 */
#include <string.h>

#include "internal.h"

/* Wait in slices of this many runtime timestamp ticks (a hint), checking
 * the queue's error state in between. */
#define HSA_WAIT_SLICE 100000000u

/* Until fewer than `limit` packets are pending, or the queue failed. */
static gllmk_status wait_pending_below(gllmk_plugin_device *d, hsa_signal_value_t limit) {
  for (;;) {
    if (d->queue_error != HSA_STATUS_SUCCESS)
      return hsa_fail("the queue stopped (a kernel faulted?)", d->queue_error);
    hsa_signal_value_t value = hsa.hsa_signal_wait_scacquire(
        d->pending, HSA_SIGNAL_CONDITION_LT, limit, HSA_WAIT_SLICE, HSA_WAIT_STATE_BLOCKED);
    if (value < limit) return GLLMK_OK;
  }
}

gllmk_status hsa_wait_idle(gllmk_plugin_device *d) { return wait_pending_below(d, 1); }

gllmk_plugin_memory *gk_backend_error_memory(gllmk_plugin_device *d) {
  return (gllmk_plugin_memory *)(void *)d->error_word;
}

/* The explicit arguments (backend.h): pointers, then the params. */
static void write_kernargs(unsigned char *args, const hsa_kernel *kernel,
                           const gk_kernel_info *info, const gk_launch *launch) {
  memset(args, 0, kernel->kernarg_size); /* hidden arguments, if any, stay 0 */
  for (uint32_t i = 0; i < info->buffers; i++) {
    uint64_t address = (uint64_t)(uintptr_t)launch->buffers[i];
    memcpy(args + 8 * i, &address, sizeof address);
  }
  memcpy(args + gk_params_offset(info), launch->params, info->params_size);
}

gllmk_status gk_backend_launch(gllmk_plugin_device *d, const gk_launch *launch) {
  const gk_kernel_info *info = &gk_kernels[launch->kernel];
  const hsa_kernel *kernel = &d->kernels[launch->kernel];
  uint32_t size = d->queue->size;
  gllmk_status status = wait_pending_below(d, (hsa_signal_value_t)size - 1);
  if (status != GLLMK_OK) return status;

  uint64_t index = hsa.hsa_queue_add_write_index_scacq_screl(d->queue, 1);
  unsigned char *args = d->kernargs + (size_t)(index % size) * d->kernarg_slot;
  write_kernargs(args, kernel, info, launch);

  hsa_kernel_dispatch_packet_t *packet =
      (hsa_kernel_dispatch_packet_t *)d->queue->base_address + (index & (size - 1));
  packet->workgroup_size_x = (uint16_t)info->workgroup_size;
  packet->workgroup_size_y = 1;
  packet->workgroup_size_z = 1;
  packet->reserved0 = 0;
  packet->grid_size_x = launch->groups_x * info->workgroup_size; /* in work-items */
  packet->grid_size_y = launch->groups_y;
  packet->grid_size_z = 1;
  packet->private_segment_size = kernel->private_size;
  packet->group_segment_size = kernel->group_size;
  packet->kernel_object = kernel->object;
  packet->kernarg_address = args;
  packet->reserved2 = 0;
  packet->completion_signal = d->pending;
  hsa.hsa_signal_add_screlease(d->pending, 1);

  /* Publishing the header hands the packet to the packet processor. */
  uint16_t header = (uint16_t)((HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                               (1 << HSA_PACKET_HEADER_BARRIER) |
                               (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                               (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
  uint16_t setup = 2 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
  __atomic_store_n((uint32_t *)packet, header | (uint32_t)setup << 16, __ATOMIC_RELEASE);
  hsa.hsa_signal_store_screlease(d->queue->doorbell_signal, (hsa_signal_value_t)index);
  return GLLMK_OK;
}

/* One transfer with the runtime's copy engine, waited for. */
static gllmk_status copy_and_wait(gllmk_plugin_device *d, void *dst, hsa_agent_t dst_agent,
                                  const void *src, hsa_agent_t src_agent, size_t size) {
  hsa.hsa_signal_store_screlease(d->copy_done, 1);
  hsa_status_t status = hsa.hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, size, 0, NULL,
                                                      d->copy_done);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_amd_memory_async_copy", status);
  while (hsa.hsa_signal_wait_scacquire(d->copy_done, HSA_SIGNAL_CONDITION_LT, 1, HSA_WAIT_SLICE,
                                       HSA_WAIT_STATE_BLOCKED) >= 1) {
    /* a timeout slice or a spurious wake-up: keep waiting */
  }
  return GLLMK_OK;
}

gllmk_status hsa_mem_write(gllmk_plugin_device *d, gllmk_plugin_memory *dst, uint64_t offset,
                           const void *src, uint64_t size) {
  gllmk_status status = hsa_wait_idle(d); /* kernels queued earlier may read dst */
  for (uint64_t done = 0; status == GLLMK_OK && done < size;) {
    size_t n = size - done < HSA_STAGING_BYTES ? (size_t)(size - done) : HSA_STAGING_BYTES;
    memcpy(d->staging, (const unsigned char *)src + done, n);
    status = copy_and_wait(d, (unsigned char *)dst + offset + done, d->gpu->agent, d->staging,
                           d->cpu_agent, n);
    done += n;
  }
  return status;
}

gllmk_status hsa_mem_read(gllmk_plugin_device *d, gllmk_plugin_memory *src, uint64_t offset,
                          void *dst, uint64_t size) {
  gllmk_status status = hsa_wait_idle(d);
  for (uint64_t done = 0; status == GLLMK_OK && done < size;) {
    size_t n = size - done < HSA_STAGING_BYTES ? (size_t)(size - done) : HSA_STAGING_BYTES;
    status = copy_and_wait(d, d->staging, d->cpu_agent, (unsigned char *)src + offset + done,
                           d->gpu->agent, n);
    if (status == GLLMK_OK) memcpy((unsigned char *)dst + done, d->staging, n);
    done += n;
  }
  return status;
}

gllmk_status hsa_synchronize(gllmk_plugin_device *d) {
  uint32_t words[GK_ERROR_WORDS];
  gllmk_status status = hsa_wait_idle(d);
  if (status == GLLMK_OK)
    status = copy_and_wait(d, d->staging, d->cpu_agent, d->error_word, d->gpu->agent, sizeof words);
  if (status != GLLMK_OK) return status;
  memcpy(words, d->staging, sizeof words);
  if (words[0] == 0) return GLLMK_OK;
  status = gk_mem_fill(d, d->error_word, 0, sizeof words, 0); /* ordered before later work */
  if (status != GLLMK_OK) return status;
  char message[256];
  gk_describe_error(words, message, sizeof message);
  return gk_host->fail(GLLMK_ERR_OUT_OF_RANGE, "%s", message);
}
