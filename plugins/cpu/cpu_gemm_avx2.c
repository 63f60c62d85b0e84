/*
 * cpu_gemm_avx2.c - AVX2 + FMA + F16C GEMM micro-kernel and packing (for
 * matmul.c and attention.c) and GEMV kernels (for matmul.c); only called
 * when cpu_has says the CPU has them.
 *
 * Micro-kernel: a 6 x 16 tile of sums in 12 ymm registers. Packing
 * transposes 8 x 8 blocks in registers, converting F16/BF16 rows on the way
 * (pack_transposed_dtype). GEMV: reads b in its storage dtype and
 * accumulates in F32, like the AVX-512 version.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "cpu_avx2.h"
#include "cpu_gemm.h"

/* Small loops over vector registers carry "#pragma GCC unroll": fully
 * unrolled, their arrays of vectors live in registers (-O2 alone leaves them
 * in memory). */

enum { MR = CPU_GEMM_AVX2_MR, NR = CPU_GEMM_AVX2_NR };

static void micro_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       const cpu_gemm_epilogue *ep) {
  __m256 acc[MR][2];
  /* The tile of c is read (or written) only after the loop: ask for its
   * lines now, so that they come from L3 or memory during the loop. */
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  /* Two steps a round: one step alone ran at 75-80% of the FMA peak on
   * Zen 3, two at 90-95%. */
#pragma GCC unroll 2
  for (int64_t k = 0; k < kc; k++, a += MR, b += NR) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  const __m256 alpha = _mm256_set1_ps(ep->alpha), beta = _mm256_set1_ps(ep->beta);
  const __m256 bias0 = ep->bias ? _mm256_loadu_ps(ep->bias) : _mm256_setzero_ps();
  const __m256 bias1 = ep->bias ? _mm256_loadu_ps(ep->bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) {
    float *row = c + i * ldc;
    __m256 r0 = _mm256_fmadd_ps(alpha, acc[i][0], bias0);
    __m256 r1 = _mm256_fmadd_ps(alpha, acc[i][1], bias1);
    if (ep->read_c) {
      r0 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(row), r0);
      r1 = _mm256_fmadd_ps(beta, _mm256_loadu_ps(row + 8), r1);
    }
    _mm256_storeu_ps(row, r0);
    _mm256_storeu_ps(row + 8, r1);
  }
}

/* ---------------------------------------------------------------- packing */

/* Transposes the 8 x 8 block in r (r[i] = row i) in place. */
static ALWAYS_INLINE void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 8; g += 4) {
    s[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
    s[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xee);
    s[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    s[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xee);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; j++) {
    r[j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x20);
    r[4 + j] = _mm256_permute2f128_ps(s[j], s[4 + j], 0x31);
  }
}

/* A mask vector enabling the first `count` (<= 8) lanes. */
static ALWAYS_INLINE __m256i lane_mask(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Eight values of a row of `dtype` (F32, F16 or BF16: a constant where
 * this is inlined) from element k on, as F32; with n < 8 only the first n
 * are read and the rest are zero. */
static ALWAYS_INLINE __m256 load_row8(int32_t dtype, const void *row, int64_t k, int64_t n) {
  const size_t esize = dtype == GLLMK_F32 ? 4 : 2;
  if (n >= 8) return cpu_avx2_load8_f32(dtype, (const char *)row + (size_t)k * esize);
  if (dtype == GLLMK_F32) return _mm256_maskload_ps((const float *)row + k, lane_mask(n));
  uint16_t part[8] = {0};
  memcpy(part, (const uint16_t *)row + k, (size_t)n * sizeof(uint16_t));
  return cpu_avx2_load8_f32(dtype, part);
}

/* The whole 8 x 8 blocks of the rows rows[0..n) (n <= 8, a constant where
 * this is inlined; zeros for rows past n) over k in [0, k_end), k_end a
 * multiple of 8 with a k row after it, which a panel narrower than 8 (MR =
 * 6) spills into and the next store overwrites: whole stores only. */
static ALWAYS_INLINE void pack8_blocks(int32_t dtype, const void *const *rows, int n, int64_t k_end,
                                       int64_t width, float *dst) {
  for (int64_t k = 0; k < k_end; k += 8) {
    __m256 r[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) r[i] = i < n ? load_row8(dtype, rows[i], k, 8) : _mm256_setzero_ps();
    transpose8(r);
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) _mm256_storeu_ps(dst + (k + j) * width, r[j]);
  }
}

/* pack8_blocks with the common row counts as constants: 8 (a 16-wide b
 * panel's halves) and 6 (an a panel). */
static ALWAYS_INLINE void pack8_blocks_any(int32_t dtype, const void *const *rows, int64_t n,
                                           int64_t k_end, int64_t width, float *dst) {
  switch (n) {
    case 8:
      pack8_blocks(dtype, rows, 8, k_end, width, dst);
      break;
    case 6:
      pack8_blocks(dtype, rows, 6, k_end, width, dst);
      break;
    default:
      pack8_blocks(dtype, rows, (int)n, k_end, width, dst);
      break;
  }
}

static ALWAYS_INLINE void pack_transposed_body(int32_t dtype, const void *const *rows,
                                               int64_t count, int64_t kc, int64_t width,
                                               float *dst) {
  for (int64_t i0 = 0; i0 < width; i0 += 8) {
    int64_t n = count - i0 < 0 ? 0 : count - i0 < 8 ? count - i0 : 8;
    int64_t k0 = 0;
    if (i0 + 8 <= width || width <= 8) {
      k0 = kc > 8 ? (kc - 1) / 8 * 8 : 0;
      pack8_blocks_any(dtype, rows + i0, n, k0, width, dst + i0);
    }
    /* The last k rows (and a panel's columns past 8 of a width that is not
     * a multiple of 8): masked stores where a whole one would leave the
     * panel. Masked stores are slow on AMD (Zen 2/3: one per ~12 cycles),
     * hence whole ones wherever they fit. */
    __m256i store_mask = lane_mask(width - i0 < 8 ? width - i0 : 8);
    for (; k0 < kc; k0 += 8) {
      int64_t ks = kc - k0 < 8 ? kc - k0 : 8;
      __m256 r[8];
#pragma GCC unroll 8
      for (int64_t i = 0; i < 8; i++)
        r[i] = i < n ? load_row8(dtype, rows[i0 + i], k0, ks) : _mm256_setzero_ps();
      transpose8(r);
      for (int64_t k = 0; k < ks; k++) {
        float *d = dst + (k0 + k) * width + i0;
        if (i0 + 8 <= width || (width <= 8 && k0 + k + 1 < kc))
          _mm256_storeu_ps(d, r[k]);
        else
          _mm256_maskstore_ps(d, store_mask, r[k]);
      }
    }
  }
}

static void pack_transposed_avx2(const float *const *rows, int64_t count, int64_t kc, int64_t width,
                                 float *dst) {
  pack_transposed_body(GLLMK_F32, (const void *const *)rows, count, kc, width, dst);
}

/* F16 and BF16 rows are converted in registers on their way into the
 * transpose: no converted copy of each row first. */
static void pack_transposed_dtype_avx2(int32_t dtype, const void *const *rows, int64_t count,
                                       int64_t kc, int64_t width, float *dst) {
  switch (dtype) {
    case GLLMK_F32:
      pack_transposed_body(GLLMK_F32, rows, count, kc, width, dst);
      break;
    case GLLMK_F16:
      pack_transposed_body(GLLMK_F16, rows, count, kc, width, dst);
      break;
    default:
      pack_transposed_body(GLLMK_BF16, rows, count, kc, width, dst);
      break;
  }
}

static void pack_rows_avx2(const float *const *rows, int64_t count, int64_t cols, int64_t width,
                           float *dst) {
  for (int64_t k = 0; k < count; k++)
    for (int64_t j = 0; j < width; j += 8) {
      __m256i mask = lane_mask(cols - j >= 8 ? 8 : cols > j ? cols - j : 0);
      _mm256_storeu_ps(dst + k * width + j, _mm256_maskload_ps(rows[k] + j, mask));
    }
}

/* ------------------------------------------------------------------- GEMV */

static ALWAYS_INLINE float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* Columns kk.. of nk_rows's dot products: for each of `rows` rows of b,
 * `chunks` vectors of 8, chunk c of row r into acc[i][r * chunks + c]. */
static ALWAYS_INLINE void nk_step(int32_t dtype, int m, int rows, int chunks, int64_t kk,
                                  const float *a, int64_t lda, const char *b, size_t b_row_bytes,
                                  __m256 (*acc)[4]) {
  const size_t esize = dtype == GLLMK_F32 ? 4 : 2;
  __m256 bv[4];
#pragma GCC unroll 4
  for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
    for (int c = 0; c < chunks; c++)
      bv[r * chunks + c] = cpu_avx2_load8_f32(dtype, b + r * b_row_bytes + (size_t)(kk + 8 * c) * esize);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int c = 0; c < chunks; c++) {
      __m256 av = _mm256_loadu_ps(a + i * lda + kk + 8 * c);
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++)
        acc[i][r * chunks + c] = _mm256_fmadd_ps(av, bv[r * chunks + c], acc[i][r * chunks + c]);
    }
}

/* out[i * ldo + r] = dot(a row i, b row r) for i < m, r < rows (1 or 4):
 * 4 / rows vectors of each row a step. */
static ALWAYS_INLINE void nk_rows(int32_t dtype, int m, int rows, int64_t k, const float *a,
                                  int64_t lda, const char *b, size_t b_row_bytes, float *out,
                                  int64_t ldo) {
  const int chunks = 4 / rows;
  __m256 acc[CPU_GEMV_MAX_ROWS][4];
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) acc[i][j] = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + 8 * chunks <= k; kk += 8 * chunks)
    nk_step(dtype, m, rows, chunks, kk, a, lda, b, b_row_bytes, acc);
  /* one vector a step past the last full step, so at most 7 columns a row
   * are left to the scalar tail */
  for (; kk + 8 <= k; kk += 8) nk_step(dtype, m, rows, 1, kk, a, lda, b, b_row_bytes, acc);
#pragma GCC unroll 4
  for (int i = 0; i < m; i++) {
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
      __m256 sum = acc[i][r * chunks];
#pragma GCC unroll 4
      for (int c = 1; c < chunks; c++) sum = _mm256_add_ps(sum, acc[i][r * chunks + c]);
      float s = sum8(sum);
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
  __m256 av[CPU_GEMV_MAX_ROWS][4];
#pragma GCC unroll 4
  for (int i = 0; i < m; i++)
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) av[i][r] = _mm256_set1_ps(a[i * lda + kk + r]);
  const char *b0 = b + (size_t)kk * b_row_bytes;
  int64_t n = 0;
  for (; n + 8 <= n_count; n += 8) {
    __m256 bv[4];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++)
      bv[r] = cpu_avx2_load8_f32(dtype, b0 + r * b_row_bytes + (size_t)n * esize);
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
      float *o = out + i * ldo + n;
      __m256 acc = _mm256_loadu_ps(o);
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++) acc = _mm256_fmadd_ps(av[i][r], bv[r], acc);
      _mm256_storeu_ps(o, acc);
    }
  }
  for (; n < n_count; n++)
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
#pragma GCC unroll 4
      for (int r = 0; r < rows; r++)
        out[i * ldo + n] +=
            a[i * lda + kk + r] * cpu_element_f32(dtype, b0 + r * b_row_bytes, n);
}

#include "cpu_gemv.inc"

const cpu_gemm_isa cpu_gemm_isa_avx2 = {
    .mr = MR,
    .nr = NR,
    .micro = micro_6x16,
    .pack_transposed = pack_transposed_avx2,
    .pack_transposed_dtype = pack_transposed_dtype_avx2,
    .pack_rows = pack_rows_avx2,
    .gemv_nk = gemv_nk,
    .gemv_kn = gemv_kn,
};
#endif
