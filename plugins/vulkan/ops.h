/*
 * ops.h - the op entry points of the vulkan plugin, one per op of
 * gllmk/gllmk_ops.def, for the op table and supports() (plugin.c). Each is
 * defined in its family's file:
 *   elementwise.c  copy, fill, add, mul, mul_add, silu, gelu, add_gelu, swiglu
 *   norm.c         rmsnorm, add_rmsnorm, layernorm, softmax
 *   rope.c         rope
 *   gather.c       embedding, kv_append
 *   matmul.c       matmul
 *   attention.c    attention, paged_attention
 *   sample.c       argmax, sample
 * and its kernels are kernels/<family>.comp and kernels/<family>_*.comp.
 * Only the family files and plugin.c include this header: the layers below
 * (internal.h) never call an op.
 */
#ifndef GLLMK_VK_OPS_H_
#define GLLMK_VK_OPS_H_

#include "internal.h"

#define GLLMK_OP(name) \
  gllmk_status vk_##name(gllmk_plugin_device *dev, const gllmk_##name##_args *args);
#include "gllmk/gllmk_ops.def"

/* rope.c's frequencies, shared with matmul.c's rope on the output: the
 * binding slots of the host's table of turns and of the caller's inv_freq. */
typedef struct vk_rope_slots {
  uint32_t table_slot, inv_slot;
} vk_rope_slots;
gllmk_status vk_rope_frequencies(gllmk_plugin_device *dev, vk_call *call, vk_rope_slots slots,
                                 float theta, int64_t rotary_dim, const gllmk_tensor *inv_freq,
                                 uint32_t *out_inv_freq_offset);

#endif /* GLLMK_VK_OPS_H_ */
