/*
 * matmul.cl (host: matmul.c) - out[b] = alpha a[b] op(b[b]) + beta out[b]
 * (+ bias).
 *
 * gk_matmul: 64 x 64 tiles of out per work-group, stepping 16 deep through
 * K with both operand tiles staged (as F32) in work-group memory; each of
 * the 256 work-items accumulates a 4 x 4 block in F32.
 * gk_gemv: for a few rows of a (decode): one row and GK_GEMV_N columns per
 * work-group, the work-items splitting K, so b is streamed once.
 */

#define GK_TILE_PAD (GK_TILE_M + 1) /* odd row length: no bank conflicts on store */

/* The epilogue shared by both kernels for out[b, m, n] = alpha * acc + ... */
GK_INLINE void gk_matmul_store(const int dt, gk_ptr out, gk_ptr bias, const gk_matmul_params *p,
                               long bi, long m, long n, float acc) {
  long o = bi * p->out_bs + m * p->out_rs + n;
  float v = p->alpha * acc;
  if (p->beta != 0.0f) v = gk_fma(p->beta, gk_load(dt, out + p->out_off, o), v);
  if (p->has_bias) v += gk_load(dt, bias + p->bias_off, n);
  gk_store(dt, out + p->out_off, o, v);
}

/* Element (k, n) of op(b) for batch bi, 0 outside the matrix. */
GK_INLINE float gk_b_at(const int dt, gk_ptr b, const gk_matmul_params *p, long bi, long k,
                        long n) {
  if (k >= p->k || n >= p->n) return 0.0f;
  long at = p->b_layout == 0 ? n * p->b_rs + k : k * p->b_rs + n;
  return gk_load(dt, b + p->b_off, bi * p->b_bs + at);
}

GK_INLINE void gk_matmul_body(const int dt, gk_ptr out, gk_ptr a, gk_ptr b, gk_ptr bias,
                              gk_matmul_params p, local float *lds) {
  local float *as = lds;                          /* [TILE_K][TILE_PAD]: a tile, k-major */
  local float *bs = lds + GK_TILE_K * GK_TILE_PAD; /* [TILE_K][TILE_PAD]: op(b) tile */
  uint lid = gk_local_id(), tx = lid % 16, ty = lid / 16;
  long tiles_n = (p.n + GK_TILE_N - 1) / GK_TILE_N;
  long tiles = tiles_n * ((p.m + GK_TILE_M - 1) / GK_TILE_M);
  GK_FOR_ROWS(bi, p.batch) {
    for (long tile = gk_group_x(); tile < tiles; tile += gk_groups_x()) {
      long m0 = tile / tiles_n * GK_TILE_M, n0 = tile % tiles_n * GK_TILE_N;
      float acc[4][4];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
      for (long k0 = 0; k0 < p.k; k0 += GK_TILE_K) {
        /* 1024 elements of each tile, 4 per work-item, k fastest for a and
         * for b as [N, K]; n fastest for b as [K, N]. */
        for (uint e = lid; e < GK_TILE_M * GK_TILE_K; e += GK_WG_MATMUL) {
          uint row = e / GK_TILE_K, kk = e % GK_TILE_K;
          long m = m0 + row, k = k0 + kk;
          as[kk * GK_TILE_PAD + row] =
              m < p.m && k < p.k ? gk_load(dt, a + p.a_off, bi * p.a_bs + m * p.a_rs + k) : 0.0f;
          if (p.b_layout == 0) {
            bs[kk * GK_TILE_PAD + row] = gk_b_at(dt, b, &p, bi, k, n0 + row);
          } else {
            uint kr = e / GK_TILE_N, col = e % GK_TILE_N;
            bs[kr * GK_TILE_PAD + col] = gk_b_at(dt, b, &p, bi, k0 + kr, n0 + col);
          }
        }
        gk_barrier();
        for (int kk = 0; kk < GK_TILE_K; kk++) {
          float av[4], bv[4];
          for (int i = 0; i < 4; i++) av[i] = as[kk * GK_TILE_PAD + ty + 16 * i];
          for (int j = 0; j < 4; j++) bv[j] = bs[kk * GK_TILE_PAD + tx + 16 * j];
          for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] = gk_fma(av[i], bv[j], acc[i][j]);
        }
        gk_barrier();
      }
      for (int i = 0; i < 4; i++) {
        long m = m0 + ty + 16 * i;
        for (int j = 0; j < 4; j++) {
          long n = n0 + tx + 16 * j;
          if (m < p.m && n < p.n) gk_matmul_store(dt, out, bias, &p, bi, m, n, acc[i][j]);
        }
      }
    }
  }
}

/* Rows of out (batch * m of them) go to the y dimension, GK_GEMV_N-column
 * blocks of out to x. */
GK_INLINE void gk_gemv_body(const int dt, gk_ptr out, gk_ptr a, gk_ptr b, gk_ptr bias,
                            gk_matmul_params p, local float *s) {
  uint lid = gk_local_id();
  long blocks = (p.n + GK_GEMV_N - 1) / GK_GEMV_N;
  GK_FOR_ROWS(row, p.batch * p.m) {
    long bi = row / p.m, m = row % p.m;
    gk_ptr arow = a + p.a_off + (bi * p.a_bs + m * p.a_rs) * (long)(dt == GK_F32 ? 4 : 2);
    for (long block = gk_group_x(); block < blocks; block += gk_groups_x()) {
      long n0 = block * GK_GEMV_N;
      if (p.b_layout == 0) {
        /* b [N, K]: every work-item takes k = lid, lid + 256, ... for all 16 columns. */
        float acc[GK_GEMV_N];
        for (int j = 0; j < GK_GEMV_N; j++) acc[j] = 0.0f;
        GK_FOR_GROUP(k, p.k, GK_WG_MATMUL) {
          float av = gk_load(dt, arow, k);
          for (int j = 0; j < GK_GEMV_N; j++)
            if (n0 + j < p.n)
              acc[j] = gk_fma(av, gk_load(dt, b + p.b_off, bi * p.b_bs + (n0 + j) * p.b_rs + k), acc[j]);
        }
        for (int j = 0; j < GK_GEMV_N; j++) s[j * GK_WG_MATMUL + lid] = acc[j];
        gk_barrier();
        for (uint span = GK_WG_MATMUL / 2; span > 0; span >>= 1) {
          if (lid < span)
            for (int j = 0; j < GK_GEMV_N; j++) s[j * GK_WG_MATMUL + lid] += s[j * GK_WG_MATMUL + lid + span];
          gk_barrier();
        }
        if (lid < GK_GEMV_N && n0 + lid < p.n)
          gk_matmul_store(dt, out, bias, &p, bi, m, n0 + lid, s[lid * GK_WG_MATMUL]);
      } else {
        /* b [K, N]: work-item lid takes column lid % 16 and rows k = lid / 16 + 16 i. */
        uint j = lid % GK_GEMV_N;
        float acc = 0.0f;
        if (n0 + j < p.n)
          for (long k = lid / GK_GEMV_N; k < p.k; k += GK_WG_MATMUL / GK_GEMV_N)
            acc = gk_fma(gk_load(dt, arow, k), gk_load(dt, b + p.b_off, bi * p.b_bs + k * p.b_rs + n0 + j), acc);
        s[lid] = acc;
        gk_barrier();
        for (uint span = GK_WG_MATMUL / 2; span >= GK_GEMV_N; span >>= 1) {
          if (lid < span) s[lid] += s[lid + span];
          gk_barrier();
        }
        if (lid < GK_GEMV_N && n0 + lid < p.n)
          gk_matmul_store(dt, out, bias, &p, bi, m, n0 + lid, s[lid]);
      }
      gk_barrier(); /* s is reused by the next block */
    }
  }
}

#undef GK_TILE_PAD
