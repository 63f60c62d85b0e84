/*
 * metal_plugin.c - gllmk-metal.so: the Metal backend's place in the ranking
 * (CUDA > ROCm > Metal > Vulkan > CPU).
 *
 * Metal exists only on Apple platforms. On this platform the plugin loads,
 * is listed by gllmk-info with its reason, and finds no device; it has no
 * kernels, every op slot is NULL, and the device functions refuse to run
 * (the core never calls them, as probe reports no device). docs/metal.md
 * describes what a macOS build has to add.
 *
 * Op families (elementwise, norm, rope, gather, matmul, attention, sample):
 * all absent, no family files: no device on Linux (docs/metal.md).
 */
#include <stdio.h>

#include "gllmk/gllmk_plugin.h"

#define METAL_UNAVAILABLE "Metal is not available on this platform"

static const gllmk_plugin_host *host;

static gllmk_status metal_probe(const gllmk_plugin_host *h, uint32_t *out_count, char *reason,
                                size_t reason_size) {
  host = h;
  *out_count = 0;
  snprintf(reason, reason_size, "%s", METAL_UNAVAILABLE);
  return GLLMK_OK;
}

static gllmk_status metal_device_info(uint32_t index, gllmk_device_info *out_info) {
  (void)out_info;
  return host->fail(GLLMK_ERR_INVALID_ARGUMENT, "metal: no device %u: %s", index,
                    METAL_UNAVAILABLE);
}

static void metal_describe(char *text, size_t text_size) {
  snprintf(text, text_size, "%s; this build has no Metal kernels (see docs/metal.md)",
           METAL_UNAVAILABLE);
}

static gllmk_status metal_open(const gllmk_plugin_open_options *options,
                               gllmk_plugin_device **out_device) {
  (void)out_device;
  return host->fail(GLLMK_ERR_NO_BACKEND, "metal: cannot open device %u: %s",
                    options->device_index, METAL_UNAVAILABLE);
}

/* No device is ever opened, so none is ever closed, synchronized or given
 * memory; these exist because the ABI requires every device function. */
static void metal_close(gllmk_plugin_device *device) { (void)device; }

static gllmk_status metal_no_device(void) {
  return host->fail(GLLMK_ERR_INTERNAL, "metal: called without a device: %s", METAL_UNAVAILABLE);
}

static gllmk_status metal_synchronize(gllmk_plugin_device *device) {
  (void)device;
  return metal_no_device();
}

static gllmk_status metal_mem_alloc(gllmk_plugin_device *device, uint64_t size,
                                    gllmk_plugin_memory **out_memory) {
  (void)device, (void)size, (void)out_memory;
  return metal_no_device();
}

static void metal_mem_free(gllmk_plugin_device *device, gllmk_plugin_memory *memory) {
  (void)device, (void)memory;
}

static gllmk_status metal_mem_write(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                    uint64_t offset, const void *src, uint64_t size) {
  (void)device, (void)dst, (void)offset, (void)src, (void)size;
  return metal_no_device();
}

static gllmk_status metal_mem_read(gllmk_plugin_device *device, gllmk_plugin_memory *src,
                                   uint64_t offset, void *dst, uint64_t size) {
  (void)device, (void)src, (void)offset, (void)dst, (void)size;
  return metal_no_device();
}

static gllmk_status metal_mem_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                   uint64_t dst_offset, gllmk_plugin_memory *src,
                                   uint64_t src_offset, uint64_t size) {
  (void)device, (void)dst, (void)dst_offset, (void)src, (void)src_offset, (void)size;
  return metal_no_device();
}

static gllmk_status metal_mem_fill(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                                   uint64_t offset, uint64_t size, uint8_t value) {
  (void)device, (void)dst, (void)offset, (void)size, (void)value;
  return metal_no_device();
}

static const gllmk_plugin metal_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = "metal",
    .kind = GLLMK_BACKEND_METAL,
    .version = "0.1.0",
    .probe = metal_probe,
    .device_info = metal_device_info,
    .describe = metal_describe,
    .open = metal_open,
    .close = metal_close,
    .synchronize = metal_synchronize,
    .mem_alloc = metal_mem_alloc,
    .mem_free = metal_mem_free,
    .mem_write = metal_mem_write,
    .mem_read = metal_mem_read,
    .mem_copy = metal_mem_copy,
    .mem_fill = metal_mem_fill,
    .ops = NULL, /* no kernels: every op is unsupported */
    .ops_size = 0,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &metal_plugin; }
