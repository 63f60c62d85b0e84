/*
 * launch.h - what the family files (elementwise.c ... sample.c) share: the
 * helpers that turn tensor descriptors into kernel parameters and launch
 * shapes, and the macros that make an op's entry point. Below it: internal.h
 * (cuda_launch, cuda_scratch, the kernel ids).
 */
#ifndef GLLMK_CUDA_LAUNCH_H_
#define GLLMK_CUDA_LAUNCH_H_

#include "internal.h"
#include "ops.h"

typedef gllmk_plugin_rows rows_t;

#define MAX_GRID_YZ 65535u
#define MAX_GRID_X 0x7fffffffu

static inline size_t elem_size(const gllmk_tensor *t) { return gllmk_plugin_dtype_size(t->dtype); }

/* Kernel variant for a dtype: families are listed f32, f16, bf16. I32 data
 * only moves, so it takes the f32 kernels (which move bits unchanged). */
static inline int variant(int32_t dtype) { return dtype == GLLMK_I32 ? GLLMK_F32 : dtype; }

static inline int aligned16(CUdeviceptr address) { return (address & 15u) == 0; }

/* Whether rows of `cols` elements, `stride` apart, all start on 16 bytes. */
static inline int rows_aligned16(const gllmk_tensor *t, int64_t stride) {
  return aligned16(cuda_tensor_address(t)) && (stride * (int64_t)elem_size(t)) % 16 == 0;
}

/* The stride of dim `dim`, 0 where its extent is 1 (its index is always 0,
 * so whatever stride it has is never used nor checked for alignment). */
static inline int64_t dim_stride(const gllmk_tensor *t, int32_t dim) {
  return t->shape[dim] > 1 ? t->strides[dim] : 0;
}

/* Whether every row of a tensor starts on a multiple of `bytes`: its
 * address and each of the `count` element strides. */
static inline int strides_aligned(const gllmk_tensor *t, const int64_t *strides, int count, int64_t bytes) {
  if (cuda_tensor_address(t) % (uint64_t)bytes != 0) return 0;
  for (int i = 0; i < count; i++)
    if ((strides[i] * (int64_t)elem_size(t)) % bytes != 0) return 0;
  return 1;
}

static inline int strides_aligned16(const gllmk_tensor *t, const int64_t *strides, int count) {
  return strides_aligned(t, strides, count, 16);
}

/* A TMA descriptor of a 16-bit tensor of `rank` dims (dims[0] contiguous;
 * strides in elements for dims 1..rank-1) read in boxes of `box` elements
 * with the 128-byte swizzle (box[0] = 64) and zeros past its ends. A dim of
 * extent 1 takes any legal stride. Returns 0 where the driver cannot describe
 * it (then another kernel runs). */
static inline int describe_16bit_for_tma(cuda_tensor_map *map, int32_t dtype, uint64_t address, uint32_t rank,
                                         const uint64_t *dims, const int64_t *strides, const uint32_t *box) {
  if (!cu.cuTensorMapEncodeTiled || rank > 5) return 0;
  /* The driver's own rules (16-byte address and strides, strides below
   * 2^40), checked first: its refusal would show as an API error under
   * compute-sanitizer although another kernel then runs correctly. */
  if (address % 16 != 0) return 0;
  uint64_t stride_bytes[4];
  for (uint32_t i = 1; i < rank; i++) {
    stride_bytes[i - 1] = dims[i] == 1 ? 16 : (uint64_t)strides[i - 1] * 2;
    if (stride_bytes[i - 1] % 16 != 0 || stride_bytes[i - 1] >= (1ull << 40)) return 0;
  }
  const uint32_t element_strides[5] = {1, 1, 1, 1, 1};
  return cu.cuTensorMapEncodeTiled(map, dtype == GLLMK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                   rank, (void *)(uintptr_t)address, dims, stride_bytes, box, element_strides,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

static inline uint32_t clamp_u32(int64_t n, uint32_t max) { return n < 1 ? 1u : n > (int64_t)max ? max : (uint32_t)n; }

static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A block size for `units` of work per block: a multiple of 32 in [32, max]. */
static inline uint32_t block_for(int64_t units, uint32_t max) {
  const int64_t rounded = ceil_div(units, 32) * 32;
  return clamp_u32(rounded < 32 ? 32 : rounded, max);
}

static inline cuda_index_view index_view(const gllmk_tensor *t) {
  const rows_t r = gllmk_plugin_as_rows(t);
  cuda_index_view v = {cuda_tensor_address(t), r.cols, r.row_stride};
  return v;
}

/* Defines the op's entry point cuda_<name>: run_<name>(dev, args), the
 * family file's host code, with the device's context current. Nothing here
 * waits for the device. */
#define CUDA_OP_ENTRY(name)                                                             \
  gllmk_status cuda_##name(gllmk_plugin_device *dev, const gllmk_##name##_args *args) { \
    gllmk_status status = cuda_enter(dev);                                              \
    if (status != GLLMK_OK) return status;                                              \
    status = run_##name(dev, args);                                                     \
    cuda_leave(dev);                                                                    \
    return status;                                                                      \
  }

/* Defines cuda_<name>_supports for an op whose host code can refuse a valid
 * call: run_<name> runs as for a launch, launching nothing, and answers. */
#define CUDA_OP_SUPPORTS(name)                                                                     \
  gllmk_status cuda_##name##_supports(gllmk_plugin_device *dev, const gllmk_##name##_args *args) { \
    dev->planning = 1;                                                                             \
    const gllmk_status status = run_##name(dev, args);                                             \
    dev->planning = 0;                                                                             \
    return status;                                                                                 \
  }

#endif /* GLLMK_CUDA_LAUNCH_H_ */
