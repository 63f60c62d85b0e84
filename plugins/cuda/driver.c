/*
 * driver.c - the lowest layer of the cuda backend: loads libcuda.so.1 into
 * the function table `cu`, lists the usable devices (probe), describes them
 * (device info, the embedded fatbin's images), and turns driver errors into
 * gllmk statuses (cuda_check). It calls nothing else of the plugin but the
 * fatbin's description (fatbin.c).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "fatbin.h"
#include "internal.h"

#define CUDA_MIN_SM 75 /* the oldest architecture the fatbin has code for */

cuda_api cu;
const gllmk_plugin_host *cuda_host;

/* What probe found; read-only afterwards. */
cuda_driver_state cuda_driver;

/* ------------------------------------------------------------ errors */

const char *cuda_error_name(CUresult result) {
  const char *name = NULL;
  if (!cu.cuGetErrorName || cu.cuGetErrorName(result, &name) != CUDA_SUCCESS || !name) return "CUDA_ERROR_UNKNOWN";
  return name;
}

const char *cuda_error_text(CUresult result) {
  const char *text = NULL;
  if (!cu.cuGetErrorString || cu.cuGetErrorString(result, &text) != CUDA_SUCCESS || !text) return "no description";
  return text;
}

/* Same wording as cuda_check, into a probe reason. */
static void describe_error(char *reason, size_t size, const char *what, CUresult result) {
  snprintf(reason, size, "%s: %s (%s)", what, cuda_error_name(result), cuda_error_text(result));
}

gllmk_status cuda_check(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS) return GLLMK_OK;
  const gllmk_status status = result == 2 /* CUDA_ERROR_OUT_OF_MEMORY */ ? GLLMK_ERR_OUT_OF_MEMORY : GLLMK_ERR_BACKEND;
  return cuda_host->fail(status, "cuda: %s: %s (%s)", what, cuda_error_name(result), cuda_error_text(result));
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
  if (cuda_driver.library) dlclose(cuda_driver.library);
  memset(&cuda_driver, 0, sizeof cuda_driver);
  memset(&cu, 0, sizeof cu);
}

/* Loads the driver and lists the usable devices; on none, says why. */
static void load_driver(char *reason, size_t reason_size) {
  dlerror();
  cuda_driver.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda_driver.library) {
    const char *why = dlerror();
    snprintf(reason, reason_size, "%s", why ? why : "libcuda.so.1: cannot be loaded");
    return;
  }
  const char *missing = resolve_symbols(cuda_driver.library);
  if (missing) {
    snprintf(reason, reason_size, "libcuda.so.1 lacks %s (driver too old)", missing);
    unload_driver();
    return;
  }
  CUresult r = cu.cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS) r = cu.cuDriverGetVersion(&cuda_driver.driver_version);
  if (r == CUDA_SUCCESS) r = cu.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    describe_error(reason, reason_size, "cuInit", r);
    unload_driver();
    return;
  }
  int too_old = 0;
  for (int i = 0; i < count && cuda_driver.count < CUDA_MAX_DEVICES; i++) {
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
    cuda_driver.devices[cuda_driver.count] = device;
    cuda_driver.ordinals[cuda_driver.count] = i;
    cuda_driver.sm[cuda_driver.count] = 10 * major + minor;
    cuda_driver.count++;
  }
  if (cuda_driver.count == 0) {
    if (too_old)
      snprintf(reason, reason_size, "%d CUDA device(s), all older than sm_%d", too_old, CUDA_MIN_SM);
    else
      snprintf(reason, reason_size, "the CUDA driver reports no device");
  }
}

/* The driver is loaded and its devices listed once per load of the plugin,
 * under a lock, and the reason for no device is kept: ops of open contexts
 * read `cu`, `cuda_driver` and cuda_host without a lock while other threads
 * create contexts and so probe again (issue 20), so nothing they read is
 * written after the first probe. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed;
static char probe_reason[512];

gllmk_status cuda_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                        size_t reason_size) {
  pthread_mutex_lock(&probe_lock);
  if (!probed) {
    cuda_host = host;
    load_driver(probe_reason, sizeof probe_reason);
    probed = 1;
  }
  *out_count = (uint32_t)cuda_driver.count;
  if (reason_size) snprintf(reason, reason_size, "%s", cuda_driver.count ? "" : probe_reason);
  pthread_mutex_unlock(&probe_lock);
  return GLLMK_OK;
}

/* ------------------------------------------------------- device info */

static void format_uuid(char *text, size_t size, const CUuuid *uuid) {
  const unsigned char *b = uuid->bytes;
  snprintf(text, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

gllmk_status cuda_device_info(uint32_t index, gllmk_device_info *info) {
  if (index >= (uint32_t)cuda_driver.count)
    return cuda_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "cuda: no device %u", index);
  const CUdevice device = cuda_driver.devices[index];
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
  snprintf(info->arch, sizeof info->arch, "sm_%d", cuda_driver.sm[index]);
  snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d", cuda_driver.driver_version / 1000,
           cuda_driver.driver_version % 1000 / 10);
  format_uuid(info->uuid, sizeof info->uuid, &uuid);
  info->memory_bytes = memory;
  info->compute_units = (uint32_t)multiprocessors;
  return GLLMK_OK;
}

void cuda_describe(char *text, size_t size) {
  if (size == 0) return;
  size_t used = cuda_fatbin_describe(text, size);
  for (int i = 0; i < cuda_driver.count && used + 1 < size; i++) {
    char name[128] = "";
    cu.cuDeviceGetName(name, (int)sizeof name, cuda_driver.devices[i]);
    int n = snprintf(text + used, size - used, "; device %d (%s, sm_%d) runs ", i, name, cuda_driver.sm[i]);
    if (n < 0 || (size_t)n >= size - used) break;
    used += (size_t)n;
    used += cuda_fatbin_choice(cuda_driver.sm[i], text + used, size - used);
  }
  if (used + 1 < size) cuda_nccl_describe(text + used, size - used);
}
