/*
 * attention.h - what attention.c shares with its AVX2 and NEON builds,
 * attention_avx2.c and attention_neon.c: the softmax step of the
 * flash-attention loop and the unpacked products for a few query rows
 * (decode), one version per instruction set (the portable ones are in
 * attention.c).
 */
#ifndef GLLMK_CPU_ATTENTION_H_
#define GLLMK_CPU_ATTENTION_H_

#include "cpu_gemm.h"

/* One row's step of the online softmax over a block of `width` scores, of
 * which the first `visible` (>= 1) count: row[0..visible) becomes
 * exp(row - max) with the running max, row[visible..width) zero, and the
 * exponentials add to *sum; when the block raises *max, *sum and o[0..d)
 * (d a multiple of 8) are first scaled by exp(old max - new max). */
typedef void (*cpu_softmax_step_fn)(float *row, int64_t visible, int64_t width, float *max,
                                    float *sum, float *o, int64_t d);
#if defined(__x86_64__)
void cpu_softmax_step_avx2(float *row, int64_t visible, int64_t width, float *max, float *sum,
                           float *o, int64_t d); /* attention_avx2.c */
#elif defined(__aarch64__)
void cpu_softmax_step_neon(float *row, int64_t visible, int64_t width, float *max, float *sum,
                           float *o, int64_t d); /* attention_neon.c */
#endif

/* For a few query rows (decode), products straight from the key and value
 * rows as stored (dtype F32, F16 or BF16; d a multiple of 8), no packing:
 *  scores:     s[r * lds + j] = scale * dot(q + r * ldq, k_rows[j]), r < rows, j < keys
 *  accumulate: o[r * ldo ..][0..d) += sum_{j < keys} p[r * ldp + j] * v_rows[j][0..d)
 * Each score is summed in the same order whatever `rows` and `keys` are. */
typedef struct cpu_attention_direct {
  void (*scores)(int32_t dtype, int64_t rows, int64_t keys, int64_t d, const float *q,
                 int64_t ldq, const void *const *k_rows, float scale, float *s, int64_t lds);
  void (*accumulate)(int32_t dtype, int64_t rows, int64_t keys, int64_t d, const float *p,
                     int64_t ldp, const void *const *v_rows, float *o, int64_t ldo);
} cpu_attention_direct;
#if defined(__x86_64__)
extern const cpu_attention_direct cpu_attention_direct_avx2; /* attention_avx2.c */
#elif defined(__aarch64__)
extern const cpu_attention_direct cpu_attention_direct_neon; /* attention_neon.c */
#endif

#endif /* GLLMK_CPU_ATTENTION_H_ */
