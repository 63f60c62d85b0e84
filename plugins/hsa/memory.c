/*
 * memory.c - the memory layer's mem_copy and mem_fill (raw bytes at byte
 * offsets, not ops) as launches of kernels/memory.cl, for both backends
 * behind backend.h. device.c and dispatch.c use gk_mem_fill to clear the
 * kernels' error word; no op is involved.
 */
#include "launch.h"

gllmk_status gk_mem_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                         uint64_t dst_offset, gllmk_plugin_memory *src, uint64_t src_offset,
                         uint64_t size) {
  gk_bytes_params p = {.dst_off = (int64_t)dst_offset, .src_off = (int64_t)src_offset,
                       .size = (int64_t)size};
  return launch(device, GK_KERNEL_bytes_copy, groups_for((int64_t)size / 8 + 1, GK_WG_ELEMENTWISE),
                1, &p, (gllmk_plugin_memory *[]){dst, src});
}

gllmk_status gk_mem_fill(gllmk_plugin_device *device, gllmk_plugin_memory *dst, uint64_t offset,
                         uint64_t size, uint8_t value) {
  gk_bytes_params p = {.dst_off = (int64_t)offset, .size = (int64_t)size, .value = value};
  return launch(device, GK_KERNEL_bytes_fill, groups_for((int64_t)size / 4 + 1, GK_WG_ELEMENTWISE),
                1, &p, (gllmk_plugin_memory *[]){dst});
}
