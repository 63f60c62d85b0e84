/*
 * plugin.c - the descriptor and entry point of gllmk-hsa.so (ROCm through
 * the HSA runtime). Probe and device queries live in runtime.c, the device
 * in device.c and dispatch.c, mem_copy/mem_fill in memory.c, and the ops
 * in their family files (ops.h lists them): elementwise.c, norm.c, rope.c,
 * gather.c, matmul.c, attention.c, sample.c.
 */
#include <pthread.h>
#include <stdio.h>

#include "internal.h"
#include "ops.h"

/* hsa_probe (runtime.c) runs once per load of the plugin, under a lock;
 * later probes repeat its answer. It sets gk_host, the runtime's function
 * table and the GPU list, which ops of open devices read without a lock
 * while other threads create contexts and so probe again (issue 20): none
 * of it may be written after the first probe. The agents do not change
 * while the process runs. */
static gllmk_status hsa_probe_once(const gllmk_plugin_host *host, uint32_t *out_count,
                                   char *reason, size_t reason_size) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static int probed;
  static gllmk_status status;
  static uint32_t count;
  static char why[512];
  pthread_mutex_lock(&lock);
  if (!probed) {
    status = hsa_probe(host, &count, why, sizeof why);
    probed = 1;
  }
  *out_count = count;
  if (reason_size) snprintf(reason, reason_size, "%s", why);
  gllmk_status result = status;
  pthread_mutex_unlock(&lock);
  return result;
}

static const gllmk_plugin_ops gk_ops = {
#define GLLMK_OP(name) .name = gk_##name,
#include "gllmk/gllmk_ops.def"
};

static const gllmk_plugin hsa_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = "hsa",
    .kind = GLLMK_BACKEND_ROCM,
    .version = "0.1.0",
    .probe = hsa_probe_once,
    .device_info = hsa_device_info,
    .describe = hsa_describe,
    .open = hsa_open,
    .close = hsa_close,
    .synchronize = hsa_synchronize,
    .mem_alloc = hsa_mem_alloc,
    .mem_free = hsa_mem_free,
    .mem_write = hsa_mem_write,
    .mem_read = hsa_mem_read,
    .mem_copy = gk_mem_copy,
    .mem_fill = gk_mem_fill,
    .ops = &gk_ops,
    .ops_size = sizeof gk_ops,
    .supports = gk_supports,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &hsa_plugin; }
