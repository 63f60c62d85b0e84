/*
 * cpu_norm.c - rmsnorm, add_rmsnorm, layernorm, softmax: row reductions.
 *
 * A row is read once from memory and then again from cache: the first pass
 * reduces (in double), the second writes the result.
 */
#include <math.h>

#include "cpu_ops.h"

typedef struct norm_job {
  cpu_rows out, x, residual; /* unused ones stay zeroed */
  const float *weight, *bias; /* as F32 (cpu_f32_vector) */
  float eps, scale;
  int stream; /* write out through L1 blocks and stream_copy */
} norm_job;

/* A row's statistics, as each op needs them. */
typedef struct row_stats {
  float scale, mean_high, mean_low, max;
} row_stats;
/* Writes n elements of an output row from column col, reading x (already
 * advanced to col). */
typedef void (*write_fn)(const norm_job *job, void *out, const char *x, int64_t col, int64_t n,
                         const row_stats *stats);

/* One output row, directly or (streaming) through an L1 block. */
static void write_row(const norm_job *job, char *out, const char *x, write_fn write,
                      const row_stats *stats) {
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  if (!job->stream) {
    write(job, out, x, 0, cols, stats);
    return;
  }
  float block[CPU_BLOCK];
  for (int64_t col = 0; col < cols; col += CPU_BLOCK) {
    int64_t n = cols - col < CPU_BLOCK ? cols - col : CPU_BLOCK;
    write(job, block, cpu_at(x, dtype, col), col, n, stats);
    cpu_convert->stream_copy(cpu_at(out, dtype, col), block,
                             (size_t)n * gllmk_plugin_dtype_size(dtype));
  }
}

/* Runs fn over the rows of x with weight and bias (either may be NULL)
 * converted to F32 once. */
static gllmk_status run_norm(gllmk_plugin_device *device, const char *op, norm_job *job,
                             const gllmk_tensor *weight, const gllmk_tensor *bias,
                             cpu_range_fn fn) {
  float *weight_copy = NULL, *bias_copy = NULL;
  if (weight)
    job->weight = cpu_f32_vector(weight->dtype, cpu_tensor_data(weight), job->x.cols, &weight_copy);
  if (bias) job->bias = cpu_f32_vector(bias->dtype, cpu_tensor_data(bias), job->x.cols, &bias_copy);
  /* In place, the output lines are in cache already: plain stores are best. */
  job->stream = job->out.data != job->x.data &&
                cpu_streams(job->out.rows * job->out.cols *
                            (int64_t)gllmk_plugin_dtype_size(job->out.dtype));
  gllmk_status status = GLLMK_OK;
  if ((weight && !job->weight) || (bias && !job->bias))
    status = cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of host memory", op);
  else
    cpu_parallel_for(device, job->x.rows, cpu_row_grain(job->x.cols), fn, job);
  free(weight_copy);
  free(bias_copy);
  return status;
}

/* ------------------------------------------------------------ rmsnorm */

static float rms_scale(double sum_squares, int64_t cols, float eps) {
  return (float)(1.0 / sqrt(sum_squares / (double)cols + (double)eps));
}

static void write_scaled(const norm_job *job, void *out, const char *x, int64_t col, int64_t n,
                         const row_stats *stats) {
  cpu_vec->scale_mul(job->x.dtype, out, x, stats->scale, job->weight + col, n);
}

/* Each row's sum of squares is taken while the previous row is written,
 * unless the output streams (then the writes need no read stream). */
static void rmsnorm_range(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  double sum_squares = cpu_vec->sum_squares(dtype, cpu_row(&job->x, begin), cols);
  for (int64_t row = begin; row < end; row++) {
    const char *x = cpu_row(&job->x, row);
    char *out = cpu_row(&job->out, row);
    row_stats stats = {.scale = rms_scale(sum_squares, cols, job->eps)};
    if (row + 1 == end) {
      write_row(job, out, x, write_scaled, &stats);
    } else if (job->stream) {
      write_row(job, out, x, write_scaled, &stats);
      sum_squares = cpu_vec->sum_squares(dtype, cpu_row(&job->x, row + 1), cols);
    } else {
      sum_squares = cpu_vec->scale_mul_sum_squares(dtype, out, x, stats.scale, job->weight,
                                                   cpu_row(&job->x, row + 1), cols);
    }
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_rmsnorm(gllmk_plugin_device *device, const gllmk_rmsnorm_args *args) {
  norm_job job = {.out = cpu_rows_of(args->out), .x = cpu_rows_of(args->x), .eps = args->eps};
  return run_norm(device, "gllmk_rmsnorm", &job, args->weight, NULL, rmsnorm_range);
}

/* residual += x (stored in residual's dtype), then rmsnorm of the stored
 * values, exactly what a later reader of residual sees. */
static void add_rmsnorm_range(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  for (int64_t row = begin; row < end; row++) {
    char *residual = cpu_row(&job->residual, row);
    double sum_squares = cpu_vec->add_sum_squares(dtype, residual, cpu_row(&job->x, row), cols);
    row_stats stats = {.scale = rms_scale(sum_squares, cols, job->eps)};
    write_row(job, cpu_row(&job->out, row), residual, write_scaled, &stats);
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_add_rmsnorm(gllmk_plugin_device *device, const gllmk_add_rmsnorm_args *args) {
  norm_job job = {
      .out = cpu_rows_of(args->out),
      .x = cpu_rows_of(args->x),
      .residual = cpu_rows_of(args->residual),
      .eps = args->eps,
  };
  return run_norm(device, "gllmk_add_rmsnorm", &job, args->weight, NULL, add_rmsnorm_range);
}

/* ------------------------------------------------------------ layernorm */

static void write_normalized(const norm_job *job, void *out, const char *x, int64_t col,
                             int64_t n, const row_stats *stats) {
  cpu_vec->normalize_affine(job->x.dtype, out, x, stats->mean_high, stats->mean_low, stats->scale,
                            job->weight + col, job->bias ? job->bias + col : NULL, n);
}

static void layernorm_range(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  for (int64_t row = begin; row < end; row++) {
    const char *x = cpu_row(&job->x, row);
    /* The mean as a float pair, so x - mean loses nothing to its rounding. */
    double mean = cpu_vec->sum(dtype, x, cols) / (double)cols;
    row_stats stats = {.mean_high = (float)mean};
    stats.mean_low = (float)(mean - (double)stats.mean_high);
    double deviations =
        cpu_vec->sum_squared_deviations(dtype, x, stats.mean_high, stats.mean_low, cols);
    stats.scale = (float)(1.0 / sqrt(deviations / (double)cols + (double)job->eps));
    write_row(job, cpu_row(&job->out, row), x, write_normalized, &stats);
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_layernorm(gllmk_plugin_device *device, const gllmk_layernorm_args *args) {
  norm_job job = {.out = cpu_rows_of(args->out), .x = cpu_rows_of(args->x), .eps = args->eps};
  return run_norm(device, "gllmk_layernorm", &job, args->weight, args->bias, layernorm_range);
}

/* ------------------------------------------------------------ softmax */

static void write_softmax(const norm_job *job, void *out, const char *x, int64_t col, int64_t n,
                          const row_stats *stats) {
  (void)col;
  cpu_vec->exp_scale(job->x.dtype, out, x, job->scale, stats->max, stats->scale, n);
}

/* out = exp(scale x - m) / sum, m the row's largest scale x. A NaN anywhere
 * in the row makes the whole row NaN. */
static void softmax_range(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  for (int64_t row = begin; row < end; row++) {
    const char *x = cpu_row(&job->x, row);
    row_stats stats = {.max = cpu_vec->max_scaled(dtype, x, job->scale, cols)};
    stats.scale = (float)(1.0 / cpu_vec->exp_sum(dtype, x, job->scale, stats.max, cols));
    write_row(job, cpu_row(&job->out, row), x, write_softmax, &stats);
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_softmax(gllmk_plugin_device *device, const gllmk_softmax_args *args) {
  norm_job job = {.out = cpu_rows_of(args->out), .x = cpu_rows_of(args->x), .scale = args->scale};
  return run_norm(device, "gllmk_softmax", &job, NULL, NULL, softmax_range);
}
