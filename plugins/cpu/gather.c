/*
 * gather.c - the gather family on the cpu: embedding (out[i, :] =
 * table[ids[i], :]) and kv_append (each token's k and v rows into its slot
 * of a paged cache). Both are row copies with no kernels of their own:
 * memcpy, or for outputs larger than the last-level cache stream_copy of
 * the cpu_convert table (cpu_convert*.c), which skips reading the lines it
 * overwrites. From below they use cpu_parallel_for
 * (cpu_pool.c), cpu_raise (cpu_plugin.c) for ids and slots out of range,
 * and the row helpers of cpu_rows.h.
 */
#include <string.h>

#include "cpu_rows.h"
#include "ops.h"

/* ------------------------------------------------------------- embedding */

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
      cpu_copy_bytes(job->stream, dst, cpu_row(&job->table, id), row_bytes);
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

/* ------------------------------------------------------------- kv_append */

typedef struct kv_append_job {
  const gllmk_kv_append_args *args;
  const int32_t *slots;
  int64_t slot_stride, cache_slots, block_size, heads, row_bytes;
  size_t esize;
  int stream;           /* write with stream_copy: the rows written outgrow the cache */
  int k_whole, v_whole; /* a token's heads lie back to back in k (v) and its cache */
} kv_append_job;

/* Copies token t's rows of every head into its slot of one cache: one copy
 * when the heads lie back to back in both (`whole`: dense rows, as a
 * model's k and v and its caches are), else one a head. */
static void append_rows(const kv_append_job *job, const gllmk_tensor *cache,
                        const gllmk_tensor *src, int whole, int64_t t, int64_t slot) {
  int64_t block = slot / job->block_size, offset = slot % job->block_size;
  const int64_t copies = whole ? 1 : job->heads;
  const size_t bytes = (size_t)(whole ? job->heads * job->row_bytes : job->row_bytes);
  for (int64_t h = 0; h < copies; h++) {
    char *dst =
        (char *)cpu_tensor_data(cache) +
        (size_t)(block * cache->strides[0] + offset * cache->strides[1] + h * cache->strides[2]) *
            job->esize;
    const char *from = (const char *)cpu_tensor_data(src) +
                       (size_t)(t * src->strides[0] + h * src->strides[1]) * job->esize;
    cpu_copy_bytes(job->stream, dst, from, bytes);
  }
}

static void kv_append_range(void *ctx, int64_t begin, int64_t end) {
  const kv_append_job *job = ctx;
  for (int64_t t = begin; t < end; t++) {
    int64_t slot = job->slots[t * job->slot_stride];
    if (slot < 0 || slot >= job->cache_slots) continue;
    append_rows(job, job->args->k_cache, job->args->k, job->k_whole, t, slot);
    append_rows(job, job->args->v_cache, job->args->v, job->v_whole, t, slot);
  }
  if (job->stream) cpu_convert->stream_fence();
}

gllmk_status cpu_kv_append(gllmk_plugin_device *device, const gllmk_kv_append_args *args) {
  kv_append_job job;
  job.args = args;
  job.slots = cpu_tensor_data(args->slots);
  job.slot_stride = args->slots->strides[0];
  job.block_size = args->k_cache->shape[1];
  job.cache_slots = args->k_cache->shape[0] * job.block_size;
  job.heads = args->k->shape[1];
  job.esize = gllmk_plugin_dtype_size(args->k->dtype);
  job.row_bytes = args->k->shape[2] * (int64_t)job.esize;
  int64_t tokens = args->k->shape[0];
  job.stream = cpu_streams(2 * tokens * job.heads * job.row_bytes);
  const int64_t d = args->k->shape[2];
  job.k_whole = args->k_cache->strides[2] == d && args->k->strides[1] == d;
  job.v_whole = args->v_cache->strides[2] == d && args->v->strides[1] == d;
  for (int64_t t = 0; t < tokens; t++) {
    int32_t slot = job.slots[t * job.slot_stride];
    if (slot >= job.cache_slots) {
      cpu_raise(device, GLLMK_ERR_OUT_OF_RANGE,
                "gllmk_kv_append: slots[%lld]=%d is past the cache's %lld slots", (long long)t,
                slot, (long long)job.cache_slots);
      break;
    }
  }
  cpu_parallel_for(device, tokens, 64, kv_append_range, &job);
  return GLLMK_OK;
}
