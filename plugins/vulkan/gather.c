/*
 * gather.c - the gather family, row copies driven by indices in device
 * memory: embedding (rows of a table by token id) and kv_append (rows of k
 * and v into cache slots). Kernels: kernels/gather_embedding.comp and
 * kernels/gather_kv_append.comp, both run in the widest form the layout
 * allows (vk_copy_rows_run). From below it takes the launch (vk_call_* of
 * dispatch.c).
 */
#include "ops.h"

#define VK_GATHER_GROUP 256
/* 16-byte words each invocation of gather_embedding.comp and
 * gather_kv_append.comp moves (VECTORS = 2), all loads before the first
 * store. kv_append on an H100, % of cuda's copy: f32 90% at 2 words, 87-88%
 * at 4, 87% at 1 (75-80% with the former 8 elements per invocation, two
 * words for f32); bf16 86-91% at every count. The embedding gather's rate
 * changes from process to process (40-86% for the same build) beyond any
 * difference between these. */
#define VK_COPY_UNROLL 2

/* Runs gather_embedding.comp or gather_kv_append.comp in the widest form
 * `multiples` (the row length, offsets and row strides, OR-ed, in elements)
 * allows: 16-byte words (VECTORS = 2), steps of 8 elements (1) or single
 * elements (0). *count, the element count in `push`, becomes the count of
 * those units. */
static gllmk_status vk_copy_rows_run(vk_call *call, int32_t dtype, uint32_t multiples,
                                     uint32_t *count, const void *push, uint32_t push_size) {
  uint32_t per_word = vk_per_word(dtype);
  if (multiples % per_word == 0) {
    call->key.extra[0] = 2;
    call->key.extra[1] = VK_COPY_UNROLL;
    *count /= per_word;
    return vk_call_run(call, push, push_size, vk_groups(*count, VK_GATHER_GROUP * VK_COPY_UNROLL),
                       1, 1);
  }
  if (multiples % 8 == 0) {
    call->key.extra[0] = 1;
    *count /= 8;
  }
  return vk_call_run(call, push, push_size, vk_groups(*count, VK_GATHER_GROUP), 1, 1);
}

gllmk_status vk_embedding(gllmk_plugin_device *dev, const gllmk_embedding_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_gather_embedding, args->out->dtype, VK_GATHER_GROUP);
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
  vk_call_init(&call, dev, VK_KERNEL_gather_kv_append, args->k->dtype, VK_GATHER_GROUP);
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
