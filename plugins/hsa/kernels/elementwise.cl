/*
 * elementwise.cl - the elementwise family's kernels (host: elementwise.c).
 *
 * copy (any strides, dtype conversion) and fill, then the elementwise ops
 * over rows: add, mul, mul_add, silu, gelu, add_gelu, swiglu. Tensor 0 is
 * out, 1..3 the inputs; an input with row stride 0 is a 1-D row broadcast
 * over the rows. In place is safe: each element is read before it is
 * written, by the same work-item.
 */

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

/* Element (r, c) of tensor i of an elementwise call. */
GK_INLINE float gk_elt_load(const int dt, gk_ptr base, const gk_eltwise_params *p, int i, long r,
                            long c) {
  return gk_load(dt, base + p->off[i], r * p->row_stride[i] + c);
}

GK_INLINE void gk_elt_store(const int dt, gk_ptr out, const gk_eltwise_params *p, long r, long c,
                            float v) {
  gk_store(dt, out + p->off[0], r * p->row_stride[0] + c, v);
}

/* for each (r, c): out = EXPR, with x0..x2 the inputs that exist */
#define GK_ELTWISE(dt, p, EXPR)                                     \
  GK_FOR_ROWS(r, (p).rows) {                                        \
    GK_FOR_GRID_X(c, (p).cols, GK_WG_ELEMENTWISE) {                 \
      gk_elt_store(dt, out, &(p), r, c, (EXPR));                    \
    }                                                               \
  }
#define X0 gk_elt_load(dt, in0, &p, 1, r, c)
#define X1 gk_elt_load(dt, in1, &p, 2, r, c)
#define X2 gk_elt_load(dt, in2, &p, 3, r, c)

GK_INLINE void gk_add_body(const int dt, gk_ptr out, gk_ptr in0, gk_ptr in1, gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, X0 + X1)
}

GK_INLINE void gk_mul_body(const int dt, gk_ptr out, gk_ptr in0, gk_ptr in1, gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, X0 * X1)
}

GK_INLINE void gk_mul_add_body(const int dt, gk_ptr out, gk_ptr in0, gk_ptr in1, gk_ptr in2,
                               gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, gk_fma(X0, X1, X2))
}

GK_INLINE void gk_silu_body(const int dt, gk_ptr out, gk_ptr in0, gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, gk_silu(X0))
}

GK_INLINE float gk_gelu(int kind, float x) {
  return kind == 1 ? gk_gelu_tanh(x) : gk_gelu_erf(x);
}

GK_INLINE void gk_gelu_body(const int dt, gk_ptr out, gk_ptr in0, gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, gk_gelu(p.kind, X0))
}

GK_INLINE void gk_add_gelu_body(const int dt, gk_ptr out, gk_ptr in0, gk_ptr in1,
                                gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, gk_gelu(p.kind, X0 + X1))
}

GK_INLINE void gk_swiglu_body(const int dt, gk_ptr out, gk_ptr in0, gk_ptr in1,
                              gk_eltwise_params p,
    local float *unused_lds) {
  GK_ELTWISE(dt, p, gk_silu(X0) * X1)
}

#undef X0
#undef X1
#undef X2
#undef GK_ELTWISE
