/*
 * gk_all.cl - the translation unit of the hsa kernels: every kernel body,
 * then one entry point per row of gk_kernels.def.
 *
 * Entry point gk_<name> takes the table's global pointers b0, b1, ... and
 * the params struct by value, declares the table's work-group memory and
 * calls gk_<name>_body(b0, ..., p, lds); GK_FLOAT_KERNEL rows give three
 * entry points, each passing its dtype as the body's first argument, so the
 * inlined body is compiled for that dtype alone.
 */
#include "gk_common.h"

/* The memory layer's kernels, then one file per op family (each named
 * like its host file: elementwise.cl <-> ../elementwise.c). */
#include "memory.cl"
#include "elementwise.cl"
#include "norm.cl"
#include "rope.cl"
#include "gather.cl"
#include "matmul.cl"
#include "attention.cl"
#include "sample.cl"

#define GK_PARAMS_1 gk_ptr b0
#define GK_PARAMS_2 GK_PARAMS_1, gk_ptr b1
#define GK_PARAMS_3 GK_PARAMS_2, gk_ptr b2
#define GK_PARAMS_4 GK_PARAMS_3, gk_ptr b3
#define GK_PARAMS_5 GK_PARAMS_4, gk_ptr b4
#define GK_PARAMS_6 GK_PARAMS_5, gk_ptr b5
#define GK_PARAMS_7 GK_PARAMS_6, gk_ptr b6
#define GK_PARAMS_8 GK_PARAMS_7, gk_ptr b7
#define GK_ARGS_1 b0
#define GK_ARGS_2 GK_ARGS_1, b1
#define GK_ARGS_3 GK_ARGS_2, b2
#define GK_ARGS_4 GK_ARGS_3, b3
#define GK_ARGS_5 GK_ARGS_4, b4
#define GK_ARGS_6 GK_ARGS_5, b5
#define GK_ARGS_7 GK_ARGS_6, b6
#define GK_ARGS_8 GK_ARGS_7, b7

/* `lds + 1`: an array cannot be empty; the compiler drops it when unused. */
#define GK_ENTRY(symbol, buffers, params, wg, lds, ...)                                       \
  __attribute__((reqd_work_group_size(wg, 1, 1))) kernel void symbol(GK_PARAMS_##buffers, \
                                                                      params p) {         \
    local float lds_[(lds) + 1] __attribute__((aligned(8)));                                \
    __VA_ARGS__;                                                                            \
  }

#define GK_KERNEL(name, buffers, params, wg, lds) \
  GK_ENTRY(gk_##name, buffers, params, wg, lds, gk_##name##_body(GK_ARGS_##buffers, p, lds_))

#define GK_FLOAT_KERNEL(name, buffers, params, wg, lds)                                         \
  GK_ENTRY(gk_##name##_f32, buffers, params, wg, lds,                                           \
           gk_##name##_body(GK_F32, GK_ARGS_##buffers, p, lds_))                                \
  GK_ENTRY(gk_##name##_f16, buffers, params, wg, lds,                                           \
           gk_##name##_body(GK_F16, GK_ARGS_##buffers, p, lds_))                                \
  GK_ENTRY(gk_##name##_bf16, buffers, params, wg, lds,                                          \
           gk_##name##_body(GK_BF16, GK_ARGS_##buffers, p, lds_))

#include "gk_kernels.def"
