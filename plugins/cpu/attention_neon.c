/*
 * attention_neon.c - the attention family's AArch64 ASIMD (NEON) pieces
 * (only called when cpu_has says the CPU has them): the softmax step and the
 * unpacked products used for a few query rows; attention.c has the portable
 * ones, attention_avx2.c the AVX2 ones, which these follow at 4 lanes.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#include "attention.h"
#include "cpu_neon.h"

/* For attention_direct.inc: two query rows share each key and value load,
 * 4 keys or 8 vectors of columns at a time (32 registers hold those). */
enum { LANES = 4, QUAD = 2 };
#define KEYS_OF(rows) 4
#define COLS_OF(rows) 8

/* Small loops over vector registers carry "#pragma GCC unroll": fully
 * unrolled, their arrays of vectors live in registers. */

/* exp(x) for x <= 0 (larger x works up to ~88), about 1 ulp: x = n ln2 + r,
 * exp(r) by a degree-6 polynomial (Cephes' coefficients), 2^n through the
 * exponent bits. Below -87 the result is tiny but not 0; NaN stays NaN. */
static ALWAYS_INLINE float32x4_t exp4(float32x4_t x) {
  x = vmaxq_f32(vdupq_n_f32(-87.0f), x); /* fmax keeps a NaN */
  float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t y = vdupq_n_f32(1.9875691500e-4f);
  y = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), y, r);
  y = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), y, r);
  y = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), y, r);
  y = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), y, r);
  y = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), y, r);
  y = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), y, vmulq_f32(r, r));
  int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(y, vreinterpretq_f32_s32(e));
}

/* The largest of row[0..n), n >= 1. */
static float row_max(const float *row, int64_t n) {
  float best = row[0];
  int64_t j = 0;
  if (n >= 4) {
    float32x4_t m = vld1q_f32(row);
    for (j = 4; j + 4 <= n; j += 4) m = vmaxq_f32(m, vld1q_f32(row + j));
    best = vmaxvq_f32(m);
  }
  for (; j < n; j++)
    if (row[j] > best) best = row[j];
  return best;
}

void cpu_softmax_step_neon(float *row, int64_t visible, int64_t width, float *max, float *sum,
                           float *o, int64_t d) {
  float block_max = row_max(row, visible);
  if (block_max > *max) {
    const float rescale = expf(*max - block_max); /* 0 on the first block */
    *sum *= rescale;
    for (int64_t i = 0; i < d; i += 4) vst1q_f32(o + i, vmulq_n_f32(vld1q_f32(o + i), rescale));
    *max = block_max;
  }
  const float32x4_t shift = vdupq_n_f32(*max);
  float32x4_t total = vdupq_n_f32(0.0f);
  int64_t j = 0;
  for (; j + 4 <= visible; j += 4) {
    float32x4_t e = exp4(vsubq_f32(vld1q_f32(row + j), shift));
    vst1q_f32(row + j, e);
    total = vaddq_f32(total, e);
  }
  float added = vaddvq_f32(total);
  for (; j < visible; j++) {
    row[j] = expf(row[j] - *max);
    added += row[j];
  }
  *sum += added;
  for (; j < width; j++) row[j] = 0.0f;
}

/* ---------------------------------------------------- unpacked products */

/* Element i of a row stored as dtype. */
static ALWAYS_INLINE const void *element(int32_t dtype, const void *row, int64_t i) {
  return (const char *)row + i * (dtype == GLLMK_F32 ? 4 : 2);
}

/* The four sums of a0..a3's lanes, in order. */
static ALWAYS_INLINE float32x4_t sum4x4(float32x4_t a0, float32x4_t a1, float32x4_t a2,
                                       float32x4_t a3) {
  return vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));
}

/* Scores of `rows` (1 or 2) query rows against `keys` (4) keys, the first
 * `valid` into `s` (row stride lds). */
static ALWAYS_INLINE void scores_tile(int32_t dtype, int rows, int keys, int64_t d,
                                      const float *q, int64_t ldq, const void *const *k,
                                      float scale, float *s, int64_t lds, int64_t valid) {
  (void)keys;
  float32x4_t acc[2][4];
#pragma GCC unroll 2
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) acc[r][j] = vdupq_n_f32(0.0f);
  for (int64_t i = 0; i < d; i += 4) {
    float32x4_t kv[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) kv[j] = cpu_neon_load4_f32(dtype, element(dtype, k[j], i));
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++) {
      float32x4_t qv = vld1q_f32(q + r * ldq + i);
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) acc[r][j] = vfmaq_f32(acc[r][j], qv, kv[j]);
    }
  }
  float out[2][4];
#pragma GCC unroll 2
  for (int r = 0; r < rows; r++)
    vst1q_f32(out[r], vmulq_n_f32(sum4x4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]), scale));
  for (int r = 0; r < rows; r++)
    for (int64_t j = 0; j < valid; j++) s[r * lds + j] = out[r][j];
}

/* o rows r0, r0+1 (`rows` of them, 1 or 2), elements [i, i + 4 * vecs): += P V. */
static ALWAYS_INLINE void accumulate_tile(int32_t dtype, int rows, int vecs, int64_t keys,
                                          int64_t i, const float *p, int64_t ldp,
                                          const void *const *v_rows, float *o, int64_t ldo) {
  float32x4_t acc[2][8];
#pragma GCC unroll 2
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 8
    for (int c = 0; c < vecs; c++) acc[r][c] = vld1q_f32(o + r * ldo + i + 4 * c);
  for (int64_t j = 0; j < keys; j++) {
    float32x4_t v[8];
#pragma GCC unroll 8
    for (int c = 0; c < vecs; c++)
      v[c] = cpu_neon_load4_f32(dtype, element(dtype, v_rows[j], i + 4 * c));
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++) {
      const float pj = p[r * ldp + j];
#pragma GCC unroll 8
      for (int c = 0; c < vecs; c++) acc[r][c] = vfmaq_n_f32(acc[r][c], v[c], pj);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 8
    for (int c = 0; c < vecs; c++) vst1q_f32(o + r * ldo + i + 4 * c, acc[r][c]);
}

#include "attention_direct.inc"

const cpu_attention_direct cpu_attention_direct_neon = {
    .scores = scores_direct,
    .accumulate = accumulate_direct,
};
#endif
