/*
 * rope.cl (host: rope.c) - rotary embedding. One work-group per token:
 * each work-item computes the angles of its pairs once (in double, see
 * gk_sincos) and turns that pair in every head. Features past rotary_dim
 * are copied. Pair j's frequency is theta^(-2j / rotary_dim), or the
 * caller's inv_freq[j].
 */

/* out, x, positions, inv_freq (or null) */
GK_INLINE void gk_rope_body(const int dt, gk_ptr out, gk_ptr x, gk_ptr positions,
                            gk_ptr inv_freq, gk_rope_params p,
    local float *unused_lds) {
  long pairs = p.rotary_dim / 2;
  long rest = p.head_dim - p.rotary_dim;
  GK_FOR_ROWS(t, p.tokens) {
    double position = (double)gk_load_i32(positions + p.pos_off, t * p.pos_stride);
    gk_ptr xt = x + p.x_off, ot = out + p.out_off;
    GK_FOR_GROUP(j, pairs + rest, GK_WG_ROPE) {
      if (j < pairs) {
        /* theta^(-2j/rotary_dim) = 2^(-(2j/rotary_dim) log2 theta) */
        double frequency =
            p.has_inv_freq ? (double)gk_load(GK_F32, inv_freq + p.inv_freq_off, j)
                           : gk_exp2_f64(-(double)(2 * j) / (double)p.rotary_dim * p.log2_theta);
        float sn, cs;
        gk_sincos(position * frequency, &sn, &cs);
        long i0 = p.style == 0 ? j : 2 * j;
        long i1 = p.style == 0 ? j + pairs : 2 * j + 1;
        for (long h = 0; h < p.heads; h++) {
          long xo = t * p.x_stride_t + h * p.x_stride_h, oo = t * p.out_stride_t + h * p.out_stride_h;
          float x0 = gk_load(dt, xt, xo + i0), x1 = gk_load(dt, xt, xo + i1);
          gk_store(dt, ot, oo + i0, x0 * cs - x1 * sn);
          gk_store(dt, ot, oo + i1, x0 * sn + x1 * cs);
        }
      } else {
        long e = p.rotary_dim + (j - pairs);
        for (long h = 0; h < p.heads; h++)
          gk_store(dt, ot, t * p.out_stride_t + h * p.out_stride_h + e,
                   gk_load(dt, xt, t * p.x_stride_t + h * p.x_stride_h + e));
      }
    }
  }
}
