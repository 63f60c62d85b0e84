/*
 * runtime.c - loading the HSA runtime and finding GPU agents (probe,
 * device_info, describe).
 *
 * The runtime is opened once with dlopen and stays loaded: the ROCm runtime
 * is not meant to be unloaded, and a later probe reuses it. hsa_init is
 * called once; it is shut down again when no usable GPU was found.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

hsa_api hsa;
const gllmk_plugin_host *gk_host;

hsa_gpu hsa_gpus[HSA_MAX_AGENTS];
uint32_t hsa_gpu_count;

static void *library;
static int runtime_up; /* hsa_init succeeded and GPUs were found */
/* GPU agents seen by the last probe that have no code object here. */
static char skipped[256];

const char *hsa_status_name(hsa_status_t status, char *buffer, size_t size) {
  const char *text = NULL;
  if (hsa.hsa_status_string == NULL || hsa.hsa_status_string(status, &text) != HSA_STATUS_SUCCESS ||
      text == NULL) {
    snprintf(buffer, size, "HSA status 0x%x", (unsigned)status);
    return buffer;
  }
  snprintf(buffer, size, "%.*s", (int)strcspn(text, ":"), text);
  return buffer;
}

gllmk_status hsa_fail(const char *call, hsa_status_t status) {
  char name[96];
  gllmk_status code = status == HSA_STATUS_ERROR_OUT_OF_RESOURCES ? GLLMK_ERR_OUT_OF_MEMORY
                                                                   : GLLMK_ERR_BACKEND;
  return gk_host->fail(code, "hsa: %s: %s", call, hsa_status_name(status, name, sizeof name));
}

/* dlopen + dlsym of every function in symbols.def. */
static int load_library(char *reason, size_t reason_size) {
  if (library) return 1;
  void *handle = dlopen(HSA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char *why = dlerror();
    snprintf(reason, reason_size, "%s", why ? why : HSA_LIBRARY ": cannot be loaded");
    return 0;
  }
  hsa_api api;
#define HSA_SYMBOL(name)                                                               \
  *(void **)&api.name = dlsym(handle, #name);                                          \
  if (api.name == NULL) {                                                              \
    snprintf(reason, reason_size, "%s lacks %s (HSA runtime too old)", HSA_LIBRARY, #name); \
    dlclose(handle);                                                                   \
    return 0;                                                                          \
  }
#include "symbols.def"
  hsa = api;
  library = handle;
  return 1;
}

/* ------------------------------------------------------------ agents */

static hsa_status_t first_isa(hsa_isa_t isa, void *data) {
  char *name = data;
  uint32_t length = 0;
  if (hsa.hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME_LENGTH, &length) != HSA_STATUS_SUCCESS ||
      length >= 64)
    return HSA_STATUS_SUCCESS;
  if (hsa.hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name) != HSA_STATUS_SUCCESS) return HSA_STATUS_SUCCESS;
  name[length] = '\0';
  return HSA_STATUS_INFO_BREAK;
}

/* Size of the agent's coarse-grained global pool (its device memory). */
static hsa_status_t device_memory_size(hsa_amd_memory_pool_t pool, void *data) {
  hsa_amd_segment_t segment;
  uint32_t flags = 0;
  size_t size = 0;
  if (hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment) !=
          HSA_STATUS_SUCCESS ||
      segment != HSA_AMD_SEGMENT_GLOBAL)
    return HSA_STATUS_SUCCESS;
  hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  if (!(flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED)) return HSA_STATUS_SUCCESS;
  hsa.hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size);
  *(uint64_t *)data = size;
  return HSA_STATUS_INFO_BREAK;
}

static void describe_gpu(hsa_gpu *gpu) {
  gllmk_device_info *info = &gpu->info;
  memset(info, 0, sizeof *info);
  char product[64] = "", agent_name[64] = "", uuid[24] = "";
  hsa.hsa_agent_get_info(gpu->agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_PRODUCT_NAME, product);
  hsa.hsa_agent_get_info(gpu->agent, HSA_AGENT_INFO_NAME, agent_name);
  hsa.hsa_agent_get_info(gpu->agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID, uuid);
  product[sizeof product - 1] = agent_name[sizeof agent_name - 1] = uuid[sizeof uuid - 1] = '\0';
  snprintf(info->name, sizeof info->name, "%s", product[0] ? product : agent_name);
  snprintf(info->arch, sizeof info->arch, "%s", gpu->code_object->target);
  snprintf(info->uuid, sizeof info->uuid, "%s", uuid);
  uint16_t major = 0, minor = 0;
  hsa.hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major);
  hsa.hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MINOR, &minor);
  snprintf(info->driver, sizeof info->driver, "HSA runtime %u.%u", major, minor);
  hsa.hsa_agent_get_info(gpu->agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT,
                         &info->compute_units);
  hsa.hsa_amd_agent_iterate_memory_pools(gpu->agent, device_memory_size, &info->memory_bytes);
}

typedef struct agent_scan {
  uint32_t gpus_seen;
} agent_scan;

/* Keeps each GPU agent that has a code object here; names the others. */
static hsa_status_t visit_agent(hsa_agent_t agent, void *data) {
  agent_scan *scan = data;
  hsa_device_type_t type;
  if (hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS ||
      type != HSA_DEVICE_TYPE_GPU)
    return HSA_STATUS_SUCCESS;
  scan->gpus_seen++;
  char isa[64] = "";
  hsa.hsa_agent_iterate_isas(agent, first_isa, isa);
  const hsa_code_object *code_object = hsa_code_object_for_isa(isa);
  if (code_object == NULL) {
    size_t used = strlen(skipped);
    snprintf(skipped + used, sizeof skipped - used, "%s%s", used ? ", " : "",
             isa[0] ? isa : "(no ISA name)");
    return HSA_STATUS_SUCCESS;
  }
  if (hsa_gpu_count == HSA_MAX_AGENTS) return HSA_STATUS_SUCCESS;
  hsa_gpu *gpu = &hsa_gpus[hsa_gpu_count++];
  gpu->agent = agent;
  gpu->code_object = code_object;
  snprintf(gpu->isa, sizeof gpu->isa, "%s", isa);
  describe_gpu(gpu);
  return HSA_STATUS_SUCCESS;
}

gllmk_status hsa_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                              size_t reason_size) {
  gk_host = host;
  *out_count = 0;
  if (!load_library(reason, reason_size)) return GLLMK_OK;
  if (runtime_up) { /* a later scan: the agents do not change */
    *out_count = hsa_gpu_count;
    return GLLMK_OK;
  }
  hsa_status_t status = hsa.hsa_init();
  if (status != HSA_STATUS_SUCCESS) {
    char name[96];
    snprintf(reason, reason_size, "hsa_init failed: %s%s",
             hsa_status_name(status, name, sizeof name),
             access("/dev/kfd", F_OK) != 0 ? " (no /dev/kfd: the amdgpu kernel driver is not loaded)"
                                           : "");
    return GLLMK_OK;
  }
  agent_scan scan = {0};
  hsa_gpu_count = 0;
  skipped[0] = '\0';
  hsa.hsa_iterate_agents(visit_agent, &scan);
  if (hsa_gpu_count == 0) {
    char targets[128];
    hsa_code_object_targets(targets, sizeof targets);
    if (scan.gpus_seen == 0)
      snprintf(reason, reason_size, "the HSA runtime found no GPU agent");
    else
      snprintf(reason, reason_size, "no code object for this GPU: %s (this build has %s)", skipped,
               targets);
    hsa.hsa_shut_down();
    return GLLMK_OK;
  }
  runtime_up = 1;
  *out_count = hsa_gpu_count;
  return GLLMK_OK;
}

gllmk_status hsa_device_info(uint32_t index, gllmk_device_info *out_info) {
  if (index >= hsa_gpu_count)
    return gk_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "hsa: no device %u", index);
  *out_info = hsa_gpus[index].info;
  return GLLMK_OK;
}

void hsa_describe(char *text, size_t text_size) {
  char targets[128];
  hsa_code_object_targets(targets, sizeof targets);
  int n = snprintf(text, text_size,
                   "code objects for %s (clang-16, code object v4); NOT TESTED ON AMD HARDWARE: "
                   "the HSA host path has never run on an AMD GPU; its kernels were tested on "
                   "the CPU through PoCL and its code objects checked offline",
                   targets);
  if (skipped[0] && n > 0 && (size_t)n < text_size)
    snprintf(text + n, text_size - (size_t)n, "; GPUs without a code object here: %s", skipped);
}
