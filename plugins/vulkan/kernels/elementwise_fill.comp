#version 450
/* fill: out (row-strided) = a bit pattern the host converted to out's dtype. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

RAW_OUT(dst, 0)

layout(push_constant) uniform Push {
  uint count, cols, out_offset, out_row_stride;
  uint bits;
} p;

void main() {
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint o = p.out_offset + n;
    if (p.out_row_stride != p.cols) {
      uint row = n / p.cols;
      o = p.out_offset + row * p.out_row_stride + (n - row * p.cols);
    }
    if (DTYPE == DT_F32 || DTYPE == DT_I32)
      dst_w32[o] = p.bits;
    else
      dst_store16(o, p.bits);
  }
}
