/*
 * cpu_elementwise.c - add, mul, mul_add, silu, gelu, add_gelu, swiglu.
 *
 * All are maps over rows: the work is cut into (row, column range) items
 * so that one long row is shared between threads as well as many short ones.
 */
#include <stdlib.h>

#include "cpu_ops.h"

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
