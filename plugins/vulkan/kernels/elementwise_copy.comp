#version 450
/* copy: out (DTYPE_OUT, row-strided) = src (DTYPE, any strides). The same
 * dtype on both sides copies the bits (NaN payloads and I32 included).
 * VARIANT 0: any layout, one element per step.
 * VARIANT 1: out and src dense from offsets that are multiples of 8: 8
 * elements per step as 16-byte words, then the last count % 8 one by one.
 * (mem_copy uses it too, on F16 "elements".) */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

FLOAT_OUT(dst, 0, DTYPE_OUT)
FLOAT_IN(src, 1, DTYPE)
RAW_OUT(dst_raw, 0)
RAW_IN(src_raw, 1)

layout(push_constant) uniform Push {
  uint count;          /* elements in total */
  uint cols;           /* out's last dim */
  uint out_offset, out_row_stride;
  uint src_offset, ndim; /* src dims after merging, outermost first */
  uint shape[8];
  uint stride[8];
} p;

const bool SAME_DTYPE = DTYPE == DTYPE_OUT;
const bool WORDS32 = DTYPE == DT_F32 || DTYPE == DT_I32;

uint src_index(uint n) {
  if (p.ndim == 1u && p.stride[0] == 1u) return p.src_offset + n; /* dense */
  uint index = p.src_offset;
  for (int d = int(p.ndim) - 1; d >= 0; d--) {
    uint extent = p.shape[d];
    index += (n % extent) * p.stride[d];
    n /= extent;
  }
  return index;
}

void copy_element(uint n) {
  uint o = p.out_offset + n;
  if (p.out_row_stride != p.cols) {
    uint row = n / p.cols;
    o = p.out_offset + row * p.out_row_stride + (n - row * p.cols);
  }
  uint s = src_index(n);
  if (SAME_DTYPE && WORDS32)
    dst_raw_w32[o] = src_raw_w32[s];
  else if (SAME_DTYPE)
    dst_raw_store16(o, src_raw_load16(s));
  else
    dst_store(o, src_load(s));
}

/* Elements n .. n + 7 of dense tensors (n a multiple of 8). */
void copy_dense8(uint n) {
  uint o = p.out_offset + n, s = p.src_offset + n;
  if (SAME_DTYPE && WORDS32) {
    dst_v[o / 4u] = src_v[s / 4u];
    dst_v[o / 4u + 1u] = src_v[s / 4u + 1u];
  } else if (SAME_DTYPE) {
    dst_v[o / 8u] = src_v[s / 8u];
  } else {
    float v[8];
    src_load8(s, v);
    dst_store8(o, v);
  }
}

void main() {
  uint n0 = gl_GlobalInvocationID.x;
  uint dense_end = 0u;
  if (VARIANT == 1u) {
    uint units = p.count / 8u;
    for (uint u = n0; u < units; u += grid_threads()) copy_dense8(8u * u);
    dense_end = 8u * units;
  }
  for (uint n = dense_end + n0; n < p.count; n += grid_threads()) copy_element(n);
}
