/*
 * timing.c - per-op device timing (gllmk_context_set_timing): a plugin mark
 * before and after each op, read back at the next synchronize and handed to
 * the caller's callback in call order.
 *
 * A plugin without marks is timed on the host: the core waits for the queue
 * before and after the op. That is slower and says so (host_timed = 1); a
 * device error met by those waits is kept for the next gllmk_synchronize.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

static uint64_t host_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

gllmk_status gllmk_context_set_timing(gllmk_context *handle, gllmk_timing_callback callback,
                                      void *user_data) {
  static const char fn[] = "gllmk_context_set_timing";
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg(fn, handle, &context));
  /* Records of the previous setting go to the previous callback. */
  if (context->timed_count) CORE_TRY(core_context_synchronize(context));
  context->timing_callback = callback;
  context->timing_data = user_data;
  return GLLMK_OK;
}

gllmk_status core_timing_begin(core_context *context, const core_call *call, uint32_t *out_index) {
  if (core_reserve_one(&context->timed, context->timed_count, &context->timed_capacity,
                       sizeof *context->timed, 64) != GLLMK_OK)
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory for timing records",
                     gllmk_op_name(call->op));
  core_timed_call *timed = &context->timed[context->timed_count];
  memset(timed, 0, sizeof *timed);
  timed->call = *call;
  gllmk_status (*mark)(gllmk_plugin_device *, uint32_t *) = CORE_PLUGIN_FN(context->plugin, mark);
  if (mark == NULL || CORE_PLUGIN_FN(context->plugin, marks_read) == NULL) {
    timed->host_timed = 1;
    core_context_wait(context);
    timed->begin_ns = host_ns();
  } else {
    CORE_TRY(mark(context->device, &timed->begin_mark));
  }
  *out_index = context->timed_count++;
  return GLLMK_OK;
}

void core_timing_end(core_context *context, uint32_t index) {
  core_timed_call *timed = &context->timed[index];
  if (timed->host_timed) {
    core_context_wait(context);
    timed->end_ns = host_ns();
  } else if (context->plugin->mark(context->device, &timed->end_mark) != GLLMK_OK) {
    timed->end_mark = timed->begin_mark; /* shown as zero length rather than lost */
  }
}

/* Device times for the marked calls, in place of their mark ids. */
static void read_marks(core_context *context) {
  uint32_t count = 0;
  for (uint32_t i = 0; i < context->timed_count; i++)
    if (!context->timed[i].host_timed && context->timed[i].end_mark + 1 > count)
      count = context->timed[i].end_mark + 1;
  if (count == 0) return;
  uint64_t *ns = calloc(count, sizeof *ns);
  if (ns == NULL || context->plugin->marks_read(context->device, count, ns) != GLLMK_OK) {
    free(ns);
    return; /* records keep zero times; timing never fails the caller's work */
  }
  for (uint32_t i = 0; i < context->timed_count; i++) {
    core_timed_call *timed = &context->timed[i];
    if (timed->host_timed) continue;
    timed->begin_ns = ns[timed->begin_mark];
    timed->end_ns = ns[timed->end_mark];
  }
  free(ns);
}

void core_timing_deliver(core_context *context) {
  read_marks(context);
  for (uint32_t i = 0; i < context->timed_count && context->timing_callback; i++) {
    core_timed_call *timed = &context->timed[i];
    core_args args;
    core_call_args(&timed->call, timed->call.tensors, &args);
    gllmk_op_timing record = {
        .op = timed->call.op,
        .args = &args,
        .args_size = core_args_size(timed->call.op),
        .start_ns = timed->begin_ns,
        .end_ns = timed->end_ns,
        .host_timed = timed->host_timed,
    };
    context->timing_callback(context->timing_data, &record);
  }
  context->timed_count = 0;
}

void core_timing_reset(core_context *context) {
  free(context->timed);
  context->timed = NULL;
  context->timed_count = context->timed_capacity = 0;
}
