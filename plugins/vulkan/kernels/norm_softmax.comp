#version 450
/* softmax(scale * x) over rows too long for norm.comp's registers (a
 * vocabulary: 128256 elements are 501 KiB of F32, 250 KiB of BF16), one
 * workgroup per row, rows in 16-byte words (cols * element size, offsets
 * and row strides multiples of 16 bytes).
 *
 * Word m of a row goes to invocation m % workgroup size. Each invocation
 * keeps its first REGS words in registers and the next STASH words in
 * shared memory (slots only it touches, so no barrier), which are read from
 * memory once; only the words past those are read a second time. The host
 * sizes the workgroup and REGS to fill one compute unit's registers and
 * STASH to its shared memory, so that one workgroup per compute unit holds
 * much of its row on chip: on an NVIDIA H100 about half of an F32
 * vocabulary row and two thirds of a BF16 one (which measured faster than
 * holding 90% of it, the host's VK_SOFTMAX_REGS_16BIT). The words read twice are
 * read last in the first pass and first (newest first) in the second, so
 * that the ones still in the L2 cache are used before they go.
 *
 * The first pass keeps a running maximum and a sum of exponentials rescaled
 * when the maximum grows (common.glsl's softmax_fold, as norm.comp). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

const uint REGS_MAX = 32u;
layout(constant_id = 4) const uint REGS = 16u;  /* words in registers, <= REGS_MAX */
layout(constant_id = 5) const uint STASH = 0u;  /* words in shared memory */

/* Elements per 16-byte word. */
const uint PER_WORD = DTYPE == DT_F32 ? 4u : 8u;

layout(std430, binding = 0) buffer Dst { uvec4 dst_w[]; };
layout(std430, binding = 1) readonly buffer Src { uvec4 x_w[]; };

layout(push_constant) uniform Push {
  uint rows, cols;
  uint out_offset, out_row_stride;
  uint x_offset, x_row_stride;
  uint w_offset, bias_offset;
  uint res_offset, res_row_stride;
  float eps, scale;
} p;

shared uvec4 stash[STASH * gl_WorkGroupSize.x + 1u]; /* + 1: never empty */

/* The scaled values of a word in log2 units (F32: the first 4 of v). */
void values(uvec4 w, out float v[8]) {
  if (DTYPE == DT_F32) {
    vec4 f = uintBitsToFloat(w) * (p.scale * LOG2E);
    v = float[8](f.x, f.y, f.z, f.w, 0.0, 0.0, 0.0, 0.0);
  } else {
    halves_to_f32(w, DTYPE, v);
    [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] *= p.scale * LOG2E;
  }
}

/* Folds a word into the running maximum m and sum s of exp2(v - m). */
void gather(uvec4 w, inout float m, inout float s) {
  float v[8];
  values(w, v);
  softmax_fold(v, PER_WORD, m, s);
}

/* BF16 words of softmax results, rounded to nearest even like
 * f32_to_bf16_bits in fewer operations (on an H200, with exp2 in log2
 * units, [262, 128256] took 57.5 us against 60.3): the values are >= 0 or
 * NaN, so min() turns every NaN into the quiet 0x7fc00000 and the rounding
 * add cannot carry out of the word. */
uvec4 probabilities_to_bf16(float v[8]) {
  uvec4 w;
  [[unroll]] for (uint k = 0u; k < 4u; k++) {
    uvec2 b = min(floatBitsToUint(vec2(v[2u * k], v[2u * k + 1u])), uvec2(0x7fc00000u));
    b += 0x7fffu + ((b >> 16) & 1u);
    w[k] = (b.x >> 16) | (b.y & 0xffff0000u);
  }
  return w;
}

/* The output word of a source word: exp2(v - shift) * factor. */
uvec4 finish(uvec4 w, float shift, float factor) {
  float v[8];
  values(w, v);
  [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] = exp2(v[k] - shift) * factor;
  if (DTYPE == DT_F32) return floatBitsToUint(vec4(v[0], v[1], v[2], v[3]));
  if (DTYPE == DT_BF16) return probabilities_to_bf16(v);
  return f32_to_halves(v, DTYPE);
}

void main() {
  uint t = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
  uint words = p.cols / PER_WORD;
  uint on_chip = (REGS + STASH) * step; /* words of a row held on chip */
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xo = (p.x_offset + row * p.x_row_stride) / PER_WORD;
    uint oo = (p.out_offset + row * p.out_row_stride) / PER_WORD;
    uvec4 reg[REGS_MAX];
    /* All register loads go out before any is used. */
    [[unroll]] for (uint j = 0u; j < REGS_MAX; j++)
      if (j < REGS && j * step + t < words) reg[j] = x_w[xo + j * step + t];
    for (uint j = 0u; j < STASH; j++)
      if ((REGS + j) * step + t < words) stash[j * step + t] = x_w[xo + (REGS + j) * step + t];
    float m = NEG_INF, s = 0.0;
    [[unroll]] for (uint j = 0u; j < REGS_MAX; j++)
      if (j < REGS && j * step + t < words) gather(reg[j], m, s);
    for (uint j = 0u; j < STASH; j++)
      if ((REGS + j) * step + t < words) gather(stash[j * step + t], m, s);
    /* The rest, two words in flight. */
    uint u = on_chip + t;
    for (; u + step < words; u += 2u * step) {
      uvec4 a = x_w[xo + u], b = x_w[xo + u + step];
      gather(a, m, s);
      gather(b, m, s);
    }
    if (u < words) gather(x_w[xo + u], m, s);

    float shift = wg_max(m);
    float factor = 1.0 / wg_sum(m == NEG_INF ? 0.0 : s * exp2(m - shift));

    /* The words read twice, newest first: this invocation's last one down,
     * both loads of a pair before either store (x and out may be the same
     * buffer; each word is read and written by this invocation only). One
     * load at a time waited on the L2 cache once per word: on an H100 [131,
     * 128256] f32 took 68 us that way against 66. */
    uint first = on_chip + t;
    if (words > first) {
      uint count = (words - 1u - first) / step + 1u, v = first + (count - 1u) * step;
      for (uint i = 1u; i < count; i += 2u, v -= 2u * step) {
        uvec4 a = x_w[xo + v], b = x_w[xo + v - step];
        dst_w[oo + v] = finish(a, shift, factor);
        dst_w[oo + v - step] = finish(b, shift, factor);
      }
      if (count % 2u == 1u) dst_w[oo + first] = finish(x_w[xo + first], shift, factor);
    }
    for (uint j = 0u; j < STASH; j++)
      if ((REGS + j) * step + t < words)
        dst_w[oo + (REGS + j) * step + t] = finish(stash[j * step + t], shift, factor);
    [[unroll]] for (uint j = 0u; j < REGS_MAX; j++)
      if (j < REGS && j * step + t < words) dst_w[oo + j * step + t] = finish(reg[j], shift, factor);
  }
}
