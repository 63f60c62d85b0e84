#version 450
/* attention: q [B, Sq, Hq, D], k and v [B, Skv, Hkv, D], out like q, with
 * optional kv_lens [B] and lse [B, Hq, Sq] (F32). Workgroup (x, hkv, b) owns
 * BQ rows of the list of (query i, head g of the kv head's group), row
 * index i * group + g, looping over x when the grid is short. VARIANT 1 =
 * causal. A kv_lens entry outside [0, Skv] raises ERR_ATTENTION_KV_LEN and
 * is clamped. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#include "attention_op.glsl"

#include "attention_attend.glsl"

shared int block_last;

void main() {
  uint b = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
  uint lane = tid - (tid / TPR) * TPR;
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
    attend_init();
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
    }
    for (uint idx = tid; idx < BQ * p.head_dim; idx += gl_WorkGroupSize.x) {
      uint r = idx / p.head_dim, d = idx - (idx / p.head_dim) * p.head_dim;
      float x = 0.0;
      if (first + r < rows) {
        uvec2 ih = row_query(first + r);
        x = q_load(p.q_offset + b * p.q_sb + ih.x * p.q_ss + ih.y * p.q_sh + d);
      }
      q_tile[r * DMAX + d] = x;
    }
    barrier();
    attend_keys(p.head_dim, p.scale, uint(block_last + 1));
    float lse = attend_finish(p.head_dim);
    uint r = tid / TPR;
    if (p.has_lse != 0u && lane == 0u && first + r < rows) {
      uvec2 ih = row_query(first + r);
      lse_f32[p.lse_offset + (b * p.hq + ih.y) * p.sq + ih.x] = lse;
    }
  }
}
