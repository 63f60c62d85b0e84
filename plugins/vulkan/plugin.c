/*
 * plugin.c - the vulkan plugin's entry point: its descriptor with the op
 * table and supports() (the only code above the op families: it names
 * their entry points, ops.h), and below them the loader of libvulkan.so.1,
 * probe, the device descriptions and vk_fail. The test-only variant
 * "vulkan-portable" (tests.mk) is this file compiled again.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

const gllmk_plugin_host *vk_host;
vk_instance_api vk_api;
VkInstance vk_instance;
atomic_int vk_devices_open;
vk_physical vk_physicals[VK_MAX_PHYSICAL];
uint32_t vk_physical_count;

static void *vk_library;
static pthread_mutex_t vk_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int vk_probed;
static int vk_pinned; /* vk_pin_plugin: loaded for the rest of the process */
static char vk_probe_reason[512];

/* Test builds only (plugins/vulkan/tests.mk): the plugin again as
 * "vulkan-portable", giving every device the portable shader form (16-bit
 * values in 32-bit words, reductions through shared memory), so that the
 * conformance suite runs that form on lavapipe too, which would get the
 * native one. */
#ifdef GLLMK_VK_TEST_PORTABLE
#define VK_PLUGIN_NAME "vulkan-portable"
#define VK_ALLOW_NATIVE 0
#else
#define VK_PLUGIN_NAME "vulkan"
#define VK_ALLOW_NATIVE 1
#endif

const char *vk_result_name(VkResult result) {
  switch (result) {
#define VK_RESULT_CASE(r) case r: return #r;
    VK_RESULT_CASE(VK_SUCCESS)
    VK_RESULT_CASE(VK_NOT_READY)
    VK_RESULT_CASE(VK_TIMEOUT)
    VK_RESULT_CASE(VK_INCOMPLETE)
    VK_RESULT_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    VK_RESULT_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VK_RESULT_CASE(VK_ERROR_INITIALIZATION_FAILED)
    VK_RESULT_CASE(VK_ERROR_DEVICE_LOST)
    VK_RESULT_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    VK_RESULT_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    VK_RESULT_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    VK_RESULT_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    VK_RESULT_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    VK_RESULT_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    VK_RESULT_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VK_RESULT_CASE(VK_ERROR_FRAGMENTED_POOL)
    VK_RESULT_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    VK_RESULT_CASE(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VK_RESULT_CASE(VK_ERROR_FRAGMENTATION)
    VK_RESULT_CASE(VK_ERROR_INVALID_SHADER_NV)
#undef VK_RESULT_CASE
    default: return "VkResult error";
  }
}

gllmk_status vk_fail(VkResult result, const char *what) {
  gllmk_status status = GLLMK_ERR_BACKEND;
  if (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY)
    status = GLLMK_ERR_OUT_OF_MEMORY;
  return vk_host->fail(status, "vulkan: %s: %s (%d)", what, vk_result_name(result), (int)result);
}

/* ----------------------------------------------------------------- loader */

static int vk_load_library(char *reason, size_t reason_size) {
  vk_library = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!vk_library) {
    const char *err = dlerror();
    snprintf(reason, reason_size, "%s", err ? err : "libvulkan.so.1: cannot be loaded");
    return 0;
  }
  /* dlsym returns void*; the Vulkan spec's loader interface is exactly this cast. */
  void *sym = dlsym(vk_library, "vkGetInstanceProcAddr");
  memcpy(&vk_api.vkGetInstanceProcAddr, &sym, sizeof sym);
  if (!vk_api.vkGetInstanceProcAddr) {
    snprintf(reason, reason_size, "libvulkan.so.1 has no vkGetInstanceProcAddr");
    return 0;
  }
#define VK_LOADER(n) vk_api.n = (PFN_##n)vk_api.vkGetInstanceProcAddr(NULL, #n);
#define VK_INSTANCE(n)
#define VK_INSTANCE_EXT(n)
#define VK_DEVICE(n)
#include "symbols.def"
  if (!vk_api.vkCreateInstance || !vk_api.vkEnumerateInstanceVersion) {
    snprintf(reason, reason_size, "the Vulkan loader is older than Vulkan 1.1");
    return 0;
  }
  return 1;
}

static int vk_create_instance(char *reason, size_t reason_size) {
  uint32_t version = 0;
  vk_api.vkEnumerateInstanceVersion(&version);
  if (version < VK_API_VERSION_1_2) {
    snprintf(reason, reason_size, "the Vulkan loader supports Vulkan %u.%u; gllmk needs 1.2",
             VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version));
    return 0;
  }
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "gllmk",
                           .pEngineName = "gllmk",
                           .apiVersion = VK_API_VERSION_1_2};
  VkInstanceCreateInfo info = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app};
  VkResult r = vk_api.vkCreateInstance(&info, NULL, &vk_instance);
  if (r != VK_SUCCESS) {
    snprintf(reason, reason_size, "vkCreateInstance: %s%s", vk_result_name(r),
             r == VK_ERROR_INCOMPATIBLE_DRIVER ? " (no Vulkan driver could be initialised)" : "");
    return 0;
  }
  int missing = 0;
#define VK_LOADER(n)
#define VK_INSTANCE(n) \
  missing |= !(vk_api.n = (PFN_##n)vk_api.vkGetInstanceProcAddr(vk_instance, #n));
#define VK_INSTANCE_EXT(n) vk_api.n = (PFN_##n)vk_api.vkGetInstanceProcAddr(vk_instance, #n);
#define VK_DEVICE(n)
#include "symbols.def"
  if (missing) {
    snprintf(reason, reason_size, "the Vulkan loader lacks Vulkan 1.2 instance functions");
    return 0;
  }
  return 1;
}

/* ------------------------------------------------------- physical devices */

static int vk_has_extension(VkPhysicalDevice pd, const char *name) {
  VkExtensionProperties props[512];
  uint32_t count = 512;
  VkResult r = vk_api.vkEnumerateDeviceExtensionProperties(pd, NULL, &count, props);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return 0;
  for (uint32_t i = 0; i < count; i++)
    if (strcmp(props[i].extensionName, name) == 0) return 1;
  return 0;
}

static void vk_format_uuid(const uint8_t *u, char *out, size_t size) {
  snprintf(out, size,
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
           u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
           u[15]);
}

/* Whether the device multiplies 16x16x16 F16 tiles into F32 per subgroup of
 * 32 through VK_NV_cooperative_matrix, with the shared memory of
 * matmul_coop.comp's tiles (what that kernel needs). */
static int vk_has_coopmat_nv(VkPhysicalDevice pd, const VkPhysicalDeviceLimits *limits,
                             const VkPhysicalDeviceVulkan12Features *f12,
                             const VkPhysicalDeviceSubgroupProperties *subgroup) {
  if (limits->maxComputeSharedMemorySize < VK_COOP_SHARED ||
      !vk_api.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV || !f12->shaderFloat16 ||
      !f12->vulkanMemoryModel || subgroup->subgroupSize != 32 ||
      !vk_has_extension(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME))
    return 0;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cm = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &cm};
  vk_api.vkGetPhysicalDeviceFeatures2(pd, &features);
  if (!cm.cooperativeMatrix) return 0;
  VkCooperativeMatrixPropertiesNV props[64];
  uint32_t count = 64;
  for (uint32_t i = 0; i < count; i++)
    props[i] = (VkCooperativeMatrixPropertiesNV){
        .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV};
  VkResult r = vk_api.vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(pd, &count, props);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return 0;
  for (uint32_t i = 0; i < count; i++) {
    const VkCooperativeMatrixPropertiesNV *c = &props[i];
    if (c->MSize == 16 && c->NSize == 16 && c->KSize == 16 &&
        c->AType == VK_COMPONENT_TYPE_FLOAT16_NV && c->BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        c->CType == VK_COMPONENT_TYPE_FLOAT32_NV && c->DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
        c->scope == VK_SCOPE_SUBGROUP_NV)
      return 1;
  }
  return 0;
}

/* Whether VK_KHR_cooperative_matrix lists 16x16x16 tiles of `type` with F32
 * accumulators per subgroup. */
static int vk_lists_khr_tile(VkPhysicalDevice pd, VkComponentTypeKHR type) {
  VkCooperativeMatrixPropertiesKHR props[64];
  uint32_t count = 64;
  for (uint32_t i = 0; i < count; i++)
    props[i] = (VkCooperativeMatrixPropertiesKHR){
        .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR};
  VkResult r = vk_api.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR(pd, &count, props);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) return 0;
  for (uint32_t i = 0; i < count; i++) {
    const VkCooperativeMatrixPropertiesKHR *c = &props[i];
    if (c->MSize == 16 && c->NSize == 16 && c->KSize == 16 && c->AType == type &&
        c->BType == type && c->CType == VK_COMPONENT_TYPE_FLOAT32_KHR &&
        c->ResultType == VK_COMPONENT_TYPE_FLOAT32_KHR && c->scope == VK_SCOPE_SUBGROUP_KHR)
      return 1;
  }
  return 0;
}

/* Sets phys->coopmat_khr_f16 and _bf16: whether matmul_khr_f16.comp and
 * matmul_khr_bf16.comp run on the device (the extension, its feature, the
 * tiles, F16 or BF16 arithmetic, the Vulkan memory model, subgroups of 32
 * and the kernel's shared memory). */
static void vk_examine_coopmat_khr(VkPhysicalDevice pd, vk_physical *phys,
                                   const VkPhysicalDeviceVulkan12Features *f12,
                                   const VkPhysicalDeviceSubgroupProperties *subgroup) {
  if (!phys->native || phys->limits.maxComputeSharedMemorySize < VK_KHR_SHARED ||
      !vk_api.vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR || !f12->vulkanMemoryModel ||
      subgroup->subgroupSize != 32 ||
      !vk_has_extension(pd, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME))
    return;
  VkPhysicalDeviceCooperativeMatrixFeaturesKHR cm = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR};
  VkPhysicalDeviceShaderBfloat16FeaturesKHR bf16 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR};
  int has_bf16 = vk_has_extension(pd, VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME);
  if (has_bf16) cm.pNext = &bf16;
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &cm};
  vk_api.vkGetPhysicalDeviceFeatures2(pd, &features);
  if (!cm.cooperativeMatrix) return;
  phys->coopmat_khr_f16 =
      f12->shaderFloat16 && vk_lists_khr_tile(pd, VK_COMPONENT_TYPE_FLOAT16_KHR);
  phys->coopmat_khr_bf16 = has_bf16 && bf16.shaderBFloat16Type &&
                           bf16.shaderBFloat16CooperativeMatrix &&
                           vk_lists_khr_tile(pd, VK_COMPONENT_TYPE_BFLOAT16_KHR);
}

/* Fills `phys` for `pd`; returns 0 (with the reason) if gllmk cannot use it. */
static int vk_examine(VkPhysicalDevice pd, vk_physical *phys, char *why, size_t why_size) {
  VkPhysicalDeviceDriverProperties driver = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, .pNext = &driver};
  VkPhysicalDeviceIDProperties ids = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
                                      .pNext = &subgroup};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  int has_sm = vk_has_extension(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  if (has_sm) driver.pNext = &sm;
  VkPhysicalDeviceProperties2 props = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                       .pNext = &ids};
  vk_api.vkGetPhysicalDeviceProperties(pd, &props.properties);
  const char *name = props.properties.deviceName;
  if (props.properties.apiVersion < VK_API_VERSION_1_2) {
    snprintf(why, why_size, "%.200s supports Vulkan %u.%u only", name,
             VK_API_VERSION_MAJOR(props.properties.apiVersion),
             VK_API_VERSION_MINOR(props.properties.apiVersion));
    return 0;
  }
  vk_api.vkGetPhysicalDeviceProperties2(pd, &props);

  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &f11};
  vk_api.vkGetPhysicalDeviceFeatures2(pd, &features);
  if (!f12.timelineSemaphore) {
    snprintf(why, why_size, "%.200s has no timeline semaphores", name);
    return 0;
  }

  /* The kernels' workgroups (up to 256 invocations, 28 KiB of shared memory)
   * and the one descriptor set layout (11 storage buffers). */
  const VkPhysicalDeviceLimits *lim = &props.properties.limits;
  if (lim->maxPerStageDescriptorStorageBuffers < VK_BINDINGS || lim->maxPushConstantsSize < 128 ||
      lim->maxComputeWorkGroupInvocations < 256 || lim->maxComputeSharedMemorySize < 32768) {
    snprintf(why, why_size, "%.200s: compute limits below what gllmk needs", name);
    return 0;
  }

  VkQueueFamilyProperties families[64];
  uint32_t family_count = 64;
  vk_api.vkGetPhysicalDeviceQueueFamilyProperties(pd, &family_count, families);
  uint32_t family = UINT32_MAX;
  for (uint32_t i = 0; i < family_count && family == UINT32_MAX; i++)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
  if (family == UINT32_MAX) {
    snprintf(why, why_size, "%.200s has no compute queue", name);
    return 0;
  }

  memset(phys, 0, sizeof *phys);
  phys->handle = pd;
  phys->limits = *lim;
  phys->queue_family = family;
  phys->vendor_id = props.properties.vendorID;
  phys->subgroup_size = subgroup.subgroupSize;
  uint32_t needed_ops = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  phys->native = VK_ALLOW_NATIVE && f11.storageBuffer16BitAccess &&
                 (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                 (subgroup.supportedOperations & needed_ops) == needed_ops &&
                 subgroup.subgroupSize >= 4;
  phys->subgroup_shuffle =
      phys->native && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  phys->coopmat_nv = phys->native && vk_has_coopmat_nv(pd, lim, &f12, &subgroup);
  vk_examine_coopmat_khr(pd, phys, &f12, &subgroup);

  gllmk_device_info *info = &phys->info;
  snprintf(info->name, sizeof info->name, "%.127s", name);
  snprintf(info->arch, sizeof info->arch, "%.63s", driver.driverName);
  snprintf(info->driver, sizeof info->driver, "%.20s %.42s", driver.driverName, driver.driverInfo);
  if (ids.deviceUUID[0] || memcmp(ids.deviceUUID, ids.deviceUUID + 1, VK_UUID_SIZE - 1))
    vk_format_uuid(ids.deviceUUID, info->uuid, sizeof info->uuid);
  VkPhysicalDeviceMemoryProperties mem;
  vk_api.vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; i++)
    if ((mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        mem.memoryHeaps[i].size > info->memory_bytes)
      info->memory_bytes = mem.memoryHeaps[i].size;
  info->compute_units = has_sm ? sm.shaderSMCount : 0;
  if (props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
    info->flags |= GLLMK_DEVICE_SOFTWARE;
  if (props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
      props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
    info->flags |= GLLMK_DEVICE_UNIFIED_MEMORY;
  return 1;
}

/* Lower is listed first: discrete GPUs, then integrated, virtual, other, CPU. */
static int vk_type_order(VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties p;
  vk_api.vkGetPhysicalDeviceProperties(pd, &p);
  switch (p.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
    default: return 3;
  }
}

static void vk_enumerate(char *reason, size_t reason_size) {
  VkPhysicalDevice devices[VK_MAX_PHYSICAL];
  uint32_t count = VK_MAX_PHYSICAL;
  VkResult r = vk_api.vkEnumeratePhysicalDevices(vk_instance, &count, devices);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    snprintf(reason, reason_size, "vkEnumeratePhysicalDevices: %s", vk_result_name(r));
    return;
  }
  if (count == 0) {
    snprintf(reason, reason_size, "the Vulkan loader found no physical device");
    return;
  }
  char why[256] = "";
  for (int order = 0; order <= 4; order++) {
    for (uint32_t i = 0; i < count; i++) {
      if (vk_type_order(devices[i]) != order) continue;
      if (vk_examine(devices[i], &vk_physicals[vk_physical_count], why, sizeof why))
        vk_physical_count++;
    }
  }
  if (vk_physical_count == 0) snprintf(reason, reason_size, "no usable Vulkan device: %.255s", why);
}

static void vk_unload(void) {
  if (vk_instance) vk_api.vkDestroyInstance(vk_instance, NULL);
  vk_instance = VK_NULL_HANDLE;
  vk_physical_count = 0;
  if (vk_library) dlclose(vk_library);
  vk_library = NULL;
}

/* The instance lives as long as the plugin is loaded. A program that exits
 * with a context still open (or with the plugin pinned) unloads the plugin
 * after the driver has run its own exit handlers: destroying the instance
 * then is invalid use and crashed NVIDIA's driver 580 (with a VkDevice
 * alive, and in every forked test process once pinned), so the process's
 * end is left to take it all. */
__attribute__((destructor)) static void vk_plugin_unloaded(void) {
  if (!vk_pinned && atomic_load(&vk_devices_open) == 0) vk_unload();
}

/* Keeps this plugin, and with it the Vulkan loader and driver it opened and
 * its instance, loaded for the rest of the process once it found a device.
 * The core unloads a plugin when its last context closes; NVIDIA's Vulkan
 * driver, unloaded so while other threads kept using the GPU through CUDA,
 * crashed in one of the driver's own threads (cuda contexts created and
 * destroyed on 4 threads at once: each creation probes every plugin). A
 * pinned plugin's destructor runs only at the process's end, after the
 * driver's own exit handlers, so it leaves the instance to the process's
 * end too (see below). */
static void vk_pin_plugin(void) {
  Dl_info self;
  if (dladdr(&vk_probed, &self) && self.dli_fname)
    vk_pinned = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) != NULL;
}

gllmk_status vk_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                      size_t reason_size) {
  pthread_mutex_lock(&vk_probe_lock);
  if (!vk_probed) {
    /* Set once: ops of open devices read vk_host and the probe's results
     * without a lock while other threads create contexts (issue 20). */
    vk_host = host;
    vk_probed = 1;
    if (vk_load_library(vk_probe_reason, sizeof vk_probe_reason) &&
        vk_create_instance(vk_probe_reason, sizeof vk_probe_reason))
      vk_enumerate(vk_probe_reason, sizeof vk_probe_reason);
    if (vk_physical_count == 0) vk_unload();
    else vk_pin_plugin();
  }
  *out_count = vk_physical_count;
  if (reason_size) snprintf(reason, reason_size, "%s", vk_physical_count ? "" : vk_probe_reason);
  pthread_mutex_unlock(&vk_probe_lock);
  return GLLMK_OK;
}

gllmk_status vk_device_info(uint32_t index, gllmk_device_info *out_info) {
  if (index >= vk_physical_count)
    return vk_host->fail(GLLMK_ERR_INVALID_ARGUMENT, "vulkan: no device %u", index);
  *out_info = vk_physicals[index].info;
  return GLLMK_OK;
}

/* Kernels embedded in both forms. */
static const int vk_two_form_kernels = 0
#define VK_KERNEL(name) +1
#define VK_KERNEL_NATIVE(name)
#include "kernels.def"
    ;

/* The vendor behind a PCI (or Khronos) vendor id. */
static const char *vk_vendor_name(uint32_t id) {
  switch (id) {
    case 0x10de: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x13b5: return "Arm";
    case 0x5143: return "Qualcomm";
    case 0x106b: return "Apple";
    case 0x10005: return "Mesa";
    default: return "vendor";
  }
}

/* The cooperative-matrix kernels a device runs, for vk_describe: KHR matmul
 * and attention per type, NV matmul where KHR lacks a type. */
static const char *vk_coopmat_text(const vk_physical *p) {
  int f16 = p->coopmat_khr_f16, bf16 = p->coopmat_khr_bf16;
  if (f16 && bf16) return ", KHR cooperative-matrix matmul and attention (F16, BF16)";
  if (f16 && p->coopmat_nv)
    return ", KHR cooperative-matrix matmul and attention (F16; BF16 matmul through NV)";
  if (f16) return ", KHR cooperative-matrix matmul and attention (F16)";
  if (bf16 && p->coopmat_nv)
    return ", KHR cooperative-matrix matmul and attention (BF16; F16 matmul through NV)";
  if (bf16) return ", KHR cooperative-matrix matmul and attention (BF16)";
  if (p->coopmat_nv) return ", NV cooperative-matrix matmul (F16, BF16 packed into F16)";
  return "";
}

void vk_describe(char *text, size_t text_size) {
  int n = snprintf(text, text_size,
                   "SPIR-V for Vulkan 1.2: %d kernels, each native (16-bit storage, subgroup "
                   "reductions) and portable (16-bit types in 32-bit words), and matmuls on "
                   "VK_KHR_cooperative_matrix (F16, BF16) or VK_NV_cooperative_matrix (F16); "
                   "pipelines are built on first use",
                   vk_two_form_kernels);
  for (uint32_t i = 0; i < vk_physical_count && n >= 0 && (size_t)n < text_size; i++) {
    const vk_physical *p = &vk_physicals[i];
    n += snprintf(text + n, text_size - (size_t)n,
                  "; device %u (%s 0x%04x): %s kernels, subgroup %u%s", i,
                  vk_vendor_name(p->vendor_id), p->vendor_id, p->native ? "native" : "portable",
                  p->subgroup_size, vk_coopmat_text(p));
  }
}

/* --------------------------------------------------------------- supports */

/* The op function itself in a dry run: every launch is assembled and
 * checked as the call would do (32-bit counts, strides and offsets, bound
 * ranges within maxStorageBufferRange, the paths chosen by the device's
 * features and limits), and nothing is recorded, reserved or written. So
 * the answer is exactly the op function's, and the op keeps its checks. */
gllmk_status vk_supports(gllmk_plugin_device *dev, gllmk_op op, const void *args) {
  gllmk_status s = GLLMK_OK;
  dev->dry_run = 1;
  switch (op) {
#define GLLMK_OP(name)                                   \
  case GLLMK_OP_##name:                                  \
    s = vk_##name(dev, (const gllmk_##name##_args *)args); \
    break;
#include "gllmk/gllmk_ops.def"
    default: break;
  }
  dev->dry_run = 0;
  if (s == GLLMK_ERR_UNSUPPORTED || s == GLLMK_OK) return s;
  /* Nothing else can come out of a dry run; were it to, the call decides. */
  return GLLMK_OK;
}

/* ------------------------------------------------------------ descriptor */

static const gllmk_plugin_ops vk_ops = {
#define GLLMK_OP(name) .name = vk_##name,
#include "gllmk/gllmk_ops.def"
};

static const gllmk_plugin vk_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = VK_PLUGIN_NAME,
    .kind = GLLMK_BACKEND_VULKAN,
    .version = "0.1.0",
    .probe = vk_probe,
    .device_info = vk_device_info,
    .describe = vk_describe,
    .open = vk_open,
    .close = vk_close,
    .synchronize = vk_synchronize,
    .mem_alloc = vk_mem_alloc,
    .mem_free = vk_mem_free,
    .mem_write = vk_mem_write,
    .mem_read = vk_mem_read,
    .mem_copy = vk_mem_copy,
    .mem_fill = vk_mem_fill,
    .ops = &vk_ops,
    .ops_size = sizeof vk_ops,
    .supports = vk_supports,
    .record_begin = vk_record_begin,
    .record_end = vk_record_end,
    .record_replay = vk_record_replay,
    .record_free = vk_record_free,
    .mark = vk_mark,
    .marks_read = vk_marks_read,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &vk_plugin; }
