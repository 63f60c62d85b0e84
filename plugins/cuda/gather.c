/*
 * gather.c - the gather family: embedding (rows of a table by token id)
 * and kv_append (k and v rows into cache slots). Each op fills a
 * cuda_embedding_params or cuda_kv_append_params (kernels/cuda_params.h),
 * picks its kernel from kernels/gather.cu and a launch shape, and enqueues
 * it on the context's stream; the kernels flag out-of-range ids and slots in
 * the device error word that synchronize (device.c) reports. From below it
 * uses launch.h's helpers and cuda_launch (device.c).
 */
#include <string.h>

#include "launch.h"

/* Kernels are picked as CK_<op>_f32 + variant(dtype). */
_Static_assert(CUDA_DTYPE_VARIANTS(embedding) && CUDA_DTYPE_VARIANTS(kv_append),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");

static gllmk_status run_embedding(gllmk_plugin_device *dev, const gllmk_embedding_args *args) {
  const rows_t ro = gllmk_plugin_as_rows(args->out), rt = gllmk_plugin_as_rows(args->table);
  cuda_embedding_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(args->out);
  p.table = cuda_tensor_address(args->table);
  p.error_flag = dev->error_device;
  p.ids = index_view(args->ids);
  p.count = ro.rows;
  p.dim = ro.cols;
  p.vocab = rt.rows;
  p.out_stride = ro.row_stride;
  p.table_stride = rt.row_stride;
  const size_t es = elem_size(args->out);
  p.vec = (p.dim * (int64_t)es) % 16 == 0 && rows_aligned16(args->out, p.out_stride) &&
          rows_aligned16(args->table, p.table_stride);
  const int64_t units = p.vec ? p.dim * (int64_t)es / 16 : p.dim;
  return cuda_launch(dev, CK_embedding_f32 + variant(args->out->dtype), clamp_u32(p.count, MAX_GRID_X), 1, 1,
                     block_for(units, 256), 0, &p);
}

static gllmk_status run_kv_append(gllmk_plugin_device *dev, const gllmk_kv_append_args *args) {
  const gllmk_tensor *k = args->k, *v = args->v, *kc = args->k_cache;
  const rows_t rkc = gllmk_plugin_as_rows(kc), rvc = gllmk_plugin_as_rows(args->v_cache);
  cuda_kv_append_params p;
  memset(&p, 0, sizeof p);
  p.k_cache = cuda_tensor_address(kc);
  p.v_cache = cuda_tensor_address(args->v_cache);
  p.k = cuda_tensor_address(k);
  p.v = cuda_tensor_address(args->v);
  p.error_flag = dev->error_device;
  p.slots = index_view(args->slots);
  /* k and v [tokens, heads, head_dim] with any strides on the leading dims;
   * the caches are contiguous. */
  p.tokens = k->shape[0];
  p.heads = k->shape[1];
  p.head_dim = k->shape[2];
  p.k_token_stride = dim_stride(k, 0);
  p.k_stride = dim_stride(k, 1);
  p.v_token_stride = dim_stride(v, 0);
  p.v_stride = dim_stride(v, 1);
  p.k_cache_stride = rkc.row_stride;
  p.v_cache_stride = rvc.row_stride;
  p.slot_count = kc->shape[0] * kc->shape[1];
  const size_t es = elem_size(k);
  p.vec = (p.head_dim * (int64_t)es) % 16 == 0 &&
          strides_aligned16(k, (const int64_t[]){p.k_token_stride, p.k_stride}, 2) &&
          strides_aligned16(v, (const int64_t[]){p.v_token_stride, p.v_stride}, 2) &&
          rows_aligned16(kc, p.k_cache_stride) && rows_aligned16(args->v_cache, p.v_cache_stride);
  const int64_t units = p.heads * (p.vec ? p.head_dim * (int64_t)es / 16 : p.head_dim);
  return cuda_launch(dev, CK_kv_append_f32 + variant(k->dtype), clamp_u32(p.tokens, MAX_GRID_X), 1, 1,
                     block_for(units, 256), 0, &p);
}

CUDA_OP_ENTRY(embedding)
CUDA_OP_ENTRY(kv_append)
