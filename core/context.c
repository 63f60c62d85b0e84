/*
 * context.c - contexts (one plugin device each) and buffers, both reached
 * through checked handles (handles.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

core_context *core_context_get(const gllmk_context *handle) {
  return core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_CONTEXT);
}

core_buffer *core_buffer_get(const gllmk_buffer *handle) {
  return core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_BUFFER);
}

gllmk_status core_context_arg(const char *fn, const gllmk_context *handle, core_context **out) {
  *out = core_context_get(handle);
  if (*out == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: context is %s", fn,
                     handle ? "not a live gllmk context (destroyed?)" : "NULL");
  return GLLMK_OK;
}

bool core_tail_is_zero(const void *data, size_t known, size_t size) {
  for (size_t i = known; i < size; i++)
    if (((const unsigned char *)data)[i] != 0) return false;
  return true;
}

gllmk_status core_options_copy(const char *fn, const gllmk_context_options *options,
                               size_t size, gllmk_context_options *out) {
  memset(out, 0, sizeof *out);
  if (options == NULL) return GLLMK_OK;
  size_t v2_0 = offsetof(gllmk_context_options, queue) + sizeof out->queue;
  if (size < v2_0)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: options_size=%zu is below gllmk_context_options' %zu bytes", fn,
                     size, v2_0);
  if (!core_tail_is_zero(options, sizeof *out, size))
    return core_fail(GLLMK_ERR_UNSUPPORTED,
                     "%s: options set fields newer than this libgllmk %d.%d.%d knows", fn,
                     GLLMK_VERSION_MAJOR, GLLMK_VERSION_MINOR, GLLMK_VERSION_PATCH);
  memcpy(out, options, size < sizeof *out ? size : sizeof *out);
  return GLLMK_OK;
}

/* ------------------------------------------------------------ contexts */

/* Opens the selected plugin's device into a new context record. */
static gllmk_status open_context(const char *fn, core_plugin_slot *slot,
                                 const gllmk_context_options *options, core_context **out) {
  core_context *context = calloc(1, sizeof *context);
  if (context == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  gllmk_plugin_open_options open_options = {
      .struct_size = sizeof open_options,
      .device_index = options->device_index,
      .num_threads = options->num_threads,
      .queue = options->queue,
  };
  gllmk_status status = slot->plugin->open(&open_options, &context->device);
  if (status != GLLMK_OK) {
    /* Copied first: the plugin's message lives in the buffer core_fail writes. */
    char why[512];
    core_format(why, sizeof why, "%s", gllmk_last_error());
    free(context);
    return core_fail(status, "%s: opening %s device %u failed: %s", fn, slot->record.name,
                     open_options.device_index, why);
  }
  context->plugin = slot->plugin;
  context->device_index = open_options.device_index;
  context->info = slot->devices[open_options.device_index];
  core_format(context->backend, sizeof context->backend, "%s", slot->record.name);
  *out = context;
  return GLLMK_OK;
}

gllmk_status gllmk_context_create_ex(const gllmk_context_options *options, size_t options_size,
                                     gllmk_context **out_context) {
  static const char fn[] = "gllmk_context_create";
  core_clear_error();
  if (out_context == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_context is NULL", fn);
  gllmk_context_options full;
  CORE_TRY(core_options_copy(fn, options, options_size, &full));
  if (!core_options_are_valid(fn, &full)) return GLLMK_ERR_INVALID_ARGUMENT;
  gllmk_discovery *d;
  CORE_TRY(core_discover(options ? &full : NULL, &d));
  if (d->selected < 0) {
    gllmk_status status = core_fail(GLLMK_ERR_NO_BACKEND, "%s: %s", fn, d->no_backend_reason);
    gllmk_discovery_free(d);
    return status;
  }
  core_plugin_slot *slot = &d->slots[d->selected];
  core_context *context = NULL;
  gllmk_status status = open_context(fn, slot, &full, &context);
  uint64_t id = status == GLLMK_OK ? core_handle_new(CORE_HANDLE_CONTEXT, context) : 0;
  if (status == GLLMK_OK && id == 0) {
    slot->plugin->close(context->device);
    free(context);
    status = core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: no handle left", fn);
  } else if (status == GLLMK_OK) {
    /* The context keeps the plugin loaded after the discovery is freed. */
    context->handle = (gllmk_context *)(uintptr_t)id;
    context->dl_handle = slot->handle;
    slot->handle = NULL;
    *out_context = context->handle;
  }
  gllmk_discovery_free(d);
  return status;
}

void gllmk_context_destroy(gllmk_context *handle) {
  core_context *context = core_context_get(handle);
  if (context == NULL) return;
  core_handle_release((uint64_t)(uintptr_t)handle, CORE_HANDLE_CONTEXT);
  if (context->recording) core_recording_destroy(context->recording);
  while (context->recordings) core_recording_destroy(context->recordings);
  while (context->buffers) gllmk_buffer_free(context->buffers->handle);
  core_communicators_release_context(context);
  context->plugin->close(context->device);
  core_timing_reset(context);
  core_plugin_unload(context->dl_handle);
  free(context);
}

void core_context_wait(core_context *context) {
  gllmk_status status = context->plugin->synchronize(context->device);
  if (status != GLLMK_OK && context->deferred_status == GLLMK_OK) {
    context->deferred_status = status;
    core_format(context->deferred_message, sizeof context->deferred_message, "%s",
                gllmk_last_error());
  }
}

gllmk_status core_context_synchronize(core_context *context) {
  gllmk_status deferred = context->deferred_status;
  char message[sizeof context->deferred_message];
  core_format(message, sizeof message, "%s", context->deferred_message);
  context->deferred_status = GLLMK_OK;
  /* An error kept by core_context_wait came first; a newer one waits its turn. */
  if (deferred != GLLMK_OK) core_context_wait(context);
  gllmk_status status = deferred != GLLMK_OK ? core_fail(deferred, "%s", message)
                                             : context->plugin->synchronize(context->device);
  if (context->timed_count) core_timing_deliver(context);
  return status;
}

gllmk_status gllmk_synchronize(gllmk_context *handle) {
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg("gllmk_synchronize", handle, &context));
  return core_context_synchronize(context);
}

const char *gllmk_context_backend(const gllmk_context *handle) {
  core_context *context = core_context_get(handle);
  return context ? context->backend : NULL;
}

gllmk_status gllmk_context_device_info(const gllmk_context *handle, gllmk_device_info *out_info) {
  static const char fn[] = "gllmk_context_device_info";
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg(fn, handle, &context));
  if (out_info == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_info is NULL", fn);
  *out_info = context->info;
  return GLLMK_OK;
}

/* ------------------------------------------------------------ buffers */

/* Gives `memory` (already the plugin's) a buffer record and a handle. On
 * failure the memory is handed back to the plugin. */
static gllmk_status adopt_memory(const char *fn, core_context *context,
                                 gllmk_plugin_memory *memory, uint64_t size,
                                 gllmk_buffer **out_buffer) {
  core_buffer *buffer = calloc(1, sizeof *buffer);
  uint64_t handle = buffer ? core_handle_new(CORE_HANDLE_BUFFER, buffer) : 0;
  if (handle == 0) {
    free(buffer);
    context->plugin->mem_free(context->device, memory);
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  buffer->base.memory = memory;
  buffer->base.size = size;
  buffer->handle = (gllmk_buffer *)(uintptr_t)handle;
  buffer->context = context;
  buffer->next = context->buffers;
  if (context->buffers) context->buffers->prev = buffer;
  context->buffers = buffer;
  *out_buffer = buffer->handle;
  return GLLMK_OK;
}

static gllmk_status check_size(const char *fn, uint64_t size) {
  if (size == 0) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: size is 0", fn);
  if (size > (uint64_t)INT64_MAX)
    return core_fail(GLLMK_ERR_OVERFLOW, "%s: size=%llu is too large", fn, (unsigned long long)size);
  return GLLMK_OK;
}

gllmk_status gllmk_buffer_alloc(gllmk_context *handle, uint64_t size, gllmk_buffer **out_buffer) {
  static const char fn[] = "gllmk_buffer_alloc";
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg(fn, handle, &context));
  if (out_buffer == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_buffer is NULL", fn);
  CORE_TRY(check_size(fn, size));
  gllmk_plugin_memory *memory;
  gllmk_status status = context->plugin->mem_alloc(context->device, size, &memory);
  if (status != GLLMK_OK) {
    char why[512];
    core_format(why, sizeof why, "%s", gllmk_last_error());
    return core_fail(status, "%s: %llu bytes: %s", fn, (unsigned long long)size, why);
  }
  return adopt_memory(fn, context, memory, size, out_buffer);
}

gllmk_status gllmk_buffer_wrap(gllmk_context *handle, const gllmk_external_memory *memory,
                               gllmk_buffer **out_buffer) {
  static const char fn[] = "gllmk_buffer_wrap";
  core_clear_error();
  core_context *context;
  CORE_TRY(core_context_arg(fn, handle, &context));
  if (memory == NULL || out_buffer == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                     memory ? "out_buffer" : "memory");
  CORE_TRY(check_size(fn, memory->size));
  if (memory->address == 0) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: address is 0", fn);
  if (memory->kind != GLLMK_MEMORY_HOST && memory->kind != GLLMK_MEMORY_CUDA_DEVICE)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: kind=%u is not a gllmk_memory_kind", fn,
                     memory->kind);
  gllmk_status (*import)(gllmk_plugin_device *, uint32_t, uint64_t, uint64_t,
                         gllmk_plugin_memory **) = CORE_PLUGIN_FN(context->plugin, mem_import);
  if (import == NULL)
    return core_fail(GLLMK_ERR_UNSUPPORTED, "%s: the %s backend cannot use external memory",
                     fn, context->backend);
  gllmk_plugin_memory *plugin_memory;
  gllmk_status status = import(context->device, memory->kind, memory->address, memory->size,
                               &plugin_memory);
  if (status != GLLMK_OK) {
    char why[512];
    core_format(why, sizeof why, "%s", gllmk_last_error());
    return core_fail(status, "%s: %s", fn, why);
  }
  gllmk_buffer *buffer;
  CORE_TRY(adopt_memory(fn, context, plugin_memory, memory->size, &buffer));
  core_buffer *record = core_buffer_get(buffer);
  record->release = memory->release;
  record->release_data = memory->release_data;
  *out_buffer = buffer;
  return GLLMK_OK;
}

gllmk_status gllmk_buffer_address(const gllmk_buffer *handle, uint32_t *out_kind,
                                  uint64_t *out_address) {
  static const char fn[] = "gllmk_buffer_address";
  core_clear_error();
  core_buffer *buffer = core_buffer_get(handle);
  if (buffer == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: buffer is %s", fn,
                     handle ? "not a live gllmk buffer" : "NULL");
  if (out_kind == NULL || out_address == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: an output pointer is NULL", fn);
  core_context *context = buffer->context;
  gllmk_status (*address)(gllmk_plugin_device *, gllmk_plugin_memory *, uint32_t *, uint64_t *) =
      CORE_PLUGIN_FN(context->plugin, mem_address);
  if (address == NULL)
    return core_fail(GLLMK_ERR_UNSUPPORTED, "%s: the %s backend has no addressable memory", fn,
                     context->backend);
  return address(context->device, buffer->base.memory, out_kind, out_address);
}

void gllmk_buffer_free(gllmk_buffer *handle) {
  core_buffer *buffer = core_buffer_get(handle);
  if (buffer == NULL) return;
  core_handle_release((uint64_t)(uintptr_t)handle, CORE_HANDLE_BUFFER);
  core_context *context = buffer->context;
  /* Queued work may still use the memory. */
  core_context_wait(context);
  context->plugin->mem_free(context->device, buffer->base.memory);
  if (buffer->release) buffer->release(buffer->release_data);
  if (buffer->prev) buffer->prev->next = buffer->next;
  else context->buffers = buffer->next;
  if (buffer->next) buffer->next->prev = buffer->prev;
  free(buffer);
}

uint64_t gllmk_buffer_size(const gllmk_buffer *handle) {
  core_buffer *buffer = core_buffer_get(handle);
  return buffer ? buffer->base.size : 0;
}

gllmk_context *gllmk_buffer_context(const gllmk_buffer *handle) {
  core_buffer *buffer = core_buffer_get(handle);
  return buffer ? buffer->context->handle : NULL;
}

/* The live buffer behind `handle` if [offset, offset + size) lies inside it
 * and size > 0. */
static gllmk_status check_range(const char *fn, const char *arg, const gllmk_buffer *handle,
                                uint64_t offset, uint64_t size, core_buffer **out) {
  core_buffer *buffer = core_buffer_get(handle);
  if (buffer == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is %s", fn, arg,
                     handle ? "not a live gllmk buffer (freed, or of a destroyed context)"
                            : "NULL");
  if (size == 0) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: size is 0", fn);
  uint64_t end;
  if (__builtin_add_overflow(offset, size, &end))
    return core_fail(GLLMK_ERR_OVERFLOW, "%s: offset %llu + size %llu overflows", fn,
                     (unsigned long long)offset, (unsigned long long)size);
  if (end > buffer->base.size)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: bytes [%llu, %llu) lie outside %s's %llu bytes", fn,
                     (unsigned long long)offset, (unsigned long long)end, arg,
                     (unsigned long long)buffer->base.size);
  *out = buffer;
  return GLLMK_OK;
}

gllmk_status gllmk_buffer_write(gllmk_buffer *handle, uint64_t offset, const void *src,
                                uint64_t size) {
  static const char fn[] = "gllmk_buffer_write";
  core_clear_error();
  core_buffer *buffer;
  CORE_TRY(check_range(fn, "buffer", handle, offset, size, &buffer));
  if (src == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: src is NULL", fn);
  core_context *c = buffer->context;
  return c->plugin->mem_write(c->device, buffer->base.memory, offset, src, size);
}

gllmk_status gllmk_buffer_read(gllmk_buffer *handle, uint64_t offset, void *dst, uint64_t size) {
  static const char fn[] = "gllmk_buffer_read";
  core_clear_error();
  core_buffer *buffer;
  CORE_TRY(check_range(fn, "buffer", handle, offset, size, &buffer));
  if (dst == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
  core_context *c = buffer->context;
  CORE_TRY(core_context_synchronize(c));
  return c->plugin->mem_read(c->device, buffer->base.memory, offset, dst, size);
}

gllmk_status gllmk_buffer_copy(gllmk_buffer *dst_handle, uint64_t dst_offset,
                               gllmk_buffer *src_handle, uint64_t src_offset, uint64_t size) {
  static const char fn[] = "gllmk_buffer_copy";
  core_clear_error();
  core_buffer *dst, *src;
  CORE_TRY(check_range(fn, "dst", dst_handle, dst_offset, size, &dst));
  CORE_TRY(check_range(fn, "src", src_handle, src_offset, size, &src));
  if (dst->context != src->context)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: dst and src belong to different contexts", fn);
  if (dst == src && dst_offset < src_offset + size && src_offset < dst_offset + size)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: source and destination ranges overlap", fn);
  core_context *c = dst->context;
  return c->plugin->mem_copy(c->device, dst->base.memory, dst_offset, src->base.memory,
                             src_offset, size);
}

gllmk_status gllmk_buffer_fill(gllmk_buffer *handle, uint64_t offset, uint64_t size,
                               uint8_t value) {
  core_clear_error();
  core_buffer *buffer;
  CORE_TRY(check_range("gllmk_buffer_fill", "buffer", handle, offset, size, &buffer));
  core_context *c = buffer->context;
  return c->plugin->mem_fill(c->device, buffer->base.memory, offset, size, value);
}
