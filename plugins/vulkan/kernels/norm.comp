#version 450
/* Row-wise reductions, one workgroup per row: rmsnorm, add_rmsnorm,
 * layernorm (with or without bias) and softmax. VARIANT picks the op.
 *
 * VECTORS = 0: one element per step, the row read again by each pass.
 * VECTORS = 1 (cols, offsets and row strides multiples of 8): 8 elements per
 * step through 16-byte words. Each invocation keeps its first CACHED vectors
 * of the row in registers, so that a row of up to 8 * CACHED * workgroup
 * size elements is read from memory once; the rest of a longer row is read
 * again by each pass. Softmax finds the maximum and the sum in one pass
 * (rescaling the partial sum when the maximum grows). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;
const uint CACHED = 4u; /* row8 handles cache[0] .. cache[3] one by one */

const uint OP_RMSNORM = 0u;
const uint OP_ADD_RMSNORM = 1u;
const uint OP_LAYERNORM = 2u;
const uint OP_LAYERNORM_BIAS = 3u;
const uint OP_SOFTMAX = 4u;

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(x, 1, DTYPE)
FLOAT_IN(w, 2, DTYPE)
FLOAT_IN(bias, 3, DTYPE)
FLOAT_OUT(res, 4, DTYPE)

layout(push_constant) uniform Push {
  uint rows, cols;
  uint out_offset, out_row_stride;
  uint x_offset, x_row_stride;
  uint w_offset, bias_offset;
  uint res_offset, res_row_stride;
  float eps, scale;
} p;

/* ------------------------------------------------ one element per step */

void rmsnorm_row(uint xo, uint oo) {
  float ss = 0.0;
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x) {
    float v = x_load(xo + c);
    ss += v * v;
  }
  float inv = 1.0 / sqrt(wg_sum(ss) / float(p.cols) + p.eps);
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x)
    dst_store(oo + c, x_load(xo + c) * inv * w_load(p.w_offset + c));
}

/* residual += x (rounded to the storage type), then rmsnorm of residual. */
void add_rmsnorm_row(uint xo, uint ro, uint oo) {
  float ss = 0.0;
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x) {
    res_store(ro + c, res_load(ro + c) + x_load(xo + c));
    float v = res_load(ro + c);
    ss += v * v;
  }
  float inv = 1.0 / sqrt(wg_sum(ss) / float(p.cols) + p.eps);
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x)
    dst_store(oo + c, res_load(ro + c) * inv * w_load(p.w_offset + c));
}

void layernorm_row(uint xo, uint oo) {
  float s = 0.0;
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x) s += x_load(xo + c);
  float mean = wg_sum(s) / float(p.cols);
  float sd = 0.0;
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x) {
    float d = x_load(xo + c) - mean;
    sd += d * d;
  }
  float inv = 1.0 / sqrt(wg_sum(sd) / float(p.cols) + p.eps);
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x) {
    float v = (x_load(xo + c) - mean) * inv * w_load(p.w_offset + c);
    if (VARIANT == OP_LAYERNORM_BIAS) v += bias_load(p.bias_offset + c);
    dst_store(oo + c, v);
  }
}

void softmax_row(uint xo, uint oo) {
  float m = NEG_INF;
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x)
    m = max(m, p.scale * x_load(xo + c));
  m = wg_max(m);
  float s = 0.0;
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x)
    s += exp(p.scale * x_load(xo + c) - m);
  float inv = 1.0 / wg_sum(s);
  for (uint c = gl_LocalInvocationID.x; c < p.cols; c += gl_WorkGroupSize.x)
    dst_store(oo + c, exp(p.scale * x_load(xo + c) - m) * inv);
}

/* ---------------------------------------------- 8 elements per step */

float cache[CACHED][8]; /* this invocation's first vectors of the row */

/* The value a pass works on: x, or for add_rmsnorm the updated residual
 * (written back here, in the first pass). */
void source8(uint xo, uint ro, uint u, out float v[8]) {
  x_load8(xo + 8u * u, v);
  if (VARIANT == OP_ADD_RMSNORM) {
    float r[8];
    res_load8(ro + 8u * u, r);
    [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] = round_to_dtype(r[k] + v[k], DTYPE);
    res_store8(ro + 8u * u, v);
  }
}

/* Source values of vector u read again (past the cached ones). */
void again8(uint xo, uint ro, uint u, out float v[8]) {
  if (VARIANT == OP_ADD_RMSNORM)
    res_load8(ro + 8u * u, v);
  else
    x_load8(xo + 8u * u, v);
}

/* Final values of vector u from its source values. */
void finish8(uint oo, uint u, float v[8], float a, float b) {
  float r[8];
  if (VARIANT == OP_SOFTMAX) {
    [[unroll]] for (uint k = 0u; k < 8u; k++) r[k] = exp2(p.scale * LOG2E * v[k] - a) * b;
  } else {
    float wv[8];
    w_load8(p.w_offset + 8u * u, wv);
    [[unroll]] for (uint k = 0u; k < 8u; k++) r[k] = (v[k] - a) * b * wv[k];
    if (VARIANT == OP_LAYERNORM_BIAS) {
      float bv[8];
      bias_load8(p.bias_offset + 8u * u, bv);
      [[unroll]] for (uint k = 0u; k < 8u; k++) r[k] += bv[k];
    }
  }
  dst_store8(oo + 8u * u, r);
}

/* Pass one's running statistic: sum of squares (rmsnorm), sum (layernorm),
 * or maximum and rescaled exponential sum (softmax) in s1, s2. */
void gather8(float v[8], inout float s1, inout float s2) {
  if (VARIANT == OP_SOFTMAX) {
    float scaled[8];
    [[unroll]] for (uint k = 0u; k < 8u; k++) scaled[k] = p.scale * LOG2E * v[k];
    softmax_fold(scaled, 8u, s1, s2);
  } else if (VARIANT == OP_RMSNORM || VARIANT == OP_ADD_RMSNORM) {
    [[unroll]] for (uint k = 0u; k < 8u; k++) s1 += v[k] * v[k];
  } else {
    [[unroll]] for (uint k = 0u; k < 8u; k++) s1 += v[k];
  }
}

/* Each pass over cached vector j, called with a literal j so that cache[]
 * is only ever indexed by constants and lives in registers (a loop over j
 * would leave it an array in memory). Vector u of this invocation is
 * t + j * step, t = the invocation, step = the workgroup size. */
void first_cached(uint j, uint xo, uint ro, uint units, inout float s1, inout float s2) {
  uint u = gl_LocalInvocationID.x + j * gl_WorkGroupSize.x;
  if (u < units) {
    source8(xo, ro, u, cache[j]);
    gather8(cache[j], s1, s2);
  }
}

float deviation_cached(uint j, uint units, float mean) {
  float sd = 0.0;
  if (gl_LocalInvocationID.x + j * gl_WorkGroupSize.x < units)
    [[unroll]] for (uint k = 0u; k < 8u; k++) sd += (cache[j][k] - mean) * (cache[j][k] - mean);
  return sd;
}

void finish_cached(uint j, uint oo, uint units, float shift, float factor) {
  uint u = gl_LocalInvocationID.x + j * gl_WorkGroupSize.x;
  if (u < units) finish8(oo, u, cache[j], shift, factor);
}

void row8(uint xo, uint ro, uint oo) {
  uint step = gl_WorkGroupSize.x, units = p.cols / 8u;
  uint uncached = gl_LocalInvocationID.x + CACHED * step; /* this invocation's first */
  float s1 = VARIANT == OP_SOFTMAX ? NEG_INF : 0.0, s2 = 0.0;
  first_cached(0u, xo, ro, units, s1, s2);
  first_cached(1u, xo, ro, units, s1, s2);
  first_cached(2u, xo, ro, units, s1, s2);
  first_cached(3u, xo, ro, units, s1, s2);
  for (uint u = uncached; u < units; u += step) {
    float v[8];
    source8(xo, ro, u, v);
    gather8(v, s1, s2);
  }

  float shift = 0.0, factor; /* out = (v - shift) * factor (* w (+ bias)) */
  if (VARIANT == OP_SOFTMAX) {
    shift = wg_max(s1);
    factor = 1.0 / wg_sum(s1 == NEG_INF ? 0.0 : s2 * exp2(s1 - shift));
  } else if (VARIANT == OP_RMSNORM || VARIANT == OP_ADD_RMSNORM) {
    factor = 1.0 / sqrt(wg_sum(s1) / float(p.cols) + p.eps);
  } else {
    shift = wg_sum(s1) / float(p.cols);
    float sd = deviation_cached(0u, units, shift) + deviation_cached(1u, units, shift) +
               deviation_cached(2u, units, shift) + deviation_cached(3u, units, shift);
    for (uint u = uncached; u < units; u += step) {
      float v[8];
      again8(xo, ro, u, v);
      [[unroll]] for (uint k = 0u; k < 8u; k++) sd += (v[k] - shift) * (v[k] - shift);
    }
    factor = 1.0 / sqrt(wg_sum(sd) / float(p.cols) + p.eps);
  }

  finish_cached(0u, oo, units, shift, factor);
  finish_cached(1u, oo, units, shift, factor);
  finish_cached(2u, oo, units, shift, factor);
  finish_cached(3u, oo, units, shift, factor);
  for (uint u = uncached; u < units; u += step) {
    float v[8];
    again8(xo, ro, u, v);
    finish8(oo, u, v, shift, factor);
  }
}

void main() {
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xo = p.x_offset + row * p.x_row_stride;
    uint ro = p.res_offset + row * p.res_row_stride;
    uint oo = p.out_offset + row * p.out_row_stride;
    if (VECTORS != 0u) {
      row8(xo, ro, oo);
      continue;
    }
    switch (VARIANT) {
      case OP_RMSNORM: rmsnorm_row(xo, oo); break;
      case OP_ADD_RMSNORM: add_rmsnorm_row(xo, ro, oo); break;
      case OP_SOFTMAX: softmax_row(xo, oo); break;
      default: layernorm_row(xo, oo); break;
    }
  }
}
