/*
 * nccl.c - the cuda backend's collectives (plugin ABI 2.3) through NCCL.
 *
 * libnccl.so.2 is loaded with dlopen on the first communicator (or
 * describe) and kept loaded. A communicator is one NCCL communicator a rank,
 * made together by ncclCommInitAll: one process, one GPU a rank. Each
 * collective is one NCCL group call from the calling thread that enqueues
 * every rank's part on that rank's stream, or adds it to the CUDA graph
 * being captured there (graph.c), as NCCL supports. All-reduces small
 * enough for p2p.c's mailboxes go through peer memory instead, where the
 * GPUs can map each other's. docs/nccl.md says more.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "nccl.h"

static struct {
#define NCCL_FIELD(type, name, params) type(*name) params;
  NCCL_SYMBOLS(NCCL_FIELD)
#undef NCCL_FIELD
} nccl;

/* Written once, under nccl_once, and read-only afterwards: the library (NULL
 * when NCCL cannot be used, with the reason), its NCCL_VERSION_CODE. */
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static void *nccl_library;
static int nccl_version;
static char nccl_reason[384];

/* A rank's context may be closed before its communicator is freed (the
 * core frees it with the last recording that holds its collectives), while
 * rank r's NCCL communicator has memory in the GPU's primary context: so
 * the communicator holds its own retain of each. `devices` serve the
 * collectives only, which the core calls while every rank's context is open. */
struct gllmk_plugin_comm {
  uint32_t count;
  uint32_t retained;                              /* contexts[0, retained) */
  gllmk_plugin_device *devices[CUDA_MAX_DEVICES]; /* rank r's stream */
  CUdevice gpus[CUDA_MAX_DEVICES];
  CUcontext contexts[CUDA_MAX_DEVICES];           /* the primary contexts, retained */
  ncclComm_t comms[CUDA_MAX_DEVICES];             /* rank r's NCCL communicator */
  struct cuda_p2p *p2p;                           /* NULL: every sum through NCCL */
};

/* ----------------------------------------------------------- loading */

/* Fills `nccl`; returns the first symbol missing, or NULL. */
static const char *resolve_nccl(void *library) {
#define NCCL_LOOKUP(type, name, params)   \
  {                                       \
    void *fn = dlsym(library, #name);     \
    if (!fn) return #name;                \
    memcpy(&nccl.name, &fn, sizeof fn);   \
  }
  NCCL_SYMBOLS(NCCL_LOOKUP)
#undef NCCL_LOOKUP
  return NULL;
}

/* "2.21.5" from an NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch
 * since NCCL 2.9, major * 1000 + minor * 100 + patch before. */
static void format_version(char *text, size_t size, int code) {
  const int major_unit = code >= 10000 ? 10000 : 1000;
  snprintf(text, size, "%d.%d.%d", code / major_unit, code % major_unit / 100, code % 100);
}

static void load_nccl(void) {
  dlerror();
  void *library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = dlerror();
    snprintf(nccl_reason, sizeof nccl_reason, "NCCL not found: %s", why ? why : "libnccl.so.2 cannot be loaded");
    return;
  }
  const char *missing = resolve_nccl(library);
  int version = 0;
  if (missing) {
    snprintf(nccl_reason, sizeof nccl_reason, "NCCL unusable: libnccl.so.2 lacks %s", missing);
  } else if (nccl.ncclGetVersion(&version) != ncclSuccess || version < GLLMK_NCCL_MIN_VERSION) {
    char found[32];
    format_version(found, sizeof found, version);
    snprintf(nccl_reason, sizeof nccl_reason, "NCCL unusable: libnccl.so.2 is NCCL %s, 2.10 or newer is needed",
             found);
  }
  if (nccl_reason[0]) {
    dlclose(library);
    memset(&nccl, 0, sizeof nccl);
    return;
  }
  nccl_version = version;
  nccl_library = library;
}

/* Loads NCCL on first use: GLLMK_OK, or GLLMK_ERR_UNSUPPORTED and why. */
static gllmk_status nccl_ready(void) {
  pthread_once(&nccl_once, load_nccl);
  return nccl_library ? GLLMK_OK : cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: %s", nccl_reason);
}

void cuda_nccl_describe(char *text, size_t size) {
  pthread_once(&nccl_once, load_nccl);
  if (!nccl_library) {
    snprintf(text, size, "; %s", nccl_reason);
    return;
  }
  char version[32];
  format_version(version, sizeof version, nccl_version);
  snprintf(text, size, "; NCCL %s", version);
}

static gllmk_status nccl_check(ncclResult_t result, const char *what) {
  if (result == ncclSuccess) return GLLMK_OK;
  return cuda_host->fail(GLLMK_ERR_BACKEND, "cuda: %s: %s (NCCL error %d)", what, nccl.ncclGetErrorString(result),
                         result);
}

/* ------------------------------------------------------ communicators */

/* The CUDA ordinal of each rank's GPU, for ncclCommInitAll; fails where two
 * ranks share a GPU, which NCCL does not support (it may hang). */
static gllmk_status rank_ordinals(gllmk_plugin_device *const *devices, uint32_t count, int *ordinals) {
  int rank_of[CUDA_MAX_DEVICES];
  for (int i = 0; i < CUDA_MAX_DEVICES; i++) rank_of[i] = -1;
  /* Distinct GPUs also bound count by CUDA_MAX_DEVICES. */
  for (uint32_t r = 0; r < count; r++) {
    const int gpu = devices[r]->ordinal;
    if (rank_of[gpu] >= 0)
      return cuda_host->fail(GLLMK_ERR_UNSUPPORTED,
                             "cuda: NCCL needs one GPU per rank: devices %d and %u are both GPU %d", rank_of[gpu], r,
                             gpu);
    rank_of[gpu] = (int)r;
    ordinals[r] = cuda_driver.ordinals[gpu];
  }
  return GLLMK_OK;
}

/* NCCL calls run with rank 0's context pushed. NCCL makes each rank's GPU
 * current itself, through the CUDA runtime, which swaps the context at the
 * top of this thread's stack (and sets back the GPU it found when it
 * returns): the push gives it a GPU to find, and the pop after it leaves
 * the caller's stack as it was, whatever NCCL left on top. */
static gllmk_status comm_enter(const gllmk_plugin_comm *comm) { return cuda_push_context(comm->contexts[0]); }

static gllmk_status retain_contexts(gllmk_plugin_comm *comm) {
  for (; comm->retained < comm->count; comm->retained++) {
    const uint32_t r = comm->retained;
    comm->gpus[r] = comm->devices[r]->device;
    const gllmk_status status =
        cuda_check(cu.cuDevicePrimaryCtxRetain(&comm->contexts[r], comm->gpus[r]), "cuDevicePrimaryCtxRetain");
    if (status != GLLMK_OK) return status;
  }
  return GLLMK_OK;
}

static void free_comm(gllmk_plugin_comm *comm) {
  cuda_p2p_free(comm->p2p);
  for (uint32_t r = 0; r < comm->retained; r++) cu.cuDevicePrimaryCtxRelease(comm->gpus[r]);
  free(comm);
}

/* One all-reduce and one all-gather of a float a rank, in two groups. */
static gllmk_status sum_and_gather(gllmk_plugin_comm *comm, const CUdeviceptr *buffers) {
  gllmk_status status = comm_enter(comm);
  if (status != GLLMK_OK) return status;
  ncclResult_t result = nccl.ncclGroupStart();
  for (uint32_t r = 0; r < comm->count && result == ncclSuccess; r++)
    result = nccl.ncclAllReduce((void *)(uintptr_t)buffers[r], (void *)(uintptr_t)buffers[r], 1, ncclFloat32,
                                ncclSum, comm->comms[r], comm->devices[r]->stream);
  ncclResult_t ended = nccl.ncclGroupEnd();
  if (result == ncclSuccess && ended == ncclSuccess) {
    result = nccl.ncclGroupStart();
    for (uint32_t r = 0; r < comm->count && result == ncclSuccess; r++)
      result = nccl.ncclAllGather((void *)(uintptr_t)(buffers[r] + r * sizeof(float)), (void *)(uintptr_t)buffers[r],
                                  1, ncclFloat32, comm->comms[r], comm->devices[r]->stream);
    ended = nccl.ncclGroupEnd();
  }
  cuda_pop_context();
  return nccl_check(result != ncclSuccess ? result : ended, "connecting the ranks");
}

/* NCCL connects its ranks lazily, in the first collective of each kind,
 * which took a 1024-token prefill on 2 H200 from 18 to 40 ms when the
 * all-reduces before it had gone through peer memory (docs/nccl.md). One
 * all-reduce and one all-gather of zeros here move that into the
 * communicator's creation. Not while a rank's stream is captured, as this
 * waits for the streams. */
static gllmk_status connect_ranks(gllmk_plugin_comm *comm) {
  for (uint32_t r = 0; r < comm->count; r++)
    if (comm->devices[r]->capturing) return GLLMK_OK;
  CUdeviceptr buffers[CUDA_MAX_DEVICES] = {0};
  const size_t bytes = comm->count * sizeof(float);
  gllmk_status status = GLLMK_OK;
  for (uint32_t r = 0; r < comm->count && status == GLLMK_OK; r++) {
    status = cuda_push_context(comm->contexts[r]);
    if (status != GLLMK_OK) break;
    status = cuda_check(cu.cuMemAlloc(&buffers[r], bytes), "cuMemAlloc");
    if (status == GLLMK_OK) status = cuda_check(cu.cuMemsetD8(buffers[r], 0, bytes), "cuMemsetD8");
    cuda_pop_context();
  }
  if (status == GLLMK_OK) status = sum_and_gather(comm, buffers);
  for (uint32_t r = 0; r < comm->count; r++) {
    if (!buffers[r] || cuda_push_context(comm->contexts[r]) != GLLMK_OK) continue;
    const gllmk_status synced = cuda_check(cu.cuStreamSynchronize(comm->devices[r]->stream), "cuStreamSynchronize");
    if (status == GLLMK_OK) status = synced;
    cu.cuMemFree(buffers[r]);
    cuda_pop_context();
  }
  return status;
}

gllmk_status cuda_comm_create(gllmk_plugin_device *const *devices, uint32_t count, gllmk_plugin_comm **out_comm) {
  int ordinals[CUDA_MAX_DEVICES];
  gllmk_status status = nccl_ready();
  if (status == GLLMK_OK) status = rank_ordinals(devices, count, ordinals);
  if (status != GLLMK_OK) return status;
  gllmk_plugin_comm *comm = calloc(1, sizeof *comm);
  if (!comm) return cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  comm->count = count;
  memcpy(comm->devices, devices, count * sizeof *devices);
  status = retain_contexts(comm);
  if (status == GLLMK_OK) status = comm_enter(comm);
  if (status == GLLMK_OK) {
    status = nccl_check(nccl.ncclCommInitAll(comm->comms, (int)count, ordinals), "ncclCommInitAll");
    cuda_pop_context();
  }
  if (status != GLLMK_OK) {
    free_comm(comm);
    return status;
  }
  status = cuda_p2p_create(comm->devices, comm->contexts, count, &comm->p2p);
  if (status == GLLMK_OK) status = connect_ranks(comm);
  if (status != GLLMK_OK) {
    cuda_comm_free(comm);
    return status;
  }
  *out_comm = comm;
  return GLLMK_OK;
}

/* Called once no stream or recording uses the communicator. Destroying the
 * ranks' NCCL communicators one after another from one thread is what
 * NCCL's own single-thread example does. */
void cuda_comm_free(gllmk_plugin_comm *comm) {
  if (comm_enter(comm) == GLLMK_OK) {
    for (uint32_t r = 0; r < comm->count; r++) nccl.ncclCommDestroy(comm->comms[r]);
    cuda_pop_context();
  }
  free_comm(comm);
}

/* -------------------------------------------------------- collectives */

_Static_assert(GLLMK_DTYPE_COUNT == 4, "nccl.c: give the new dtype its ncclDataType_t");

static ncclDataType_t nccl_type(int32_t dtype) {
  static const ncclDataType_t types[GLLMK_DTYPE_COUNT] = {
      [GLLMK_F32] = ncclFloat32, [GLLMK_F16] = ncclFloat16, [GLLMK_BF16] = ncclBfloat16, [GLLMK_I32] = ncclInt32};
  return types[dtype];
}

/* The core passes dense tensors: their elements are rows * cols. */
static size_t elements(const gllmk_tensor *t) {
  const gllmk_plugin_rows r = gllmk_plugin_as_rows(t);
  return (size_t)(r.rows * r.cols);
}

static void *address(const gllmk_tensor *t) { return (void *)(uintptr_t)cuda_tensor_address(t); }

/* Queues one rank's part of a collective (inside the group). */
typedef ncclResult_t (*rank_part)(const gllmk_tensor *out, const gllmk_tensor *in, ncclComm_t comm, CUstream stream);

static ncclResult_t all_reduce_part(const gllmk_tensor *out, const gllmk_tensor *in, ncclComm_t comm,
                                    CUstream stream) {
  return nccl.ncclAllReduce(address(in), address(out), elements(in), nccl_type(in->dtype), ncclSum, comm, stream);
}

static ncclResult_t all_gather_part(const gllmk_tensor *out, const gllmk_tensor *in, ncclComm_t comm,
                                    CUstream stream) {
  return nccl.ncclAllGather(address(in), address(out), elements(in), nccl_type(in->dtype), comm, stream);
}

/* NCCL needs a collective captured on every rank or on none: a rank that
 * ran it at once would wait for the others' graphs. */
static gllmk_status same_capture(const gllmk_plugin_comm *comm) {
  for (uint32_t r = 1; r < comm->count; r++)
    if (comm->devices[r]->capturing != comm->devices[0]->capturing)
      return cuda_host->fail(GLLMK_ERR_INVALID_ARGUMENT,
                             "cuda: a collective must be recorded on every rank or on none (rank 0 %s, rank %u %s)",
                             comm->devices[0]->capturing ? "records" : "does not", r,
                             comm->devices[r]->capturing ? "records" : "does not");
  return GLLMK_OK;
}

/* One group call for all ranks: from one thread, NCCL needs the group so
 * that no rank's call waits for the next one's. Nothing here waits for a
 * stream, so it also runs while the streams are captured. */
static gllmk_status collective(gllmk_plugin_comm *comm, const gllmk_tensor *outs, const gllmk_tensor *ins,
                               rank_part part, const char *what) {
  gllmk_status status = same_capture(comm);
  if (status == GLLMK_OK) status = comm_enter(comm);
  if (status != GLLMK_OK) return status;
  const char *failed = "ncclGroupStart";
  ncclResult_t result = nccl.ncclGroupStart();
  if (result == ncclSuccess) {
    failed = what;
    for (uint32_t r = 0; r < comm->count && result == ncclSuccess; r++)
      result = part(&outs[r], &ins[r], comm->comms[r], comm->devices[r]->stream);
    /* Ended even after a failed part (NCCL then drops the parts queued),
     * so that this thread is not left inside a group. */
    const ncclResult_t ended = nccl.ncclGroupEnd();
    if (result == ncclSuccess && ended != ncclSuccess) {
      result = ended;
      failed = "ncclGroupEnd";
    }
  }
  cuda_pop_context();
  return nccl_check(result, failed);
}

gllmk_status cuda_all_reduce(gllmk_plugin_comm *comm, const gllmk_tensor *outs, const gllmk_tensor *ins) {
  if (cuda_p2p_fits(comm->p2p, ins)) {
    const gllmk_status status = same_capture(comm);
    return status == GLLMK_OK ? cuda_p2p_all_reduce(comm->p2p, comm->devices, outs, ins) : status;
  }
  return collective(comm, outs, ins, all_reduce_part, "ncclAllReduce");
}

gllmk_status cuda_all_gather(gllmk_plugin_comm *comm, const gllmk_tensor *outs, const gllmk_tensor *ins) {
  return collective(comm, outs, ins, all_gather_part, "ncclAllGather");
}
