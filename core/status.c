/*
 * status.c - status codes, the per-thread error message, enum names.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char last_error[1024];

void core_format(char *out, size_t size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(out, size, format, args);
  va_end(args);
}

void core_clear_error(void) { last_error[0] = '\0'; }

const char *gllmk_last_error(void) { return last_error; }

/* The message is formatted into a scratch buffer first: an argument may be
 * gllmk_last_error() itself (a caller wrapping a plugin's message), and
 * vsnprintf into the buffer it is reading from garbles the text. */
gllmk_status gllmk_set_error(gllmk_status status, const char *format, ...) {
  char message[sizeof last_error];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  memcpy(last_error, message, sizeof last_error);
  return status;
}

const gllmk_plugin_host core_plugin_host = {
    .struct_size = sizeof(gllmk_plugin_host),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .fail = core_fail,
};

const char *gllmk_status_string(gllmk_status status) {
  switch (status) {
    case GLLMK_OK: return "GLLMK_OK";
    case GLLMK_ERR_INVALID_ARGUMENT: return "GLLMK_ERR_INVALID_ARGUMENT";
    case GLLMK_ERR_UNSUPPORTED: return "GLLMK_ERR_UNSUPPORTED";
    case GLLMK_ERR_OUT_OF_MEMORY: return "GLLMK_ERR_OUT_OF_MEMORY";
    case GLLMK_ERR_OUT_OF_RANGE: return "GLLMK_ERR_OUT_OF_RANGE";
    case GLLMK_ERR_NO_BACKEND: return "GLLMK_ERR_NO_BACKEND";
    case GLLMK_ERR_BACKEND: return "GLLMK_ERR_BACKEND";
    case GLLMK_ERR_OVERFLOW: return "GLLMK_ERR_OVERFLOW";
    case GLLMK_ERR_INTERNAL: return "GLLMK_ERR_INTERNAL";
  }
  return "GLLMK_ERR_UNKNOWN";
}

size_t gllmk_dtype_size(gllmk_dtype dtype) {
  switch (dtype) {
    case GLLMK_F32: case GLLMK_I32: return 4;
    case GLLMK_F16: case GLLMK_BF16: return 2;
  }
  return 0;
}

const char *gllmk_dtype_name(gllmk_dtype dtype) {
  static const char *const names[GLLMK_DTYPE_COUNT] = {"f32", "f16", "bf16", "i32"};
  return (unsigned)dtype < GLLMK_DTYPE_COUNT ? names[dtype] : NULL;
}

const char *gllmk_backend_kind_name(gllmk_backend_kind kind) {
  static const char *const names[GLLMK_BACKEND_KIND_COUNT] = {"cuda", "rocm",  "metal",
                                                              "vulkan", "cpu", "other"};
  return (unsigned)kind < GLLMK_BACKEND_KIND_COUNT ? names[kind] : "unknown";
}

const char *gllmk_plugin_state_name(gllmk_plugin_state state) {
  static const char *const names[] = {"selected", "available", "no device", "rejected",
                                      "excluded"};
  return (unsigned)state < sizeof names / sizeof names[0] ? names[state] : "unknown";
}

const char *gllmk_op_name(gllmk_op op) {
  static const char *const names[GLLMK_OP_COUNT] = {
#define GLLMK_OP(name) #name,
#include "gllmk/gllmk_ops.def"
  };
  return (unsigned)op < GLLMK_OP_COUNT ? names[op] : NULL;
}
