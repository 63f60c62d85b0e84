/*
 * cpu_avx2.h - loads of 8 lanes in any storage dtype and BF16 conversions of
 * 8 lanes (bit-identical to cpu_f32_to_bf16 / cpu_bf16_to_f32) for the
 * *_avx2.c files.
 */
#ifndef GLLMK_CPU_AVX2_H_
#define GLLMK_CPU_AVX2_H_

#include <immintrin.h>

#include "gllmk/gllmk.h"

/* 8 elements at p (F32, F16 or BF16) as F32. Always inlined, so that a
 * caller's constant dtype selects one load. */
static inline __attribute__((always_inline)) __m256 cpu_avx2_load8_f32(int32_t dtype,
                                                                       const void *p) {
  if (dtype == GLLMK_F32) return _mm256_loadu_ps(p);
  __m128i h = _mm_loadu_si128(p);
  if (dtype == GLLMK_F16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 BF16 values as F32: zero-extended to 32 bits, moved to the top half. */
static inline __attribute__((always_inline)) __m256 cpu_avx2_bf16_to_f32(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 F32 values as BF16 in the low 16 bits of each 32-bit lane, round to
 * nearest even by adding 0x7fff + lsb; NaN keeps its top bits and becomes
 * quiet (the F32 quiet bit is BF16's). */
static inline __attribute__((always_inline)) __m256i cpu_avx2_f32_to_bf16_lanes(__m256 v) {
  __m256i u = _mm256_castps_si256(v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb);
  __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x400000));
  __m256i bits = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet), nan));
  return _mm256_srli_epi32(bits, 16);
}

/* 8 F32 values as BF16. */
static inline __attribute__((always_inline)) __m128i cpu_avx2_f32_to_bf16(__m256 v) {
  __m256i bits = cpu_avx2_f32_to_bf16_lanes(v);
  return _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
}

/* 16 F32 values (a, then b) as BF16: packus works within 128-bit lanes, the
 * permute restores the element order. */
static inline __attribute__((always_inline)) __m256i cpu_avx2_f32x2_to_bf16(__m256 a, __m256 b) {
  __m256i packed =
      _mm256_packus_epi32(cpu_avx2_f32_to_bf16_lanes(a), cpu_avx2_f32_to_bf16_lanes(b));
  return _mm256_permute4x64_epi64(packed, 0xd8);
}

#endif /* GLLMK_CPU_AVX2_H_ */
