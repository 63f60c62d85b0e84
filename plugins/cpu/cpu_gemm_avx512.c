/*
 * cpu_gemm_avx512.c - AVX-512 GEMM micro-kernel and packing (for matmul.c
 * and attention.c) and GEMV kernels (for matmul.c); compiled with
 * -mavx512f/bw/vl, only called when cpu_has says the CPU has them.
 *
 * Micro-kernel: a 12 x 32 tile of sums in 24 zmm registers; each step loads
 * two vectors of packed b and broadcasts 12 values of packed a.
 * GEMV: reads b in its storage dtype (BF16 widened by a shift, F16 by
 * vcvtph2ps) and multiplies with F32 activations, accumulating in F32.
 */
#if defined(__x86_64__)
#include <immintrin.h>

#include "cpu_gemm.h"

/* Small loops over vector registers carry "#pragma GCC unroll": fully
 * unrolled, their arrays of vectors live in registers (-O2 alone leaves them
 * in memory). */

enum { MR = CPU_GEMM_AVX512_MR, NR = CPU_GEMM_AVX512_NR };

/* The first `count` (<= 16) lanes. */
static ALWAYS_INLINE __mmask16 tail_mask(int64_t count) {
  return (__mmask16)((1u << count) - 1u);
}

static void micro_12x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                        const cpu_gemm_epilogue *ep) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  const __m512 alpha = _mm512_set1_ps(ep->alpha), beta = _mm512_set1_ps(ep->beta);
  const __m512 bias0 = ep->bias ? _mm512_loadu_ps(ep->bias) : _mm512_setzero_ps();
  const __m512 bias1 = ep->bias ? _mm512_loadu_ps(ep->bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) {
    float *row = c + i * ldc;
    __m512 r0 = _mm512_fmadd_ps(alpha, acc[i][0], bias0);
    __m512 r1 = _mm512_fmadd_ps(alpha, acc[i][1], bias1);
    if (ep->read_c) {
      r0 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(row), r0);
      r1 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(row + 16), r1);
    }
    _mm512_storeu_ps(row, r0);
    _mm512_storeu_ps(row + 16, r1);
  }
}

/* ---------------------------------------------------------------- packing */

/* Transposes the 16 x 16 block in r (r[i] = row i) in place. */
static ALWAYS_INLINE void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  /* Then r[4g + j], lane L: rows 4g..4g+3 of column 4L + j. */
#pragma GCC unroll 4
  for (int g = 0; g < 16; g += 4) {
    __m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
    __m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
    r[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  /* Gather lane L of the four groups into column 4L + j. */
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    __m512 a = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    __m512 b = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    __m512 c = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    __m512 d = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    t[j] = _mm512_shuffle_f32x4(a, c, 0x88);
    t[4 + j] = _mm512_shuffle_f32x4(b, d, 0x88);
    t[8 + j] = _mm512_shuffle_f32x4(a, c, 0xdd);
    t[12 + j] = _mm512_shuffle_f32x4(b, d, 0xdd);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

static void pack_transposed_avx512(const float *const *rows, int64_t count, int64_t kc,
                                   int64_t width, float *dst) {
  for (int64_t i0 = 0; i0 < width; i0 += 16) {
    __mmask16 store_mask = width - i0 >= 16 ? (__mmask16)0xffff : tail_mask(width - i0);
    for (int64_t k0 = 0; k0 < kc; k0 += 16) {
      int64_t ks = kc - k0 < 16 ? kc - k0 : 16;
      __mmask16 load_mask = tail_mask(ks);
      __m512 r[16];
#pragma GCC unroll 16
      for (int64_t i = 0; i < 16; i++)
        r[i] = i0 + i < count ? _mm512_maskz_loadu_ps(load_mask, rows[i0 + i] + k0)
                              : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t k = 0; k < ks; k++)
        _mm512_mask_storeu_ps(dst + (k0 + k) * width + i0, store_mask, r[k]);
    }
  }
}

static void pack_rows_avx512(const float *const *rows, int64_t count, int64_t cols, int64_t width,
                             float *dst) {
  for (int64_t k = 0; k < count; k++)
    for (int64_t j = 0; j < width; j += 16) {
      __mmask16 mask = cols - j >= 16 ? (__mmask16)0xffff : cols > j ? tail_mask(cols - j) : 0;
      _mm512_storeu_ps(dst + k * width + j, _mm512_maskz_loadu_ps(mask, rows[k] + j));
    }
}

/* ------------------------------------------------------------------- GEMV */

/* The GEMV loops run on whole vectors with plain loads and stores, then
 * once on the tail with masked ones: with masked moves in every step the
 * decode GEMV ran 1.3-1.7x slower on a Zen 5 (docs/performance.md). `full`
 * is a constant where these are inlined. */

/* 16 elements (of b, a or out) as F32: all of them (full), or the first `mask` lanes
 * with the rest read as 0. */
static ALWAYS_INLINE __m512 load16(int32_t dtype, const void *p, int full, __mmask16 mask) {
  if (dtype == GLLMK_F32) return full ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask, p);
  __m256i h = full ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi16(mask, p);
  if (dtype == GLLMK_F16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

static ALWAYS_INLINE void store16_f32(float *p, __m512 v, int full, __mmask16 mask) {
  if (full)
    _mm512_storeu_ps(p, v);
  else
    _mm512_mask_storeu_ps(p, mask, v);
}

/* Columns kk.. of nk_rows's dot products: for each of `rows` rows of b,
 * `chunks` vectors of 16 (the first `mask` lanes of one unless full), chunk
 * c of row r into acc[i][r * chunks + c]. */
static ALWAYS_INLINE void nk_step(int32_t dtype, int m, int rows, int chunks, int64_t kk,
                                  const float *a, int64_t lda, const char *b, size_t b_row_bytes,
                                  int full, __mmask16 mask, __m512 (*acc)[4]) {
  const size_t esize = dtype == GLLMK_F32 ? 4 : 2;
  __m512 bv[4];
#pragma GCC unroll 4
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
    for (int c = 0; c < chunks; c++)
      bv[r * chunks + c] = load16(dtype, b + r * b_row_bytes + (size_t)(kk + 16 * c) * esize, full, mask);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int c = 0; c < chunks; c++) {
      __m512 av = load16(GLLMK_F32, a + i * lda + kk + 16 * c, full, mask);
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++)
        acc[i][r * chunks + c] = _mm512_fmadd_ps(av, bv[r * chunks + c], acc[i][r * chunks + c]);
    }
}

/* out[i * ldo + r] = dot(a row i, b row r) for i < m, r < rows (1 or 4):
 * 4 / rows vectors of each row a step. */
static ALWAYS_INLINE void nk_rows(int32_t dtype, int m, int rows, int64_t k, const float *a,
                                  int64_t lda, const char *b, size_t b_row_bytes, float *out,
                                  int64_t ldo) {
  const int chunks = 4 / rows;
  __m512 acc[CPU_GEMV_MAX_ROWS][4];
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + 16 * chunks <= k; kk += 16 * chunks)
    nk_step(dtype, m, rows, chunks, kk, a, lda, b, b_row_bytes, 1, 0, acc);
  for (; kk + 16 <= k; kk += 16) nk_step(dtype, m, rows, 1, kk, a, lda, b, b_row_bytes, 1, 0, acc);
  if (kk < k) nk_step(dtype, m, rows, 1, kk, a, lda, b, b_row_bytes, 0, tail_mask(k - kk), acc);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
      __m512 sum = acc[i][r * chunks];
#pragma GCC unroll 4
      for (int c = 1; c < chunks; c++) sum = _mm512_add_ps(sum, acc[i][r * chunks + c]);
      out[i * ldo + r] = _mm512_reduce_add_ps(sum);
    }
}

/* 16 columns n.. of kn_rows's sums (b0: b's row kk). */
static ALWAYS_INLINE void kn_step(int32_t dtype, int m, int rows, int64_t n, __m512 (*av)[4], const char *b0,
                                  size_t b_row_bytes, int full, __mmask16 mask, float *out, int64_t ldo) {
  const size_t esize = dtype == GLLMK_F32 ? 4 : 2;
  __m512 bv[4];
#pragma GCC unroll 4
  for (int r = 0; r < rows; r++) bv[r] = load16(dtype, b0 + r * b_row_bytes + (size_t)n * esize, full, mask);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++) {
    float *o = out + i * ldo + n;
    __m512 acc = load16(GLLMK_F32, o, full, mask);
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) acc = _mm512_fmadd_ps(av[i][r], bv[r], acc);
    store16_f32(o, acc, full, mask);
  }
}

/* out[i * ldo + n] (+)= sum over `rows` rows of b of a[i][kk + r] * b[kk + r][n]. */
static ALWAYS_INLINE void kn_rows(int32_t dtype, int m, int rows, int64_t kk, const float *a,
                                  int64_t lda, const char *b, size_t b_row_bytes, int64_t n_count,
                                  float *out, int64_t ldo) {
  __m512 av[CPU_GEMV_MAX_ROWS][4];
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) av[i][r] = _mm512_set1_ps(a[i * lda + kk + r]);
  const char *b0 = b + (size_t)kk * b_row_bytes;
  int64_t n = 0;
  for (; n + 16 <= n_count; n += 16) kn_step(dtype, m, rows, n, av, b0, b_row_bytes, 1, 0, out, ldo);
  if (n < n_count) kn_step(dtype, m, rows, n, av, b0, b_row_bytes, 0, tail_mask(n_count - n), out, ldo);
}

#include "cpu_gemv.inc"

const cpu_gemm_isa cpu_gemm_isa_avx512 = {
    .mr = MR,
    .nr = NR,
    .micro = micro_12x32,
    .pack_transposed = pack_transposed_avx512,
    .pack_rows = pack_rows_avx512,
    .gemv_nk = gemv_nk,
    .gemv_kn = gemv_kn,
};
#endif
