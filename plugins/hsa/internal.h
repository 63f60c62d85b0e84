/*
 * internal.h - the HSA runtime backend's shared declarations (runtime.c,
 * device.c, dispatch.c, plugin.c); the op code (ops.h, launch.h) does not
 * see them.
 *
 * The plugin loads libhsa-runtime64.so.1 with dlopen and uses the HSA
 * runtime only: agents and their ISAs, AMD memory pools, code objects
 * loaded from memory into a frozen executable, AQL kernel-dispatch packets
 * on a user-mode queue, and signals. A gllmk_plugin_memory * is a device
 * address in the GPU's coarse-grained pool.
 */
#ifndef GLLMK_HSA_INTERNAL_H_
#define GLLMK_HSA_INTERNAL_H_

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdint.h>

#include "backend.h"
#include "code_objects.h"

/* The runtime's functions, filled by hsa_runtime_load(). */
typedef struct hsa_api {
#define HSA_SYMBOL(name) __typeof__(name) *name;
#include "symbols.def"
} hsa_api;
extern hsa_api hsa;

#define HSA_LIBRARY "libhsa-runtime64.so.1"
#define HSA_MAX_AGENTS 16
/* Host <-> device transfers go through a pinned buffer of this size. */
#define HSA_STAGING_BYTES ((size_t)8 << 20)
/* Queue entries (and kernel-argument slots), at most. */
#define HSA_QUEUE_SIZE 1024u

/* A GPU agent found by probe that has a code object here. */
typedef struct hsa_gpu {
  hsa_agent_t agent;
  const hsa_code_object *code_object;
  char isa[64];  /* "amdgcn-amd-amdhsa--gfx1100" */
  gllmk_device_info info;
} hsa_gpu;

extern hsa_gpu hsa_gpus[HSA_MAX_AGENTS];
extern uint32_t hsa_gpu_count;

/* "HSA_STATUS_ERROR_...": the runtime's text for a status, up to its ':' */
const char *hsa_status_name(hsa_status_t status, char *buffer, size_t size);

/* Fails with GLLMK_ERR_BACKEND naming the call and the runtime's status. */
gllmk_status hsa_fail(const char *call, hsa_status_t status);

/* Kernel symbols of a device's executable. */
typedef struct hsa_kernel {
  uint64_t object;
  uint32_t kernarg_size, group_size, private_size;
} hsa_kernel;

struct gllmk_plugin_device {
  const hsa_gpu *gpu;
  hsa_agent_t cpu_agent;
  hsa_amd_memory_pool_t device_pool, host_pool, kernarg_pool;
  hsa_code_object_reader_t reader;
  hsa_executable_t executable;
  int has_reader, has_executable;
  hsa_kernel kernels[GK_KERNEL_COUNT];
  hsa_queue_t *queue;
  /* Counts dispatched packets that have not completed: +1 when a packet is
   * written, -1 by the packet processor when it completes. */
  hsa_signal_t pending;
  hsa_signal_t copy_done;
  int has_pending, has_copy_done;
  /* Kernel arguments: one slot per queue entry, in the kernarg pool. */
  unsigned char *kernargs;
  uint32_t kernarg_slot;
  /* Host <-> device transfers go through this fine-grained staging area. */
  unsigned char *staging;
  /* The kernels' error word (GK_ERROR_WORDS), in device memory: atomics
   * on host memory would need PCIe atomics. */
  void *error_word;
  /* Set by the queue's error callback. */
  volatile hsa_status_t queue_error;
};

/* runtime.c */
gllmk_status hsa_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                       size_t reason_size);
gllmk_status hsa_device_info(uint32_t index, gllmk_device_info *out_info);
void hsa_describe(char *text, size_t text_size);

/* dispatch.c: until no packet is pending (or the queue failed). */
gllmk_status hsa_wait_idle(gllmk_plugin_device *device);

/* device.c, dispatch.c */
gllmk_status hsa_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out_device);
void hsa_close(gllmk_plugin_device *device);
gllmk_status hsa_synchronize(gllmk_plugin_device *device);
gllmk_status hsa_mem_alloc(gllmk_plugin_device *device, uint64_t size,
                           gllmk_plugin_memory **out_memory);
void hsa_mem_free(gllmk_plugin_device *device, gllmk_plugin_memory *memory);
gllmk_status hsa_mem_write(gllmk_plugin_device *device, gllmk_plugin_memory *dst, uint64_t offset,
                           const void *src, uint64_t size);
gllmk_status hsa_mem_read(gllmk_plugin_device *device, gllmk_plugin_memory *src, uint64_t offset,
                          void *dst, uint64_t size);

#endif /* GLLMK_HSA_INTERNAL_H_ */
