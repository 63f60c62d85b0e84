#version 450
/* matmul on tensor cores through VK_NV_cooperative_matrix (16x16x16 F16
 * products, F32 accumulation), for F16 and BF16 operands packed by
 * mm_pack.comp: a [batch][Mp][Kp], b [batch or 1][Np][Kp], F16, padded with
 * zeros to the tile sizes, with per-row scales.
 *
 * A workgroup of 8 subgroups (of 32) computes a BM x BN tile: the subgroups
 * form a 2 x 4 grid of 64 x 32 tiles, each 4 x 2 accumulators. K advances in
 * steps of BK through shared memory, the next step's tile prefetched into
 * registers while the current one is multiplied. The epilogue goes through a
 * 16 x 16 F32 staging area per subgroup:
 *   out = alpha * scale_a[m] * scale_b[n] * acc + beta * out (+ bias[n]). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

const uint BM = 128, BN = 128, BK = 32;
const uint WARPS_N = 4;
const uint FRAGS_M = 4, FRAGS_N = 2; /* 16 x 16 accumulators per subgroup */
const uint ROW_VEC = (BK + 8u) / 8u; /* shared row stride in uvec4 (8 halves), padded */

FLOAT_OUT(dst, 0, DTYPE)
layout(std430, binding = 1) readonly buffer PackedA { uvec4 a_vec[]; };
layout(std430, binding = 2) readonly buffer PackedB { uvec4 b_vec[]; };
FLOAT_IN(bias, 3, DTYPE)
layout(std430, binding = 4) readonly buffer ScaleA { float scale_a[]; };
layout(std430, binding = 5) readonly buffer ScaleB { float scale_b[]; };

layout(push_constant) uniform Push {
  uint M, N, k_p, batch;
  uint a_batch_stride, b_batch_stride; /* in halves */
  uint sa_batch_stride, sb_batch_stride;
  uint out_offset, ldo, out_batch_stride;
  uint bias_offset, has_bias;
  float alpha, beta;
} p;

shared uvec4 a_tile[BM * ROW_VEC];
shared uvec4 b_tile[BN * ROW_VEC];
shared float stage[8u * 256u];

const uint LOADS = BM * BK / 8u / 256u; /* uvec4 per invocation per operand */

void load_global(uint a_base, uint b_base, uint k0, out uvec4 ra[LOADS], out uvec4 rb[LOADS]) {
  [[unroll]] for (uint i = 0u; i < LOADS; i++) {
    uint idx = gl_LocalInvocationIndex + i * 256u;
    uint row = idx / (BK / 8u), col = idx % (BK / 8u);
    ra[i] = a_vec[(a_base + row * p.k_p + k0) / 8u + col];
    rb[i] = b_vec[(b_base + row * p.k_p + k0) / 8u + col];
  }
}

void store_shared(uvec4 ra[LOADS], uvec4 rb[LOADS]) {
  [[unroll]] for (uint i = 0u; i < LOADS; i++) {
    uint idx = gl_LocalInvocationIndex + i * 256u;
    uint row = idx / (BK / 8u), col = idx % (BK / 8u);
    a_tile[row * ROW_VEC + col] = ra[i];
    b_tile[row * ROW_VEC + col] = rb[i];
  }
}

void main() {
  uint warp = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  uint wm = warp / WARPS_N, wn = warp % WARPS_N;
  uint m_tiles = (p.M + BM - 1u) / BM, n_tiles = (p.N + BN - 1u) / BN;
  for (uint bz = gl_WorkGroupID.z; bz < p.batch; bz += gl_NumWorkGroups.z)
  for (uint tm = gl_WorkGroupID.y; tm < m_tiles; tm += gl_NumWorkGroups.y)
  for (uint tn = gl_WorkGroupID.x; tn < n_tiles; tn += gl_NumWorkGroups.x) {
    uint m0 = tm * BM, n0 = tn * BN;
    uint a_base = bz * p.a_batch_stride + m0 * p.k_p;
    uint b_base = bz * p.b_batch_stride + n0 * p.k_p;
    fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FRAGS_M][FRAGS_N];
    [[unroll]] for (uint i = 0u; i < FRAGS_M; i++)
      [[unroll]] for (uint j = 0u; j < FRAGS_N; j++)
        acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
    uvec4 ra[LOADS], rb[LOADS];
    load_global(a_base, b_base, 0u, ra, rb);
    for (uint k0 = 0u; k0 < p.k_p; k0 += BK) {
      barrier();
      store_shared(ra, rb);
      barrier();
      if (k0 + BK < p.k_p) load_global(a_base, b_base, k0 + BK, ra, rb);
      [[unroll]] for (uint kk = 0u; kk < BK; kk += 16u) {
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> af[FRAGS_M];
        fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> bf[FRAGS_N];
        [[unroll]] for (uint i = 0u; i < FRAGS_M; i++)
          coopMatLoadNV(af[i], a_tile, (wm * 64u + i * 16u) * ROW_VEC + kk / 8u, ROW_VEC, false);
        [[unroll]] for (uint j = 0u; j < FRAGS_N; j++)
          coopMatLoadNV(bf[j], b_tile, (wn * 32u + j * 16u) * ROW_VEC + kk / 8u, ROW_VEC, true);
        [[unroll]] for (uint i = 0u; i < FRAGS_M; i++)
          [[unroll]] for (uint j = 0u; j < FRAGS_N; j++)
            acc[i][j] = coopMatMulAddNV(af[i], bf[j], acc[i][j]);
      }
    }
    uint o_base = p.out_offset + bz * p.out_batch_stride;
    uint sa_base = bz * p.sa_batch_stride, sb_base = bz * p.sb_batch_stride;
    [[unroll]] for (uint i = 0u; i < FRAGS_M; i++)
      [[unroll]] for (uint j = 0u; j < FRAGS_N; j++) {
        coopMatStoreNV(acc[i][j], stage, warp * 256u, 16u, false);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = lane; e < 256u; e += gl_SubgroupSize) {
          uint m = m0 + wm * 64u + i * 16u + e / 16u, n = n0 + wn * 32u + j * 16u + e % 16u;
          if (m < p.M && n < p.N) {
            uint o = o_base + m * p.ldo + n;
            float v = stage[warp * 256u + e] * scale_a[sa_base + m];
            v = p.alpha * v * scale_b[sb_base + n];
            if (p.beta != 0.0) v += p.beta * dst_load(o);
            if (p.has_bias != 0u) v += bias_load(p.bias_offset + n);
            dst_store(o, v);
          }
        }
        subgroupBarrier();
      }
  }
}
