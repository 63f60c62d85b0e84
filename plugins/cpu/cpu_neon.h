/*
 * cpu_neon.h - loads and conversions of 4 lanes for the *_neon.c files
 * (bit-identical to cpu_f32_to_bf16 / cpu_bf16_to_f32; F16 goes through
 * fcvtl/fcvtn, which are base AArch64 ASIMD and round to nearest even).
 */
#ifndef GLLMK_CPU_NEON_H_
#define GLLMK_CPU_NEON_H_

#include <arm_neon.h>

#include "gllmk/gllmk.h"

static inline float32x4_t cpu_neon_bf16_to_f32(uint16x4_t h) {
  return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* Round to nearest even by adding 0x7fff + lsb; NaN keeps its top bits and
 * becomes quiet. With FEAT_BF16 (built as *_neon_bf16.c) one bfcvtn does the
 * same: it rounds to nearest even under Linux's default FPCR (no flush to
 * zero, no default NaN), keeping subnormals and quieting NaNs alike. */
static inline uint16x4_t cpu_neon_f32_to_bf16(float32x4_t v) {
#ifdef __ARM_FEATURE_BF16_VECTOR_ARITHMETIC
  return vreinterpret_u16_bf16(vcvt_bf16_f32(v));
#else
  uint32x4_t u = vreinterpretq_u32_f32(v);
  uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  uint32x4_t rounded = vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), lsb);
  uint32x4_t nan = vmvnq_u32(vceqq_f32(v, v));
  rounded = vbslq_u32(nan, vorrq_u32(u, vdupq_n_u32(0x400000)), rounded);
  return vshrn_n_u32(rounded, 16);
#endif
}

/* 4 elements at p (F32, F16 or BF16) as F32. Always inlined, so that a
 * caller's constant dtype selects one load. */
static inline __attribute__((always_inline)) float32x4_t cpu_neon_load4_f32(int32_t dtype,
                                                                            const void *p) {
  if (dtype == GLLMK_F32) return vld1q_f32(p);
  if (dtype == GLLMK_F16) return vcvt_f32_f16(vld1_f16(p));
  return cpu_neon_bf16_to_f32(vld1_u16(p));
}

#endif /* GLLMK_CPU_NEON_H_ */
