/*
 * norm.c - the norm family: rmsnorm, add_rmsnorm, layernorm and softmax,
 * row reductions with one work-group per row (kernels/norm.cl), all
 * launched by row_op() with one params block (gk_norm_params). From below:
 * the grid sizes, variant() and launch() of launch.h.
 */
#include "launch.h"
#include "ops.h"

/* One work-group per row; tensors in the kernel's order, NULL allowed for
 * an absent bias (1-D tensors get row stride 0). */
static gllmk_status row_op(gllmk_plugin_device *device, gk_float_kernel f32_kernel,
                           const gllmk_tensor *const *tensors, int count, float eps, float scale) {
  gllmk_plugin_rows r = gllmk_plugin_as_rows(tensors[0]);
  gk_norm_params p = {.rows = r.rows, .cols = r.cols, .eps = eps, .scale = scale, .has_bias = 1};
  gllmk_plugin_memory *buffers[5] = {NULL};
  for (int i = 0; i < count; i++) {
    const gllmk_tensor *t = tensors[i];
    if (t == NULL) { /* only layernorm's bias may be absent */
      p.has_bias = 0;
      continue;
    }
    p.off[i] = (int64_t)t->offset;
    p.row_stride[i] = t->ndim == 1 ? 0 : gllmk_plugin_as_rows(t).row_stride;
    buffers[i] = memory_of(t);
  }
  return launch(device, variant(f32_kernel, tensors[0]->dtype), 1, capped(r.rows), &p, buffers);
}

gllmk_status gk_rmsnorm(gllmk_plugin_device *device, const gllmk_rmsnorm_args *args) {
  return row_op(device, GK_FLOAT_rmsnorm,
                (const gllmk_tensor *const[]){args->out, args->x, args->weight}, 3, args->eps, 1.0f);
}

gllmk_status gk_add_rmsnorm(gllmk_plugin_device *device, const gllmk_add_rmsnorm_args *args) {
  return row_op(device, GK_FLOAT_add_rmsnorm,
                (const gllmk_tensor *const[]){args->out, args->residual, args->x, args->weight}, 4,
                args->eps, 1.0f);
}

gllmk_status gk_layernorm(gllmk_plugin_device *device, const gllmk_layernorm_args *args) {
  return row_op(device, GK_FLOAT_layernorm,
                (const gllmk_tensor *const[]){args->out, args->x, args->weight, args->bias}, 4,
                args->eps, 1.0f);
}

gllmk_status gk_softmax(gllmk_plugin_device *device, const gllmk_softmax_args *args) {
  return row_op(device, GK_FLOAT_softmax, (const gllmk_tensor *const[]){args->out, args->x},
                2, 0.0f, args->scale);
}
