/*
 * pocl_plugin.c - gllmk-hsa-pocl.so, a TEST-ONLY plugin: the hsa plugin's
 * kernels and op code (its family files elementwise.c ... sample.c, and
 * memory.c, kernels.c) run through OpenCL on PoCL, the CPU OpenCL
 * implementation, so that the conformance suite checks the kernel math on
 * a machine without an AMD GPU. This file is its backend (backend.h) and
 * descriptor.
 *
 * It is built under build/tests/, never installed and never put into the
 * plugin directory; tests load it through context options' plugin_dir.
 *
 * PoCL builds the kernels from their source (embedded at build time, after
 * the C preprocessor has flattened the includes) with clBuildProgram. That
 * is run-time compilation, which the product forbids and this test plugin
 * alone does: PoCL 3.1 (LLVM 15) takes neither SPIR-V nor the LLVM 16
 * bitcode clang-16 writes (docs/hsa.md).
 *
 * Its device is flagged GLLMK_DEVICE_SOFTWARE, so it is used only when a
 * test forces the backend "hsa-pocl".
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backend.h"
#include "../ops.h"

/* The flattened kernel source, NUL-terminated (pocl_source.S). */
extern const char gk_pocl_source[];

const gllmk_plugin_host *gk_host;

#define POCL_PLATFORM "Portable Computing Language"
#define POCL_BUILD_OPTIONS "-cl-std=CL1.2"

struct gllmk_plugin_device {
  cl_device_id device; /* the PoCL CPU device, found by open */
  cl_context context;
  cl_command_queue queue;
  cl_program program;
  cl_kernel kernels[GK_KERNEL_COUNT];
  cl_mem error_word;
};

/* The ICD file through which the OpenCL loader finds PoCL. */
#define POCL_ICD_FILE "/etc/OpenCL/vendors/pocl.icd"

/* Probe must not touch OpenCL: PoCL starts worker threads when it is first
 * used, and the test programs fork (Check) after discovery; a child would
 * then wait forever for threads that did not survive the fork. So probe
 * only looks for PoCL's ICD file, and open, in the process that runs the
 * test, finds the device. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed;
static uint32_t probe_count;

/* The answer is found once per load of the plugin: ops of open devices read
 * gk_host without a lock while other threads create contexts and so probe
 * again (issue 20), so it is not written after the first probe. */
static gllmk_status pocl_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                               size_t reason_size) {
  pthread_mutex_lock(&probe_lock);
  if (!probed) {
    gk_host = host;
    probe_count = access(POCL_ICD_FILE, R_OK) == 0 ? 1 : 0;
    probed = 1;
  }
  *out_count = probe_count;
  pthread_mutex_unlock(&probe_lock);
  if (*out_count == 0)
    snprintf(reason, reason_size, "%s not found (apt-get install pocl-opencl-icd)", POCL_ICD_FILE);
  return GLLMK_OK;
}

static gllmk_status pocl_device_info(uint32_t index, gllmk_device_info *out) {
  if (index != 0) return gk_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "hsa-pocl: no device %u", index);
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "PoCL CPU device (OpenCL)");
  snprintf(out->arch, sizeof out->arch, "opencl-cpu");
  snprintf(out->driver, sizeof out->driver, "PoCL through the OpenCL ICD loader");
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  out->memory_bytes = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : 0;
  out->compute_units = cores > 0 ? (uint32_t)cores : 1;
  out->flags = GLLMK_DEVICE_SOFTWARE | GLLMK_DEVICE_UNIFIED_MEMORY;
  return GLLMK_OK;
}

/* The first CPU device of the PoCL platform, into *out (per device: a
 * global written by every open would race with other devices' use). */
static gllmk_status find_pocl_device(cl_device_id *out) {
  cl_platform_id platforms[16];
  cl_uint count = 0;
  cl_int err = clGetPlatformIDs(16, platforms, &count);
  if (err != CL_SUCCESS || count == 0)
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: no OpenCL platform (clGetPlatformIDs: %d)", err);
  for (cl_uint i = 0; i < count && i < 16; i++) {
    char name[256] = "";
    clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof name, name, NULL);
    cl_uint devices = 0;
    if (strstr(name, POCL_PLATFORM) != NULL &&
        clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_CPU, 1, out, &devices) == CL_SUCCESS &&
        devices > 0)
      return GLLMK_OK;
  }
  return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: no PoCL CPU device among %u OpenCL platform(s)",
                       count);
}

static void pocl_describe(char *text, size_t text_size) {
  snprintf(text, text_size,
           "TEST ONLY: the hsa plugin's kernels built from source by PoCL and run on the CPU "
           "through OpenCL; never installed");
}

static void release_device(gllmk_plugin_device *d) {
  for (int i = 0; i < GK_KERNEL_COUNT; i++)
    if (d->kernels[i]) clReleaseKernel(d->kernels[i]);
  if (d->error_word) clReleaseMemObject(d->error_word);
  if (d->program) clReleaseProgram(d->program);
  if (d->queue) clReleaseCommandQueue(d->queue);
  if (d->context) clReleaseContext(d->context);
  free(d);
}

static gllmk_status build_program(gllmk_plugin_device *d) {
  cl_int err;
  const char *source = gk_pocl_source;
  d->program = clCreateProgramWithSource(d->context, 1, &source, NULL, &err);
  if (err != CL_SUCCESS)
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: clCreateProgramWithSource: %d", err);
  err = clBuildProgram(d->program, 1, &d->device, POCL_BUILD_OPTIONS, NULL, NULL);
  if (err != CL_SUCCESS) {
    char log[2048] = "";
    clGetProgramBuildInfo(d->program, d->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: clBuildProgram: %d: %s", err, log);
  }
  for (int i = 0; i < GK_KERNEL_COUNT; i++) {
    d->kernels[i] = clCreateKernel(d->program, gk_kernels[i].symbol, &err);
    if (err != CL_SUCCESS)
      return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: clCreateKernel(%s): %d",
                           gk_kernels[i].symbol, err);
  }
  return GLLMK_OK;
}

static gllmk_status pocl_open(const gllmk_plugin_open_options *options,
                              gllmk_plugin_device **out_device) {
  if (options->device_index != 0)
    return gk_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "hsa-pocl: no device %u",
                         options->device_index);
  cl_device_id device;
  gllmk_status status = find_pocl_device(&device);
  if (status != GLLMK_OK) return status;
  gllmk_plugin_device *d = calloc(1, sizeof *d);
  if (d == NULL) return gk_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "hsa-pocl: out of host memory");
  d->device = device;
  cl_int err;
  d->context = clCreateContext(NULL, 1, &d->device, NULL, NULL, &err);
  if (err == CL_SUCCESS) d->queue = clCreateCommandQueue(d->context, d->device, 0, &err);
  if (err == CL_SUCCESS)
    d->error_word = clCreateBuffer(d->context, CL_MEM_READ_WRITE, GK_ERROR_WORDS * 4, NULL, &err);
  if (err != CL_SUCCESS) {
    release_device(d);
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: cannot create a context and queue: %d",
                         err);
  }
  static const uint32_t zero[GK_ERROR_WORDS];
  err = clEnqueueWriteBuffer(d->queue, d->error_word, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL);
  status = err == CL_SUCCESS ? build_program(d)
                                          : gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: write: %d", err);
  if (status != GLLMK_OK) {
    release_device(d);
    return status;
  }
  *out_device = d;
  return GLLMK_OK;
}

static void pocl_close(gllmk_plugin_device *d) {
  clFinish(d->queue);
  release_device(d);
}

static gllmk_status pocl_synchronize(gllmk_plugin_device *d) {
  uint32_t words[GK_ERROR_WORDS];
  cl_int err = clEnqueueReadBuffer(d->queue, d->error_word, CL_TRUE, 0, sizeof words, words, 0,
                                   NULL, NULL);
  if (err != CL_SUCCESS) return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: reading the error word: %d", err);
  if (words[0] == 0) return GLLMK_OK;
  char message[256];
  gk_describe_error(words, message, sizeof message);
  static const uint32_t zero[GK_ERROR_WORDS];
  err = clEnqueueWriteBuffer(d->queue, d->error_word, CL_TRUE, 0, sizeof zero, zero, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: cannot clear the error word: %d", err);
  return gk_host->fail(GLLMK_ERR_OUT_OF_RANGE, "%s", message);
}

static cl_mem as_cl(gllmk_plugin_memory *memory) { return (cl_mem)(void *)memory; }

static gllmk_status pocl_mem_alloc(gllmk_plugin_device *d, uint64_t size,
                                   gllmk_plugin_memory **out_memory) {
  cl_int err;
  cl_mem buffer = clCreateBuffer(d->context, CL_MEM_READ_WRITE, (size_t)size, NULL, &err);
  if (err != CL_SUCCESS)
    return gk_host->fail(err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY ||
                                 err == CL_INVALID_BUFFER_SIZE
                             ? GLLMK_ERR_OUT_OF_MEMORY
                             : GLLMK_ERR_BACKEND,
                         "hsa-pocl: clCreateBuffer(%llu bytes): %d", (unsigned long long)size, err);
  *out_memory = (gllmk_plugin_memory *)(void *)buffer;
  return GLLMK_OK;
}

static void pocl_mem_free(gllmk_plugin_device *d, gllmk_plugin_memory *memory) {
  clFinish(d->queue);
  clReleaseMemObject(as_cl(memory));
}

static gllmk_status pocl_mem_write(gllmk_plugin_device *d, gllmk_plugin_memory *dst,
                                   uint64_t offset, const void *src, uint64_t size) {
  cl_int err = clEnqueueWriteBuffer(d->queue, as_cl(dst), CL_TRUE, (size_t)offset, (size_t)size,
                                    src, 0, NULL, NULL);
  if (err != CL_SUCCESS) return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: write: %d", err);
  return GLLMK_OK;
}

static gllmk_status pocl_mem_read(gllmk_plugin_device *d, gllmk_plugin_memory *src,
                                  uint64_t offset, void *dst, uint64_t size) {
  cl_int err = clEnqueueReadBuffer(d->queue, as_cl(src), CL_TRUE, (size_t)offset, (size_t)size,
                                   dst, 0, NULL, NULL);
  if (err != CL_SUCCESS) return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: read: %d", err);
  return GLLMK_OK;
}

gllmk_plugin_memory *gk_backend_error_memory(gllmk_plugin_device *d) {
  return (gllmk_plugin_memory *)(void *)d->error_word;
}

gllmk_status gk_backend_launch(gllmk_plugin_device *d, const gk_launch *launch) {
  const gk_kernel_info *info = &gk_kernels[launch->kernel];
  cl_kernel kernel = d->kernels[launch->kernel];
  cl_int err = CL_SUCCESS;
  for (uint32_t i = 0; i < info->buffers && err == CL_SUCCESS; i++) {
    cl_mem buffer = as_cl(launch->buffers[i]);
    err = clSetKernelArg(kernel, i, sizeof buffer, buffer ? &buffer : NULL);
  }
  if (err == CL_SUCCESS) err = clSetKernelArg(kernel, info->buffers, info->params_size, launch->params);
  size_t global[2] = {(size_t)launch->groups_x * info->workgroup_size, launch->groups_y};
  size_t local[2] = {info->workgroup_size, 1};
  if (err == CL_SUCCESS)
    err = clEnqueueNDRangeKernel(d->queue, kernel, 2, NULL, global, local, 0, NULL, NULL);
  if (err != CL_SUCCESS)
    return gk_host->fail(GLLMK_ERR_BACKEND, "hsa-pocl: launching %s: %d", info->symbol, err);
  return GLLMK_OK;
}

static const gllmk_plugin_ops gk_ops = {
#define GLLMK_OP(name) .name = gk_##name,
#include "gllmk/gllmk_ops.def"
};

static const gllmk_plugin pocl_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = "hsa-pocl",
    .kind = GLLMK_BACKEND_OTHER,
    .version = "0.1.0",
    .probe = pocl_probe,
    .device_info = pocl_device_info,
    .describe = pocl_describe,
    .open = pocl_open,
    .close = pocl_close,
    .synchronize = pocl_synchronize,
    .mem_alloc = pocl_mem_alloc,
    .mem_free = pocl_mem_free,
    .mem_write = pocl_mem_write,
    .mem_read = pocl_mem_read,
    .mem_copy = gk_mem_copy,
    .mem_fill = gk_mem_fill,
    .ops = &gk_ops,
    .ops_size = sizeof gk_ops,
    .supports = gk_supports,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &pocl_plugin; }
