#version 450
/* matmul on tensor cores through VK_NV_cooperative_matrix (16x16x16 F16
 * products, F32 accumulation), for F16 and BF16 operands packed by
 * matmul_pack.comp: a [batch][Mp][Kp], b [batch or 1][Np][Kp], F16, padded with
 * zeros to the tile sizes, with per-row scales.
 *
 * A workgroup computes a BM x BN tile with one subgroup (of 32) per 64 x 64
 * block of it, 4 x 4 accumulators each. The accumulators and fragments are
 * named variables, not arrays: NVIDIA's driver (580) compiles arrays of
 * cooperative matrices poorly (on an H100 a loop of multiply-adds alone ran
 * 7x slower with them, the whole kernel 5x).
 *
 * K advances in steps of BK = 32 through STAGES shared buffers of a and b
 * rows (16-byte words, rows padded by one word so that the 8 rows a
 * coopMatLoad reads at once hit distinct banks). Each step first loads the
 * next step's words from global memory into registers, multiplies the
 * current buffer, then stores the registers into the next buffer: with 2
 * buffers one barrier per step suffices, with 1 the store waits for a second.
 *
 * The epilogue stages each accumulator through the (then idle) tile memory:
 *   out = alpha * scale_a[m] * scale_b[n] * acc + beta * out (+ bias[n]). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require

layout(constant_id = 4) const uint BM = 128; /* multiples of 64 */
layout(constant_id = 5) const uint BN = 128;
layout(constant_id = 6) const uint STAGES = 2;

const uint BK = 32;
const uint ROW_VEC = BK / 8u + 1u; /* shared row stride in uvec4 (8 halves), padded */
const uint THREADS = gl_WorkGroupSize.x; /* (BM / 64) * (BN / 64) subgroups of 32 */
const uint WARPS_N = BN / 64u;
const uint LOADS_A = BM * BK / 8u / THREADS, LOADS_B = BN * BK / 8u / THREADS;
const uint STAGE_VEC = (BM + BN) * ROW_VEC; /* one buffer: BM rows of a, then BN of b */

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

shared uvec4 tiles[STAGES * STAGE_VEC];

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define FRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
/* Row i of the accumulators: acc<i>0 .. acc<i>3. */
#define ACC_ROW(i) ACC acc##i##0 = ACC(0.0), acc##i##1 = ACC(0.0), acc##i##2 = ACC(0.0), \
                       acc##i##3 = ACC(0.0)
#define MMA_ROW(i)                                   \
  acc##i##0 = coopMatMulAddNV(a##i, b0, acc##i##0); \
  acc##i##1 = coopMatMulAddNV(a##i, b1, acc##i##1); \
  acc##i##2 = coopMatMulAddNV(a##i, b2, acc##i##2); \
  acc##i##3 = coopMatMulAddNV(a##i, b3, acc##i##3)
#define EPILOGUE_ROW(i)                       \
  epilogue(acc##i##0, m0 + i * 16u, n0, bz);       \
  epilogue(acc##i##1, m0 + i * 16u, n0 + 16u, bz); \
  epilogue(acc##i##2, m0 + i * 16u, n0 + 32u, bz); \
  epilogue(acc##i##3, m0 + i * 16u, n0 + 48u, bz)

/* This invocation's words of the K step at k0 (in halves): word i of the
 * tile is row i / (BK / 8), 16-byte column i % (BK / 8). */
void load_global(uint a_base, uint b_base, uint k0, out uvec4 ra[LOADS_A], out uvec4 rb[LOADS_B]) {
  [[unroll]] for (uint i = 0u; i < LOADS_A; i++) {
    uint w = gl_LocalInvocationIndex + i * THREADS;
    ra[i] = a_vec[(a_base + (w / (BK / 8u)) * p.k_p + k0) / 8u + w % (BK / 8u)];
  }
  [[unroll]] for (uint i = 0u; i < LOADS_B; i++) {
    uint w = gl_LocalInvocationIndex + i * THREADS;
    rb[i] = b_vec[(b_base + (w / (BK / 8u)) * p.k_p + k0) / 8u + w % (BK / 8u)];
  }
}

void store_shared(uint stage, uvec4 ra[LOADS_A], uvec4 rb[LOADS_B]) {
  uint base = stage * STAGE_VEC;
  [[unroll]] for (uint i = 0u; i < LOADS_A; i++) {
    uint w = gl_LocalInvocationIndex + i * THREADS;
    tiles[base + (w / (BK / 8u)) * ROW_VEC + w % (BK / 8u)] = ra[i];
  }
  base += BM * ROW_VEC;
  [[unroll]] for (uint i = 0u; i < LOADS_B; i++) {
    uint w = gl_LocalInvocationIndex + i * THREADS;
    tiles[base + (w / (BK / 8u)) * ROW_VEC + w % (BK / 8u)] = rb[i];
  }
}

/* Writes the 16 x 16 accumulator for out rows m0.., columns n0.. through
 * this subgroup's 64 words of the tile memory. */
void epilogue(ACC acc, uint m0, uint n0, uint bz) {
  uint stage = gl_SubgroupID * 64u;
  coopMatStoreNV(acc, tiles, stage, 4u, false);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  uint o_base = p.out_offset + bz * p.out_batch_stride;
  uint sa_base = bz * p.sa_batch_stride, sb_base = bz * p.sb_batch_stride;
  for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
    uint m = m0 + e / 16u, n = n0 + e % 16u;
    if (m < p.M && n < p.N) {
      uint o = o_base + m * p.ldo + n;
      float v = uintBitsToFloat(tiles[stage + e / 4u][e % 4u]) * scale_a[sa_base + m];
      v = p.alpha * v * scale_b[sb_base + n];
      if (p.beta != 0.0) v += p.beta * dst_load(o);
      if (p.has_bias != 0u) v += bias_load(p.bias_offset + n);
      dst_store(o, v);
    }
  }
  subgroupBarrier();
}

void main() {
  uint warp = gl_SubgroupID;
  uint wm = warp / WARPS_N, wn = warp % WARPS_N;
  uint m_tiles = (p.M + BM - 1u) / BM, n_tiles = (p.N + BN - 1u) / BN;
  uint steps = p.k_p / BK;
  for (uint bz = gl_WorkGroupID.z; bz < p.batch; bz += gl_NumWorkGroups.z)
  for (uint tm = gl_WorkGroupID.y; tm < m_tiles; tm += gl_NumWorkGroups.y)
  for (uint tn = gl_WorkGroupID.x; tn < n_tiles; tn += gl_NumWorkGroups.x) {
    uint a_base = bz * p.a_batch_stride + tm * BM * p.k_p;
    uint b_base = bz * p.b_batch_stride + tn * BN * p.k_p;
    ACC_ROW(0);
    ACC_ROW(1);
    ACC_ROW(2);
    ACC_ROW(3);
    uvec4 ra[LOADS_A], rb[LOADS_B];
    barrier(); /* the previous tile's epilogue is done with the shared memory */
    load_global(a_base, b_base, 0u, ra, rb);
    store_shared(0u, ra, rb);
    barrier();
    for (uint s = 0u; s < steps; s++) {
      if (s + 1u < steps) load_global(a_base, b_base, (s + 1u) * BK, ra, rb);
      uint a_at = (s % STAGES) * STAGE_VEC + wm * 64u * ROW_VEC;
      uint b_at = (s % STAGES) * STAGE_VEC + (BM + wn * 64u) * ROW_VEC;
      [[unroll]] for (uint kk = 0u; kk < BK / 8u; kk += 2u) { /* 16 halves */
        FRAG a0, a1, a2, a3, b0, b1, b2, b3;
        coopMatLoadNV(a0, tiles, a_at + kk, ROW_VEC, false);
        coopMatLoadNV(a1, tiles, a_at + 16u * ROW_VEC + kk, ROW_VEC, false);
        coopMatLoadNV(a2, tiles, a_at + 32u * ROW_VEC + kk, ROW_VEC, false);
        coopMatLoadNV(a3, tiles, a_at + 48u * ROW_VEC + kk, ROW_VEC, false);
        coopMatLoadNV(b0, tiles, b_at + kk, ROW_VEC, true);
        coopMatLoadNV(b1, tiles, b_at + 16u * ROW_VEC + kk, ROW_VEC, true);
        coopMatLoadNV(b2, tiles, b_at + 32u * ROW_VEC + kk, ROW_VEC, true);
        coopMatLoadNV(b3, tiles, b_at + 48u * ROW_VEC + kk, ROW_VEC, true);
        MMA_ROW(0);
        MMA_ROW(1);
        MMA_ROW(2);
        MMA_ROW(3);
      }
      if (s + 1u < steps) {
        if (STAGES == 1u) barrier();
        store_shared((s + 1u) % STAGES, ra, rb);
        barrier();
      }
    }
    barrier(); /* every subgroup is done reading the tiles */
    uint m0 = tm * BM + wm * 64u, n0 = tn * BN + wn * 64u;
    EPILOGUE_ROW(0);
    EPILOGUE_ROW(1);
    EPILOGUE_ROW(2);
    EPILOGUE_ROW(3);
  }
}
