/*
 * context.c - contexts (one plugin device each) and buffers.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

gllmk_status gllmk_context_create(const gllmk_context_options *options,
                                  gllmk_context **out_context) {
  static const char fn[] = "gllmk_context_create";
  core_clear_error();
  if (out_context == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_context is NULL", fn);
  if (!core_options_are_valid(fn, options)) return GLLMK_ERR_INVALID_ARGUMENT;
  gllmk_discovery *d;
  gllmk_status status = core_discover(options, &d);
  if (status != GLLMK_OK) return status;
  if (d->selected < 0) {
    status = core_fail(GLLMK_ERR_NO_BACKEND, "%s: %s", fn, d->no_backend_reason);
    gllmk_discovery_free(d);
    return status;
  }
  core_plugin_slot *slot = &d->slots[d->selected];
  gllmk_context *context = calloc(1, sizeof *context);
  if (context == NULL) {
    gllmk_discovery_free(d);
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  }
  gllmk_plugin_open_options open_options = {
      .device_index = options ? options->device_index : 0,
      .num_threads = options ? options->num_threads : 0,
  };
  status = slot->plugin->open(&open_options, &context->device);
  if (status != GLLMK_OK) {
    status = core_fail(status, "%s: opening %s device %u failed: %s", fn, slot->record.name,
                       open_options.device_index, gllmk_last_error());
    free(context);
    gllmk_discovery_free(d);
    return status;
  }
  /* The context keeps the plugin loaded after the discovery is freed. */
  context->handle = slot->handle;
  context->plugin = slot->plugin;
  context->info = slot->devices[open_options.device_index];
  snprintf(context->backend, sizeof context->backend, "%s", slot->record.name);
  slot->handle = NULL;
  gllmk_discovery_free(d);
  *out_context = context;
  return GLLMK_OK;
}

void gllmk_context_destroy(gllmk_context *context) {
  if (context == NULL) return;
  while (context->buffers) gllmk_buffer_free(context->buffers);
  context->plugin->close(context->device);
  dlclose(context->handle);
  free(context);
}

gllmk_status gllmk_synchronize(gllmk_context *context) {
  core_clear_error();
  if (context == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_synchronize: context is NULL");
  return context->plugin->synchronize(context->device);
}

const char *gllmk_context_backend(const gllmk_context *context) {
  return context ? context->backend : NULL;
}

gllmk_status gllmk_context_device_info(const gllmk_context *context, gllmk_device_info *out_info) {
  core_clear_error();
  if (context == NULL || out_info == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_context_device_info: %s is NULL",
                     context ? "out_info" : "context");
  *out_info = context->info;
  return GLLMK_OK;
}

/* ------------------------------------------------------------ buffers */

gllmk_status gllmk_buffer_alloc(gllmk_context *context, uint64_t size, gllmk_buffer **out_buffer) {
  static const char fn[] = "gllmk_buffer_alloc";
  core_clear_error();
  if (context == NULL || out_buffer == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                     context ? "out_buffer" : "context");
  if (size == 0) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: size is 0", fn);
  if (size > (uint64_t)INT64_MAX)
    return core_fail(GLLMK_ERR_OVERFLOW, "%s: size=%llu is too large", fn, (unsigned long long)size);
  gllmk_buffer *buffer = calloc(1, sizeof *buffer);
  if (buffer == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  gllmk_status status = context->plugin->mem_alloc(context->device, size, &buffer->base.memory);
  if (status != GLLMK_OK) {
    free(buffer);
    return core_fail(status, "%s: %llu bytes: %s", fn, (unsigned long long)size, gllmk_last_error());
  }
  buffer->base.size = size;
  buffer->magic = CORE_BUFFER_MAGIC;
  buffer->context = context;
  buffer->next = context->buffers;
  if (context->buffers) context->buffers->prev = buffer;
  context->buffers = buffer;
  *out_buffer = buffer;
  return GLLMK_OK;
}

void gllmk_buffer_free(gllmk_buffer *buffer) {
  if (!core_buffer_is_valid(buffer)) return;
  gllmk_context *context = buffer->context;
  /* Queued work may still use the memory. */
  (void)context->plugin->synchronize(context->device);
  context->plugin->mem_free(context->device, buffer->base.memory);
  if (buffer->prev) buffer->prev->next = buffer->next;
  else context->buffers = buffer->next;
  if (buffer->next) buffer->next->prev = buffer->prev;
  buffer->magic = 0;
  free(buffer);
}

uint64_t gllmk_buffer_size(const gllmk_buffer *buffer) {
  return core_buffer_is_valid(buffer) ? buffer->base.size : 0;
}

gllmk_context *gllmk_buffer_context(const gllmk_buffer *buffer) {
  return core_buffer_is_valid(buffer) ? buffer->context : NULL;
}

/* Checks that [offset, offset + size) lies inside the buffer and size > 0. */
static gllmk_status check_range(const char *fn, const char *arg, const gllmk_buffer *buffer,
                                uint64_t offset, uint64_t size) {
  if (!core_buffer_is_valid(buffer))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is %s", fn, arg,
                     buffer ? "not a live gllmk buffer" : "NULL");
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
  return GLLMK_OK;
}

gllmk_status gllmk_buffer_write(gllmk_buffer *buffer, uint64_t offset, const void *src,
                                uint64_t size) {
  static const char fn[] = "gllmk_buffer_write";
  core_clear_error();
  gllmk_status status = check_range(fn, "buffer", buffer, offset, size);
  if (status != GLLMK_OK) return status;
  if (src == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: src is NULL", fn);
  gllmk_context *c = buffer->context;
  return c->plugin->mem_write(c->device, buffer->base.memory, offset, src, size);
}

gllmk_status gllmk_buffer_read(gllmk_buffer *buffer, uint64_t offset, void *dst, uint64_t size) {
  static const char fn[] = "gllmk_buffer_read";
  core_clear_error();
  gllmk_status status = check_range(fn, "buffer", buffer, offset, size);
  if (status != GLLMK_OK) return status;
  if (dst == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
  gllmk_context *c = buffer->context;
  if ((status = c->plugin->synchronize(c->device)) != GLLMK_OK) return status;
  return c->plugin->mem_read(c->device, buffer->base.memory, offset, dst, size);
}

gllmk_status gllmk_buffer_copy(gllmk_buffer *dst, uint64_t dst_offset, gllmk_buffer *src,
                               uint64_t src_offset, uint64_t size) {
  static const char fn[] = "gllmk_buffer_copy";
  core_clear_error();
  gllmk_status status = check_range(fn, "dst", dst, dst_offset, size);
  if (status == GLLMK_OK) status = check_range(fn, "src", src, src_offset, size);
  if (status != GLLMK_OK) return status;
  if (dst->context != src->context)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: dst and src belong to different contexts", fn);
  if (dst == src && dst_offset < src_offset + size && src_offset < dst_offset + size)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: source and destination ranges overlap", fn);
  gllmk_context *c = dst->context;
  return c->plugin->mem_copy(c->device, dst->base.memory, dst_offset, src->base.memory,
                             src_offset, size);
}

gllmk_status gllmk_buffer_fill(gllmk_buffer *buffer, uint64_t offset, uint64_t size,
                               uint8_t value) {
  core_clear_error();
  gllmk_status status = check_range("gllmk_buffer_fill", "buffer", buffer, offset, size);
  if (status != GLLMK_OK) return status;
  gllmk_context *c = buffer->context;
  return c->plugin->mem_fill(c->device, buffer->base.memory, offset, size, value);
}
