#version 450
/* Elementwise ops over rows: out = f(a, b, c). b and c may broadcast over
 * rows (row stride 0). VARIANT picks f.
 *
 * VECTORS = 0: one element per step; when every operand is dense
 * (dense != 0) the element index is used as is, without a division.
 * VECTORS = 1: 8 elements per step through 16-byte words. The host asks for
 * it when every offset and row stride is a multiple of 8 and either cols is
 * too (rows of whole vectors) or all operands are dense, which it passes as
 * one row of `count` elements whose last count % 8 go one by one. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;

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

const bool USES_B = VARIANT == OP_ADD || VARIANT == OP_MUL || VARIANT == OP_MUL_ADD ||
                    VARIANT == OP_ADD_GELU_ERF || VARIANT == OP_ADD_GELU_TANH ||
                    VARIANT == OP_SWIGLU;
const bool USES_C = VARIANT == OP_MUL_ADD;

float apply(float x, float y, float z) {
  switch (VARIANT) {
    case OP_ADD: return x + y;
    case OP_MUL: return x * y;
    case OP_MUL_ADD: return x * y + z;
    case OP_SILU: return x * sigmoid(x);
    case OP_GELU_ERF: return gelu_erf(x, DTYPE);
    case OP_GELU_TANH: return gelu_tanh(x, DTYPE);
    case OP_ADD_GELU_ERF: return gelu_erf(x + y, DTYPE);
    case OP_ADD_GELU_TANH: return gelu_tanh(x + y, DTYPE);
    default: return x * sigmoid(x) * y;
  }
}

void element(uint row, uint col) {
  float x = a_load(p.a_offset + row * p.a_row_stride + col);
  float y = USES_B ? b_load(p.b_offset + row * p.b_row_stride + col) : 0.0;
  float z = USES_C ? c_load(p.c_offset + row * p.c_row_stride + col) : 0.0;
  dst_store(p.out_offset + row * p.out_row_stride + col, apply(x, y, z));
}

/* Elements col .. col + 7 of a row (col a multiple of 8). */
void vector8(uint row, uint col) {
  float x[8], y[8], z[8], r[8];
  a_load8(p.a_offset + row * p.a_row_stride + col, x);
  if (USES_B) b_load8(p.b_offset + row * p.b_row_stride + col, y);
  if (USES_C) c_load8(p.c_offset + row * p.c_row_stride + col, z);
  [[unroll]] for (uint k = 0u; k < 8u; k++)
    r[k] = apply(x[k], USES_B ? y[k] : 0.0, USES_C ? z[k] : 0.0);
  dst_store8(p.out_offset + row * p.out_row_stride + col, r);
}

void main() {
  uint first = gl_GlobalInvocationID.x;
  if (VECTORS != 0u) {
    uint per_row = p.cols / 8u, units = (p.count / p.cols) * per_row;
    for (uint u = first; u < units; u += grid_threads()) {
      uint row = u / per_row;
      vector8(row, 8u * (u - row * per_row));
    }
    /* A single row's last cols % 8 elements. */
    for (uint col = 8u * per_row + first; col < p.cols; col += grid_threads()) element(0u, col);
    return;
  }
  for (uint n = first; n < p.count; n += grid_threads()) {
    uint row = 0u, col = n;
    if (p.dense == 0u) {
      row = n / p.cols;
      col = n - row * p.cols;
    }
    element(row, col);
  }
}
