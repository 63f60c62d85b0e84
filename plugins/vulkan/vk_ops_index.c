/*
 * vk_ops_index.c - ops driven by indices in device memory: embedding,
 * kv_append, argmax and sample.
 */
#include "vk_internal.h"

#define VK_INDEX_GROUP 256
/* 16-byte words each invocation of embedding.comp and kv_append.comp moves
 * (VECTORS = 2), all loads before the first store. kv_append on an H100, %
 * of cuda's copy: f32 90% at 2 words, 87-88% at 4, 87% at 1 (75-80% with
 * the former 8 elements per invocation, two words for f32); bf16 86-91% at
 * every count. The embedding gather's rate changes from process to process
 * (40-86% for the same build) beyond any difference between these. */
#define VK_COPY_UNROLL 2

/* Runs embedding.comp or kv_append.comp in the widest form `multiples` (the
 * row length, offsets and row strides, OR-ed, in elements) allows: 16-byte
 * words (VECTORS = 2), steps of 8 elements (1) or single elements (0).
 * *count, the element count in `push`, becomes the count of those units. */
static gllmk_status vk_copy_rows_run(vk_call *call, int32_t dtype, uint32_t multiples,
                                     uint32_t *count, const void *push, uint32_t push_size) {
  uint32_t per_word = vk_per_word(dtype);
  if (multiples % per_word == 0) {
    call->key.extra[0] = 2;
    call->key.extra[1] = VK_COPY_UNROLL;
    *count /= per_word;
    return vk_call_run(call, push, push_size, vk_groups(*count, VK_INDEX_GROUP * VK_COPY_UNROLL),
                       1, 1);
  }
  if (multiples % 8 == 0) {
    call->key.extra[0] = 1;
    *count /= 8;
  }
  return vk_call_run(call, push, push_size, vk_groups(*count, VK_INDEX_GROUP), 1, 1);
}

gllmk_status vk_embedding(gllmk_plugin_device *dev, const gllmk_embedding_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_embedding, args->out->dtype, VK_INDEX_GROUP);
  gllmk_plugin_rows o = gllmk_plugin_as_rows(args->out), t = gllmk_plugin_as_rows(args->table),
                    ids = gllmk_plugin_as_rows(args->ids);
  struct {
    uint32_t count, dim, vocab, out_offset, out_row_stride, table_offset, table_row_stride,
        ids_offset, ids_cols, ids_row_stride;
  } push;
  push.count = vk_call_u32(&call, o.rows * o.cols, "the element count");
  push.dim = (uint32_t)o.cols;
  push.vocab = vk_call_u32(&call, t.rows, "the vocabulary size");
  push.out_offset = vk_call_tensor(&call, 0, args->out);
  push.out_row_stride = vk_call_u32(&call, o.row_stride, "a row stride");
  push.table_offset = vk_call_tensor(&call, 1, args->table);
  push.table_row_stride = vk_call_u32(&call, t.row_stride, "a row stride");
  push.ids_offset = vk_call_tensor(&call, 2, args->ids);
  push.ids_cols = (uint32_t)ids.cols;
  push.ids_row_stride = vk_call_u32(&call, ids.row_stride, "a row stride");
  uint32_t multiples = push.dim | push.out_offset | push.out_row_stride | push.table_offset |
                       push.table_row_stride;
  return vk_copy_rows_run(&call, args->out->dtype, multiples, &push.count, &push, sizeof push);
}

gllmk_status vk_kv_append(gllmk_plugin_device *dev, const gllmk_kv_append_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_kv_append, args->k->dtype, VK_INDEX_GROUP);
  const gllmk_tensor *kc = args->k_cache, *kt = args->k, *vt = args->v;
  gllmk_plugin_rows k = gllmk_plugin_as_rows(kt);
  /* k and v [T, Hkv, D] may have any strides on T and Hkv (head slices of a
   * fused q/k/v tensor, permuted dims): rows (t, h) at t * token_stride +
   * h * row_stride (a dim of extent 1 steps by 0). */
  struct {
    uint32_t count, heads, dim, capacity, kc_offset, kc_row_stride, vc_offset, vc_row_stride,
        k_offset, k_row_stride, v_offset, v_row_stride, slots_offset, k_token_stride,
        v_token_stride;
  } push;
  push.count = vk_call_u32(&call, k.rows * k.cols, "the element count");
  push.heads = vk_call_u32(&call, args->k->shape[1], "the head count");
  push.dim = (uint32_t)k.cols;
  push.capacity = vk_call_u32(&call, kc->shape[0] * kc->shape[1], "the cache capacity");
  push.kc_offset = vk_call_tensor(&call, 0, kc);
  push.kc_row_stride =
      vk_call_u32(&call, gllmk_plugin_as_rows(kc).row_stride, "a row stride");
  push.vc_offset = vk_call_tensor(&call, 1, args->v_cache);
  push.vc_row_stride =
      vk_call_u32(&call, gllmk_plugin_as_rows(args->v_cache).row_stride, "a row stride");
  push.k_offset = vk_call_tensor(&call, 2, kt);
  push.k_row_stride = vk_call_u32(&call, kt->shape[1] > 1 ? kt->strides[1] : 0, "a row stride");
  push.k_token_stride =
      vk_call_u32(&call, kt->shape[0] > 1 ? kt->strides[0] : 0, "a token stride");
  push.v_offset = vk_call_tensor(&call, 3, vt);
  push.v_row_stride = vk_call_u32(&call, vt->shape[1] > 1 ? vt->strides[1] : 0, "a row stride");
  push.v_token_stride =
      vk_call_u32(&call, vt->shape[0] > 1 ? vt->strides[0] : 0, "a token stride");
  push.slots_offset = vk_call_tensor(&call, 4, args->slots);
  uint32_t multiples = push.dim | push.kc_offset | push.kc_row_stride | push.vc_offset |
                       push.vc_row_stride | push.k_offset | push.k_row_stride | push.v_offset |
                       push.v_row_stride | push.k_token_stride | push.v_token_stride;
  return vk_copy_rows_run(&call, args->k->dtype, multiples, &push.count, &push, sizeof push);
}

/* The fields argmax.comp and sample.comp share at the start of their push
 * constants: logits as rows, out (I32) as rows of out_cols. */
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

/* argmax.comp splits rows into chunks of at least VK_ARGMAX_MIN_CHUNK
 * columns until there are VK_ARGMAX_GROUPS_PER_UNIT workgroups per compute
 * unit (one row of 128256 logits took 206 us in one workgroup on an H100),
 * for at most VK_ARRIVAL_WORDS rows (more fill the device unsplit). H100,
 * [128, 128256] bf16: 8 per unit 24.2 us, 4 21.8, 2 22.9, 1 26.6 (before
 * the subgroup reduction of row_argmax.glsl, which took 4 to 20.2-20.4). */
#define VK_ARGMAX_GROUPS_PER_UNIT 4
#define VK_ARGMAX_MIN_CHUNK 4096

gllmk_status vk_argmax(gllmk_plugin_device *dev, const gllmk_argmax_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_argmax, args->logits->dtype, VK_INDEX_GROUP);
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
  if (dev->phys->info.flags & GLLMK_DEVICE_SOFTWARE) return VK_INDEX_GROUP;
  return vk_group_limit(dev, VK_SAMPLE_GROUP);
}

gllmk_status vk_sample(gllmk_plugin_device *dev, const gllmk_sample_args *args) {
  int serial = args->logits->shape[args->logits->ndim - 1] <= VK_SAMPLE_SERIAL_COLS;
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_sample, args->logits->dtype,
               serial ? VK_INDEX_GROUP : vk_sample_group(dev));
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
  uint64_t groups = serial ? vk_groups(push.pick.rows, VK_INDEX_GROUP) : push.pick.rows;
  return vk_call_run(&call, &push, sizeof push, groups, 1, 1);
}
