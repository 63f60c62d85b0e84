/*
 * cpu_tasks.c - runs a list of tasks on the device's threads, each thread
 * with its own scratch memory (used by matmul and attention).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_gemm.h"

typedef struct task_run {
  cpu_task_fn fn;
  void *ctx;
  int64_t task_count;
  atomic_int_fast64_t next_task;
  char *scratch;
  size_t scratch_stride;
} task_run;

/* One call per slot (a slot is one thread's share): it takes tasks from the
 * shared counter until none are left, so a fast thread does more of them. */
static void run_slots(void *ctx, int64_t begin, int64_t end) {
  task_run *run = ctx;
  for (int64_t slot = begin; slot < end; slot++) {
    void *scratch = run->scratch + (size_t)slot * run->scratch_stride;
    for (;;) {
      int64_t task = atomic_fetch_add(&run->next_task, 1);
      if (task >= run->task_count) break;
      run->fn(run->ctx, task, scratch);
    }
  }
}

gllmk_status cpu_run_tasks(gllmk_plugin_device *device, int64_t task_count, size_t scratch_bytes,
                           cpu_task_fn fn, void *ctx) {
  if (task_count <= 0) return GLLMK_OK;
  int64_t slots = device->num_threads > 1 ? device->num_threads : 1;
  if (slots > task_count) slots = task_count;

  task_run run;
  run.fn = fn;
  run.ctx = ctx;
  run.task_count = task_count;
  atomic_init(&run.next_task, 0);
  run.scratch_stride = (scratch_bytes + 63) / 64 * 64;
  run.scratch = NULL;
  if (run.scratch_stride > 0) {
    run.scratch = aligned_alloc(64, run.scratch_stride * (size_t)slots);
    if (!run.scratch)
      return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY,
                            "cpu: cannot allocate %zu bytes of scratch memory",
                            run.scratch_stride * (size_t)slots);
  }
  if (slots == 1)
    run_slots(&run, 0, 1);
  else
    cpu_parallel_for(device, slots, 1, run_slots, &run);
  free(run.scratch);
  return GLLMK_OK;
}
