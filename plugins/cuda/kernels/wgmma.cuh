/*
 * wgmma.cuh - Hopper warpgroup matrix multiply (sm_90a only): shared-memory
 * matrix descriptors, wgmma.mma_async m64nNk16 with f32 accumulators, A
 * from shared memory (N = 32, 64, 128, 256) or from registers (N = 64, 128,
 * 256), TMA loads and stores, mbarriers and setmaxnreg. Each of the
 * 128 threads of a warpgroup holds N / 2 accumulators: for n8
 * chunk j, d[4j], d[4j+1] are row 16 w + lane / 4 (w = warp in the group),
 * columns 8 j + 2 (lane % 4) + {0, 1}; d[4j+2], d[4j+3] the same 8 rows down.
 */
#ifndef GLLMK_CUDA_WGMMA_CUH_
#define GLLMK_CUDA_WGMMA_CUH_

#include "common.cuh"

/* Descriptor of a K-major tile in shared memory with the 128-byte swizzle:
 * rows of 64 16-bit elements (128 bytes), 8-row groups 1024 bytes apart,
 * 16-byte chunk c of row r stored at chunk c ^ (r % 8); the tile starts on a
 * 1024-byte boundary (plus the k offset, in 32-byte steps, within a row). */
__device__ __forceinline__ uint64_t wgmma_descriptor(const void *tile) {
  const uint64_t address = smem_addr(tile);
  return ((address & 0x3ffffu) >> 4) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) | (1ull << 62);
}

/* Descriptor of an N-major B operand (read with trans-b) in the same
 * swizzled rows: each row holds 64 consecutive n of one k, 8-row groups
 * (8 k) 1024 bytes apart, the next 64 n `n_stride` bytes on. */
__device__ __forceinline__ uint64_t wgmma_descriptor_n_major(const void *tile, uint32_t n_stride) {
  const uint64_t address = smem_addr(tile);
  return ((address & 0x3ffffu) >> 4) | ((uint64_t)(n_stride >> 4) << 16) | ((uint64_t)(1024 >> 4) << 32) |
         (1ull << 62);
}

/* Orders this thread's ordinary shared-memory writes (cp.async included)
 * before later reads by the tensor cores (the async proxy). */
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
/* Pins accumulators at this point of the program: placed right after a
 * wgmma_wait, it keeps the compiler from moving their reads above the wait
 * (until then the tensor cores may still be writing them). */
template <int N> __device__ __forceinline__ void wgmma_fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
/* mbarrier: a shared-memory barrier with an arrival count and a phase bit. */
__device__ __forceinline__ void mbarrier_init(uint64_t *bar, int count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t *bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
#endif
}
/* Arrives and tells the barrier to also wait for `bytes` of TMA traffic. */
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
#endif
}
/* TMA: copies the box at coordinates (x, y, z) of a 3-D tensor map into
 * shared memory; the bytes count toward `bar`'s transaction. */
__device__ __forceinline__ void tma_load_3d(void *dst, const cuda_tensor_map *map, int x, int y, int z, uint64_t *bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
      : "memory");
#endif
}
/* The same for a 4-D tensor (x, y, z, w). */
__device__ __forceinline__ void tma_load_4d(void *dst, const cuda_tensor_map *map, int x, int y, int z, int w,
                                            uint64_t *bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(z), "r"(w), "r"(smem_addr(bar))
      : "memory");
#endif
}
/* TMA store: copies a box of shared memory (laid out as tma_load_3d
 * leaves one) to coordinates (x, y, z) of a 3-D tensor map, leaving out
 * what lies past the tensor's edges; bulk_store_commit_and_wait_read
 * returns once every such store of this thread has read its shared memory
 * (the global writes may still be on their way). */
__device__ __forceinline__ void tma_store_3d(const cuda_tensor_map *map, const void *src, int x, int y, int z) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(x), "r"(y), "r"(z)
               : "memory");
#endif
}
__device__ __forceinline__ void bulk_store_commit_and_wait_read() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group.read 0;\n" ::: "memory");
#endif
}
/* Moves registers between the warpgroups of a block (every thread of a
 * warpgroup executes it): a loader warpgroup gives up what it does not need
 * so that the multiplying ones can hold their accumulators. */
template <int REGS> __device__ __forceinline__ void setmaxnreg_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
#endif
}
template <int REGS> __device__ __forceinline__ void setmaxnreg_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
#endif
}
/* Waits until the phase with the given parity has completed. */
__device__ __forceinline__ void mbarrier_wait(uint64_t *bar, int parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
#endif
}

/* The wgmma wrappers below exist once per input type (bf16, f16), which
 * only changes the PTX type name: each is a macro instantiated for both. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GK_IF_SM90A(...) __VA_ARGS__
#else
#define GK_IF_SM90A(...)
#endif
/* Accumulator operands d[i] .. d[i + 7], ... d[i + 31] (read and written). */
#define GK_ACC8(d, i)                                                                                  \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define GK_ACC32(d, i) GK_ACC8(d, i), GK_ACC8(d, i + 8), GK_ACC8(d, i + 16), GK_ACC8(d, i + 24)
#define GK_ACC64(d, i) GK_ACC32(d, i), GK_ACC32(d, i + 32)

#define GK_WGMMA_M64N128K16(T, TYPE)                                                                      \
  __device__ __forceinline__ void wgmma_m64n128k16(float d[64], uint64_t desc_a, uint64_t desc_b, T *) {  \
    GK_IF_SM90A(asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "             \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                             "%64, %65, 1, 1, 1, 0, 0;\n"                                                 \
                             : GK_ACC64(d, 0)                                                             \
                             : "l"(desc_a), "l"(desc_b));)                                                \
  }
GK_WGMMA_M64N128K16(bf16, "bf16")
GK_WGMMA_M64N128K16(f16, "f16")

#define GK_WGMMA_M64N256K16(T, TYPE)                                                                      \
  __device__ __forceinline__ void wgmma_m64n256k16(float d[128], uint64_t desc_a, uint64_t desc_b, T *) { \
    GK_IF_SM90A(asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " "             \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
                             "%128, %129, 1, 1, 1, 0, 0;\n"                                               \
                             : GK_ACC64(d, 0), GK_ACC64(d, 64)                                            \
                             : "l"(desc_a), "l"(desc_b));)                                                \
  }
GK_WGMMA_M64N256K16(bf16, "bf16")
GK_WGMMA_M64N256K16(f16, "f16")

/* d (+)= a b for one m64nNk16 step with A and B in shared memory (both
 * K-major); accumulate = 0 overwrites d. */
#define GK_WGMMA_M64N64K16_SS(T, TYPE)                                                                    \
  __device__ __forceinline__ void wgmma_m64n64k16_ss(float d[32], uint64_t desc_a, uint64_t desc_b,       \
                                                     int accumulate, T *) {                               \
    GK_IF_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                 \
                             "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "              \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                                                                 \
                             "%32, %33, p, 1, 1, 0, 0;\n}\n"                                              \
                             : GK_ACC32(d, 0)                                                             \
                             : "l"(desc_a), "l"(desc_b), "r"(accumulate));)                               \
  }
GK_WGMMA_M64N64K16_SS(bf16, "bf16")
GK_WGMMA_M64N64K16_SS(f16, "f16")

#define GK_WGMMA_M64N32K16_SS(T, TYPE)                                                                    \
  __device__ __forceinline__ void wgmma_m64n32k16_ss(float d[16], uint64_t desc_a, uint64_t desc_b,       \
                                                     int accumulate, T *) {                               \
    GK_IF_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                 \
                             "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "              \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "   \
                             "%16, %17, p, 1, 1, 0, 0;\n}\n"                                              \
                             : GK_ACC8(d, 0), GK_ACC8(d, 8)                                               \
                             : "l"(desc_a), "l"(desc_b), "r"(accumulate));)                               \
  }
GK_WGMMA_M64N32K16_SS(bf16, "bf16")
GK_WGMMA_M64N32K16_SS(f16, "f16")

#define GK_WGMMA_M64N128K16_SS(T, TYPE)                                                                   \
  __device__ __forceinline__ void wgmma_m64n128k16_ss(float d[64], uint64_t desc_a, uint64_t desc_b,      \
                                                      int accumulate, T *) {                              \
    GK_IF_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                 \
                             "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "             \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                                                                 \
                             "%64, %65, p, 1, 1, 0, 0;\n}\n"                                              \
                             : GK_ACC64(d, 0)                                                             \
                             : "l"(desc_a), "l"(desc_b), "r"(accumulate));)                               \
  }
GK_WGMMA_M64N128K16_SS(bf16, "bf16")
GK_WGMMA_M64N128K16_SS(f16, "f16")

/* d (+)= a b for one m64nNk16 step with A (64 x 16) in registers: each warp
 * w of the group holds rows 16 w .. 16 w + 15 in the mma.sync m16n8k16 A
 * layout (a[0]: row lane / 4, k 2 (lane % 4) + {0, 1}; a[1]: 8 rows down;
 * a[2], a[3]: k + 8). B comes from shared memory, K-major (TRANS_B = 0) or
 * N-major (TRANS_B = 1). accumulate = 0 overwrites d. The accumulators are
 * laid out as for m64n256k16 above. */
#define GK_WGMMA_M64N64K16_RS(T, TYPE)                                                                    \
  template <int TRANS_B>                                                                                  \
  __device__ __forceinline__ void wgmma_m64n64k16_rs(float d[32], const uint32_t a[4], uint64_t desc_b,   \
                                                     int accumulate, T *) {                               \
    GK_IF_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"                                 \
                             "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "              \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
                             "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"                              \
                             : GK_ACC32(d, 0)                                                             \
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B),     \
                               "r"(accumulate));)                                                         \
  }
GK_WGMMA_M64N64K16_RS(bf16, "bf16")
GK_WGMMA_M64N64K16_RS(f16, "f16")

#define GK_WGMMA_M64N128K16_RS(T, TYPE)                                                                   \
  template <int TRANS_B>                                                                                  \
  __device__ __forceinline__ void wgmma_m64n128k16_rs(float d[64], const uint32_t a[4], uint64_t desc_b,  \
                                                      int accumulate, T *) {                              \
    GK_IF_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"                                 \
                             "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "             \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
                             "{%64, %65, %66, %67}, %68, p, 1, 1, %69;\n}\n"                              \
                             : GK_ACC64(d, 0)                                                             \
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B),     \
                               "r"(accumulate));)                                                         \
  }
GK_WGMMA_M64N128K16_RS(bf16, "bf16")
GK_WGMMA_M64N128K16_RS(f16, "f16")

#define GK_WGMMA_M64N256K16_RS(T, TYPE)                                                                   \
  template <int TRANS_B>                                                                                  \
  __device__ __forceinline__ void wgmma_m64n256k16_rs(float d[128], const uint32_t a[4], uint64_t desc_b, \
                                                      int accumulate, T *) {                              \
    GK_IF_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %134, 0;\n"                                \
                             "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " "             \
                             "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "                                                                \
                             "{%128, %129, %130, %131}, %132, p, 1, 1, %133;\n}\n"                        \
                             : GK_ACC64(d, 0), GK_ACC64(d, 64)                                            \
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B),     \
                               "r"(accumulate));)                                                         \
  }
GK_WGMMA_M64N256K16_RS(bf16, "bf16")
GK_WGMMA_M64N256K16_RS(f16, "f16")

#endif /* GLLMK_CUDA_WGMMA_CUH_ */
