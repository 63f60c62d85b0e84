/*
 * cpu_embedding.c - out[i, :] = table[ids[i], :].
 */
#include <string.h>

#include "cpu_ops.h"

typedef struct embedding_job {
  cpu_rows out, table, ids;
  int64_t count;     /* number of ids */
  int64_t first_bad; /* lowest index of an out-of-range id (atomic), or count */
  int stream;        /* write rows with stream_copy */
} embedding_job;

static void record_bad_index(embedding_job *job, int64_t index) {
  int64_t seen = __atomic_load_n(&job->first_bad, __ATOMIC_RELAXED);
  while (index < seen && !__atomic_compare_exchange_n(&job->first_bad, &seen, index, 1,
                                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void embedding_range(void *ctx, int64_t begin, int64_t end) {
  embedding_job *job = ctx;
  size_t row_bytes = (size_t)job->out.cols * gllmk_plugin_dtype_size(job->out.dtype);
  for (int64_t i = begin; i < end; i++) {
    int32_t id = *(const int32_t *)(const void *)cpu_flat(&job->ids, i);
    char *dst = cpu_row(&job->out, i);
    if (id >= 0 && id < job->table.rows) {
      if (job->stream)
        cpu_convert->stream_copy(dst, cpu_row(&job->table, id), row_bytes);
      else
        memcpy(dst, cpu_row(&job->table, id), row_bytes);
    } else {
      memset(dst, 0, row_bytes);
      record_bad_index(job, i);
    }
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_embedding(gllmk_plugin_device *device, const gllmk_embedding_args *args) {
  embedding_job job = {
      .out = cpu_rows_of(args->out),
      .table = cpu_rows_of(args->table),
      .ids = cpu_rows_of(args->ids),
  };
  job.count = job.ids.rows * job.ids.cols;
  job.first_bad = job.count;
  job.stream =
      cpu_streams(job.count * job.out.cols * (int64_t)gllmk_plugin_dtype_size(job.out.dtype));
  cpu_parallel_for(device, job.count, cpu_row_grain(job.out.cols), embedding_range, &job);
  if (job.first_bad < job.count) {
    /* The lowest bad index is reported, whatever the thread count. */
    int32_t id = *(const int32_t *)(const void *)cpu_flat(&job.ids, job.first_bad);
    cpu_raise(device, GLLMK_ERR_OUT_OF_RANGE, "gllmk_embedding: ids[%lld]=%d is outside [0, %lld)",
              (long long)job.first_bad, id, (long long)job.table.rows);
  }
  return GLLMK_OK;
}
