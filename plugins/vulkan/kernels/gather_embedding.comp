#version 450
/* embedding: out[i, :] = table[ids[i], :]. An id outside [0, vocab) writes
 * zeros and raises ERR_EMBEDDING_ID. VECTORS = 1 (dim, offsets and row
 * strides multiples of 8): 8 elements per step through 16-byte words, and
 * count is in those steps. VECTORS = 2 (dim * element size, offsets and row
 * strides multiples of 16 bytes): the bytes move as 16-byte words, whatever
 * the dtype, and count is in words; a workgroup takes UNROLL * its size
 * consecutive words, each invocation UNROLL of them with all their loads
 * issued before the first store. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;
layout(constant_id = 5) const uint UNROLL = 1u; /* words per invocation (VECTORS = 2) */
const uint UNROLL_MAX = 4u;

FLOAT_OUT(dst, 0, DTYPE)
FLOAT_IN(table, 1, DTYPE)
INT_IN(ids, 2)

layout(push_constant) uniform Push {
  uint count;                 /* ids * dim */
  uint dim, vocab;
  uint out_offset, out_row_stride;
  uint table_offset, table_row_stride;
  uint ids_offset, ids_cols, ids_row_stride; /* ids as rows of ids_cols */
} p;

/* The id of output row i, or -1 (after raising the error once per row,
 * from its first element) when it is out of range. */
int row_id(uint i, uint col) {
  uint id_row = i / p.ids_cols;
  int id = ids_i32[p.ids_offset + id_row * p.ids_row_stride + (i - id_row * p.ids_cols)];
  if (id >= 0 && uint(id) < p.vocab) return id;
  if (col == 0u) raise_error(ERR_EMBEDDING_ID, id, int(p.vocab));
  return -1;
}

void copy_words() {
  const uint per_word = DTYPE == DT_F32 ? 4u : 8u;
  uint per_row = p.dim / per_word, tile = UNROLL * gl_WorkGroupSize.x;
  for (uint n0 = gl_WorkGroupID.x * tile; n0 < p.count; n0 += gl_NumWorkGroups.x * tile) {
    uvec4 w[UNROLL_MAX];
    uint to[UNROLL_MAX];
    [[unroll]] for (uint j = 0u; j < UNROLL_MAX; j++) {
      uint n = n0 + j * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
      to[j] = 0xffffffffu;
      if (j >= UNROLL || n >= p.count) continue;
      uint i = n / per_row;
      uint col = n - i * per_row;
      int id = row_id(i, col);
      w[j] = uvec4(0u);
      if (id >= 0) w[j] = table_v[(p.table_offset + uint(id) * p.table_row_stride) / per_word + col];
      to[j] = (p.out_offset + i * p.out_row_stride) / per_word + col;
    }
    [[unroll]] for (uint j = 0u; j < UNROLL_MAX; j++)
      if (to[j] != 0xffffffffu) dst_v[to[j]] = w[j];
  }
}

void main() {
  if (VECTORS == 2u) {
    copy_words();
    return;
  }
  uint per_row = VECTORS != 0u ? p.dim / 8u : p.dim;
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint i = n / per_row;
    uint col = n - i * per_row;
    if (VECTORS != 0u) col *= 8u;
    int id = row_id(i, col);
    uint from = p.table_offset + uint(id) * p.table_row_stride + col;
    uint to = p.out_offset + i * p.out_row_stride + col;
    if (VECTORS != 0u) {
      float v[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
      if (id >= 0) table_load8(from, v);
      dst_store8(to, v);
    } else {
      dst_store(to, id >= 0 ? table_load(from) : 0.0);
    }
  }
}
