/*
 * elementwise.c - the element-wise family: copy (cast), fill, add, mul,
 * mul_add, silu, gelu, add_gelu and swiglu. Each op turns the (validated)
 * tensor descriptors into a cuda_ew_params or cuda_copy_params
 * (kernels/cuda_params.h), picks its kernel from kernels/elementwise.cu and
 * a launch shape, and enqueues it on the context's stream. From below it
 * uses launch.h's helpers and cuda_launch (device.c); a same-dtype dense copy
 * is the driver's cuMemcpyDtoDAsync.
 */
#include <string.h>

#include "launch.h"

/* Kernels are picked as CK_<op>_f32 + variant(dtype), copies as
 * CK_copy_f32_f32 + 3 * variant(src) + variant(out). */
_Static_assert(CUDA_DTYPE_VARIANTS(fill) && CUDA_DTYPE_VARIANTS(add) && CUDA_DTYPE_VARIANTS(mul) &&
                   CUDA_DTYPE_VARIANTS(mul_add) && CUDA_DTYPE_VARIANTS(silu) && CUDA_DTYPE_VARIANTS(gelu) &&
                   CUDA_DTYPE_VARIANTS(add_gelu) && CUDA_DTYPE_VARIANTS(swiglu),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");
_Static_assert(CUDA_DTYPE_VARIANTS(copy_f32) && CUDA_DTYPE_VARIANTS(copy_f16) && CUDA_DTYPE_VARIANTS(copy_bf16) &&
                   CK_copy_f16_f32 == CK_copy_f32_f32 + 3 * GLLMK_F16 &&
                   CK_copy_bf16_f32 == CK_copy_f32_f32 + 3 * GLLMK_BF16,
               "kernels.def: copy_<src>_<out> at CK_copy_f32_f32 + 3 * src + out");

/* The row stride an input uses against the output's rows: 0 broadcasts one row. */
static int64_t input_stride(const gllmk_tensor *t) {
  const rows_t r = gllmk_plugin_as_rows(t);
  return r.rows == 1 ? 0 : r.row_stride;
}

/* Whether an arbitrary tensor is row-strided (unit last stride, leading dims
 * collapsing into rows with one stride), and its rows if so. */
static int row_strided(const gllmk_tensor *t, rows_t *out) {
  rows_t r = {1, t->shape[t->ndim - 1], 0};
  if (r.cols > 1 && t->strides[t->ndim - 1] != 1) return 0;
  int64_t expected = 0;
  for (int32_t i = t->ndim - 2; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (expected == 0) r.row_stride = t->strides[i];
    else if (t->strides[i] != expected) return 0;
    expected = t->strides[i] * t->shape[i];
    r.rows *= t->shape[i];
  }
  if (r.rows == 1) r.row_stride = r.cols;
  *out = r;
  return 1;
}

/* out = f(a, b, c) row by row; a, b, c may be NULL (unused by the kernel). */
static gllmk_status launch_elementwise(gllmk_plugin_device *dev, int family, const gllmk_tensor *out,
                                       const gllmk_tensor *a, const gllmk_tensor *b, const gllmk_tensor *c,
                                       float value, int32_t gelu_kind) {
  const rows_t ro = gllmk_plugin_as_rows(out);
  const gllmk_tensor *inputs[3] = {a, b, c};
  cuda_ew_params p;
  memset(&p, 0, sizeof p);
  uint64_t *addresses[3] = {&p.a, &p.b, &p.c};
  int64_t *strides[3] = {&p.a_stride, &p.b_stride, &p.c_stride};
  p.out = cuda_tensor_address(out);
  p.rows = ro.rows;
  p.cols = ro.cols;
  p.out_stride = ro.row_stride;
  p.value = value;
  p.gelu_kind = gelu_kind;
  int dense = ro.row_stride == ro.cols, vec = rows_aligned16(out, ro.row_stride);
  for (int i = 0; i < 3; i++) {
    if (!inputs[i]) continue;
    *addresses[i] = cuda_tensor_address(inputs[i]);
    *strides[i] = input_stride(inputs[i]);
    dense = dense && *strides[i] == ro.cols;
    vec = vec && rows_aligned16(inputs[i], *strides[i]);
  }
  if (dense || p.rows == 1) { /* one long row balances best */
    p.cols *= p.rows;
    p.rows = 1;
  }
  p.vec = vec && p.cols % 8 == 0;
  const int64_t units = p.vec ? p.cols / 8 : p.cols;
  return cuda_launch(dev, family + variant(out->dtype), clamp_u32(ceil_div(units, 256), MAX_GRID_YZ),
                     clamp_u32(p.rows, MAX_GRID_YZ), 1, 256, 0, &p);
}

static gllmk_status run_fill(gllmk_plugin_device *dev, const gllmk_fill_args *args) {
  float value = args->value;
  if (args->out->dtype == GLLMK_I32) { /* truncated, saturating; the f32 kernel stores the bits */
    const float v = args->value;
    const int32_t i = v != v ? 0 : v >= 2147483648.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
    memcpy(&value, &i, sizeof value);
  }
  return launch_elementwise(dev, CK_fill_f32, args->out, NULL, NULL, NULL, value, 0);
}

static gllmk_status run_add(gllmk_plugin_device *dev, const gllmk_add_args *args) {
  return launch_elementwise(dev, CK_add_f32, args->out, args->a, args->b, NULL, 0.0f, 0);
}
static gllmk_status run_mul(gllmk_plugin_device *dev, const gllmk_mul_args *args) {
  return launch_elementwise(dev, CK_mul_f32, args->out, args->a, args->b, NULL, 0.0f, 0);
}
static gllmk_status run_mul_add(gllmk_plugin_device *dev, const gllmk_mul_add_args *args) {
  return launch_elementwise(dev, CK_mul_add_f32, args->out, args->a, args->b, args->c, 0.0f, 0);
}
static gllmk_status run_silu(gllmk_plugin_device *dev, const gllmk_silu_args *args) {
  return launch_elementwise(dev, CK_silu_f32, args->out, args->x, NULL, NULL, 0.0f, 0);
}
static gllmk_status run_gelu(gllmk_plugin_device *dev, const gllmk_gelu_args *args) {
  return launch_elementwise(dev, CK_gelu_f32, args->out, args->x, NULL, NULL, 0.0f, args->kind);
}
static gllmk_status run_add_gelu(gllmk_plugin_device *dev, const gllmk_add_gelu_args *args) {
  return launch_elementwise(dev, CK_add_gelu_f32, args->out, args->x, args->bias, NULL, 0.0f, args->kind);
}
static gllmk_status run_swiglu(gllmk_plugin_device *dev, const gllmk_swiglu_args *args) {
  return launch_elementwise(dev, CK_swiglu_f32, args->out, args->gate, args->up, NULL, 0.0f, 0);
}

static gllmk_status run_copy(gllmk_plugin_device *dev, const gllmk_copy_args *args) {
  const gllmk_tensor *out = args->out, *src = args->src;
  const rows_t ro = gllmk_plugin_as_rows(out);
  cuda_copy_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.src = cuda_tensor_address(src);
  p.rows = ro.rows;
  p.cols = ro.cols;
  p.out_stride = ro.row_stride;
  const int kernel = CK_copy_f32_f32 + 3 * variant(src->dtype) + variant(out->dtype);
  rows_t rs;
  if (!row_strided(src, &rs)) {
    p.ndim = src->ndim;
    for (int32_t i = 0; i < src->ndim; i++) {
      p.shape[i] = src->shape[i];
      p.strides[i] = src->strides[i];
    }
    return cuda_launch(dev, kernel, clamp_u32(ceil_div(p.rows * p.cols, 256), 1u << 20), 1, 1, 256, 0, &p);
  }
  const int dense = (ro.rows == 1 || ro.row_stride == ro.cols) && (rs.rows == 1 || rs.row_stride == rs.cols);
  if (dense && src->dtype == out->dtype)
    return cuda_check(cu.cuMemcpyDtoDAsync(p.out, p.src, (size_t)(p.rows * p.cols) * elem_size(out), dev->stream),
                      "cuMemcpyDtoDAsync");
  p.src_stride = rs.row_stride;
  if (dense) {
    p.cols *= p.rows;
    p.rows = 1;
  }
  p.vec = p.cols % 8 == 0 && rows_aligned16(out, p.out_stride) && rows_aligned16(src, p.src_stride);
  const int64_t units = p.vec ? p.cols / 8 : p.cols;
  return cuda_launch(dev, kernel, clamp_u32(ceil_div(units, 256), MAX_GRID_YZ), clamp_u32(p.rows, MAX_GRID_YZ), 1,
                     256, 0, &p);
}

CUDA_OP_ENTRY(copy)
CUDA_OP_ENTRY(fill)
CUDA_OP_ENTRY(add)
CUDA_OP_ENTRY(mul)
CUDA_OP_ENTRY(mul_add)
CUDA_OP_ENTRY(silu)
CUDA_OP_ENTRY(gelu)
CUDA_OP_ENTRY(add_gelu)
CUDA_OP_ENTRY(swiglu)
