#version 450
/* embedding: out[i, :] = table[ids[i], :]. An id outside [0, vocab) writes
 * zeros and raises ERR_EMBEDDING_ID. VECTORS = 1 (dim, offsets and row
 * strides multiples of 8): 8 elements per step through 16-byte words, and
 * count is in those steps. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 4) const uint VECTORS = 0;

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

void main() {
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
