/*
 * elementwise.c - the elementwise family: copy (any strides, dtype
 * conversion), fill, add, mul, mul_add, silu, gelu, add_gelu and swiglu,
 * each a launch of one kernel of kernels/elementwise.cl. copy merges dims
 * into long rows; fill turns its value into the element's bits here; the
 * other ops share elementwise(): out and up to three inputs as rows, a 1-D
 * input broadcast with row stride 0. From below: the grid sizes, variant()
 * and launch() of launch.h, the params structs of kernels/gk_params.h.
 */
#include <math.h>
#include <string.h>

#include "launch.h"
#include "ops.h"

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
static gllmk_status elementwise(gllmk_plugin_device *device, gk_float_kernel f32_kernel,
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
  return elementwise(device, GK_FLOAT_add, args->out,
                     (const gllmk_tensor *const[]){args->a, args->b}, 2, 0);
}

gllmk_status gk_mul(gllmk_plugin_device *device, const gllmk_mul_args *args) {
  return elementwise(device, GK_FLOAT_mul, args->out,
                     (const gllmk_tensor *const[]){args->a, args->b}, 2, 0);
}

gllmk_status gk_mul_add(gllmk_plugin_device *device, const gllmk_mul_add_args *args) {
  return elementwise(device, GK_FLOAT_mul_add, args->out,
                     (const gllmk_tensor *const[]){args->a, args->b, args->c}, 3, 0);
}

gllmk_status gk_silu(gllmk_plugin_device *device, const gllmk_silu_args *args) {
  return elementwise(device, GK_FLOAT_silu, args->out,
                     (const gllmk_tensor *const[]){args->x}, 1, 0);
}

gllmk_status gk_gelu(gllmk_plugin_device *device, const gllmk_gelu_args *args) {
  return elementwise(device, GK_FLOAT_gelu, args->out,
                     (const gllmk_tensor *const[]){args->x}, 1, args->kind);
}

gllmk_status gk_add_gelu(gllmk_plugin_device *device, const gllmk_add_gelu_args *args) {
  return elementwise(device, GK_FLOAT_add_gelu, args->out,
                     (const gllmk_tensor *const[]){args->x, args->bias}, 2, args->kind);
}

gllmk_status gk_swiglu(gllmk_plugin_device *device, const gllmk_swiglu_args *args) {
  return elementwise(device, GK_FLOAT_swiglu, args->out,
                     (const gllmk_tensor *const[]){args->gate, args->up}, 2, 0);
}
