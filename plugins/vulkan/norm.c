/*
 * norm.c - the norm family, ops that reduce over each row: rmsnorm,
 * add_rmsnorm, layernorm and softmax. Kernels: kernels/norm.comp (every op,
 * one workgroup per row, VARIANT picks the op) and kernels/norm_softmax.comp
 * (softmax rows longer than norm.comp keeps in registers). From below it
 * takes the launch (vk_call_* of dispatch.c) and the device's limits.
 */
#include <string.h>

#include "ops.h"

/* Bytes of its row that each invocation of norm.comp takes (within the
 * CACHED vectors it keeps in registers). Rows of 4096 on an H100, one run
 * each: bf16 rmsnorm 73% of copy at 32 bytes (256 invocations), 80% at 64;
 * f32 90% at 64 bytes, 87% at 128. */
#define VK_NORM_ROW_BYTES 64
/* Workgroup sizes of norm.comp, one workgroup per row. */
#define VK_NORM_MIN_GROUP 64
#define VK_NORM_MAX_GROUP 512
/* norm.comp keeps 4 vectors of 8 elements per invocation in registers:
 * softmax rows longer than its largest workgroup holds take
 * norm_softmax.comp. */
#define VK_NORM_REACH (VK_NORM_MAX_GROUP * 32)
/* norm_softmax.comp: workgroup size and 16-byte words each invocation keeps in
 * registers (at most the kernel's REGS_MAX): 1024 * 12 words is 192 KiB,
 * most of an NVIDIA compute unit's register file, for one workgroup. On an
 * H100, [131, 128256] f32 / [262, 128256] bf16, % of cuda's copy (49-52 /
 * 48-54 with norm.comp): 1024 x 12 words 64/60; 512 x 24 61/57 twice; 512 x
 * 16 58/59; 512 x 28 61/55; 256 x 32 43/43. */
#define VK_SOFTMAX_GROUP 1024
#define VK_SOFTMAX_REGS 12
/* 16-bit rows keep fewer words in registers: [262, 128256] bf16 took 63-64
 * us with 8 against 65 with 12 (f32: 68-83 against 66), the rest of the
 * row then coming from the L2 cache. */
#define VK_SOFTMAX_REGS_16BIT 8

/* VARIANT values of norm.comp: its OP_* constants. */
enum {
  VK_NORM_RMS = 0,
  VK_NORM_ADD_RMS = 1,
  VK_NORM_LAYER = 2,
  VK_NORM_LAYER_BIAS = 3,
  VK_NORM_SOFTMAX = 4
};

typedef struct vk_norm_push {
  uint32_t rows, cols, out_offset, out_row_stride, x_offset, x_row_stride, w_offset, bias_offset,
      res_offset, res_row_stride;
  float eps, scale;
} vk_norm_push;

/* The workgroup for rows of `cols` elements of `dtype`: a power of two (the
 * portable reduction halves it) with VK_NORM_ROW_BYTES of the row for each
 * invocation. A short row then takes a small workgroup, so that more rows
 * (and more of their bytes) are in flight on each compute unit; a long row
 * (a vocabulary for softmax) takes the largest. */
static uint32_t vk_norm_group(const gllmk_plugin_device *dev, int64_t cols, int32_t dtype) {
  uint32_t largest = vk_group_limit(dev, VK_NORM_MAX_GROUP);
  int64_t row_bytes = cols * (int64_t)gllmk_plugin_dtype_size(dtype);
  uint32_t group = VK_NORM_MIN_GROUP;
  while (group < largest && (int64_t)group * VK_NORM_ROW_BYTES < row_bytes) group *= 2;
  return group;
}

/* The push constants every row kernel of norm.comp and norm_softmax.comp
 * shares: the shape, out and x. */
static void vk_norm_push_rows(vk_call *call, vk_norm_push *push, const gllmk_tensor *out,
                              const gllmk_tensor *x, float scale) {
  gllmk_plugin_rows o = gllmk_plugin_as_rows(out), xr = gllmk_plugin_as_rows(x);
  memset(push, 0, sizeof *push);
  push->rows = vk_call_u32(call, o.rows, "the row count");
  push->cols = vk_call_u32(call, o.cols, "the row length");
  push->out_offset = vk_call_tensor(call, 0, out);
  push->out_row_stride = vk_call_u32(call, o.row_stride, "a row stride");
  push->x_offset = vk_call_tensor(call, 1, x);
  push->x_row_stride = vk_call_u32(call, xr.row_stride, "a row stride");
  push->scale = scale;
}

/* One workgroup per row of x (residual, weight and bias as the op has them). */
static gllmk_status vk_norm(gllmk_plugin_device *dev, uint32_t op, const gllmk_tensor *out,
                            const gllmk_tensor *x, const gllmk_tensor *weight,
                            const gllmk_tensor *bias, const gllmk_tensor *residual, float eps,
                            float scale) {
  uint32_t group = vk_norm_group(dev, gllmk_plugin_as_rows(out).cols, out->dtype);
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_norm, out->dtype, group);
  call.key.variant = op;
  vk_norm_push push;
  vk_norm_push_rows(&call, &push, out, x, scale);
  if (weight) push.w_offset = vk_call_tensor(&call, 2, weight);
  if (bias) push.bias_offset = vk_call_tensor(&call, 3, bias);
  if (residual) {
    push.res_offset = vk_call_tensor(&call, 4, residual);
    push.res_row_stride =
        vk_call_u32(&call, gllmk_plugin_as_rows(residual).row_stride, "a row stride");
  }
  push.eps = eps;
  /* 8 elements per step where every row is whole vectors. */
  uint32_t strides = push.rows > 1 ? push.out_row_stride | push.x_row_stride | push.res_row_stride : 0;
  call.key.extra[0] = (push.cols | push.out_offset | push.x_offset | push.w_offset |
                       push.bias_offset | push.res_offset | strides) % 8 == 0;
  return vk_call_run(&call, &push, sizeof push, push.rows, 1, 1);
}

gllmk_status vk_rmsnorm(gllmk_plugin_device *dev, const gllmk_rmsnorm_args *args) {
  return vk_norm(dev, VK_NORM_RMS, args->out, args->x, args->weight, NULL, NULL, args->eps, 1.0f);
}

gllmk_status vk_add_rmsnorm(gllmk_plugin_device *dev, const gllmk_add_rmsnorm_args *args) {
  return vk_norm(dev, VK_NORM_ADD_RMS, args->out, args->x, args->weight, NULL, args->residual,
                 args->eps, 1.0f);
}

gllmk_status vk_layernorm(gllmk_plugin_device *dev, const gllmk_layernorm_args *args) {
  return vk_norm(dev, args->bias ? VK_NORM_LAYER_BIAS : VK_NORM_LAYER, args->out, args->x,
                 args->weight, args->bias, NULL, args->eps, 1.0f);
}

/* norm_softmax.comp for a long row in 16-byte words; returns 0 where it
 * does not apply (short rows, or rows not in whole aligned words). */
static int vk_softmax_long(gllmk_plugin_device *dev, const gllmk_softmax_args *args,
                           gllmk_status *status) {
  const gllmk_tensor *out = args->out;
  uint32_t group = VK_SOFTMAX_GROUP;
  const VkPhysicalDeviceLimits *lim = &dev->phys->limits;
  if (gllmk_plugin_as_rows(out).cols <= VK_NORM_REACH || vk_group_limit(dev, group) != group)
    return 0;
  uint32_t per_word = vk_per_word(out->dtype);
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_norm_softmax, out->dtype, group);
  vk_norm_push push;
  vk_norm_push_rows(&call, &push, out, args->x, args->scale);
  uint32_t strides = push.rows > 1 ? push.out_row_stride | push.x_row_stride : 0;
  if ((push.cols | push.out_offset | push.x_offset | strides) % per_word != 0) return 0;
  /* Shared memory for the STASH words of every invocation, after the
   * kernel's reduction scratch (at most one float per invocation) and the
   * one spare word. */
  uint64_t shared = lim->maxComputeSharedMemorySize;
  uint64_t spare = (uint64_t)group * sizeof(float) + 16;
  call.key.extra[0] = per_word == 4 ? VK_SOFTMAX_REGS : VK_SOFTMAX_REGS_16BIT;
  call.key.extra[1] = shared > spare ? (uint32_t)((shared - spare) / (16u * group)) : 0;
  *status = vk_call_run(&call, &push, sizeof push, push.rows, 1, 1);
  return 1;
}

gllmk_status vk_softmax(gllmk_plugin_device *dev, const gllmk_softmax_args *args) {
  gllmk_status s;
  if (vk_softmax_long(dev, args, &s)) return s;
  return vk_norm(dev, VK_NORM_SOFTMAX, args->out, args->x, NULL, NULL, NULL, 0.0f, args->scale);
}
