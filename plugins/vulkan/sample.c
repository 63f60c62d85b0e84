/*
 * sample.c - the sample family, one token id per row of logits: argmax and
 * sample (temperature, top-k, top-p, min-p, seeded). Kernels:
 * kernels/sample_argmax.comp and kernels/sample.comp, which share the row
 * argmax of kernels/sample_row_argmax.glsl. From below it takes the launch
 * (vk_call_* of dispatch.c), the device's scratch space and arrival counters
 * (device.c) for argmax's split rows, and the device's limits.
 */
#include "ops.h"

/* Workgroup size of sample_argmax.comp and of sample.comp for short rows
 * (one invocation per row) and on software devices. */
#define VK_PICK_GROUP 256

/* The fields sample_argmax.comp and sample.comp share at the start of their
 * push constants: logits as rows, out (I32) as rows of out_cols. */
typedef struct vk_pick_push {
  uint32_t rows, cols, x_offset, x_row_stride, out_offset, out_cols, out_row_stride;
} vk_pick_push;

static vk_pick_push vk_pick_bind(vk_call *call, const gllmk_tensor *out,
                                 const gllmk_tensor *logits) {
  gllmk_plugin_rows x = gllmk_plugin_as_rows(logits), o = gllmk_plugin_as_rows(out);
  vk_pick_push p;
  p.rows = vk_call_u32(call, x.rows, "the row count");
  p.cols = vk_call_u32(call, x.cols, "the row length");
  p.x_offset = vk_call_tensor(call, 0, logits);
  p.x_row_stride = vk_call_u32(call, x.row_stride, "a row stride");
  p.out_offset = vk_call_tensor(call, 1, out);
  p.out_cols = (uint32_t)o.cols;
  p.out_row_stride = vk_call_u32(call, o.row_stride, "a row stride");
  return p;
}

/* sample_argmax.comp splits rows into chunks of at least VK_ARGMAX_MIN_CHUNK
 * columns until there are VK_ARGMAX_GROUPS_PER_UNIT workgroups per compute
 * unit (one row of 128256 logits took 206 us in one workgroup on an H100),
 * for at most VK_ARRIVAL_WORDS rows (more fill the device unsplit). H100,
 * [128, 128256] bf16: 8 per unit 24.2 us, 4 21.8, 2 22.9, 1 26.6 (before the
 * subgroup reduction of sample_row_argmax.glsl, which took 4 to 20.2-20.4). */
#define VK_ARGMAX_GROUPS_PER_UNIT 4
#define VK_ARGMAX_MIN_CHUNK 4096

gllmk_status vk_argmax(gllmk_plugin_device *dev, const gllmk_argmax_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_sample_argmax, args->logits->dtype, VK_PICK_GROUP);
  struct {
    vk_pick_push pick;
    uint32_t chunks, chunk_cols;
  } push;
  push.pick = vk_pick_bind(&call, args->out, args->logits);
  uint32_t stride = push.pick.rows > 1 ? push.pick.x_row_stride : 0;
  call.key.extra[0] = (push.pick.x_offset | stride) % 8 == 0;
  uint64_t chunks = 1;
  push.chunk_cols = push.pick.cols;
  if (push.pick.rows <= VK_ARRIVAL_WORDS)
    push.chunk_cols = (uint32_t)vk_split(dev, push.pick.cols, push.pick.rows,
                                         VK_ARGMAX_GROUPS_PER_UNIT, VK_ARGMAX_MIN_CHUNK, 8, &chunks);
  push.chunks = (uint32_t)chunks;
  if (push.chunks > 1) {
    uint64_t partials = (uint64_t)push.pick.rows * push.chunks * 2 * sizeof(uint32_t);
    gllmk_status s = vk_scratch_reserve(dev, partials);
    if (s != GLLMK_OK) return s;
    vk_call_memory(&call, 2, &dev->scratch, 0, partials);
    vk_call_memory(&call, 3, &dev->arrivals, 0, VK_ARRIVAL_WORDS * sizeof(uint32_t));
  }
  return vk_call_run(&call, &push, sizeof push, push.chunks, push.pick.rows, 1);
}

/* Rows at most this long are sampled by one invocation each: with a few
 * logits per row a workgroup would mostly wait at its barriers. */
#define VK_SAMPLE_SERIAL_COLS 64
/* Longer rows take one workgroup each, of this many invocations where the
 * device allows: each of its ~20 passes over a row waits on the row's
 * loads, and one row may be all the work there is (decode). On an H200 one
 * row of 128256 took 1.46 ms with 256 invocations, 0.66 ms with 1024. */
#define VK_SAMPLE_GROUP 1024

/* A software device (lavapipe) runs a workgroup's invocations in turn on
 * one thread: there more invocations only lengthen every barrier. */
static uint32_t vk_sample_group(const gllmk_plugin_device *dev) {
  if (dev->phys->info.flags & GLLMK_DEVICE_SOFTWARE) return VK_PICK_GROUP;
  return vk_group_limit(dev, VK_SAMPLE_GROUP);
}

gllmk_status vk_sample(gllmk_plugin_device *dev, const gllmk_sample_args *args) {
  int serial = args->logits->shape[args->logits->ndim - 1] <= VK_SAMPLE_SERIAL_COLS;
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_sample, args->logits->dtype,
               serial ? VK_PICK_GROUP : vk_sample_group(dev));
  call.key.variant = serial ? 1 : 0;
  struct {
    vk_pick_push pick;
    float temperature, top_p, min_p;
    uint32_t top_k, seed_lo, seed_hi, offset_lo, offset_hi;
  } push;
  push.pick = vk_pick_bind(&call, args->out, args->logits);
  push.temperature = args->temperature;
  push.top_p = args->top_p;
  push.min_p = args->min_p;
  push.top_k = args->top_k > 0 ? (uint32_t)args->top_k : 0;
  push.seed_lo = (uint32_t)args->seed;
  push.seed_hi = (uint32_t)(args->seed >> 32);
  push.offset_lo = (uint32_t)args->offset;
  push.offset_hi = (uint32_t)(args->offset >> 32);
  uint64_t groups = serial ? vk_groups(push.pick.rows, VK_PICK_GROUP) : push.pick.rows;
  return vk_call_run(&call, &push, sizeof push, groups, 1, 1);
}
