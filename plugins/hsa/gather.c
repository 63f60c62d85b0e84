/*
 * gather.c - the gather family: embedding (rows of a table picked by ids)
 * and kv_append (rows written into a paged cache at slots), kernels in
 * kernels/gather.cl. Ids and slots are checked on the device, which raises
 * the backend's error word (gk_backend_error_memory, described by
 * kernels.c). From below: the grid sizes, variant() and launch() of
 * launch.h.
 */
#include "launch.h"
#include "ops.h"

gllmk_status gk_embedding(gllmk_plugin_device *device, const gllmk_embedding_args *args) {
  const gllmk_tensor *out = args->out, *table = args->table;
  gllmk_plugin_rows o = gllmk_plugin_as_rows(out), t = gllmk_plugin_as_rows(table);
  gk_embedding_params p = {
      .count = o.rows, .dim = o.cols, .vocab = t.rows,
      .out_off = (int64_t)out->offset, .table_off = (int64_t)table->offset,
      .ids_off = (int64_t)args->ids->offset,
      .out_row_stride = o.row_stride, .table_row_stride = t.row_stride,
  };
  return launch(device, variant(GK_FLOAT_embedding, out->dtype),
                groups_for(p.dim, GK_WG_ELEMENTWISE), capped(p.count), &p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(table), memory_of(args->ids),
                                          gk_backend_error_memory(device)});
}

gllmk_status gk_kv_append(gllmk_plugin_device *device, const gllmk_kv_append_args *args) {
  const gllmk_tensor *k = args->k, *v = args->v, *kc = args->k_cache;
  gk_kv_append_params p = {
      .tokens = k->shape[0], .heads = k->shape[1], .head_dim = k->shape[2],
      .slots_total = kc->shape[0] * kc->shape[1],
      .k_cache_off = (int64_t)kc->offset, .v_cache_off = (int64_t)args->v_cache->offset,
      .k_off = (int64_t)k->offset, .v_off = (int64_t)v->offset,
      .slots_off = (int64_t)args->slots->offset,
      .k_stride_t = k->strides[0], .k_stride_h = k->strides[1],
      .v_stride_t = v->strides[0], .v_stride_h = v->strides[1],
  };
  return launch(device, variant(GK_FLOAT_kv_append, k->dtype),
                groups_for(p.heads * p.head_dim, GK_WG_ELEMENTWISE), capped(p.tokens), &p,
                (gllmk_plugin_memory *[]){memory_of(kc), memory_of(args->v_cache), memory_of(k),
                                          memory_of(v), memory_of(args->slots),
                                          gk_backend_error_memory(device)});
}
