/*
 * pipeline.c - the embedded SPIR-V and the compute pipelines made from it.
 *
 * A pipeline is one kernel with one set of specialisation constants (dtype,
 * variant, workgroup and tile sizes). Each is created once per device, on
 * the first call that needs it, through the device's VkPipelineCache, and
 * kept until the device is closed: a context pays for the pipelines it uses
 * and no more (lavapipe compiles each one with LLVM).
 */
#include <string.h>

#include "internal.h"

#define VK_KERNEL(name)                                                         \
  extern const uint32_t vk_spv_##name##_native[], vk_spv_##name##_native_end[], \
      vk_spv_##name##_portable[], vk_spv_##name##_portable_end[];
#define VK_KERNEL_NATIVE(name) \
  extern const uint32_t vk_spv_##name##_native[], vk_spv_##name##_native_end[];
#include "kernels.def"

typedef struct vk_kernel_blob {
  const char *name;
  const uint32_t *native, *native_end, *portable, *portable_end;
} vk_kernel_blob;

/* Indexed by the kernel's enum value (designated initializers), so an entry
 * never depends on the order of kernels.def's lines; the assertion checks
 * that the table has one entry per line. */
#define VK_KERNEL(name)                                                                   \
  [VK_KERNEL_##name] = {#name, vk_spv_##name##_native, vk_spv_##name##_native_end,        \
                        vk_spv_##name##_portable, vk_spv_##name##_portable_end},
#define VK_KERNEL_NATIVE(name) \
  [VK_KERNEL_##name] = {#name, vk_spv_##name##_native, vk_spv_##name##_native_end, NULL, NULL},
static const vk_kernel_blob vk_blobs[] = {
#include "kernels.def"
};
_Static_assert(sizeof vk_blobs / sizeof vk_blobs[0] == VK_KERNEL_COUNT,
               "vk_blobs: one entry per kernel of kernels.def");

const uint32_t *vk_kernel_spirv(vk_kernel kernel, int native, size_t *out_size) {
  const vk_kernel_blob *b = &vk_blobs[kernel];
  const uint32_t *begin = native ? b->native : b->portable;
  const uint32_t *end = native ? b->native_end : b->portable_end;
  *out_size = begin ? (size_t)(end - begin) * sizeof(uint32_t) : 0;
  return begin;
}

const char *vk_kernel_name(vk_kernel kernel) { return vk_blobs[kernel].name; }

static gllmk_status vk_module_get(gllmk_plugin_device *dev, vk_kernel kernel,
                                  VkShaderModule *out) {
  if (!dev->modules[kernel]) {
    size_t size;
    const uint32_t *code = vk_kernel_spirv(kernel, dev->phys->native, &size);
    if (!code)
      return vk_host->fail(GLLMK_ERR_INTERNAL, "vulkan: kernel %s has no form for this device",
                           vk_kernel_name(kernel));
    VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = size,
                                   .pCode = code};
    VkResult r = dev->fn.vkCreateShaderModule(dev->device, &ci, NULL, &dev->modules[kernel]);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateShaderModule");
  }
  *out = dev->modules[kernel];
  return GLLMK_OK;
}

static gllmk_status vk_pipeline_create(gllmk_plugin_device *dev, const vk_pipeline_key *key,
                                       VkPipeline *out) {
  VkShaderModule module = VK_NULL_HANDLE;
  gllmk_status s = vk_module_get(dev, (vk_kernel)key->kernel, &module);
  if (s != GLLMK_OK) return s;
  uint32_t values[4 + VK_MAX_SPEC_EXTRA] = {key->workgroup_size, key->dtype, key->dtype_out,
                                            key->variant};
  memcpy(values + 4, key->extra, sizeof key->extra);
  VkSpecializationMapEntry entries[4 + VK_MAX_SPEC_EXTRA];
  for (uint32_t i = 0; i < 4 + VK_MAX_SPEC_EXTRA; i++)
    entries[i] = (VkSpecializationMapEntry){
        .constantID = i, .offset = i * (uint32_t)sizeof(uint32_t), .size = sizeof(uint32_t)};
  VkSpecializationInfo spec = {.mapEntryCount = 4 + VK_MAX_SPEC_EXTRA,
                               .pMapEntries = entries,
                               .dataSize = sizeof values,
                               .pData = values};
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main",
                .pSpecializationInfo = &spec},
      .layout = dev->pipeline_layout};
  VkResult r =
      dev->fn.vkCreateComputePipelines(dev->device, dev->pipeline_cache, 1, &ci, NULL, out);
  if (r != VK_SUCCESS) {
    *out = VK_NULL_HANDLE;
    return vk_host->fail(r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY
                             ? GLLMK_ERR_OUT_OF_MEMORY
                             : GLLMK_ERR_BACKEND,
                         "vulkan: vkCreateComputePipelines for kernel %s: %s",
                         vk_kernel_name((vk_kernel)key->kernel), vk_result_name(r));
  }
  return GLLMK_OK;
}

static uint32_t vk_key_hash(const vk_pipeline_key *key) {
  const uint32_t *w = (const uint32_t *)key;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof *key / sizeof(uint32_t); i++) h = (h ^ w[i]) * 16777619u;
  return h;
}

gllmk_status vk_pipeline_get(gllmk_plugin_device *dev, const vk_pipeline_key *key,
                             VkPipeline *out_pipeline) {
  uint32_t h = vk_key_hash(key);
  for (uint32_t probe = 0; probe < VK_PIPELINE_SLOTS; probe++) {
    vk_pipeline_slot *slot = &dev->pipelines[(h + probe) % VK_PIPELINE_SLOTS];
    if (slot->pipeline == VK_NULL_HANDLE) {
      gllmk_status s = vk_pipeline_create(dev, key, &slot->pipeline);
      if (s != GLLMK_OK) return s;
      slot->key = *key;
      *out_pipeline = slot->pipeline;
      return GLLMK_OK;
    }
    if (memcmp(&slot->key, key, sizeof *key) == 0) {
      *out_pipeline = slot->pipeline;
      return GLLMK_OK;
    }
  }
  return vk_host->fail(GLLMK_ERR_INTERNAL, "vulkan: more than %d pipelines", VK_PIPELINE_SLOTS);
}

void vk_pipelines_destroy(gllmk_plugin_device *dev) {
  for (uint32_t i = 0; i < VK_PIPELINE_SLOTS; i++)
    if (dev->pipelines[i].pipeline)
      dev->fn.vkDestroyPipeline(dev->device, dev->pipelines[i].pipeline, NULL);
  for (uint32_t i = 0; i < VK_KERNEL_COUNT; i++)
    if (dev->modules[i]) dev->fn.vkDestroyShaderModule(dev->device, dev->modules[i], NULL);
}
