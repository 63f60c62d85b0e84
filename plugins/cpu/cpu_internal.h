/*
 * cpu_internal.h - shared declarations of the cpu plugin: the device, host
 * memory, the thread pool, errors and conversions of the layer below the
 * family files (ops.h declares their entry points).
 *
 * The cpu plugin computes with host memory: a gllmk_plugin_memory holds the
 * address of the allocation (its own, or a wrapped one of the caller). Work runs synchronously on the calling
 * thread plus a pool of worker threads owned by the device (one per context).
 */
#ifndef GLLMK_CPU_INTERNAL_H_
#define GLLMK_CPU_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "gllmk/gllmk_plugin.h"

/* The host table given at probe time. */
extern const gllmk_plugin_host *cpu_host;

/* CPU features, detected once at probe time. */
typedef struct cpu_features {
  int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512bf16; /* x86_64 */
  /* aarch64: ASIMD, its FP16 arithmetic and dot products (named in the
   * device's arch string; every op computes in F32 and none is on int8, so
   * no kernel needs them), FEAT_BF16. */
  int neon, asimdhp, asimddp, bf16;
} cpu_features;
extern cpu_features cpu_has;

typedef struct cpu_pool cpu_pool;

struct gllmk_plugin_device {
  cpu_pool *pool;
  int num_threads;
  /* The first device-raised error since the last synchronize. */
  gllmk_status raised_status;
  char raised_message[256];
  /* Timestamps of gllmk_context_set_timing, since the last read. */
  uint64_t *marks;
  uint32_t mark_count, mark_capacity;
};

/* A cpu allocation: host memory of its own, or the caller's (wrapped with
 * gllmk_buffer_wrap, never freed here). */
struct gllmk_plugin_memory {
  void *data;
  int owned;
};

/* Address of element [0, ..., 0] of a tensor. */
static inline void *cpu_tensor_data(const gllmk_tensor *t) {
  return (char *)gllmk_plugin_tensor_memory(t)->data + t->offset;
}

/* Runs fn(ctx, begin, end) over disjoint chunks covering [0, n) on the
 * device's threads (the caller is one of them) and returns when all are done.
 * `grain` is the smallest chunk worth handing to a thread. */
typedef void (*cpu_range_fn)(void *ctx, int64_t begin, int64_t end);
void cpu_parallel_for(gllmk_plugin_device *device, int64_t n, int64_t grain,
                      cpu_range_fn fn, void *ctx);

/* Records a device-raised error (the first one wins); the next synchronize
 * reports it. Safe to call from worker threads. */
void cpu_raise(gllmk_plugin_device *device, gllmk_status status, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/* Scalar conversions (round to nearest even; NaN stays NaN). */
float cpu_f16_to_f32(uint16_t h);
uint16_t cpu_f32_to_f16(float f);
static inline float cpu_bf16_to_f32(uint16_t h) {
  union { uint32_t u; float f; } v = { (uint32_t)h << 16 };
  return v.f;
}
uint16_t cpu_f32_to_bf16(float f);
/* Element i of a row stored as dtype (F32, F16 or BF16), as F32. */
static inline float cpu_element_f32(int32_t dtype, const void *row, int64_t i) {
  if (dtype == GLLMK_F32) return ((const float *)row)[i];
  uint16_t h = ((const uint16_t *)row)[i];
  return dtype == GLLMK_F16 ? cpu_f16_to_f32(h) : cpu_bf16_to_f32(h);
}

/* Row conversions between storage and F32, SIMD where the CPU has it.
 * `src`/`dst` point at the first element; elements are contiguous. */
void cpu_load_f32(int32_t dtype, const void *src, float *dst, int64_t n);
void cpu_store_f32(int32_t dtype, const float *src, void *dst, int64_t n);

#endif /* GLLMK_CPU_INTERNAL_H_ */
