/*
 * internal.h - private declarations of libgllmk (never installed).
 */
#ifndef GLLMK_CORE_INTERNAL_H_
#define GLLMK_CORE_INTERNAL_H_

#include <stdbool.h>

#include "gllmk/gllmk_plugin.h"

/* --------------------------------------------------------------- errors */

/* Sets this thread's last error and returns `status`. */
gllmk_status core_fail(gllmk_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
/* Returns from the calling function when `expr` is not GLLMK_OK. */
#define CORE_TRY(expr)                                 \
  do {                                                 \
    gllmk_status core_try_status_ = (expr);            \
    if (core_try_status_ != GLLMK_OK) return core_try_status_; \
  } while (0)

/* snprintf that may truncate on purpose (messages, reasons). */
void core_format(char *out, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears this thread's last error (every public call starts with this). */
void core_clear_error(void);
/* The host table handed to plugins. */
extern const gllmk_plugin_host core_plugin_host;

/* ------------------------------------------------------------ discovery */

/* One scanned plugin file. `handle`/`plugin` are set while it is loaded. */
typedef struct core_plugin_slot {
  gllmk_plugin_record record;
  void *handle;
  const gllmk_plugin *plugin;
  gllmk_device_info *devices; /* record.device_count entries */
} core_plugin_slot;

struct gllmk_discovery {
  char plugin_dir[4096];
  uint32_t count;
  core_plugin_slot *slots;
  int32_t selected; /* index into slots, -1 if none */
  char no_backend_reason[512];
};

/* Checks the options' own consistency; on failure sets the error naming `fn`. */
bool core_options_are_valid(const char *fn, const gllmk_context_options *options);
/* Scans, loads and probes; marks the slot a context would use. */
gllmk_status core_discover(const gllmk_context_options *options, gllmk_discovery **out);

/* ------------------------------------------------------- context, buffer */

#define CORE_BUFFER_MAGIC 0x676c6c6d6b627566ull /* "gllmkbuf" */

struct gllmk_buffer {
  gllmk_plugin_buffer base; /* first: plugins read it (gllmk_plugin.h) */
  uint64_t magic;
  gllmk_context *context;
  struct gllmk_buffer *prev, *next; /* the context's live buffers */
};

struct gllmk_context {
  void *handle; /* keeps the plugin loaded */
  const gllmk_plugin *plugin;
  gllmk_plugin_device *device;
  gllmk_device_info info;
  char backend[64];
  gllmk_buffer *buffers;
};

/* ------------------------------------------------------------- tensors */

/* The bytes a valid tensor covers: [begin, end) of its buffer. */
typedef struct core_tensor_span {
  uint64_t begin, end, numel;
} core_tensor_span;

bool core_buffer_is_valid(const gllmk_buffer *buffer);
/* Checks one tensor argument of `fn`: non-NULL, live buffer, dtype, ndim,
 * shape >= 1, strides >= 0, no overflow, inside its buffer. */
gllmk_status core_tensor_check(const char *fn, const char *arg, const gllmk_tensor *t,
                               core_tensor_span *out_span);

/* Whether the plugin's descriptor is long enough to hold `op`'s slot. */
const void *core_plugin_op(const gllmk_plugin *plugin, gllmk_op op);

#endif /* GLLMK_CORE_INTERNAL_H_ */
