/*
 * matmul_khr.glsl - matmul on tensor cores through VK_KHR_cooperative_matrix:
 * 16x16x16 products of ELEM (bfloat16_t or float16_t, set by the including
 * matmul_khr_*.comp) accumulated in F32. out = alpha * a b^T + beta * out
 * (+ bias), a [batch][M][K] and b [batch or 1][N][K] of that type, read
 * straight from the tensors or from mm_pack.comp's padded copy (the host
 * decides): offsets, row strides and batch strides multiples of 8 elements,
 * K a multiple of 8. Rows past M or N read the last real row (their results
 * are not stored) and K past its end reads zeros, so no padding is needed.
 *
 * A workgroup computes a BM x BN tile with one subgroup (of 32) per
 * 64 x 64 block of it (4 x 4 accumulators). The accumulators
 * and fragments are named variables, not arrays: NVIDIA's driver compiles
 * arrays of cooperative matrices poorly (on an H100 a loop of multiply-adds
 * ran 7x slower with them).
 *
 * K advances in steps of BK through STAGES shared buffers of a and b rows
 * (16-byte words, rows padded by one word so that the 8 rows a fragment
 * load reads at once hit distinct banks). Each step first loads the next
 * step's words from global memory into registers, multiplies the current
 * buffer, then stores the registers into the next buffer: with 2 buffers one
 * barrier per step suffices, with 1 the store waits for a second.
 *
 * Tiles are walked in groups of GROUP_M tile rows (column by column inside a
 * group), so that the workgroups running at once share rows of a and b in
 * the L2 cache. Grid: (tiles or fewer, 1, batch or fewer), each looping.
 *
 * The epilogue stages each row of 16 x WARP_N accumulators through the
 * (then idle) tile memory and writes 8 consecutive outputs per invocation,
 * as one 16-byte word where OUT_VEC says the output rows allow it.
 */
#include "common.glsl"
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require

/* The host's choice is in vk_internal.h (VK_KHR_*). */
layout(constant_id = 4) const uint BM = 128; /* a multiple of 64 */
layout(constant_id = 5) const uint BN = 128; /* a multiple of 64 */
layout(constant_id = 6) const uint STAGES = 2;
layout(constant_id = 7) const uint BK = 32;      /* a multiple of 16 */
layout(constant_id = 8) const uint OUT_VEC = 0u; /* ldo, the out offset and batch stride % 8 == 0 */

const uint WARP_N = 64u;
const uint THREADS = gl_WorkGroupSize.x; /* (BM / 64) * (BN / 64) subgroups of 32 */
const uint WARPS_N = BN / WARP_N;
const uint ROW_VEC = BK / 8u + 1u; /* shared row stride in 16-byte words, padded */
const uint LOADS_A = BM * BK / 8u / THREADS, LOADS_B = BN * BK / 8u / THREADS;
const uint STAGE_VEC = (BM + BN) * ROW_VEC; /* one buffer: BM rows of a, then BN of b */
const uint EPI_ROW = WARP_N / 4u + 1u;      /* epilogue row stride (F32) in words, padded */
const uint EPI_VEC = THREADS / 32u * 16u * EPI_ROW;
const uint TILE_VEC = STAGES * STAGE_VEC > EPI_VEC ? STAGES * STAGE_VEC : EPI_VEC;
const uint GROUP_M = 8u;

FLOAT_OUT(dst, 0, DTYPE)
layout(std430, binding = 1) readonly buffer A { uvec4 a_vec[]; };
layout(std430, binding = 2) readonly buffer B { uvec4 b_vec[]; };
FLOAT_IN(bias, 3, DTYPE)

layout(push_constant) uniform Push {
  uint M, N, K, batch;
  uint a_offset, lda, a_batch_stride; /* in elements */
  uint b_offset, ldb, b_batch_stride; /* b_batch_stride 0: one b for every batch */
  uint out_offset, ldo, out_batch_stride;
  uint bias_offset, has_bias;
  float alpha, beta;
} p;

shared uvec4 tiles[TILE_VEC];

#define FRAG_A coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#define COL_MAJOR gl_CooperativeMatrixLayoutColumnMajor

/* Row i of the accumulators: acc<i>0 .. acc<i>3. */
#define ACC_ROW(i) ACC acc##i##0 = ACC(0.0), acc##i##1 = ACC(0.0), acc##i##2 = ACC(0.0), \
                       acc##i##3 = ACC(0.0)
#define MMA_ROW(i)                                 \
  acc##i##0 = coopMatMulAdd(a##i, b0, acc##i##0); \
  acc##i##1 = coopMatMulAdd(a##i, b1, acc##i##1); \
  acc##i##2 = coopMatMulAdd(a##i, b2, acc##i##2); \
  acc##i##3 = coopMatMulAdd(a##i, b3, acc##i##3)
#define LOAD_B(at)                                                \
  coopMatLoad(b0, tiles, at, ROW_VEC, COL_MAJOR);                 \
  coopMatLoad(b1, tiles, at + 16u * ROW_VEC, ROW_VEC, COL_MAJOR); \
  coopMatLoad(b2, tiles, at + 32u * ROW_VEC, ROW_VEC, COL_MAJOR); \
  coopMatLoad(b3, tiles, at + 48u * ROW_VEC, ROW_VEC, COL_MAJOR)
#define STAGE_ROW(i, at)                                       \
  coopMatStore(acc##i##0, tiles, at, EPI_ROW, ROW_MAJOR);      \
  coopMatStore(acc##i##1, tiles, at + 4u, EPI_ROW, ROW_MAJOR); \
  coopMatStore(acc##i##2, tiles, at + 8u, EPI_ROW, ROW_MAJOR); \
  coopMatStore(acc##i##3, tiles, at + 12u, EPI_ROW, ROW_MAJOR)
#define EPILOGUE_ROW(i)                        \
  STAGE_ROW(i, gl_SubgroupID * 16u * EPI_ROW); \
  epilogue(m0 + i * 16u, n0, bz)

/* This invocation's words of the K step at k0 (in elements) of the tile
 * whose rows of a start at m0 and of b at n0: word i of the tile is row
 * i / (BK / 8), 16-byte column i % (BK / 8). */
void load_global(uint m0, uint n0, uint bz, uint k0, out uvec4 ra[LOADS_A], out uvec4 rb[LOADS_B]) {
  uint a_base = (p.a_offset + bz * p.a_batch_stride) / 8u;
  uint b_base = (p.b_offset + bz * p.b_batch_stride) / 8u;
  [[unroll]] for (uint i = 0u; i < LOADS_A; i++) {
    uint w = gl_LocalInvocationIndex + i * THREADS;
    uint m = min(m0 + w / (BK / 8u), p.M - 1u), k = k0 + w % (BK / 8u) * 8u;
    ra[i] = k < p.K ? a_vec[a_base + (m * p.lda + k) / 8u] : uvec4(0u);
  }
  [[unroll]] for (uint i = 0u; i < LOADS_B; i++) {
    uint w = gl_LocalInvocationIndex + i * THREADS;
    uint n = min(n0 + w / (BK / 8u), p.N - 1u), k = k0 + w % (BK / 8u) * 8u;
    rb[i] = k < p.K ? b_vec[b_base + (n * p.ldb + k) / 8u] : uvec4(0u);
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

/* Output rows m0 .. m0 + 16, columns n0 .. n0 + WARP_N, from this subgroup's
 * staged accumulators: 8 consecutive columns per invocation and turn. */
void epilogue(uint m0, uint n0, uint bz) {
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  uint stage = gl_SubgroupID * 16u * EPI_ROW;
  uint o_base = p.out_offset + bz * p.out_batch_stride;
  for (uint c = gl_SubgroupInvocationID; c < 2u * WARP_N; c += gl_SubgroupSize) {
    uint r = c / (WARP_N / 8u), col = c % (WARP_N / 8u) * 8u;
    uint m = m0 + r, n = n0 + col;
    uint at = stage + r * EPI_ROW + col / 4u;
    vec4 lo = uintBitsToFloat(tiles[at]), hi = uintBitsToFloat(tiles[at + 1u]);
    float v[8] = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
    uint o = o_base + m * p.ldo + n;
    if (m >= p.M || n >= p.N) continue;
    if (OUT_VEC != 0u && n + 8u <= p.N) {
      float old[8];
      if (p.beta != 0.0) dst_load8(o, old);
      [[unroll]] for (uint k = 0u; k < 8u; k++) {
        v[k] *= p.alpha;
        if (p.beta != 0.0) v[k] += p.beta * old[k];
        if (p.has_bias != 0u) v[k] += bias_load(p.bias_offset + n + k);
      }
      dst_store8(o, v);
    } else {
      for (uint k = 0u; k < 8u && n + k < p.N; k++) {
        float x = p.alpha * v[k];
        if (p.beta != 0.0) x += p.beta * dst_load(o + k);
        if (p.has_bias != 0u) x += bias_load(p.bias_offset + n + k);
        dst_store(o + k, x);
      }
    }
  }
  subgroupBarrier();
}

void main() {
  uint warp = gl_SubgroupID;
  uint wm = warp / WARPS_N, wn = warp % WARPS_N;
  uint m_tiles = (p.M + BM - 1u) / BM, n_tiles = (p.N + BN - 1u) / BN;
  uint steps = (p.K + BK - 1u) / BK;
  for (uint bz = gl_WorkGroupID.z; bz < p.batch; bz += gl_NumWorkGroups.z)
  for (uint t = gl_WorkGroupID.x; t < m_tiles * n_tiles; t += gl_NumWorkGroups.x) {
    uint group = t / (GROUP_M * n_tiles), first = group * GROUP_M;
    uint rows = min(m_tiles - first, GROUP_M), in_group = t - group * GROUP_M * n_tiles;
    uint tm = first + in_group % rows, tn = in_group / rows;
    ACC_ROW(0);
    ACC_ROW(1);
    ACC_ROW(2);
    ACC_ROW(3);
    uvec4 ra[LOADS_A], rb[LOADS_B];
    barrier(); /* the previous tile's epilogue is done with the shared memory */
    load_global(tm * BM, tn * BN, bz, 0u, ra, rb);
    store_shared(0u, ra, rb);
    barrier();
    for (uint s = 0u; s < steps; s++) {
      if (s + 1u < steps) load_global(tm * BM, tn * BN, bz, (s + 1u) * BK, ra, rb);
      uint a_at = (s % STAGES) * STAGE_VEC + wm * 64u * ROW_VEC;
      uint b_at = (s % STAGES) * STAGE_VEC + (BM + wn * WARP_N) * ROW_VEC;
      [[unroll]] for (uint kk = 0u; kk < BK / 8u; kk += 2u) { /* 16 elements */
        FRAG_A a0, a1, a2, a3;
        coopMatLoad(a0, tiles, a_at + kk, ROW_VEC, ROW_MAJOR);
        coopMatLoad(a1, tiles, a_at + 16u * ROW_VEC + kk, ROW_VEC, ROW_MAJOR);
        coopMatLoad(a2, tiles, a_at + 32u * ROW_VEC + kk, ROW_VEC, ROW_MAJOR);
        coopMatLoad(a3, tiles, a_at + 48u * ROW_VEC + kk, ROW_VEC, ROW_MAJOR);
        FRAG_B b0, b1, b2, b3;
        LOAD_B(b_at + kk);
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
    uint m0 = tm * BM + wm * 64u, n0 = tn * BN + wn * WARP_N;
    EPILOGUE_ROW(0);
    EPILOGUE_ROW(1);
    EPILOGUE_ROW(2);
    EPILOGUE_ROW(3);
  }
}
