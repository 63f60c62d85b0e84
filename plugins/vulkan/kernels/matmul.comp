#version 450
/* matmul, the plain path: out[b] = alpha * a[b] op(b[b]) + beta * out[b] (+ bias).
 * Tiles of BM x BN outputs per workgroup staged through shared memory in
 * steps of BK, TM x TN outputs per invocation. VARIANT 0: b is [N, K],
 * 1: b is [K, N]. Grid: (N tiles, M tiles, batch), each looping when the
 * device's grid is smaller. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint BM = 64;
layout(constant_id = 5) const uint BN = 64;
layout(constant_id = 6) const uint BK = 16;
layout(constant_id = 7) const uint TM = 4;
layout(constant_id = 8) const uint TN = 4;

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(a, 1, DTYPE)
FLOAT_IN(b, 2, DTYPE)
FLOAT_IN(bias, 3, DTYPE)

layout(push_constant) uniform Push {
  uint M, N, K, batch;
  uint a_offset, lda, a_batch_stride;
  uint b_offset, ldb, b_batch_stride; /* 0: one b for every batch */
  uint out_offset, ldo, out_batch_stride;
  uint bias_offset, has_bias;
  float alpha, beta;
} p;

const uint THREADS_N = BN / TN;
const uint THREADS_M = BM / TM;
const uint A_STRIDE = BM + 1u; /* padding keeps the transposed stores conflict-free */
const uint B_STRIDE = BN + 1u;

shared float a_tile[BK * A_STRIDE]; /* [k][m] */
shared float b_tile[BK * B_STRIDE]; /* [k][n] */

void load_tiles(uint a_base, uint b_base, uint m0, uint n0, uint k0) {
  uint tid = gl_LocalInvocationIndex;
  for (uint idx = tid; idx < BM * BK; idx += gl_WorkGroupSize.x) {
    uint r = idx / BK, c = idx - (idx / BK) * BK;
    uint m = m0 + r, k = k0 + c;
    a_tile[c * A_STRIDE + r] = (m < p.M && k < p.K) ? a_load(a_base + m * p.lda + k) : 0.0;
  }
  for (uint idx = tid; idx < BN * BK; idx += gl_WorkGroupSize.x) {
    uint r, c; /* r along n, c along k */
    if (VARIANT == 0u) {
      r = idx / BK;
      c = idx - r * BK;
    } else {
      c = idx / BN;
      r = idx - c * BN;
    }
    uint n = n0 + r, k = k0 + c;
    float v = 0.0;
    if (n < p.N && k < p.K) v = b_load(b_base + (VARIANT == 0u ? n * p.ldb + k : k * p.ldb + n));
    b_tile[c * B_STRIDE + r] = v;
  }
}

void main() {
  uint tx = gl_LocalInvocationIndex % THREADS_N;
  uint ty = gl_LocalInvocationIndex / THREADS_N;
  uint m_tiles = (p.M + BM - 1u) / BM;
  uint n_tiles = (p.N + BN - 1u) / BN;
  for (uint bz = gl_WorkGroupID.z; bz < p.batch; bz += gl_NumWorkGroups.z)
  for (uint tm = gl_WorkGroupID.y; tm < m_tiles; tm += gl_NumWorkGroups.y)
  for (uint tn = gl_WorkGroupID.x; tn < n_tiles; tn += gl_NumWorkGroups.x) {
    uint m0 = tm * BM, n0 = tn * BN;
    uint a_base = p.a_offset + bz * p.a_batch_stride;
    uint b_base = p.b_offset + bz * p.b_batch_stride;
    float acc[TM][TN];
    [[unroll]] for (uint i = 0u; i < TM; i++)
      [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] = 0.0;
    for (uint k0 = 0u; k0 < p.K; k0 += BK) {
      barrier();
      load_tiles(a_base, b_base, m0, n0, k0);
      barrier();
      for (uint k = 0u; k < BK; k++) {
        float av[TM], bv[TN];
        [[unroll]] for (uint i = 0u; i < TM; i++) av[i] = a_tile[k * A_STRIDE + ty + i * THREADS_M];
        [[unroll]] for (uint j = 0u; j < TN; j++) bv[j] = b_tile[k * B_STRIDE + tx + j * THREADS_N];
        [[unroll]] for (uint i = 0u; i < TM; i++)
          [[unroll]] for (uint j = 0u; j < TN; j++) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
      }
    }
    uint o_base = p.out_offset + bz * p.out_batch_stride;
    [[unroll]] for (uint i = 0u; i < TM; i++) {
      uint m = m0 + ty + i * THREADS_M;
      if (m >= p.M) continue;
      [[unroll]] for (uint j = 0u; j < TN; j++) {
        uint n = n0 + tx + j * THREADS_N;
        if (n >= p.N) continue;
        uint o = o_base + m * p.ldo + n;
        float v = p.alpha * acc[i][j];
        if (p.beta != 0.0) v += p.beta * dst_load(o);
        if (p.has_bias != 0u) v += bias_load(p.bias_offset + n);
        dst_store(o, v);
      }
    }
  }
}
