#version 450
/* matmul for a few rows of a (M <= MMAX, decode): bandwidth-bound on b.
 * VARIANT 0, b [N, K]: a workgroup computes RN consecutive outputs n; its
 * invocations stride over K (coalesced reads of b's rows) and the partial
 * dot products meet in a workgroup reduction.
 * VARIANT 1, b [K, N]: an invocation owns output n and a slice of K (reads of
 * b's rows coalesced over n); the KSPLIT slices meet in shared memory.
 * out = alpha * a op(b) + beta * out (+ bias), batched over gl_WorkGroupID.z.
 * VECTORS = 1 (VARIANT 0 with K, leading dims, offsets and batch strides
 * multiples of 8): a and b read 8 elements at a time through 16-byte words. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint MMAX = 4;   /* rows of a */
layout(constant_id = 5) const uint RN = 4;     /* outputs n per workgroup (VARIANT 0) */
layout(constant_id = 6) const uint KSPLIT = 4; /* slices of K (VARIANT 1) */
layout(constant_id = 7) const uint VECTORS = 0;

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(a, 1, DTYPE)
FLOAT_IN(b, 2, DTYPE)
FLOAT_IN(bias, 3, DTYPE)

layout(push_constant) uniform Push {
  uint M, N, K, batch;
  uint a_offset, lda, a_batch_stride;
  uint b_offset, ldb, b_batch_stride;
  uint out_offset, ldo, out_batch_stride;
  uint bias_offset, has_bias;
  float alpha, beta;
} p;

shared float partial[gl_WorkGroupSize.x];
#if SUBGROUPS
shared float subgroup_dots[RN * MMAX][gl_WorkGroupSize.x / 4u]; /* [output][subgroup] */
#endif

void write_out(uint o_base, uint m, uint n, float dot) {
  uint o = o_base + m * p.ldo + n;
  float v = p.alpha * dot;
  if (p.beta != 0.0) v += p.beta * dst_load(o);
  if (p.has_bias != 0u) v += bias_load(p.bias_offset + n);
  dst_store(o, v);
}

void gemv_nk(uint bz) {
  uint a_base = p.a_offset + bz * p.a_batch_stride, b_base = p.b_offset + bz * p.b_batch_stride;
  uint o_base = p.out_offset + bz * p.out_batch_stride;
  uint t = gl_LocalInvocationIndex;
  for (uint n0 = gl_WorkGroupID.x * RN; n0 < p.N; n0 += gl_NumWorkGroups.x * RN) {
    float acc[RN][MMAX];
    [[unroll]] for (uint r = 0u; r < RN; r++)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) acc[r][m] = 0.0;
    for (uint k8 = 8u * t; VECTORS != 0u && k8 < p.K; k8 += 8u * gl_WorkGroupSize.x) {
      float av[MMAX][8];
      [[unroll]] for (uint m = 0u; m < MMAX; m++) a_load8(a_base + m * p.lda + k8, av[m]);
      [[unroll]] for (uint r = 0u; r < RN; r++) {
        if (n0 + r >= p.N) break;
        float bv[8];
        b_load8(b_base + (n0 + r) * p.ldb + k8, bv);
        [[unroll]] for (uint m = 0u; m < MMAX; m++)
          [[unroll]] for (uint k = 0u; k < 8u; k++) acc[r][m] = fma(av[m][k], bv[k], acc[r][m]);
      }
    }
    for (uint k = t; VECTORS == 0u && k < p.K; k += gl_WorkGroupSize.x) {
      float av[MMAX];
      [[unroll]] for (uint m = 0u; m < MMAX; m++)
        av[m] = m < p.M ? a_load(a_base + m * p.lda + k) : 0.0;
      [[unroll]] for (uint r = 0u; r < RN; r++) {
        if (n0 + r >= p.N) break;
        float bv = b_load(b_base + (n0 + r) * p.ldb + k);
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
    barrier();
    if (t < RN * MMAX) {
      uint r = t / MMAX, m = t % MMAX;
      float dot = 0.0;
      for (uint s = 0u; s < gl_NumSubgroups; s++) dot += subgroup_dots[t][s];
      if (m < p.M && n0 + r < p.N) write_out(o_base, m, n0 + r, dot);
    }
    barrier();
#else
    [[unroll]] for (uint r = 0u; r < RN; r++)
      [[unroll]] for (uint m = 0u; m < MMAX; m++) {
        float dot = wg_sum(acc[r][m]);
        if (t == 0u && m < p.M && n0 + r < p.N) write_out(o_base, m, n0 + r, dot);
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
        write_out(o_base, m, n, dot);
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
