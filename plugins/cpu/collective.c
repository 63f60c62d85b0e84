/*
 * collective.c - the cpu plugin's collectives: a loopback communicator
 * between cpu contexts of one process. Every context computes on the
 * calling thread and its pool before an entry point returns, so when the
 * core hands over a collective, every rank's input is already complete and
 * the sum can be formed right here, in F32, in rank order (the same order
 * and rounding on every run).
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct gllmk_plugin_comm {
  uint32_t count;
};

/* Elements summed per pass: F32 accumulators that stay in the L1 cache. */
#define REDUCE_CHUNK 2048

gllmk_status cpu_comm_create(gllmk_plugin_device *const *devices, uint32_t count,
                             gllmk_plugin_comm **out_comm) {
  (void)devices;
  gllmk_plugin_comm *comm = malloc(sizeof *comm);
  if (comm == NULL) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: out of memory");
  comm->count = count;
  *out_comm = comm;
  return GLLMK_OK;
}

void cpu_comm_free(gllmk_plugin_comm *comm) { free(comm); }

static char *element_at(const gllmk_tensor *t, int64_t i) {
  return (char *)cpu_tensor_data(t) + (size_t)i * gllmk_plugin_dtype_size(t->dtype);
}

gllmk_status cpu_all_reduce(gllmk_plugin_comm *comm, const gllmk_tensor *outs,
                            const gllmk_tensor *ins) {
  float sum[REDUCE_CHUNK], part[REDUCE_CHUNK];
  int64_t total = 1;
  for (int32_t d = 0; d < ins[0].ndim; d++) total *= ins[0].shape[d];
  /* Chunk by chunk, every rank's input is read before any output is
   * written, so an output may be its rank's input (in place). */
  for (int64_t first = 0; first < total; first += REDUCE_CHUNK) {
    int64_t n = total - first < REDUCE_CHUNK ? total - first : REDUCE_CHUNK;
    cpu_load_f32(ins[0].dtype, element_at(&ins[0], first), sum, n);
    for (uint32_t r = 1; r < comm->count; r++) {
      cpu_load_f32(ins[r].dtype, element_at(&ins[r], first), part, n);
      for (int64_t i = 0; i < n; i++) sum[i] += part[i];
    }
    for (uint32_t r = 0; r < comm->count; r++)
      cpu_store_f32(outs[r].dtype, sum, element_at(&outs[r], first), n);
  }
  return GLLMK_OK;
}

gllmk_status cpu_all_gather(gllmk_plugin_comm *comm, const gllmk_tensor *outs,
                            const gllmk_tensor *ins) {
  size_t bytes = gllmk_plugin_dtype_size(ins[0].dtype);
  for (int32_t d = 0; d < ins[0].ndim; d++) bytes *= (size_t)ins[0].shape[d];
  for (uint32_t r = 0; r < comm->count; r++)
    for (uint32_t i = 0; i < comm->count; i++)
      memcpy((char *)cpu_tensor_data(&outs[r]) + i * bytes, cpu_tensor_data(&ins[i]), bytes);
  return GLLMK_OK;
}
