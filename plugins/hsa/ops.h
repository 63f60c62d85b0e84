/*
 * ops.h - the hsa ops: one function gk_<op> per op of gllmk_ops.def, for
 * the op tables of gllmk-hsa.so (plugin.c) and of the test-only
 * gllmk-hsa-pocl.so (pocl/pocl_plugin.c), which fill them with
 *   .ops = {
 *   #define GLLMK_OP(name) .name = gk_##name,
 *   #include "gllmk/gllmk_ops.def"
 *   },
 *
 * Each op lives in the file of its family, with its kernels in
 * kernels/<family>.cl:
 *   elementwise.c  copy, fill, add, mul, mul_add, silu, gelu, add_gelu, swiglu
 *   norm.c         rmsnorm, add_rmsnorm, layernorm, softmax
 *   rope.c         rope
 *   gather.c       embedding, kv_append
 *   matmul.c       matmul
 *   attention.c    attention, paged_attention
 *   sample.c       argmax, sample
 */
#ifndef GLLMK_HSA_OPS_H_
#define GLLMK_HSA_OPS_H_

#include "backend.h"

#define GLLMK_OP(name) \
  gllmk_status gk_##name(gllmk_plugin_device *device, const gllmk_##name##_args *args);
#include "gllmk/gllmk_ops.def"

/* The descriptors' supports (matmul.c): every valid call runs except
 * matmul's a_norm (ABI 2.4), rope (ABI 2.5), kv and glu (ABI 2.6), which no
 * hsa kernel applies. */
gllmk_status gk_supports(gllmk_plugin_device *device, gllmk_op op, const void *args);

#endif /* GLLMK_HSA_OPS_H_ */
