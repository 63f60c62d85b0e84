#version 450
/* Elementwise ops over rows: out = f(a, b, c). b and c may broadcast over
 * rows (row stride 0). VARIANT picks f. When every operand is dense
 * (dense != 0) the element index is used as is, without a division per
 * element. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

const uint OP_ADD = 0u;
const uint OP_MUL = 1u;
const uint OP_MUL_ADD = 2u;
const uint OP_SILU = 3u;
const uint OP_GELU_ERF = 4u;
const uint OP_GELU_TANH = 5u;
const uint OP_ADD_GELU_ERF = 6u;
const uint OP_ADD_GELU_TANH = 7u;
const uint OP_SWIGLU = 8u; /* a = gate, b = up */

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(a, 1, DTYPE)
FLOAT_IN(b, 2, DTYPE)
FLOAT_IN(c, 3, DTYPE)

layout(push_constant) uniform Push {
  uint count, cols;
  uint out_offset, out_row_stride;
  uint a_offset, a_row_stride;
  uint b_offset, b_row_stride;
  uint c_offset, c_row_stride;
  uint dense;
} p;

bool uses_b() { return VARIANT == OP_ADD || VARIANT == OP_MUL || VARIANT == OP_MUL_ADD ||
                       VARIANT == OP_ADD_GELU_ERF || VARIANT == OP_ADD_GELU_TANH ||
                       VARIANT == OP_SWIGLU; }

void main() {
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint row = 0u, col = n;
    if (p.dense == 0u) {
      row = n / p.cols;
      col = n - row * p.cols;
    }
    float x = a_load(p.a_offset + row * p.a_row_stride + col);
    float y = uses_b() ? b_load(p.b_offset + row * p.b_row_stride + col) : 0.0;
    float r;
    switch (VARIANT) {
      case OP_ADD: r = x + y; break;
      case OP_MUL: r = x * y; break;
      case OP_MUL_ADD: r = x * y + c_load(p.c_offset + row * p.c_row_stride + col); break;
      case OP_SILU: r = x * sigmoid(x); break;
      case OP_GELU_ERF: r = gelu_erf(x); break;
      case OP_GELU_TANH: r = gelu_tanh(x); break;
      case OP_ADD_GELU_ERF: r = gelu_erf(x + y); break;
      case OP_ADD_GELU_TANH: r = gelu_tanh(x + y); break;
      default: r = x * sigmoid(x) * y; break;
    }
    dst_store(p.out_offset + row * p.out_row_stride + col, r);
  }
}
