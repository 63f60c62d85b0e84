/*
 * gk_device.h - the few things the two compilers of these kernels spell
 * differently.
 *
 * The kernels are OpenCL C. For AMD GPUs, clang-16 builds them with
 * -nogpulib (no ROCm device library: Debian 12 has none for gfx11), so
 * work-item functions, barriers, atomics and math primitives come from clang
 * builtins. For the test run on the CPU, PoCL builds the same source as plain
 * OpenCL C and the standard built-in functions are used instead. Everything
 * above these primitives (exp, erf, tanh, sin/cos, dtype conversions of
 * bf16) is written once in gk_math.h, so the PoCL run exercises the very
 * arithmetic the GPU runs.
 */
#ifndef GK_DEVICE_H_
#define GK_DEVICE_H_

#pragma OPENCL EXTENSION cl_khr_fp64 : enable

#define GK_INLINE static inline __attribute__((always_inline))

#if defined(__AMDGCN__)

#pragma OPENCL EXTENSION cl_khr_fp16 : enable

/* The AQL dispatch packet (hsa_kernel_dispatch_packet_t): workgroup_size_x
 * is the u16 at byte 4, grid_size_x/y the u32s at bytes 12 and 16. */
GK_INLINE uint gk_dispatch_u32(int word) {
  return ((const __constant uint *)__builtin_amdgcn_dispatch_ptr())[word];
}
GK_INLINE uint gk_local_id(void) { return __builtin_amdgcn_workitem_id_x(); }
GK_INLINE uint gk_group_x(void) { return __builtin_amdgcn_workgroup_id_x(); }
GK_INLINE uint gk_group_y(void) { return __builtin_amdgcn_workgroup_id_y(); }
GK_INLINE uint gk_groups_x(void) { return gk_dispatch_u32(3) / (gk_dispatch_u32(1) & 0xffffu); }
GK_INLINE uint gk_groups_y(void) { return gk_dispatch_u32(4); } /* work-groups are 1 high */

/* barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE) */
GK_INLINE void gk_barrier(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

GK_INLINE uint gk_atomic_cmpxchg(volatile global uint *p, uint expected, uint desired) {
  __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}

GK_INLINE float gk_exp2_raw(float x) { return __builtin_exp2f(x); }
GK_INLINE float gk_log2_raw(float x) { return __builtin_log2f(x); }
GK_INLINE float gk_sqrt(float x) { return __builtin_sqrtf(x); }
GK_INLINE float gk_fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
GK_INLINE float gk_rint(float x) { return __builtin_rintf(x); }
GK_INLINE float gk_fabs(float x) { return __builtin_fabsf(x); }
GK_INLINE float gk_ldexp(float x, int n) { return __builtin_amdgcn_ldexpf(x, n); }
GK_INLINE double gk_fma_f64(double a, double b, double c) { return __builtin_fma(a, b, c); }
GK_INLINE double gk_rint_f64(double x) { return __builtin_rint(x); }

GK_INLINE float gk_f16_to_f32(ushort h) { return (float)__builtin_astype(h, half); }
GK_INLINE ushort gk_f32_to_f16(float f) { return __builtin_astype((half)f, ushort); }

#else /* OpenCL C on PoCL */

GK_INLINE uint gk_local_id(void) { return (uint)get_local_id(0); }
GK_INLINE uint gk_group_x(void) { return (uint)get_group_id(0); }
GK_INLINE uint gk_group_y(void) { return (uint)get_group_id(1); }
GK_INLINE uint gk_groups_x(void) { return (uint)get_num_groups(0); }
GK_INLINE uint gk_groups_y(void) { return (uint)get_num_groups(1); }
GK_INLINE void gk_barrier(void) { barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE); }

GK_INLINE uint gk_atomic_cmpxchg(volatile global uint *p, uint expected, uint desired) {
  return atomic_cmpxchg(p, expected, desired);
}

GK_INLINE float gk_exp2_raw(float x) { return exp2(x); }
GK_INLINE float gk_log2_raw(float x) { return log2(x); }
GK_INLINE float gk_sqrt(float x) { return sqrt(x); }
GK_INLINE float gk_fma(float a, float b, float c) { return fma(a, b, c); }
GK_INLINE float gk_rint(float x) { return rint(x); }
GK_INLINE float gk_fabs(float x) { return fabs(x); }
GK_INLINE float gk_ldexp(float x, int n) { return ldexp(x, n); }
GK_INLINE double gk_fma_f64(double a, double b, double c) { return fma(a, b, c); }
GK_INLINE double gk_rint_f64(double x) { return rint(x); }

/* vload_half/vstore_half need no cl_khr_fp16. */
GK_INLINE float gk_f16_to_f32(ushort h) { return vload_half(0, (const private half *)&h); }
GK_INLINE ushort gk_f32_to_f16(float f) {
  ushort h;
  vstore_half_rte(f, 0, (private half *)&h);
  return h;
}

#endif

#endif /* GK_DEVICE_H_ */
