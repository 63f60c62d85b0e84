/*
 * gk_memory.cl - raw byte copy/fill (mem_copy, mem_fill) and the op copy
 * (any strides, dtype conversion) and fill.
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

/* Row r of the copy (all dims but the last) as element offsets. The loop
 * has a fixed trip count so that it unrolls and the params stay in
 * registers (indexing them by a run-time dim would spill them to scratch). */
GK_INLINE void gk_copy_row_offsets(const gk_copy_params *p, long r, long *dst, long *src) {
  long d = 0, s = 0;
#pragma unroll
  for (int i = 6; i >= 0; i--) {
    if (i <= p->ndim - 2) {
      long index = r % p->shape[i];
      r /= p->shape[i];
      d += index * p->dst_strides[i];
      s += index * p->src_strides[i];
    }
  }
  *dst = d;
  *src = s;
}

GK_INLINE void gk_copy_body(gk_ptr dst, gk_ptr src, gk_copy_params p,
    local float *unused_lds) {
  /* the host puts the last dim into slot 7, the others into 0 .. ndim - 2 */
  long cols = p.shape[7], rows = 1;
#pragma unroll
  for (int i = 0; i < 7; i++) rows *= i <= p.ndim - 2 ? p.shape[i] : 1;
  long ds = p.dst_strides[7], ss = p.src_strides[7];
  int raw_size = p.dst_dtype != p.src_dtype ? 0 : p.dst_dtype == GK_F16 || p.dst_dtype == GK_BF16 ? 2 : 4;
  GK_FOR_ROWS(r, rows) {
    long d0, s0;
    gk_copy_row_offsets(&p, r, &d0, &s0);
    GK_FOR_GRID_X(c, cols, GK_WG_ELEMENTWISE) {
      long di = d0 + c * ds, si = s0 + c * ss;
      if (raw_size == 4) {
        ((global uint *)(dst + p.dst_off))[di] = ((global const uint *)(src + p.src_off))[si];
      } else if (raw_size == 2) {
        ((global ushort *)(dst + p.dst_off))[di] = ((global const ushort *)(src + p.src_off))[si];
      } else {
        float v = gk_load(p.src_dtype, src + p.src_off, si);
        gk_store(p.dst_dtype, dst + p.dst_off, di, v);
      }
    }
  }
}

GK_INLINE void gk_fill_body(gk_ptr dst, gk_fill_params p,
    local float *unused_lds) {
  gk_ptr d = dst + p.off;
  GK_FOR_ROWS(r, p.rows) {
    long base = r * p.row_stride;
    GK_FOR_GRID_X(c, p.cols, GK_WG_ELEMENTWISE) {
      if (p.elem_size == 4) ((global uint *)d)[base + c] = p.bits;
      else ((global ushort *)d)[base + c] = (ushort)p.bits;
    }
  }
}
