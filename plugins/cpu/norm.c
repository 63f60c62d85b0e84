/*
 * norm.c - the norm family on the cpu: rmsnorm, add_rmsnorm, layernorm,
 * softmax, all row reductions. The host code and the loops over rows are
 * here; the math on a row (sums, scale_mul, normalize_affine, max_scaled,
 * exp_sum, exp_scale, exp_sum_store, scale_store) is the cpu_vec table's
 * (cpu_vec.inc, built for each instruction set by cpu_vec*.c), streaming
 * stores the cpu_convert table's (cpu_convert*.c). From below it also uses
 * cpu_parallel_for (cpu_pool.c) and the row helpers of cpu_rows.h.
 *
 * Each op has a statistics pass over a row (sums in double) and a write
 * pass that reads the row again, from cache. Outputs larger than the
 * last-level cache are written with non-temporal stores (except softmax's,
 * whose exp costs more than the stores save); rows then go in
 * groups of about 64 KiB, all statistics first and then all writes, since
 * long phases of one kind suit streaming stores best. rmsnorm without
 * streaming overlaps the write of a row with the reading of the next.
 */
#include <math.h>

#include "cpu_rows.h"
#include "ops.h"

enum { GROUP_BYTES = 64 << 10, GROUP_ROWS = 64 };

/* A row's statistics, as each op needs them. */
typedef struct row_stats {
  float scale, mean_high, mean_low, max;
} row_stats;

typedef struct norm_job norm_job;
/* The statistics of a row (add_rmsnorm also updates the residual here). */
typedef row_stats (*stats_fn)(const norm_job *job, int64_t row);
/* Writes n elements of an output row from column col; `in` is the row the
 * output is computed from, already advanced to col. */
typedef void (*write_fn)(const norm_job *job, void *out, const char *in, int64_t col, int64_t n,
                         const row_stats *stats);

struct norm_job {
  cpu_rows out, x, residual;  /* unused ones stay zeroed */
  const float *weight, *bias; /* as F32 (cpu_f32_vector) */
  float eps, scale;
  stats_fn stats;
  write_fn write;
  const cpu_rows *in; /* what write reads: x, or residual for add_rmsnorm */
  int expensive;      /* compute-bound (softmax): never streams */
  int stream;         /* write out through L1 blocks and stream_copy */
};

/* One output row, directly or (streaming) through an L1 block. */
static void write_row(const norm_job *job, int64_t row, const row_stats *stats) {
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  char *out = cpu_row(&job->out, row);
  const char *in = cpu_row(job->in, row);
  if (!job->stream) {
    job->write(job, out, in, 0, cols, stats);
    return;
  }
  float block[CPU_BLOCK];
  for (int64_t col = 0; col < cols; col += CPU_BLOCK) {
    int64_t n = cols - col < CPU_BLOCK ? cols - col : CPU_BLOCK;
    job->write(job, block, cpu_at(in, dtype, col), col, n, stats);
    cpu_convert->stream_copy(cpu_at(out, dtype, col), block,
                             (size_t)n * gllmk_plugin_dtype_size(dtype));
  }
}

static void norm_range(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  int64_t group = 1;
  if (job->stream) {
    group = GROUP_BYTES / (job->x.cols * (int64_t)gllmk_plugin_dtype_size(job->x.dtype));
    group = group < 1 ? 1 : group > GROUP_ROWS ? GROUP_ROWS : group;
  }
  row_stats stats[GROUP_ROWS];
  for (int64_t first = begin; first < end; first += group) {
    int64_t count = end - first < group ? end - first : group;
    for (int64_t i = 0; i < count; i++) stats[i] = job->stats(job, first + i);
    for (int64_t i = 0; i < count; i++) write_row(job, first + i, &stats[i]);
  }
  if (job->stream) cpu_convert->stream_fence();
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
  if (!job->in) job->in = &job->x;
  /* In place, the output lines are in cache already: plain stores are best.
   * A compute-bound op gains nothing from streaming but pays its extra pass
   * through an L1 block (measured). */
  job->stream =
      !job->expensive && job->out.data != job->x.data &&
      cpu_streams(job->out.rows * job->out.cols * (int64_t)gllmk_plugin_dtype_size(job->out.dtype));
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

/* A row's sum of squares: the kernel's sums over CPU_BLOCK-element blocks,
 * added in double (the same blocks as rmsnorm_row, so results do not depend
 * on how rows are scheduled). */
static double row_sum_squares(int32_t dtype, const char *x, int64_t cols) {
  double sum = 0.0;
  for (int64_t col = 0; col < cols; col += CPU_BLOCK) {
    int64_t n = cols - col < CPU_BLOCK ? cols - col : CPU_BLOCK;
    sum += cpu_vec->sum_squares(dtype, cpu_at(x, dtype, col), n);
  }
  return sum;
}

static row_stats rmsnorm_stats(const norm_job *job, int64_t row) {
  double sum_squares = row_sum_squares(job->x.dtype, cpu_row(&job->x, row), job->x.cols);
  return (row_stats){.scale = rms_scale(sum_squares, job->x.cols, job->eps)};
}

static void write_scaled(const norm_job *job, void *out, const char *in, int64_t col, int64_t n,
                         const row_stats *stats) {
  cpu_vec->scale_mul(job->x.dtype, out, in, stats->scale, job->weight + col, n);
}

/* Without streaming: out = x * scale * w for one row while the sum of
 * squares of the next is taken (the same block sums as row_sum_squares);
 * reading one row while writing the other keeps both memory streams busy. */
static void rmsnorm_range_overlapped(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  if (job->stream) {
    norm_range(ctx, begin, end);
    return;
  }
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  double sum_squares = row_sum_squares(dtype, cpu_row(&job->x, begin), cols);
  for (int64_t row = begin; row < end; row++) {
    const char *x = cpu_row(&job->x, row);
    const char *next = row + 1 < end ? cpu_row(&job->x, row + 1) : NULL;
    char *out = cpu_row(&job->out, row);
    float scale = rms_scale(sum_squares, cols, job->eps);
    sum_squares = 0.0;
    for (int64_t col = 0; col < cols; col += CPU_BLOCK) {
      int64_t n = cols - col < CPU_BLOCK ? cols - col : CPU_BLOCK;
      if (next)
        sum_squares +=
            cpu_vec->scale_mul_sum_squares(dtype, cpu_at(out, dtype, col), cpu_at(x, dtype, col),
                                           scale, job->weight + col, cpu_at(next, dtype, col), n);
      else
        cpu_vec->scale_mul(dtype, cpu_at(out, dtype, col), cpu_at(x, dtype, col), scale,
                           job->weight + col, n);
    }
  }
}

gllmk_status cpu_rmsnorm(gllmk_plugin_device *device, const gllmk_rmsnorm_args *args) {
  norm_job job = {
      .out = cpu_rows_of(args->out),
      .x = cpu_rows_of(args->x),
      .eps = args->eps,
      .stats = rmsnorm_stats,
      .write = write_scaled,
  };
  return run_norm(device, "gllmk_rmsnorm", &job, args->weight, NULL, rmsnorm_range_overlapped);
}

/* residual += x (stored in residual's dtype), then rmsnorm of the stored
 * values, exactly what a later reader of residual sees. */
static row_stats add_rmsnorm_stats(const norm_job *job, int64_t row) {
  double sum_squares = cpu_vec->add_sum_squares(job->x.dtype, cpu_row(&job->residual, row),
                                                cpu_row(&job->x, row), job->x.cols);
  return (row_stats){.scale = rms_scale(sum_squares, job->x.cols, job->eps)};
}

gllmk_status cpu_add_rmsnorm(gllmk_plugin_device *device, const gllmk_add_rmsnorm_args *args) {
  norm_job job = {
      .out = cpu_rows_of(args->out),
      .x = cpu_rows_of(args->x),
      .residual = cpu_rows_of(args->residual),
      .eps = args->eps,
      .stats = add_rmsnorm_stats,
      .write = write_scaled,
  };
  job.in = &job.residual;
  return run_norm(device, "gllmk_add_rmsnorm", &job, args->weight, NULL, norm_range);
}

/* ------------------------------------------------------------ layernorm */

static row_stats layernorm_stats(const norm_job *job, int64_t row) {
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  const char *x = cpu_row(&job->x, row);
  /* The mean as a float pair, so x - mean loses nothing to its rounding. */
  double mean = cpu_vec->sum(dtype, x, cols) / (double)cols;
  row_stats stats = {.mean_high = (float)mean};
  stats.mean_low = (float)(mean - (double)stats.mean_high);
  double deviations =
      cpu_vec->sum_squared_deviations(dtype, x, stats.mean_high, stats.mean_low, cols);
  stats.scale = (float)(1.0 / sqrt(deviations / (double)cols + (double)job->eps));
  return stats;
}

static void write_normalized(const norm_job *job, void *out, const char *in, int64_t col, int64_t n,
                             const row_stats *stats) {
  cpu_vec->normalize_affine(job->x.dtype, out, in, stats->mean_high, stats->mean_low, stats->scale,
                            job->weight + col, job->bias ? job->bias + col : NULL, n);
}

gllmk_status cpu_layernorm(gllmk_plugin_device *device, const gllmk_layernorm_args *args) {
  norm_job job = {
      .out = cpu_rows_of(args->out),
      .x = cpu_rows_of(args->x),
      .eps = args->eps,
      .stats = layernorm_stats,
      .write = write_normalized,
  };
  return run_norm(device, "gllmk_layernorm", &job, args->weight, args->bias, norm_range);
}

/* ------------------------------------------------------------ softmax */

/* out = exp(scale x - m) / sum, m the row's largest scale x. A NaN anywhere
 * in the row makes the whole row NaN. */
static row_stats softmax_stats(const norm_job *job, int64_t row) {
  int32_t dtype = job->x.dtype;
  const char *x = cpu_row(&job->x, row);
  row_stats stats = {.max = cpu_vec->max_scaled(dtype, x, job->scale, job->x.cols)};
  stats.scale = (float)(1.0 / cpu_vec->exp_sum(dtype, x, job->scale, stats.max, job->x.cols));
  return stats;
}

static void write_softmax(const norm_job *job, void *out, const char *in, int64_t col, int64_t n,
                          const row_stats *stats) {
  (void)col;
  cpu_vec->exp_scale(job->x.dtype, out, in, job->scale, stats->max, stats->scale, n);
}

/* Softmax rows with one exp per element: the exps go into out itself (F32)
 * or into a scratch row (F16/BF16) while they are summed, then get scaled
 * by 1 / sum: the same values as exp_scale's, without computing each exp
 * twice. Without the scratch row's memory, the two-exp way. */
static void softmax_range(void *ctx, int64_t begin, int64_t end) {
  const norm_job *job = ctx;
  int32_t dtype = job->x.dtype;
  int64_t cols = job->x.cols;
  float *scratch = NULL;
  if (dtype != GLLMK_F32 && !(scratch = malloc((size_t)cols * sizeof(float)))) {
    norm_range(ctx, begin, end);
    return;
  }
  for (int64_t row = begin; row < end; row++) {
    const char *x = cpu_row(&job->x, row);
    char *out = cpu_row(&job->out, row);
    float *e = scratch ? scratch : (float *)(void *)out;
    float max = cpu_vec->max_scaled(dtype, x, job->scale, cols);
    double sum = cpu_vec->exp_sum_store(dtype, e, x, job->scale, max, cols);
    cpu_vec->scale_store(dtype, out, e, (float)(1.0 / sum), cols);
  }
  free(scratch);
}

gllmk_status cpu_softmax(gllmk_plugin_device *device, const gllmk_softmax_args *args) {
  norm_job job = {
      .out = cpu_rows_of(args->out),
      .x = cpu_rows_of(args->x),
      .scale = args->scale,
      .stats = softmax_stats,
      .write = write_softmax,
      .expensive = 1,
  };
  return run_norm(device, "gllmk_softmax", &job, NULL, NULL, softmax_range);
}
