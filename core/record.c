/*
 * record.c - recordings: validated op calls kept by value and replayed,
 * call by call by the core, or as the plugin's native form (a CUDA graph, a
 * reused command buffer) when the plugin compiles one.
 *
 * A recording keeps the caller's buffer handles, not the plugin's memory, so
 * a replay first re-checks every buffer it uses and refuses, running
 * nothing, if one was freed.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Room for one more item in a growing array, so that appending cannot
 * fail. `array` is the address of the array's pointer (of any item type:
 * it is read and written with memcpy). */
gllmk_status core_reserve_one(void *array, uint32_t count, uint32_t *capacity, size_t size,
                              uint32_t first_capacity) {
  if (count < *capacity) return GLLMK_OK;
  void *items;
  memcpy(&items, array, sizeof items);
  uint32_t grown_capacity = *capacity ? 2 * *capacity : first_capacity;
  void *grown = realloc(items, (size_t)grown_capacity * size);
  if (grown == NULL) return GLLMK_ERR_OUT_OF_MEMORY;
  memcpy(array, &grown, sizeof grown);
  *capacity = grown_capacity;
  return GLLMK_OK;
}

gllmk_status core_recording_reserve(core_recording *recording) {
  return core_reserve_one(&recording->calls, recording->count, &recording->capacity,
                          sizeof *recording->calls, 16);
}

static core_recording *recording_get(const gllmk_recording *handle) {
  return core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_RECORDING);
}

gllmk_status gllmk_recording_begin(gllmk_context *handle) {
  static const char fn[] = "gllmk_recording_begin";
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg(fn, handle, &context));
  if (context->recording)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: the context is already recording", fn);
  core_recording *recording = calloc(1, sizeof *recording);
  if (recording == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  recording->context = context;
  context->recording = recording;
  return GLLMK_OK;
}

/* Feeds the recorded calls to the plugin between record_begin and
 * record_end. Any failure leaves the recording without a native form: the
 * core then replays it call by call, which every plugin supports. */
static void compile_native(core_recording *recording) {
  core_context *context = recording->context;
  const gllmk_plugin *plugin = context->plugin;
  gllmk_status (*begin)(gllmk_plugin_device *) = CORE_PLUGIN_FN(plugin, record_begin);
  gllmk_status (*end)(gllmk_plugin_device *, gllmk_plugin_recording **) =
      CORE_PLUGIN_FN(plugin, record_end);
  if (begin == NULL || end == NULL || CORE_PLUGIN_FN(plugin, record_replay) == NULL ||
      CORE_PLUGIN_FN(plugin, record_free) == NULL || recording->count == 0)
    return;
  if (begin(context->device) != GLLMK_OK) return;
  /* Timing marks would be captured too; native recordings are timed whole. */
  gllmk_timing_callback timing = context->timing_callback;
  context->timing_callback = NULL;
  gllmk_status status = GLLMK_OK;
  for (uint32_t i = 0; i < recording->count && status == GLLMK_OK; i++)
    status = core_call_run("gllmk_recording_end", context, &recording->calls[i]);
  context->timing_callback = timing;
  gllmk_plugin_recording *native = NULL;
  gllmk_status ended = end(context->device, &native);
  if (status == GLLMK_OK && ended == GLLMK_OK) recording->native = native;
  else if (ended == GLLMK_OK && native) plugin->record_free(context->device, native);
}

gllmk_status gllmk_recording_end(gllmk_context *handle, gllmk_recording **out_recording) {
  static const char fn[] = "gllmk_recording_end";
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg(fn, handle, &context));
  if (out_recording == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_recording is NULL", fn);
  core_recording *recording = context->recording;
  if (recording == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: the context is not recording", fn);
  uint64_t id = core_handle_new(CORE_HANDLE_RECORDING, recording);
  if (id == 0) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: no handle left", fn);
  context->recording = NULL;
  recording->handle = (gllmk_recording *)(uintptr_t)id;
  recording->next = context->recordings;
  if (context->recordings) context->recordings->prev = recording;
  context->recordings = recording;
  if (recording->group) core_group_recording_ended(recording);
  else compile_native(recording);
  core_clear_error();
  *out_recording = recording->handle;
  return GLLMK_OK;
}

/* Every buffer the recording uses is still live. */
static gllmk_status buffers_live(const char *fn, const core_recording *recording) {
  for (uint32_t i = 0; i < recording->count; i++) {
    const core_call *call = &recording->calls[i];
    for (uint32_t t = 0; t < CORE_MAX_OP_TENSORS; t++)
      if ((call->present >> t & 1u) && core_buffer_get(call->tensors[t].buffer) == NULL)
        return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                         "%s: call %u (%s) uses a buffer that was freed; nothing was run", fn,
                         i, gllmk_op_name(call->op));
  }
  return GLLMK_OK;
}

gllmk_status gllmk_recording_replay(gllmk_recording *handle) {
  static const char fn[] = "gllmk_recording_replay";
  core_clear_error();
  core_recording *recording = recording_get(handle);
  if (recording == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: recording is %s", fn,
                     handle ? "not a live gllmk recording (freed?)" : "NULL");
  core_context *context = recording->context;
  if (context->recording)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: the context is recording", fn);
  CORE_TRY(buffers_live(fn, recording));
  if (recording->group) {
    CORE_TRY(core_group_replay_check(fn, recording));
    return context->plugin->record_replay(context->device, recording->native);
  }
  if (recording->native && context->timing_callback == NULL)
    return context->plugin->record_replay(context->device, recording->native);
  for (uint32_t i = 0; i < recording->count; i++)
    CORE_TRY(core_call_run(fn, context, &recording->calls[i]));
  return GLLMK_OK;
}

uint32_t gllmk_recording_size(const gllmk_recording *handle) {
  core_recording *recording = recording_get(handle);
  return recording ? recording->count : 0;
}

int gllmk_recording_is_native(const gllmk_recording *handle) {
  core_recording *recording = recording_get(handle);
  return recording && recording->native != NULL;
}

void core_recording_destroy(core_recording *recording) {
  core_context *context = recording->context;
  if (recording->handle) {
    core_handle_release((uint64_t)(uintptr_t)recording->handle, CORE_HANDLE_RECORDING);
    if (recording->prev) recording->prev->next = recording->next;
    else context->recordings = recording->next;
    if (recording->next) recording->next->prev = recording->prev;
  } else {
    context->recording = NULL; /* still being recorded */
  }
  if (recording->native) {
    core_context_wait(context); /* a replay may be in flight */
    context->plugin->record_free(context->device, recording->native);
  }
  if (recording->group) core_group_recording_gone(recording);
  free(recording->calls);
  free(recording);
}

void gllmk_recording_free(gllmk_recording *handle) {
  core_recording *recording = recording_get(handle);
  if (recording) core_recording_destroy(recording);
}
