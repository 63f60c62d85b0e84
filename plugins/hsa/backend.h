/*
 * backend.h - the seam between the op code (the family files
 * elementwise.c ... sample.c, and memory.c), which turns a validated gllmk
 * call into kernel launches, and the host backend that runs them: the HSA
 * runtime in gllmk-hsa.so (device.c, dispatch.c), or OpenCL on PoCL in the
 * test-only gllmk-hsa-pocl.so (pocl/). Both run the same kernels
 * (kernels/gk_kernels.def) with the same arguments.
 */
#ifndef GLLMK_HSA_BACKEND_H_
#define GLLMK_HSA_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "gllmk/gllmk_plugin.h"
#include "kernels/gk_params.h"

typedef enum gk_kernel_id {
#define GK_KERNEL(name, buffers, params, wg, lds) GK_KERNEL_##name,
#include "kernels/gk_kernels.def"
  GK_KERNEL_COUNT
} gk_kernel_id;

/* The f32 kernel of each GK_FLOAT_KERNEL row, as a type of its own, so that
 * variant() (launch.h) takes nothing else: GK_FLOAT_<name>. */
typedef enum gk_float_kernel {
#define GK_KERNEL(name, buffers, params, wg, lds)
#define GK_FLOAT_KERNEL(name, buffers, params, wg, lds) GK_FLOAT_##name = GK_KERNEL_##name##_f32,
#include "kernels/gk_kernels.def"
} gk_float_kernel;

/* variant() picks a float kernel's variant as f32 id + dtype. Proven here
 * for every GK_FLOAT_KERNEL row: its f16 and bf16 kernels follow its f32
 * kernel at the distance of their gllmk_dtype. */
_Static_assert(GLLMK_F32 == 0 && GLLMK_F16 == 1 && GLLMK_BF16 == 2,
               "gllmk_dtype codes of the float variants");
#define GK_KERNEL(name, buffers, params, wg, lds)
#define GK_FLOAT_KERNEL(name, buffers, params, wg, lds)                              \
  _Static_assert(GK_KERNEL_##name##_f16 == GK_KERNEL_##name##_f32 + GLLMK_F16 &&    \
                     GK_KERNEL_##name##_bf16 == GK_KERNEL_##name##_f32 + GLLMK_BF16, \
                 "gk_kernels.def: the variants of " #name " are not f32 + dtype");
#include "kernels/gk_kernels.def"

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

/* ------------------- for both backends, not ops (memory.c, kernels.c) */

/* kernels.c: the message for a non-zero error word (gk_raise in the
 * kernels). */
void gk_describe_error(const uint32_t words[GK_ERROR_WORDS], char *text, size_t text_size);

/* memory.c: the memory layer's copy and fill, as kernel launches
 * (kernels/memory.cl). */
gllmk_status gk_mem_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                         uint64_t dst_offset, gllmk_plugin_memory *src, uint64_t src_offset,
                         uint64_t size);
gllmk_status gk_mem_fill(gllmk_plugin_device *device, gllmk_plugin_memory *dst, uint64_t offset,
                         uint64_t size, uint8_t value);

/* The ops themselves, one function per op in its family file: ops.h. */

#endif /* GLLMK_HSA_BACKEND_H_ */
