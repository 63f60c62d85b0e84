/*
 * norm.c - the normalisation family: rmsnorm, add_rmsnorm, layernorm and
 * softmax, one row per block (softmax rows too long for one block's
 * registers: softmax_stash, one block per multiprocessor). Each op fills a
 * cuda_norm_params (kernels/cuda_params.h), picks its kernel from
 * kernels/norm.cu and a launch shape, and enqueues it on the context's
 * stream. From below it uses launch.h's helpers, cuda_launch (device.c) and
 * cuda_softmax_stash_smem (internal.h).
 */
#include <string.h>

#include "launch.h"

/* Kernels are picked as CK_<op>_f32 + variant(dtype). */
_Static_assert(CUDA_DTYPE_VARIANTS(rmsnorm) && CUDA_DTYPE_VARIANTS(add_rmsnorm) && CUDA_DTYPE_VARIANTS(layernorm) &&
                   CUDA_DTYPE_VARIANTS(softmax) && CUDA_DTYPE_VARIANTS(softmax_stash),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");

static gllmk_status launch_norm(gllmk_plugin_device *dev, int family, const gllmk_tensor *out,
                                const gllmk_tensor *x, const gllmk_tensor *residual, const gllmk_tensor *weight,
                                const gllmk_tensor *bias, float eps, float scale) {
  const rows_t ro = gllmk_plugin_as_rows(out), rx = gllmk_plugin_as_rows(x);
  cuda_norm_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.x = cuda_tensor_address(x);
  p.rows = ro.rows;
  p.cols = ro.cols;
  p.out_stride = ro.row_stride;
  p.x_stride = rx.row_stride;
  p.eps = eps;
  p.scale = scale;
  int vec = ro.cols % 8 == 0 && rows_aligned16(out, p.out_stride) && rows_aligned16(x, p.x_stride);
  if (residual) {
    const rows_t rr = gllmk_plugin_as_rows(residual);
    p.residual = cuda_tensor_address(residual);
    p.residual_stride = rr.row_stride;
    vec = vec && rows_aligned16(residual, p.residual_stride);
  }
  /* The register-cached path reads weight and bias eight at a time too. */
  if (weight) {
    p.weight = cuda_tensor_address(weight);
    vec = vec && aligned16(p.weight);
  }
  if (bias) {
    p.bias = cuda_tensor_address(bias);
    vec = vec && aligned16(p.bias);
  }
  p.vec = vec;
  const int64_t units = vec ? p.cols / 8 : p.cols;
  /* Softmax rows longer than one block keeps in registers (two units a
   * thread, 1024 threads): one block per multiprocessor keeps as much of
   * each row as fits in registers and shared memory, so that it is read from
   * DRAM once (softmax_stash_impl). */
  const int64_t vecs = p.cols / (16 / (int64_t)elem_size(out));
  if (family == CK_softmax_f32 && vec && units > 2 * 1024 && vecs <= INT32_MAX) {
    const int64_t per_thread = ceil_div(vecs, GK_SOFTMAX_STASH_THREADS);
    const int64_t room = cuda_softmax_stash_smem(dev) / (16 * GK_SOFTMAX_STASH_THREADS);
    const int64_t rest = per_thread - GK_SOFTMAX_STASH_REGS;
    p.stash_vecs = (int32_t)(rest < 0 ? 0 : rest < room ? rest : room);
    return cuda_launch(dev, CK_softmax_stash_f32 + variant(out->dtype), clamp_u32(p.rows, (uint32_t)dev->multiprocessors),
                       1, 1, GK_SOFTMAX_STASH_THREADS, (uint32_t)p.stash_vecs * 16 * GK_SOFTMAX_STASH_THREADS, &p);
  }
  /* Two units a thread (what the kernels keep in registers); softmax rows
   * are usually a vocabulary long and stream, so it takes bigger blocks. */
  const uint32_t max_threads = family == CK_softmax_f32 ? 1024 : GK_NORM_MAX_THREADS;
  return cuda_launch(dev, family + variant(out->dtype), clamp_u32(p.rows, MAX_GRID_X), 1, 1,
                     block_for(ceil_div(units, 2), max_threads), 0, &p);
}

static gllmk_status run_rmsnorm(gllmk_plugin_device *dev, const gllmk_rmsnorm_args *args) {
  return launch_norm(dev, CK_rmsnorm_f32, args->out, args->x, NULL, args->weight, NULL, args->eps, 1.0f);
}
static gllmk_status run_add_rmsnorm(gllmk_plugin_device *dev, const gllmk_add_rmsnorm_args *args) {
  return launch_norm(dev, CK_add_rmsnorm_f32, args->out, args->x, args->residual, args->weight, NULL, args->eps, 1.0f);
}
static gllmk_status run_layernorm(gllmk_plugin_device *dev, const gllmk_layernorm_args *args) {
  return launch_norm(dev, CK_layernorm_f32, args->out, args->x, NULL, args->weight, args->bias, args->eps, 1.0f);
}
static gllmk_status run_softmax(gllmk_plugin_device *dev, const gllmk_softmax_args *args) {
  return launch_norm(dev, CK_softmax_f32, args->out, args->x, NULL, NULL, NULL, 0.0f, args->scale);
}

CUDA_OP_ENTRY(rmsnorm)
CUDA_OP_ENTRY(add_rmsnorm)
CUDA_OP_ENTRY(layernorm)
CUDA_OP_ENTRY(softmax)
