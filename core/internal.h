/*
 * internal.h - private declarations of libgllmk (never installed).
 */
#ifndef GLLMK_CORE_INTERNAL_H_
#define GLLMK_CORE_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>

#include "gllmk/gllmk_plugin.h"

/* --------------------------------------------------------------- errors */

/* Sets this thread's last error and returns `status` (the public call,
 * under the name the core has always used). */
#define core_fail gllmk_set_error
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
/* Copies options of `size` bytes (as the caller was compiled) into a full
 * struct, zero-filling fields the caller did not know; NULL stays a zeroed
 * struct. Fails if the caller's struct is below ABI 2.0's or sets fields this
 * library does not know. */
gllmk_status core_options_copy(const char *fn, const gllmk_context_options *options,
                               size_t size, gllmk_context_options *out);
/* Whether the bytes [known, size) of a caller's struct are all zero: a
 * caller built against a newer header may not ask for what this one ignores. */
bool core_tail_is_zero(const void *data, size_t known, size_t size);
/* Scans, loads and probes; marks the slot a context would use. */
gllmk_status core_discover(const gllmk_context_options *options, gllmk_discovery **out);
/* dlclose under the lock every plugin load, query and unload takes (discovery.c). */
void core_plugin_unload(void *handle);

/* The plugin's op slot, NULL if absent (or past the plugin's op table). */
const void *core_plugin_op(const gllmk_plugin *plugin, gllmk_op op);
/* Whether the plugin's descriptor reaches [offset, offset + size). */
bool core_plugin_reaches(const gllmk_plugin *plugin, size_t offset, size_t size);
/* An optional descriptor function, NULL where the plugin's descriptor ends
 * before it. */
#define CORE_PLUGIN_FN(plugin, field)                                                   \
  (core_plugin_reaches((plugin), offsetof(gllmk_plugin, field), sizeof (plugin)->field) \
       ? (plugin)->field : NULL)

#include "handles.h"

/* ----------------------------------------------------------------- calls */

#define CORE_MAX_OP_TENSORS 9 /* matmul's */

/* Any op's argument struct. */
typedef union core_args {
#define GLLMK_OP(name) gllmk_##name##_args name;
#include "gllmk/gllmk_ops.def"
} core_args;

/* One validated op call, kept by value: its argument struct and copies of
 * its tensors (with the caller's buffer handles). core_call_args() aims the
 * struct's tensor pointers at a set of tensors. */
typedef struct core_call {
  gllmk_op op;
  uint32_t present; /* bit i: tensor field i of the op is set */
  /* In a recording: 0 for an op; k + 1 for the k-th collective of the
   * recording's group (collective.c), whose tensors the group keeps. */
  uint32_t collective;
  core_args args;
  gllmk_tensor tensors[CORE_MAX_OP_TENSORS];
} core_call;

/* ------------------------------------------------------- context, buffer */

typedef struct core_context core_context;
typedef struct core_recording core_recording;
typedef struct core_record_group core_record_group;

typedef struct core_buffer {
  gllmk_plugin_buffer base; /* first: plugins read it (gllmk_plugin.h) */
  gllmk_buffer *handle;
  core_context *context;
  struct core_buffer *prev, *next; /* the context's live buffers */
  void (*release)(void *);         /* wrapped external memory: the owner's release */
  void *release_data;
} core_buffer;

/* An op timed for gllmk_context_set_timing, waiting for its device times. */
typedef struct core_timed_call {
  core_call call;
  uint32_t begin_mark, end_mark; /* plugin marks, or */
  uint64_t begin_ns, end_ns;     /* host times when host_timed */
  uint32_t host_timed;
} core_timed_call;

struct core_context {
  gllmk_context *handle;
  void *dl_handle; /* keeps the plugin loaded */
  const gllmk_plugin *plugin;
  gllmk_plugin_device *device;
  uint32_t device_index; /* within the plugin */
  gllmk_device_info info;
  char backend[64];
  core_buffer *buffers;
  core_recording *recordings; /* every live recording of this context */
  core_recording *recording;  /* the one being recorded, or NULL */
  gllmk_timing_callback timing_callback;
  void *timing_data;
  core_timed_call *timed;
  uint32_t timed_count, timed_capacity;
  gllmk_status deferred_status; /* a device error met while host-timing */
  char deferred_message[512];
};

struct core_recording {
  gllmk_recording *handle;
  core_context *context;
  core_recording *prev, *next; /* the context's recordings */
  core_call *calls;
  uint32_t count, capacity;
  gllmk_plugin_recording *native;
  /* Set once the recording holds a collective: the ranks' recordings that
   * are compiled and replayed together (collective.c). */
  core_record_group *group;
  uint32_t rank;
};

core_context *core_context_get(const gllmk_context *handle);
/* A context argument of `fn`: live, or GLLMK_ERR_INVALID_ARGUMENT naming it. */
gllmk_status core_context_arg(const char *fn, const gllmk_context *handle, core_context **out);
core_buffer *core_buffer_get(const gllmk_buffer *handle);

/* Waits for the context's queue where the caller cannot return its error
 * (a free, host timing): a device error is kept for the next synchronize. */
void core_context_wait(core_context *context);
/* Waits for the context's queue, returns any device error, then hands the
 * completed timing records to the callback. */
gllmk_status core_context_synchronize(core_context *context);
/* Room for one more item in a growing array (*array of *capacity items of
 * `size` bytes, `count` used; first_capacity when empty), so that
 * appending cannot fail. `array` is the address of the array's pointer. */
gllmk_status core_reserve_one(void *array, uint32_t count, uint32_t *capacity, size_t size,
                              uint32_t first_capacity);
/* Room for one more call in a recording. */
gllmk_status core_recording_reserve(core_recording *recording);
/* Frees a recording: unlinks it, frees its native form, retires its handle. */
void core_recording_destroy(core_recording *recording);

/* Collectives in recordings (collective.c). A group member's recording ended:
 * once every rank's has, they are compiled together. */
void core_group_recording_ended(core_recording *recording);
/* Whether a group member may replay (native, every rank's recording alive);
 * sets the error naming `fn` if not. */
gllmk_status core_group_replay_check(const char *fn, const core_recording *recording);
/* A group member is being freed: its native form goes with it, the group
 * once its last member goes. */
void core_group_recording_gone(core_recording *recording);
/* A context is being destroyed: frees the communicators it belongs to. */
void core_communicators_release_context(const core_context *context);

/* The argument struct of `call` with its tensor pointers aimed at `tensors`
 * (the call's own, or resolved copies). */
void core_call_args(const core_call *call, const gllmk_tensor *tensors, core_args *out_args);
/* Runs a validated call on the plugin, timed when timing is on. Every
 * buffer handle in it is re-checked; `fn` names the call in messages. */
gllmk_status core_call_run(const char *fn, core_context *context, const core_call *call);
/* sizeof the op's argument struct in this library. */
size_t core_args_size(gllmk_op op);
/* The op's own argument checks (validate.c), on a full-size struct. */
gllmk_status core_validate(const char *fn, const core_context *context, gllmk_op op,
                           const core_args *args);
/* Timing (timing.c): around one op on the plugin, and the delivery. */
gllmk_status core_timing_begin(core_context *context, const core_call *call, uint32_t *out_index);
void core_timing_end(core_context *context, uint32_t index);
void core_timing_deliver(core_context *context);
void core_timing_reset(core_context *context);

/* ------------------------------------------------------------- tensors */

/* The bytes a valid tensor covers: [begin, end) of its buffer. */
typedef struct core_tensor_span {
  uint64_t begin, end, numel;
  core_buffer *buffer;
} core_tensor_span;

/* Checks one tensor argument of `fn`: non-NULL, live buffer, dtype, ndim,
 * shape >= 1, strides >= 0, no overflow, inside its buffer. */
gllmk_status core_tensor_check(const char *fn, const char *arg, const gllmk_tensor *t,
                               core_tensor_span *out_span);

#endif /* GLLMK_CORE_INTERNAL_H_ */
