#version 450
/* argmax per row (see row_argmax.glsl); one workgroup per row. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

FLOAT_IN(x, 0, DTYPE)
layout(std430, binding = 1) writeonly buffer Out { int out_i32[]; };

layout(push_constant) uniform Push {
  uint rows, cols;
  uint x_offset, x_row_stride;
  uint out_offset, out_cols, out_row_stride; /* out as rows of out_cols */
} p;

#include "row_argmax.glsl"

void main() {
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint best = row_argmax(p.x_offset + row * p.x_row_stride, p.cols);
    uint orow = row / p.out_cols;
    if (gl_LocalInvocationIndex == 0u)
      out_i32[p.out_offset + orow * p.out_row_stride + (row - orow * p.out_cols)] = int(best);
  }
}
