/*
 * rope.c - the rope family: rope (rotary embedding), one work-group per
 * token (kernels/rope.cl). The host computes log2(theta) in double, or
 * passes the caller's inv_freq table instead. From below: the grid sizes,
 * variant() and launch() of launch.h.
 */
#include <math.h>

#include "launch.h"
#include "ops.h"

gllmk_status gk_rope(gllmk_plugin_device *device, const gllmk_rope_args *args) {
  const gllmk_tensor *out = args->out, *x = args->x;
  gk_rope_params p = {
      .tokens = out->shape[0], .heads = out->shape[1], .head_dim = out->shape[2],
      .out_off = (int64_t)out->offset, .x_off = (int64_t)x->offset,
      .pos_off = (int64_t)args->positions->offset,
      .inv_freq_off = args->inv_freq ? (int64_t)args->inv_freq->offset : 0,
      .out_stride_t = out->strides[0], .out_stride_h = out->strides[1],
      .x_stride_t = x->strides[0], .x_stride_h = x->strides[1],
      .pos_stride = args->positions->strides[0],
      .log2_theta = args->inv_freq ? 0.0 : log2((double)args->theta),
      .rotary_dim = args->rotary_dim, .style = args->style,
      .has_inv_freq = args->inv_freq != NULL,
  };
  return launch(device, variant(GK_FLOAT_rope, out->dtype), 1, capped(p.tokens), &p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(x), memory_of(args->positions),
                                          memory_of(args->inv_freq)});
}
