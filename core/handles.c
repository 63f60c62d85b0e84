/*
 * handles.c - contexts, buffers and recordings as checked handles.
 *
 * A handle is not a pointer: it packs a slot index of one process-wide table
 * with the slot's generation and the object's kind,
 *
 *     bits 63..32 generation (odd while the slot is live)
 *     bits 31..28 kind
 *     bits 27..0  slot index + 1 (so no handle is 0 = NULL)
 *
 * and every public call looks it up here. Freeing bumps the slot's
 * generation, so a stale handle - freed, from a destroyed context, or never
 * issued - finds a generation that does not match and is refused. Nothing is
 * read through a freed pointer, and no compiler can drop the check (a
 * `magic = 0` store before free() can be, and was).
 *
 * Slots live in chunks that never move and are never freed (a process that
 * exits with a context open still reaches it through them), so lookups take
 * no lock; allocation and release take one mutex. Freed slots
 * queue at the tail of a FIFO, so one slot comes back only after every other
 * free slot: a stale handle meets its old slot's generation again only after
 * 2^31 reuses of that slot.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "handles.h"

_Static_assert(sizeof(void *) == sizeof(uint64_t), "handles are pointer-sized 64-bit values");

#define CHUNK_SLOTS 4096u
#define MAX_CHUNKS 256u /* 1,048,576 live objects */
#define INDEX_BITS 28
#define KIND_SHIFT 28

typedef struct handle_slot {
  _Atomic uint32_t generation; /* odd = live */
  _Atomic uint32_t kind;
  _Atomic(void *) object;
  uint32_t next_free; /* index + 1 of the next free slot, 0 = none */
} handle_slot;

static _Atomic(handle_slot *) chunks[MAX_CHUNKS];
static pthread_mutex_t table_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint32_t slots_made;           /* slots ever handed out (index high mark) */
static uint32_t free_head, free_tail; /* FIFO of freed slots, index + 1 */

static handle_slot *slot_at(uint32_t index) {
  handle_slot *chunk = atomic_load_explicit(&chunks[index / CHUNK_SLOTS], memory_order_acquire);
  return chunk ? &chunk[index % CHUNK_SLOTS] : NULL;
}

/* A slot for a new object (table_mutex held): a freed one, else a new one. */
static handle_slot *take_slot(uint32_t *out_index) {
  if (free_head != 0) {
    uint32_t index = free_head - 1;
    handle_slot *slot = slot_at(index);
    free_head = slot->next_free;
    if (free_head == 0) free_tail = 0;
    *out_index = index;
    return slot;
  }
  uint32_t index = slots_made;
  if (index >= CHUNK_SLOTS * MAX_CHUNKS) return NULL;
  if (index % CHUNK_SLOTS == 0) {
    handle_slot *chunk = calloc(CHUNK_SLOTS, sizeof *chunk);
    if (chunk == NULL) return NULL;
    atomic_store_explicit(&chunks[index / CHUNK_SLOTS], chunk, memory_order_release);
  }
  slots_made++;
  *out_index = index;
  return slot_at(index);
}

uint64_t core_handle_new(core_handle_kind kind, void *object) {
  pthread_mutex_lock(&table_mutex);
  uint32_t index;
  handle_slot *slot = take_slot(&index);
  uint64_t handle = 0;
  if (slot) {
    uint32_t generation = atomic_load_explicit(&slot->generation, memory_order_relaxed) + 1;
    atomic_store_explicit(&slot->kind, (uint32_t)kind, memory_order_relaxed);
    atomic_store_explicit(&slot->object, object, memory_order_relaxed);
    atomic_store_explicit(&slot->generation, generation, memory_order_release);
    handle = (uint64_t)generation << 32 | (uint64_t)kind << KIND_SHIFT | (index + 1);
  }
  pthread_mutex_unlock(&table_mutex);
  return handle;
}

/* The slot a handle names if it is live and of `kind`, else NULL. */
static handle_slot *live_slot(uint64_t handle, core_handle_kind kind) {
  uint32_t index_plus_one = (uint32_t)(handle & ((1u << INDEX_BITS) - 1));
  uint32_t generation = (uint32_t)(handle >> 32);
  if (index_plus_one == 0 || index_plus_one > CHUNK_SLOTS * MAX_CHUNKS ||
      ((handle >> KIND_SHIFT) & 0xfu) != (uint64_t)kind || (generation & 1u) == 0)
    return NULL;
  handle_slot *slot = slot_at(index_plus_one - 1);
  if (slot == NULL ||
      atomic_load_explicit(&slot->generation, memory_order_acquire) != generation ||
      atomic_load_explicit(&slot->kind, memory_order_relaxed) != (uint32_t)kind)
    return NULL;
  return slot;
}

void *core_handle_get(uint64_t handle, core_handle_kind kind) {
  handle_slot *slot = live_slot(handle, kind);
  return slot ? atomic_load_explicit(&slot->object, memory_order_relaxed) : NULL;
}

void core_handle_release(uint64_t handle, core_handle_kind kind) {
  pthread_mutex_lock(&table_mutex);
  handle_slot *slot = live_slot(handle, kind);
  if (slot) {
    uint32_t index = (uint32_t)(handle & ((1u << INDEX_BITS) - 1)) - 1;
    atomic_store_explicit(&slot->object, NULL, memory_order_relaxed);
    atomic_fetch_add_explicit(&slot->generation, 1u, memory_order_release);
    slot->next_free = 0;
    if (free_tail) slot_at(free_tail - 1)->next_free = index + 1;
    else free_head = index + 1;
    free_tail = index + 1;
  }
  pthread_mutex_unlock(&table_mutex);
}
