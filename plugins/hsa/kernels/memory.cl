/*
 * memory.cl - raw byte copy and fill for the memory layer's mem_copy and
 * mem_fill (host: memory.c), not an op. The ops copy and fill are in
 * elementwise.cl.
 */

GK_INLINE void gk_bytes_copy_body(gk_ptr dst, gk_ptr src, gk_bytes_params p,
    local float *unused_lds) {
  gk_ptr d = dst + p.dst_off, s = src + p.src_off;
  if (((p.dst_off | p.src_off | p.size) & 7) == 0) {
    GK_FOR_GRID_X(i, p.size / 8, GK_WG_ELEMENTWISE)
    ((global ulong *)d)[i] = ((global const ulong *)s)[i];
  } else {
    GK_FOR_GRID_X(i, p.size, GK_WG_ELEMENTWISE)
    d[i] = s[i];
  }
}

GK_INLINE void gk_bytes_fill_body(gk_ptr dst, gk_bytes_params p,
    local float *unused_lds) {
  gk_ptr d = dst + p.dst_off;
  if (((p.dst_off | p.size) & 3) == 0) {
    uint word = p.value * 0x01010101u;
    GK_FOR_GRID_X(i, p.size / 4, GK_WG_ELEMENTWISE)
    ((global uint *)d)[i] = word;
  } else {
    GK_FOR_GRID_X(i, p.size, GK_WG_ELEMENTWISE)
    d[i] = (uchar)p.value;
  }
}
