/*
 * cpu_gemm.c - the portable GEMM micro-kernel and packing (for matmul.c and
 * attention.c) and GEMV kernels (for matmul.c): the cpu_gemm_isa table of
 * CPUs without AVX2 or NEON; and the choice of table for this CPU. The AVX2,
 * AVX-512 and NEON tables are in cpu_gemm_avx2.c, cpu_gemm_avx512.c and
 * cpu_gemm_neon.c.
 */
#include <string.h>

#include "cpu_gemm.h"

enum { GENERIC_MR = CPU_GEMM_GENERIC_MR, GENERIC_NR = CPU_GEMM_GENERIC_NR, GENERIC_CHUNK = 256 };

static void micro_generic(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                          const cpu_gemm_epilogue *ep) {
  float t[GENERIC_MR][GENERIC_NR] = {{0}};
  for (int64_t k = 0; k < kc; k++, a += GENERIC_MR, b += GENERIC_NR)
    for (int i = 0; i < GENERIC_MR; i++)
      for (int j = 0; j < GENERIC_NR; j++) t[i][j] += a[i] * b[j];
  cpu_gemm_store_tile(&t[0][0], GENERIC_NR, GENERIC_MR, GENERIC_NR, c, ldc, ep);
}

static void gemv_nk_generic(int32_t dtype, int64_t m, int64_t k, const float *a, int64_t lda,
                            const void *b, int64_t ldb, int64_t n_count, float *out, int64_t ldo) {
  size_t esize = gllmk_plugin_dtype_size(dtype);
  float chunk[GENERIC_CHUNK];
  for (int64_t n = 0; n < n_count; n++) {
    float sums[CPU_GEMV_MAX_ROWS] = {0};
    const char *row = (const char *)b + (size_t)(n * ldb) * esize;
    for (int64_t k0 = 0; k0 < k; k0 += GENERIC_CHUNK) {
      int64_t len = k - k0 < GENERIC_CHUNK ? k - k0 : GENERIC_CHUNK;
      cpu_load_f32(dtype, row + (size_t)k0 * esize, chunk, len);
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < len; j++) sums[i] += a[i * lda + k0 + j] * chunk[j];
    }
    for (int64_t i = 0; i < m; i++) out[i * ldo + n] = sums[i];
  }
}

static void gemv_kn_generic(int32_t dtype, int64_t m, int64_t k, const float *a, int64_t lda,
                            const void *b, int64_t ldb, int64_t n_count, float *out, int64_t ldo) {
  size_t esize = gllmk_plugin_dtype_size(dtype);
  float chunk[GENERIC_CHUNK];
  for (int64_t i = 0; i < m; i++) memset(out + i * ldo, 0, (size_t)n_count * sizeof(float));
  for (int64_t kk = 0; kk < k; kk++) {
    const char *row = (const char *)b + (size_t)(kk * ldb) * esize;
    for (int64_t n0 = 0; n0 < n_count; n0 += GENERIC_CHUNK) {
      int64_t len = n_count - n0 < GENERIC_CHUNK ? n_count - n0 : GENERIC_CHUNK;
      cpu_load_f32(dtype, row + (size_t)n0 * esize, chunk, len);
      for (int64_t i = 0; i < m; i++) {
        float ai = a[i * lda + kk];
        for (int64_t j = 0; j < len; j++) out[i * ldo + n0 + j] += ai * chunk[j];
      }
    }
  }
}

static void pack_transposed_generic(const float *const *rows, int64_t count, int64_t kc,
                                    int64_t width, float *dst) {
  for (int64_t k = 0; k < kc; k++) {
    float *d = dst + k * width;
    for (int64_t i = 0; i < count; i++) d[i] = rows[i][k];
    for (int64_t i = count; i < width; i++) d[i] = 0.0f;
  }
}

static void pack_rows_generic(const float *const *rows, int64_t count, int64_t cols, int64_t width,
                              float *dst) {
  for (int64_t k = 0; k < count; k++) {
    memcpy(dst + k * width, rows[k], (size_t)cols * sizeof(float));
    memset(dst + k * width + cols, 0, (size_t)(width - cols) * sizeof(float));
  }
}

const cpu_gemm_isa cpu_gemm_isa_generic = {
    .mr = GENERIC_MR,
    .nr = GENERIC_NR,
    .micro = micro_generic,
    .pack_transposed = pack_transposed_generic,
    .pack_rows = pack_rows_generic,
    .gemv_nk = gemv_nk_generic,
    .gemv_kn = gemv_kn_generic,
};

const cpu_gemm_isa *cpu_gemm_select(void) {
#if defined(__x86_64__)
  if (cpu_has.avx512f && cpu_has.avx512bw && cpu_has.avx512vl && cpu_has.avx2 && cpu_has.fma &&
      cpu_has.f16c)
    return &cpu_gemm_isa_avx512;
  if (cpu_has.avx2 && cpu_has.fma && cpu_has.f16c) return &cpu_gemm_isa_avx2;
#elif defined(__aarch64__)
  if (cpu_has.neon) return &cpu_gemm_isa_neon;
#endif
  return &cpu_gemm_isa_generic;
}
