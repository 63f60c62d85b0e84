/*
 * cpu_convert_avx2.c - row conversions with AVX2 and F16C; tails use the
 * portable code. Bit-identical to cpu_convert.c.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu_avx2.h"
#include "cpu_kernels.h"

static void f16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
  cpu_convert_portable.f16_to_f32(src + i, dst + i, n - i);
}

static void f32_to_f16_avx2(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        (__m128i *)(dst + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  cpu_convert_portable.f32_to_f16(src + i, dst + i, n - i);
}

static void bf16_to_f32_avx2(const uint16_t *src, float *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16)));
  }
  cpu_convert_portable.bf16_to_f32(src + i, dst + i, n - i);
}

static void f32_to_bf16_avx2(const float *src, uint16_t *dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256((__m256i *)(dst + i),
                        cpu_avx2_f32x2_to_bf16(_mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8)));
  cpu_convert_portable.f32_to_bf16(src + i, dst + i, n - i);
}

static void stream_copy_avx2(void *dst, const void *src, size_t bytes) {
  char *d = dst;
  const char *s = src;
  size_t head = (size_t)(-(uintptr_t)d & 63);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; bytes -= 64, d += 64, s += 64) {
    _mm256_stream_si256((__m256i *)(void *)d, _mm256_loadu_si256((const __m256i *)(const void *)s));
    _mm256_stream_si256((__m256i *)(void *)(d + 32),
                        _mm256_loadu_si256((const __m256i *)(const void *)(s + 32)));
  }
  memcpy(d, s, bytes);
}

static void stream_fence_avx2(void) { _mm_sfence(); }

const cpu_convert_kernels cpu_convert_avx2 = {
    .f16_to_f32 = f16_to_f32_avx2,
    .f32_to_f16 = f32_to_f16_avx2,
    .bf16_to_f32 = bf16_to_f32_avx2,
    .f32_to_bf16 = f32_to_bf16_avx2,
    .stream_copy = stream_copy_avx2,
    .stream_fence = stream_fence_avx2,
};
#endif
