/*
 * attention_khr.glsl - attention on tensor cores through
 * VK_KHR_cooperative_matrix, 16x16x16 products of ELEM (float16_t or
 * bfloat16_t, set by the including attention_khr_*.comp) accumulated in F32.
 * Operands, push constants and the order of rows are attention_op.glsl's: the
 * workgroup (x, hkv, b) owns BQ = 32 rows of the list of (query i, head g of
 * the kv head's group), 16 rows per subgroup of 32 invocations.
 *
 * Keys go in tiles of BK. Per tile, K and V rows are staged in shared memory
 * as they are stored (16-byte words; the host checks that offsets and
 * strides are multiples of 8 elements), all loads issued first; each
 * subgroup multiplies its 16 rows of Q (staged once) by K^T into 16 x BK
 * scores and stores them; two invocations per row fold them into the row's
 * running (reference, sum) and write P = exp(S - reference) rounded to ELEM;
 * the rows' outputs accumulate P V in the subgroup's cooperative matrices.
 * A KHR cooperative matrix does not say which invocation holds which of its
 * elements, so the per-row work goes through shared memory, and so would a
 * rescale of the outputs: the reference moves only when a score passes it
 * by more than RESCALE_AT, which after the first tiles is rare. (Rescaling
 * through shared memory on every tile made the kernel 3x slower.)
 *
 * F16 splits P into hi + lo halves (two P V products, P exact to about 2^-22:
 * one F16 has too few bits for its 1e-3 tolerance); BF16 multiplies P rounded
 * once, and the row sums add the rounded values so that the weights still
 * sum to one. As in the cuda backend's tensor-core attention.
 *
 * head_dim is DMAX (64 or 128); the host sends other sizes to attention.comp.
 */
#include "common.glsl"
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require

layout(constant_id = 4) const uint DMAX = 128; /* head_dim: 64 or 128 */
layout(constant_id = 5) const uint BK = 32;    /* keys per tile: 16 or 32 */
const uint BQ = 32u;                           /* rows per workgroup (64 invocations) */
const uint SG_ROWS = 16u;                      /* rows per subgroup */
const bool SPLIT_P = DTYPE == DT_F16;
const int ROW_NONE = -1;   /* the row sees no key */
const int ROW_ABSENT = -2; /* no query row here: nothing to write */

#include "attention_op.glsl"

const uint ROW_W = DMAX / 8u;                   /* 16-byte words of a row of Q, K or V */
const uint KV_LOADS = BK * ROW_W / 64u;          /* words of K (and of V) per invocation */
shared uvec4 q_w[BQ * ROW_W];
shared uvec4 k_w[BK * ROW_W];
shared uvec4 v_w[BK * ROW_W];
shared float s_s[BQ * BK];
shared uvec4 p_w[BQ * BK / 8u];
shared uvec4 p_lo_w[SPLIT_P ? BQ * BK / 8u : 1u];
shared float o_tile[2u * 256u]; /* a 16 x 16 block of outputs per subgroup */
shared float row_max[BQ], row_sum[BQ], row_scale[BQ];
shared int row_last[BQ]; /* the last key position the row sees, or ROW_NONE / ROW_ABSENT */
shared uint row_out[BQ]; /* element offset of the row's output */
shared int block_last;

#define FRAG_A coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FRAG_B coopmat<ELEM, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define ROW_MAJOR gl_CooperativeMatrixLayoutRowMajor
#define COL_MAJOR gl_CooperativeMatrixLayoutColumnMajor

/* Rows first .. first + BQ: row_last, row_out, the running statistics, Q
 * staged. */
void start_rows(uint first, uint rows, int len) {
  uint b = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
  if (tid == 0u) block_last = ROW_NONE;
  barrier();
  if (tid < BQ) {
    int last = ROW_ABSENT;
    if (first + tid < rows) {
      uvec2 ih = row_query(first + tid);
      last = len - 1;
      if (VARIANT == 1u) last = min(last, int(ih.x) + len - int(p.sq));
      last = max(last, ROW_NONE);
      row_out[tid] = p.o_offset + b * p.o_sb + ih.x * p.o_ss + ih.y * p.o_sh;
      atomicMax(block_last, last);
    }
    row_last[tid] = last;
    row_max[tid] = NEG_INF;
    row_sum[tid] = 0.0;
  }
  for (uint w = tid; w < BQ * ROW_W; w += gl_WorkGroupSize.x) {
    uint r = w / ROW_W, c = w - r * ROW_W;
    uvec4 x = uvec4(0u);
    if (first + r < rows) {
      uvec2 ih = row_query(first + r);
      x = q_v[(p.q_offset + b * p.q_sb + ih.x * p.q_ss + ih.y * p.q_sh) / 8u + c];
    }
    q_w[w] = x;
  }
  barrier();
}

/* Keys k0 .. k0 + BK into k_w and v_w, every load issued before the first
 * store (zeros past key_end, which may hold NaN). */
void stage_keys(uint k0, uint key_end) {
  uvec4 kr[KV_LOADS], vr[KV_LOADS];
  [[unroll]] for (uint i = 0u; i < KV_LOADS; i++) {
    uint w = gl_LocalInvocationIndex + i * 64u;
    uint j = w / ROW_W, c = w - j * ROW_W, pos = k0 + j;
    kr[i] = uvec4(0u);
    vr[i] = uvec4(0u);
    if (pos < key_end) {
      kr[i] = k_v[key_k_offset(pos) / 8u + c];
      vr[i] = v_v[key_v_offset(pos) / 8u + c];
    }
  }
  [[unroll]] for (uint i = 0u; i < KV_LOADS; i++) {
    uint w = gl_LocalInvocationIndex + i * 64u;
    k_w[w] = kr[i];
    v_w[w] = vr[i];
  }
}

/* This subgroup's 16 x BK scores Q K^T into s_s. */
void scores() {
  uint q_at = gl_SubgroupID * SG_ROWS * ROW_W, s_at = gl_SubgroupID * SG_ROWS * BK;
  ACC s0 = ACC(0.0), s1 = ACC(0.0);
  [[unroll]] for (uint d0 = 0u; d0 < DMAX; d0 += 16u) {
    FRAG_A a;
    FRAG_B b0, b1;
    coopMatLoad(a, q_w, q_at + d0 / 8u, ROW_W, ROW_MAJOR);
    coopMatLoad(b0, k_w, d0 / 8u, ROW_W, COL_MAJOR); /* element (d, key): key's row, word d / 8 */
    s0 = coopMatMulAdd(a, b0, s0);
    if (BK == 32u) {
      coopMatLoad(b1, k_w, 16u * ROW_W + d0 / 8u, ROW_W, COL_MAJOR);
      s1 = coopMatMulAdd(a, b1, s1);
    }
  }
  coopMatStore(s0, s_s, s_at, BK, ROW_MAJOR);
  if (BK == 32u) coopMatStore(s1, s_s, s_at + 16u, BK, ROW_MAJOR);
}

/* Online softmax of the tile at k0: invocations 2r and 2r + 1 (one subgroup)
 * take BK / 2 keys each of row r. The row's reference (row_max) moves only
 * when a score passes it by more than RESCALE_AT, so that the outputs, held
 * in the subgroups' accumulators, rarely need rescaling (through shared
 * memory, see main); P = exp(S - reference) then stays below e^RESCALE_AT. */
const float RESCALE_AT = 8.0;
void fold_scores(uint k0) {
  const uint HALF = BK / 2u;
  uint r = gl_LocalInvocationIndex / 2u, h = gl_LocalInvocationIndex % 2u;
  int last = row_last[r];
  float m_old = row_max[r], sum_old = row_sum[r];
  float sc[16];
  float top = NEG_INF;
  [[unroll]] for (uint j = 0u; j < HALF; j++) {
    uint key = h * HALF + j;
    sc[j] = int(k0 + key) <= last ? s_s[r * BK + key] * p.scale : NEG_INF;
    top = max(top, sc[j]);
  }
  top = max(top, subgroupShuffleXor(top, 1u));
  /* Before any key the outputs and the sum are 0: a new reference costs nothing. */
  float m = m_old == NEG_INF || top > m_old + RESCALE_AT ? max(m_old, top) : m_old;
  float rescale = m_old == NEG_INF || m == m_old ? 1.0 : exp(m_old - m);
  float l = 0.0;
  uint at = (r * BK + h * HALF) / 8u; /* this invocation's words of P */
  [[unroll]] for (uint w = 0u; w < HALF / 8u; w++) {
    uint hi[4], lo[4];
    [[unroll]] for (uint k = 0u; k < 8u; k++) {
      float e = m == NEG_INF ? 0.0 : exp(sc[8u * w + k] - m);
      uint bits = f32_to_half_bits(e, DTYPE);
      float rounded = half_bits_to_f32(bits, DTYPE);
      uint lo_bits = SPLIT_P ? f32_to_half_bits(e - rounded, DTYPE) : 0u;
      l += SPLIT_P ? e : rounded;
      if (k % 2u == 0u) {
        hi[k / 2u] = bits;
        lo[k / 2u] = lo_bits;
      } else {
        hi[k / 2u] |= bits << 16;
        lo[k / 2u] |= lo_bits << 16;
      }
    }
    p_w[at + w] = uvec4(hi[0], hi[1], hi[2], hi[3]);
    if (SPLIT_P) p_lo_w[at + w] = uvec4(lo[0], lo[1], lo[2], lo[3]);
  }
  l += subgroupShuffleXor(l, 1u);
  if (h == 0u) {
    row_max[r] = m;
    row_sum[r] = sum_old * rescale + l;
    row_scale[r] = rescale;
  }
}

/* The subgroup's 16 x DMAX outputs are accumulators o0 .. o7 (16 columns
 * each; o4 .. o7 unused when DMAX is 64), named variables rather than an
 * array (NVIDIA's driver compiles arrays of cooperative matrices poorly). */
#define O_DECL ACC o0 = ACC(0.0), o1 = ACC(0.0), o2 = ACC(0.0), o3 = ACC(0.0), o4 = ACC(0.0), \
                   o5 = ACC(0.0), o6 = ACC(0.0), o7 = ACC(0.0)
#define O_EACH(X) X(0); X(1); X(2); X(3); if (DMAX > 64u) { X(4); X(5); X(6); X(7); }
/* Block i of the outputs through this subgroup's o_tile: rescaled by the
 * rows' row_scale, or divided by the rows' sums into out. */
#define O_RESCALE(i)                                \
  coopMatStore(o##i, o_tile, t_at, 16u, ROW_MAJOR); \
  tile_rescale(t_at);                               \
  coopMatLoad(o##i, o_tile, t_at, 16u, ROW_MAJOR);  \
  tile_done()
#define O_WRITE(i)                                  \
  coopMatStore(o##i, o_tile, t_at, 16u, ROW_MAJOR); \
  tile_write(t_at, (i) * 16u);                      \
  tile_done()
/* o_i += P V for columns 16 i .. 16 i + 15 (keys 0 .. 15, then 16 .. 31). */
#define O_PV(i)                                                         \
  {                                                                     \
    FRAG_B v0, v1;                                                      \
    coopMatLoad(v0, v_w, (i) * 2u, ROW_W, ROW_MAJOR);                   \
    o##i = coopMatMulAdd(p0, v0, o##i);                                 \
    if (SPLIT_P) o##i = coopMatMulAdd(l0, v0, o##i);                    \
    if (BK == 32u) {                                                    \
      coopMatLoad(v1, v_w, 16u * ROW_W + (i) * 2u, ROW_W, ROW_MAJOR);   \
      o##i = coopMatMulAdd(p1, v1, o##i);                               \
      if (SPLIT_P) o##i = coopMatMulAdd(l1, v1, o##i);                  \
    }                                                                   \
  }

/* The subgroup's o_tile made visible to all its invocations, or free again. */
void tile_done() {
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

void tile_rescale(uint t_at) {
  tile_done();
  for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize)
    o_tile[t_at + e] *= row_scale[gl_SubgroupID * SG_ROWS + e / 16u];
  tile_done();
}

/* out = o / sum for columns col0 .. col0 + 15 of the subgroup's rows (0 for
 * a row that saw no key). */
void tile_write(uint t_at, uint col0) {
  tile_done();
  for (uint e = gl_SubgroupInvocationID; e < 256u; e += gl_SubgroupSize) {
    uint r = gl_SubgroupID * SG_ROWS + e / 16u;
    if (row_last[r] == ROW_ABSENT) continue;
    float l = row_sum[r];
    out_store(row_out[r] + col0 + e % 16u, l > 0.0 ? o_tile[t_at + e] / l : 0.0);
  }
}

/* The rows' natural log-sum-exp (-inf for a row that saw no key). */
void write_lse(uint first, uint rows) {
  uint tid = gl_LocalInvocationIndex;
  if (p.has_lse != 0u && tid < BQ && first + tid < rows) {
    uvec2 ih = row_query(first + tid);
    float l = row_sum[tid];
    lse_f32[p.lse_offset + (gl_WorkGroupID.z * p.hq + ih.y) * p.sq + ih.x] =
        l > 0.0 ? row_max[tid] + log(l) : NEG_INF;
  }
}

void main() {
  uint b = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
  int len = int(p.skv);
  if (p.has_lens != 0u) {
    len = lens_i32[p.lens_offset + b];
    if (len < 0 || len > int(p.skv)) {
      if (tid == 0u && gl_WorkGroupID.x == 0u && gl_WorkGroupID.y == 0u)
        raise_error(ERR_ATTENTION_KV_LEN, len, int(p.skv));
      len = clamp(len, 0, int(p.skv));
    }
  }
  uint rows = p.sq * p.group;
  for (uint first = gl_WorkGroupID.x * BQ; first < rows; first += gl_NumWorkGroups.x * BQ) {
    barrier();
    start_rows(first, rows, len);
    uint key_end = uint(block_last + 1);
    uint t_at = gl_SubgroupID * 256u, p_at = gl_SubgroupID * SG_ROWS * BK / 8u;
    O_DECL;
    for (uint k0 = 0u; k0 < key_end; k0 += BK) {
      stage_keys(k0, key_end);
      barrier();
      scores();
      barrier();
      fold_scores(k0);
      barrier();
      /* A row whose reference moved: the subgroup's outputs go through
       * shared memory to be rescaled (rare after the first tiles). */
      bool moved = gl_SubgroupInvocationID < SG_ROWS &&
                   row_scale[gl_SubgroupID * SG_ROWS + gl_SubgroupInvocationID] != 1.0;
      if (subgroupAny(moved)) {
        O_EACH(O_RESCALE);
      }
      FRAG_A p0, p1, l0, l1;
      coopMatLoad(p0, p_w, p_at, BK / 8u, ROW_MAJOR);
      if (BK == 32u) coopMatLoad(p1, p_w, p_at + 2u, BK / 8u, ROW_MAJOR);
      if (SPLIT_P) {
        coopMatLoad(l0, p_lo_w, p_at, BK / 8u, ROW_MAJOR);
        if (BK == 32u) coopMatLoad(l1, p_lo_w, p_at + 2u, BK / 8u, ROW_MAJOR);
      }
      O_EACH(O_PV);
      barrier();
    }
    O_EACH(O_WRITE);
    write_lse(first, rows);
  }
}
