/*
 * graph.c - the cuda backend's ABI v2 extras: recordings compiled into
 * CUDA graphs (stream capture), timestamps from CUDA events, and device
 * memory the caller owns.
 *
 * A captured graph keeps the addresses and kernel parameters of the calls
 * as they were captured; the core re-checks that every buffer is still live
 * before a replay, and cuda_scratch never frees an address a live graph may
 * use (it retires it until close).
 */
#include <stdlib.h>
#include <time.h>

#include "internal.h"

struct gllmk_plugin_recording {
  CUgraph graph;
  CUgraphExec exec;
};

/* ------------------------------------------------------------ recordings */

gllmk_status cuda_record_begin(gllmk_plugin_device *dev) {
  if (!cu.cuStreamBeginCapture || !cu.cuStreamEndCapture || !cu.cuGraphInstantiateWithFlags ||
      !cu.cuGraphLaunch || !cu.cuGraphExecDestroy || !cu.cuGraphDestroy)
    return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: this driver has no CUDA graphs");
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  /* Relaxed: the plugin's own host-side calls of other contexts (on other
   * threads) must not invalidate this capture. */
  status = cuda_check(cu.cuStreamBeginCapture(dev->stream, CU_STREAM_CAPTURE_MODE_RELAXED),
                      "cuStreamBeginCapture");
  cuda_leave(dev);
  if (status == GLLMK_OK) dev->capturing = 1;
  return status;
}

gllmk_status cuda_record_end(gllmk_plugin_device *dev, gllmk_plugin_recording **out) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  CUgraph graph = NULL;
  status = cuda_check(cu.cuStreamEndCapture(dev->stream, &graph), "cuStreamEndCapture");
  dev->capturing = 0;
  gllmk_plugin_recording *recording = NULL;
  if (status == GLLMK_OK) {
    recording = calloc(1, sizeof *recording);
    if (!recording) status = cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  }
  if (status == GLLMK_OK)
    status = cuda_check(cu.cuGraphInstantiateWithFlags(&recording->exec, graph, 0), "cuGraphInstantiate");
  if (status != GLLMK_OK) {
    if (graph) cu.cuGraphDestroy(graph);
    free(recording);
    cuda_leave(dev);
    return status;
  }
  cuda_leave(dev);
  recording->graph = graph;
  dev->recordings++;
  *out = recording;
  return GLLMK_OK;
}

gllmk_status cuda_record_replay(gllmk_plugin_device *dev, gllmk_plugin_recording *recording) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuGraphLaunch(recording->exec, dev->stream), "cuGraphLaunch");
  cuda_leave(dev);
  return status;
}

void cuda_record_free(gllmk_plugin_device *dev, gllmk_plugin_recording *recording) {
  if (cuda_enter(dev) == GLLMK_OK) {
    cu.cuStreamSynchronize(dev->stream); /* a launch may still run */
    cu.cuGraphExecDestroy(recording->exec);
    cu.cuGraphDestroy(recording->graph);
    cuda_leave(dev);
  }
  dev->recordings--;
  free(recording);
}

/* ------------------------------------------------------------ timestamps */

static uint64_t host_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Events are kept between reads and reused: creating one per op would cost
 * more than the small ops it times. */
static gllmk_status mark_event(gllmk_plugin_device *dev, CUevent *out) {
  if (dev->mark_count == dev->mark_capacity) {
    uint32_t capacity = dev->mark_capacity ? 2 * dev->mark_capacity : 256;
    CUevent *grown = realloc(dev->marks, capacity * sizeof *grown);
    if (!grown) return cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory for marks");
    for (uint32_t i = dev->mark_capacity; i < capacity; i++) grown[i] = NULL;
    dev->marks = grown;
    dev->mark_capacity = capacity;
  }
  CUevent *event = &dev->marks[dev->mark_count];
  if (*event == NULL) {
    gllmk_status status = cuda_check(cu.cuEventCreate(event, 0), "cuEventCreate (timing)");
    if (status != GLLMK_OK) return status;
  }
  *out = *event;
  return GLLMK_OK;
}

gllmk_status cuda_mark(gllmk_plugin_device *dev, uint32_t *out_id) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  CUevent event = NULL;
  status = mark_event(dev, &event);
  if (status == GLLMK_OK) status = cuda_check(cu.cuEventRecord(event, dev->stream), "cuEventRecord");
  cuda_leave(dev);
  if (status != GLLMK_OK) return status;
  if (dev->mark_count == 0) dev->first_mark_host_ns = host_ns();
  *out_id = dev->mark_count++;
  return GLLMK_OK;
}

/* Times relative to the first mark, placed at the host time it was
 * enqueued: after a synchronize the stream is idle, so the first mark runs
 * about when it is enqueued, and batches keep their order on one clock. */
gllmk_status cuda_marks_read(gllmk_plugin_device *dev, uint32_t count, uint64_t *out_ns) {
  if (count > dev->mark_count)
    return cuda_host->fail(GLLMK_ERR_INTERNAL, "cuda: %u marks asked for, %u made", count, dev->mark_count);
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuStreamSynchronize(dev->stream), "cuStreamSynchronize");
  for (uint32_t i = 0; i < count && status == GLLMK_OK; i++) {
    float ms = 0.0f;
    status = cuda_check(cu.cuEventElapsedTime(&ms, dev->marks[0], dev->marks[i]), "cuEventElapsedTime");
    out_ns[i] = dev->first_mark_host_ns + (uint64_t)((double)ms * 1e6);
  }
  cuda_leave(dev);
  dev->mark_count = 0;
  return status;
}

/* ------------------------------------------------------- external memory */

gllmk_status cuda_mem_import(gllmk_plugin_device *dev, uint32_t kind, uint64_t address, uint64_t size,
                             gllmk_plugin_memory **out) {
  (void)size;
  if (kind != GLLMK_MEMORY_CUDA_DEVICE)
    return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: only CUDA device memory can be wrapped");
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  int ordinal = -1, type = 0;
  status = cuda_check(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address),
                      "cuPointerGetAttribute (memory type)");
  if (status == GLLMK_OK)
    status = cuda_check(cu.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, address),
                        "cuPointerGetAttribute (device)");
  cuda_leave(dev);
  if (status != GLLMK_OK) return status;
  if (type != CU_MEMORYTYPE_DEVICE || ordinal != dev->ordinal)
    return cuda_host->fail(GLLMK_ERR_INVALID_ARGUMENT,
                           "cuda: address 0x%llx is not device memory of CUDA device %d (type %d, device %d)",
                           (unsigned long long)address, dev->ordinal, type, ordinal);
  gllmk_plugin_memory *memory = malloc(sizeof *memory);
  if (!memory) return cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  *memory = (gllmk_plugin_memory){.address = address, .owned = 0};
  *out = memory;
  return GLLMK_OK;
}

gllmk_status cuda_mem_address(gllmk_plugin_device *dev, gllmk_plugin_memory *memory, uint32_t *out_kind,
                              uint64_t *out_address) {
  (void)dev;
  *out_kind = GLLMK_MEMORY_CUDA_DEVICE;
  *out_address = memory->address;
  return GLLMK_OK;
}

void cuda_graph_close(gllmk_plugin_device *dev) {
  for (uint32_t i = 0; i < dev->mark_capacity; i++)
    if (dev->marks[i]) cu.cuEventDestroy(dev->marks[i]);
  free(dev->marks);
  dev->marks = NULL;
  dev->mark_count = dev->mark_capacity = 0;
}
