#version 450
/* sample: one token per row of logits.
 *
 * Follows the cpu backend's definition (plugins/cpu/sample.c) in F32:
 * y = logits / temperature (NaN -> -inf); the filters keep the largest y:
 *   top_k  the k largest (ties with the k-th are kept too),
 *   top_p  then the fewest largest whose probability mass within the top_k
 *          set reaches top_p,
 *   min_p  then those with p >= min_p * p_max.
 * Thresholds are found by a search over order-preserving 32-bit keys of y,
 * 4 bits a pass (8 passes over the row each), so nothing is sorted. The token is
 * drawn by inverting the cumulative weight in index order at u * W, u from
 * Philox-4x32-10 with key seed and counter (offset, row) as the cpu backend
 * forms it. temperature 0, top_k 1 or a row without a finite logit give
 * the argmax.
 *
 * VARIANT 0: one workgroup per row; 1: one invocation per row (short rows). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

FLOAT_IN(x, 0, DTYPE)
layout(std430, binding = 1) writeonly buffer Out { int out_i32[]; };

layout(push_constant) uniform Push {
  uint rows, cols;
  uint x_offset, x_row_stride;
  uint out_offset, out_cols, out_row_stride;
  float temperature, top_p, min_p;
  uint top_k;
  uint seed_lo, seed_hi, offset_lo, offset_hi;
} p;

/* sample.comp needs row_argmax only for greedy rows and rows of -inf; with
 * its subgroup reduction, sampling itself ran 6% slower on an H100 ([1,
 * 128256]: 679-686 us against 639-650). */
#define ARGMAX_BY_TREE
#include "sample_row_argmax.glsl"

const bool PER_THREAD = VARIANT == 1u;

shared float part_sum[gl_WorkGroupSize.x];
shared uint part_last[gl_WorkGroupSize.x];
shared uint chosen_thread;
shared float chosen_base;

/* ----------------------------------------------- one row, two ways */

uint first_col() {
  if (PER_THREAD) return 0u;
  return gl_LocalInvocationIndex;
}
uint col_step() {
  if (PER_THREAD) return 1u;
  return gl_WorkGroupSize.x;
}
float row_sum(float v) {
  if (PER_THREAD) return v;
  return wg_sum(v);
}
float row_max(float v) {
  if (PER_THREAD) return v;
  return wg_max(v);
}

/* ----------------------------------------------------------- pieces */

/* Order-preserving map of a float to uint. */
uint sort_key(float f) {
  uint b = floatBitsToUint(f);
  return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}

float scaled(uint xo, uint c, float inv_t) {
  float v = x_load(xo + c);
  return isnan(v) ? NEG_INF : v * inv_t;
}

uvec4 philox4x32_10(uvec4 ctr, uvec2 key) {
  for (int i = 0; i < 10; i++) {
    uint hi0, lo0, hi1, lo1;
    umulExtended(0xD2511F53u, ctr.x, hi0, lo0);
    umulExtended(0xCD9E8D57u, ctr.z, hi1, lo1);
    ctr = uvec4(hi1 ^ ctr.y ^ key.x, lo1, hi0 ^ ctr.w ^ key.y, lo0);
    key += uvec2(0x9E3779B9u, 0xBB67AE85u);
  }
  return ctr;
}

/* Thresholds are found DIGIT_BITS bits a pass: 8 passes over the row per
 * search instead of 32. */
const uint DIGIT_BITS = 4u, DIGITS = 1u << DIGIT_BITS;

/* The workgroup-wide sum of each of s[0..DIGITS), added in the order
 * row_sum adds one value: the same sums as DIGITS calls of it. */
#if SUBGROUPS
shared float digit_scratch[DIGITS * (gl_WorkGroupSize.x / 4u)]; /* per subgroup of at least 4 */
#endif
void row_sums(inout float s[DIGITS]) {
  if (PER_THREAD) return;
#if SUBGROUPS
  const uint stride = gl_WorkGroupSize.x / 4u;
  [[unroll]] for (uint d = 0u; d < DIGITS; d++) s[d] = subgroupAdd(s[d]);
  barrier();
  if (subgroupElect())
    [[unroll]] for (uint d = 0u; d < DIGITS; d++) digit_scratch[d * stride + gl_SubgroupID] = s[d];
  barrier();
  [[unroll]] for (uint d = 0u; d < DIGITS; d++) {
    float total = 0.0;
    for (uint g = 0u; g < gl_NumSubgroups; g++) total += digit_scratch[d * stride + g];
    s[d] = total;
  }
#else
  [[unroll]] for (uint d = 0u; d < DIGITS; d++) s[d] = wg_sum(s[d]);
#endif
}

/* The largest key t with measure(max(t, floor_key)) >= target, where the
 * measure is the count (by_mass false) or the weight exp(y - m) (by_mass
 * true) of the elements with a key at least that; floor_key where none is.
 * Each pass settles the next digit of t: s[d] is the measure at
 * max(prefix | d << shift, floor_key), so a key adds to s[0..D] for its own
 * digit D (DIGITS - 1 when its higher digits exceed the prefix's). The
 * measure is monotone in t, so the digit is the largest d that reaches the
 * target, and the sums equal those of a search one bit at a time. */
uint search_threshold(uint xo, float inv_t, float m, uint floor_key, bool by_mass, float target) {
  uint prefix = 0u;
  for (uint shift = 32u - DIGIT_BITS;; shift -= DIGIT_BITS) {
    uint lowest = max(prefix, floor_key), high = shift + DIGIT_BITS;
    float s[DIGITS];
    [[unroll]] for (uint d = 0u; d < DIGITS; d++) s[d] = 0.0;
    for (uint c = first_col(); c < p.cols; c += col_step()) {
      float y = scaled(xo, c, inv_t);
      uint key = sort_key(y);
      if (key < lowest) continue;
      bool above = high < 32u && (key >> high) != (prefix >> high);
      uint digit = above ? DIGITS - 1u : (key >> shift) & (DIGITS - 1u);
      float w = by_mass ? exp(y - m) : 1.0;
      [[unroll]] for (uint d = 0u; d < DIGITS; d++)
        if (digit >= d) s[d] += w;
    }
    row_sums(s);
    uint best = 0u;
    [[unroll]] for (uint d = 1u; d < DIGITS; d++)
      if (s[d] >= target) best = d;
    prefix |= best << shift;
    if (shift == 0u) break;
  }
  return max(prefix, floor_key);
}

float kept_weight(float y, float m, uint floor_key) {
  if (sort_key(y) < floor_key) return 0.0;
  float w = exp(y - m);
  return (p.min_p > 0.0 && w < p.min_p) ? 0.0 : w;
}

/* Uniform in [0, 1) with 24 random bits: the top bits of the cpu backend's
 * 53-bit draw from the same Philox output. */
float uniform01(uint row) {
  uvec4 r = philox4x32_10(uvec4(p.offset_lo, p.offset_hi, row, 0u), uvec2(p.seed_lo, p.seed_hi));
  return float(r.x >> 8) * (1.0 / 16777216.0);
}

/* The first kept token whose cumulative weight passes `target`, by one
 * invocation (the last kept token of weight > 0 if rounding leaves none). */
uint draw_serial(uint xo, float inv_t, float m, uint floor_key, uint begin, uint end,
                 float target, uint fallback) {
  float acc = 0.0;
  for (uint c = begin; c < end; c++) {
    float w = kept_weight(scaled(xo, c, inv_t), m, floor_key);
    acc += w;
    if (w > 0.0 && target < acc) return c;
  }
  return fallback;
}

/* The same over the whole row by the workgroup: each invocation owns a
 * contiguous chunk, so the cumulative weight still runs in index order. */
uint draw_workgroup(uint xo, float inv_t, float m, uint floor_key, float u) {
  uint t = gl_LocalInvocationIndex;
  uint chunk = (p.cols + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;
  uint begin = min(t * chunk, p.cols), end = min(begin + chunk, p.cols);
  float s = 0.0;
  uint last = NO_INDEX;
  for (uint c = begin; c < end; c++) {
    float w = kept_weight(scaled(xo, c, inv_t), m, floor_key);
    if (w > 0.0) last = c;
    s += w;
  }
  barrier();
  part_sum[t] = s;
  part_last[t] = last;
  barrier();
  if (t == 0u) {
    float total = 0.0;
    for (uint i = 0u; i < gl_WorkGroupSize.x; i++) total += part_sum[i];
    float target = u * total, base = 0.0;
    uint pick = NO_INDEX, last_nonempty = 0u;
    for (uint i = 0u; i < gl_WorkGroupSize.x && pick == NO_INDEX; i++) {
      if (part_last[i] == NO_INDEX) continue;
      last_nonempty = i;
      if (target < base + part_sum[i]) pick = i;
      else base += part_sum[i];
    }
    chosen_thread = pick == NO_INDEX ? last_nonempty : pick;
    chosen_base = pick == NO_INDEX ? POS_INF : target - base; /* the draw within the chunk */
  }
  barrier();
  if (t == chosen_thread) {
    uint token = isinf(chosen_base) ? last
                 : draw_serial(xo, inv_t, m, floor_key, begin, end, chosen_base, last);
    part_last[0] = token;
  }
  barrier();
  return part_last[0];
}

uint sample_row(uint xo, uint row) {
  float inv_t = 1.0 / p.temperature;
  float m = NEG_INF;
  for (uint c = first_col(); c < p.cols; c += col_step()) m = max(m, scaled(xo, c, inv_t));
  m = row_max(m);
  if (m == NEG_INF) {
    if (PER_THREAD) return row_argmax_serial(xo, p.cols);
    return row_argmax(xo, p.cols);
  }

  uint floor_key = 0u;
  if (p.top_k > 0u && p.top_k < p.cols)
    floor_key = search_threshold(xo, inv_t, m, 0u, false, float(p.top_k));
  if (p.top_p < 1.0) {
    float s = 0.0;
    for (uint c = first_col(); c < p.cols; c += col_step()) {
      float y = scaled(xo, c, inv_t);
      if (sort_key(y) >= floor_key) s += exp(y - m);
    }
    floor_key = search_threshold(xo, inv_t, m, floor_key, true, p.top_p * row_sum(s));
  }

  float u = uniform01(row);
  if (!PER_THREAD) return draw_workgroup(xo, inv_t, m, floor_key, u);
  float total = 0.0;
  uint last = 0u;
  for (uint c = 0u; c < p.cols; c++) {
    float w = kept_weight(scaled(xo, c, inv_t), m, floor_key);
    if (w > 0.0) last = c;
    total += w;
  }
  return draw_serial(xo, inv_t, m, floor_key, 0u, p.cols, u * total, last);
}

void write_token(uint row, uint token) {
  uint orow = row / p.out_cols;
  out_i32[p.out_offset + orow * p.out_row_stride + (row - orow * p.out_cols)] = int(token);
}

void main() {
  bool greedy = !(p.temperature > 0.0) || p.top_k == 1u;
  if (PER_THREAD) {
    for (uint row = gl_GlobalInvocationID.x; row < p.rows; row += grid_threads()) {
      uint xo = p.x_offset + row * p.x_row_stride;
      write_token(row, greedy ? row_argmax_serial(xo, p.cols) : sample_row(xo, row));
    }
    return;
  }
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xo = p.x_offset + row * p.x_row_stride;
    uint token = greedy ? row_argmax(xo, p.cols) : sample_row(xo, row);
    if (gl_LocalInvocationIndex == 0u) write_token(row, token);
    barrier();
  }
}
