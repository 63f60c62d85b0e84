#version 450
/* embedding: out[i, :] = table[ids[i], :]. An id outside [0, vocab) writes
 * zeros and raises ERR_EMBEDDING_ID. */
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

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

void main() {
  for (uint n = gl_GlobalInvocationID.x; n < p.count; n += grid_threads()) {
    uint i = n / p.dim;
    uint col = n - i * p.dim;
    uint id_row = i / p.ids_cols;
    int id = ids_i32[p.ids_offset + id_row * p.ids_row_stride + (i - id_row * p.ids_cols)];
    float v = 0.0;
    if (id >= 0 && uint(id) < p.vocab)
      v = table_load(p.table_offset + uint(id) * p.table_row_stride + col);
    else if (col == 0u)
      raise_error(ERR_EMBEDDING_ID, id, int(p.vocab));
    dst_store(p.out_offset + i * p.out_row_stride + col, v);
  }
}
