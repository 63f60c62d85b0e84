/*
 * gk_eltwise.cl - elementwise ops over rows: add, mul, mul_add, silu, gelu,
 * add_gelu, swiglu. Tensor 0 is out, 1..3 the inputs; an input with row
 * stride 0 is a 1-D row broadcast over the rows. In place is safe: each
 * element is read before it is written, by the same work-item.
 */

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
