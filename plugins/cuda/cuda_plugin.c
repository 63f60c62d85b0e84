/*
 * cuda_plugin.c - the cuda backend's descriptor: driver loading, probe,
 * device info, contexts, memory and synchronization. Ops are in cuda_ops.c,
 * the embedded fatbin's description in cuda_fatbin.c.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fatbin.h"
#include "cuda_internal.h"

#define CUDA_MAX_DEVICES 64
#define CUDA_MIN_SM 75 /* the oldest architecture the fatbin has code for */

cuda_api cu;
const gllmk_plugin_host *cuda_host;

/* What probe found; read-only afterwards. */
static struct {
  void *library;
  int driver_version;
  int count;
  CUdevice devices[CUDA_MAX_DEVICES];
  int sm[CUDA_MAX_DEVICES];
} driver;

/* ------------------------------------------------------------ errors */

static const char *error_name(CUresult result) {
  const char *name = NULL;
  if (!cu.cuGetErrorName || cu.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) return "CUDA_ERROR_UNKNOWN";
  return name;
}

static const char *error_text(CUresult result) {
  const char *text = NULL;
  if (!cu.cuGetErrorString || cu.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text) return "no description";
  return text;
}

/* Same wording as cuda_check, into a probe reason. */
static void describe_error(char *reason, size_t size, const char *what, CUresult result) {
  snprintf(reason, size, "%s: %s (%s)", what, error_name(result), error_text(result));
}

gllmk_status cuda_check(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS) return GLLMK_OK;
  const gllmk_status status = result == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? GLLMK_ERR_OUT_OF_MEMORY : GLLMK_ERR_BACKEND;
  return cuda_host->fail(status, "cuda: %s: %s (%s)", what, error_name(result), error_text(result));
}

/* ----------------------------------------------------------- loading */

/* Fills `cu` through cuGetProcAddress_v2 (CUDA 12+, which maps each name to
 * the variant of GLLMK_CUDA_ABI_VERSION), else through dlsym with the names
 * of the same ABI. Returns the first symbol missing, or NULL. */
static const char *resolve_symbols(void *library) {
  cu_get_proc_address_v2_fn get_proc = (cu_get_proc_address_v2_fn)dlsym(library, "cuGetProcAddress_v2");
#define CUDA_LOOKUP(name, legacy, required)                                                          \
  {                                                                                                 \
    void *fn = NULL;                                                                                \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                    \
    if (!get_proc || get_proc(#name, &fn, GLLMK_CUDA_ABI_VERSION, 0, &found) != CUDA_SUCCESS ||     \
        found != CU_GET_PROC_ADDRESS_SUCCESS)                                                       \
      fn = dlsym(library, legacy);                                                                  \
    if (!fn && (required)) return legacy;                                                           \
    memcpy(&cu.name, &fn, sizeof fn);                                                               \
  }
#define CUDA_SYMBOL(name, legacy, params) CUDA_LOOKUP(name, legacy, 1)
#define CUDA_OPTIONAL_SYMBOL(name, legacy, params) CUDA_LOOKUP(name, legacy, 0)
#include "cuda_symbols.def"
#undef CUDA_LOOKUP
  return NULL;
}

static void unload_driver(void) {
  if (driver.library) dlclose(driver.library);
  memset(&driver, 0, sizeof driver);
  memset(&cu, 0, sizeof cu);
}

/* Loads the driver and lists the usable devices; on none, says why. */
static void load_driver(char *reason, size_t reason_size) {
  dlerror();
  driver.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver.library) {
    const char *why = dlerror();
    snprintf(reason, reason_size, "%s", why ? why : "libcuda.so.1: cannot be loaded");
    return;
  }
  const char *missing = resolve_symbols(driver.library);
  if (missing) {
    snprintf(reason, reason_size, "libcuda.so.1 lacks %s (driver too old)", missing);
    unload_driver();
    return;
  }
  CUresult r = cu.cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = cu.cuDriverGetVersion(&driver.driver_version);
  if (r == CUDA_SUCCESS) r = cu.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    describe_error(reason, reason_size, "cuInit", r);
    unload_driver();
    return;
  }
  int too_old = 0;
  for (int i = 0; i < count && driver.count < CUDA_MAX_DEVICES; i++) {
    CUdevice device;
    int major = 0, minor = 0;
    if (cu.cuDeviceGet(&device, i) != CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) != CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) != CUDA_SUCCESS)
      continue;
    if (10 * major + minor < CUDA_MIN_SM) {
      too_old++;
      continue;
    }
    driver.devices[driver.count] = device;
    driver.sm[driver.count] = 10 * major + minor;
    driver.count++;
  }
  if (driver.count == 0) {
    if (too_old)
      snprintf(reason, reason_size, "%d CUDA device(s), all older than sm_%d", too_old, CUDA_MIN_SM);
    else
      snprintf(reason, reason_size, "the CUDA driver reports no device");
  }
}

/* The driver is loaded and its devices listed once per load of the plugin,
 * under a lock, and the reason for no device is kept: ops of open contexts
 * read `cu`, `driver` and cuda_host without a lock while other threads
 * create contexts and so probe again (issue 20), so nothing they read is
 * written after the first probe. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed;
static char probe_reason[512];

static gllmk_status cuda_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                               size_t reason_size) {
  pthread_mutex_lock(&probe_lock);
  if (!probed) {
    cuda_host = host;
    load_driver(probe_reason, sizeof probe_reason);
    probed = 1;
  }
  *out_count = (uint32_t)driver.count;
  if (reason_size) snprintf(reason, reason_size, "%s", driver.count ? "" : probe_reason);
  pthread_mutex_unlock(&probe_lock);
  return GLLMK_OK;
}

/* ------------------------------------------------------- device info */

static void format_uuid(char *text, size_t size, const CUuuid *uuid) {
  const unsigned char *b = uuid->bytes;
  snprintf(text, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static gllmk_status cuda_device_info(uint32_t index, gllmk_device_info *info) {
  if (index >= (uint32_t)driver.count)
    return cuda_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "cuda: no device %u", index);
  const CUdevice device = driver.devices[index];
  memset(info, 0, sizeof *info);
  gllmk_status status = cuda_check(cu.cuDeviceGetName(info->name, (int)sizeof info->name, device), "cuDeviceGetName");
  size_t memory = 0;
  int multiprocessors = 0;
  CUuuid uuid;
  if (status == GLLMK_OK) status = cuda_check(cu.cuDeviceTotalMem(&memory, device), "cuDeviceTotalMem");
  if (status == GLLMK_OK)
    status = cuda_check(cu.cuDeviceGetAttribute(&multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
                        "cuDeviceGetAttribute");
  if (status == GLLMK_OK) status = cuda_check(cu.cuDeviceGetUuid(&uuid, device), "cuDeviceGetUuid");
  if (status != GLLMK_OK) return status;
  snprintf(info->arch, sizeof info->arch, "sm_%d", driver.sm[index]);
  snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d", driver.driver_version / 1000,
           driver.driver_version % 1000 / 10);
  format_uuid(info->uuid, sizeof info->uuid, &uuid);
  info->memory_bytes = memory;
  info->compute_units = (uint32_t)multiprocessors;
  return GLLMK_OK;
}

static void cuda_describe(char *text, size_t size) {
  if (size == 0) return;
  size_t used = cuda_fatbin_describe(text, size);
  for (int i = 0; i < driver.count && used + 1 < size; i++) {
    char name[128] = "";
    cu.cuDeviceGetName(name, (int)sizeof name, driver.devices[i]);
    int n = snprintf(text + used, size - used, "; device %d (%s, sm_%d) runs ", i, name, driver.sm[i]);
    if (n < 0 || (size_t)n >= size - used) break;
    used += (size_t)n;
    used += cuda_fatbin_choice(driver.sm[i], text + used, size - used);
  }
}

/* ------------------------------------------------------------ contexts */

gllmk_status cuda_enter(gllmk_plugin_device *dev) {
  return cuda_check(cu.cuCtxPushCurrent(dev->context), "cuCtxPushCurrent");
}

void cuda_leave(gllmk_plugin_device *dev) {
  CUcontext previous;
  (void)dev;
  cu.cuCtxPopCurrent(&previous);
}

gllmk_status cuda_launch(gllmk_plugin_device *dev, enum cuda_kernel_id kernel, uint32_t gx, uint32_t gy,
                         uint32_t gz, uint32_t threads, uint32_t smem, void *params) {
  if (dev->planning) return GLLMK_OK;
  void *args[1] = {params};
  return cuda_check(cu.cuLaunchKernel(dev->kernels[kernel], gx, gy, gz, threads, 1, 1, smem, dev->stream, args, NULL),
                    "cuLaunchKernel");
}

gllmk_status cuda_scratch(gllmk_plugin_device *dev, size_t bytes, CUdeviceptr *out) {
  if (dev->planning) {
    *out = 0;
    return GLLMK_OK;
  }
  if (dev->scratch_size < bytes) {
    if (dev->capturing)
      return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: attention scratch cannot grow while recording");
    if (dev->scratch && dev->recordings && dev->retired_count == (int)(sizeof dev->retired / sizeof dev->retired[0]))
      return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: attention scratch outgrown too often while recordings live");
    /* Queued work may still read the old buffer. */
    gllmk_status status = cuda_check(cu.cuStreamSynchronize(dev->stream), "cuStreamSynchronize");
    if (status != GLLMK_OK) return status;
    if (dev->scratch && dev->recordings) dev->retired[dev->retired_count++] = dev->scratch;
    else if (dev->scratch) cu.cuMemFree(dev->scratch);
    dev->scratch = 0;
    dev->scratch_size = 0;
    const size_t size = bytes + bytes / 2;
    status = cuda_check(cu.cuMemAlloc(&dev->scratch, size), "cuMemAlloc (attention scratch)");
    if (status != GLLMK_OK) return status;
    dev->scratch_size = size;
  }
  *out = dev->scratch;
  return GLLMK_OK;
}

static const char *const kernel_names[CK_COUNT] = {
#define CUDA_KERNEL(name) "gk_" #name,
#include "cuda_kernels.def"
};

/* Dynamic shared memory a kernel may need beyond the default 48 KiB. */
static int kernel_smem_limit(const gllmk_plugin_device *dev, int id) {
  if (id == CK_matmul_wgmma_f16 || id == CK_matmul_wgmma_bf16) return dev->wgmma ? GK_MATMUL_WGMMA_SMEM : 0;
  if (id >= CK_matmul_mma_f16_nk && id <= CK_matmul_mma_bf16_kn) return GK_MATMUL_MMA_SMEM;
  if (id >= CK_attention_wgmma_f16_d64 && id <= CK_attention_wgmma_bf16_d128)
    return dev->wgmma ? GK_ATTENTION_WGMMA_SMEM(64 << ((id - CK_attention_wgmma_f16_d64) / 2),
                                                (id - CK_attention_wgmma_f16_d64) % 2)
                      : 0;
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
#include "cuda_kernels.def"
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
      return cuda_host->fail(GLLMK_ERR_BACKEND, "cuda: kernel %s: %s (%s)", kernel_names[id], error_name(r),
                             error_text(r));
    const int smem = kernel_smem_limit(dev, id);
    if (smem > 48 * 1024 && smem <= dev->smem_optin)
      status = cuda_check(cu.cuFuncSetAttribute(dev->kernels[id], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                          "cuFuncSetAttribute");
  }
  return status;
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
  return status;
}

/* Frees what create_resources made (any part of it). */
static void destroy_resources(gllmk_plugin_device *dev) {
  if (dev->stream) cu.cuStreamSynchronize(dev->stream);
  cuda_graph_close(dev);
  if (dev->module) cu.cuModuleUnload(dev->module);
  if (dev->scratch) cu.cuMemFree(dev->scratch);
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

static gllmk_status cuda_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out) {
  const uint32_t index = options->device_index;
  if (index >= (uint32_t)driver.count)
    return cuda_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "cuda: no device %u (%d found)", index, driver.count);
  gllmk_plugin_device *dev = calloc(1, sizeof *dev);
  if (!dev) return cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  dev->device = driver.devices[index];
  dev->ordinal = (int)index;
  dev->sm = driver.sm[index];
  dev->multiprocessors = device_attribute(dev->device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  dev->smem_optin = device_attribute(dev->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  dev->smem_per_sm = device_attribute(dev->device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
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

static void cuda_close(gllmk_plugin_device *dev) {
  if (!dev) return;
  if (cuda_enter(dev) == GLLMK_OK) {
    destroy_resources(dev);
    cuda_leave(dev);
  }
  cu.cuDevicePrimaryCtxRelease(dev->device);
  free(dev);
}

/* Waits for the stream; then reports (and clears) what kernels flagged. */
static gllmk_status cuda_synchronize(gllmk_plugin_device *dev) {
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
  if (raised & GK_ERROR_KV_APPEND)
    return cuda_host->fail(GLLMK_ERR_OUT_OF_RANGE, "gllmk_kv_append: a slot was past the end of the cache");
  return cuda_host->fail(GLLMK_ERR_OUT_OF_RANGE,
                         "gllmk_paged_attention: a block table entry, q_starts or seq_lens was out of range");
}

/* ------------------------------------------------------------- memory */

static gllmk_status cuda_mem_alloc(gllmk_plugin_device *dev, uint64_t size, gllmk_plugin_memory **out) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  gllmk_plugin_memory *memory = malloc(sizeof *memory);
  if (!memory) status = cuda_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
  CUdeviceptr pointer = 0;
  if (status == GLLMK_OK) status = cuda_check(cu.cuMemAlloc(&pointer, size), "cuMemAlloc");
  cuda_leave(dev);
  if (status != GLLMK_OK) {
    free(memory);
    return status;
  }
  *memory = (gllmk_plugin_memory){.address = pointer, .owned = 1};
  *out = memory;
  return GLLMK_OK;
}

static void cuda_mem_free(gllmk_plugin_device *dev, gllmk_plugin_memory *memory) {
  if (memory->owned && cuda_enter(dev) == GLLMK_OK) {
    cu.cuStreamSynchronize(dev->stream);
    cu.cuMemFree(cuda_memory_address(memory));
    cuda_leave(dev);
  }
  free(memory);
}

/* Copies through the pinned staging halves in turn, so the call returns as
 * soon as `src` has been copied out, while earlier work keeps running. */
static gllmk_status write_staged(gllmk_plugin_device *dev, CUdeviceptr dst, const unsigned char *src, uint64_t size) {
  gllmk_status status = GLLMK_OK;
  while (size > 0 && status == GLLMK_OK) {
    const size_t n = size < CUDA_STAGING_BYTES ? (size_t)size : CUDA_STAGING_BYTES;
    const int half = dev->staging_next;
    dev->staging_next ^= 1;
    status = cuda_check(cu.cuEventSynchronize(dev->staging_done[half]), "cuEventSynchronize");
    if (status != GLLMK_OK) break;
    memcpy(dev->staging[half], src, n);
    status = cuda_check(cu.cuMemcpyHtoDAsync(dst, dev->staging[half], n, dev->stream), "cuMemcpyHtoDAsync");
    if (status == GLLMK_OK)
      status = cuda_check(cu.cuEventRecord(dev->staging_done[half], dev->stream), "cuEventRecord");
    dst += n;
    src += n;
    size -= n;
  }
  return status;
}

static gllmk_status cuda_mem_write(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset,
                                   const void *src, uint64_t size) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = write_staged(dev, cuda_memory_address(dst) + offset, src, size);
  cuda_leave(dev);
  return status;
}

static gllmk_status cuda_mem_read(gllmk_plugin_device *dev, gllmk_plugin_memory *src, uint64_t offset, void *dst,
                                  uint64_t size) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuMemcpyDtoHAsync(dst, cuda_memory_address(src) + offset, size, dev->stream),
                      "cuMemcpyDtoHAsync");
  if (status == GLLMK_OK) status = cuda_check(cu.cuStreamSynchronize(dev->stream), "cuStreamSynchronize");
  cuda_leave(dev);
  return status;
}

static gllmk_status cuda_mem_copy(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                                  gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuMemcpyDtoDAsync(cuda_memory_address(dst) + dst_offset, cuda_memory_address(src) + src_offset,
                                           size, dev->stream),
                      "cuMemcpyDtoDAsync");
  cuda_leave(dev);
  return status;
}

static gllmk_status cuda_mem_fill(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset, uint64_t size,
                                  uint8_t value) {
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  status = cuda_check(cu.cuMemsetD8Async(cuda_memory_address(dst) + offset, value, size, dev->stream),
                      "cuMemsetD8Async");
  cuda_leave(dev);
  return status;
}

/* ---------------------------------------------------------- descriptor */

static const gllmk_plugin_ops cuda_ops = {
#define GLLMK_OP(name) .name = cuda_##name,
#include "gllmk/gllmk_ops.def"
};

static const gllmk_plugin cuda_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = "cuda",
    .kind = GLLMK_BACKEND_CUDA,
    .version = "0.1.0",
    .probe = cuda_probe,
    .device_info = cuda_device_info,
    .describe = cuda_describe,
    .open = cuda_open,
    .close = cuda_close,
    .synchronize = cuda_synchronize,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_write = cuda_mem_write,
    .mem_read = cuda_mem_read,
    .mem_copy = cuda_mem_copy,
    .mem_fill = cuda_mem_fill,
    .supports = cuda_supports,
    .mem_import = cuda_mem_import,
    .mem_address = cuda_mem_address,
    .record_begin = cuda_record_begin,
    .record_end = cuda_record_end,
    .record_replay = cuda_record_replay,
    .record_free = cuda_record_free,
    .mark = cuda_mark,
    .marks_read = cuda_marks_read,
    .ops = &cuda_ops,
    .ops_size = sizeof cuda_ops,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &cuda_plugin; }
