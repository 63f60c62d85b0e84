/*
 * launch.h - what the op code shares below the family files (and memory.c
 * with them): grid sizes, the dtype variant of a float kernel, and one
 * launch through the backend (backend.h: the HSA runtime, or PoCL in the
 * tests).
 *
 * The core has validated each call (docs/api.md), so the family files only
 * turn tensors into the kernels' parameter blocks and pick grid sizes.
 * Grids are capped; every kernel loops over what the grid does not cover.
 */
#ifndef GLLMK_HSA_LAUNCH_H_
#define GLLMK_HSA_LAUNCH_H_

#include <string.h>

#include "backend.h"

/* At most this many work-groups in x and in y. */
#define GK_GRID_CAP 65535u

static inline gllmk_plugin_memory *memory_of(const gllmk_tensor *t) {
  return t ? gllmk_plugin_tensor_memory(t) : NULL;
}

static inline uint32_t capped(int64_t groups) {
  if (groups < 1) return 1;
  return groups > (int64_t)GK_GRID_CAP ? GK_GRID_CAP : (uint32_t)groups;
}

/* Work-groups of `per_group` work-items to cover n items. */
static inline uint32_t groups_for(int64_t n, uint32_t per_group) {
  return capped((n + per_group - 1) / per_group);
}

/* The float-dtype variant of a kernel: the table lists f32, f16, bf16
 * (backend.h asserts it for every float kernel). */
static inline gk_kernel_id variant(gk_float_kernel f32_kernel, int32_t dtype) {
  return (gk_kernel_id)((int32_t)f32_kernel + dtype);
}

static inline gllmk_status launch(gllmk_plugin_device *device, gk_kernel_id kernel,
                                  uint32_t groups_x, uint32_t groups_y, const void *params,
                                  gllmk_plugin_memory *const *buffers) {
  gk_launch l = {.kernel = kernel, .groups_x = groups_x, .groups_y = groups_y, .params = params};
  memcpy(l.buffers, buffers, gk_kernels[kernel].buffers * sizeof *buffers);
  return gk_backend_launch(device, &l);
}

#endif /* GLLMK_HSA_LAUNCH_H_ */
