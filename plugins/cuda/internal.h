/*
 * internal.h - shared declarations of the cuda plugin's lower layers
 * (driver.c, device.c, memory.c, graph.c, nccl.c), which the family files
 * (elementwise.c ... sample.c, declared in ops.h) build on.
 *
 * The plugin talks to libcuda.so.1 only, through the function table `cu`
 * filled at probe time, and for collectives to libnccl.so.2 (nccl.c). A
 * gllmk_plugin_memory holds a device address, of an allocation of the
 * plugin's or of the caller's (gllmk_buffer_wrap). Each context (open) owns
 * a stream on the device's primary context (or runs on the caller's), the
 * kernel module loaded from the embedded fatbin, and a word of host-mapped
 * memory where kernels flag out-of-range device data.
 */
#ifndef GLLMK_CUDA_INTERNAL_H_
#define GLLMK_CUDA_INTERNAL_H_

#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"
#include "gllmk/gllmk_plugin.h"
#include "kernels/cuda_params.h"

typedef struct cuda_api {
#define CUDA_SYMBOL(name, legacy, params) CUresult (*name) params;
#include "cuda_symbols.def"
} cuda_api;

extern cuda_api cu;
extern const gllmk_plugin_host *cuda_host;

#define CUDA_MAX_DEVICES 64

/* What probe found (driver.c); read-only afterwards. */
typedef struct cuda_driver_state {
  void *library;
  int driver_version;
  int count;
  CUdevice devices[CUDA_MAX_DEVICES];
  int ordinals[CUDA_MAX_DEVICES]; /* the CUDA ordinal of each (devices too old are skipped) */
  int sm[CUDA_MAX_DEVICES];
} cuda_driver_state;

extern cuda_driver_state cuda_driver;

enum cuda_kernel_id {
#define CUDA_KERNEL(name) CK_##name,
#include "kernels.def"
  CK_COUNT
};

/* Layouts of kernels.def that code picks a kernel from by arithmetic; each
 * such place has a _Static_assert of these beside it, so that reordering
 * kernels.def fails to compile instead of launching the wrong kernel.
 *
 * CUDA_DTYPE_VARIANTS(op): op_f32, op_f16 and op_bf16 sit at CK_op_f32 +
 * dtype (a CUDA_FLOAT_KERNELS line), so CK_op_f32 + variant(dtype) is the
 * dtype's kernel. */
#define CUDA_DTYPE_VARIANTS(op)                                    \
  (GLLMK_F32 == 0 && CK_##op##_f16 == CK_##op##_f32 + GLLMK_F16 && \
   CK_##op##_bf16 == CK_##op##_f32 + GLLMK_BF16)
/* CUDA_F16_BF16_PAIRS(prefix, a, b): prefix_f16_a, prefix_bf16_a,
 * prefix_f16_b and prefix_bf16_b are consecutive, so CK_prefix_f16_a +
 * (dtype == GLLMK_BF16) + 2 * i is the kernel of dtype and size i (asserted
 * pair by pair where there are more than two sizes). */
#define CUDA_F16_BF16_PAIRS(prefix, a, b)                 \
  (CK_##prefix##_bf16_##a == CK_##prefix##_f16_##a + 1 && \
   CK_##prefix##_f16_##b == CK_##prefix##_f16_##a + 2 &&  \
   CK_##prefix##_bf16_##b == CK_##prefix##_f16_##a + 3)

#define CUDA_STAGING_BYTES (4u << 20)
/* matmul_skinny splits K until there are this many blocks per
 * multiprocessor (its partial buffer holds twice that many tiles). */
#define CUDA_SKINNY_BLOCKS_PER_SM 2

struct gllmk_plugin_memory {
  CUdeviceptr address;
  int owned; /* 0: the caller's memory, never freed here */
};

struct gllmk_plugin_device {
  CUdevice device;
  int ordinal;
  CUcontext context; /* the device's primary context (retained) */
  CUstream stream;
  int owns_stream;   /* 0: the caller's stream (gllmk_context_options.queue) */
  CUmodule module;
  CUfunction kernels[CK_COUNT];
  int sm;              /* compute capability, 10 * major + minor */
  int wgmma;           /* the driver loaded the sm_90a image: matmul_wgmma works */
  int multiprocessors;
  int smem_optin;      /* bytes of shared memory a block may opt in to */
  int smem_per_sm;     /* bytes of shared memory of one multiprocessor */
  /* sm_90: kernels are launched with programmatic stream serialization, so
   * each may start (and wait in gk_grid_dependency) while the one ahead of
   * it in the stream drains; in a CUDA graph too. */
  int programmatic;
  /* Device error word: kernels set GK_ERROR_* bits, synchronize reports. */
  volatile uint32_t *error_host;
  CUdeviceptr error_device;
  /* Pinned staging for mem_write: two halves used in turn, each with an
   * event that says when its last copy finished. */
  unsigned char *staging[2];
  CUevent staging_done[2];
  int staging_next;
  /* Split-K partial results of attention and sample's top_k candidates,
   * grown on demand. A CUDA graph keeps the address it captured, so while
   * recordings live an outgrown scratch is retired (freed at close), not
   * freed. */
  CUdeviceptr scratch;
  size_t scratch_size;
  CUdeviceptr retired[8];
  int retired_count;
  /* Counters of the blocks that finished a split tile or row, kept at 0
   * between launches (the last block to arrive resets its counter):
   * matmul_skinny's split-K tiles and argmax's split rows. Made with the
   * context, as are matmul_skinny's partial tiles (sm_80+), so that
   * recordings can split too. */
  CUdeviceptr arrivals, skinny_partial;
  int capturing;  /* between record_begin and record_end */
  int planning;   /* cuda_<op>_supports: the op's host code chooses kernels, launches nothing */
  int recordings; /* live native recordings */
  /* Timestamps (gllmk_context_set_timing): one event per mark since the
   * last read, and the host time of the first. */
  CUevent *marks;
  uint32_t mark_count, mark_capacity;
  uint64_t first_mark_host_ns;
};

/* Dynamic shared memory a softmax_stash block uses at most: all a block may
 * opt in to, less room for the kernel's static shared memory. */
static inline int cuda_softmax_stash_smem(const gllmk_plugin_device *dev) { return dev->smem_optin - 1024; }

/* Loading the driver, probe and device info (driver.c). */
gllmk_status cuda_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason, size_t reason_size);
gllmk_status cuda_device_info(uint32_t index, gllmk_device_info *info);
void cuda_describe(char *text, size_t size);
/* The driver's name and description of an error. */
const char *cuda_error_name(CUresult result);
const char *cuda_error_text(CUresult result);

/* GLLMK_OK, or the driver's error as a gllmk status with a message naming
 * `what` and the driver's error name and text. */
gllmk_status cuda_check(CUresult result, const char *what);

/* Contexts (device.c). */
gllmk_status cuda_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out);
void cuda_close(gllmk_plugin_device *dev);
gllmk_status cuda_synchronize(gllmk_plugin_device *dev);

/* Makes a context current for the calling thread / restores the previous
 * one (communicators, whose contexts may outlive their devices). */
gllmk_status cuda_push_context(CUcontext context);
void cuda_pop_context(void);

/* Makes the device's context current for the calling thread / restores the
 * previous one. Every entry point that calls the driver brackets with these. */
gllmk_status cuda_enter(gllmk_plugin_device *dev);
void cuda_leave(gllmk_plugin_device *dev);

/* Launches a kernel whose only parameter is *params. */
gllmk_status cuda_launch(gllmk_plugin_device *dev, enum cuda_kernel_id kernel, uint32_t gx, uint32_t gy,
                         uint32_t gz, uint32_t threads, uint32_t smem, void *params);

/* A device buffer of at least `bytes` for temporary results of queued work. */
gllmk_status cuda_scratch(gllmk_plugin_device *dev, size_t bytes, CUdeviceptr *out);

static inline CUdeviceptr cuda_memory_address(const gllmk_plugin_memory *memory) {
  return memory->address;
}

/* Device address of element [0, ..., 0]. */
static inline CUdeviceptr cuda_tensor_address(const gllmk_tensor *t) {
  return cuda_memory_address(gllmk_plugin_tensor_memory(t)) + t->offset;
}

/* Device memory (memory.c). */
gllmk_status cuda_mem_alloc(gllmk_plugin_device *dev, uint64_t size, gllmk_plugin_memory **out);
void cuda_mem_free(gllmk_plugin_device *dev, gllmk_plugin_memory *memory);
gllmk_status cuda_mem_write(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset, const void *src,
                            uint64_t size);
gllmk_status cuda_mem_read(gllmk_plugin_device *dev, gllmk_plugin_memory *src, uint64_t offset, void *dst,
                           uint64_t size);
gllmk_status cuda_mem_copy(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                           gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size);
gllmk_status cuda_mem_fill(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset, uint64_t size,
                           uint8_t value);

/* Recordings as CUDA graphs, timestamps, and memory the caller owns
 * (graph.c); cuda_graph_close frees what they hold at close. */
gllmk_status cuda_record_begin(gllmk_plugin_device *dev);
gllmk_status cuda_record_end(gllmk_plugin_device *dev, gllmk_plugin_recording **out);
gllmk_status cuda_record_replay(gllmk_plugin_device *dev, gllmk_plugin_recording *recording);
void cuda_record_free(gllmk_plugin_device *dev, gllmk_plugin_recording *recording);
gllmk_status cuda_mark(gllmk_plugin_device *dev, uint32_t *out_id);
gllmk_status cuda_marks_read(gllmk_plugin_device *dev, uint32_t count, uint64_t *out_ns);
gllmk_status cuda_mem_import(gllmk_plugin_device *dev, uint32_t kind, uint64_t address, uint64_t size,
                             gllmk_plugin_memory **out);
gllmk_status cuda_mem_address(gllmk_plugin_device *dev, gllmk_plugin_memory *memory, uint32_t *out_kind,
                              uint64_t *out_address);
void cuda_graph_close(gllmk_plugin_device *dev);

/* Collectives through NCCL, loaded on first use (nccl.c); docs/nccl.md. */
gllmk_status cuda_comm_create(gllmk_plugin_device *const *devices, uint32_t count, gllmk_plugin_comm **out_comm);
void cuda_comm_free(gllmk_plugin_comm *comm);
gllmk_status cuda_all_reduce(gllmk_plugin_comm *comm, const gllmk_tensor *outs, const gllmk_tensor *ins);
gllmk_status cuda_all_gather(gllmk_plugin_comm *comm, const gllmk_tensor *outs, const gllmk_tensor *ins);
/* Appends "; NCCL <version>" or "; <why NCCL cannot be used>" (loads it). */
void cuda_nccl_describe(char *text, size_t size);

/* Small all-reduces through peer memory (p2p.c): *out_p2p stays NULL where
 * the ranks' GPUs cannot all map each other's memory (NCCL does all then). */
struct cuda_p2p;
gllmk_status cuda_p2p_create(gllmk_plugin_device *const *devices, const CUcontext *contexts, uint32_t count,
                             struct cuda_p2p **out_p2p);
void cuda_p2p_free(struct cuda_p2p *p2p);
int cuda_p2p_fits(const struct cuda_p2p *p2p, const gllmk_tensor *ins);
gllmk_status cuda_p2p_all_reduce(struct cuda_p2p *p2p, gllmk_plugin_device *const *devices,
                                 const gllmk_tensor *outs, const gllmk_tensor *ins);

#endif /* GLLMK_CUDA_INTERNAL_H_ */
