/*
 * attention.cl (host: attention.c) - attention of one query row per
 * work-group, over its keys in blocks of GK_WG_ATTENTION with an online
 * softmax (running max m, running sum l, output rescaled when m grows), all
 * in F32.
 *
 * Work-item t scores key t of a block (a dot product over D with the query
 * row held in work-group memory) and owns output features t, t + 64,
 * t + 128, t + 192. Work-group memory: the query row (D <= 256), the
 * block's weights, each key's value row, and the reduction scratch.
 *
 * gk_attention: dense q/k/v [B, S, H, D]; gk_paged_attention: keys and
 * values found through a block table in a paged cache. Lengths, slots and
 * block ids read from device memory are checked before any address is
 * formed from them; a bad one raises the error word.
 */

#define GK_ATT_WG GK_WG_ATTENTION
#define GK_ATT_PER_ITEM (256 / GK_ATT_WG) /* output features per work-item */

typedef struct gk_att_state {
  float m, l;
  float acc[GK_ATT_PER_ITEM];
} gk_att_state;

typedef struct gk_att_lds {
  local float *q;   /* [256] */
  local float *p;   /* [WG] weights of the block */
  local float *red; /* [WG] reduction scratch */
  local int *row;   /* [WG] value row of each key of the block (-1: none) */
} gk_att_lds;

GK_INLINE gk_att_lds gk_att_split(local float *lds) {
  gk_att_lds s;
  s.q = lds;
  s.p = lds + 256;
  s.red = lds + 256 + GK_ATT_WG;
  s.row = (local int *)(lds + 256 + 2 * GK_ATT_WG);
  return s;
}

GK_INLINE void gk_att_begin(const int dt, gk_att_state *st, gk_ptr q, long d, gk_att_lds s) {
  st->m = -GK_INFINITY;
  st->l = 0.0f;
  for (int j = 0; j < GK_ATT_PER_ITEM; j++) st->acc[j] = 0.0f;
  gk_barrier(); /* the previous row is done with s.q */
  GK_FOR_GROUP(i, d, GK_ATT_WG) s.q[i] = gk_load(dt, q, i);
  gk_barrier();
}

GK_INLINE float gk_att_score(const int dt, gk_att_lds s, gk_ptr k, long d, float scale) {
  float dot = 0.0f;
  for (long i = 0; i < d; i++) dot = gk_fma(s.q[i], gk_load(dt, k, i), dot);
  return dot * scale;
}

/* Folds one block of keys into the state. `score` is this work-item's key
 * score (-inf for none) and `row` the index of its value row: values of
 * key t start at element row * v_stride of v. */
GK_INLINE void gk_att_block(const int dt, gk_att_state *st, float score, int row, gk_ptr v,
                            long v_stride, long d, gk_att_lds s) {
  uint lid = gk_local_id();
  float m_new = gk_max(st->m, gk_group_max(score, s.red, GK_ATT_WG));
  float p = score == -GK_INFINITY ? 0.0f : gk_exp(score - m_new);
  float correction = st->m == -GK_INFINITY ? 0.0f : gk_exp(st->m - m_new);
  s.p[lid] = p;
  s.row[lid] = row;
  st->l = st->l * correction + gk_group_sum(p, s.red, GK_ATT_WG); /* its barrier publishes p, row */
  for (int j = 0; j < GK_ATT_PER_ITEM; j++) {
    long f = lid + j * GK_ATT_WG;
    if (f >= d) break;
    float acc = st->acc[j] * correction;
    for (int t = 0; t < GK_ATT_WG; t++)
      if (s.p[t] != 0.0f) acc = gk_fma(s.p[t], gk_load(dt, v, s.row[t] * v_stride + f), acc);
    st->acc[j] = acc;
  }
  st->m = m_new;
}

/* Writes out = acc / l (0 if no key was seen) and returns the log-sum-exp. */
GK_INLINE float gk_att_finish(const int dt, const gk_att_state *st, gk_ptr out, long d) {
  uint lid = gk_local_id();
  int seen = st->l > 0.0f;
  for (int j = 0; j < GK_ATT_PER_ITEM; j++) {
    long f = lid + j * GK_ATT_WG;
    if (f < d) gk_store(dt, out, f, seen ? st->acc[j] / st->l : 0.0f);
  }
  return seen ? st->m + gk_log(st->l) : -GK_INFINITY;
}

/* out, q, k, v, kv_lens, lse, error */
GK_INLINE void gk_attention_body(const int dt, gk_ptr out, gk_ptr q, gk_ptr k, gk_ptr v,
                                 gk_ptr kv_lens, gk_ptr lse, gk_ptr error, gk_attention_params p,
                                 local float *lds) {
  gk_att_lds s = gk_att_split(lds);
  long es = gk_size(dt), group = p.hq / p.hkv;
  GK_FOR_ROWS(row, p.batch * p.sq * p.hq) {
    long h = row % p.hq, i = row / p.hq % p.sq, b = row / (p.hq * p.sq), kvh = h / group;
    long len = p.skv;
    if (p.has_kv_lens) {
      int l = gk_load_i32(kv_lens + p.kv_lens_off, b);
      if (l < 0 || l > p.skv) {
        gk_raise(error, GK_ERROR_KV_LENS, b, l, p.skv);
        l = l < 0 ? 0 : (int)p.skv;
      }
      len = l;
    }
    /* causal: the query block is aligned to the end of the keys */
    long visible = p.causal && i + len - p.sq + 1 < len ? i + len - p.sq + 1 : len;
    gk_att_state st;
    gk_att_begin(dt, &st, q + p.q_off + es * (b * p.q_strides[0] + i * p.q_strides[1] + h * p.q_strides[2]),
                 p.d, s);
    gk_ptr kb = k + p.k_off + es * (b * p.k_strides[0] + kvh * p.k_strides[2]);
    gk_ptr vb = v + p.v_off + es * (b * p.v_strides[0] + kvh * p.v_strides[2]);
    for (long k0 = 0; k0 < visible; k0 += GK_ATT_WG) {
      long j = k0 + gk_local_id();
      float score = -GK_INFINITY;
      if (j < visible) score = gk_att_score(dt, s, kb + es * j * p.k_strides[1], p.d, p.scale);
      gk_att_block(dt, &st, score, (int)j, vb, p.v_strides[1], p.d, s);
    }
    float l = gk_att_finish(dt, &st,
                            out + p.out_off + es * (b * p.out_strides[0] + i * p.out_strides[1] + h * p.out_strides[2]),
                            p.d);
    if (p.has_lse && gk_local_id() == 0)
      ((global float *)(lse + p.lse_off))[(b * p.hq + h) * p.sq + i] = l;
  }
}

/* The sequence that owns token t: the last b with q_starts[b] <= t. */
GK_INLINE long gk_paged_sequence(global const int *q_starts, long seqs, long t) {
  long lo = 0, hi = seqs - 1;
  while (lo < hi) {
    long mid = (lo + hi + 1) / 2;
    if (q_starts[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* out, q, k_cache, v_cache, block_table, q_starts, seq_lens, error */
GK_INLINE void gk_paged_attention_body(const int dt, gk_ptr out, gk_ptr q, gk_ptr k_cache,
                                       gk_ptr v_cache, gk_ptr table, gk_ptr q_starts,
                                       gk_ptr seq_lens, gk_ptr error, gk_paged_params p,
                                       local float *lds) {
  gk_att_lds s = gk_att_split(lds);
  long es = gk_size(dt), group = p.hq / p.hkv, slot_stride = p.hkv * p.d;
  global const int *starts = (global const int *)(q_starts + p.q_starts_off);
  global const int *tab = (global const int *)(table + p.table_off);
  GK_FOR_ROWS(row, p.tokens * p.hq) {
    long t = row / p.hq, h = row % p.hq, kvh = h / group;
    long b = gk_paged_sequence(starts, p.seqs, t);
    long start = starts[b], end = starts[b + 1];
    long seq_len = gk_load_i32(seq_lens + p.seq_lens_off, b);
    long visible = 0;
    if (start <= t && t < end && seq_len >= end - start && seq_len <= p.max_blocks * p.block_size)
      visible = seq_len - (end - start) + (t - start) + 1; /* keys up to its own position */
    else if (gk_local_id() == 0)
      gk_raise(error, GK_ERROR_PAGED_SEQUENCE, b, seq_len, p.max_blocks * p.block_size);
    gk_att_state st;
    gk_att_begin(dt, &st, q + p.q_off + es * (t * p.q_strides[0] + h * p.q_strides[1]), p.d, s);
    gk_ptr kb = k_cache + p.k_cache_off + es * kvh * p.d;
    gk_ptr vb = v_cache + p.v_cache_off + es * kvh * p.d;
    for (long k0 = 0; k0 < visible; k0 += GK_ATT_WG) {
      long j = k0 + gk_local_id();
      float score = -GK_INFINITY;
      int slot = -1;
      if (j < visible) {
        long entry = b * p.max_blocks + j / p.block_size;
        int block = tab[entry];
        if (block < 0 || block >= p.blocks) {
          gk_raise(error, GK_ERROR_PAGED_TABLE, entry, block, p.blocks);
        } else {
          slot = (int)(block * p.block_size + j % p.block_size);
          score = gk_att_score(dt, s, kb + es * slot * slot_stride, p.d, p.scale);
        }
      }
      gk_att_block(dt, &st, score, slot, vb, slot_stride, p.d, s);
    }
    gk_att_finish(dt, &st, out + p.out_off + es * (t * p.out_strides[0] + h * p.out_strides[1]), p.d);
  }
}

#undef GK_ATT_WG
#undef GK_ATT_PER_ITEM
