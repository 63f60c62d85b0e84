/*
 * cpu_vec_avx512.c - the math kernels with AVX-512 (16 floats a vector).
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu_avx512.h"

#define VEC_BYTES 64
#define VEC_HAS_FMA 1
#define VEC_FMA(a, b, c) ((vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define VEC_FMA64(a, b, c) ((vd)_mm512_fmadd_pd((__m512d)(a), (__m512d)(b), (__m512d)(c)))
/* minps/maxps return their second operand when either one is NaN */
#define VEC_MIN(a, x) ((vf)_mm512_min_ps((__m512)(a), (__m512)(x)))
#define VEC_MAX(a, x) ((vf)_mm512_max_ps((__m512)(a), (__m512)(x)))
#define VEC_RCP_ESTIMATE(d) ((vf)_mm512_rcp14_ps((__m512)(d)))
#define VEC_RCP_ESTIMATE_BITS 14
#define VEC_SCALEF(p, n) ((vf)_mm512_scalef_ps((__m512)(p), (__m512)(n)))
#define VEC_F16_TO_F32(h) ((vf)_mm512_cvtph_ps((__m256i)(h)))
#define VEC_F32_TO_F16(v) \
  ((vh)_mm512_cvtps_ph((__m512)(v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define VEC_BF16_TO_F32(h) ((vf)cpu_avx512_bf16_to_f32((__m256i)(h)))
#ifdef __AVX512BF16__ /* built again as cpu_vec_avx512bf16.c */
#define VEC_F32_TO_BF16(v) ((vh)cpu_avx512bf16_f32_to_bf16((__m512)(v)))
#define VEC_TABLE cpu_vec_avx512bf16
#define VEC_NAME "avx512bf16"
#else
#define VEC_F32_TO_BF16(v) ((vh)cpu_avx512_f32_to_bf16((__m512)(v)))
#define VEC_TABLE cpu_vec_avx512
#define VEC_NAME "avx512"
#endif
#include "cpu_vec.inc"
#endif
