/*
 * vk_ops_rows.c - ops that work row by row: the norms, softmax and rope.
 */
#include <math.h>
#include <string.h>

#include "vk_internal.h"

#define VK_ROW_GROUP 256
/* rope.comp's HEADS: heads an invocation turns with the same rotations,
 * F32 and 16-bit. Fewer heads compute more rotations but keep more loads in
 * flight. On an H100, [4096 | 8192, 32, 128], % of cuda's copy, one process
 * each: f32 81, 80, 83, 82 at 1 head; 71, 72 at 2; 69 at 4 (65-68 before
 * every head's loads went first); bf16 67, 66 at 1; 69, 74, 74, 71 at 2; 62
 * at 4 (54-69 before). */
#define VK_ROPE_HEADS_F32 1
#define VK_ROPE_HEADS_16 2
/* Bytes of its row that each invocation of norm.comp takes (within the
 * CACHED vectors it keeps in registers). Rows of 4096 on an H100, one run
 * each: bf16 rmsnorm 73% of copy at 32 bytes (256 invocations), 80% at 64;
 * f32 90% at 64 bytes, 87% at 128. */
#define VK_NORM_ROW_BYTES 64
/* Workgroup sizes of norm.comp, one workgroup per row. */
#define VK_NORM_MIN_GROUP 64
#define VK_NORM_MAX_GROUP 512
/* norm.comp keeps 4 vectors of 8 elements per invocation in registers:
 * softmax rows longer than its largest workgroup holds take softmax.comp. */
#define VK_NORM_REACH (VK_NORM_MAX_GROUP * 32)
/* softmax.comp: workgroup size and 16-byte words each invocation keeps in
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

/* VARIANT values of norm.comp. */
enum { VK_NORM_RMS, VK_NORM_ADD_RMS, VK_NORM_LAYER, VK_NORM_LAYER_BIAS, VK_NORM_SOFTMAX };

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

/* The push constants every row kernel of norm.comp and softmax.comp shares:
 * the shape, out and x. */
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

/* softmax.comp for a long row in 16-byte words; returns 0 where it does not
 * apply (short rows, or rows not in whole aligned words). */
static int vk_softmax_long(gllmk_plugin_device *dev, const gllmk_softmax_args *args,
                           gllmk_status *status) {
  const gllmk_tensor *out = args->out;
  uint32_t group = VK_SOFTMAX_GROUP;
  const VkPhysicalDeviceLimits *lim = &dev->phys->limits;
  if (gllmk_plugin_as_rows(out).cols <= VK_NORM_REACH || vk_group_limit(dev, group) != group)
    return 0;
  uint32_t per_word = vk_per_word(out->dtype);
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_softmax, out->dtype, group);
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

/* ------------------------------------------------------------------ rope */

/* Binds rope's frequencies to `call`: the caller's inv_freq tensor (slot
 * 4; the kernel turns each F32 into turns per position itself), else pair
 * j's theta^(-2j / rotary_dim) radians per position as turns per position,
 * a binary fraction in 64 bits computed in double (slot 3). That table
 * depends on the arguments alone, so a recording keeps it (in its own
 * upload memory) for every replay. Returns inv_freq's element offset. */
static gllmk_status rope_frequencies(gllmk_plugin_device *dev, vk_call *call,
                                     const gllmk_rope_args *args, uint32_t *out_offset) {
  *out_offset = 0;
  if (args->inv_freq) {
    call->key.extra[2] = 1; /* INV_FREQ */
    *out_offset = vk_call_tensor(call, 4, args->inv_freq);
    return GLLMK_OK;
  }
  uint32_t pairs = (uint32_t)args->rotary_dim / 2;
  uint64_t table_bytes = (uint64_t)pairs * sizeof(uint64_t);
  vk_upload table_up;
  gllmk_status s = vk_upload_reserve(dev, table_bytes, &table_up);
  if (s != GLLMK_OK) return s;
  uint64_t *table = (uint64_t *)(void *)table_up.map;
  for (uint32_t j = 0; table && j < pairs; j++) {
    double radians = pow((double)args->theta, -2.0 * j / (double)args->rotary_dim);
    double turns = radians / (2.0 * M_PI); /* < 1 */
    table[j] = (uint64_t)ldexp(turns, 64); /* read as uvec2 (lo, hi): little endian */
  }
  vk_call_memory(call, 3, table_up.mem, table_up.offset, table_bytes);
  return GLLMK_OK;
}

gllmk_status vk_rope(gllmk_plugin_device *dev, const gllmk_rope_args *args) {
  /* Pair j turns by position * theta^(-2j / rotary_dim) radians, or by
   * position * inv_freq[j] (rope_frequencies). */
  uint32_t pairs = (uint32_t)args->rotary_dim / 2;
  const gllmk_tensor *x = args->x, *out = args->out;
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_rope, out->dtype, VK_ROW_GROUP);
  call.key.variant = args->style == GLLMK_ROPE_GPTJ ? 1 : 0;
  int64_t units = (int64_t)pairs + (out->shape[2] - args->rotary_dim);
  struct {
    uint32_t count, units_per_row, heads, rotary_dim, out_offset, out_token_stride,
        out_head_stride, x_offset, x_token_stride, x_head_stride, pos_offset, pos_stride,
        freq_offset;
  } push;
  gllmk_status s = rope_frequencies(dev, &call, args, &push.freq_offset);
  if (s != GLLMK_OK) return s;
  push.count = vk_call_u32(&call, out->shape[0] * out->shape[1] * units, "the element count");
  push.units_per_row = (uint32_t)units;
  push.heads = (uint32_t)out->shape[1];
  push.rotary_dim = (uint32_t)args->rotary_dim;
  push.out_offset = vk_call_tensor(&call, 0, out);
  push.out_token_stride = vk_call_stride(&call, out, 0);
  push.out_head_stride = vk_call_stride(&call, out, 1);
  push.x_offset = vk_call_tensor(&call, 1, x);
  push.x_token_stride = vk_call_stride(&call, x, 0);
  push.x_head_stride = vk_call_stride(&call, x, 1);
  push.pos_offset = vk_call_tensor(&call, 2, args->positions);
  push.pos_stride = vk_call_stride(&call, args->positions, 0);
  uint32_t heads = out->dtype == GLLMK_F32 ? VK_ROPE_HEADS_F32 : VK_ROPE_HEADS_16;
  /* Steps of 8 pairs (or copied elements) through `heads` heads. */
  uint32_t multiples = push.out_offset | push.out_token_stride | push.out_head_stride |
                       push.x_offset | push.x_token_stride | push.x_head_stride;
  uint32_t copied = (uint32_t)out->shape[2] - push.rotary_dim;
  if (pairs % 8 == 0 && (copied | multiples) % 8 == 0) {
    call.key.extra[0] = 1;
    call.key.extra[1] = heads;
    push.units_per_row = pairs / 8 + copied / 8;
    push.count = vk_call_u32(&call,
                             out->shape[0] * (int64_t)vk_groups(push.heads, heads) *
                                 push.units_per_row,
                             "the element count");
  }
  return vk_call_run(&call, &push, sizeof push, vk_groups(push.count, VK_ROW_GROUP), 1, 1);
}
