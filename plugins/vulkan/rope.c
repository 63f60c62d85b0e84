/*
 * rope.c - the rope family: rope (NeoX and GPT-J pairs, a partial rotary_dim,
 * theta or the caller's inv_freq). Kernel: kernels/rope.comp. From below it
 * takes the launch (vk_call_* of dispatch.c) and, for the frequency table it
 * computes on the host, upload memory (vk_upload_reserve of device.c, owned
 * by the recording while one is captured).
 */
#include <math.h>

#include "ops.h"

#define VK_ROW_GROUP 256
/* rope.comp's HEADS: heads an invocation turns with the same rotations,
 * F32 and 16-bit. Fewer heads compute more rotations but keep more loads in
 * flight. On an H100, [4096 | 8192, 32, 128], % of cuda's copy, one process
 * each: f32 81, 80, 83, 82 at 1 head; 71, 72 at 2; 69 at 4 (65-68 before
 * every head's loads went first); bf16 67, 66 at 1; 69, 74, 74, 71 at 2; 62
 * at 4 (54-69 before). */
#define VK_ROPE_HEADS_F32 1
#define VK_ROPE_HEADS_16 2

/* Binds a rope's frequencies to `call`: the caller's inv_freq tensor (slot
 * slots.inv_slot; the kernel turns each F32 into turns per position itself),
 * else pair j's theta^(-2j / rotary_dim) radians per position as turns per
 * position, a binary fraction in 64 bits computed in double (slot
 * slots.table_slot). That table depends on the arguments alone, so a recording
 * keeps it (in its own upload memory) for every replay. Sets
 * *out_inv_freq_offset to inv_freq's element offset, 0 with the table. For
 * rope.comp and matmul_gemv.comp. */
gllmk_status vk_rope_frequencies(gllmk_plugin_device *dev, vk_call *call, vk_rope_slots slots,
                                 float theta, int64_t rotary_dim, const gllmk_tensor *inv_freq,
                                 uint32_t *out_inv_freq_offset) {
  if (inv_freq) {
    *out_inv_freq_offset = vk_call_tensor(call, slots.inv_slot, inv_freq);
    return GLLMK_OK;
  }
  *out_inv_freq_offset = 0;
  uint32_t pairs = (uint32_t)rotary_dim / 2;
  uint64_t table_bytes = (uint64_t)pairs * sizeof(uint64_t);
  vk_upload table_up;
  gllmk_status s = vk_upload_reserve(dev, table_bytes, &table_up);
  if (s != GLLMK_OK) return s;
  uint64_t *table = (uint64_t *)(void *)table_up.map;
  for (uint32_t j = 0; table && j < pairs; j++) {
    double radians = pow((double)theta, -2.0 * j / (double)rotary_dim);
    double turns = radians / (2.0 * M_PI); /* < 1 */
    table[j] = (uint64_t)ldexp(turns, 64); /* read as uvec2 (lo, hi): little endian */
  }
  vk_call_memory(call, slots.table_slot, table_up.mem, table_up.offset, table_bytes);
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
  gllmk_status s = vk_rope_frequencies(dev, &call, (vk_rope_slots){.table_slot = 3, .inv_slot = 4},
                                       args->theta, args->rotary_dim, args->inv_freq,
                                       &push.freq_offset);
  if (s != GLLMK_OK) return s;
  call.key.extra[2] = args->inv_freq != NULL; /* INV_FREQ */
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
