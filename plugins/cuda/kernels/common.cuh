/*
 * common.cuh - helpers shared by every kernel file: storage types, loads and
 * stores of one element or eight elements converted to float, reductions.
 *
 * Kernels are exported with C names gk_<op>_<dtype> through GK_KERNEL so the
 * host finds them with cuModuleGetFunction; every kernel takes one parameter
 * block from cuda_params.h by value.
 */
#ifndef GLLMK_CUDA_COMMON_CUH_
#define GLLMK_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_params.h"

typedef __half f16;
typedef __nv_bfloat16 bf16;

#define GK_KERNEL extern "C" __global__ void

/* The first statement of every kernel (GK_ENTRY). The host launches kernels with
 * programmatic stream serialization on sm_90 (device.c), which lets the
 * launch of a kernel overlap the end of the kernel ahead of it in the
 * stream: here each waits for that kernel to complete and its writes to be
 * visible. (No kernel asks for its dependents early with
 * griddepcontrol.launch_dependents: their waiting blocks would hold the
 * registers and shared memory that a bandwidth-bound kernel's own blocks
 * need; on an H200 that cost decode of 32 sequences 9%.) Launched without
 * the attribute, or before sm_90, a no-op. */
__device__ __forceinline__ void gk_grid_dependency() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* Defines kernel `name` (launch bounds `bounds`) of one parameter block p
 * of type params_t, whose body is the statement after gk_grid_dependency:
 * every kernel is defined through this, so none can touch memory before the
 * kernel ahead of it has finished. */
#define GK_ENTRY(bounds, name, params_t, ...) \
  GK_KERNEL bounds name(const params_t p) {   \
    gk_grid_dependency();                     \
    __VA_ARGS__;                              \
  }

/* Instantiates kernel gk_<name>_<dtype> calling impl<T>(params) for the three
 * float storage types. */
#define GK_FLOAT_KERNELS(name, impl, params_t, bounds)         \
  GK_ENTRY(bounds, gk_##name##_f32, params_t, impl<float>(p)) \
  GK_ENTRY(bounds, gk_##name##_f16, params_t, impl<f16>(p))   \
  GK_ENTRY(bounds, gk_##name##_bf16, params_t, impl<bf16>(p))

/* ------------------------------------------------------------- conversion */

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(f16 v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(bf16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ f16 from_f32<f16>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float v) { return __float2bfloat16_rn(v); }

template <class T> __device__ __forceinline__ float load1(const T *p) { return to_f32(*p); }
template <class T> __device__ __forceinline__ void store1(T *p, float v) { *p = from_f32<T>(v); }

/* Eight consecutive elements; the address is 16-byte aligned. */
__device__ __forceinline__ void load8(const float *p, float v[8]) {
  const float4 a = reinterpret_cast<const float4 *>(p)[0];
  const float4 b = reinterpret_cast<const float4 *>(p)[1];
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}
/* The elements of one 16-byte vector held in a register quadruple. */
__device__ __forceinline__ void unpack16(float *, uint4 u, float v[4]) {
  v[0] = __uint_as_float(u.x); v[1] = __uint_as_float(u.y);
  v[2] = __uint_as_float(u.z); v[3] = __uint_as_float(u.w);
}
__device__ __forceinline__ void unpack16(f16 *, uint4 u, float v[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&w[i]));
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void unpack16(bf16 *, uint4 u, float v[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
template <class T> __device__ __forceinline__ void load8(const T *p, float v[8]) {
  unpack16((T *)nullptr, *reinterpret_cast<const uint4 *>(p), v);
}

/* Four consecutive elements; the address is aligned to four elements. */
__device__ __forceinline__ void load4(const float *p, float v[4]) {
  const float4 a = *reinterpret_cast<const float4 *>(p);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
}
__device__ __forceinline__ void load4(const f16 *p, float v[4]) {
  const uint2 u = *reinterpret_cast<const uint2 *>(p);
  const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&u.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&u.y));
  v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
}
__device__ __forceinline__ void load4(const bf16 *p, float v[4]) {
  const uint2 u = *reinterpret_cast<const uint2 *>(p);
  v[0] = __uint_as_float(u.x << 16);
  v[1] = __uint_as_float(u.x & 0xffff0000u);
  v[2] = __uint_as_float(u.y << 16);
  v[3] = __uint_as_float(u.y & 0xffff0000u);
}

__device__ __forceinline__ void store8(float *p, const float v[8]) {
  reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ uint32_t pack2(f16 *, float a, float b) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ uint32_t pack2(bf16 *, float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
/* One 16-byte vector's elements as a register quadruple (unpack16 reversed). */
__device__ __forceinline__ uint4 pack16(float *, const float v[4]) {
  return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
}
template <class T> __device__ __forceinline__ uint4 pack16(T *tag, const float v[8]) {
  return make_uint4(pack2(tag, v[0], v[1]), pack2(tag, v[2], v[3]), pack2(tag, v[4], v[5]), pack2(tag, v[6], v[7]));
}
template <class T> __device__ __forceinline__ void store8(T *p, const float v[8]) {
  *reinterpret_cast<uint4 *>(p) = pack16(p, v);
}

/* One 16-byte vector of T (4 f32 or 8 16-bit elements); the address is
 * 16-byte aligned. */
template <class T> struct vec16 {
  static constexpr int elems = 16 / (int)sizeof(T);
};
__device__ __forceinline__ void load16(const float *p, float v[4]) { load4(p, v); }
template <class T> __device__ __forceinline__ void load16(const T *p, float v[8]) { load8(p, v); }
__device__ __forceinline__ void store16(float *p, const float v[4]) {
  *reinterpret_cast<float4 *>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <class T> __device__ __forceinline__ void store16(T *p, const float v[8]) { store8(p, v); }

/* Typed pointer from a device address plus an element offset. */
template <class T> __device__ __forceinline__ T *ptr_at(uint64_t base, int64_t offset) {
  return reinterpret_cast<T *>(base) + offset;
}

__device__ __forceinline__ int32_t index_at(const cuda_index_view &v, int64_t i) {
  return reinterpret_cast<const int32_t *>(v.data)[(i / v.cols) * v.stride + i % v.cols];
}

__device__ __forceinline__ void raise_error(uint64_t flag, uint32_t bit) {
  atomicOr(reinterpret_cast<unsigned int *>(flag), bit);
}

/* Calls f(first column, values) for each of this thread's 8-element units
 * of a row, in for_row's order; only where for_row's `vec` holds. Columns
 * count in I: int32_t where the caller knows the row fits, which saves a
 * bandwidth-bound row's 64-bit index arithmetic. */
template <int UNROLL = 4, class I = int64_t, class T, class F>
__device__ __forceinline__ void for_row_units(const T *row, I cols, F f) {
  constexpr int WORDS = (int)sizeof(T) / 2; /* 16-byte words a unit */
  const I units = cols / 8, step = (I)blockDim.x;
  for (I u0 = threadIdx.x; u0 < units; u0 += UNROLL * step) {
    /* Every load issued before any is unpacked: unpacked at once, a unit
     * of 16-bit elements holds 8 registers instead of 4, and under a
     * 1024-thread block's 64 registers the loads went out fewer at a time. */
    uint4 w[UNROLL][WORDS];
#pragma unroll
    for (int i = 0; i < UNROLL; i++)
      if (u0 + i * step < units)
#pragma unroll
        for (int k = 0; k < WORDS; k++) w[i][k] = reinterpret_cast<const uint4 *>(row + 8 * (u0 + i * step))[k];
#pragma unroll
    for (int i = 0; i < UNROLL; i++)
      if (u0 + i * step < units) {
        float v[8];
#pragma unroll
        for (int k = 0; k < WORDS; k++) unpack16((T *)nullptr, w[i][k], v + 4 * k);
        f(8 * (u0 + i * step), v);
      }
  }
}

/* Calls f(column, value) for this thread's elements of a row: 8-element
 * units u = threadIdx.x + k * blockDim.x, UNROLL loads in flight, when `vec`
 * (cols % 8 == 0, row 16-byte aligned); else columns threadIdx.x + k *
 * blockDim.x. The order is fixed, so sums over it are reproducible. */
template <int UNROLL = 4, class I = int64_t, class T, class F>
__device__ __forceinline__ void for_row(const T *row, I cols, int vec, F f) {
  if (vec) {
    for_row_units<UNROLL, I>(row, cols, [&](I c, const float v[8]) {
#pragma unroll
      for (int e = 0; e < 8; e++) f(c + e, v[e]);
    });
  } else {
    for (I c = threadIdx.x; c < cols; c += blockDim.x) f(c, load1(row + c));
  }
}

/* 2^x in one MUFU instruction (ex2.approx: about 2 ulp; results below
 * 2^-126 flush to zero). */
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* e^x through the hardware exp2: a few ulp, far inside every tolerance. */
__device__ __forceinline__ float exp_fast(float x) { return exp2_ftz(x * 1.4426950408889634f); }

/* x sigmoid(x); __fdividef is exact enough here and 0 for a huge divisor.
 * silu and swiglu use it, and matmul's glu. */
__device__ __forceinline__ float silu(float x) { return __fdividef(x, 1.0f + exp_fast(-x)); }

/* pos * frequency reduced to [-pi, pi] in double, so that large positions
 * keep their accuracy. */
__device__ __forceinline__ float rope_reduced_angle(double pos, double frequency) {
  const double two_pi = 6.283185307179586476925, inv_two_pi = 0.15915494309189533576888;
  const double a = pos * frequency;
  return (float)fma(-two_pi, rint(a * inv_two_pi), a);
}

/* (cos, sin) of pos * frequency: the reduced angle takes sincosf's fast path. */
__device__ __forceinline__ void rope_angle(double pos, double frequency, float &c, float &s) {
  sincosf(rope_reduced_angle(pos, frequency), &s, &c);
}

/* ---------------------------------------------------------- split work */

/* Named barrier `id` (1-15; 0 is __syncthreads') of `threads` threads:
 * sync waits for the others, arrive only counts this warp in. */
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

/* Whether this block is the last of `expected` to reach counters[index]
 * (then it resets the counter to 0 for the next launch), for every thread.
 * What the blocks wrote before arriving is visible to the last one, which
 * should read it with __ldcg (L2), not through its L1. Every thread of the
 * block calls it, or, with a named barrier (1-15), the block's first
 * `threads` (a warp-specialized kernel's consumers, whose loader has left). */
__device__ __forceinline__ bool last_to_arrive(uint64_t counters, int64_t index, int expected, int barrier = 0,
                                               int threads = 0) {
  __shared__ int is_last;
  auto sync = [&]() {
    if (barrier) named_barrier_sync(barrier, threads);
    else __syncthreads();
  };
  __threadfence();
  sync();
  if (threadIdx.x == 0) {
    int *counter = ptr_at<int>(counters, index);
    is_last = atomicAdd(counter, 1) == expected - 1;
    if (is_last) *counter = 0;
  }
  sync();
  const bool last = is_last;
  if (last) __threadfence();
  return last;
}

/* -------------------------------------------------------------- reductions */

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result. `scratch` holds 32 floats. */
__device__ __forceinline__ float block_sum(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads(); /* the previous call's readers are done with scratch */
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float *scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

/* ------------------------------------------------------------ async copies */

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* 16-byte global -> shared copy (sm_80+); src_bytes = 0 writes zeros. */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
#else
  uint4 v = make_uint4(0, 0, 0, 0);
  if (src_bytes) v = *reinterpret_cast<const uint4 *>(src);
  *reinterpret_cast<uint4 *>(dst) = v;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

#endif /* GLLMK_CUDA_COMMON_CUH_ */
