#version 450
/* kv_append: k, v [T, Hkv, D] into k_cache, v_cache [blocks, block_size, Hkv, D]
 * at slots[T]. A negative slot is padding; a slot past the cache is skipped
 * and raises ERR_KV_APPEND_SLOT. VECTORS = 1 (D, offsets and row strides
 * multiples of 8): 8 elements per step through 16-byte words, and count is
 * in those steps. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;

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
  uint k_offset, k_row_stride;
  uint v_offset, v_row_stride;
  uint slots_offset;
} p;

void main() {
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
    uint ki = p.k_offset + row * p.k_row_stride + col, vi = p.v_offset + row * p.v_row_stride + col;
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
