#version 450
/* kv_append: k, v [T, Hkv, D] into k_cache, v_cache [blocks, block_size, Hkv, D]
 * at slots[T]. A negative slot is padding; a slot past the cache is skipped
 * and raises ERR_KV_APPEND_SLOT. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

FLOAT_OUT(kc, 0, DTYPE)
FLOAT_OUT(vc, 1, DTYPE)
FLOAT_IN(k, 2, DTYPE)
FLOAT_IN(v, 3, DTYPE)
INT_IN(slots, 4)

layout(push_constant) uniform Push {
  uint count;             /* T * Hkv * D */
  uint heads, dim, capacity; /* capacity = blocks * block_size */
  uint kc_offset, kc_row_stride;
  uint vc_offset, vc_row_stride;
  uint k_offset, k_row_stride;
  uint v_offset, v_row_stride;
  uint slots_offset;
} p;

void main() {
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint row = n / p.dim; /* t * heads + h */
    uint col = n - row * p.dim;
    uint t = row / p.heads;
    uint h = row - t * p.heads;
    int slot = slots_i32[p.slots_offset + t];
    if (slot < 0) continue;
    if (uint(slot) >= p.capacity) {
      if (h == 0u && col == 0u) raise_error(ERR_KV_APPEND_SLOT, slot, int(p.capacity));
      continue;
    }
    uint cache_row = uint(slot) * p.heads + h;
    float kv = k_load(p.k_offset + row * p.k_row_stride + col);
    float vv = v_load(p.v_offset + row * p.v_row_stride + col);
    kc_store(p.kc_offset + cache_row * p.kc_row_stride + col, kv);
    vc_store(p.vc_offset + cache_row * p.vc_row_stride + col, vv);
  }
}
