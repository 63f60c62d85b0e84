/*
 * device.c - a device (one per context): memory pools, the executable
 * made from the agent's code object, the queue, signals, and memory.
 *
 * Memory: buffers and the kernels' error word come from the GPU's
 * coarse-grained global pool (device memory); kernel arguments from the
 * CPU's kernarg pool; the staging buffer for transfers from the CPU's
 * fine-grained pool. Each host allocation is made accessible to the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ------------------------------------------------------------ pools */

static int pool_is(hsa_amd_memory_pool_t pool, uint32_t flag) {
  hsa_amd_segment_t segment;
  uint32_t flags = 0;
  bool allowed = false;
  if (hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) !=
          HSA_STATUS_SUCCESS ||
      segment != HSA_AMD_SEGMENT_GLOBAL)
    return 0;
  hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed);
  return allowed && (flags & flag) != 0;
}

typedef struct pool_search {
  uint32_t flag;
  hsa_amd_memory_pool_t pool;
  int found;
} pool_search;

static hsa_status_t match_pool(hsa_amd_memory_pool_t pool, void *data) {
  pool_search *search = data;
  if (!pool_is(pool, search->flag)) return HSA_STATUS_SUCCESS;
  search->pool = pool;
  search->found = 1;
  return HSA_STATUS_INFO_BREAK;
}

static int find_pool(hsa_agent_t agent, uint32_t flag, hsa_amd_memory_pool_t *out) {
  pool_search search = {.flag = flag};
  hsa.hsa_amd_agent_iterate_memory_pools(agent, match_pool, &search);
  if (search.found) *out = search.pool;
  return search.found;
}

/* The first CPU agent with both a kernarg pool and a fine-grained pool. */
static hsa_status_t match_cpu(hsa_agent_t agent, void *data) {
  gllmk_plugin_device *d = data;
  hsa_device_type_t type;
  if (hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS ||
      type != HSA_DEVICE_TYPE_CPU)
    return HSA_STATUS_SUCCESS;
  if (!find_pool(agent, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, &d->kernarg_pool) ||
      !find_pool(agent, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, &d->host_pool))
    return HSA_STATUS_SUCCESS;
  d->cpu_agent = agent;
  return HSA_STATUS_INFO_BREAK;
}

static gllmk_status find_pools(gllmk_plugin_device *d) {
  if (!find_pool(d->gpu->agent, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, &d->device_pool))
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa: %s has no coarse-grained memory pool",
                         d->gpu->info.name);
  if (hsa.hsa_iterate_agents(match_cpu, d) != HSA_STATUS_INFO_BREAK)
    return gk_host->fail(GLLMK_ERR_BACKEND,
                         "hsa: no CPU agent with kernarg and fine-grained memory pools");
  return GLLMK_OK;
}

/* Host memory from `pool` that the GPU may access. */
static gllmk_status host_alloc(gllmk_plugin_device *d, hsa_amd_memory_pool_t pool, size_t size,
                               void **out) {
  hsa_status_t status = hsa.hsa_amd_memory_pool_allocate(pool, size, 0, out);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_amd_memory_pool_allocate (host)", status);
  status = hsa.hsa_amd_agents_allow_access(1, &d->gpu->agent, NULL, *out);
  if (status != HSA_STATUS_SUCCESS) {
    hsa.hsa_amd_memory_pool_free(*out);
    *out = NULL;
    return hsa_fail("hsa_amd_agents_allow_access", status);
  }
  return GLLMK_OK;
}

/* ------------------------------------------------------------ kernels */

static gllmk_status load_executable(gllmk_plugin_device *d) {
  const hsa_gpu *gpu = d->gpu;
  const hsa_code_object *co = hsa_code_object_for_isa(gpu->isa);
  if (co == NULL) {
    char targets[128];
    hsa_code_object_targets(targets, sizeof targets);
    return gk_host->fail(GLLMK_ERR_UNSUPPORTED, "hsa: no code object for ISA %s (this build has %s)",
                         gpu->isa, targets);
  }
  hsa_status_t status = hsa.hsa_code_object_reader_create_from_memory(
      co->begin, hsa_code_object_size(co), &d->reader);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_code_object_reader_create_from_memory", status);
  d->has_reader = 1;
  hsa_profile_t profile;
  hsa.hsa_agent_get_info(gpu->agent, HSA_AGENT_INFO_PROFILE, &profile);
  status = hsa.hsa_executable_create_alt(profile, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL,
                                         &d->executable);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_executable_create_alt", status);
  d->has_executable = 1;
  status = hsa.hsa_executable_load_agent_code_object(d->executable, gpu->agent, d->reader, NULL, NULL);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_executable_load_agent_code_object", status);
  status = hsa.hsa_executable_freeze(d->executable, NULL);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_executable_freeze", status);
  return GLLMK_OK;
}

/* Looks up "<symbol>.kd" of every kernel in the table. */
static gllmk_status find_kernels(gllmk_plugin_device *d) {
  uint32_t largest = 0;
  for (int i = 0; i < GK_KERNEL_COUNT; i++) {
    const gk_kernel_info *info = &gk_kernels[i];
    hsa_kernel *k = &d->kernels[i];
    char name[96];
    snprintf(name, sizeof name, "%s.kd", info->symbol);
    hsa_executable_symbol_t symbol;
    hsa_status_t status =
        hsa.hsa_executable_get_symbol_by_name(d->executable, name, &d->gpu->agent, &symbol);
    if (status != HSA_STATUS_SUCCESS)
      return gk_host->fail(GLLMK_ERR_INTERNAL, "hsa: the code object for %s lacks kernel %s",
                           d->gpu->code_object->target, name);
    hsa.hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &k->object);
    hsa.hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE,
                                       &k->kernarg_size);
    hsa.hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE,
                                       &k->group_size);
    hsa.hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE,
                                       &k->private_size);
    if (k->kernarg_size < gk_kernarg_size(info))
      return gk_host->fail(GLLMK_ERR_INTERNAL,
                           "hsa: kernel %s takes %u bytes of arguments but the host writes %u",
                           name, k->kernarg_size, gk_kernarg_size(info));
    if (k->kernarg_size > largest) largest = k->kernarg_size;
  }
  d->kernarg_slot = (largest + 63u) & ~63u; /* slots 64-byte aligned */
  return GLLMK_OK;
}

/* ------------------------------------------------------------ queue */

static void queue_error(hsa_status_t status, hsa_queue_t *queue, void *data) {
  (void)queue;
  gllmk_plugin_device *d = data;
  d->queue_error = status;
}

static gllmk_status create_queue(gllmk_plugin_device *d) {
  uint32_t max_size = 0;
  hsa.hsa_agent_get_info(d->gpu->agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &max_size);
  uint32_t size = max_size < HSA_QUEUE_SIZE ? max_size : HSA_QUEUE_SIZE; /* powers of two */
  hsa_status_t status = hsa.hsa_queue_create(d->gpu->agent, size, HSA_QUEUE_TYPE_SINGLE,
                                             queue_error, d, UINT32_MAX, UINT32_MAX, &d->queue);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_queue_create", status);
  status = hsa.hsa_signal_create(0, 0, NULL, &d->pending);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_signal_create", status);
  d->has_pending = 1;
  status = hsa.hsa_signal_create(0, 0, NULL, &d->copy_done);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_signal_create", status);
  d->has_copy_done = 1;
  return GLLMK_OK;
}

static gllmk_status allocate_host_areas(gllmk_plugin_device *d) {
  gllmk_status status = host_alloc(d, d->kernarg_pool, (size_t)d->queue->size * d->kernarg_slot,
                                   (void **)&d->kernargs);
  if (status == GLLMK_OK)
    status = host_alloc(d, d->host_pool, HSA_STAGING_BYTES, (void **)&d->staging);
  return status;
}

/* ------------------------------------------------------------ open, close */

/* Frees whatever exists; used by close and by a failed open. */
static void release_device(gllmk_plugin_device *d) {
  if (d->error_word) hsa.hsa_amd_memory_pool_free(d->error_word);
  if (d->staging) hsa.hsa_amd_memory_pool_free(d->staging);
  if (d->kernargs) hsa.hsa_amd_memory_pool_free(d->kernargs);
  if (d->has_copy_done) hsa.hsa_signal_destroy(d->copy_done);
  if (d->has_pending) hsa.hsa_signal_destroy(d->pending);
  if (d->queue) hsa.hsa_queue_destroy(d->queue);
  if (d->has_executable) hsa.hsa_executable_destroy(d->executable);
  if (d->has_reader) hsa.hsa_code_object_reader_destroy(d->reader);
  free(d);
}

gllmk_status hsa_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out_device) {
  if (options->device_index >= hsa_gpu_count)
    return gk_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "hsa: no device %u (%u found)",
                         options->device_index, hsa_gpu_count);
  gllmk_plugin_device *d = calloc(1, sizeof *d);
  if (d == NULL) return gk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "hsa: out of host memory");
  d->gpu = &hsa_gpus[options->device_index];
  d->queue_error = HSA_STATUS_SUCCESS;
  gllmk_status status = find_pools(d);
  if (status == GLLMK_OK) status = load_executable(d);
  if (status == GLLMK_OK) status = find_kernels(d);
  if (status == GLLMK_OK) status = create_queue(d);
  if (status == GLLMK_OK) status = allocate_host_areas(d);
  gllmk_plugin_memory *error_word = NULL;
  if (status == GLLMK_OK) status = hsa_mem_alloc(d, GK_ERROR_WORDS * sizeof(uint32_t), &error_word);
  d->error_word = error_word;
  if (status == GLLMK_OK) /* zeroed by the first packet, before any op */
    status = gk_mem_fill(d, error_word, 0, GK_ERROR_WORDS * sizeof(uint32_t), 0);
  if (status != GLLMK_OK) {
    release_device(d);
    return status;
  }
  *out_device = d;
  return GLLMK_OK;
}

void hsa_close(gllmk_plugin_device *d) {
  (void)hsa_wait_idle(d); /* a failed queue has nothing left to wait for */
  release_device(d);
}

/* ------------------------------------------------------------ memory */

gllmk_status hsa_mem_alloc(gllmk_plugin_device *d, uint64_t size, gllmk_plugin_memory **out_memory) {
  void *address = NULL;
  hsa_status_t status = hsa.hsa_amd_memory_pool_allocate(d->device_pool, (size_t)size, 0, &address);
  if (status == HSA_STATUS_ERROR_OUT_OF_RESOURCES || status == HSA_STATUS_ERROR_INVALID_ALLOCATION)
    return gk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "hsa: cannot allocate %llu bytes on %s",
                         (unsigned long long)size, d->gpu->info.name);
  if (status != HSA_STATUS_SUCCESS) return hsa_fail("hsa_amd_memory_pool_allocate", status);
  *out_memory = address;
  return GLLMK_OK;
}

void hsa_mem_free(gllmk_plugin_device *d, gllmk_plugin_memory *memory) {
  (void)hsa_wait_idle(d); /* queued kernels may still use it */
  hsa.hsa_amd_memory_pool_free(memory);
}
