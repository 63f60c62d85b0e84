#version 450
/* kv_append: k, v [T, Hkv, D] into k_cache, v_cache [blocks, block_size, Hkv, D]
 * at slots[T]. A negative slot is padding; a slot past the cache is skipped
 * and raises ERR_KV_APPEND_SLOT. VECTORS = 1 (D, offsets and row strides
 * multiples of 8): 8 elements per step through 16-byte words, and count is
 * in those steps. VECTORS = 2 (D * element size, offsets and row strides
 * multiples of 16 bytes): the bytes move as 16-byte words, whatever the
 * dtype, and count is in words; a workgroup takes UNROLL * its size
 * consecutive words, each invocation UNROLL of them with all their loads
 * issued before the first store. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;
layout(constant_id = 5) const uint UNROLL = 1u; /* words per invocation (VECTORS = 2) */
const uint UNROLL_MAX = 4u;

FLOAT_OUT(kc, 0, DTYPE)
FLOAT_OUT(vc, 1, DTYPE)
FLOAT_IN(k, 2, DTYPE)
FLOAT_IN(v, 3, DTYPE)
INT_IN(slots, 4)

layout(push_constant) uniform Push {
  uint count;             /* T * Hkv * D (VECTORS = 1: / 8) */
  uint heads, dim, capacity; /* capacity = blocks * block_size */
  uint kc_offset, kc_row_stride;
  uint vc_offset, vc_row_stride;
  uint k_offset, k_row_stride; /* k, v: row (t, h) at t * token_stride + h * row_stride */
  uint v_offset, v_row_stride;
  uint slots_offset;
  uint k_token_stride, v_token_stride;
} p;

/* The cache row (slot * heads + h) for row t * heads + h of k and v, or
 * -1 when the row is not written (after raising the error once per row,
 * from its first word, for a slot past the cache). */
int cache_row(uint row, uint col) {
  uint t = row / p.heads;
  uint h = row - t * p.heads;
  int slot = slots_i32[p.slots_offset + t];
  if (slot < 0) return -1;
  if (uint(slot) >= p.capacity) {
    if (h == 0u && col == 0u) raise_error(ERR_KV_APPEND_SLOT, slot, int(p.capacity));
    return -1;
  }
  return int(uint(slot) * p.heads + h);
}

void copy_words() {
  const uint per_word = DTYPE == DT_F32 ? 4u : 8u;
  uint per_row = p.dim / per_word, tile = UNROLL * gl_WorkGroupSize.x;
  for (uint n0 = gl_WorkGroupID.x * tile; n0 < p.count; n0 += gl_NumWorkGroups.x * tile) {
    uvec4 kw[UNROLL_MAX], vw[UNROLL_MAX];
    uint kci[UNROLL_MAX], vci[UNROLL_MAX];
    bool live[UNROLL_MAX];
    [[unroll]] for (uint j = 0u; j < UNROLL_MAX; j++) {
      uint n = n0 + j * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
      live[j] = false;
      if (j >= UNROLL || n >= p.count) continue;
      uint row = n / per_row;
      uint col = n - row * per_row;
      int cr = cache_row(row, col);
      if (cr < 0) continue;
      live[j] = true;
      uint t = row / p.heads, h = row - t * p.heads;
      kw[j] = k_v[(p.k_offset + t * p.k_token_stride + h * p.k_row_stride) / per_word + col];
      vw[j] = v_v[(p.v_offset + t * p.v_token_stride + h * p.v_row_stride) / per_word + col];
      kci[j] = (p.kc_offset + uint(cr) * p.kc_row_stride) / per_word + col;
      vci[j] = (p.vc_offset + uint(cr) * p.vc_row_stride) / per_word + col;
    }
    [[unroll]] for (uint j = 0u; j < UNROLL_MAX; j++) {
      if (!live[j]) continue;
      kc_v[kci[j]] = kw[j];
      vc_v[vci[j]] = vw[j];
    }
  }
}

void main() {
  if (VECTORS == 2u) {
    copy_words();
    return;
  }
  uint per_row = VECTORS != 0u ? p.dim / 8u : p.dim;
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint row = n / per_row; /* t * heads + h */
    uint col = n - row * per_row;
    if (VECTORS != 0u) col *= 8u;
    uint t = row / p.heads;
    uint h = row - t * p.heads;
    int slot = slots_i32[p.slots_offset + t];
    if (slot < 0) continue;
    if (uint(slot) >= p.capacity) {
      if (h == 0u && col == 0u) raise_error(ERR_KV_APPEND_SLOT, slot, int(p.capacity));
      continue;
    }
    uint cache_row = uint(slot) * p.heads + h;
    uint ki = p.k_offset + t * p.k_token_stride + h * p.k_row_stride + col;
    uint vi = p.v_offset + t * p.v_token_stride + h * p.v_row_stride + col;
    uint kci = p.kc_offset + cache_row * p.kc_row_stride + col;
    uint vci = p.vc_offset + cache_row * p.vc_row_stride + col;
    if (VECTORS != 0u) {
      float kv[8], vv[8];
      k_load8(ki, kv);
      v_load8(vi, vv);
      kc_store8(kci, kv);
      vc_store8(vci, vv);
    } else {
      kc_store(kci, k_load(ki));
      vc_store(vci, v_load(vi));
    }
  }
}
