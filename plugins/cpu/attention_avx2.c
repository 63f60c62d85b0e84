/*
 * attention_avx2.c - the attention family's AVX2 + FMA pieces (only called
 * when cpu_has says the CPU has them): the softmax step and the unpacked
 * products used for a few query rows; attention.c has the portable ones.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "cpu_avx2.h"
#include "attention.h"

/* Small loops over vector registers carry "#pragma GCC unroll": fully
 * unrolled, their arrays of vectors live in registers (-O2 alone leaves them
 * in memory). */

static ALWAYS_INLINE float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* exp(x) for x <= 0 (larger x works up to ~88), about 1 ulp: x = n ln2 + r,
 * exp(r) by a degree-6 polynomial (Cephes' coefficients), 2^n through the
 * exponent bits. Below -87 the result is tiny but not 0; NaN stays NaN. */
static ALWAYS_INLINE __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x); /* keeps a NaN x (second operand) */
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* The largest of row[0..n), n >= 1. */
static float row_max(const float *row, int64_t n) {
  float best = row[0];
  int64_t j = 0;
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(row);
    for (j = 8; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(row + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    best = _mm_cvtss_f32(h);
  }
  for (; j < n; j++)
    if (row[j] > best) best = row[j];
  return best;
}

void cpu_softmax_step_avx2(float *row, int64_t visible, int64_t width, float *max, float *sum,
                           float *o, int64_t d) {
  float block_max = row_max(row, visible);
  if (block_max > *max) {
    __m256 rescale = _mm256_set1_ps(expf(*max - block_max)); /* 0 on the first block */
    *sum *= _mm256_cvtss_f32(rescale);
    for (int64_t i = 0; i < d; i += 8)
      _mm256_storeu_ps(o + i, _mm256_mul_ps(rescale, _mm256_loadu_ps(o + i)));
    *max = block_max;
  }
  const __m256 shift = _mm256_set1_ps(*max);
  __m256 total = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= visible; j += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), shift));
    _mm256_storeu_ps(row + j, e);
    total = _mm256_add_ps(total, e);
  }
  float added = sum8(total);
  for (; j < visible; j++) {
    row[j] = expf(row[j] - *max);
    added += row[j];
  }
  *sum += added;
  for (; j < width; j++) row[j] = 0.0f;
}

/* ---------------------------------------------------- unpacked products */

/* Up to four query rows (a GQA group's heads) share each key and value load:
 * one conversion of a 16-bit row feeds all of them, instead of one per pair
 * of rows. Keys go KEYS_OF(rows) at a time in the scores, output columns
 * COLS_OF(rows) vectors at a time in the sums, so that the accumulators and
 * loaded rows fit the 16 vector registers. (For attention_direct.inc.) */
enum { LANES = 8, QUAD = 4 };
#define KEYS_OF(rows) ((rows) <= 2 ? 4 : 2)
#define COLS_OF(rows) ((rows) <= 2 ? 4 : 2)

/* Element i of a row stored as dtype. */
static ALWAYS_INLINE const void *element(int32_t dtype, const void *row, int64_t i) {
  return (const char *)row + i * (dtype == GLLMK_F32 ? 4 : 2);
}

/* The four sums of a0..a3's lanes, in order, each by the same tree. */
static ALWAYS_INLINE __m128 sum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* Scores of `rows` (1..4) query rows against `keys` (KEYS_OF(rows)) keys
 * k[0..keys), into s (row stride lds), the first `valid` keys stored. Each
 * score sums its lanes 8 elements at a time in order, then by sum4x8's
 * tree, whatever rows and keys are. */
static ALWAYS_INLINE void scores_tile(int32_t dtype, int rows, int keys, int64_t d,
                                      const float *q, int64_t ldq, const void *const *k,
                                      float scale, float *s, int64_t lds, int64_t valid) {
  __m256 acc[QUAD * 4]; /* [r * keys + j] */
#pragma GCC unroll 16
  for (int t = 0; t < rows * keys; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < d; i += 8) {
    __m256 kv[4];
#pragma GCC unroll 4
    for (int j = 0; j < keys; j++) kv[j] = cpu_avx2_load8_f32(dtype, element(dtype, k[j], i));
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
      __m256 qv = _mm256_loadu_ps(q + r * ldq + i);
#pragma GCC unroll 4
      for (int j = 0; j < keys; j++)
        acc[r * keys + j] = _mm256_fmadd_ps(qv, kv[j], acc[r * keys + j]);
    }
  }
  float out[QUAD * 4];
  const __m128 factor = _mm_set1_ps(scale);
#pragma GCC unroll 4
  for (int t = 0; t < rows * keys; t += 4) { /* 6 sums (3 rows x 2 keys): the last two twice */
    int t2 = t + 2 < rows * keys ? t + 2 : t, t3 = t + 3 < rows * keys ? t + 3 : t + 1;
    _mm_storeu_ps(out + t, _mm_mul_ps(factor, sum4x8(acc[t], acc[t + 1], acc[t2], acc[t3])));
  }
  for (int r = 0; r < rows; r++)
    for (int64_t j = 0; j < valid; j++) s[r * lds + j] = out[r * keys + j];
}

/* o rows (`rows` of them, 1..4), elements [i, i + 8 * cols): += P V over
 * `keys` keys, each sum in key order. */
static ALWAYS_INLINE void accumulate_tile(int32_t dtype, int rows, int cols, int64_t keys,
                                          int64_t i, const float *p, int64_t ldp,
                                          const void *const *v_rows, float *o, int64_t ldo) {
  __m256 acc[QUAD * 4]; /* [r * cols + c] */
#pragma GCC unroll 4
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
    for (int c = 0; c < cols; c++) acc[r * cols + c] = _mm256_loadu_ps(o + r * ldo + i + 8 * c);
  for (int64_t j = 0; j < keys; j++) {
    __m256 v[4];
#pragma GCC unroll 4
    for (int c = 0; c < cols; c++)
      v[c] = cpu_avx2_load8_f32(dtype, element(dtype, v_rows[j], i + 8 * c));
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
      __m256 pj = _mm256_broadcast_ss(p + r * ldp + j);
#pragma GCC unroll 4
      for (int c = 0; c < cols; c++)
        acc[r * cols + c] = _mm256_fmadd_ps(pj, v[c], acc[r * cols + c]);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
    for (int c = 0; c < cols; c++) _mm256_storeu_ps(o + r * ldo + i + 8 * c, acc[r * cols + c]);
}

#include "attention_direct.inc"

const cpu_attention_direct cpu_attention_direct_avx2 = {
    .scores = scores_direct,
    .accumulate = accumulate_direct,
};
#endif
