#version 450
/* Packs a matmul operand for matmul_coop.comp (DTYPE_OUT F16) or
 * matmul_khr.glsl (DTYPE_OUT = DTYPE): row-major, rows padded to rows_p and
 * K to k_p with zeros, one power-of-two scale per row.
 *
 * Input of the output's type is copied (scale 1). BF16 input packed into
 * F16 is scaled per row so that its
 * largest magnitude lands in [0.5, 1): the row then fits F16's range, and
 * F16's 11-bit significand holds BF16's 8 bits exactly except for values
 * below 2^-14 of the row's largest (they lose low bits, then flush under
 * 2^-24 of it). The GEMM multiplies the scales back in F32.
 *
 * VARIANT 0: src rows are the packed rows (a [M, K], b [N, K]); one
 * workgroup per row. VARIANT 1: src is [K, rows] (b [K, N]) and is
 * transposed through shared memory, TILE rows per workgroup.
 * VECTORS = 1 (VARIANT 0 with K, src_ld and the offsets multiples of 8):
 * 8 elements per step through 16-byte words. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;

FLOAT_OUT(dst, 0, DTYPE_OUT)
FLOAT_IN(src, 1, DTYPE)
layout(std430, binding = 2) writeonly buffer Scales { float scale_out[]; };

layout(push_constant) uniform Push {
  uint rows, k, rows_p, k_p, batch;
  uint src_offset, src_ld, src_batch_stride;
  uint dst_offset, dst_batch_stride, scale_offset, scale_batch_stride;
} p;

const bool SCALED = DTYPE == DT_BF16 && DTYPE_OUT == DT_F16;
const uint TILE = 32;
shared float tile[TILE * (TILE + 1)];
shared float col_max[gl_WorkGroupSize.x];

/* The exponent e with max_abs * 2^-e in [0.5, 1) (0 when nothing needs scaling). */
int scale_exponent(float max_abs) {
  if (!SCALED || !(max_abs > 0.0) || isinf(max_abs)) return 0;
  int e;
  frexp(max_abs, e);
  return e;
}

/* pack_rows with VECTORS = 1; k_p is a multiple of 8 too. */
void pack_rows8(uint bz) {
  uint src_base = p.src_offset + bz * p.src_batch_stride;
  uint dst_base = p.dst_offset + bz * p.dst_batch_stride;
  for (uint r = gl_WorkGroupID.x; r < p.rows_p; r += gl_NumWorkGroups.x) {
    bool real = r < p.rows;
    uint src_row = src_base + r * p.src_ld;
    float m = 0.0;
    for (uint c = 8u * gl_LocalInvocationIndex; SCALED && real && c < p.k;
         c += 8u * gl_WorkGroupSize.x) {
      float v[8];
      src_load8(src_row + c, v);
      [[unroll]] for (uint k = 0u; k < 8u; k++) m = max(m, abs(v[k]));
    }
    m = wg_max(m);
    int e = scale_exponent(m);
    for (uint c = 8u * gl_LocalInvocationIndex; c < p.k_p; c += 8u * gl_WorkGroupSize.x) {
      float v[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
      if (real && c < p.k) {
        src_load8(src_row + c, v);
        [[unroll]] for (uint k = 0u; k < 8u; k++) v[k] = ldexp(v[k], -e);
      }
      dst_store8(dst_base + r * p.k_p + c, v);
    }
    if (gl_LocalInvocationIndex == 0u)
      scale_out[p.scale_offset + bz * p.scale_batch_stride + r] = ldexp(1.0, e);
  }
}

void pack_rows(uint bz) {
  uint src_base = p.src_offset + bz * p.src_batch_stride;
  uint dst_base = p.dst_offset + bz * p.dst_batch_stride;
  for (uint r = gl_WorkGroupID.x; r < p.rows_p; r += gl_NumWorkGroups.x) {
    bool real = r < p.rows;
    float m = 0.0;
    if (SCALED && real)
      for (uint c = gl_LocalInvocationIndex; c < p.k; c += gl_WorkGroupSize.x)
        m = max(m, abs(src_load(src_base + r * p.src_ld + c)));
    m = wg_max(m);
    int e = scale_exponent(m);
    for (uint c = gl_LocalInvocationIndex; c < p.k_p; c += gl_WorkGroupSize.x) {
      float v = (real && c < p.k) ? ldexp(src_load(src_base + r * p.src_ld + c), -e) : 0.0;
      dst_store(dst_base + r * p.k_p + c, v);
    }
    if (gl_LocalInvocationIndex == 0u)
      scale_out[p.scale_offset + bz * p.scale_batch_stride + r] = ldexp(1.0, e);
  }
}

/* Rows r0 .. r0 + TILE of the packed matrix are columns of src. The
 * workgroup is TILE columns x (size / TILE) lanes along K. */
void pack_columns(uint bz) {
  uint src_base = p.src_offset + bz * p.src_batch_stride;
  uint dst_base = p.dst_offset + bz * p.dst_batch_stride;
  uint t = gl_LocalInvocationIndex, lanes = gl_WorkGroupSize.x / TILE;
  uint col = t % TILE, lane = t / TILE;
  for (uint r0 = gl_WorkGroupID.x * TILE; r0 < p.rows_p; r0 += gl_NumWorkGroups.x * TILE) {
    float m = 0.0;
    if (SCALED && r0 + col < p.rows)
      for (uint c = lane; c < p.k; c += lanes)
        m = max(m, abs(src_load(src_base + c * p.src_ld + r0 + col)));
    barrier();
    col_max[t] = m;
    barrier();
    float row_max = 0.0;
    for (uint l = 0u; l < lanes; l++) row_max = max(row_max, col_max[l * TILE + col]);
    int e = scale_exponent(row_max); /* for packed row r0 + col */
    if (lane == 0u && r0 + col < p.rows_p)
      scale_out[p.scale_offset + bz * p.scale_batch_stride + r0 + col] = ldexp(1.0, e);
    for (uint c0 = 0u; c0 < p.k_p; c0 += TILE) {
      barrier();
      for (uint i = lane; i < TILE; i += lanes) { /* src rows c0 + i, columns r0 + col */
        uint c = c0 + i, r = r0 + col;
        float v = (c < p.k && r < p.rows) ? ldexp(src_load(src_base + c * p.src_ld + r), -e) : 0.0;
        tile[i * (TILE + 1u) + col] = v;
      }
      barrier();
      for (uint i = lane; i < TILE; i += lanes) { /* packed rows r0 + i, K index c0 + col */
        if (r0 + i < p.rows_p)
          dst_store(dst_base + (r0 + i) * p.k_p + c0 + col, tile[col * (TILE + 1u) + i]);
      }
    }
  }
}

void main() {
  for (uint bz = gl_WorkGroupID.z; bz < p.batch; bz += gl_NumWorkGroups.z) {
    if (VARIANT == 0u && VECTORS != 0u)
      pack_rows8(bz);
    else if (VARIANT == 0u)
      pack_rows(bz);
    else
      pack_columns(bz);
  }
}
