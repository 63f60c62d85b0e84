/*
 * attention.c - the attention family: attention (dense q/k/v) and
 * paged_attention (keys and values through a block table), one work-group
 * per query row (kernels/attention.cl). Lengths and block ids read from
 * device memory raise the backend's error word (gk_backend_error_memory,
 * described by kernels.c). From below: the grid sizes, variant() and
 * launch() of launch.h.
 */
#include "launch.h"
#include "ops.h"

static void copy_strides(int64_t *dst, const gllmk_tensor *t, int32_t count) {
  for (int32_t i = 0; i < count; i++) dst[i] = t->strides[i];
}

gllmk_status gk_attention(gllmk_plugin_device *device, const gllmk_attention_args *args) {
  const gllmk_tensor *q = args->q, *k = args->k, *v = args->v, *out = args->out;
  gk_attention_params p = {
      .batch = q->shape[0], .sq = q->shape[1], .skv = k->shape[1], .hq = q->shape[2],
      .hkv = k->shape[2], .d = q->shape[3],
      .out_off = (int64_t)out->offset, .q_off = (int64_t)q->offset, .k_off = (int64_t)k->offset,
      .v_off = (int64_t)v->offset,
      .kv_lens_off = args->kv_lens ? (int64_t)args->kv_lens->offset : 0,
      .lse_off = args->lse ? (int64_t)args->lse->offset : 0,
      .scale = args->scale, .causal = args->causal,
      .has_kv_lens = args->kv_lens != NULL, .has_lse = args->lse != NULL,
  };
  copy_strides(p.out_strides, out, 3);
  copy_strides(p.q_strides, q, 3);
  copy_strides(p.k_strides, k, 3);
  copy_strides(p.v_strides, v, 3);
  return launch(device, variant(GK_FLOAT_attention, q->dtype), 1,
                capped(p.batch * p.sq * p.hq), &p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(q), memory_of(k), memory_of(v),
                                          memory_of(args->kv_lens), memory_of(args->lse),
                                          gk_backend_error_memory(device)});
}

gllmk_status gk_paged_attention(gllmk_plugin_device *device,
                                const gllmk_paged_attention_args *args) {
  const gllmk_tensor *q = args->q, *out = args->out, *kc = args->k_cache;
  gk_paged_params p = {
      .tokens = q->shape[0], .seqs = args->block_table->shape[0], .hq = q->shape[1],
      .hkv = kc->shape[2], .d = q->shape[2], .blocks = kc->shape[0], .block_size = kc->shape[1],
      .max_blocks = args->block_table->shape[1],
      .out_off = (int64_t)out->offset, .q_off = (int64_t)q->offset,
      .k_cache_off = (int64_t)kc->offset, .v_cache_off = (int64_t)args->v_cache->offset,
      .table_off = (int64_t)args->block_table->offset,
      .q_starts_off = (int64_t)args->q_starts->offset,
      .seq_lens_off = (int64_t)args->seq_lens->offset,
      .scale = args->scale,
  };
  copy_strides(p.out_strides, out, 2);
  copy_strides(p.q_strides, q, 2);
  return launch(device, variant(GK_FLOAT_paged_attention, q->dtype), 1,
                capped(p.tokens * p.hq), &p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(q), memory_of(kc),
                                          memory_of(args->v_cache), memory_of(args->block_table),
                                          memory_of(args->q_starts), memory_of(args->seq_lens),
                                          gk_backend_error_memory(device)});
}
