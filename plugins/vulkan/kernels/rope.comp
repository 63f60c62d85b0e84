#version 450
/* rope on x [tokens, heads, head_dim]. One invocation per rotated pair or
 * per copied element. VARIANT 0 = NeoX (half split), 1 = GPT-J (interleaved).
 *
 * Angles are exact to about 2^-33 turns for any position: the host passes
 * each pair's frequency in turns per position as a 64-bit binary fraction G
 * (computed in double), and the kernel forms position * G modulo 1 turn with
 * 32-bit integer products. The quadrant comes from the top bits, and sin/cos
 * of the rest (at most pi/4) from polynomials, so no device's own sin, cos
 * or fma accuracy matters. With INV_FREQ = 1 the caller gave each pair's
 * frequency (F32 radians per position, binding 4) and the kernel forms that
 * fraction itself from the float's bits with integer products (turns_of).
 *
 * VECTORS = 1 (rotary_dim a multiple of 16, head_dim - rotary_dim, offsets
 * and strides multiples of 8): an invocation takes 8 pairs, or 8 copied
 * elements, in HEADS heads of one token, through 16-byte words; the 8
 * rotations are computed once for all those heads. The pairs of a step are
 * x[a + k], x[a + pairs + k] (NeoX, a = 8 * step) or x[a + 2k], x[a + 2k + 1]
 * (GPT-J, a = 16 * step), k < 8: two vectors of 8 either way. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;
layout(constant_id = 5) const uint HEADS = 4u; /* heads per invocation (VECTORS = 1) */
layout(constant_id = 6) const uint INV_FREQ = 0u; /* 1: the caller's frequencies */
const uint HEADS_MAX = 4u;

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(x, 1, DTYPE)
INT_IN(pos, 2)
layout(std430, binding = 3) readonly buffer Freq { uvec2 turns_per_position[]; }; /* (lo, hi) */
layout(std430, binding = 4) readonly buffer InvFreq { float inv_freq[]; }; /* INV_FREQ = 1 */

layout(push_constant) uniform Push {
  uint count;       /* tokens * heads * units_per_row (VECTORS = 1: tokens *
                       ceil(heads / HEADS) * units_per_row) */
  uint units_per_row, heads, rotary_dim;
  uint out_offset, out_token_stride, out_head_stride;
  uint x_offset, x_token_stride, x_head_stride;
  uint pos_offset, pos_stride;
  uint freq_offset; /* INV_FREQ = 1 */
} p;

#include "rope_turns.glsl"

/* Turns per position of pair j. */
uvec2 pair_turns(uint j) {
  return INV_FREQ != 0u ? turns_of(inv_freq[p.freq_offset + j]) : turns_per_position[j];
}

/* Step `unit` of token `token` in heads h0 .. h0 + HEADS - 1 (VECTORS = 1).
 * Every head's loads go out before the rotations are computed, so that their
 * latency overlaps that arithmetic and one another (a store may not move
 * above a later load: x and dst may be one buffer). */
void rotate8(uint token, uint h0, uint unit) {
  uint pairs = p.rotary_dim / 2u, steps = pairs / 8u;
  bool copied = unit >= steps; /* past the rotary part */
  uint first = VARIANT == 0u ? 8u * unit : 16u * unit;
  uint second = VARIANT == 0u ? first + pairs : first + 8u;
  if (copied) {
    first = p.rotary_dim + 8u * (unit - steps);
    second = first;
  }
  float a[HEADS_MAX][8], b[HEADS_MAX][8];
  [[unroll]] for (uint k = 0u; k < HEADS_MAX; k++) {
    uint h = h0 + k;
    if (k < HEADS && h < p.heads) {
      uint xo = p.x_offset + token * p.x_token_stride + h * p.x_head_stride;
      x_load8(xo + first, a[k]);
      if (!copied) x_load8(xo + second, b[k]);
    }
  }
  vec2 turn[8];
  if (!copied) {
    int position = pos_i32[p.pos_offset + token * p.pos_stride];
    [[unroll]] for (uint k = 0u; k < 8u; k++)
      turn[k] = rotation(position, pair_turns(8u * unit + k));
  }
  [[unroll]] for (uint k = 0u; k < HEADS_MAX; k++) {
    uint h = h0 + k;
    if (k >= HEADS || h >= p.heads) continue;
    uint oo = p.out_offset + token * p.out_token_stride + h * p.out_head_stride;
    if (copied) {
      dst_store8(oo + first, a[k]);
      continue;
    }
    float ra[8], rb[8];
    if (VARIANT == 0u) {
      [[unroll]] for (uint i = 0u; i < 8u; i++) {
        vec2 y = turned(a[k][i], b[k][i], turn[i]);
        ra[i] = y.x;
        rb[i] = y.y;
      }
    } else {
      [[unroll]] for (uint i = 0u; i < 4u; i++) {
        vec2 y = turned(a[k][2u * i], a[k][2u * i + 1u], turn[i]);
        ra[2u * i] = y.x;
        ra[2u * i + 1u] = y.y;
        y = turned(b[k][2u * i], b[k][2u * i + 1u], turn[4u + i]);
        rb[2u * i] = y.x;
        rb[2u * i + 1u] = y.y;
      }
    }
    dst_store8(oo + first, ra);
    dst_store8(oo + second, rb);
  }
}

void main() {
  if (VECTORS != 0u) {
    uint blocks = (p.heads + HEADS - 1u) / HEADS;
    for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
      uint row = n / p.units_per_row; /* token * blocks + block */
      uint token = row / blocks;
      rotate8(token, HEADS * (row - token * blocks), n - row * p.units_per_row);
    }
    return;
  }
  uint pairs = p.rotary_dim / 2u;
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint row = n / p.units_per_row;
    uint unit = n - row * p.units_per_row;
    uint token = row / p.heads;
    uint head = row - token * p.heads;
    uint xo = p.x_offset + token * p.x_token_stride + head * p.x_head_stride;
    uint oo = p.out_offset + token * p.out_token_stride + head * p.out_head_stride;
    if (unit >= pairs) { /* past the rotary part: copy one element */
      uint col = p.rotary_dim + (unit - pairs);
      dst_store(oo + col, x_load(xo + col));
      continue;
    }
    uint i0 = VARIANT == 0u ? unit : 2u * unit;
    uint i1 = VARIANT == 0u ? unit + pairs : 2u * unit + 1u;
    vec2 sc = rotation(pos_i32[p.pos_offset + token * p.pos_stride], pair_turns(unit));
    float x0 = x_load(xo + i0);
    float x1 = x_load(xo + i1);
    dst_store(oo + i0, x0 * sc.y - x1 * sc.x);
    dst_store(oo + i1, x1 * sc.y + x0 * sc.x);
  }
}
