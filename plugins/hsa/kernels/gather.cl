/*
 * gather.cl (host: gather.c) - embedding (rows of a table picked by ids)
 * and kv_append (rows written into a paged cache at slots). Both copy
 * elements bit for bit. Ids and slots come from device memory, so they are
 * checked here: a bad one is never used as an address, and raises the
 * error word.
 */

/* Copies element si of src to element di of dst, both of dtype dt. */
GK_INLINE void gk_move(const int dt, gk_ptr dst, long di, gk_ptr src, long si) {
  if (dt == GK_F32) ((global uint *)dst)[di] = ((global const uint *)src)[si];
  else ((global ushort *)dst)[di] = ((global const ushort *)src)[si];
}

/* out, table, ids, error */
GK_INLINE void gk_embedding_body(const int dt, gk_ptr out, gk_ptr table, gk_ptr ids, gk_ptr error,
                                 gk_embedding_params p,
    local float *unused_lds) {
  GK_FOR_ROWS(i, p.count) {
    int id = gk_load_i32(ids + p.ids_off, i);
    gk_ptr o = out + p.out_off;
    long orow = i * p.out_row_stride;
    if (id < 0 || id >= p.vocab) {
      if (gk_group_x() == 0 && gk_local_id() == 0)
        gk_raise(error, GK_ERROR_EMBEDDING_ID, i, id, p.vocab);
      GK_FOR_GRID_X(c, p.dim, GK_WG_ELEMENTWISE) gk_store(dt, o, orow + c, 0.0f);
    } else {
      long trow = (long)id * p.table_row_stride;
      GK_FOR_GRID_X(c, p.dim, GK_WG_ELEMENTWISE) gk_move(dt, o, orow + c, table + p.table_off, trow + c);
    }
  }
}

/* k_cache, v_cache, k, v, slots, error. The caches are contiguous
 * [blocks, block_size, heads, head_dim], so slot s starts at s * heads * head_dim. */
GK_INLINE void gk_kv_append_body(const int dt, gk_ptr k_cache, gk_ptr v_cache, gk_ptr k, gk_ptr v,
                                 gk_ptr slots, gk_ptr error, gk_kv_append_params p,
    local float *unused_lds) {
  long width = p.heads * p.head_dim;
  GK_FOR_ROWS(t, p.tokens) {
    int slot = gk_load_i32(slots + p.slots_off, t);
    if (slot < 0) continue; /* padding */
    if (slot >= p.slots_total) {
      if (gk_group_x() == 0 && gk_local_id() == 0)
        gk_raise(error, GK_ERROR_KV_SLOT, t, slot, p.slots_total);
      continue;
    }
    GK_FOR_GRID_X(e, width, GK_WG_ELEMENTWISE) {
      long h = (long)((uint)e / (uint)p.head_dim), d = e - h * p.head_dim; /* 32-bit divide */
      long dst = (long)slot * width + e;
      gk_move(dt, k_cache + p.k_cache_off, dst, k + p.k_off, t * p.k_stride_t + h * p.k_stride_h + d);
      gk_move(dt, v_cache + p.v_cache_off, dst, v + p.v_off, t * p.v_stride_t + h * p.v_stride_h + d);
    }
  }
}
