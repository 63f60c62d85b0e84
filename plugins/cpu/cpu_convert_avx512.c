/*
 * cpu_convert_avx512.c - row conversions with AVX-512 (F, BW, VL) and F16C.
 * Bit-identical to cpu_convert.c: F16 through vcvtph2ps/vcvtps2ph (round to
 * nearest even), BF16 through cpu_avx512.h.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu_avx512.h"
#include "cpu_kernels.h"

static __mmask16 tail_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); }

static void f16_to_f32_avx512(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

static __m256i f32_to_f16_16(__m512 v) {
  return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

static void f32_to_f16_avx512(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i), f32_to_f16_16(_mm512_loadu_ps(src + i)));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, f32_to_f16_16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

static void bf16_to_f32_avx512(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i,
                     cpu_avx512_bf16_to_f32(_mm256_loadu_si256((const __m256i *)(src + i))));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, cpu_avx512_bf16_to_f32(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

static void f32_to_bf16_avx512(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i), cpu_avx512_f32_to_bf16(_mm512_loadu_ps(src + i)));
  if (i < n) {
    __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, cpu_avx512_f32_to_bf16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

static void stream_copy_avx512(void *dst, const void *src, size_t bytes) {
  char *d = dst;
  const char *s = src;
  size_t head = (size_t)(-(uintptr_t)d & 63);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64)
    _mm512_stream_si512((void *)d, _mm512_loadu_si512(s));
  memcpy(d, s, bytes);
}

static void stream_fence_avx512(void) { _mm_sfence(); }

const cpu_convert_kernels cpu_convert_avx512 = {
    .f16_to_f32 = f16_to_f32_avx512,
    .f32_to_f16 = f32_to_f16_avx512,
    .bf16_to_f32 = bf16_to_f32_avx512,
    .f32_to_bf16 = f32_to_bf16_avx512,
    .stream_copy = stream_copy_avx512,
    .stream_fence = stream_fence_avx512,
};
#endif
