/*
 * ops.h - the entry points of the cuda backend's op families, for the op
 * table in plugin.c: one file a family, each with its kernels in
 * kernels/<family>.cu.
 *
 *   elementwise.c  copy, fill, add, mul, mul_add, silu, gelu, add_gelu, swiglu
 *   norm.c         rmsnorm, add_rmsnorm, layernorm, softmax
 *   rope.c         rope
 *   gather.c       embedding, kv_append
 *   matmul.c       matmul
 *   attention.c    attention, paged_attention
 *   sample.c       argmax, sample
 */
#ifndef GLLMK_CUDA_OPS_H_
#define GLLMK_CUDA_OPS_H_

#include "gllmk/gllmk_plugin.h"

/* cuda_<op>: reads the (validated) tensor descriptors, picks a kernel and
 * its launch shape, and enqueues it on the context's stream. */
#define GLLMK_OP(name) \
  gllmk_status cuda_##name(gllmk_plugin_device *device, const gllmk_##name##_args *args);
#include "gllmk/gllmk_ops.def"

/* Whether a valid call would run here, for the ops whose host code can
 * refuse one: rope (16-bit rotary_dim past what shared memory holds) and
 * attention (a head dim or grid past the device's limits), or needs the
 * scratch (attention, argmax, sample). Each plans the call as for a launch,
 * launching nothing but growing the scratch. */
gllmk_status cuda_matmul_supports(gllmk_plugin_device *dev, const gllmk_matmul_args *args);
gllmk_status cuda_rope_supports(gllmk_plugin_device *dev, const gllmk_rope_args *args);
gllmk_status cuda_argmax_supports(gllmk_plugin_device *dev, const gllmk_argmax_args *args);
gllmk_status cuda_sample_supports(gllmk_plugin_device *dev, const gllmk_sample_args *args);
gllmk_status cuda_attention_supports(gllmk_plugin_device *dev, const gllmk_attention_args *args);
gllmk_status cuda_paged_attention_supports(gllmk_plugin_device *dev, const gllmk_paged_attention_args *args);

#endif /* GLLMK_CUDA_OPS_H_ */
