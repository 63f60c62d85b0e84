/*
 * cpu_avx512.h - BF16 conversions of 16 lanes for the *_avx512.c files
 * (bit-identical to cpu_f32_to_bf16 / cpu_bf16_to_f32).
 */
#ifndef GLLMK_CPU_AVX512_H_
#define GLLMK_CPU_AVX512_H_

#include <immintrin.h>

static inline __m512 cpu_avx512_bf16_to_f32(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Round to nearest even by adding 0x7fff + lsb; NaN keeps its top bits and
 * becomes quiet. */
static inline __m256i cpu_avx512_f32_to_bf16(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, nan, u, _mm512_set1_epi32(0x400000));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}

#ifdef __AVX512BF16__
/* The same bits with vcvtneps2bf16, which rounds the same way but flushes
 * subnormal inputs to zero: a vector holding one (rare) takes the path above. */
static inline __m256i cpu_avx512bf16_f32_to_bf16(__m512 v) {
  __m512i u = _mm512_castps_si512(v);
  __mmask16 subnormal = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000)) &
                        _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7fffffff));
  if (__builtin_expect(subnormal != 0, 0)) return cpu_avx512_f32_to_bf16(v);
  return (__m256i)_mm512_cvtneps_pbh(v);
}
#endif

#endif /* GLLMK_CPU_AVX512_H_ */
