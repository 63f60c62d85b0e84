#version 450
/* paged_attention: q and out [T, Hq, D]; k_cache, v_cache [blocks,
 * block_size, Hkv, D] (contiguous); block_table [B, max_blocks]; q_starts
 * [B + 1]; seq_lens [B]. Workgroup (x, hkv, b) owns BQ rows of sequence b's
 * list of (new token i, head g of the kv head's group). Query i sits at
 * position seq_len - q_len + i and sees the keys up to it.
 *
 * Device data is checked as the cpu backend does: a layout that does not
 * describe T tokens (q_starts not rising from 0 to T, or a sequence with
 * more new tokens than its length) raises ERR_PAGED_LAYOUT and the output is
 * zeroed; a block table entry outside the cache (ERR_PAGED_BLOCK) or a
 * sequence longer than its table row (ERR_PAGED_LENGTH) limits the
 * sequence's keys to the blocks before it, and rows past them get zeros. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

#include "attention_paged.glsl"
#include "attention_attend.glsl"

uint key_row(uint pos) {
  return (cache_slot(gl_WorkGroupID.z, pos, p.block_size) * p.hkv + gl_WorkGroupID.y) * p.head_dim;
}
uint key_k_offset(uint pos) { return p.k_offset + key_row(pos); }
uint key_v_offset(uint pos) { return p.v_offset + key_row(pos); }

shared int block_last;

/* Zeroes this workgroup's share of every output row. */
void zero_output() {
  uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z;
  uvec3 id = gl_WorkGroupID, n = gl_NumWorkGroups;
  uint me = id.x + n.x * (id.y + n.y * id.z);
  uint rows = p.tokens * p.hq;
  for (uint r = me; r < rows; r += groups) {
    uint t = r / p.hq, h = r - (r / p.hq) * p.hq;
    for (uint d = gl_LocalInvocationIndex; d < p.head_dim; d += gl_WorkGroupSize.x)
      out_store(p.o_offset + t * p.o_st + h * p.o_sh + d, 0.0);
  }
}

void main() {
  if (!layout_valid()) {
    zero_output();
    return;
  }
  uint b = gl_WorkGroupID.z, tid = gl_LocalInvocationIndex;
  uint q_first = uint(starts_i32[p.starts_offset + b]);
  uint q_len = uint(starts_i32[p.starts_offset + b + 1u]) - q_first;
  int seq_len = lens_i32[p.lens_offset + b];
  uint rows = q_len * p.group;
  if (gl_WorkGroupID.x * BQ >= rows) return; /* the grid covers the longest possible sequence */
  int readable = readable_length(b, seq_len, gl_WorkGroupID.x == 0u && gl_WorkGroupID.y == 0u);
  for (uint first = gl_WorkGroupID.x * BQ; first < rows; first += gl_NumWorkGroups.x * BQ) {
    barrier();
    attend_init();
    if (tid == 0u) block_last = ROW_NONE;
    barrier();
    if (tid < BQ) {
      int last = ROW_ABSENT;
      uint row = first + tid;
      if (row < rows) {
        uint i = row / p.group, h = gl_WorkGroupID.y * p.group + (row - i * p.group);
        last = seq_len - int(q_len) + int(i);
        if (last >= readable) last = ROW_NONE;
        row_out[tid] = p.o_offset + (q_first + i) * p.o_st + h * p.o_sh;
        atomicMax(block_last, last);
      }
      row_last[tid] = last;
    }
    for (uint idx = tid; idx < BQ * p.head_dim; idx += gl_WorkGroupSize.x) {
      uint r = idx / p.head_dim, d = idx - (idx / p.head_dim) * p.head_dim;
      float x = 0.0;
      uint row = first + r;
      if (row < rows) {
        uint i = row / p.group, h = gl_WorkGroupID.y * p.group + (row - i * p.group);
        x = q_load(p.q_offset + (q_first + i) * p.q_st + h * p.q_sh + d);
      }
      q_tile[r * DMAX + d] = x;
    }
    barrier();
    attend_keys(p.head_dim, p.scale, uint(block_last + 1));
    attend_finish(p.head_dim);
  }
}
