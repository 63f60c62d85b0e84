/*
 * elementwise.c - the elementwise family on the cpu: copy (strided,
 * converting between float dtypes), fill, add, mul, mul_add, silu, gelu,
 * add_gelu, swiglu. The host code and the loops over rows are here; the
 * per-element math is the cpu_vec table's (cpu_vec.inc, built for each
 * instruction set by cpu_vec*.c), dtype conversions and streaming stores
 * the cpu_convert table's (cpu_convert*.c). From below it also uses
 * cpu_parallel_for (cpu_pool.c) and the row helpers of cpu_rows.h.
 *
 * add ... swiglu are maps over rows: the work is cut into (row, column
 * range) items so that one long row is shared between threads as well as
 * many short ones.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_rows.h"
#include "ops.h"

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
    cpu_copy_bytes(job->stream, dst, src, (size_t)n * dst_size);
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

/* ------------------------------------------------------------ maps */

enum { MAX_INPUTS = 3, ITEM_COLS = 16 * CPU_BLOCK };

typedef struct map_job map_job;
/* Computes the n results of a row from column `col` on (stored as the job's
 * dtype) from n elements of each input. */
typedef void (*map_fn)(const map_job *job, void *out, const void *const *in, int64_t col,
                       int64_t n);

struct map_job {
  map_fn fn;
  int32_t gelu_kind;
  const float *bias; /* add_gelu: the bias as F32, one row */
  int num_inputs;
  cpu_rows out, in[MAX_INPUTS];
  int64_t col_items; /* items per row */
  int cheap;         /* memory-bound arithmetic: large outputs may stream */
  int stream;        /* write through an L1 block and stream_copy */
};

/* Columns [col, col + n) of a row. */
static void map_columns(const map_job *job, int64_t row, int64_t col, int64_t n) {
  int32_t dtype = job->out.dtype;
  const void *in[MAX_INPUTS];
  for (int k = 0; k < job->num_inputs; k++) in[k] = cpu_at(cpu_row(&job->in[k], row), dtype, col);
  job->fn(job, cpu_at(cpu_row(&job->out, row), dtype, col), in, col, n);
}

/* The same through an L1 block streamed to the output. */
static void map_columns_streamed(const map_job *job, int64_t row, int64_t col, int64_t n) {
  int32_t dtype = job->out.dtype;
  float block[CPU_BLOCK];
  for (int64_t done = 0; done < n; done += CPU_BLOCK) {
    int64_t count = n - done < CPU_BLOCK ? n - done : CPU_BLOCK;
    const void *in[MAX_INPUTS];
    for (int k = 0; k < job->num_inputs; k++)
      in[k] = cpu_at(cpu_row(&job->in[k], row), dtype, col + done);
    job->fn(job, block, in, col + done, count);
    cpu_convert->stream_copy(cpu_at(cpu_row(&job->out, row), dtype, col + done), block,
                             (size_t)count * gllmk_plugin_dtype_size(dtype));
  }
}

static void map_range(void *ctx, int64_t begin, int64_t end) {
  const map_job *job = ctx;
  for (int64_t item = begin; item < end; item++) {
    int64_t row = item / job->col_items;
    int64_t col = (item % job->col_items) * ITEM_COLS;
    int64_t n = job->out.cols - col < ITEM_COLS ? job->out.cols - col : ITEM_COLS;
    if (job->stream)
      map_columns_streamed(job, row, col, n);
    else
      map_columns(job, row, col, n);
  }
  if (job->stream) cpu_convert->stream_fence();
}

static gllmk_status run_map(gllmk_plugin_device *device, map_job *job) {
  job->col_items = (job->out.cols + ITEM_COLS - 1) / ITEM_COLS;
  /* Streaming stores pay off for cheap maps only: for the activations the
   * extra pass through an L1 block costs more than it saves (measured). In
   * place, the output lines are in cache already: plain stores are best. */
  int in_place = 0;
  for (int k = 0; k < job->num_inputs; k++) in_place |= job->in[k].data == job->out.data;
  job->stream =
      job->cheap && !in_place &&
      cpu_streams(job->out.rows * job->out.cols * (int64_t)gllmk_plugin_dtype_size(job->out.dtype));
  int64_t item_cols = job->out.cols < ITEM_COLS ? job->out.cols : ITEM_COLS;
  int64_t grain = item_cols >= CPU_GRAIN_ELEMENTS ? 1 : CPU_GRAIN_ELEMENTS / item_cols;
  cpu_parallel_for(device, job->out.rows * job->col_items, grain, map_range, job);
  return GLLMK_OK;
}

/* A job writing `out` with operands shaped like it or 1-D (broadcast). */
static map_job map_job_for(map_fn fn, const gllmk_tensor *out, const gllmk_tensor *const *inputs,
                           int num_inputs) {
  map_job job = {.fn = fn, .num_inputs = num_inputs, .out = cpu_rows_of(out)};
  for (int k = 0; k < num_inputs; k++) job.in[k] = cpu_rows_broadcast(inputs[k], job.out.rows);
  return job;
}

/* ------------------------------------------------------------ ops */

/* Map functions: `col` only matters to those with F32 row parameters. */
static void add_fn(const map_job *job, void *out, const void *const *in, int64_t col, int64_t n) {
  (void)col;
  cpu_vec->add(job->out.dtype, out, in[0], in[1], n);
}

static void mul_fn(const map_job *job, void *out, const void *const *in, int64_t col, int64_t n) {
  (void)col;
  cpu_vec->mul(job->out.dtype, out, in[0], in[1], n);
}

static void mul_add_fn(const map_job *job, void *out, const void *const *in, int64_t col,
                       int64_t n) {
  (void)col;
  cpu_vec->mul_add(job->out.dtype, out, in[0], in[1], in[2], n);
}

static void silu_fn(const map_job *job, void *out, const void *const *in, int64_t col, int64_t n) {
  (void)col;
  cpu_vec->silu(job->out.dtype, out, in[0], n);
}

/* gelu and add_gelu; job->bias (F32) is NULL for gelu. */
static void gelu_fn(const map_job *job, void *out, const void *const *in, int64_t col, int64_t n) {
  const float *bias = job->bias ? job->bias + col : NULL;
  cpu_vec->gelu(job->out.dtype, job->gelu_kind, out, in[0], bias, n);
}

static void swiglu_fn(const map_job *job, void *out, const void *const *in, int64_t col,
                      int64_t n) {
  (void)col;
  cpu_vec->swiglu(job->out.dtype, out, in[0], in[1], n);
}

gllmk_status cpu_add(gllmk_plugin_device *device, const gllmk_add_args *args) {
  const gllmk_tensor *inputs[] = {args->a, args->b};
  map_job job = map_job_for(add_fn, args->out, inputs, 2);
  job.cheap = 1;
  return run_map(device, &job);
}

gllmk_status cpu_mul(gllmk_plugin_device *device, const gllmk_mul_args *args) {
  const gllmk_tensor *inputs[] = {args->a, args->b};
  map_job job = map_job_for(mul_fn, args->out, inputs, 2);
  job.cheap = 1;
  return run_map(device, &job);
}

gllmk_status cpu_mul_add(gllmk_plugin_device *device, const gllmk_mul_add_args *args) {
  const gllmk_tensor *inputs[] = {args->a, args->b, args->c};
  map_job job = map_job_for(mul_add_fn, args->out, inputs, 3);
  job.cheap = 1;
  return run_map(device, &job);
}

gllmk_status cpu_silu(gllmk_plugin_device *device, const gllmk_silu_args *args) {
  const gllmk_tensor *inputs[] = {args->x};
  map_job job = map_job_for(silu_fn, args->out, inputs, 1);
  return run_map(device, &job);
}

gllmk_status cpu_gelu(gllmk_plugin_device *device, const gllmk_gelu_args *args) {
  const gllmk_tensor *inputs[] = {args->x};
  map_job job = map_job_for(gelu_fn, args->out, inputs, 1);
  job.gelu_kind = args->kind;
  return run_map(device, &job);
}

gllmk_status cpu_add_gelu(gllmk_plugin_device *device, const gllmk_add_gelu_args *args) {
  const gllmk_tensor *inputs[] = {args->x};
  map_job job = map_job_for(gelu_fn, args->out, inputs, 1);
  job.gelu_kind = args->kind;
  float *bias_copy;
  job.bias =
      cpu_f32_vector(args->bias->dtype, cpu_tensor_data(args->bias), job.out.cols, &bias_copy);
  if (!job.bias)
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_add_gelu: out of host memory");
  gllmk_status status = run_map(device, &job);
  free(bias_copy);
  return status;
}

gllmk_status cpu_swiglu(gllmk_plugin_device *device, const gllmk_swiglu_args *args) {
  const gllmk_tensor *inputs[] = {args->gate, args->up};
  map_job job = map_job_for(swiglu_fn, args->out, inputs, 2);
  return run_map(device, &job);
}
