/*
 * cpu_convert.c - F16/BF16 <-> F32 conversions (portable reference) and the
 * choice of kernel tables.
 *
 * The SIMD builds (cpu_convert_avx2.c, cpu_convert_avx512.c,
 * cpu_convert_neon.c) must give the same bits as these functions for every
 * input; the F16 rules are those of the x86 F16C instructions (and of
 * AArch64's fcvtl/fcvtn), BF16 uses the same rounding as F16.
 */
#include <string.h>

#include "cpu_kernels.h"

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float cpu_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) /* inf, or NaN made quiet */
    return bits_float(sign | 0x7f800000u | (mantissa ? 0x400000u : 0u) | (mantissa << 13));
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);
  /* Subnormal: shift the leading one into the implicit bit. */
  uint32_t shift = 0;
  while (!(mantissa & 0x400u)) {
    mantissa <<= 1;
    shift++;
  }
  return bits_float(sign | ((113 - shift) << 23) | ((mantissa & 0x3ffu) << 13));
}

uint16_t cpu_f32_to_f16(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) /* NaN: keep the top payload bits, make it quiet */
    return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  if (magnitude >= 0x477ff000u) /* 65520 and up round to inf */
    return (uint16_t)(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) { /* normal F16 (>= 2^-14) */
    uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
  }
  /* Subnormal F16 result: value / 2^-24, rounded to nearest even. */
  uint32_t exponent = magnitude >> 23;
  if (exponent < 101) return sign; /* below 2^-26: rounds to zero */
  uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - exponent; /* 14..25 */
  uint32_t quotient = mantissa >> shift;
  uint32_t remainder = mantissa & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (remainder > half || (remainder == half && (quotient & 1u))) quotient++;
  return (uint16_t)(sign | quotient);
}

uint16_t cpu_f32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void f16_to_f32_portable(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = cpu_f16_to_f32(src[i]);
}

static void f32_to_f16_portable(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = cpu_f32_to_f16(src[i]);
}

static void bf16_to_f32_portable(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = cpu_bf16_to_f32(src[i]);
}

static void f32_to_bf16_portable(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = cpu_f32_to_bf16(src[i]);
}

static void stream_copy_portable(void *dst, const void *src, size_t bytes) {
  memcpy(dst, src, bytes);
}

static void stream_fence_portable(void) {}

const cpu_convert_kernels cpu_convert_portable = {
    .f16_to_f32 = f16_to_f32_portable,
    .f32_to_f16 = f32_to_f16_portable,
    .bf16_to_f32 = bf16_to_f32_portable,
    .f32_to_bf16 = f32_to_bf16_portable,
    .stream_copy = stream_copy_portable,
    .stream_fence = stream_fence_portable,
};

int64_t cpu_stream_threshold = (int64_t)32 << 20;

const cpu_convert_kernels *cpu_convert = &cpu_convert_portable;
const cpu_vec_kernels *cpu_vec = &cpu_vec_portable;

void cpu_select_kernels(void) {
  cpu_convert = &cpu_convert_portable;
  cpu_vec = &cpu_vec_portable;
#if defined(__x86_64__)
  if (cpu_has.avx512f && cpu_has.avx512bw && cpu_has.avx512vl && cpu_has.avx2 && cpu_has.fma &&
      cpu_has.f16c) {
    cpu_convert = &cpu_convert_avx512;
    cpu_vec = cpu_has.avx512bf16 ? &cpu_vec_avx512bf16 : &cpu_vec_avx512;
  } else if (cpu_has.avx2 && cpu_has.fma && cpu_has.f16c) {
    cpu_convert = &cpu_convert_avx2;
    cpu_vec = &cpu_vec_avx2;
  }
#elif defined(__aarch64__)
  if (cpu_has.neon) {
    cpu_convert = cpu_has.bf16 ? &cpu_convert_neon_bf16 : &cpu_convert_neon;
    cpu_vec = cpu_has.bf16 ? &cpu_vec_neon_bf16 : &cpu_vec_neon;
  }
#endif
}

void cpu_load_f32(int32_t dtype, const void *src, float *dst, int64_t n) {
  switch (dtype) {
    case GLLMK_F16:
      cpu_convert->f16_to_f32(src, dst, n);
      break;
    case GLLMK_BF16:
      cpu_convert->bf16_to_f32(src, dst, n);
      break;
    default:
      memcpy(dst, src, (size_t)n * sizeof(float));
      break;
  }
}

void cpu_store_f32(int32_t dtype, const float *src, void *dst, int64_t n) {
  switch (dtype) {
    case GLLMK_F16:
      cpu_convert->f32_to_f16(src, dst, n);
      break;
    case GLLMK_BF16:
      cpu_convert->f32_to_bf16(src, dst, n);
      break;
    default:
      memcpy(dst, src, (size_t)n * sizeof(float));
      break;
  }
}
