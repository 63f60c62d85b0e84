/*
 * norm.cl (host: norm.c) - row reductions, one work-group per row:
 * rmsnorm, add_rmsnorm, layernorm, softmax. Each work-item reads and writes
 * the same columns in every pass, so out may be x (in place).
 */

#define GK_ROW_AT(i, r) (p.off[i] + (r) * p.row_stride[i] * (long)(dt == GK_F32 ? 4 : 2))

/* out, x, weight */
GK_INLINE void gk_rmsnorm_body(const int dt, gk_ptr out, gk_ptr x, gk_ptr w, gk_norm_params p,
                               local float *s) {
  GK_FOR_ROWS(r, p.rows) {
    gk_ptr xr = x + GK_ROW_AT(1, r), outr = out + GK_ROW_AT(0, r);
    float sum_sq = 0.0f;
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) {
      float v = gk_load(dt, xr, c);
      sum_sq = gk_fma(v, v, sum_sq);
    }
    sum_sq = gk_group_sum(sum_sq, s, GK_WG_ROW);
    float inv = 1.0f / gk_sqrt(sum_sq / (float)p.cols + p.eps);
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW)
    gk_store(dt, outr, c, gk_load(dt, xr, c) * inv * gk_load(dt, w + p.off[2], c));
  }
}

/* out, residual, x, weight: residual += x (stored rounded to its dtype),
 * out = rmsnorm(residual) of the stored values. */
GK_INLINE void gk_add_rmsnorm_body(const int dt, gk_ptr out, gk_ptr res, gk_ptr x, gk_ptr w,
                                   gk_norm_params p, local float *s) {
  GK_FOR_ROWS(r, p.rows) {
    gk_ptr resr = res + GK_ROW_AT(1, r), xr = x + GK_ROW_AT(2, r), outr = out + GK_ROW_AT(0, r);
    float sum_sq = 0.0f;
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) {
      float v = gk_round(dt, gk_load(dt, resr, c) + gk_load(dt, xr, c));
      gk_store(dt, resr, c, v);
      sum_sq = gk_fma(v, v, sum_sq);
    }
    sum_sq = gk_group_sum(sum_sq, s, GK_WG_ROW);
    float inv = 1.0f / gk_sqrt(sum_sq / (float)p.cols + p.eps);
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW)
    gk_store(dt, outr, c, gk_load(dt, resr, c) * inv * gk_load(dt, w + p.off[3], c));
  }
}

/* out, x, weight, bias (bias used if has_bias); variance from a second pass
 * over (x - mean)^2, not E[x^2] - mean^2, which cancels. */
GK_INLINE void gk_layernorm_body(const int dt, gk_ptr out, gk_ptr x, gk_ptr w, gk_ptr b,
                                 gk_norm_params p, local float *s) {
  GK_FOR_ROWS(r, p.rows) {
    gk_ptr xr = x + GK_ROW_AT(1, r), outr = out + GK_ROW_AT(0, r);
    float sum = 0.0f;
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) sum += gk_load(dt, xr, c);
    float mean = gk_group_sum(sum, s, GK_WG_ROW) / (float)p.cols;
    float dev = 0.0f;
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) {
      float d = gk_load(dt, xr, c) - mean;
      dev = gk_fma(d, d, dev);
    }
    float var = gk_group_sum(dev, s, GK_WG_ROW) / (float)p.cols;
    float inv = 1.0f / gk_sqrt(var + p.eps);
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) {
      float v = (gk_load(dt, xr, c) - mean) * inv * gk_load(dt, w + p.off[2], c);
      if (p.has_bias) v += gk_load(dt, b + p.off[3], c);
      gk_store(dt, outr, c, v);
    }
  }
}

/* out, x: out = softmax(scale * x) */
GK_INLINE void gk_softmax_body(const int dt, gk_ptr out, gk_ptr x, gk_norm_params p,
                               local float *s) {
  GK_FOR_ROWS(r, p.rows) {
    gk_ptr xr = x + GK_ROW_AT(1, r), outr = out + GK_ROW_AT(0, r);
    float max = -GK_INFINITY;
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) max = gk_max(max, p.scale * gk_load(dt, xr, c));
    max = gk_group_max(max, s, GK_WG_ROW);
    float sum = 0.0f;
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW) sum += gk_exp(gk_fma(p.scale, gk_load(dt, xr, c), -max));
    float inv = 1.0f / gk_group_sum(sum, s, GK_WG_ROW);
    GK_FOR_GROUP(c, p.cols, GK_WG_ROW)
    gk_store(dt, outr, c, gk_exp(gk_fma(p.scale, gk_load(dt, xr, c), -max)) * inv);
  }
}

#undef GK_ROW_AT
