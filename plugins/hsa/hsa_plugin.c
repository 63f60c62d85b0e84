/*
 * hsa_plugin.c - the descriptor of gllmk-hsa.so (ROCm through the HSA
 * runtime). Probe and device queries live in hsa_runtime.c, the device in
 * hsa_device.c and hsa_dispatch.c, the ops in hsa_ops.c.
 */
#include "hsa_internal.h"

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
    .probe = hsa_probe,
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
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &hsa_plugin; }
