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

/* -g modulo 2^64 for g = (lo, hi). */
uvec2 negated(uvec2 g) {
  uvec2 n = ~g;
  n.x += 1u;
  if (n.x == 0u) n.y += 1u;
  return n;
}

/* Bits s .. s + 31 of the 160-bit number w (little-endian words; bits
 * outside it read 0, s may be negative). Constant indices only. */
uint bits_at(uint w[5], int s) {
  int q = s >> 5; /* floor(s / 32) */
  uint r = uint(s & 31), lo = 0u, hi = 0u;
  [[unroll]] for (int k = 0; k < 5; k++) {
    if (k == q) lo = w[k];
    if (k == q + 1) hi = w[k];
  }
  return r == 0u ? lo : (lo >> r) | (hi << (32u - r));
}

/* f radians per position as turns per position, the 64-bit binary fraction
 * rotation() takes (whole turns dropped: they do not move an integer
 * position), from f's bits alone: f = m 2^(e - 150) with a 24-bit m, times
 * 2^128 / (2 pi) held in 128 bits, is a 152-bit product P whose bits
 * 214 - e .. 277 - e are that fraction. The truncated 1/(2 pi) errs by less
 * than 2^-80 turns for |f| < 2^24, so the fraction is as exact as the host's
 * table for theta (truncated to 2^-64). */
uvec2 turns_of(float f) {
  const uint inv_two_pi[4] = uint[4](0x7d4d3770u, 0x7f09d5f4u, 0x9391054au, 0x28be60dbu);
  uint bits = floatBitsToUint(f);
  uint e = (bits >> 23) & 0xffu, m = bits & 0x7fffffu;
  if (e != 0u) m |= 0x800000u; else e = 1u; /* a subnormal: no implicit bit */
  uint product[5], carry = 0u;
  [[unroll]] for (int i = 0; i < 4; i++) {
    uint hi, lo;
    umulExtended(m, inv_two_pi[i], hi, lo);
    product[i] = lo + carry;
    carry = hi + (product[i] < lo ? 1u : 0u); /* hi < 2^24: no overflow */
  }
  product[4] = carry;
  int s = 214 - int(e);
  uvec2 g = uvec2(bits_at(product, s), bits_at(product, s + 32));
  return (bits >> 31) != 0u ? negated(g) : g;
}

/* Turns per position of pair j. */
uvec2 pair_turns(uint j) {
  return INV_FREQ != 0u ? turns_of(inv_freq[p.freq_offset + j]) : turns_per_position[j];
}

/* sin and cos of z for |z| <= pi/4 (Taylor series, error < 2e-9). */
vec2 sincos_small(float z) {
  float z2 = z * z;
  float s = z * (1.0 + z2 * (-1.0 / 6.0 + z2 * (1.0 / 120.0 + z2 * (-1.0 / 5040.0 +
            z2 * (1.0 / 362880.0)))));
  float c = 1.0 + z2 * (-0.5 + z2 * (1.0 / 24.0 + z2 * (-1.0 / 720.0 + z2 * (1.0 / 40320.0 +
            z2 * (-1.0 / 3628800.0)))));
  return vec2(s, c);
}

/* (sin, cos) of 2 pi * frac(position * G / 2^64). */
vec2 rotation(int position, uvec2 g) {
  uint n = uint(abs(position));
  uint hi0, lo0, hi1, lo1;
  umulExtended(n, g.x, hi0, lo0);
  umulExtended(n, g.y, hi1, lo1);
  /* position * G mod 2^64 = (lo1 + hi0) * 2^32 + lo0 */
  uvec2 fraction = uvec2(lo0, lo1 + hi0);
  if (position < 0) fraction = negated(fraction);
  uint top = fraction.y, low = fraction.x;
  /* Nearest quarter turn from the top two bits (after adding 1/8 turn); the
   * rest is a signed fraction of at most 1/8 turn. */
  uint shifted = top + 0x20000000u;
  int quadrant = int(shifted >> 30);
  int rest = int(shifted & 0x3fffffffu) - 0x20000000;
  float turns = (float(rest) + float(low) * (1.0 / 4294967296.0)) * (1.0 / 4294967296.0);
  vec2 sc = sincos_small(turns * 6.283185307179586);
  if (quadrant == 1) return vec2(sc.y, -sc.x);
  if (quadrant == 2) return vec2(-sc.x, -sc.y);
  if (quadrant == 3) return vec2(-sc.y, sc.x);
  return sc;
}

/* The pair (x0, x1) turned by the angle whose (sin, cos) is sc. */
vec2 turned(float x0, float x1, vec2 sc) {
  return vec2(x0 * sc.y - x1 * sc.x, x1 * sc.y + x0 * sc.x);
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
