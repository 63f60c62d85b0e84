#version 450
/* Row-wise reductions, one workgroup per row: rmsnorm, add_rmsnorm,
 * layernorm (with or without bias) and softmax. VARIANT picks the op. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

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

void main() {
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint xo = p.x_offset + row * p.x_row_stride;
    uint oo = p.out_offset + row * p.out_row_stride;
    switch (VARIANT) {
      case OP_RMSNORM: rmsnorm_row(xo, oo); break;
      case OP_ADD_RMSNORM: add_rmsnorm_row(xo, p.res_offset + row * p.res_row_stride, oo); break;
      case OP_SOFTMAX: softmax_row(xo, oo); break;
      default: layernorm_row(xo, oo); break;
    }
  }
}
