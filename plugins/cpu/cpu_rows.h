/*
 * cpu_rows.h - helpers shared by the cpu plugin's family files: F32 views
 * of stored rows and the row layout of a tensor.
 *
 * The math kernels (cpu_kernels.h) read and write storage directly; code
 * that needs F32 values of F16/BF16 data converts CPU_BLOCK elements at a
 * time into a small L1-resident scratch block.
 */
#ifndef GLLMK_CPU_ROWS_H_
#define GLLMK_CPU_ROWS_H_

#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_kernels.h"

enum {
  CPU_BLOCK = 1024,            /* elements staged at a time (4 KiB of F32) */
  CPU_GRAIN_ELEMENTS = 1 << 15 /* least work worth a thread: ~128 KiB of F32 */
};

/* Whether an op writing `bytes` of output should stream it past the cache
 * (cpu_convert->stream_copy through an L1 block, then stream_fence). */
static inline int cpu_streams(int64_t bytes) { return bytes >= cpu_stream_threshold; }

/* Copies `bytes` from src to dst, past the cache when `stream` (an op's
 * cpu_streams answer; the op ends with stream_fence). */
static inline void cpu_copy_bytes(int stream, void *dst, const void *src, size_t bytes) {
  if (stream)
    cpu_convert->stream_copy(dst, src, bytes);
  else
    memcpy(dst, src, bytes);
}

/* Element `index` of a row that starts at `base`. */
static inline char *cpu_at(const void *base, int32_t dtype, int64_t index) {
  return (char *)base + index * (int64_t)gllmk_plugin_dtype_size(dtype);
}

/* n elements as F32: `src` itself for F32 data, else converted into scratch. */
static inline const float *cpu_in_f32(int32_t dtype, const void *src, float *scratch, int64_t n) {
  if (dtype == GLLMK_F32) return src;
  cpu_load_f32(dtype, src, scratch, n);
  return scratch;
}

/* A 1-D parameter (weight, bias) as F32 for the kernels: the data itself for
 * F32 (*owned = NULL), else a converted copy in *owned that the caller frees.
 * NULL if out of memory. */
static inline const float *cpu_f32_vector(int32_t dtype, const void *data, int64_t n,
                                          float **owned) {
  *owned = NULL;
  if (dtype == GLLMK_F32) return data;
  *owned = malloc((size_t)n * sizeof(float));
  if (*owned) cpu_load_f32(dtype, data, *owned, n);
  return *owned;
}

/* A row-strided tensor: rows of `cols` unit-stride elements. */
typedef struct cpu_rows {
  char *data;
  int32_t dtype;
  int64_t rows, cols, row_stride; /* row_stride in elements */
} cpu_rows;

static inline cpu_rows cpu_rows_of(const gllmk_tensor *t) {
  gllmk_plugin_rows r = gllmk_plugin_as_rows(t);
  cpu_rows rows = {cpu_tensor_data(t), t->dtype, r.rows, r.cols, r.row_stride};
  return rows;
}

/* A 1-D operand broadcast over `rows` rows gets row stride 0. */
static inline cpu_rows cpu_rows_broadcast(const gllmk_tensor *t, int64_t rows) {
  cpu_rows r = cpu_rows_of(t);
  if (r.rows != rows) {
    r.rows = rows;
    r.row_stride = 0;
  }
  return r;
}

static inline char *cpu_row(const cpu_rows *r, int64_t row) {
  return cpu_at(r->data, r->dtype, row * r->row_stride);
}

/* Element i of a row-strided tensor in row-major order. */
static inline char *cpu_flat(const cpu_rows *r, int64_t i) {
  return cpu_at(r->data, r->dtype, (i / r->cols) * r->row_stride + i % r->cols);
}

/* Rows per parallel chunk for rows of `cols` elements. */
static inline int64_t cpu_row_grain(int64_t cols) {
  return cols >= CPU_GRAIN_ELEMENTS ? 1 : CPU_GRAIN_ELEMENTS / cols;
}

#endif /* GLLMK_CPU_ROWS_H_ */
