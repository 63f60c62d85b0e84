/*
 * matmul.c - the matmul family: matmul, as the tiled kernel or, for a few
 * rows of a, the GEMV kernel (both in kernels/matmul.cl). Batches that lie
 * like one taller matrix over a shared b become one batch. Also both
 * descriptors' gk_supports, which refuses matmul's a_norm, rope, kv and glu. From
 * below: the grid sizes, variant() and launch() of launch.h, the tile sizes
 * of kernels/gk_params.h.
 */
#include "launch.h"
#include "ops.h"

/* Up to this many rows of a (per batch) go to the GEMV kernel. */
#define GK_GEMV_MAX_ROWS 4

/* The stride of the innermost of the first `dims` dims with extent > 1 (the
 * core checked that they flatten with one stride); 0 if all are 1. */
static int64_t batch_stride(const gllmk_tensor *t, int32_t dims) {
  for (int32_t i = dims - 1; i >= 0; i--)
    if (t->shape[i] > 1) return t->strides[i];
  return 0;
}

gllmk_status gk_supports(gllmk_plugin_device *device, gllmk_op op, const void *args) {
  (void)device;
  const gllmk_matmul_args *matmul = args;
  if (op == GLLMK_OP_matmul && (matmul->a_norm != GLLMK_A_NORM_NONE || matmul->rope_dim != 0 ||
                                matmul->glu != GLLMK_GLU_NONE || matmul->kv_k_cache))
    return gk_host->fail(GLLMK_ERR_UNSUPPORTED, "gllmk_matmul: the hsa backend has no a_norm, rope, kv or glu");
  return GLLMK_OK;
}

gllmk_status gk_matmul(gllmk_plugin_device *device, const gllmk_matmul_args *args) {
  const gllmk_tensor *a = args->a, *b = args->b, *out = args->out;
  int32_t nd = a->ndim, bd = b->ndim;
  gk_matmul_params p = {
      .batch = 1, .m = a->shape[nd - 2], .k = a->shape[nd - 1],
      .n = b->shape[args->b_layout == GLLMK_B_NK ? bd - 2 : bd - 1],
      .out_off = (int64_t)out->offset, .a_off = (int64_t)a->offset, .b_off = (int64_t)b->offset,
      .bias_off = args->bias ? (int64_t)args->bias->offset : 0,
      .out_rs = out->strides[nd - 2], .a_rs = a->strides[nd - 2], .b_rs = b->strides[bd - 2],
      .out_bs = batch_stride(out, nd - 2), .a_bs = batch_stride(a, nd - 2),
      .b_bs = bd == 2 ? 0 : batch_stride(b, bd - 2),
      .alpha = args->alpha, .beta = args->beta, .b_layout = args->b_layout,
      .has_bias = args->bias != NULL,
  };
  for (int32_t i = 0; i < nd - 2; i++) p.batch *= a->shape[i];
  if (p.m == 1) { /* the row stride of a single row is free: keep it dense */
    p.a_rs = p.k;
    p.out_rs = p.n;
  }
  /* A shared b with batches laid out like one taller matrix: one batch. */
  if (p.batch > 1 && p.b_bs == 0 && p.a_bs == p.m * p.a_rs && p.out_bs == p.m * p.out_rs) {
    p.m *= p.batch;
    p.batch = 1;
  }
  gllmk_plugin_memory *buffers[] = {memory_of(out), memory_of(a), memory_of(b),
                                    memory_of(args->bias)};
  if (p.m <= GK_GEMV_MAX_ROWS)
    return launch(device, variant(GK_FLOAT_gemv, out->dtype), groups_for(p.n, GK_GEMV_N),
                  capped(p.batch * p.m), &p, buffers);
  int64_t tiles = ((p.m + GK_TILE_M - 1) / GK_TILE_M) * ((p.n + GK_TILE_N - 1) / GK_TILE_N);
  return launch(device, variant(GK_FLOAT_matmul, out->dtype), capped(tiles), capped(p.batch),
                &p, buffers);
}
