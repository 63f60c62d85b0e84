/*
 * rope.c - the rope family on the cpu: rope, rotary position embedding on
 * x [tokens, heads, head_dim]. The host code is here; the angles and the
 * turning of a row are the cpu_vec table's rope_angles, rope_neox and
 * rope_gptj (cpu_vec.inc, built for each instruction set by cpu_vec*.c).
 * From below it also uses cpu_parallel_for (cpu_pool.c) and cpu_rows.h.
 *
 * Pair j turns by position * theta^(-2j / rotary_dim), or by position *
 * inv_freq[j] when the caller gives the frequencies. They are computed (or
 * widened) once per call in double; each thread computes the cos/sin table
 * of a token once (in double, then rounded to float) and uses it for all of
 * the token's heads. Angles stay accurate for positions far beyond 131072.
 * An output larger than the last-level cache is written past the cache:
 * rows are turned into an L1 block, and each run of rows that lie back to
 * back in out (a token's heads, and the next tokens' when dense) leaves it
 * in one stream_copy. Streaming each short row by itself was slower than
 * plain stores; a block of whole tokens is not (docs/performance.md).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_rows.h"
#include "ops.h"

typedef struct rope_job {
  int32_t dtype;
  const char *x;
  char *out;
  int64_t heads, head_dim, rotary_dim, half;
  size_t row_bytes; /* head_dim elements */
  int64_t x_token_stride, x_head_stride, out_token_stride, out_head_stride;
  const int32_t *positions;
  int64_t position_stride;
  int32_t style;
  const double *inv_freq; /* [half] */
  int stream;             /* out through an L1 block and stream_copy */
  int out_of_memory;      /* set by a thread that could not get its tables */
} rope_job;

enum { ROPE_STREAM_BLOCK = 16 << 10 }; /* bytes of out staged at a time */

/* Turned rows staged for stream_copy: `used` bytes that go to `dst`. */
typedef struct rope_stage {
  char *block, *dst;
  size_t used;
} rope_stage;

static void rope_stage_flush(rope_stage *stage) {
  if (stage->used) cpu_convert->stream_copy(stage->dst, stage->block, stage->used);
  stage->used = 0;
}

/* Where a row bound for dst is turned: after the staged rows when it
 * continues them and fits, else at the start of the emptied block. */
static char *rope_stage_place(rope_stage *stage, char *dst, size_t bytes) {
  if (stage->used && (dst != stage->dst + stage->used || stage->used + bytes > ROPE_STREAM_BLOCK))
    rope_stage_flush(stage);
  if (!stage->used) stage->dst = dst;
  char *at = stage->block + stage->used;
  stage->used += bytes;
  return at;
}

/* One row of head_dim elements into dst (which is src, or does not overlap
 * it). */
static void rope_row(const rope_job *job, char *dst, const char *src, const float *cos,
                     const float *sin) {
  size_t size = gllmk_plugin_dtype_size(job->dtype);
  if (job->style == GLLMK_ROPE_GPTJ) {
    cpu_vec->rope_gptj(job->dtype, dst, src, cos, sin, job->half);
  } else {
    int64_t second = job->half * (int64_t)size;
    cpu_vec->rope_neox(job->dtype, dst, dst + second, src, src + second, cos, sin, job->half);
  }
  if (dst != src && job->rotary_dim < job->head_dim)
    memcpy(dst + job->rotary_dim * (int64_t)size, src + job->rotary_dim * (int64_t)size,
           (size_t)(job->head_dim - job->rotary_dim) * size);
}

static void rope_range(void *ctx, int64_t begin, int64_t end) {
  rope_job *job = ctx;
  size_t table_bytes = (size_t)(job->half > 0 ? job->half : 1) * 2 * sizeof(float);
  float *table = malloc(table_bytes + (job->stream ? ROPE_STREAM_BLOCK : 0));
  if (!table) {
    __atomic_store_n(&job->out_of_memory, 1, __ATOMIC_RELAXED);
    return;
  }
  float *cos = table, *sin = table + job->half;
  size_t size = gllmk_plugin_dtype_size(job->dtype);
  rope_stage stage = {.block = (char *)table + table_bytes};
  int64_t table_token = -1;
  for (int64_t row = begin; row < end; row++) {
    int64_t token = row / job->heads, head = row % job->heads;
    if (token != table_token) {
      double position = job->positions[token * job->position_stride];
      cpu_vec->rope_angles(cos, sin, job->inv_freq, position, job->half);
      table_token = token;
    }
    const char *src =
        job->x + (token * job->x_token_stride + head * job->x_head_stride) * (int64_t)size;
    char *dst =
        job->out + (token * job->out_token_stride + head * job->out_head_stride) * (int64_t)size;
    rope_row(job, job->stream ? rope_stage_place(&stage, dst, job->row_bytes) : dst, src, cos, sin);
  }
  if (job->stream) {
    rope_stage_flush(&stage);
    cpu_convert->stream_fence();
  }
  free(table);
}

gllmk_status cpu_rope(gllmk_plugin_device *device, const gllmk_rope_args *args) {
  const gllmk_tensor *x = args->x, *out = args->out;
  rope_job job = {
      .dtype = x->dtype,
      .x = cpu_tensor_data(x),
      .out = cpu_tensor_data(out),
      .heads = x->shape[1],
      .head_dim = x->shape[2],
      .row_bytes = (size_t)x->shape[2] * gllmk_plugin_dtype_size(x->dtype),
      .rotary_dim = args->rotary_dim,
      .half = args->rotary_dim / 2,
      .x_token_stride = x->strides[0],
      .x_head_stride = x->strides[1],
      .out_token_stride = out->strides[0],
      .out_head_stride = out->strides[1],
      .positions = cpu_tensor_data(args->positions),
      .position_stride = args->positions->strides[0],
      .style = args->style,
  };
  int in_place =
      job.x == job.out && x->strides[0] == out->strides[0] && x->strides[1] == out->strides[1];
  if (job.half == 0 && in_place) return GLLMK_OK;

  double *inv_freq = malloc((size_t)(job.half > 0 ? job.half : 1) * sizeof(double));
  if (!inv_freq) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_rope: out of host memory");
  const float *given = args->inv_freq ? cpu_tensor_data(args->inv_freq) : NULL; /* F32, dense */
  for (int64_t j = 0; j < job.half; j++)
    inv_freq[j] = given ? (double)given[j]
                        : pow((double)args->theta, -(double)(2 * j) / (double)args->rotary_dim);
  job.inv_freq = inv_freq;
  /* a row must fit the block, and in place rows are in cache already */
  job.stream = !in_place && job.row_bytes <= ROPE_STREAM_BLOCK &&
               cpu_streams(x->shape[0] * job.heads * (int64_t)job.row_bytes);

  int64_t rows = x->shape[0] * job.heads;
  cpu_parallel_for(device, rows, cpu_row_grain(job.head_dim), rope_range, &job);
  free(inv_freq);
  if (job.out_of_memory)
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_rope: out of host memory");
  return GLLMK_OK;
}
