/*
 * cpu_vec_avx2.c - the math kernels with AVX2, FMA and F16C (8 floats a
 * vector).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu_avx2.h"

#define VEC_BYTES 32
#define VEC_HAS_FMA 1
#define VEC_FMA(a, b, c) ((vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define VEC_FMA64(a, b, c) ((vd)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
/* minps/maxps return their second operand when either one is NaN */
#define VEC_MIN(a, x) ((vf)_mm256_min_ps((__m256)(a), (__m256)(x)))
#define VEC_MAX(a, x) ((vf)_mm256_max_ps((__m256)(a), (__m256)(x)))
#define VEC_RCP_ESTIMATE(d) ((vf)_mm256_rcp_ps((__m256)(d)))
#define VEC_RCP_ESTIMATE_BITS 12
#define VEC_F16_TO_F32(h) ((vf)_mm256_cvtph_ps((__m128i)(h)))
#define VEC_F32_TO_F16(v) \
  ((vh)_mm256_cvtps_ph((__m256)(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VEC_BF16_TO_F32(h) ((vf)cpu_avx2_bf16_to_f32((__m128i)(h)))
#define VEC_F32_TO_BF16(v) ((vh)cpu_avx2_f32_to_bf16((__m256)(v)))
#define VEC_F32X2_TO_BF16(a, b) ((vh2)cpu_avx2_f32x2_to_bf16((__m256)(a), (__m256)(b)))
#define VEC_LOW_TO_F64(v) ((vd)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)(v))))
#define VEC_HIGH_TO_F64(v) ((vd)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)(v), 1)))
/* blendvps picks by the sign bit of its mask */
#define VEC_SELECT_SIGN(x, a, b) ((vf)_mm256_blendv_ps((__m256)(b), (__m256)(a), (__m256)(x)))
#define VEC_TABLE cpu_vec_avx2
#define VEC_NAME "avx2"
#include "cpu_vec.inc"
#endif
