/*
 * sample.c - the sampling family: argmax and sample (temperature, top_k,
 * top_p, min_p, seeded), one block a row. Each op fills a cuda_argmax_params
 * or cuda_sample_params (kernels/cuda_params.h), picks its kernel from
 * kernels/sample.cu and a launch shape, and enqueues it on the context's
 * stream. From below it uses launch.h's helpers and cuda_launch (device.c).
 */
#include <string.h>

#include "launch.h"

/* Kernels are picked as CK_<op>_f32 + variant(dtype). */
_Static_assert(CUDA_DTYPE_VARIANTS(argmax) && CUDA_DTYPE_VARIANTS(sample),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");

static gllmk_status run_argmax(gllmk_plugin_device *dev, const gllmk_argmax_args *args) {
  const rows_t rl = gllmk_plugin_as_rows(args->logits);
  const cuda_index_view out = index_view(args->out);
  cuda_argmax_params p;
  memset(&p, 0, sizeof p);
  p.logits = cuda_tensor_address(args->logits);
  p.out = out.data;
  p.out_cols = out.cols;
  p.out_stride = out.stride;
  p.rows = rl.rows;
  p.cols = rl.cols;
  p.stride = rl.row_stride;
  p.vec = p.cols % 8 == 0 && rows_aligned16(args->logits, p.stride);
  return cuda_launch(dev, CK_argmax_f32 + variant(args->logits->dtype), clamp_u32(p.rows, MAX_GRID_X), 1, 1,
                     block_for(ceil_div(p.cols, 64), 1024), 0, &p);
}

static gllmk_status run_sample(gllmk_plugin_device *dev, const gllmk_sample_args *args) {
  const rows_t rl = gllmk_plugin_as_rows(args->logits);
  const cuda_index_view out = index_view(args->out);
  cuda_sample_params p;
  memset(&p, 0, sizeof p);
  p.logits = cuda_tensor_address(args->logits);
  p.out = out.data;
  p.out_cols = out.cols;
  p.out_stride = out.stride;
  p.rows = rl.rows;
  p.cols = rl.cols;
  p.stride = rl.row_stride;
  p.seed = args->seed;
  p.offset = args->offset;
  p.temperature = args->temperature;
  p.top_p = args->top_p;
  p.min_p = args->min_p;
  p.top_k = args->top_k;
  p.vec = p.cols % 8 == 0 && rows_aligned16(args->logits, p.stride);
  return cuda_launch(dev, CK_sample_f32 + variant(args->logits->dtype), clamp_u32(p.rows, MAX_GRID_X), 1, 1,
                     GK_SAMPLE_THREADS, 0, &p);
}

CUDA_OP_ENTRY(argmax)
CUDA_OP_ENTRY(sample)
