/*
 * gk_backend.h - the seam between the op code (hsa_ops.c), which turns a
 * validated gllmk op into kernel launches, and the host backend that runs
 * them: the HSA runtime in gllmk-hsa.so, or OpenCL on PoCL in the test-only
 * gllmk-hsa-pocl.so. Both run the same kernels (kernels/gk_kernels.def)
 * with the same arguments.
 */
#ifndef GLLMK_HSA_GK_BACKEND_H_
#define GLLMK_HSA_GK_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "gllmk/gllmk_plugin.h"
#include "kernels/gk_params.h"

typedef enum gk_kernel_id {
#define GK_KERNEL(name, buffers, params, wg, lds) GK_KERNEL_##name,
#include "kernels/gk_kernels.def"
  GK_KERNEL_COUNT
} gk_kernel_id;

/* What the host needs to know about a kernel; the code-object test checks
 * the compiled kernels against the same table. */
typedef struct gk_kernel_info {
  const char *symbol;      /* "gk_add_f32" */
  uint32_t buffers;        /* global pointer arguments, first */
  uint32_t params_size;    /* then the params struct, by value */
  uint32_t workgroup_size; /* work-items, 1-D */
} gk_kernel_info;

extern const gk_kernel_info gk_kernels[GK_KERNEL_COUNT];

/* Explicit kernel arguments: the pointers at offsets 0, 8, ..., then the
 * params struct at the next multiple of 8 (all its fields are at most
 * 8-byte aligned). */
static inline uint32_t gk_params_offset(const gk_kernel_info *k) { return 8u * k->buffers; }
static inline uint32_t gk_kernarg_size(const gk_kernel_info *k) {
  return gk_params_offset(k) + k->params_size;
}

#define GK_MAX_BUFFERS 8

/* One kernel launch: groups_x x groups_y work-groups of the kernel's size
 * (the grid in work-items is that times workgroup_size in x). A NULL buffer
 * is passed as a null pointer (an optional tensor that is absent). */
typedef struct gk_launch {
  gk_kernel_id kernel;
  uint32_t groups_x, groups_y;
  gllmk_plugin_memory *buffers[GK_MAX_BUFFERS];
  const void *params;
} gk_launch;

/* ---------------------------------------------- provided by the backend */

/* The host table given to probe; set before any op runs. */
extern const gllmk_plugin_host *gk_host;

/* Enqueues a launch after all work queued before it. */
gllmk_status gk_backend_launch(gllmk_plugin_device *device, const gk_launch *launch);

/* The device's error word (GK_ERROR_WORDS 32-bit words), passed to the
 * kernels that check ids, slots and tables read from device memory. */
gllmk_plugin_memory *gk_backend_error_memory(gllmk_plugin_device *device);

/* -------------------------------------------- provided by hsa_ops.c */

/* The message for a non-zero error word (gk_raise in the kernels). */
void gk_describe_error(const uint32_t words[GK_ERROR_WORDS], char *text, size_t text_size);

gllmk_status gk_mem_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                         uint64_t dst_offset, gllmk_plugin_memory *src, uint64_t src_offset,
                         uint64_t size);
gllmk_status gk_mem_fill(gllmk_plugin_device *device, gllmk_plugin_memory *dst, uint64_t offset,
                         uint64_t size, uint8_t value);

/* One function per op, gk_<op>; a descriptor fills its op table with
 *   .ops = {
 *   #define GLLMK_OP(name) .name = gk_##name,
 *   #include "gllmk/gllmk_ops.def"
 *   },                                                                     */
#define GLLMK_OP(name) \
  gllmk_status gk_##name(gllmk_plugin_device *device, const gllmk_##name##_args *args);
#include "gllmk/gllmk_ops.def"

#endif /* GLLMK_HSA_GK_BACKEND_H_ */
