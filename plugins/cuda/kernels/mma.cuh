/*
 * mma.cuh - warp-level tensor core helpers (sm_80+): ldmatrix, mma.sync
 * m16n8k16 with f32 accumulators, and the shared-memory swizzle that keeps
 * ldmatrix and cp.async free of bank conflicts.
 */
#ifndef GLLMK_CUDA_MMA_CUH_
#define GLLMK_CUDA_MMA_CUH_

#include "common.cuh"

/* Physical 16-byte chunk of logical chunk `c` in `row`, for rows of
 * CHUNKS chunks: rows of 128 bytes or more XOR with the row's low three
 * bits; 64-byte rows pair up and XOR with bits 1..2. */
template <int CHUNKS> __device__ __forceinline__ int swizzle(int row, int c) {
  static_assert(CHUNKS >= 4, "rows of at least 64 bytes");
  return CHUNKS >= 8 ? c ^ (row & 7) : c ^ ((row >> 1) & 3);
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void *p) {
#if __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t r[4], const void *p) {
#if __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

/* The transpose of the 8x8 b16 matrix whose row lane / 4, columns
 * 2 (lane % 4) and + 1, each lane holds: the same elements of the transpose. */
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y = 0;
#if __CUDA_ARCH__ >= 800
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
#endif
  return y;
}

/* d += a b for one m16n8k16 tile. */
__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2], bf16 *) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
__device__ __forceinline__ void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2], f16 *) {
#if __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

#endif /* GLLMK_CUDA_MMA_CUH_ */
