/*
 * cpu_gemm.h - internals shared by the cpu plugin's matmul and attention:
 * a task runner with per-thread scratch memory (cpu_tasks.c) and the
 * per-instruction-set kernel tables (portable C, AVX2+FMA, AVX-512, NEON:
 * cpu_gemm.c, cpu_gemm_avx2.c, cpu_gemm_avx512.c, cpu_gemm_neon.c), chosen at
 * run time.
 */
#ifndef GLLMK_CPU_GEMM_H_
#define GLLMK_CPU_GEMM_H_

#include "cpu_internal.h"

/* ------------------------------------------------------------- task runner */

/* Runs fn(ctx, task, scratch) for every task in [0, task_count) on the
 * device's threads, handing out tasks one at a time (so uneven tasks balance).
 * Each thread gets its own `scratch_bytes` of 64-byte aligned scratch memory,
 * reused across its tasks. Fails only when that memory cannot be allocated. */
typedef void (*cpu_task_fn)(void *ctx, int64_t task, void *scratch);
gllmk_status cpu_run_tasks(gllmk_plugin_device *device, int64_t task_count, size_t scratch_bytes,
                           cpu_task_fn fn, void *ctx);

/* Rounds n up to a multiple of m (m > 0). */
static inline int64_t cpu_round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

/* ------------------------------------------------------------------- GEMM */

/* What a micro-kernel does with its MR x NR tile of sums T:
 * c[i][j] = alpha * T[i][j] + (read_c ? beta * c[i][j] : 0) + (bias ? bias[j] : 0).
 * With read_c = 0, c is only written. */
typedef struct cpu_gemm_epilogue {
  float alpha, beta;
  int read_c;
  const float *bias;
} cpu_gemm_epilogue;

/* c = epilogue(t) for a rows x cols block of sums t (row stride ldt). */
static inline void cpu_gemm_store_tile(const float *t, int64_t ldt, int64_t rows, int64_t cols,
                                       float *c, int64_t ldc, const cpu_gemm_epilogue *ep) {
  for (int64_t i = 0; i < rows; i++) {
    for (int64_t j = 0; j < cols; j++) {
      float x = ep->alpha * t[i * ldt + j];
      if (ep->read_c) x += ep->beta * c[i * ldc + j];
      if (ep->bias) x += ep->bias[j];
      c[i * ldc + j] = x;
    }
  }
}

/* T = A_panel * B_panel over kc steps: a_panel holds MR floats per step (one
 * per row of the tile), b_panel NR floats per step (one per column). Writes
 * the full MR x NR tile at c (row stride ldc) through the epilogue. */
typedef void (*cpu_gemm_micro_fn)(int64_t kc, const float *a_panel, const float *b_panel, float *c,
                                  int64_t ldc, const cpu_gemm_epilogue *epilogue);

/* Few-row products that stream b once (decode GEMV), m <= CPU_GEMV_MAX_ROWS.
 * a: m F32 rows of k (row stride lda); b: dtype storage; out: m F32 rows
 * (row stride ldo) of raw sums, no epilogue.
 *  nk: out[i][n] = sum_k a[i][k] * b[n * ldb + k] for n < n_count
 *  kn: out[i][n] = sum_k a[i][k] * b[k * ldb + n] for n < n_count */
#define CPU_GEMV_MAX_ROWS 4
typedef void (*cpu_gemv_fn)(int32_t dtype, int64_t m, int64_t k, const float *a, int64_t lda,
                            const void *b, int64_t ldb, int64_t n_count, float *out, int64_t ldo);

/* For the SIMD files: inner loops that must see their constants. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Instantiates a body for each dtype and row count, so that the inner loops
 * see both as constants. */
#define CPU_GEMV_DISPATCH(name, body)                                                              \
  static ALWAYS_INLINE void name##_rows(int32_t dtype, int64_t m, int64_t k, const float *a,       \
                                        int64_t lda, const void *b, int64_t ldb, int64_t n_count,  \
                                        float *out, int64_t ldo) {                                 \
    switch (m) {                                                                                   \
      case 1:                                                                                      \
        body(dtype, 1, k, a, lda, b, ldb, n_count, out, ldo);                                      \
        break;                                                                                     \
      case 2:                                                                                      \
        body(dtype, 2, k, a, lda, b, ldb, n_count, out, ldo);                                      \
        break;                                                                                     \
      case 3:                                                                                      \
        body(dtype, 3, k, a, lda, b, ldb, n_count, out, ldo);                                      \
        break;                                                                                     \
      default:                                                                                     \
        body(dtype, 4, k, a, lda, b, ldb, n_count, out, ldo);                                      \
        break;                                                                                     \
    }                                                                                              \
  }                                                                                                \
  static void name(int32_t dtype, int64_t m, int64_t k, const float *a, int64_t lda,               \
                   const void *b, int64_t ldb, int64_t n_count, float *out, int64_t ldo) {         \
    switch (dtype) {                                                                               \
      case GLLMK_F32:                                                                              \
        name##_rows(GLLMK_F32, m, k, a, lda, b, ldb, n_count, out, ldo);                           \
        break;                                                                                     \
      case GLLMK_F16:                                                                              \
        name##_rows(GLLMK_F16, m, k, a, lda, b, ldb, n_count, out, ldo);                           \
        break;                                                                                     \
      default:                                                                                     \
        name##_rows(GLLMK_BF16, m, k, a, lda, b, ldb, n_count, out, ldo);                          \
        break;                                                                                     \
    }                                                                                              \
  }


/* Packs `count` F32 rows transposed: dst[k * width + i] = rows[i][k] for
 * k < kc, i < count <= width; zero for count <= i < width. */
typedef void (*cpu_gemm_pack_fn)(const float *const *rows, int64_t count, int64_t kc, int64_t width,
                                 float *dst);

/* Like cpu_gemm_pack_fn for rows of `dtype` (F32, F16 or BF16), converted
 * to F32 as they are packed. Optional: where a table has none, matmul.c
 * converts each row into F32 scratch and calls pack_transposed. */
typedef void (*cpu_gemm_pack_dtype_fn)(int32_t dtype, const void *const *rows, int64_t count,
                                       int64_t kc, int64_t width, float *dst);

/* Packs rows as they are: dst[k * width + j] = rows[k][j] for k < count,
 * j < cols <= width; zero for cols <= j < width. */
typedef void (*cpu_gemm_pack_rows_fn)(const float *const *rows, int64_t count, int64_t cols,
                                      int64_t width, float *dst);

/* The micro-tiles of the tables (cpu_gemm.c, cpu_gemm_avx2.c,
 * cpu_gemm_avx512.c, cpu_gemm_neon.c): code that sizes buffers by isa->mr and
 * isa->nr checks its sizes against them at compile time (matmul.c,
 * attention.c). */
enum {
  CPU_GEMM_GENERIC_MR = 4,
  CPU_GEMM_GENERIC_NR = 16,
  CPU_GEMM_AVX2_MR = 6,
  CPU_GEMM_AVX2_NR = 16,
  CPU_GEMM_AVX512_MR = 12,
  CPU_GEMM_AVX512_NR = 32,
  CPU_GEMM_NEON_MR = 6,
  CPU_GEMM_NEON_NR = 16
};

typedef struct cpu_gemm_isa {
  int64_t mr, nr; /* micro-tile: rows of A x columns of B */
  cpu_gemm_micro_fn micro;
  cpu_gemm_pack_fn pack_transposed;
  cpu_gemm_pack_dtype_fn pack_transposed_dtype; /* may be NULL */
  cpu_gemm_pack_rows_fn pack_rows;
  cpu_gemv_fn gemv_nk, gemv_kn;
} cpu_gemm_isa;

extern const cpu_gemm_isa cpu_gemm_isa_generic; /* cpu_gemm.c: portable C */
#if defined(__x86_64__)
extern const cpu_gemm_isa cpu_gemm_isa_avx2;    /* cpu_gemm_avx2.c: AVX2 + FMA + F16C */
extern const cpu_gemm_isa cpu_gemm_isa_avx512;  /* cpu_gemm_avx512.c: AVX-512 F/BW/VL */
#elif defined(__aarch64__)
extern const cpu_gemm_isa cpu_gemm_isa_neon;    /* cpu_gemm_neon.c: ASIMD */
#endif

/* Selects the best table for this CPU (cpu_gemm.c). */
const cpu_gemm_isa *cpu_gemm_select(void);

#endif /* GLLMK_CPU_GEMM_H_ */
