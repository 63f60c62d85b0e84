/*
 * cpu_kernels.h - the cpu plugin's SIMD routines, one table per instruction
 * set, chosen once at probe time by cpu_select_kernels().
 *
 * Each table exists in up to three builds: portable C (always), AVX2 + FMA +
 * F16C, and AVX-512 (F, BW, VL) on x86_64; portable C, NEON (ASIMD) and
 * NEON with FEAT_BF16 on aarch64. The math kernels come from one source,
 * cpu_vec.inc, compiled at the vector width of each instruction set.
 */
#ifndef GLLMK_CPU_KERNELS_H_
#define GLLMK_CPU_KERNELS_H_

#include <stdint.h>

#include "cpu_internal.h"

/* Conversions of n contiguous elements; results are bit-identical in every
 * build (round to nearest even, NaN kept as a quiet NaN). */
typedef struct cpu_convert_kernels {
  void (*f16_to_f32)(const uint16_t *src, float *dst, int64_t n);
  void (*f32_to_f16)(const float *src, uint16_t *dst, int64_t n);
  void (*bf16_to_f32)(const uint16_t *src, float *dst, int64_t n);
  void (*f32_to_bf16)(const float *src, uint16_t *dst, int64_t n);
  /* memcpy that writes whole aligned 64-byte lines with non-temporal stores,
   * for outputs too large to stay in cache (no read-for-ownership, no cache
   * pollution); stream_fence() must follow before other threads read. */
  void (*stream_copy)(void *dst, const void *src, size_t bytes);
  void (*stream_fence)(void);
} cpu_convert_kernels;

extern const cpu_convert_kernels cpu_convert_portable;
#if defined(__x86_64__)
extern const cpu_convert_kernels cpu_convert_avx2;
extern const cpu_convert_kernels cpu_convert_avx512;
#elif defined(__aarch64__)
extern const cpu_convert_kernels cpu_convert_neon;
extern const cpu_convert_kernels cpu_convert_neon_bf16;
#endif

/* Math on n contiguous elements (any n >= 0) stored as `dtype` (F32, F16
 * or BF16): loaded to F32, computed in F32, rounded once when stored. Unless
 * noted, an output may be the very same array as an input (element i only
 * reads inputs at i) but must not overlap an input otherwise. Measured
 * relative accuracy in F32 (vs float64): silu 3e-7, gelu erf form 5e-7
 * over the whole range; gelu tanh form 1.2e-6 for |x| <= 4, growing in the
 * left tail where e^(2u) magnifies the rounding of u (3.3e-6 at x = -6,
 * 1.3e-5 at x = -10, where gelu is below 1e-30); rope angles 1e-9 absolute.
 * F16 and BF16 activations (silu, swiglu, gelu) use shorter arithmetic with
 * errors far below their half ulp: over every 16-bit input, the stored result
 * is within 0.64 ulp of the exact value (97-100% correctly rounded), except
 * gelu tanh form in BF16 below x = -10, where |gelu| < 1e-37 becomes -0.
 * BF16 takes the shortest (a degree-3 exp, a degree-5 erfc, the reciprocal
 * estimate without a Newton step where there is one: AVX2's has 12 bits):
 * measured on AVX2 over every BF16 input, within 0.59 ulp, 99.7-99.9%
 * correctly rounded (gelu tanh form for x >= -5: further left, the F32
 * rounding of u dominates at every level, see tests/conformance.c). */
typedef struct cpu_vec_kernels {
  const char *name;
  void (*add)(int32_t dtype, void *out, const void *a, const void *b, int64_t n);
  void (*mul)(int32_t dtype, void *out, const void *a, const void *b, int64_t n);
  void (*mul_add)(int32_t dtype, void *out, const void *a, const void *b, const void *c, int64_t n);
  void (*silu)(int32_t dtype, void *out, const void *x, int64_t n);
  /* out = gelu(x + bias) (gllmk_gelu_kind); bias (F32) may be NULL. */
  void (*gelu)(int32_t dtype, int32_t kind, void *out, const void *x, const float *bias, int64_t n);
  /* out = silu(gate) * up */
  void (*swiglu)(int32_t dtype, void *out, const void *gate, const void *up, int64_t n);

  /* Sums accumulated in double. */
  double (*sum)(int32_t dtype, const void *x, int64_t n);
  double (*sum_squares)(int32_t dtype, const void *x, int64_t n);
  /* residual = residual + x, rounded to dtype and stored; returns the sum of
   * squares of the stored (rounded) values. */
  double (*add_sum_squares)(int32_t dtype, void *residual, const void *x, int64_t n);
  /* Sum of (x - mean)^2 with mean = mean_high + mean_low (a float pair, so
   * that x - mean keeps full precision when x is close to the mean). */
  double (*sum_squared_deviations)(int32_t dtype, const void *x, float mean_high, float mean_low,
                                   int64_t n);
  /* out = x * scale * w (w in F32) */
  void (*scale_mul)(int32_t dtype, void *out, const void *x, float scale, const float *w,
                    int64_t n);
  /* scale_mul, and meanwhile sum_squares of `next` (the next row: reading it
   * while writing this one keeps both memory streams busy). */
  double (*scale_mul_sum_squares)(int32_t dtype, void *out, const void *x, float scale,
                                  const float *w, const void *next, int64_t n);
  /* out = (x - mean) * scale * w + b, mean as above; w, b in F32, b may be
   * NULL. */
  void (*normalize_affine)(int32_t dtype, void *out, const void *x, float mean_high, float mean_low,
                           float scale, const float *w, const float *b, int64_t n);
  /* The largest x * scale, NaN ignored (-inf if there is nothing else). */
  float (*max_scaled)(int32_t dtype, const void *x, float scale, int64_t n);
  /* Sum of exp(x * scale - shift), accumulated in double. */
  double (*exp_sum)(int32_t dtype, const void *x, float scale, float shift, int64_t n);
  /* out = exp(x * scale - shift) * factor */
  void (*exp_scale)(int32_t dtype, void *out, const void *x, float scale, float shift, float factor,
                    int64_t n);
  /* exp_sum, and meanwhile each exp(x * scale - shift) stored in e (F32):
   * exp_scale's values are then scale_store(e, factor), one exp fewer. */
  double (*exp_sum_store)(int32_t dtype, float *e, const void *x, float scale, float shift,
                          int64_t n);
  /* out = x * factor, x in F32, out stored as dtype (x itself if F32). */
  void (*scale_store)(int32_t dtype, void *out, const float *x, float factor, int64_t n);

  /* cos/sin of position * inv_freq[j] for j < n, computed in double. */
  void (*rope_angles)(float *cos_out, float *sin_out, const double *inv_freq, double position,
                      int64_t n);
  /* NeoX pairs: (x1[j], x2[j]) turned by angle j, j < n. out1/out2 may be
   * x1/x2 themselves. */
  void (*rope_neox)(int32_t dtype, void *out1, void *out2, const void *x1, const void *x2,
                    const float *cos, const float *sin, int64_t n);
  /* GPT-J pairs: (x[2j], x[2j+1]) turned by angle j, j < n. out may be x. */
  void (*rope_gptj)(int32_t dtype, void *out, const void *x, const float *cos, const float *sin,
                    int64_t n);

  /* out = exp(x - shift) in double (x may be -inf: 0). */
  void (*exp_f64)(double *out, const double *x, double shift, int64_t n);
} cpu_vec_kernels;

extern const cpu_vec_kernels cpu_vec_portable;
#if defined(__x86_64__)
extern const cpu_vec_kernels cpu_vec_avx2;
extern const cpu_vec_kernels cpu_vec_avx512;
extern const cpu_vec_kernels cpu_vec_avx512bf16;
#elif defined(__aarch64__)
extern const cpu_vec_kernels cpu_vec_neon;
extern const cpu_vec_kernels cpu_vec_neon_bf16;
#endif

/* The tables in use (portable until cpu_select_kernels runs). */
extern const cpu_convert_kernels *cpu_convert;
extern const cpu_vec_kernels *cpu_vec;

/* Picks the best tables for cpu_has. */
void cpu_select_kernels(void);

/* Outputs of at least this many bytes are written with stream_copy (set at
 * probe time to the size of the last-level cache). */
extern int64_t cpu_stream_threshold;

#endif /* GLLMK_CPU_KERNELS_H_ */
