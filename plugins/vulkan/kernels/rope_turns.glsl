/* rope_turns.glsl - the angles of a rope, exact to about 2^-33 turns for
 * any position (rope.comp's header says how), for rope.comp and for
 * matmul_gemv.comp's rope on the output. */
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

