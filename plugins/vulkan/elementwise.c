/*
 * elementwise.c - the elementwise family: copy (with a cast), fill, add,
 * mul, mul_add, silu, gelu, add_gelu and swiglu. Kernels:
 * kernels/elementwise_copy.comp (copy), kernels/elementwise_fill.comp
 * (fill) and kernels/elementwise.comp (the arithmetic ops, one VARIANT
 * each); kernels/elementwise_fill_bytes.comp serves memory.c's mem_fill
 * alone. From below it takes the launch (vk_call_* of dispatch.c) and
 * elementwise_copy.comp's push constants, variants and workgroup count
 * (internal.h), which memory.c's vk_copy_words shares.
 */
#include <math.h>
#include <string.h>

#include "ops.h"

/* ------------------------------------------------------------------ copy */

/* src's dims without the size-1 ones, with dims that are contiguous in each
 * other merged, so that most copies index through one or two dims. */
static uint32_t vk_merge_dims(vk_call *call, const gllmk_tensor *t, uint32_t *shape,
                              uint32_t *stride) {
  uint32_t nd = 0;
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] == 1) continue;
    if (nd > 0 && (int64_t)stride[nd - 1] == t->shape[i] * t->strides[i]) {
      shape[nd - 1] = vk_call_u32(call, (int64_t)shape[nd - 1] * t->shape[i], "a dimension");
      stride[nd - 1] = vk_call_u32(call, t->strides[i], "a stride");
      continue;
    }
    shape[nd] = vk_call_u32(call, t->shape[i], "a dimension");
    stride[nd] = vk_call_u32(call, t->strides[i], "a stride");
    nd++;
  }
  if (nd == 0) {
    shape[0] = 1;
    stride[0] = 0;
    nd = 1;
  }
  return nd;
}

gllmk_status vk_copy(gllmk_plugin_device *dev, const gllmk_copy_args *args) {
  vk_copy_push push;
  memset(&push, 0, sizeof push);
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_elementwise_copy, args->src->dtype, VK_ELEMENTWISE_GROUP);
  call.key.dtype_out = (uint32_t)args->out->dtype;
  gllmk_plugin_rows o = gllmk_plugin_as_rows(args->out);
  push.count = vk_call_u32(&call, vk_numel(args->out), "the element count");
  push.cols = (uint32_t)o.cols;
  push.out_row_stride = vk_call_u32(&call, o.row_stride, "a row stride");
  push.out_offset = vk_call_tensor(&call, 0, args->out);
  push.src_offset = vk_call_tensor(&call, 1, args->src);
  push.ndim = vk_merge_dims(&call, args->src, push.shape, push.stride);
  int dense = (o.rows == 1 || push.out_row_stride == push.cols) && push.ndim == 1 &&
              (push.stride[0] == 1 || push.count == 1);
  if (dense && push.out_offset % 8 == 0 && push.src_offset % 8 == 0) {
    call.key.variant = VK_COPY_DENSE8;
    push.stride[0] = 1; /* a single element may have come with stride 0 */
  }
  return vk_call_run(&call, &push, sizeof push, vk_copy_groups(&push, call.key.variant), 1, 1);
}

/* ------------------------------------------------------------------ fill */

static uint16_t vk_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (ax >= 0x38800000u) /* normal: round at bit 13, rebias the exponent */
    return (uint16_t)(sign | ((ax + 0xfffu + ((ax >> 13) & 1u) - 0x38000000u) >> 13));
  uint32_t e = ax >> 23;
  if (e < 102) return (uint16_t)sign;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return (uint16_t)(sign | q);
}

static uint16_t vk_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* The value as out's dtype: rounded to nearest even, or for I32 truncated
 * toward zero and saturated (NaN gives 0). */
static uint32_t vk_fill_bits(int32_t dtype, float value) {
  uint32_t bits;
  switch (dtype) {
    case GLLMK_F16: return vk_f32_to_f16(value);
    case GLLMK_BF16: return vk_f32_to_bf16(value);
    case GLLMK_I32: {
      int32_t i = 0;
      if (value >= 2147483647.0f) i = INT32_MAX;
      else if (value <= -2147483648.0f) i = INT32_MIN;
      else if (!isnan(value)) i = (int32_t)value;
      memcpy(&bits, &i, 4);
      return bits;
    }
    default: memcpy(&bits, &value, 4); return bits;
  }
}

gllmk_status vk_fill(gllmk_plugin_device *dev, const gllmk_fill_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_elementwise_fill, args->out->dtype, VK_ELEMENTWISE_GROUP);
  gllmk_plugin_rows o = gllmk_plugin_as_rows(args->out);
  struct {
    uint32_t count, cols, out_offset, out_row_stride, bits;
  } push = {vk_call_u32(&call, vk_numel(args->out), "the element count"), (uint32_t)o.cols,
            vk_call_tensor(&call, 0, args->out), vk_call_u32(&call, o.row_stride, "a row stride"),
            vk_fill_bits(args->out->dtype, args->value)};
  return vk_call_run(&call, &push, sizeof push, vk_groups(push.count, VK_ELEMENTWISE_GROUP), 1, 1);
}

/* ----------------------------------------------------------- elementwise */

/* VARIANT values of elementwise.comp: its OP_* constants. */
enum {
  VK_EW_ADD = 0,
  VK_EW_MUL = 1,
  VK_EW_MUL_ADD = 2,
  VK_EW_SILU = 3,
  VK_EW_GELU_ERF = 4,
  VK_EW_GELU_TANH = 5,
  VK_EW_ADD_GELU_ERF = 6,
  VK_EW_ADD_GELU_TANH = 7,
  VK_EW_SWIGLU = 8,
};

/* Row stride of an operand: 0 when it is 1-D and broadcast over a's rows. */
static uint32_t vk_operand_row_stride(vk_call *call, const gllmk_tensor *t, const gllmk_tensor *a) {
  if (t->ndim == 1 && a->ndim > 1) return 0;
  return vk_call_u32(call, gllmk_plugin_as_rows(t).row_stride, "a row stride");
}

/* out = f(a, b, c) over a's rows; b and c may be NULL. */
static gllmk_status vk_elementwise(gllmk_plugin_device *dev, uint32_t op, const gllmk_tensor *out,
                                   const gllmk_tensor *a, const gllmk_tensor *b,
                                   const gllmk_tensor *c) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_elementwise, out->dtype, VK_ELEMENTWISE_GROUP);
  call.key.variant = op;
  gllmk_plugin_rows o = gllmk_plugin_as_rows(out);
  struct {
    uint32_t count, cols, out_offset, out_row_stride, a_offset, a_row_stride, b_offset,
        b_row_stride, c_offset, c_row_stride, dense;
  } push;
  memset(&push, 0, sizeof push);
  push.count = vk_call_u32(&call, o.rows * o.cols, "the element count");
  push.cols = (uint32_t)o.cols;
  push.out_offset = vk_call_tensor(&call, 0, out);
  push.out_row_stride = vk_call_u32(&call, o.row_stride, "a row stride");
  push.a_offset = vk_call_tensor(&call, 1, a);
  push.a_row_stride = vk_operand_row_stride(&call, a, out);
  if (b) {
    push.b_offset = vk_call_tensor(&call, 2, b);
    push.b_row_stride = vk_operand_row_stride(&call, b, out);
  }
  if (c) {
    push.c_offset = vk_call_tensor(&call, 3, c);
    push.c_row_stride = vk_operand_row_stride(&call, c, out);
  }
  /* Dense everywhere: out's rows are back to back and so are the operands'. */
  push.dense = o.rows == 1 || (push.out_row_stride == push.cols && push.a_row_stride == push.cols &&
                              (!b || push.b_row_stride == push.cols) &&
                              (!c || push.c_row_stride == push.cols));
  /* 8 elements per invocation where every operand's vectors are whole: all
   * dense (taken as one row), or rows of whole vectors. */
  uint32_t multiples = push.out_offset | push.a_offset | push.b_offset | push.c_offset;
  if (!push.dense)
    multiples |= push.cols | push.out_row_stride | push.a_row_stride | push.b_row_stride |
                 push.c_row_stride;
  uint64_t items = push.count;
  if (multiples % 8 == 0) {
    call.key.extra[0] = 1;
    if (push.dense) push.cols = push.count; /* one row */
    items = push.count / 8 + push.cols % 8;
  }
  return vk_call_run(&call, &push, sizeof push, vk_groups(items, VK_ELEMENTWISE_GROUP), 1, 1);
}

gllmk_status vk_add(gllmk_plugin_device *dev, const gllmk_add_args *args) {
  return vk_elementwise(dev, VK_EW_ADD, args->out, args->a, args->b, NULL);
}

gllmk_status vk_mul(gllmk_plugin_device *dev, const gllmk_mul_args *args) {
  return vk_elementwise(dev, VK_EW_MUL, args->out, args->a, args->b, NULL);
}

gllmk_status vk_mul_add(gllmk_plugin_device *dev, const gllmk_mul_add_args *args) {
  return vk_elementwise(dev, VK_EW_MUL_ADD, args->out, args->a, args->b, args->c);
}

gllmk_status vk_silu(gllmk_plugin_device *dev, const gllmk_silu_args *args) {
  return vk_elementwise(dev, VK_EW_SILU, args->out, args->x, NULL, NULL);
}

gllmk_status vk_gelu(gllmk_plugin_device *dev, const gllmk_gelu_args *args) {
  uint32_t op = args->kind == GLLMK_GELU_TANH ? VK_EW_GELU_TANH : VK_EW_GELU_ERF;
  return vk_elementwise(dev, op, args->out, args->x, NULL, NULL);
}

gllmk_status vk_add_gelu(gllmk_plugin_device *dev, const gllmk_add_gelu_args *args) {
  uint32_t op = args->kind == GLLMK_GELU_TANH ? VK_EW_ADD_GELU_TANH : VK_EW_ADD_GELU_ERF;
  return vk_elementwise(dev, op, args->out, args->x, args->bias, NULL);
}

gllmk_status vk_swiglu(gllmk_plugin_device *dev, const gllmk_swiglu_args *args) {
  return vk_elementwise(dev, VK_EW_SWIGLU, args->out, args->gate, args->up, NULL);
}
