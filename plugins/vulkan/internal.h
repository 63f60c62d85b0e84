/*
 * internal.h - shared declarations of the vulkan plugin: everything below
 * the op families (device.c, memory.c, dispatch.c, pipeline.c, record.c,
 * timing.c, plugin.c). The family entry points are in ops.h.
 *
 * The plugin loads libvulkan.so.1 with dlopen and calls Vulkan only through
 * the function pointers listed in symbols.def. One VkInstance is created
 * by probe and lives until the plugin is unloaded; each opened device (one
 * per gllmk context) has its own VkDevice, compute queue, timeline semaphore,
 * ring of command-buffer frames and pipelines.
 *
 * Ordering: every command is recorded into the current frame behind a full
 * compute/transfer memory barrier, so commands run in submission order like
 * a CUDA stream. A frame is submitted when it is full, when the device has
 * run out of submitted work (so that it computes while the host records),
 * or when the host needs results; the host waits on the timeline value of a
 * frame before reusing it. Waits poll the timeline before blocking.
 *
 * Native recordings (record.c) capture kernel launches into a command
 * buffer of their own, with descriptor sets, uploads and scratch references
 * they own, and a replay submits it after the frame being recorded. supports()
 * (plugin.c) runs an op function in a dry run (dev->dry_run). Timestamps:
 * timing.c.
 */
#ifndef GLLMK_VK_INTERNAL_H_
#define GLLMK_VK_INTERNAL_H_

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "gllmk/gllmk_plugin.h"

/* VK_KHR_cooperative_matrix and VK_KHR_shader_bfloat16 postdate the Vulkan
 * headers of some supported distributions (Debian 12 has 1.3.239): declare
 * what the plugin uses, with the registry's values. */
#ifndef VK_KHR_cooperative_matrix
#define VK_KHR_cooperative_matrix 1
#define VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME "VK_KHR_cooperative_matrix"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR \
  ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR ((VkStructureType)1000506001)
typedef enum VkComponentTypeKHR {
  VK_COMPONENT_TYPE_FLOAT16_KHR = 0,
  VK_COMPONENT_TYPE_FLOAT32_KHR = 1,
  VK_COMPONENT_TYPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkComponentTypeKHR;
typedef enum VkScopeKHR {
  VK_SCOPE_SUBGROUP_KHR = 3,
  VK_SCOPE_MAX_ENUM_KHR = 0x7FFFFFFF
} VkScopeKHR;
typedef struct VkCooperativeMatrixPropertiesKHR {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  VkComponentTypeKHR AType, BType, CType, ResultType;
  VkBool32 saturatingAccumulation;
  VkScopeKHR scope;
} VkCooperativeMatrixPropertiesKHR;
typedef struct VkPhysicalDeviceCooperativeMatrixFeaturesKHR {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
} VkPhysicalDeviceCooperativeMatrixFeaturesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(
    VkPhysicalDevice physicalDevice, uint32_t *pPropertyCount,
    VkCooperativeMatrixPropertiesKHR *pProperties);
#endif
#ifndef VK_KHR_shader_bfloat16
#define VK_KHR_shader_bfloat16 1
#define VK_KHR_SHADER_BFLOAT16_EXTENSION_NAME "VK_KHR_shader_bfloat16"
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR ((VkStructureType)1000141000)
#define VK_COMPONENT_TYPE_BFLOAT16_KHR ((VkComponentTypeKHR)1000141000)
typedef struct VkPhysicalDeviceShaderBfloat16FeaturesKHR {
  VkStructureType sType;
  void *pNext;
  VkBool32 shaderBFloat16Type, shaderBFloat16DotProduct, shaderBFloat16CooperativeMatrix;
} VkPhysicalDeviceShaderBfloat16FeaturesKHR;
#endif

/* ---------------------------------------------------------------- loader */

typedef struct vk_instance_api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define VK_LOADER(n) PFN_##n n;
#define VK_INSTANCE(n) PFN_##n n;
#define VK_INSTANCE_EXT(n) PFN_##n n;
#define VK_DEVICE(n)
#include "symbols.def"
} vk_instance_api;

typedef struct vk_device_api {
#define VK_LOADER(n)
#define VK_INSTANCE(n)
#define VK_INSTANCE_EXT(n)
#define VK_DEVICE(n) PFN_##n n;
#include "symbols.def"
} vk_device_api;

extern const gllmk_plugin_host *vk_host;
extern vk_instance_api vk_api;
extern VkInstance vk_instance;
/* VkDevices created and not yet destroyed: while any is, the instance and
 * the driver stay (see vk_plugin_unloaded). */
extern atomic_int vk_devices_open;

/* "VK_ERROR_DEVICE_LOST", ... */
const char *vk_result_name(VkResult result);

/* ------------------------------------------------------- physical devices */

#define VK_MAX_PHYSICAL 16

/* What probe learned about one usable physical device. */
typedef struct vk_physical {
  VkPhysicalDevice handle;
  gllmk_device_info info;
  VkPhysicalDeviceLimits limits;
  uint32_t queue_family;
  uint32_t vendor_id;
  int native;     /* 16-bit storage and subgroup arithmetic: the "native" kernels */
  int coopmat_nv; /* VK_NV_cooperative_matrix with 16x16x16 f16 -> f32, VK_COOP_SHARED */
  /* VK_KHR_cooperative_matrix with 16x16x16 f16 -> f32 (matmul_khr_f16) and
   * bf16 -> f32 through VK_KHR_shader_bfloat16 (matmul_khr_bf16), each with
   * VK_KHR_SHARED of shared memory. */
  int coopmat_khr_f16, coopmat_khr_bf16;
  int subgroup_shuffle; /* the native form and subgroupShuffleXor (attention_paged_decode.comp) */
  uint32_t subgroup_size;
} vk_physical;

extern vk_physical vk_physicals[VK_MAX_PHYSICAL];
extern uint32_t vk_physical_count;

/* matmul_coop.comp's tiles: BM x BN per workgroup, 64 x 64 per subgroup of
 * 32, K steps of BK through STAGES shared buffers; and the smallest M and N
 * worth packing for. On an H100 128 x 256 with one buffer beat 128 x 128
 * with two (166 against 140 TFLOP/s at 4096^3); 48 KiB of shared memory
 * does not hold two buffers of 128 x 256. */
enum {
  VK_COOP_BM = 128,
  VK_COOP_BN = 256,
  VK_COOP_STAGES = 1,
  VK_COOP_BK = 32,
  VK_COOP_MIN = 32
};
/* Its shared memory: STAGES buffers of BM + BN rows of BK halves plus 8 of padding. */
enum { VK_COOP_SHARED = VK_COOP_STAGES * (VK_COOP_BM + VK_COOP_BN) * (VK_COOP_BK + 8) * 2 };

/* matmul_khr.glsl's tiles: BM x BN per workgroup, 64 x 64 per subgroup of
 * 32, K steps of BK through STAGES shared buffers. */
enum { VK_KHR_BM = 256, VK_KHR_BN = 128, VK_KHR_STAGES = 1, VK_KHR_BK = 32 };
/* Its shared memory: the K buffers (BM + BN rows of BK elements plus 8 of
 * padding), or the epilogue's 16 x 68 floats per subgroup if more. */
enum {
  VK_KHR_SHARED_TILES = VK_KHR_STAGES * (VK_KHR_BM + VK_KHR_BN) * (VK_KHR_BK + 8) * 2,
  VK_KHR_SHARED_EPILOGUE = VK_KHR_BM / 64 * VK_KHR_BN / 64 * 16 * 68 * 4,
  VK_KHR_SHARED = VK_KHR_SHARED_TILES > VK_KHR_SHARED_EPILOGUE ? VK_KHR_SHARED_TILES
                                                                 : VK_KHR_SHARED_EPILOGUE
};

/* ---------------------------------------------------------------- kernels */

typedef enum vk_kernel {
#define VK_KERNEL(name) VK_KERNEL_##name,
#define VK_KERNEL_NATIVE(name) VK_KERNEL_##name,
#include "kernels.def"
  VK_KERNEL_COUNT
} vk_kernel;

/* The embedded SPIR-V of a kernel in one form (NULL size 0 if absent). */
const uint32_t *vk_kernel_spirv(vk_kernel kernel, int native, size_t *out_size);
const char *vk_kernel_name(vk_kernel kernel);

#define VK_MAX_SPEC_EXTRA 5

/* Everything that makes a pipeline: the kernel and its specialisation. */
typedef struct vk_pipeline_key {
  uint32_t kernel;
  uint32_t workgroup_size;
  uint32_t dtype, dtype_out, variant;
  uint32_t extra[VK_MAX_SPEC_EXTRA]; /* constant_id 4.. */
} vk_pipeline_key;

#define VK_PIPELINE_SLOTS 512

typedef struct vk_pipeline_slot {
  vk_pipeline_key key;
  VkPipeline pipeline; /* VK_NULL_HANDLE: empty slot */
} vk_pipeline_slot;

/* ----------------------------------------------------------------- device */

struct gllmk_plugin_memory {
  VkBuffer buffer;
  VkDeviceMemory memory;
  uint64_t size; /* of the VkBuffer: the requested size rounded up to 16 */
};

#define VK_FRAMES 3
#define VK_FRAME_SETS 256           /* descriptor sets per frame */
#define VK_FRAME_SUBMIT_AFTER 128   /* dispatches before a frame is submitted early */
#define VK_IDLE_SUBMIT_MIN 4        /* dispatches worth a submit while the device idles */
#define VK_POLL_SECONDS 0.02        /* a wait polls this long, then blocks */
#define VK_ARENA_BYTES (8u << 20)   /* host-visible upload/readback space per frame */
/* Storage buffers of every launch: the op's tensors at 0..7, 9 and 10, the
 * device's error word at 8 (kernels/common.glsl; bindings 9 and 10 came
 * later, for matmul_gemv.comp's kv). */
#define VK_BINDINGS 11
#define VK_ERROR_BINDING 8

typedef struct vk_frame {
  VkCommandPool command_pool;
  VkCommandBuffer cmd;
  VkDescriptorPool descriptor_pool;
  uint64_t done_value; /* timeline value that marks this frame's last submit finished */
  int recording;
  uint32_t commands;
  uint32_t sets_used;
  uint64_t arena_offset; /* start of this frame's arena slice */
  uint64_t arena_used;
} vk_frame;

/* Device timestamps (timing.c): query pools of VK_MARKS_PER_POOL,
 * added as marks need them and kept for the device's life. The entry points
 * are resolved at open, optional: without them, or on a queue family with
 * no timestamp bits, mark() answers GLLMK_ERR_UNSUPPORTED. */
#define VK_MARKS_PER_POOL 1024
#define VK_TIMESTAMP_SYMBOLS(X) \
  X(vkCreateQueryPool)          \
  X(vkDestroyQueryPool)         \
  X(vkCmdResetQueryPool)        \
  X(vkCmdWriteTimestamp)        \
  X(vkGetQueryPoolResults)

typedef struct vk_timestamps {
#define VK_TIMESTAMP_FN(n) PFN_##n n;
  VK_TIMESTAMP_SYMBOLS(VK_TIMESTAMP_FN)
#undef VK_TIMESTAMP_FN
  int usable;
  uint64_t mask;         /* timestampValidBits as a mask */
  double period;         /* nanoseconds per tick */
  VkQueryPool *pools;
  uint32_t pool_count;
  uint32_t marks;        /* made since the last marks_read */
} vk_timestamps;

struct gllmk_plugin_device {
  const vk_physical *phys;
  vk_device_api fn;
  VkDevice device;
  VkQueue queue;
  VkSemaphore timeline;
  uint64_t last_submitted;
  vk_frame frames[VK_FRAMES];
  uint32_t frame_index;
  VkPhysicalDeviceMemoryProperties memory_properties;
  gllmk_plugin_memory arena; /* host visible: VK_FRAMES slices of VK_ARENA_BYTES */
  uint8_t *arena_map;
  gllmk_plugin_memory error_word; /* host visible, 16 bytes */
  volatile uint32_t *error_map;
  gllmk_plugin_memory null_buffer; /* bound to unused slots */
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipeline_layout;
  VkPipelineCache pipeline_cache;
  VkShaderModule modules[VK_KERNEL_COUNT];
  vk_pipeline_slot pipelines[VK_PIPELINE_SLOTS];
  gllmk_plugin_memory scratch; /* device-local work space of kernels (packed matmul operands) */
  /* Device-local counters of workgroups arrived (sample_argmax.comp), one
   * word per row; every kernel that counts in them leaves them zero. */
  gllmk_plugin_memory arrivals;
  /* Set while native recordings refer to the current dev->scratch: it then
   * outlives its replacement until the last of them is freed. */
  struct vk_shared_memory *scratch_shared;
  /* Between record_begin and record_end: the recording that kernel launches
   * go to instead of the frames (record.c). */
  gllmk_plugin_recording *capture;
  /* Set while supports() runs an op function: launches are checked, not
   * recorded, and nothing is reserved (record.c). */
  int dry_run;
  vk_timestamps timestamps;
};
#define VK_ARRIVAL_WORDS 4096

typedef enum vk_memory_kind {
  VK_MEMORY_DEVICE, /* device-local: tensors, scratch */
  VK_MEMORY_HOST,   /* host-visible and coherent: staging, the error word */
} vk_memory_kind;

/* Allocates a VkBuffer with its own memory of the given kind. */
gllmk_status vk_buffer_create(gllmk_plugin_device *dev, uint64_t size, VkBufferUsageFlags usage,
                              vk_memory_kind kind, gllmk_plugin_memory *out);
void vk_buffer_destroy(gllmk_plugin_device *dev, gllmk_plugin_memory *mem);
/* Makes dev->scratch at least `size` bytes (waiting for queued work before
 * replacing a smaller one; queued work is ordered, so reuse is safe). */
gllmk_status vk_scratch_reserve(gllmk_plugin_device *dev, uint64_t size);

/* A buffer that native recordings may keep alive after the device has let
 * it go (the scratch space they were captured with). refs counts the device
 * (while it is dev->scratch) and each recording holding it. */
typedef struct vk_shared_memory {
  gllmk_plugin_memory mem;
  uint32_t refs;
} vk_shared_memory;
/* Drops one reference; the last destroys the buffer. */
void vk_shared_release(gllmk_plugin_device *dev, vk_shared_memory *shared);

/* The frame being recorded, begun (after waiting for its previous use) if
 * needed. Refused (GLLMK_ERR_UNSUPPORTED) while capturing a recording: what
 * an op would record there could not be replayed. */
gllmk_status vk_frame_get(gllmk_plugin_device *dev, vk_frame **out_frame);
/* Records the barrier that orders the next command after all earlier ones. */
void vk_cmd_order(gllmk_plugin_device *dev, vk_frame *frame);
/* The same barrier into any command buffer (a recording's). */
void vk_cmd_barrier(gllmk_plugin_device *dev, VkCommandBuffer cmd);
/* Records into `cmd` the barrier that makes every device write visible to
 * the host once the work before it is done (the end of every submission). */
void vk_cmd_host_barrier(gllmk_plugin_device *dev, VkCommandBuffer cmd);
/* Submits the frame being recorded (if any) followed by `extra` (a
 * recording's command buffer, or VK_NULL_HANDLE) in one batch, signalling
 * the next timeline value; *out_value (may be NULL) gets that value, or 0 if
 * nothing was submitted. */
gllmk_status vk_submit_with(gllmk_plugin_device *dev, VkCommandBuffer extra,
                            uint64_t *out_value);
/* Waits until the timeline reaches `value` (0: returns at once). */
gllmk_status vk_wait_value(gllmk_plugin_device *dev, uint64_t value);
/* Called after recording a command into `frame`: submits the frame when it
 * is full, or when it holds a few commands and the device has finished all
 * submitted work. */
gllmk_status vk_command_recorded(gllmk_plugin_device *dev, vk_frame *frame);
/* Submits the frame being recorded, if any. */
gllmk_status vk_submit(gllmk_plugin_device *dev);
/* Submits and waits until the device has finished everything. */
gllmk_status vk_wait_idle(gllmk_plugin_device *dev);
/* Reports a VkResult failure through host->fail. */
gllmk_status vk_fail(VkResult result, const char *what);
/* Space in the current frame's arena: the frame and the offset of `size`
 * bytes in dev->arena (aligned to 256), submitting and moving to the next
 * frame when the current one is full. size <= VK_ARENA_BYTES. */
gllmk_status vk_arena_reserve(gllmk_plugin_device *dev, uint64_t size, vk_frame **out_frame,
                              uint64_t *out_offset);

/* Host-written parameters a kernel reads (rope's table): `size` bytes at
 * `offset` of `mem`, written by the host through `map` before the launch
 * that binds them (with vk_call_memory). In the current frame's arena
 * normally; while capturing, in memory the recording owns (kept as long as
 * it is, never reused); in a dry run, map is NULL (write nothing). */
typedef struct vk_upload {
  gllmk_plugin_memory *mem;
  uint64_t offset;
  uint8_t *map;
} vk_upload;
gllmk_status vk_upload_reserve(gllmk_plugin_device *dev, uint64_t size, vk_upload *out);

/* Pipelines (built on first use and kept for the device's life). */
gllmk_status vk_pipeline_get(gllmk_plugin_device *dev, const vk_pipeline_key *key,
                             VkPipeline *out_pipeline);
void vk_pipelines_destroy(gllmk_plugin_device *dev);

/* ---------------------------------------------------------------- dispatch */

/* One kernel launch being assembled by an op. */
typedef struct vk_call {
  gllmk_plugin_device *dev;
  vk_pipeline_key key;
  VkDescriptorBufferInfo bindings[VK_BINDINGS]; /* VK_ERROR_BINDING's is set at the launch */
  gllmk_status status; /* first problem met while binding; reported by vk_call_run */
  char message[160];
} vk_call;

void vk_call_init(vk_call *call, gllmk_plugin_device *dev, vk_kernel kernel, int32_t dtype,
                  uint32_t workgroup_size);
/* Binds a tensor to `slot` and returns its element offset from the bound
 * start (what the kernel adds to every index). */
uint32_t vk_call_tensor(vk_call *call, uint32_t slot, const gllmk_tensor *tensor);
/* Binds raw bytes of a memory (mem_fill's partial words, the scratch space,
 * a vk_upload). */
void vk_call_memory(vk_call *call, uint32_t slot, gllmk_plugin_memory *mem, uint64_t offset,
                    uint64_t size);
/* A 64-bit count or stride as the uint32 a kernel takes (fails the call if
 * it does not fit). */
uint32_t vk_call_u32(vk_call *call, int64_t value, const char *what);
/* A tensor's stride in dimension `dim` as uint32 (0 where the dim is 1). */
uint32_t vk_call_stride(vk_call *call, const gllmk_tensor *t, int32_t dim);
/* Records the launch of `groups_x * groups_y * groups_z` workgroups (each
 * clamped to the device's limit; kernels loop over what does not fit). */
gllmk_status vk_call_run(vk_call *call, const void *push, uint32_t push_size, uint64_t groups_x,
                         uint64_t groups_y, uint64_t groups_z);

/* Workgroups needed for `n` items of `per_group` each, at least 1. */
static inline uint64_t vk_groups(uint64_t n, uint64_t per_group) {
  uint64_t g = (n + per_group - 1) / per_group;
  return g ? g : 1;
}

static inline uint64_t vk_compute_units(const gllmk_plugin_device *dev) {
  return dev->phys->info.compute_units ? dev->phys->info.compute_units : 8;
}

/* Splits n items (a row's keys or columns) into at most `parts` parts of
 * at least min_part items, each a multiple of `align`. Returns the part
 * size; *out_parts, the part count. */
static inline uint64_t vk_split_into(uint64_t n, uint64_t parts, uint64_t min_part,
                                     uint64_t align, uint64_t *out_parts) {
  uint64_t most = vk_groups(n, min_part);
  if (parts > most) parts = most;
  if (parts == 0) parts = 1;
  uint64_t size = vk_groups(vk_groups(n, parts), align) * align;
  *out_parts = vk_groups(n, size);
  return size;
}

/* vk_split_into with as many parts as give at least `per_unit` workgroups
 * per compute unit, with `groups` workgroups per part. */
static inline uint64_t vk_split(const gllmk_plugin_device *dev, uint64_t n, uint64_t groups,
                                uint64_t per_unit, uint64_t min_part, uint64_t align,
                                uint64_t *out_parts) {
  uint64_t parts = vk_groups(per_unit * vk_compute_units(dev), groups ? groups : 1);
  return vk_split_into(n, parts, min_part, align, out_parts);
}

/* The largest power-of-two workgroup size up to `want` (a power of two)
 * that the device runs. */
static inline uint32_t vk_group_limit(const gllmk_plugin_device *dev, uint32_t want) {
  const VkPhysicalDeviceLimits *lim = &dev->phys->limits;
  while (want > lim->maxComputeWorkGroupInvocations || want > lim->maxComputeWorkGroupSize[0])
    want /= 2;
  return want;
}

/* Elements of a float dtype in a 16-byte word. */
static inline uint32_t vk_per_word(int32_t dtype) {
  return 16u / (uint32_t)gllmk_plugin_dtype_size(dtype);
}

/* Elements of a tensor. */
static inline int64_t vk_numel(const gllmk_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* ------------------------------------------------- elementwise_copy.comp */

/* The copy kernel's interface, shared by the copy op (elementwise.c) and
 * the device-to-device copies of memory.c (vk_copy_words): its workgroup
 * size (that of every elementwise kernel), push constants and VARIANT
 * values. */
#define VK_ELEMENTWISE_GROUP 256

typedef struct vk_copy_push {
  uint32_t count, cols, out_offset, out_row_stride, src_offset, ndim, shape[8], stride[8];
} vk_copy_push;

enum { VK_COPY_STRIDED = 0, VK_COPY_DENSE8 = 1 };

/* Workgroups for elementwise_copy.comp: one invocation per 8 elements when
 * dense. */
static inline uint64_t vk_copy_groups(const vk_copy_push *push, uint32_t variant) {
  uint64_t items = variant == VK_COPY_DENSE8 ? push->count / 8 + push->count % 8 : push->count;
  return vk_groups(items, VK_ELEMENTWISE_GROUP);
}

/* Copies `size` bytes (a multiple of 16, both offsets 16-byte aligned from
 * their binding start) between device buffers with elementwise_copy.comp. */
gllmk_status vk_copy_words(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                           gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size);

/* ---------------------------------------------------------------- recordings */

/* A native recording (record.c): one command buffer, recorded once
 * between record_begin and record_end and submitted by every replay, and
 * everything it refers to that the device would otherwise reuse or replace:
 * its descriptor sets (pools of VK_FRAME_SETS), the host-visible memory of
 * its uploads (rope's tables), and a reference to each scratch buffer its
 * launches bind. Tensors' buffers it does not own (the core refuses a replay
 * once one is freed), nor the device's permanent buffers (error word,
 * arrival counters, null buffer). */
struct gllmk_plugin_recording {
  VkCommandPool command_pool;
  VkCommandBuffer cmd;
  uint32_t commands;
  uint64_t done_value; /* timeline value of its last replay (0: none) */
  VkDescriptorPool *pools;
  uint32_t pool_count, sets_in_last;
  gllmk_plugin_memory *uploads; /* host-visible chunks, each mapped */
  uint8_t **upload_maps;
  uint32_t upload_count;
  uint64_t upload_used; /* in the last chunk */
  vk_shared_memory **scratch;
  uint32_t scratch_count;
};

/* Capture-mode pieces of vk_call_run (record.c): a descriptor set the
 * recording owns for a launch with these bindings (holding the scratch
 * space they use; refusing the per-frame arena), and the count of
 * commands recorded. */
gllmk_status vk_capture_set(gllmk_plugin_device *dev, const VkDescriptorBufferInfo *bindings,
                            VkDescriptorSet *out_set);
gllmk_status vk_capture_upload(gllmk_plugin_device *dev, uint64_t size, vk_upload *out);
/* Frees a recording's resources (waiting for its last replay first). */
void vk_recording_destroy(gllmk_plugin_device *dev, gllmk_plugin_recording *rec);

/* Timestamps: set up at open (never fails: unusable timestamps only make
 * mark() refuse), destroyed at close. */
void vk_timestamps_init(gllmk_plugin_device *dev);
void vk_timestamps_destroy(gllmk_plugin_device *dev);

/* ---------------------------------------------------------------- entries */

gllmk_status vk_probe(const gllmk_plugin_host *host, uint32_t *out_count, char *reason,
                      size_t reason_size);
gllmk_status vk_device_info(uint32_t index, gllmk_device_info *out_info);
void vk_describe(char *text, size_t text_size);
gllmk_status vk_open(const gllmk_plugin_open_options *options, gllmk_plugin_device **out_device);
void vk_close(gllmk_plugin_device *dev);
gllmk_status vk_synchronize(gllmk_plugin_device *dev);

gllmk_status vk_mem_alloc(gllmk_plugin_device *dev, uint64_t size, gllmk_plugin_memory **out);
void vk_mem_free(gllmk_plugin_device *dev, gllmk_plugin_memory *mem);
gllmk_status vk_mem_write(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset,
                          const void *src, uint64_t size);
gllmk_status vk_mem_read(gllmk_plugin_device *dev, gllmk_plugin_memory *src, uint64_t offset,
                         void *dst, uint64_t size);
gllmk_status vk_mem_copy(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t dst_offset,
                         gllmk_plugin_memory *src, uint64_t src_offset, uint64_t size);
gllmk_status vk_mem_fill(gllmk_plugin_device *dev, gllmk_plugin_memory *dst, uint64_t offset,
                         uint64_t size, uint8_t value);

gllmk_status vk_supports(gllmk_plugin_device *dev, gllmk_op op, const void *args);
gllmk_status vk_record_begin(gllmk_plugin_device *dev);
gllmk_status vk_record_end(gllmk_plugin_device *dev, gllmk_plugin_recording **out_recording);
gllmk_status vk_record_replay(gllmk_plugin_device *dev, gllmk_plugin_recording *rec);
void vk_record_free(gllmk_plugin_device *dev, gllmk_plugin_recording *rec);
gllmk_status vk_mark(gllmk_plugin_device *dev, uint32_t *out_id);
gllmk_status vk_marks_read(gllmk_plugin_device *dev, uint32_t count, uint64_t *out_ns);

#endif /* GLLMK_VK_INTERNAL_H_ */
