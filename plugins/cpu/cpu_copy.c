/*
 * cpu_copy.c - copy (strided, converting between float dtypes) and fill.
 */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

enum { ITEM_ELEMENTS = 16 * CPU_BLOCK };

/* ------------------------------------------------------------ copy */

typedef struct copy_job {
  int32_t src_dtype, dst_dtype;
  const char *src;
  char *dst;
  /* Dims after dropping extent-1 dims and merging dims that are contiguous
   * in both tensors; the last one is the "line" that items cut up. */
  int ndim;
  int64_t shape[GLLMK_MAX_DIMS];
  int64_t src_strides[GLLMK_MAX_DIMS], dst_strides[GLLMK_MAX_DIMS];
  int64_t line_items;
  int stream; /* write with stream_copy */
} copy_job;

static void simplify_dims(copy_job *job, const gllmk_tensor *dst, const gllmk_tensor *src) {
  int n = 0;
  for (int d = 0; d < dst->ndim; d++) {
    if (dst->shape[d] == 1) continue;
    if (n > 0 && job->src_strides[n - 1] == src->strides[d] * dst->shape[d] &&
        job->dst_strides[n - 1] == dst->strides[d] * dst->shape[d]) {
      /* dim d continues dim n-1 in both tensors: merge */
      job->shape[n - 1] *= dst->shape[d];
      job->src_strides[n - 1] = src->strides[d];
      job->dst_strides[n - 1] = dst->strides[d];
      continue;
    }
    job->shape[n] = dst->shape[d];
    job->src_strides[n] = src->strides[d];
    job->dst_strides[n] = dst->strides[d];
    n++;
  }
  if (n == 0) { /* a single element */
    job->shape[0] = 1;
    job->src_strides[0] = job->dst_strides[0] = 1;
    n = 1;
  }
  job->ndim = n;
}

/* Copies n elements of `size` bytes from a strided source to a contiguous one. */
static void gather(void *dst, const char *src, int64_t stride, int64_t n, size_t size) {
  if (size == 2) {
    uint16_t *d = dst;
    const uint16_t *s = (const uint16_t *)(const void *)src;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
  } else {
    uint32_t *d = dst;
    const uint32_t *s = (const uint32_t *)(const void *)src;
    for (int64_t i = 0; i < n; i++) d[i] = s[i * stride];
  }
}

static void scatter(char *dst, int64_t stride, const void *src, int64_t n, size_t size) {
  if (size == 2) {
    uint16_t *d = (uint16_t *)(void *)dst;
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) d[i * stride] = s[i];
  } else {
    uint32_t *d = (uint32_t *)(void *)dst;
    const uint32_t *s = src;
    for (int64_t i = 0; i < n; i++) d[i * stride] = s[i];
  }
}

/* Converts n contiguous elements (same dtype: a plain copy). */
static void convert_contiguous(int32_t dst_dtype, void *dst, int32_t src_dtype, const void *src,
                               int64_t n, float *scratch) {
  if (dst_dtype == src_dtype) {
    memcpy(dst, src, (size_t)n * gllmk_plugin_dtype_size(dst_dtype));
  } else if (dst_dtype == GLLMK_F32) {
    cpu_load_f32(src_dtype, src, dst, n);
  } else {
    cpu_store_f32(dst_dtype, cpu_in_f32(src_dtype, src, scratch, n), dst, n);
  }
}

static void copy_block(const copy_job *job, char *dst, const char *src, int64_t n) {
  int64_t src_stride = job->src_strides[job->ndim - 1];
  int64_t dst_stride = job->dst_strides[job->ndim - 1];
  size_t src_size = gllmk_plugin_dtype_size(job->src_dtype);
  size_t dst_size = gllmk_plugin_dtype_size(job->dst_dtype);
  if (src_stride == 1 && dst_stride == 1 && job->src_dtype == job->dst_dtype) {
    if (job->stream)
      cpu_convert->stream_copy(dst, src, (size_t)n * dst_size);
    else
      memcpy(dst, src, (size_t)n * dst_size);
    return;
  }
  uint32_t src_packed[CPU_BLOCK], dst_packed[CPU_BLOCK];
  float scratch[CPU_BLOCK];
  const void *from = src;
  if (src_stride != 1) {
    gather(src_packed, src, src_stride, n, src_size);
    from = src_packed;
  }
  void *to = dst_stride == 1 && !job->stream ? (void *)dst : (void *)dst_packed;
  convert_contiguous(job->dst_dtype, to, job->src_dtype, from, n, scratch);
  if (dst_stride != 1)
    scatter(dst, dst_stride, dst_packed, n, dst_size);
  else if (job->stream)
    cpu_convert->stream_copy(dst, dst_packed, (size_t)n * dst_size);
}

static void copy_range(void *ctx, int64_t begin, int64_t end) {
  const copy_job *job = ctx;
  int last = job->ndim - 1;
  int64_t line_length = job->shape[last];
  size_t src_size = gllmk_plugin_dtype_size(job->src_dtype);
  size_t dst_size = gllmk_plugin_dtype_size(job->dst_dtype);
  int contiguous = job->src_strides[last] == 1 && job->dst_strides[last] == 1;
  for (int64_t item = begin; item < end; item++) {
    /* Offsets of the line's first element. */
    int64_t line = item / job->line_items;
    int64_t src_offset = 0, dst_offset = 0;
    for (int d = last - 1; d >= 0; d--) {
      int64_t index = line % job->shape[d];
      line /= job->shape[d];
      src_offset += index * job->src_strides[d];
      dst_offset += index * job->dst_strides[d];
    }
    int64_t start = (item % job->line_items) * ITEM_ELEMENTS;
    int64_t stop = start + ITEM_ELEMENTS < line_length ? start + ITEM_ELEMENTS : line_length;
    /* Same-dtype contiguous lines copy in one go; others by blocks. */
    int64_t block = contiguous && job->src_dtype == job->dst_dtype ? ITEM_ELEMENTS : CPU_BLOCK;
    for (int64_t i = start; i < stop; i += block) {
      int64_t n = stop - i < block ? stop - i : block;
      const char *src = job->src + (src_offset + i * job->src_strides[last]) * (int64_t)src_size;
      char *dst = job->dst + (dst_offset + i * job->dst_strides[last]) * (int64_t)dst_size;
      copy_block(job, dst, src, n);
    }
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_copy(gllmk_plugin_device *device, const gllmk_copy_args *args) {
  copy_job job = {
      .src_dtype = args->src->dtype,
      .dst_dtype = args->out->dtype,
      .src = cpu_tensor_data(args->src),
      .dst = cpu_tensor_data(args->out),
  };
  simplify_dims(&job, args->out, args->src);
  int64_t line_length = job.shape[job.ndim - 1];
  job.line_items = (line_length + ITEM_ELEMENTS - 1) / ITEM_ELEMENTS;
  int64_t lines = 1;
  for (int d = 0; d < job.ndim - 1; d++) lines *= job.shape[d];
  job.stream = cpu_streams(lines * line_length * (int64_t)gllmk_plugin_dtype_size(job.dst_dtype));
  int64_t item_length = line_length < ITEM_ELEMENTS ? line_length : ITEM_ELEMENTS;
  int64_t grain = item_length >= CPU_GRAIN_ELEMENTS ? 1 : CPU_GRAIN_ELEMENTS / item_length;
  cpu_parallel_for(device, lines * job.line_items, grain, copy_range, &job);
  return GLLMK_OK;
}

/* ------------------------------------------------------------ fill */

typedef struct fill_job {
  cpu_rows out;
  int stream; /* write with stream_copy */
  /* CPU_BLOCK elements of the value, stored in out's dtype. */
  union {
    float f32[CPU_BLOCK];
    uint16_t u16[CPU_BLOCK];
    int32_t i32[CPU_BLOCK];
  } pattern;
} fill_job;

/* The value for an I32 tensor: truncated, saturated, NaN -> 0. */
static int32_t to_int32(float value) {
  if (isnan(value)) return 0;
  if (value >= 2147483648.0f) return INT32_MAX;
  if (value <= -2147483648.0f) return INT32_MIN;
  return (int32_t)value;
}

static void fill_range(void *ctx, int64_t begin, int64_t end) {
  const fill_job *job = ctx;
  size_t size = gllmk_plugin_dtype_size(job->out.dtype);
  for (int64_t row = begin; row < end; row++) {
    char *dst = cpu_row(&job->out, row);
    for (int64_t col = 0; col < job->out.cols; col += CPU_BLOCK) {
      int64_t n = job->out.cols - col < CPU_BLOCK ? job->out.cols - col : CPU_BLOCK;
      if (job->stream)
        cpu_convert->stream_copy(dst + col * (int64_t)size, &job->pattern, (size_t)n * size);
      else
        memcpy(dst + col * (int64_t)size, &job->pattern, (size_t)n * size);
    }
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_fill(gllmk_plugin_device *device, const gllmk_fill_args *args) {
  fill_job job = {.out = cpu_rows_of(args->out)};
  job.stream =
      cpu_streams(job.out.rows * job.out.cols * (int64_t)gllmk_plugin_dtype_size(job.out.dtype));
  for (int i = 0; i < CPU_BLOCK; i++) {
    switch (job.out.dtype) {
      case GLLMK_F16:
        job.pattern.u16[i] = cpu_f32_to_f16(args->value);
        break;
      case GLLMK_BF16:
        job.pattern.u16[i] = cpu_f32_to_bf16(args->value);
        break;
      case GLLMK_I32:
        job.pattern.i32[i] = to_int32(args->value);
        break;
      default:
        job.pattern.f32[i] = args->value;
        break;
    }
  }
  cpu_parallel_for(device, job.out.rows, cpu_row_grain(job.out.cols), fill_range, &job);
  return GLLMK_OK;
}
