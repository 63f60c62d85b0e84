/*
 * cpu_gemm_neon.c - AArch64 ASIMD (NEON) GEMM micro-kernel and packing (for
 * matmul.c and attention.c) and GEMV kernels (for matmul.c); only called
 * when cpu_has says the CPU has them (every AArch64 Linux CPU does).
 *
 * Micro-kernel: a 6 x 16 tile of sums in 24 of the 32 vector registers;
 * each step loads four vectors of packed b and the six values of packed a
 * in two loads, and multiplies by lane (fmla v, v, v.s[i]). GEMV: reads b in
 * its storage dtype (cpu_neon.h) and accumulates in F32, like the AVX2 one.
 */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "cpu_gemm.h"
#include "cpu_neon.h"

/* Small loops over vector registers carry "#pragma GCC unroll": fully
 * unrolled, their arrays of vectors live in registers. */

enum { MR = CPU_GEMM_NEON_MR, NR = CPU_GEMM_NEON_NR, NV = NR / 4 };

/* acc[j] += b[j] * a[lane], for the four vectors of a row of the tile. The
 * lane must be a constant: these are always inlined with a literal. */
static ALWAYS_INLINE void fma_row_q(float32x4_t acc[NV], const float32x4_t b[NV], float32x4_t a,
                                    const int lane) {
#pragma GCC unroll 4
  for (int j = 0; j < NV; j++) acc[j] = vfmaq_laneq_f32(acc[j], b[j], a, lane);
}
static ALWAYS_INLINE void fma_row_d(float32x4_t acc[NV], const float32x4_t b[NV], float32x2_t a,
                                    const int lane) {
#pragma GCC unroll 4
  for (int j = 0; j < NV; j++) acc[j] = vfmaq_lane_f32(acc[j], b[j], a, lane);
}

static void micro_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       const cpu_gemm_epilogue *ep) {
  _Static_assert(MR == 6 && NR == 16, "the steps below name each of the 6 rows");
  float32x4_t acc[MR][NV];
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++) acc[i][j] = vdupq_n_f32(0.0f);
  for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
    float32x4_t bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++) bv[j] = vld1q_f32(b + 4 * j);
    float32x4_t a0 = vld1q_f32(a);
    float32x2_t a4 = vld1_f32(a + 4);
    fma_row_q(acc[0], bv, a0, 0);
    fma_row_q(acc[1], bv, a0, 1);
    fma_row_q(acc[2], bv, a0, 2);
    fma_row_q(acc[3], bv, a0, 3);
    fma_row_d(acc[4], bv, a4, 0);
    fma_row_d(acc[5], bv, a4, 1);
  }
  const float32x4_t alpha = vdupq_n_f32(ep->alpha), beta = vdupq_n_f32(ep->beta);
  float32x4_t bias[NV];
#pragma GCC unroll 4
  for (int j = 0; j < NV; j++) bias[j] = ep->bias ? vld1q_f32(ep->bias + 4 * j) : vdupq_n_f32(0.0f);
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) {
    float *row = c + i * ldc;
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++) {
      float32x4_t r = vfmaq_f32(bias[j], alpha, acc[i][j]);
      if (ep->read_c) r = vfmaq_f32(r, beta, vld1q_f32(row + 4 * j));
      vst1q_f32(row + 4 * j, r);
    }
  }
}

/* ---------------------------------------------------------------- packing */

/* The first n (<= 4) floats at p, zero above. */
static ALWAYS_INLINE float32x4_t load_part(const float *p, int64_t n) {
  if (n >= 4) return vld1q_f32(p);
  float t[4] = {0};
  memcpy(t, p, (size_t)(n > 0 ? n : 0) * sizeof(float));
  return vld1q_f32(t);
}
static ALWAYS_INLINE void store_part(float *p, float32x4_t v, int64_t n) {
  if (n >= 4) {
    vst1q_f32(p, v);
    return;
  }
  float t[4];
  vst1q_f32(t, v);
  memcpy(p, t, (size_t)n * sizeof(float));
}

/* Transposes the 4 x 4 block in r (r[i] = row i) in place. */
static ALWAYS_INLINE void transpose4(float32x4_t r[4]) {
  float32x4x2_t p01 = vtrnq_f32(r[0], r[1]), p23 = vtrnq_f32(r[2], r[3]);
  r[0] = vcombine_f32(vget_low_f32(p01.val[0]), vget_low_f32(p23.val[0]));
  r[1] = vcombine_f32(vget_low_f32(p01.val[1]), vget_low_f32(p23.val[1]));
  r[2] = vcombine_f32(vget_high_f32(p01.val[0]), vget_high_f32(p23.val[0]));
  r[3] = vcombine_f32(vget_high_f32(p01.val[1]), vget_high_f32(p23.val[1]));
}

/* 4 x 4 blocks; a panel width of 6 ends in a half block, stored in part so
 * that it does not spill into the next step's row. */
static void pack_transposed_neon(const float *const *rows, int64_t count, int64_t kc, int64_t width,
                                 float *dst) {
  for (int64_t i0 = 0; i0 < width; i0 += 4) {
    int64_t is = width - i0 < 4 ? width - i0 : 4;
    for (int64_t k0 = 0; k0 < kc; k0 += 4) {
      int64_t ks = kc - k0 < 4 ? kc - k0 : 4;
      float32x4_t r[4];
#pragma GCC unroll 4
      for (int64_t i = 0; i < 4; i++)
        r[i] = i0 + i < count ? load_part(rows[i0 + i] + k0, ks) : vdupq_n_f32(0.0f);
      transpose4(r);
      for (int64_t k = 0; k < ks; k++) store_part(dst + (k0 + k) * width + i0, r[k], is);
    }
  }
}

static void pack_rows_neon(const float *const *rows, int64_t count, int64_t cols, int64_t width,
                           float *dst) {
  for (int64_t k = 0; k < count; k++)
    for (int64_t j = 0; j < width; j += 4)
      vst1q_f32(dst + k * width + j, load_part(rows[k] + j, cols - j));
}

/* ------------------------------------------------------------------- GEMV */

/* Columns kk.. of nk_rows's dot products: for each of `rows` rows of b,
 * `chunks` vectors of 4, chunk c of row r into acc[i][r * chunks + c]. */
static ALWAYS_INLINE void nk_step(int32_t dtype, int m, int rows, int chunks, int64_t kk,
                                  const float *a, int64_t lda, const char *b, size_t b_row_bytes,
                                  float32x4_t (*acc)[4]) {
  const size_t esize = dtype == GLLMK_F32 ? 4 : 2;
  float32x4_t bv[4];
#pragma GCC unroll 4
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
    for (int c = 0; c < chunks; c++)
      bv[r * chunks + c] = cpu_neon_load4_f32(dtype, b + r * b_row_bytes + (size_t)(kk + 4 * c) * esize);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int c = 0; c < chunks; c++) {
      float32x4_t av = vld1q_f32(a + i * lda + kk + 4 * c);
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++)
        acc[i][r * chunks + c] = vfmaq_f32(acc[i][r * chunks + c], av, bv[r * chunks + c]);
    }
}

/* out[i * ldo + r] = dot(a row i, b row r) for i < m, r < rows (1 or 4):
 * 4 / rows vectors of each row a step. */
static ALWAYS_INLINE void nk_rows(int32_t dtype, int m, int rows, int64_t k, const float *a,
                                  int64_t lda, const char *b, size_t b_row_bytes, float *out,
                                  int64_t ldo) {
  const int chunks = 4 / rows;
  float32x4_t acc[CPU_GEMV_MAX_ROWS][4];
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) acc[i][j] = vdupq_n_f32(0.0f);
  int64_t kk = 0;
  for (; kk + 4 * chunks <= k; kk += 4 * chunks)
    nk_step(dtype, m, rows, chunks, kk, a, lda, b, b_row_bytes, acc);
  /* one vector a step past the last full step, so at most 3 columns a row
   * are left to the scalar tail */
  for (; kk + 4 <= k; kk += 4) nk_step(dtype, m, rows, 1, kk, a, lda, b, b_row_bytes, acc);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++) {
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
      float32x4_t sum = acc[i][r * chunks];
#pragma GCC unroll 4
      for (int c = 1; c < chunks; c++) sum = vaddq_f32(sum, acc[i][r * chunks + c]);
      float s = vaddvq_f32(sum);
      for (int64_t t = kk; t < k; t++)
        s += a[i * lda + t] * cpu_element_f32(dtype, b + r * b_row_bytes, t);
      out[i * ldo + r] = s;
    }
  }
}

/* out[i * ldo + n] += sum over `rows` rows of b of a[i][kk + r] * b[kk + r][n]. */
static ALWAYS_INLINE void kn_rows(int32_t dtype, int m, int rows, int64_t kk, const float *a,
                                  int64_t lda, const char *b, size_t b_row_bytes, int64_t n_count,
                                  float *out, int64_t ldo) {
  const size_t esize = dtype == GLLMK_F32 ? 4 : 2;
  float32x4_t av[CPU_GEMV_MAX_ROWS][4];
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) av[i][r] = vdupq_n_f32(a[i * lda + kk + r]);
  const char *b0 = b + (size_t)kk * b_row_bytes;
  int64_t n = 0;
  for (; n + 4 <= n_count; n += 4) {
    float32x4_t bv[4];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
      bv[r] = cpu_neon_load4_f32(dtype, b0 + r * b_row_bytes + (size_t)n * esize);
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
      float *o = out + i * ldo + n;
      float32x4_t acc = vld1q_f32(o);
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++) acc = vfmaq_f32(acc, av[i][r], bv[r]);
      vst1q_f32(o, acc);
    }
  }
  for (; n < n_count; n++)
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++)
        out[i * ldo + n] += a[i * lda + kk + r] * cpu_element_f32(dtype, b0 + r * b_row_bytes, n);
}

#include "cpu_gemv.inc"

const cpu_gemm_isa cpu_gemm_isa_neon = {
    .mr = MR,
    .nr = NR,
    .micro = micro_6x16,
    .pack_transposed = pack_transposed_neon,
    .pack_rows = pack_rows_neon,
    .gemv_nk = gemv_nk,
    .gemv_kn = gemv_kn,
};
#endif
