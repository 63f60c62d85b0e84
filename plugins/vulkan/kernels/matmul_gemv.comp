#version 450
/* matmul for a few rows of a (M <= MMAX, decode): bandwidth-bound on b.
 * VARIANT 0, b [N, K]: a workgroup computes RN consecutive outputs n; its
 * invocations stride over K (coalesced reads of b's rows) and the partial
 * dot products meet in a workgroup reduction.
 * VARIANT 1, b [K, N]: an invocation owns output n and a slice of K (reads of
 * b's rows coalesced over n); the KSPLIT slices meet in shared memory.
 * out = alpha * a op(b) + beta * out (+ bias), batched over gl_WorkGroupID.z.
 * VECTORS = 1 (VARIANT 0 with K, leading dims, offsets and batch strides
 * multiples of 8): a and b read 8 elements at a time through 16-byte words.
 * FUSE (VARIANT 0), bits: FUSE_A_NORM, each row of a divided by its RMS
 * (the API's a_norm): its sum of squares is gathered from the same loads of
 * a and meets the dot products in their reduction. FUSE_ROPE, the API's rope
 * on the output: a pair of columns (2j, 2j + 1) lies in one workgroup (RN is
 * even), whose invocation for each column sums both dot products and turns
 * them (rope_turns.glsl; FUSE_INV_FREQ: the caller's frequencies, binding 6,
 * else the host's table of turns, binding 5). FUSE_GLU, the API's glu: out
 * has N = p.N columns and b 2 N rows; a workgroup's first RN / 2 dot products
 * are gate columns, the others their up columns (N further), and each
 * output is silu(gate) * up. FUSE_KV, the API's kv: out's columns
 * [kv_first, kv_first + kv_width) of row m also go to the k cache (binding 9)
 * at slot slots[m] (binding 7), the kv_width after them to the v cache
 * (binding 10), as kv_append writes them: the values out receives, after the
 * rope; a negative slot is skipped, one past the cache too (raising
 * ERR_KV_APPEND_SLOT once per row). */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint MMAX = 4;   /* rows of a */
layout(constant_id = 5) const uint RN = 4;     /* outputs n per workgroup (VARIANT 0) */
layout(constant_id = 6) const uint KSPLIT = 4; /* slices of K (VARIANT 1) */
layout(constant_id = 7) const uint VECTORS = 0;
layout(constant_id = 8) const uint FUSE = 0;
const uint FUSE_A_NORM = 1u, FUSE_ROPE = 2u, FUSE_INV_FREQ = 4u, FUSE_GLU = 8u, FUSE_KV = 16u;
const uint A_NORM = FUSE & FUSE_A_NORM; /* 0 or 1 */
const bool ROPE = (FUSE & FUSE_ROPE) != 0u, GLU = (FUSE & FUSE_GLU) != 0u, KV = (FUSE & FUSE_KV) != 0u;
const uint OUTS = GLU ? RN / 2u : RN; /* out columns of a workgroup's RN dot products */

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(a, 1, DTYPE)
FLOAT_IN(b, 2, DTYPE)
FLOAT_IN(bias, 3, DTYPE)
INT_IN(pos, 4)
layout(std430, binding = 5) readonly buffer Turns { uvec2 turns_per_position[]; }; /* (lo, hi) */
layout(std430, binding = 6) readonly buffer InvFreq { float inv_freq[]; };
INT_IN(slots, 7)
FLOAT_OUT(kc, 9, DTYPE) /* binding 8 is the error word */
FLOAT_OUT(vc, 10, DTYPE)

layout(push_constant) uniform Push {
  uint M, N, K, batch;
  uint a_offset, lda, a_batch_stride;
  uint b_offset, ldb, b_batch_stride;
  uint out_offset, ldo, out_batch_stride;
  uint bias_offset, has_bias;
  float alpha, beta;
  float a_norm_eps;                     /* FUSE_A_NORM */
  uint rope_dim, rope_head_dim, rope_columns; /* FUSE_ROPE */
  uint pos_offset, pos_stride, freq_offset;
  uint kv_first, kv_width, kc_offset, vc_offset, slots_offset, kv_capacity; /* FUSE_KV */
} p;

#include "rope_turns.glsl"

shared float partial[gl_WorkGroupSize.x];
#if SUBGROUPS
/* [output][subgroup], then with A_NORM [RN * MMAX + row][subgroup] a's squares */
shared float subgroup_dots[(RN + A_NORM) * MMAX][gl_WorkGroupSize.x / 4u];
#endif

/* 1 / RMS of a row of a from its sum of squares. */
float inverse_rms(float squares) { return 1.0 / sqrt(squares / float(p.K) + p.a_norm_eps); }

/* alpha * dot (+ bias) of output column n, before beta. */
float product_of(uint n, float dot) {
  float v = p.alpha * dot;
  if (p.has_bias != 0u) v += bias_load(p.bias_offset + n);
  return v;
}

/* With FUSE_KV: out's value v of column n of row m into its cache too. */
void store_kv(uint m, uint n, float v) {
  if (n < p.kv_first || n - p.kv_first >= 2u * p.kv_width) return;
  uint c = n - p.kv_first;
  int slot = slots_i32[p.slots_offset + m];
  if (slot < 0) return;
  if (uint(slot) >= p.kv_capacity) {
    if (c == 0u) raise_error(ERR_KV_APPEND_SLOT, slot, int(p.kv_capacity));
    return;
  }
  if (c < p.kv_width) kc_store(p.kc_offset + uint(slot) * p.kv_width + c, v);
  else vc_store(p.vc_offset + uint(slot) * p.kv_width + c - p.kv_width, v);
}

void write_out(uint o_base, uint m, uint n, float v) {
  dst_store(o_base + m * p.ldo + n, v);
  if (KV) store_kv(m, n, v);
}

/* alpha * dot (+ bias) + beta * out of column n of row m. */
float plain_value(uint o_base, uint m, uint n, float dot) {
  float v = product_of(n, dot);
  if (p.beta != 0.0) v += p.beta * dst_load(o_base + m * p.ldo + n);
  return v;
}

/* With FUSE_ROPE (beta = 0): column n of row m from its dot product and
 * that of its pair's other column, turned where n is a rope column. */
float turned_value(uint m, uint n, float dot, float other_dot) {
  float v = product_of(n, dot);
  uint i = n % p.rope_head_dim;
  if (n < p.rope_columns && i < p.rope_dim) {
    uint j = i / 2u;
    uvec2 g = (FUSE & FUSE_INV_FREQ) != 0u ? turns_of(inv_freq[p.freq_offset + j]) : turns_per_position[j];
    vec2 sc = rotation(pos_i32[p.pos_offset + m * p.pos_stride], g);
    float other = product_of(n ^ 1u, other_dot);
    v = (n & 1u) == 0u ? turned(v, other, sc).x : turned(other, v, sc).y;
  }
  return v;
}

/* b's row (the product's column) of dot product r of the workgroup at out
 * column n0, and whether it exists. */
uint product_column(uint n0, uint r) { return GLU && r >= OUTS ? p.N + n0 + r - OUTS : n0 + r; }
bool column_exists(uint n0, uint r) { return n0 + r % OUTS < p.N; }

/* The dot product r's output needs too: its rope pair's, or its up column's. */
uint partner_of(uint r) { return GLU ? (r + OUTS) % RN : r ^ 1u; }

/* Output(s) of dot product r (a_norm applied) of row m. */
void write_dot(uint o_base, uint m, uint n0, uint r, float dot, float partner_dot) {
  if (GLU) {
    if (r < OUTS) {
      float gate = product_of(product_column(n0, r), dot);
      float up = product_of(product_column(n0, r + OUTS), partner_dot);
      dst_store(o_base + m * p.ldo + n0 + r, gate * sigmoid(gate) * up);
    }
  } else if (ROPE) {
    write_out(o_base, m, n0 + r, turned_value(m, n0 + r, dot, partner_dot));
  } else {
    write_out(o_base, m, n0 + r, plain_value(o_base, m, n0 + r, dot));
  }
}

void gemv_nk(uint bz) {
  uint a_base = p.a_offset + bz * p.a_batch_stride, b_base = p.b_offset + bz * p.b_batch_stride;
  uint o_base = p.out_offset + bz * p.out_batch_stride;
  uint t = gl_LocalInvocationIndex;
  for (uint n0 = gl_WorkGroupID.x * OUTS; n0 < p.N; n0 += gl_NumWorkGroups.x * OUTS) {
    float acc[RN][MMAX], squares[MMAX];
    [[unroll]] for (uint m = 0u; m < MMAX; m++) {
      squares[m] = 0.0;
      [[unroll]] for (uint r = 0u; r < RN; r++) acc[r][m] = 0.0;
    }
    for (uint k8 = 8u * t; VECTORS != 0u && k8 < p.K; k8 += 8u * gl_WorkGroupSize.x) {
      float av[MMAX][8];
      [[unroll]] for (uint m = 0u; m < MMAX; m++) a_load8(a_base + m * p.lda + k8, av[m]);
      if (A_NORM != 0u)
        [[unroll]] for (uint m = 0u; m < MMAX; m++)
          [[unroll]] for (uint k = 0u; k < 8u; k++) squares[m] = fma(av[m][k], av[m][k], squares[m]);
      [[unroll]] for (uint r = 0u; r < RN; r++) {
        if (!column_exists(n0, r)) continue;
        float bv[8];
        b_load8(b_base + product_column(n0, r) * p.ldb + k8, bv);
        [[unroll]] for (uint m = 0u; m < MMAX; m++)
          [[unroll]] for (uint k = 0u; k < 8u; k++) acc[r][m] = fma(av[m][k], bv[k], acc[r][m]);
      }
    }
    for (uint k = t; VECTORS == 0u && k < p.K; k += gl_WorkGroupSize.x) {
      float av[MMAX];
      [[unroll]] for (uint m = 0u; m < MMAX; m++)
        av[m] = m < p.M ? a_load(a_base + m * p.lda + k) : 0.0;
      if (A_NORM != 0u)
        [[unroll]] for (uint m = 0u; m < MMAX; m++) squares[m] = fma(av[m], av[m], squares[m]);
      [[unroll]] for (uint r = 0u; r < RN; r++) {
        if (!column_exists(n0, r)) continue;
        float bv = b_load(b_base + product_column(n0, r) * p.ldb + k);
        [[unroll]] for (uint m = 0u; m < MMAX; m++) acc[r][m] = fma(av[m], bv, acc[r][m]);
      }
    }
#if SUBGROUPS
    /* All RN * MMAX dot products meet in one exchange: a barrier pair each
     * (wg_sum) would stall the workgroup RN * MMAX times. */
    [[unroll]] for (uint r = 0u; r < RN; r++)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) {
        float sum = subgroupAdd(acc[r][m]);
        if (subgroupElect()) subgroup_dots[r * MMAX + m][gl_SubgroupID] = sum;
      }
    if (A_NORM != 0u)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) {
        float sum = subgroupAdd(squares[m]);
        if (subgroupElect()) subgroup_dots[RN * MMAX + m][gl_SubgroupID] = sum;
      }
    barrier();
    if (t < RN * MMAX) {
      uint r = t / MMAX, m = t % MMAX;
      float dot = 0.0, other_dot = 0.0; /* other: the partner's (rope, glu's gate columns) */
      for (uint s = 0u; s < gl_NumSubgroups; s++) dot += subgroup_dots[t][s];
      if (ROPE || (GLU && r < OUTS))
        for (uint s = 0u; s < gl_NumSubgroups; s++) other_dot += subgroup_dots[partner_of(r) * MMAX + m][s];
      if (A_NORM != 0u) {
        float row_squares = 0.0;
        for (uint s = 0u; s < gl_NumSubgroups; s++) row_squares += subgroup_dots[RN * MMAX + m][s];
        float scale = inverse_rms(row_squares);
        dot *= scale;
        other_dot *= scale;
      }
      if (m < p.M && column_exists(n0, r)) write_dot(o_base, m, n0, r, dot, other_dot);
    }
    barrier();
#else
    float scale[MMAX];
    [[unroll]] for (uint m = 0u; m < MMAX; m++) scale[m] = 1.0;
    if (A_NORM != 0u)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) scale[m] = inverse_rms(wg_sum(squares[m]));
    float dots[RN][MMAX];
    [[unroll]] for (uint r = 0u; r < RN; r++)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) dots[r][m] = scale[m] * wg_sum(acc[r][m]);
    [[unroll]] for (uint r = 0u; r < RN; r++)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) {
        if (t == 0u && m < p.M && column_exists(n0, r))
          write_dot(o_base, m, n0, r, dots[r][m], dots[partner_of(r)][m]);
      }
#endif
  }
}

void gemv_kn(uint bz) {
  uint a_base = p.a_offset + bz * p.a_batch_stride, b_base = p.b_offset + bz * p.b_batch_stride;
  uint o_base = p.out_offset + bz * p.out_batch_stride;
  uint lanes_n = gl_WorkGroupSize.x / KSPLIT;
  uint t = gl_LocalInvocationIndex;
  uint ln = t % lanes_n, slice = t / lanes_n;
  uint k_chunk = (p.K + KSPLIT - 1u) / KSPLIT;
  uint k_begin = min(slice * k_chunk, p.K), k_end = min(k_begin + k_chunk, p.K);
  for (uint n0 = gl_WorkGroupID.x * lanes_n; n0 < p.N; n0 += gl_NumWorkGroups.x * lanes_n) {
    uint n = n0 + ln;
    float acc[MMAX];
    [[unroll]] for (uint m = 0u; m < MMAX; m++) acc[m] = 0.0;
    if (n < p.N) {
      for (uint k = k_begin; k < k_end; k++) {
        float bv = b_load(b_base + k * p.ldb + n);
        [[unroll]] for (uint m = 0u; m < MMAX; m++)
          if (m < p.M) acc[m] = fma(a_load(a_base + m * p.lda + k), bv, acc[m]);
      }
    }
    [[unroll]] for (uint m = 0u; m < MMAX; m++) {
      barrier();
      partial[slice * lanes_n + ln] = acc[m];
      barrier();
      if (slice == 0u && n < p.N && m < p.M) {
        float dot = 0.0;
        for (uint s = 0u; s < KSPLIT; s++) dot += partial[s * lanes_n + ln];
        write_out(o_base, m, n, plain_value(o_base, m, n, dot));
      }
    }
  }
}

void main() {
  for (uint bz = gl_WorkGroupID.z; bz < p.batch; bz += gl_NumWorkGroups.z) {
    if (VARIANT == 0u)
      gemv_nk(bz);
    else
      gemv_kn(bz);
  }
}
