/*
 * sample.c - the sample family: argmax and sample, one work-group per row
 * of logits (kernels/sample.cl), both launched by token_op() with one
 * params block (gk_token_params). From below: the grid sizes, variant()
 * and launch() of launch.h.
 */
#include "launch.h"
#include "ops.h"

static gllmk_status token_op(gllmk_plugin_device *device, gk_float_kernel f32_kernel,
                             const gllmk_tensor *out, const gllmk_tensor *logits,
                             gk_token_params *p) {
  gllmk_plugin_rows r = gllmk_plugin_as_rows(logits);
  p->rows = r.rows;
  p->cols = r.cols;
  p->logits_row_stride = r.row_stride;
  p->out_off = (int64_t)out->offset;
  p->logits_off = (int64_t)logits->offset;
  return launch(device, variant(f32_kernel, logits->dtype), 1, capped(r.rows), p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(logits)});
}

gllmk_status gk_argmax(gllmk_plugin_device *device, const gllmk_argmax_args *args) {
  gk_token_params p = {0};
  return token_op(device, GK_FLOAT_argmax, args->out, args->logits, &p);
}

gllmk_status gk_sample(gllmk_plugin_device *device, const gllmk_sample_args *args) {
  gk_token_params p = {.seed = args->seed, .offset = args->offset,
                       .temperature = args->temperature, .top_p = args->top_p,
                       .min_p = args->min_p, .top_k = args->top_k};
  return token_op(device, GK_FLOAT_sample, args->out, args->logits, &p);
}
