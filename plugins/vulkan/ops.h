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

#endif /* GLLMK_VK_OPS_H_ */
