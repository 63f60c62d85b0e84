/*
 * gk_kernels.c - the host's copy of the kernel table (kernels/gk_kernels.def):
 * symbol names and argument layout, for the backends and the code-object test.
 */
#include "gk_backend.h"

const gk_kernel_info gk_kernels[GK_KERNEL_COUNT] = {
#define GK_KERNEL(name, buffers, params, wg, lds) {"gk_" #name, buffers, sizeof(params), wg},
#include "kernels/gk_kernels.def"
};

/* The parameter blocks must have one layout in C and in OpenCL C: only
 * 8- and 4-byte fields, 8-byte fields first, size a multiple of 8. */
#define GK_CHECK_PARAMS(type) \
  _Static_assert(sizeof(type) % 8 == 0 && _Alignof(type) == 8, #type " is not 8-byte padded")
GK_CHECK_PARAMS(gk_bytes_params);
GK_CHECK_PARAMS(gk_copy_params);
GK_CHECK_PARAMS(gk_fill_params);
GK_CHECK_PARAMS(gk_eltwise_params);
GK_CHECK_PARAMS(gk_norm_params);
GK_CHECK_PARAMS(gk_rope_params);
GK_CHECK_PARAMS(gk_embedding_params);
GK_CHECK_PARAMS(gk_kv_append_params);
GK_CHECK_PARAMS(gk_matmul_params);
GK_CHECK_PARAMS(gk_attention_params);
GK_CHECK_PARAMS(gk_paged_params);
GK_CHECK_PARAMS(gk_token_params);
