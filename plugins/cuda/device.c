/*
 * device.c - contexts of the cuda backend: open and close (a stream, the
 * kernel module loaded from the embedded fatbin, the device error word,
 * staging memory), entering a device's context, launching a kernel of the
 * module by its id (kernels.def), attention's scratch memory, and
 * synchronize. The family files (elementwise.c ... sample.c) launch through
 * cuda_launch and cuda_scratch; nothing here calls up into them.
 */
#include <stdlib.h>
#include <string.h>

#include "fatbin.h"
#include "internal.h"

/* ------------------------------------------------------------ contexts */

gllmk_status cuda_push_context(CUcontext context) {
  return cuda_check(cu.cuCtxPushCurrent(context), "cuCtxPushCurrent");
}

void cuda_pop_context(void) {
  CUcontext top;
  cu.cuCtxPopCurrent(&top);
}

gllmk_status cuda_enter(gllmk_plugin_device *dev) { return cuda_push_context(dev->context); }

void cuda_leave(gllmk_plugin_device *dev) {
  (void)dev;
  cuda_pop_context();
}

gllmk_status cuda_launch(gllmk_plugin_device *dev, enum cuda_kernel_id kernel, uint32_t gx, uint32_t gy,
                         uint32_t gz, uint32_t threads, uint32_t smem, void *params) {
  if (dev->planning) return GLLMK_OK;
  void *args[1] = {params};
  if (dev->programmatic) {
    CUlaunchAttribute attribute;
    memset(&attribute, 0, sizeof attribute);
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmatic_stream_serialization = 1;
    const CUlaunchConfig config = {gx, gy, gz, threads, 1, 1, smem, dev->stream, &attribute, 1};
    return cuda_check(cu.cuLaunchKernelEx(&config, dev->kernels[kernel], args, NULL), "cuLaunchKernelEx");
  }
  return cuda_check(cu.cuLaunchKernel(dev->kernels[kernel], gx, gy, gz, threads, 1, 1, smem, dev->stream, args, NULL),
                    "cuLaunchKernel");
}

/* Replaces the scratch with one of at least `bytes` (not while capturing:
 * the old one may be in use by queued work, which needs a synchronize). */
static gllmk_status grow_scratch(gllmk_plugin_device *dev, size_t bytes) {
  if (dev->capturing)
    return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: scratch cannot grow while recording");
  if (dev->scratch && dev->recordings && dev->retired_count == (int)(sizeof dev->retired / sizeof dev->retired[0]))
    return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: scratch outgrown too often while recordings live");
  gllmk_status status = cuda_enter(dev); /* cuda_<op>_supports runs without */
  if (status != GLLMK_OK) return status;
  /* Queued work may still read the old buffer. */
  status = cuda_check(cu.cuStreamSynchronize(dev->stream), "cuStreamSynchronize");
  if (status == GLLMK_OK) {
    if (dev->scratch && dev->recordings) dev->retired[dev->retired_count++] = dev->scratch;
    else if (dev->scratch) cu.cuMemFree(dev->scratch);
    dev->scratch = 0;
    dev->scratch_size = 0;
    const size_t size = bytes + bytes / 2;
    status = cuda_check(cu.cuMemAlloc(&dev->scratch, size), "cuMemAlloc (scratch)");
    if (status == GLLMK_OK) dev->scratch_size = size;
  }
  cuda_leave(dev);
  return status;
}

/* Grown when planning too: the core asks cuda_<op>_supports at every call,
 * also while recording, so the scratch a recorded call needs exists before
 * the recording is compiled into a CUDA graph, where it cannot grow. */
gllmk_status cuda_scratch(gllmk_plugin_device *dev, size_t bytes, CUdeviceptr *out) {
  if (dev->scratch_size < bytes) {
    const gllmk_status status = grow_scratch(dev, bytes);
    if (status != GLLMK_OK) return status;
  }
  *out = dev->scratch;
  return GLLMK_OK;
}

static const char *const kernel_names[CK_COUNT] = {
#define CUDA_KERNEL(name) "gk_" #name,
#include "kernels.def"
};

/* The id ranges and offsets kernel_smem_limit reads a kernel's variant from. */
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_mma, nk, kn), "kernels.def: matmul_mma order");
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_wgmma, n128, n256), "kernels.def: matmul_wgmma order");
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_skinny_wgmma, m32, m64) &&
                   CK_matmul_skinny_wgmma_fused_f16_m32 == CK_matmul_skinny_wgmma_bf16_m64 + 1 &&
                   CK_matmul_skinny_wgmma_fused_bf16_m32 == CK_matmul_skinny_wgmma_fused_f16_m32 + 1,
               "kernels.def: matmul_skinny_wgmma, then matmul_skinny_wgmma_fused, order");
_Static_assert(CUDA_F16_BF16_PAIRS(attention_wgmma, d64, d128) && CUDA_F16_BF16_PAIRS(attention_wgmma, d128, d256),
               "kernels.def: attention_wgmma order");
_Static_assert(CUDA_F16_BF16_PAIRS(attention_mma, d64, d128) && CUDA_F16_BF16_PAIRS(attention_mma, d128, d256),
               "kernels.def: attention_mma order");
_Static_assert(CUDA_F16_BF16_PAIRS(attention_rows, d64, d128) && CUDA_F16_BF16_PAIRS(attention_rows, d128, d256),
               "kernels.def: attention_rows order");
_Static_assert(CUDA_DTYPE_VARIANTS(attention_simt) && CUDA_DTYPE_VARIANTS(softmax_stash),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");

/* Dynamic shared memory a kernel may need beyond the default 48 KiB. */
static int kernel_smem_limit(const gllmk_plugin_device *dev, int id) {
  if (id >= CK_matmul_wgmma_f16_n128 && id <= CK_matmul_wgmma_bf16_n256)
    return dev->wgmma ? GK_MATMUL_WGMMA_SMEM(id >= CK_matmul_wgmma_f16_n256 ? 256 : 128) : 0;
  if (id >= CK_matmul_skinny_wgmma_f16_m32 && id <= CK_matmul_skinny_wgmma_fused_bf16_m32)
    return dev->wgmma ? GK_MATMUL_SKINNY_WGMMA_SMEM(id >= CK_matmul_skinny_wgmma_f16_m64 && id <= CK_matmul_skinny_wgmma_bf16_m64 ? 64 : 32) : 0;
  if (id >= CK_matmul_mma_f16_nk && id <= CK_matmul_mma_bf16_kn) return GK_MATMUL_MMA_SMEM;
  if (id >= CK_attention_wgmma_f16_d64 && id <= CK_attention_wgmma_bf16_d256)
    return dev->wgmma ? GK_ATTENTION_WGMMA_SMEM(64 << ((id - CK_attention_wgmma_f16_d64) / 2)) : 0;
  if (id >= CK_attention_mma_f16_d64 && id <= CK_attention_mma_bf16_d256)
    return GK_ATTENTION_MMA_SMEM(64 << ((id - CK_attention_mma_f16_d64) / 2));
  if (id >= CK_attention_rows_f16_d64 && id <= CK_attention_rows_bf16_d256)
    return GK_ATTENTION_ROWS_SMEM(64 << ((id - CK_attention_rows_f16_d64) / 2));
  if (id >= CK_attention_simt_f32 && id <= CK_attention_simt_bf16) return dev->smem_optin;
  if (id >= CK_softmax_stash_f32 && id <= CK_softmax_stash_bf16) return cuda_softmax_stash_smem(dev);
  return 0;
}

static int is_mma_kernel(int id) {
  static const unsigned char mma[CK_COUNT] = {
#define CUDA_KERNEL(name) [CK_##name] = 0,
#define CUDA_MMA_KERNEL(name) [CK_##name] = 1,
#include "kernels.def"
  };
  return mma[id];
}

/* Whether the driver chose the module's sm_90a image (the only one whose
 * gk_wgmma_available is 1) for this device. */
static gllmk_status detect_wgmma(gllmk_plugin_device *dev) {
  dev->wgmma = 0;
  if (dev->sm != 90) return GLLMK_OK;
  CUdeviceptr flag;
  size_t bytes = 0;
  int32_t value = 0;
  gllmk_status status =
      cuda_check(cu.cuModuleGetGlobal(&flag, &bytes, dev->module, "gk_wgmma_available"), "cuModuleGetGlobal");
  if (status == GLLMK_OK && bytes == sizeof value)
    status = cuda_check(cu.cuMemcpyDtoH(&value, flag, sizeof value), "cuMemcpyDtoH");
  dev->wgmma = value == 1;
  return status;
}

/* Loads the module and looks up every kernel the device can run. */
static gllmk_status load_kernels(gllmk_plugin_device *dev) {
  gllmk_status status = cuda_check(cu.cuModuleLoadData(&dev->module, cuda_fatbin_data()), "cuModuleLoadData");
  if (status == GLLMK_OK) status = detect_wgmma(dev);
  for (int id = 0; id < CK_COUNT && status == GLLMK_OK; id++) {
    if (is_mma_kernel(id) && dev->sm < 80) continue;
    CUresult r = cu.cuModuleGetFunction(&dev->kernels[id], dev->module, kernel_names[id]);
    if (r != CUDA_SUCCESS)
      return cuda_host->fail(GLLMK_ERR_BACKEND, "cuda: kernel %s: %s (%s)", kernel_names[id], cuda_error_name(r),
                             cuda_error_text(r));
    const int smem = kernel_smem_limit(dev, id);
    if (smem > 48 * 1024 && smem <= dev->smem_optin)
      status = cuda_check(cu.cuFuncSetAttribute(dev->kernels[id], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                          "cuFuncSetAttribute");
    /* two blocks a multiprocessor, each with its share of the ring */
    if (status == GLLMK_OK && smem && id >= CK_matmul_skinny_wgmma_f16_m32 &&
        id <= CK_matmul_skinny_wgmma_fused_bf16_m32)
      status = cuda_check(cu.cuFuncSetAttribute(dev->kernels[id], CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, 100),
                          "cuFuncSetAttribute");
  }
  return status;
}

/* The zeroed arrival counters, and on sm_80+ matmul_skinny's partial tiles
 * (64 rows at most, GK_MATMUL_SKINNY_SLOT_FLOATS). */
static gllmk_status create_split_buffers(gllmk_plugin_device *dev) {
  gllmk_status status = cuda_check(cu.cuMemAlloc(&dev->arrivals, GK_ARRIVAL_COUNTERS * 4), "cuMemAlloc (arrival counters)");
  if (status == GLLMK_OK)
    status = cuda_check(cu.cuMemsetD8Async(dev->arrivals, 0, GK_ARRIVAL_COUNTERS * 4, dev->stream), "cuMemsetD8Async");
  if (status != GLLMK_OK || dev->sm < 80) return status;
  const size_t tiles = 2u * CUDA_SKINNY_BLOCKS_PER_SM * (size_t)dev->multiprocessors;
  return cuda_check(cu.cuMemAlloc(&dev->skinny_partial, tiles * GK_MATMUL_SKINNY_SLOT_FLOATS(64) * 4),
                    "cuMemAlloc (matmul partial tiles)");
}

static gllmk_status create_resources(gllmk_plugin_device *dev, void *queue) {
  gllmk_status status = GLLMK_OK;
  dev->owns_stream = queue == NULL;
  if (queue) dev->stream = (CUstream)queue;
  else status = cuda_check(cu.cuStreamCreate(&dev->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  void *word = NULL;
  if (status == GLLMK_OK)
    status = cuda_check(cu.cuMemHostAlloc(&word, sizeof(uint32_t), CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc");
  if (status == GLLMK_OK) {
    dev->error_host = word;
    *dev->error_host = 0;
    status = cuda_check(cu.cuMemHostGetDevicePointer(&dev->error_device, word, 0), "cuMemHostGetDevicePointer");
  }
  for (int i = 0; i < 2 && status == GLLMK_OK; i++) {
    void *buffer = NULL;
    status = cuda_check(cu.cuMemHostAlloc(&buffer, CUDA_STAGING_BYTES, 0), "cuMemHostAlloc (staging)");
    dev->staging[i] = buffer;
    if (status == GLLMK_OK)
      status = cuda_check(cu.cuEventCreate(&dev->staging_done[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }
  if (status == GLLMK_OK) status = load_kernels(dev);
  if (status == GLLMK_OK) status = create_split_buffers(dev);
  return status;
}

/* Frees what create_resources made (any part of it). */
static void destroy_resources(gllmk_plugin_device *dev) {
  if (dev->stream) cu.cuStreamSynchronize(dev->stream);
  cuda_graph_close(dev);
  if (dev->module) cu.cuModuleUnload(dev->module);
  if (dev->scratch) cu.cuMemFree(dev->scratch);
  if (dev->skinny_partial) cu.cuMemFree(dev->skinny_partial);
  if (dev->arrivals) cu.cuMemFree(dev->arrivals);
  for (int i = 0; i < dev->retired_count; i++) cu.cuMemFree(dev->retired[i]);
  for (int i = 0; i < 2; i++) {
    if (dev->staging_done[i]) cu.cuEventDestroy(dev->staging_done[i]);
    if (dev->staging[i]) cu.cuMemFreeHost(dev->staging[i]);
  }
  if (dev->error_host) cu.cuMemFreeHost((void *)dev->error_host);
  if (dev->stream && dev->owns_stream) cu.cuStreamDestroy(dev->stream);
}

static int device_attribute(CUdevice device, int attribute) {
  int value = 0;
  cu.cuDeviceGetAttribute(&value, attribute, device);
  return value;
}

gllmk_status cuda_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out) {
  const uint32_t index = options->device_index;
  if (index >= (uint32_t)cuda_driver.count)
    return cuda_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "cuda: no device %u (%d found)", index, cuda_driver.count);
  gllmk_plugin_device *dev = calloc(1, sizeof *dev);
  if (!dev) return cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  dev->device = cuda_driver.devices[index];
  dev->ordinal = (int)index;
  dev->sm = cuda_driver.sm[index];
  dev->multiprocessors = device_attribute(dev->device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  dev->smem_optin = device_attribute(dev->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  dev->smem_per_sm = device_attribute(dev->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  /* GLLMK_CUDA_PDL=0 turns it off, to measure what it gives. */
  const char *pdl = getenv("GLLMK_CUDA_PDL");
  dev->programmatic = dev->sm >= 90 && cu.cuLaunchKernelEx && !(pdl && strcmp(pdl, "0") == 0);
  gllmk_status status =
      cuda_check(cu.cuDevicePrimaryCtxRetain(&dev->context, dev->device), "cuDevicePrimaryCtxRetain");
  if (status != GLLMK_OK) {
    free(dev);
    return status;
  }
  status = cuda_enter(dev);
  if (status == GLLMK_OK) {
    status = create_resources(dev, options->struct_size > offsetof(gllmk_plugin_open_options, queue)
                                       ? options->queue : NULL);
    if (status != GLLMK_OK) destroy_resources(dev);
    cuda_leave(dev);
  }
  if (status != GLLMK_OK) {
    cu.cuDevicePrimaryCtxRelease(dev->device);
    free(dev);
    return status;
  }
  *out = dev;
  return GLLMK_OK;
}

void cuda_close(gllmk_plugin_device *dev) {
  if (!dev) return;
  if (cuda_enter(dev) == GLLMK_OK) {
    destroy_resources(dev);
    cuda_leave(dev);
  }
  cu.cuDevicePrimaryCtxRelease(dev->device);
  free(dev);
}

/* Waits for the stream; then reports (and clears) what kernels flagged. */
gllmk_status cuda_synchronize(gllmk_plugin_device *dev) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuStreamSynchronize(dev->stream), "cuStreamSynchronize");
  cuda_leave(dev);
  if (status != GLLMK_OK) return status;
  const uint32_t raised = *dev->error_host;
  if (!raised) return GLLMK_OK;
  *dev->error_host = 0;
  if (raised & GK_ERROR_EMBEDDING)
    return cuda_host->fail(GLLMK_ERR_OUT_OF_RANGE, "gllmk_embedding: a token id was outside [0, vocab)");
  if (raised & GK_ERROR_COLLECTIVE)
    return cuda_host->fail(GLLMK_ERR_BACKEND,
                           "gllmk_all_reduce: a rank waited 20 s for the other ranks' part and gave up (was every "
                           "rank's recording replayed?); the sum is wrong and the communicator must be freed");
  if (raised & GK_ERROR_KV_APPEND)
    return cuda_host->fail(GLLMK_ERR_OUT_OF_RANGE,
                           "gllmk_kv_append (or gllmk_matmul's kv_slots): a slot was past the end of the cache");
  return cuda_host->fail(GLLMK_ERR_OUT_OF_RANGE,
                         "gllmk_paged_attention: a block table entry, q_starts or seq_lens was out of range");
}
