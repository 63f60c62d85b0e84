/*
 * hsa_ops.c - every gllmk op as launches of the kernels in kernels/, for
 * any backend behind gk_backend.h (the HSA runtime, or PoCL in the tests).
 *
 * The core has validated each call (docs/api.md), so this file only turns
 * tensors into the kernels' parameter blocks and picks grid sizes. Grids
 * are capped; every kernel loops over what the grid does not cover.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gk_backend.h"

/* At most this many work-groups in x and in y. */
#define GK_GRID_CAP 65535u
/* Up to this many rows of a (per batch) go to the GEMV kernel. */
#define GK_GEMV_MAX_ROWS 4

static gllmk_plugin_memory *memory_of(const gllmk_tensor *t) {
  return t ? gllmk_plugin_tensor_memory(t) : NULL;
}

static uint32_t capped(int64_t groups) {
  if (groups < 1) return 1;
  return groups > (int64_t)GK_GRID_CAP ? GK_GRID_CAP : (uint32_t)groups;
}

/* Work-groups of `per_group` work-items to cover n items. */
static uint32_t groups_for(int64_t n, uint32_t per_group) {
  return capped((n + per_group - 1) / per_group);
}

/* The float-dtype variant of a kernel: the table lists f32, f16, bf16. */
static gk_kernel_id variant(gk_kernel_id f32_kernel, int32_t dtype) {
  return (gk_kernel_id)(f32_kernel + dtype);
}

static gllmk_status launch(gllmk_plugin_device *device, gk_kernel_id kernel, uint32_t groups_x,
                           uint32_t groups_y, const void *params,
                           gllmk_plugin_memory *const *buffers) {
  gk_launch l = {.kernel = kernel, .groups_x = groups_x, .groups_y = groups_y, .params = params};
  memcpy(l.buffers, buffers, gk_kernels[kernel].buffers * sizeof *buffers);
  return gk_backend_launch(device, &l);
}

/* ---------------------------------------------------------- raw memory */

gllmk_status gk_mem_copy(gllmk_plugin_device *device, gllmk_plugin_memory *dst,
                         uint64_t dst_offset, gllmk_plugin_memory *src, uint64_t src_offset,
                         uint64_t size) {
  gk_bytes_params p = {.dst_off = (int64_t)dst_offset, .src_off = (int64_t)src_offset,
                       .size = (int64_t)size};
  return launch(device, GK_KERNEL_bytes_copy, groups_for((int64_t)size / 8 + 1, GK_WG_ELEMENTWISE),
                1, &p, (gllmk_plugin_memory *[]){dst, src});
}

gllmk_status gk_mem_fill(gllmk_plugin_device *device, gllmk_plugin_memory *dst, uint64_t offset,
                         uint64_t size, uint8_t value) {
  gk_bytes_params p = {.dst_off = (int64_t)offset, .size = (int64_t)size, .value = value};
  return launch(device, GK_KERNEL_bytes_fill, groups_for((int64_t)size / 4 + 1, GK_WG_ELEMENTWISE),
                1, &p, (gllmk_plugin_memory *[]){dst});
}

/* ---------------------------------------------------------- copy, fill */

/* Drops dims of extent 1 and merges neighbours that are dense in both
 * tensors, so that most copies become one long row. Returns the new ndim. */
static int32_t simplify_copy_dims(const gllmk_tensor *dst, const gllmk_tensor *src,
                                  int64_t *shape, int64_t *dst_strides, int64_t *src_strides) {
  int32_t n = 0;
  for (int32_t i = 0; i < dst->ndim; i++) {
    if (dst->shape[i] == 1) continue;
    if (n > 0 && dst_strides[n - 1] == dst->strides[i] * dst->shape[i] &&
        src_strides[n - 1] == src->strides[i] * dst->shape[i]) {
      shape[n - 1] *= dst->shape[i];
      dst_strides[n - 1] = dst->strides[i];
      src_strides[n - 1] = src->strides[i];
      continue;
    }
    shape[n] = dst->shape[i];
    dst_strides[n] = dst->strides[i];
    src_strides[n] = src->strides[i];
    n++;
  }
  if (n == 0) { /* a single element */
    shape[0] = 1;
    dst_strides[0] = src_strides[0] = 1;
    n = 1;
  }
  return n;
}

gllmk_status gk_copy(gllmk_plugin_device *device, const gllmk_copy_args *args) {
  int64_t shape[GLLMK_MAX_DIMS], ds[GLLMK_MAX_DIMS], ss[GLLMK_MAX_DIMS];
  int32_t n = simplify_copy_dims(args->out, args->src, shape, ds, ss);
  gk_copy_params p = {.dst_off = (int64_t)args->out->offset, .src_off = (int64_t)args->src->offset,
                      .ndim = n, .dst_dtype = args->out->dtype, .src_dtype = args->src->dtype};
  int64_t rows = 1;
  for (int32_t i = 0; i < n - 1; i++) { /* leading dims in slots 0.., the last in slot 7 */
    p.shape[i] = shape[i];
    p.dst_strides[i] = ds[i];
    p.src_strides[i] = ss[i];
    rows *= shape[i];
  }
  p.shape[7] = shape[n - 1];
  p.dst_strides[7] = ds[n - 1];
  p.src_strides[7] = ss[n - 1];
  return launch(device, GK_KERNEL_copy, groups_for(p.shape[7], GK_WG_ELEMENTWISE), capped(rows), &p,
                (gllmk_plugin_memory *[]){memory_of(args->out), memory_of(args->src)});
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* F32 to F16, round to nearest even (NaN stays NaN, overflow is inf). */
static uint16_t f32_to_f16_bits(float f) {
  uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
  if (abs < 0x38800000u) {                                   /* below 2^-14: subnormal or 0 */
    float scaled = fabsf(f) * 16777216.0f;                   /* in units of 2^-24, exact */
    return (uint16_t)(sign | (uint32_t)nearbyintf(scaled));  /* default rounding: to even */
  }
  uint32_t rounded = abs + 0x0fffu + ((abs >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

static uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = f32_bits(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x40u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* I32 takes the value truncated toward zero, saturated to the I32 range. */
static uint32_t i32_bits(float value) {
  if (value >= 2147483648.0f) return 0x7fffffffu;
  if (value <= -2147483648.0f) return 0x80000000u;
  return (uint32_t)(int32_t)value;
}

gllmk_status gk_fill(gllmk_plugin_device *device, const gllmk_fill_args *args) {
  const gllmk_tensor *out = args->out;
  gllmk_plugin_rows r = gllmk_plugin_as_rows(out);
  gk_fill_params p = {.rows = r.rows, .cols = r.cols, .row_stride = r.row_stride,
                      .off = (int64_t)out->offset, .elem_size = 4};
  switch (out->dtype) {
    case GLLMK_F32: p.bits = f32_bits(args->value); break;
    case GLLMK_F16: p.bits = f32_to_f16_bits(args->value); p.elem_size = 2; break;
    case GLLMK_BF16: p.bits = f32_to_bf16_bits(args->value); p.elem_size = 2; break;
    default: p.bits = i32_bits(args->value); break;
  }
  if (r.row_stride == r.cols) { /* dense: one long row */
    p.cols *= p.rows;
    p.rows = 1;
  }
  return launch(device, GK_KERNEL_fill, groups_for(p.cols, GK_WG_ELEMENTWISE), capped(p.rows), &p,
                (gllmk_plugin_memory *[]){memory_of(out)});
}

/* ---------------------------------------------------------- elementwise */

/* out and up to three inputs, each the out's shape or a broadcast row. */
static gllmk_status elementwise(gllmk_plugin_device *device, gk_kernel_id f32_kernel,
                                const gllmk_tensor *out, const gllmk_tensor *const *inputs,
                                int count, int32_t kind) {
  gllmk_plugin_rows r = gllmk_plugin_as_rows(out);
  gk_eltwise_params p = {.rows = r.rows, .cols = r.cols, .kind = kind};
  gllmk_plugin_memory *buffers[4] = {memory_of(out)};
  p.off[0] = (int64_t)out->offset;
  p.row_stride[0] = r.row_stride;
  int dense = r.row_stride == r.cols;
  for (int i = 0; i < count; i++) {
    gllmk_plugin_rows in = gllmk_plugin_as_rows(inputs[i]);
    p.off[i + 1] = (int64_t)inputs[i]->offset;
    p.row_stride[i + 1] = in.rows == 1 && r.rows > 1 ? 0 : in.row_stride;
    dense = dense && p.row_stride[i + 1] == r.cols;
    buffers[i + 1] = memory_of(inputs[i]);
  }
  if (dense) { /* no broadcast and no gaps: one long row */
    p.cols *= p.rows;
    p.rows = 1;
  }
  return launch(device, variant(f32_kernel, out->dtype), groups_for(p.cols, GK_WG_ELEMENTWISE),
                capped(p.rows), &p, buffers);
}

gllmk_status gk_add(gllmk_plugin_device *device, const gllmk_add_args *args) {
  return elementwise(device, GK_KERNEL_add_f32, args->out,
                     (const gllmk_tensor *const[]){args->a, args->b}, 2, 0);
}

gllmk_status gk_mul(gllmk_plugin_device *device, const gllmk_mul_args *args) {
  return elementwise(device, GK_KERNEL_mul_f32, args->out,
                     (const gllmk_tensor *const[]){args->a, args->b}, 2, 0);
}

gllmk_status gk_mul_add(gllmk_plugin_device *device, const gllmk_mul_add_args *args) {
  return elementwise(device, GK_KERNEL_mul_add_f32, args->out,
                     (const gllmk_tensor *const[]){args->a, args->b, args->c}, 3, 0);
}

gllmk_status gk_silu(gllmk_plugin_device *device, const gllmk_silu_args *args) {
  return elementwise(device, GK_KERNEL_silu_f32, args->out,
                     (const gllmk_tensor *const[]){args->x}, 1, 0);
}

gllmk_status gk_gelu(gllmk_plugin_device *device, const gllmk_gelu_args *args) {
  return elementwise(device, GK_KERNEL_gelu_f32, args->out,
                     (const gllmk_tensor *const[]){args->x}, 1, args->kind);
}

gllmk_status gk_add_gelu(gllmk_plugin_device *device, const gllmk_add_gelu_args *args) {
  return elementwise(device, GK_KERNEL_add_gelu_f32, args->out,
                     (const gllmk_tensor *const[]){args->x, args->bias}, 2, args->kind);
}

gllmk_status gk_swiglu(gllmk_plugin_device *device, const gllmk_swiglu_args *args) {
  return elementwise(device, GK_KERNEL_swiglu_f32, args->out,
                     (const gllmk_tensor *const[]){args->gate, args->up}, 2, 0);
}

/* ---------------------------------------------------------- row ops */

/* One work-group per row; tensors in the kernel's order, NULL allowed for
 * an absent bias (1-D tensors get row stride 0). */
static gllmk_status row_op(gllmk_plugin_device *device, gk_kernel_id f32_kernel,
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
  return row_op(device, GK_KERNEL_rmsnorm_f32,
                (const gllmk_tensor *const[]){args->out, args->x, args->weight}, 3, args->eps, 1.0f);
}

gllmk_status gk_add_rmsnorm(gllmk_plugin_device *device, const gllmk_add_rmsnorm_args *args) {
  return row_op(device, GK_KERNEL_add_rmsnorm_f32,
                (const gllmk_tensor *const[]){args->out, args->residual, args->x, args->weight}, 4,
                args->eps, 1.0f);
}

gllmk_status gk_layernorm(gllmk_plugin_device *device, const gllmk_layernorm_args *args) {
  return row_op(device, GK_KERNEL_layernorm_f32,
                (const gllmk_tensor *const[]){args->out, args->x, args->weight, args->bias}, 4,
                args->eps, 1.0f);
}

gllmk_status gk_softmax(gllmk_plugin_device *device, const gllmk_softmax_args *args) {
  return row_op(device, GK_KERNEL_softmax_f32, (const gllmk_tensor *const[]){args->out, args->x},
                2, 0.0f, args->scale);
}

/* ---------------------------------------------------------- rope */

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
  return launch(device, variant(GK_KERNEL_rope_f32, out->dtype), 1, capped(p.tokens), &p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(x), memory_of(args->positions),
                                          memory_of(args->inv_freq)});
}

/* ---------------------------------------------------------- embedding, kv_append */

gllmk_status gk_embedding(gllmk_plugin_device *device, const gllmk_embedding_args *args) {
  const gllmk_tensor *out = args->out, *table = args->table;
  gllmk_plugin_rows o = gllmk_plugin_as_rows(out), t = gllmk_plugin_as_rows(table);
  gk_embedding_params p = {
      .count = o.rows, .dim = o.cols, .vocab = t.rows,
      .out_off = (int64_t)out->offset, .table_off = (int64_t)table->offset,
      .ids_off = (int64_t)args->ids->offset,
      .out_row_stride = o.row_stride, .table_row_stride = t.row_stride,
  };
  return launch(device, variant(GK_KERNEL_embedding_f32, out->dtype),
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
  return launch(device, variant(GK_KERNEL_kv_append_f32, k->dtype),
                groups_for(p.heads * p.head_dim, GK_WG_ELEMENTWISE), capped(p.tokens), &p,
                (gllmk_plugin_memory *[]){memory_of(kc), memory_of(args->v_cache), memory_of(k),
                                          memory_of(v), memory_of(args->slots),
                                          gk_backend_error_memory(device)});
}

/* ---------------------------------------------------------- matmul */

/* The stride of the innermost of the first `dims` dims with extent > 1 (the
 * core checked that they flatten with one stride); 0 if all are 1. */
static int64_t batch_stride(const gllmk_tensor *t, int32_t dims) {
  for (int32_t i = dims - 1; i >= 0; i--)
    if (t->shape[i] > 1) return t->strides[i];
  return 0;
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
    return launch(device, variant(GK_KERNEL_gemv_f32, out->dtype), groups_for(p.n, GK_GEMV_N),
                  capped(p.batch * p.m), &p, buffers);
  int64_t tiles = ((p.m + GK_TILE_M - 1) / GK_TILE_M) * ((p.n + GK_TILE_N - 1) / GK_TILE_N);
  return launch(device, variant(GK_KERNEL_matmul_f32, out->dtype), capped(tiles), capped(p.batch),
                &p, buffers);
}

/* ---------------------------------------------------------- attention */

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
  return launch(device, variant(GK_KERNEL_attention_f32, q->dtype), 1,
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
  return launch(device, variant(GK_KERNEL_paged_attention_f32, q->dtype), 1,
                capped(p.tokens * p.hq), &p,
                (gllmk_plugin_memory *[]){memory_of(out), memory_of(q), memory_of(kc),
                                          memory_of(args->v_cache), memory_of(args->block_table),
                                          memory_of(args->q_starts), memory_of(args->seq_lens),
                                          gk_backend_error_memory(device)});
}

/* ---------------------------------------------------------- tokens */

static gllmk_status token_op(gllmk_plugin_device *device, gk_kernel_id f32_kernel,
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
  return token_op(device, GK_KERNEL_argmax_f32, args->out, args->logits, &p);
}

gllmk_status gk_sample(gllmk_plugin_device *device, const gllmk_sample_args *args) {
  gk_token_params p = {.seed = args->seed, .offset = args->offset,
                       .temperature = args->temperature, .top_p = args->top_p,
                       .min_p = args->min_p, .top_k = args->top_k};
  return token_op(device, GK_KERNEL_sample_f32, args->out, args->logits, &p);
}

/* ---------------------------------------------------------- errors */

static int64_t word_pair(const uint32_t *words, int first) {
  return (int64_t)((uint64_t)words[first] | (uint64_t)words[first + 1] << 32);
}

void gk_describe_error(const uint32_t words[GK_ERROR_WORDS], char *text, size_t text_size) {
  long long index = word_pair(words, 1), value = word_pair(words, 3), limit = word_pair(words, 5);
  switch (words[0]) {
    case GK_ERROR_EMBEDDING_ID:
      snprintf(text, text_size, "gllmk_embedding: ids[%lld]=%lld is outside [0, %lld)", index,
               value, limit);
      break;
    case GK_ERROR_KV_SLOT:
      snprintf(text, text_size,
               "gllmk_kv_append: slots[%lld]=%lld is outside the cache's %lld slots", index, value,
               limit);
      break;
    case GK_ERROR_PAGED_TABLE:
      snprintf(text, text_size,
               "gllmk_paged_attention: block_table entry %lld = %lld is outside [0, %lld)", index,
               value, limit);
      break;
    case GK_ERROR_PAGED_SEQUENCE:
      snprintf(text, text_size,
               "gllmk_paged_attention: sequence %lld: q_starts and seq_lens[%lld]=%lld do not fit "
               "(at most %lld positions in its block table)",
               index, index, value, limit);
      break;
    case GK_ERROR_KV_LENS:
      snprintf(text, text_size, "gllmk_attention: kv_lens[%lld]=%lld is outside [0, %lld]", index,
               value, limit);
      break;
    default:
      snprintf(text, text_size, "a kernel raised unknown error code %u", words[0]);
      break;
  }
}
