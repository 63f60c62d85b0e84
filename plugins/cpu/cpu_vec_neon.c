/*
 * cpu_vec_neon.c - the math kernels with AArch64 ASIMD (NEON; 4 floats a
 * vector, fused multiply-add, F16 conversions in hardware).
 */
#if defined(__aarch64__)
#include <arm_neon.h>

#include "cpu_neon.h"

#define VEC_BYTES 16
#define VEC_HAS_FMA 1
#define VEC_FMA(a, b, c) ((vf)vfmaq_f32((float32x4_t)(c), (float32x4_t)(a), (float32x4_t)(b)))
#define VEC_FMA64(a, b, c) ((vd)vfmaq_f64((float64x2_t)(c), (float64x2_t)(a), (float64x2_t)(b)))
/* fmin/fmax return a NaN operand (made quiet); the first operand is always
 * a constant here, so a NaN can only come from x. */
#define VEC_MIN(a, x) ((vf)vminq_f32((float32x4_t)(a), (float32x4_t)(x)))
#define VEC_MAX(a, x) ((vf)vmaxq_f32((float32x4_t)(a), (float32x4_t)(x)))
/* frecpe gives 8 bits; one frecps step makes 16 (and keeps 1 / inf = 0:
 * frecps(0, inf) is 2 by definition, not NaN). */
#define VEC_RCP_ESTIMATE(d) ((vf)cpu_neon_reciprocal_16((float32x4_t)(d)))
#define VEC_RCP_ESTIMATE_BITS 16
#define VEC_F16_TO_F32(h) ((vf)vcvt_f32_f16((float16x4_t)(h)))
#define VEC_F32_TO_F16(v) ((vh)vcvt_f16_f32((float32x4_t)(v)))
#define VEC_BF16_TO_F32(h) ((vf)cpu_neon_bf16_to_f32((uint16x4_t)(h)))
#define VEC_F32_TO_BF16(v) ((vh)cpu_neon_f32_to_bf16((float32x4_t)(v)))
#ifdef __ARM_FEATURE_BF16_VECTOR_ARITHMETIC /* built again as cpu_vec_neon_bf16.c */
#define VEC_TABLE cpu_vec_neon_bf16
#define VEC_NAME "neon-bf16"
#else
#define VEC_TABLE cpu_vec_neon
#define VEC_NAME "neon"
#endif

static inline float32x4_t cpu_neon_reciprocal_16(float32x4_t d) {
  float32x4_t r = vrecpeq_f32(d);
  return vmulq_f32(r, vrecpsq_f32(d, r));
}

#include "cpu_vec.inc"
#endif
