/*
 * gllmk_plugin.h - the ABI between libgllmk and a backend plugin.
 *
 * A plugin is a shared object in <libdir>/gllmk/ that exports one symbol:
 *
 *     const gllmk_plugin *gllmk_plugin_entry(void);
 *
 * It must not link against libgllmk: everything it needs from the core comes
 * through gllmk_plugin_host. The core validates every op call completely
 * before the plugin sees it (docs/api.md lists the rules), so an op entry
 * may assume valid arguments: same context, dtypes and shapes as documented,
 * views inside their buffers, no forbidden overlap.
 *
 * Versioning: abi_version = (major << 16) | minor. The core rejects a plugin
 * of another major version, of a newer minor than its own, or with a
 * struct_size below what its major version needs. Within a major version the
 * descriptor, the op table and the argument structs only grow at their ends:
 * a slot past an older plugin's struct_size (or ops_size) counts as absent,
 * and a field added to an argument struct in minor m is left at its default
 * (zero) when the plugin's minor is below m; where zero would compute
 * something else (rope's inv_freq), a call that sets the field fails with
 * GLLMK_ERR_UNSUPPORTED on such a plugin instead (docs/plugin-abi.md lists
 * them).
 */
#ifndef GLLMK_GLLMK_PLUGIN_H_
#define GLLMK_GLLMK_PLUGIN_H_

#include "gllmk.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GLLMK_PLUGIN_ABI_MAJOR 2
#define GLLMK_PLUGIN_ABI_MINOR 6
#define GLLMK_PLUGIN_ABI_VERSION ((GLLMK_PLUGIN_ABI_MAJOR << 16) | GLLMK_PLUGIN_ABI_MINOR)
#define GLLMK_PLUGIN_ENTRY_SYMBOL "gllmk_plugin_entry"

/* A plugin's device state, one per context (one queue/stream each). */
typedef struct gllmk_plugin_device gllmk_plugin_device;
/* A plugin's allocation. */
typedef struct gllmk_plugin_memory gllmk_plugin_memory;

/* A plugin's native recording (a CUDA graph, a reused command buffer). */
typedef struct gllmk_plugin_recording gllmk_plugin_recording;

/* A plugin's communicator across several of its devices (ABI 2.3). */
typedef struct gllmk_plugin_comm gllmk_plugin_comm;

/* The tensors a plugin receives are the core's resolved copies: their
 * `buffer` field points at the core's buffer record, which begins with this
 * struct (the caller's handle never reaches a plugin). A plugin reads its own
 * allocation from a tensor with gllmk_plugin_tensor_memory(). */
typedef struct gllmk_plugin_buffer {
  gllmk_plugin_memory *memory;
  uint64_t size;
} gllmk_plugin_buffer;

static inline gllmk_plugin_memory *gllmk_plugin_tensor_memory(const gllmk_tensor *tensor) {
  return ((const gllmk_plugin_buffer *)(const void *)tensor->buffer)->memory;
}

/* What the core gives a plugin. */
typedef struct gllmk_plugin_host {
  uint32_t struct_size;
  uint32_t abi_version;
  /* Sets this thread's error message (printf-style) and returns `status`, so
   * a plugin can write `return host->fail(GLLMK_ERR_BACKEND, "cuLaunchKernel: %s", name);` */
  gllmk_status (*fail)(gllmk_status status, const char *format, ...)
      __attribute__((format(printf, 2, 3)));
} gllmk_plugin_host;

typedef struct gllmk_plugin_open_options {
  uint32_t struct_size; /* sizeof as the core was built; fields past it are 0 */
  uint32_t device_index;
  uint32_t num_threads; /* 0 = the plugin's choice (all cores) */
  /* ABI 2.0: the caller's queue (a CUstream for cuda), or NULL for the
   * plugin's own. A plugin that cannot run on a caller's queue fails open()
   * with GLLMK_ERR_UNSUPPORTED and a reason. */
  void *queue;
} gllmk_plugin_open_options;

/* One slot per op, in gllmk_ops.def order; NULL = unsupported. The table
 * grows at its end (new ops); gllmk_plugin.ops_size says how far a plugin's
 * reaches. */
typedef struct gllmk_plugin_ops {
#define GLLMK_OP(name) \
  gllmk_status (*name)(gllmk_plugin_device *device, const gllmk_##name##_args *args);
#include "gllmk_ops.def"
} gllmk_plugin_ops;

typedef struct gllmk_plugin {
  uint32_t struct_size;  /* sizeof(gllmk_plugin) as the plugin was built */
  uint32_t abi_version;  /* GLLMK_PLUGIN_ABI_VERSION */
  const char *name;      /* short and unique: "cuda", "vulkan", "cpu" */
  uint32_t kind;         /* gllmk_backend_kind: decides the rank */
  const char *version;   /* the plugin's own version, e.g. "0.1.0" */

  /* Called once after loading, before anything else; the host table stays
   * valid while the plugin is loaded. Counts usable devices; with none, it
   * returns GLLMK_OK with *out_count = 0 and writes the reason (for example
   * "libcuda.so.1: cannot open shared object file") into `reason`. May be
   * called again by a later scan, also while other threads run contexts of
   * this plugin: it must not rewrite state those contexts read. */
  gllmk_status (*probe)(const gllmk_plugin_host *host, uint32_t *out_count,
                        char *reason, size_t reason_size);
  gllmk_status (*device_info)(uint32_t index, gllmk_device_info *out_info);
  /* Extra text for gllmk-info (embedded kernel architectures, caveats);
   * may be NULL. Writes a NUL-terminated string of at most text_size bytes. */
  void (*describe)(char *text, size_t text_size);

  gllmk_status (*open)(const gllmk_plugin_open_options *options,
                       gllmk_plugin_device **out_device);
  /* Waits for queued work, then frees the device state. */
  void (*close)(gllmk_plugin_device *device);
  /* Waits for queued work; returns (and clears) the first error the device
   * raised since the last call, with a message set through host->fail. */
  gllmk_status (*synchronize)(gllmk_plugin_device *device);

  /* Memory. Offsets and sizes are checked by the core. write returns when
   * `src` may be reused; read waits for queued work. */
  gllmk_status (*mem_alloc)(gllmk_plugin_device *device, uint64_t size,
                            gllmk_plugin_memory **out_memory);
  /* Frees an allocation; for imported memory, forgets it (the caller owns it). */
  void (*mem_free)(gllmk_plugin_device *device, gllmk_plugin_memory *memory);
  gllmk_status (*mem_write)(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                            uint64_t offset, const void *src, uint64_t size);
  gllmk_status (*mem_read)(gllmk_plugin_device *device, gllmk_plugin_memory *src,
                           uint64_t offset, void *dst, uint64_t size);
  gllmk_status (*mem_copy)(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                           uint64_t dst_offset, gllmk_plugin_memory *src,
                           uint64_t src_offset, uint64_t size);
  gllmk_status (*mem_fill)(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                           uint64_t offset, uint64_t size, uint8_t value);

  /* The op table and how many bytes of it the plugin was built with. */
  const gllmk_plugin_ops *ops;
  uint32_t ops_size;

  /* ---- Optional (NULL = not offered). ---- */

  /* Can this device run `op` with these (already validated) arguments? GLLMK_OK,
   * or GLLMK_ERR_UNSUPPORTED with the reason set through host->fail. The core
   * asks before every call (and gllmk_op_supported() asks it directly), so an
   * op function never has to refuse a case it declared here. */
  gllmk_status (*supports)(gllmk_plugin_device *device, gllmk_op op, const void *args);

  /* Wraps caller-owned memory (gllmk_memory_kind; `address` is a host pointer
   * or a device address) without copying. mem_free later forgets it. */
  gllmk_status (*mem_import)(gllmk_plugin_device *device, uint32_t kind, uint64_t address,
                             uint64_t size, gllmk_plugin_memory **out_memory);
  /* Where an allocation lives, for DLPack export: a gllmk_memory_kind and
   * the address of its first byte. */
  gllmk_status (*mem_address)(gllmk_plugin_device *device, gllmk_plugin_memory *memory,
                              uint32_t *out_kind, uint64_t *out_address);

  /* Native recordings. Between record_begin and record_end the core calls op
   * functions, which must capture their work instead of running it; record_end
   * returns the compiled form (or an error, after which the core forgets the
   * capture and replays call by call). record_replay enqueues it as the calls
   * would have been; buffers are the same as when it was recorded. */
  gllmk_status (*record_begin)(gllmk_plugin_device *device);
  gllmk_status (*record_end)(gllmk_plugin_device *device,
                             gllmk_plugin_recording **out_recording);
  gllmk_status (*record_replay)(gllmk_plugin_device *device,
                                gllmk_plugin_recording *recording);
  void (*record_free)(gllmk_plugin_device *device, gllmk_plugin_recording *recording);

  /* Device timestamps. `mark` enqueues a timestamp and gives its id (ids
   * count from 0 after each marks_read). marks_read waits for the queue and
   * returns the times of the first `count` marks since the last read, in
   * nanoseconds on one device clock, then forgets all marks. */
  gllmk_status (*mark)(gllmk_plugin_device *device, uint32_t *out_id);
  gllmk_status (*marks_read)(gllmk_plugin_device *device, uint32_t count, uint64_t *out_ns);

  /* ---- ABI 2.3: collectives across this plugin's devices in one process
   * (gllmk.h, "collectives"); optional, all four or none. ---- */

  /* A communicator over `count` devices opened by this plugin (rank r =
   * devices[r]). Fails with GLLMK_ERR_UNSUPPORTED and a reason where the
   * plugin cannot ("NCCL not found: libnccl.so.2: cannot open ..."). */
  gllmk_status (*comm_create)(gllmk_plugin_device *const *devices, uint32_t count,
                              gllmk_plugin_comm **out_comm);
  /* Called once no queue or native recording uses the communicator. */
  void (*comm_free)(gllmk_plugin_comm *comm);
  /* One call for all ranks; outs[r], ins[r] are rank r's (resolved,
   * contiguous, validated by the core: gllmk.h). Enqueued on each rank's
   * queue, or captured there while the devices record natively. */
  gllmk_status (*all_reduce)(gllmk_plugin_comm *comm, const gllmk_tensor *outs,
                             const gllmk_tensor *ins);
  gllmk_status (*all_gather)(gllmk_plugin_comm *comm, const gllmk_tensor *outs,
                             const gllmk_tensor *ins);
} gllmk_plugin;

typedef const gllmk_plugin *(*gllmk_plugin_entry_fn)(void);

#if defined(__GNUC__)
#define GLLMK_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define GLLMK_PLUGIN_EXPORT
#endif

/* ------------------------------------------------------------------------
 * Helpers for plugins (header-only, no core symbols).
 */

/* Bytes per element. */
static inline size_t gllmk_plugin_dtype_size(int32_t dtype) {
  return dtype == GLLMK_F16 || dtype == GLLMK_BF16 ? 2u : 4u;
}

/* A tensor as rows: the core guarantees that, for every tensor the op docs
 * call "row-strided", the leading dims flatten into `rows` rows of `cols`
 * unit-stride elements `row_stride` elements apart. */
typedef struct gllmk_plugin_rows {
  int64_t rows, cols, row_stride;
} gllmk_plugin_rows;

static inline gllmk_plugin_rows gllmk_plugin_as_rows(const gllmk_tensor *t) {
  gllmk_plugin_rows r;
  r.cols = t->shape[t->ndim - 1];
  r.rows = 1;
  for (int32_t i = 0; i < t->ndim - 1; i++) r.rows *= t->shape[i];
  /* The stride of the innermost leading dim with extent > 1 is the row stride. */
  r.row_stride = r.cols;
  for (int32_t i = t->ndim - 2; i >= 0; i--) {
    if (t->shape[i] > 1) {
      r.row_stride = t->strides[i];
      break;
    }
  }
  return r;
}

#ifdef __cplusplus
}
#endif

#endif /* GLLMK_GLLMK_PLUGIN_H_ */
