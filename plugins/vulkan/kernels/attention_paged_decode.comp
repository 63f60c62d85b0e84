#version 450
/* attention_paged_decode.comp - paged_attention for batches of about one new token per
 * sequence (tokens <= batch: decode) as flash-decoding. VARIANT 0 splits
 * each token's keys over p.splits workgroups, which write partial results
 * (maximum, sum, unnormalised output) to a scratch buffer; VARIANT 1 merges
 * them into out. attention_paged.comp, one workgroup walking all of a
 * sequence's keys, left most of the device idle there.
 *
 * Variant 0: workgroup (token t, y, split s) takes query heads
 * [y % head_chunks * HEADS, + HEADS) of kv head y / head_chunks, and keys
 * [s * split_keys, + split_keys) of those t sees. LANES invocations share a
 * key, each holding WPL of its 16-byte words (head_dim = 8 * LANES * WPL);
 * the KEY_GROUPS groups of LANES take every KEY_GROUPS-th key, IN_FLIGHT at a
 * time, keep their own running maximum, sum and output per head (scores in
 * log2 units), and merge them through shared memory at the end.
 *
 * Device data is checked as attention_paged.comp does (attention_paged.glsl).
 * A row whose keys are not all readable, and every row of a layout that does
 * not describe T tokens, leaves empty partials, which variant 1 writes as
 * zeros.
 *
 * Partials (binding 7, F32): row r = t * hq + h, split s at
 * (r * splits + s) * (head_dim + 2): the output's head_dim sums, then the
 * maximum and the sum of exponentials. */
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(constant_id = 4) const uint HEADS = 2u; /* query heads per workgroup, <= HEADS_MAX */
layout(constant_id = 5) const uint LANES = 16u; /* a power of two, at most the subgroup */
layout(constant_id = 6) const uint WPL = 1u;    /* words per lane, <= WPL_MAX */
/* = p.block_size: a division by a constant is a multiply and shifts, by a
 * push constant a longer sequence in the key loop (H100, B=16 L=4096 f32
 * 247-250 us -> 242-247; one pipeline per block size). */
layout(constant_id = 7) const uint BLOCK_SIZE = 16u;
/* Bounds of the per-invocation arrays below. Registers decide how many
 * workgroups stay resident: on an H200 (B=16 L=4096 bf16) 2 heads took
 * 146 us, 4 heads 165-170. */
const uint HEADS_MAX = 2u, WPL_MAX = 2u;
const uint KEY_GROUPS = gl_WorkGroupSize.x / LANES;
/* Keys per group loaded at once (H200, B=16 L=4096 bf16: 2 took 146 us,
 * 4 took 152-154). */
const uint IN_FLIGHT = 2u;
const uint DIMS = 8u * WPL;         /* dims per lane */
const uint HEAD_DIM = DIMS * LANES; /* = p.head_dim */

#include "attention_paged.glsl"
layout(std430, binding = 7) buffer Partials { float part[]; };

shared float merge_max[KEY_GROUPS * HEADS], merge_sum[KEY_GROUPS * HEADS];
shared float merge_out[HEADS * HEAD_DIM];

float q_row[HEADS_MAX][8u * WPL_MAX]; /* this lane's dims of each head's query, in log2 units */
float row_max[HEADS_MAX], row_sum[HEADS_MAX];
float acc[HEADS_MAX][8u * WPL_MAX];

/* The sequence holding token t: the last b with q_starts[b] <= t. */
uint sequence_of(uint t) {
  uint lo = 0u, hi = p.batch - 1u;
  while (lo < hi) {
    uint mid = (lo + hi + 1u) / 2u;
    if (uint(starts_i32[p.starts_offset + mid]) <= t) lo = mid; else hi = mid - 1u;
  }
  return lo;
}

/* The cache slot of key min(pos, stop - 1) of sequence b. */
uint key_slot(uint b, uint pos, uint stop) {
  return cache_slot(b, min(pos, stop - 1u), BLOCK_SIZE);
}

/* Element offset of this lane's first dim of kv head hk in cache slot `slot`. */
uint key_at(uint slot, uint hk, uint lane) {
  return (slot * p.hkv + hk) * HEAD_DIM + lane * DIMS;
}

void load_words(bool is_k, uint at, out float x[8u * WPL_MAX]) {
  [[unroll]] for (uint w = 0u; w < WPL_MAX; w++) {
    if (w >= WPL) break;
    float e[8];
    if (is_k) k_load8(p.k_offset + at + 8u * w, e); else v_load8(p.v_offset + at + 8u * w, e);
    [[unroll]] for (uint i = 0u; i < 8u; i++) x[8u * w + i] = e[i];
  }
}

/* Head h's score of one key (this lane's dims of it, summed over the
 * LANES sharing the key), in log2 units. */
float score(uint h, float kx[8u * WPL_MAX]) {
  float dot = 0.0;
  [[unroll]] for (uint i = 0u; i < DIMS; i++) dot += q_row[h][i] * kx[i];
  for (uint lanes = LANES / 2u; lanes > 0u; lanes /= 2u) dot += subgroupShuffleXor(dot, lanes);
  return dot;
}

/* Scores of both heads for two keys, as score() computes each (d[0] head
 * 0 key 0, d[1] head 0 key 1, d[2] head 1 key 0, d[3] head 1 key 1), with
 * fewer shuffles: the first two steps of the butterfly each send half of
 * the values still held (3 shuffles, not 8), the rest reduce one value,
 * which then holds lane (LANES / 2) * bit 1 + (LANES / 4) * bit 0 of its
 * index, and every lane reads all four from there. Needs LANES >= 4. On an
 * H100 (B=16 L=4096) bf16 moved 1812 GB/s so against 1754, f32 2140
 * against 2250, so F32 keeps score(). */
void scores_2x2(float kx[IN_FLIGHT][8u * WPL_MAX], out float d[4]) {
  float v[4];
  [[unroll]] for (uint h = 0u; h < 2u; h++)
    [[unroll]] for (uint j = 0u; j < 2u; j++) {
      float dot = 0.0;
      [[unroll]] for (uint i = 0u; i < DIMS; i++) dot += q_row[h][i] * kx[j][i];
      v[2u * h + j] = dot;
    }
  uint lane = gl_SubgroupInvocationID & (LANES - 1u), base = gl_SubgroupInvocationID - lane;
  bool upper = (lane & (LANES / 2u)) != 0u;
  float a0 = (upper ? v[2] : v[0]) + subgroupShuffleXor(upper ? v[0] : v[2], LANES / 2u);
  float a1 = (upper ? v[3] : v[1]) + subgroupShuffleXor(upper ? v[1] : v[3], LANES / 2u);
  bool odd = (lane & (LANES / 4u)) != 0u;
  float b = (odd ? a1 : a0) + subgroupShuffleXor(odd ? a0 : a1, LANES / 4u);
  for (uint lanes = LANES / 8u; lanes > 0u; lanes /= 2u) b += subgroupShuffleXor(b, lanes);
  [[unroll]] for (uint k = 0u; k < 4u; k++)
    d[k] = subgroupShuffle(b, base + (k >> 1) * (LANES / 2u) + (k & 1u) * (LANES / 4u));
}

/* Folds keys 0 .. n - 1 of kx, vx (n constant where inlined) into every
 * head's running state with one rescale: on an H200 (B=16 L=4096 bf16)
 * 142 us against 146-150 with a rescale per key. */
void visit(uint n, float kx[IN_FLIGHT][8u * WPL_MAX], float vx[IN_FLIGHT][8u * WPL_MAX]) {
  bool pairs = n == 2u && IN_FLIGHT == 2u && HEADS == 2u && LANES >= 4u && DTYPE != DT_F32;
  float both[4];
  if (pairs) scores_2x2(kx, both);
  [[unroll]] for (uint h = 0u; h < HEADS; h++) {
    float dot[IN_FLIGHT], weight[IN_FLIGHT];
    float top = row_max[h];
    [[unroll]] for (uint j = 0u; j < n; j++) {
      dot[j] = pairs ? both[2u * h + j] : score(h, kx[j]);
      top = max(top, dot[j]);
    }
    float rescale = exp2(row_max[h] - top), sum = row_sum[h] * rescale;
    [[unroll]] for (uint j = 0u; j < n; j++) {
      weight[j] = exp2(dot[j] - top);
      sum += weight[j];
    }
    row_sum[h] = sum;
    [[unroll]] for (uint i = 0u; i < DIMS; i++) {
      float a = acc[h][i] * rescale;
      [[unroll]] for (uint j = 0u; j < n; j++) a += weight[j] * vx[j][i];
      acc[h][i] = a;
    }
    row_max[h] = top;
  }
}

/* The maximum over the key groups of head h (after they are in merge_max). */
float merged_max(uint h) {
  float top = NEG_INF;
  for (uint j = 0u; j < KEY_GROUPS; j++) top = max(top, merge_max[j * HEADS + h]);
  return top;
}

void partial_main() {
  uint tid = gl_LocalInvocationIndex, t = gl_WorkGroupID.x, split = gl_WorkGroupID.z;
  uint hk = gl_WorkGroupID.y / p.head_chunks;
  uint h0 = hk * p.group + (gl_WorkGroupID.y - hk * p.head_chunks) * HEADS;
  uint heads = min(HEADS, (hk + 1u) * p.group - h0);
  uint g = tid / LANES, lane = tid - g * LANES;

  uint b = 0u, key_end = 0u; /* keys [0, key_end) are the token's */
  if (layout_valid()) {
    b = sequence_of(t);
    int q_first = starts_i32[p.starts_offset + b];
    int q_len = starts_i32[p.starts_offset + b + 1u] - q_first;
    int seq_len = lens_i32[p.lens_offset + b];
    int last = seq_len - q_len + (int(t) - q_first);
    bool reporter = split == 0u && gl_WorkGroupID.y == 0u && int(t) == q_first;
    if (last < readable_length(b, seq_len, reporter)) key_end = uint(last) + 1u;
  }

  float to_log2 = p.scale * LOG2E;
  [[unroll]] for (uint h = 0u; h < HEADS; h++) {
    row_max[h] = NEG_INF;
    row_sum[h] = 0.0;
    [[unroll]] for (uint i = 0u; i < DIMS; i++) acc[h][i] = 0.0;
    uint at = p.q_offset + t * p.q_st + min(h0 + h, p.hq - 1u) * p.q_sh + lane * DIMS;
    [[unroll]] for (uint w = 0u; w < WPL; w++) {
      float e[8];
      q_load8(at + 8u * w, e);
      [[unroll]] for (uint i = 0u; i < 8u; i++) q_row[h][8u * w + i] = e[i] * to_log2;
    }
  }

  /* Whole rounds of IN_FLIGHT keys per group, then the rest one at a time.
   * Loads clamped to the last key with visits under a test (one loop) took
   * 3.4x as long on both an H100 and an H200. */
  uint first = split * p.split_keys, stop = min(first + p.split_keys, key_end);
  uint pos = first + g;
  /* A round's cache slots are looked up during the round before, so that
   * its loads need not wait on the block table (H100, B=16 L=4096: f32
   * 242-247 -> 236-238 us, bf16 146-150 -> 145-150). Lookups past the
   * round clamp to stop - 1, a readable key. */
  uint slot[IN_FLIGHT];
  if (pos < stop)
    [[unroll]] for (uint j = 0u; j < IN_FLIGHT; j++)
      slot[j] = key_slot(b, pos + j * KEY_GROUPS, stop);
  for (; pos + (IN_FLIGHT - 1u) * KEY_GROUPS < stop; pos += IN_FLIGHT * KEY_GROUPS) {
    float kx[IN_FLIGHT][8u * WPL_MAX], vx[IN_FLIGHT][8u * WPL_MAX];
    [[unroll]] for (uint j = 0u; j < IN_FLIGHT; j++) {
      uint at = key_at(slot[j], hk, lane);
      load_words(true, at, kx[j]);
      load_words(false, at, vx[j]);
    }
    [[unroll]] for (uint j = 0u; j < IN_FLIGHT; j++)
      slot[j] = key_slot(b, pos + (IN_FLIGHT + j) * KEY_GROUPS, stop);
    visit(IN_FLIGHT, kx, vx);
  }
  for (; pos < stop; pos += KEY_GROUPS) {
    float kx[IN_FLIGHT][8u * WPL_MAX], vx[IN_FLIGHT][8u * WPL_MAX];
    uint at = key_at(key_slot(b, pos, stop), hk, lane);
    load_words(true, at, kx[0]);
    load_words(false, at, vx[0]);
    visit(1u, kx, vx);
  }

  /* Merge the key groups' states: the maxima and sums through shared
   * memory, the outputs added into one buffer a group at a time (a buffer
   * per group, 16 KiB at 4 heads, kept fewer workgroups resident: on an
   * H100 the former kernel took 658 us with it, 429-447 without). */
  [[unroll]] for (uint h = 0u; h < HEADS; h++) {
    if (lane == 0u) {
      merge_max[g * HEADS + h] = row_max[h];
      merge_sum[g * HEADS + h] = row_sum[h];
    }
  }
  barrier();
  for (uint j = 0u; j < KEY_GROUPS; j++) {
    if (g == j) {
      [[unroll]] for (uint h = 0u; h < HEADS; h++) {
        float f = row_max[h] == NEG_INF ? 0.0 : exp2(row_max[h] - merged_max(h));
        [[unroll]] for (uint i = 0u; i < DIMS; i++) {
          uint at = h * HEAD_DIM + lane * DIMS + i;
          merge_out[at] = (j == 0u ? 0.0 : merge_out[at]) + acc[h][i] * f;
        }
      }
    }
    barrier();
  }
  for (uint idx = tid; idx < heads * HEAD_DIM; idx += gl_WorkGroupSize.x) {
    uint h = idx / HEAD_DIM, d = idx - h * HEAD_DIM;
    uint at = ((t * p.hq + h0 + h) * p.splits + split) * (HEAD_DIM + 2u);
    part[at + d] = merge_out[idx];
    if (d == 0u) {
      float top = merged_max(h), sum = 0.0;
      for (uint j = 0u; j < KEY_GROUPS; j++) {
        float m = merge_max[j * HEADS + h];
        if (m != NEG_INF) sum += merge_sum[j * HEADS + h] * exp2(m - top);
      }
      part[at + HEAD_DIM] = top;
      part[at + HEAD_DIM + 1u] = sum;
    }
  }
}

/* Variant 1: out row (t, h) from its splits' partials (zeros where none
 * holds a key). */
void merge_main() {
  for (uint r = gl_WorkGroupID.x; r < p.tokens * p.hq; r += gl_NumWorkGroups.x) {
    uint t = r / p.hq, h = r - t * p.hq;
    uint base = r * p.splits * (p.head_dim + 2u);
    float top = NEG_INF, sum = 0.0;
    for (uint s = 0u; s < p.splits; s++) top = max(top, part[base + s * (p.head_dim + 2u) + p.head_dim]);
    for (uint s = 0u; s < p.splits; s++) {
      uint at = base + s * (p.head_dim + 2u) + p.head_dim;
      if (part[at] != NEG_INF) sum += part[at + 1u] * exp2(part[at] - top);
    }
    for (uint d = gl_LocalInvocationIndex; d < p.head_dim; d += gl_WorkGroupSize.x) {
      float o = 0.0;
      for (uint s = 0u; s < p.splits; s++) {
        uint at = base + s * (p.head_dim + 2u);
        float m = part[at + p.head_dim];
        if (m != NEG_INF) o += part[at + d] * exp2(m - top);
      }
      out_store(p.o_offset + t * p.o_st + h * p.o_sh + d, sum > 0.0 ? o / sum : 0.0);
    }
  }
}

void main() {
  if (VARIANT == 0u) partial_main(); else merge_main();
}
