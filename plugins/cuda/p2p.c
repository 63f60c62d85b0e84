/*
 * p2p.c - the cuda backend's small all-reduces through peer memory, where
 * every rank's GPU can map every other's (NVLink or PCIe peer access).
 *
 * A decode step of a tensor-parallel model sums [batch, hidden] partials
 * twice a layer; NCCL takes about 6.5 µs for each even inside a CUDA graph
 * (2 H200, docs/performance.md), most of it its own protocol. One kernel
 * per rank (kernels/collective.cu) that stores its part straight into the
 * other ranks' memory and waits for theirs does the same sum in one launch.
 * Sums larger than GK_P2P_MAX_BYTES, and every all_gather, stay with NCCL
 * (nccl.c), which also makes the communicator. docs/nccl.md says more.
 */
#include <stdlib.h>
#include <string.h>

#include "launch.h"

struct cuda_p2p {
  uint32_t count;
  uint32_t allocated;                          /* mailboxes[0, allocated) */
  CUcontext contexts[GK_P2P_MAX_RANKS];        /* retained by the communicator */
  CUdeviceptr mailboxes[GK_P2P_MAX_RANKS];     /* rank r's, in its own memory */
};

static size_t mailbox_bytes(uint32_t count) {
  return GK_P2P_HEADER_BYTES + 2 * (size_t)count * GK_P2P_MAX_BYTES;
}

/* Whether each rank's GPU can map each other rank's memory. */
static int peers_reachable(gllmk_plugin_device *const *devices, uint32_t count) {
  for (uint32_t a = 0; a < count; a++)
    for (uint32_t b = 0; b < count; b++) {
      int can = 0;
      if (a != b && (cu.cuDeviceCanAccessPeer(&can, devices[a]->device, devices[b]->device) != CUDA_SUCCESS || !can))
        return 0;
    }
  return 1;
}

/* Maps every other rank's memory into rank r's context (NCCL may have done
 * so already; access stays enabled after the communicator, as others in
 * the process may rely on it). 0 when the driver refuses (too many peers). */
static int enable_peers(const struct cuda_p2p *p2p, uint32_t r) {
  if (cu.cuCtxPushCurrent(p2p->contexts[r]) != CUDA_SUCCESS) return 0;
  int enabled = 1;
  for (uint32_t peer = 0; peer < p2p->count && enabled; peer++) {
    if (peer == r) continue;
    const CUresult result = cu.cuCtxEnablePeerAccess(p2p->contexts[peer], 0);
    enabled = result == CUDA_SUCCESS || result == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  }
  cuda_pop_context();
  return enabled;
}

/* Rank r's mailbox, zeroed: no flag raised, no call counted. */
static gllmk_status alloc_mailbox(struct cuda_p2p *p2p, uint32_t r) {
  gllmk_status status = cuda_push_context(p2p->contexts[r]);
  if (status != GLLMK_OK) return status;
  const size_t bytes = mailbox_bytes(p2p->count);
  status = cuda_check(cu.cuMemAlloc(&p2p->mailboxes[r], bytes), "cuMemAlloc (all_reduce mailbox)");
  if (status == GLLMK_OK) {
    p2p->allocated++;
    status = cuda_check(cu.cuMemsetD8(p2p->mailboxes[r], 0, bytes), "cuMemsetD8");
  }
  cuda_pop_context();
  return status;
}

void cuda_p2p_free(struct cuda_p2p *p2p) {
  if (!p2p) return;
  for (uint32_t r = 0; r < p2p->allocated; r++) {
    if (cu.cuCtxPushCurrent(p2p->contexts[r]) != CUDA_SUCCESS) continue;
    cu.cuMemFree(p2p->mailboxes[r]);
    cuda_pop_context();
  }
  free(p2p);
}

gllmk_status cuda_p2p_create(gllmk_plugin_device *const *devices, const CUcontext *contexts, uint32_t count,
                             struct cuda_p2p **out_p2p) {
  *out_p2p = NULL;
  if (count < 2 || count > GK_P2P_MAX_RANKS || !peers_reachable(devices, count)) return GLLMK_OK;
  struct cuda_p2p *p2p = calloc(1, sizeof *p2p);
  if (!p2p) return cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  p2p->count = count;
  memcpy(p2p->contexts, contexts, count * sizeof *contexts);
  int enabled = 1;
  for (uint32_t r = 0; r < count && enabled; r++) enabled = enable_peers(p2p, r);
  gllmk_status status = GLLMK_OK;
  for (uint32_t r = 0; r < count && enabled && status == GLLMK_OK; r++) status = alloc_mailbox(p2p, r);
  if (status != GLLMK_OK || !enabled) {
    cuda_p2p_free(p2p);
    return status;
  }
  *out_p2p = p2p;
  return GLLMK_OK;
}

/* The core passes dense tensors of one shape and dtype on every rank. */
int cuda_p2p_fits(const struct cuda_p2p *p2p, const gllmk_tensor *ins) {
  const gllmk_plugin_rows r = gllmk_plugin_as_rows(&ins[0]);
  return p2p && (uint64_t)(r.rows * r.cols) * elem_size(&ins[0]) <= GK_P2P_MAX_BYTES;
}

gllmk_status cuda_p2p_all_reduce(struct cuda_p2p *p2p, gllmk_plugin_device *const *devices,
                                 const gllmk_tensor *outs, const gllmk_tensor *ins) {
  const gllmk_plugin_rows shape = gllmk_plugin_as_rows(&ins[0]);
  const int64_t n = shape.rows * shape.cols;
  const int64_t units = ceil_div(n * (int64_t)elem_size(&ins[0]), 16);
  const uint32_t blocks = (uint32_t)ceil_div(units, GK_P2P_THREADS);
  for (uint32_t r = 0; r < p2p->count; r++) {
    gllmk_plugin_device *dev = devices[r];
    cuda_all_reduce_params p = {.out = cuda_tensor_address(&outs[r]),
                                .in = cuda_tensor_address(&ins[r]),
                                .error_flag = dev->error_device,
                                .n = n,
                                .rank = r,
                                .ranks = p2p->count};
    memcpy(p.mailboxes, p2p->mailboxes, sizeof p.mailboxes);
    p.vec = aligned16(p.out) && aligned16(p.in) && n % (16 / (int64_t)elem_size(&ins[r])) == 0;
    gllmk_status status = cuda_enter(dev);
    if (status != GLLMK_OK) return status;
    status = cuda_launch(dev, CK_all_reduce_f32 + variant(ins[r].dtype), blocks, 1, 1, GK_P2P_THREADS, 0, &p);
    cuda_leave(dev);
    /* Ranks launched before a failure wait for this one until their
     * timeout, and their synchronize then reports it. */
    if (status != GLLMK_OK) return status;
  }
  return GLLMK_OK;
}
