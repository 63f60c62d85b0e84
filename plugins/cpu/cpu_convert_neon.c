/*
 * cpu_convert_neon.c - row conversions with AArch64 ASIMD; tails use the
 * portable code. Bit-identical to cpu_convert.c: F16 through fcvtl/fcvtn
 * (round to nearest even), BF16 through cpu_neon.h. Built again as
 * cpu_convert_neon_bf16.c for CPUs with FEAT_BF16 (bfcvtn).
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_neon.h"

#ifdef __ARM_FEATURE_BF16_VECTOR_ARITHMETIC
#define CONVERT_TABLE cpu_convert_neon_bf16
#else
#define CONVERT_TABLE cpu_convert_neon
#endif

static void f16_to_f32_neon(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float16x8_t h = vld1q_f16((const void *)(src + i));
    vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
  }
  cpu_convert_portable.f16_to_f32(src + i, dst + i, n - i);
}

static void f32_to_f16_neon(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    float16x4_t low = vcvt_f16_f32(vld1q_f32(src + i));
    vst1q_f16((void *)(dst + i), vcvt_high_f16_f32(low, vld1q_f32(src + i + 4)));
  }
  cpu_convert_portable.f32_to_f16(src + i, dst + i, n - i);
}

static void bf16_to_f32_neon(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint16x8_t h = vld1q_u16(src + i);
    vst1q_f32(dst + i, cpu_neon_bf16_to_f32(vget_low_u16(h)));
    vst1q_f32(dst + i + 4, cpu_neon_bf16_to_f32(vget_high_u16(h)));
  }
  cpu_convert_portable.bf16_to_f32(src + i, dst + i, n - i);
}

static void f32_to_bf16_neon(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint16x4_t low = cpu_neon_f32_to_bf16(vld1q_f32(src + i));
    uint16x4_t high = cpu_neon_f32_to_bf16(vld1q_f32(src + i + 4));
    vst1q_u16(dst + i, vcombine_u16(low, high));
  }
  cpu_convert_portable.f32_to_bf16(src + i, dst + i, n - i);
}

/* AArch64's non-temporal store, stnp, is only a hint, with no fence of its
 * own to order; the copy is left to the C library's memcpy until an Arm
 * machine can show that anything else is faster (docs/performance.md). */
static void stream_copy_neon(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

static void stream_fence_neon(void) {}

const cpu_convert_kernels CONVERT_TABLE = {
    .f16_to_f32 = f16_to_f32_neon,
    .f32_to_f16 = f32_to_f16_neon,
    .bf16_to_f32 = bf16_to_f32_neon,
    .f32_to_bf16 = f32_to_bf16_neon,
    .stream_copy = stream_copy_neon,
    .stream_fence = stream_fence_neon,
};
#endif
