/*
 * handles.h - generation-checked handles (handles.c): public objects are
 * handed out as handles, never as pointers, so a freed or forged one is
 * refused instead of read.
 *
 * libgllmk-model links handles.c too, with a table of its own, for its
 * models and sessions.
 */
#ifndef GLLMK_CORE_HANDLES_H_
#define GLLMK_CORE_HANDLES_H_

#include <stdint.h>

typedef enum core_handle_kind {
  CORE_HANDLE_CONTEXT = 1,
  CORE_HANDLE_BUFFER = 2,
  CORE_HANDLE_RECORDING = 3,
  CORE_HANDLE_MODEL = 4,   /* libgllmk-model */
  CORE_HANDLE_SESSION = 5, /* libgllmk-model */
  CORE_HANDLE_COMMUNICATOR = 6,
} core_handle_kind;

/* A new handle for `object`, 0 if the table is full or out of memory. */
uint64_t core_handle_new(core_handle_kind kind, void *object);
/* The object of a live handle of `kind`, NULL for anything else. */
void *core_handle_get(uint64_t handle, core_handle_kind kind);
/* Retires the handle: every later lookup fails. */
void core_handle_release(uint64_t handle, core_handle_kind kind);

#endif /* GLLMK_CORE_HANDLES_H_ */
