#version 450
/* copy: out (DTYPE_OUT, row-strided) = src (DTYPE, any strides). The same
 * dtype on both sides copies the bits (NaN payloads and I32 included). */
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

void main() {
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint o = p.out_offset + n;
    if (p.out_row_stride != p.cols) {
      uint row = n / p.cols;
      o = p.out_offset + row * p.out_row_stride + (n - row * p.cols);
    }
    uint s = src_index(n);
    if (DTYPE == DTYPE_OUT && (DTYPE == DT_F32 || DTYPE == DT_I32))
      dst_raw_w32[o] = src_raw_w32[s];
    else if (DTYPE == DTYPE_OUT)
      dst_raw_store16(o, src_raw_load16(s));
    else
      dst_store(o, src_load(s));
  }
}
