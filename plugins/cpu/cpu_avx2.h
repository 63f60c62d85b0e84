/*
 * cpu_avx2.h - loads of 8 lanes in any storage dtype for the *_avx2.c files.
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

#endif /* GLLMK_CPU_AVX2_H_ */
