/*
 * sample.cl (host: sample.c) - argmax and sample, one work-group per row
 * of logits.
 *
 * Sampling follows gllmk.h and tests/reference.c: softmax(logits / T), then
 * top-k, top-p and min-p, each keeping a prefix of the tokens ordered by
 * probability (ties: lower index first), then one draw. Nothing is sorted:
 * a prefix of that order is "keys above a threshold key, plus the tied keys
 * up to some index", and the thresholds are found by a bitwise search over
 * the 32-bit order-preserving key of the logit, one pass over the row per
 * bit. The draw walks the kept tokens in index order (a scan over per-item
 * chunks) with u from Philox4x32-10 keyed by the seed, counter (offset, row).
 */

#define GK_S_WG GK_WG_ROW

/* An unsigned key that orders like the float (NaN aside). */
GK_INLINE uint gk_order_key(float f) {
  uint u = gk_f32_bits(f);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

GK_INLINE uint gk_group_sum_u32(uint v, local uint *s) {
  uint lid = gk_local_id();
  s[lid] = v;
  gk_barrier();
  for (uint n = GK_S_WG / 2; n > 0; n >>= 1) {
    if (lid < n) s[lid] += s[lid + n];
    gk_barrier();
  }
  uint r = s[0];
  gk_barrier();
  return r;
}

/* The largest logit of the row and its lowest index (NaN never wins). */
GK_INLINE long gk_row_argmax(const int dt, gk_ptr row, long cols, local float *lds) {
  local float *vals = lds;
  local int *idx = (local int *)(lds + GK_S_WG);
  uint lid = gk_local_id();
  float best = -GK_INFINITY;
  int at = -1;
  GK_FOR_GROUP(c, cols, GK_S_WG) {
    float v = gk_load(dt, row, c);
    if (v > best || (at < 0 && v == v)) { best = v; at = (int)c; }
  }
  vals[lid] = best;
  idx[lid] = at;
  gk_barrier();
  for (uint n = GK_S_WG / 2; n > 0; n >>= 1) {
    if (lid < n) {
      float v = vals[lid + n];
      int i = idx[lid + n];
      if (i >= 0 && (idx[lid] < 0 || v > vals[lid] || (v == vals[lid] && i < idx[lid]))) {
        vals[lid] = v;
        idx[lid] = i;
      }
    }
    gk_barrier();
  }
  long r = idx[0] < 0 ? 0 : idx[0];
  gk_barrier();
  return r;
}

/* out, logits */
GK_INLINE void gk_argmax_body(const int dt, gk_ptr out, gk_ptr logits, gk_token_params p,
                              local float *lds) {
  GK_FOR_ROWS(r, p.rows) {
    long best = gk_row_argmax(dt, logits + p.logits_off + r * p.logits_row_stride * gk_size(dt), p.cols, lds);
    if (gk_local_id() == 0) ((global int *)(out + p.out_off))[r] = (int)best;
  }
}

/* ---------------------------------------------------------- Philox */

GK_INLINE void gk_mulhilo(uint a, uint b, uint *hi, uint *lo) {
  ulong product = (ulong)a * b;
  *hi = (uint)(product >> 32);
  *lo = (uint)product;
}

/* Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as
 * easy as 1, 2, 3", SC 2011); returns the first output word. */
GK_INLINE uint gk_philox(ulong seed, ulong offset, ulong row) {
  uint c0 = (uint)offset, c1 = (uint)(offset >> 32), c2 = (uint)row, c3 = (uint)(row >> 32);
  uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    uint hi0, lo0, hi1, lo1;
    gk_mulhilo(0xD2511F53u, c0, &hi0, &lo0);
    gk_mulhilo(0xCD9E8D57u, c2, &hi1, &lo1);
    uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}

/* ---------------------------------------------------------- filters */

/* ceil(x) for the tie counts, at least 1. */
GK_INLINE float gk_ceil_at_least_one(float x) {
  float r = gk_rint(x);
  if (r < x) r += 1.0f;
  return r < 1.0f ? 1.0f : r;
}

/* The kept tokens: key > thr, or key == thr and index <= tie_limit. */
typedef struct gk_kept {
  uint thr;
  long tie_limit;
} gk_kept;

typedef struct gk_sample_row {
  gk_ptr row;
  long cols;
  float max, inv_t, min_p;
} gk_sample_row;

/* A NaN logit is never drawn: it counts as -inf. */
GK_INLINE float gk_sample_logit(const int dt, const gk_sample_row *sr, long c) {
  float v = gk_load(dt, sr->row, c);
  return gk_isnan(v) ? -GK_INFINITY : v;
}

/* Unnormalised probability exp((logit - max) / T); the top token has 1. */
GK_INLINE float gk_sample_weight(const gk_sample_row *sr, float logit) {
  return gk_exp((logit - sr->max) * sr->inv_t);
}

GK_INLINE int gk_is_kept(const gk_kept *k, uint key, long c) {
  return key > k->thr || (key == k->thr && c <= k->tie_limit);
}

/* The largest key v with (count or mass of kept tokens with key >= v) >= target. */
GK_INLINE uint gk_search_key(const int dt, const gk_sample_row *sr, const gk_kept *kept,
                             int by_mass, float target, local float *lds) {
  uint prefix = 0;
  for (int bit = 31; bit >= 0; bit--) {
    uint candidate = prefix | (1u << bit);
    float mass = 0.0f;
    uint count = 0;
    GK_FOR_GROUP(c, sr->cols, GK_S_WG) {
      float logit = gk_sample_logit(dt, sr, c);
      uint key = gk_order_key(logit);
      if (key >= candidate && gk_is_kept(kept, key, c)) {
        if (by_mass) mass += gk_sample_weight(sr, logit);
        else count++;
      }
    }
    int enough = by_mass ? gk_group_sum(mass, lds, GK_S_WG) >= target
                         : (float)gk_group_sum_u32(count, (local uint *)lds) >= target;
    if (enough) prefix = candidate;
  }
  return prefix;
}

/* Weight of token c for a scan: 1 or its probability if pred holds, else 0. */
typedef struct gk_scan_pred {
  gk_kept kept;
  uint only_key;   /* with use_only_key: only tokens with this key */
  int use_only_key;
  int by_mass;     /* weight = probability (else 1) */
  int min_p;       /* also require probability >= min_p */
} gk_scan_pred;

GK_INLINE float gk_scan_weight(const int dt, const gk_sample_row *sr, const gk_scan_pred *sp, long c) {
  float logit = gk_sample_logit(dt, sr, c);
  uint key = gk_order_key(logit);
  if (!gk_is_kept(&sp->kept, key, c)) return 0.0f;
  if (sp->use_only_key && key != sp->only_key) return 0.0f;
  if (!sp->by_mass && !sp->min_p) return 1.0f;
  float w = gk_sample_weight(sr, logit);
  if (sp->min_p && w < sr->min_p) return 0.0f;
  return sp->by_mass ? w : 1.0f;
}

/* Sum of the weights of a row. */
GK_INLINE float gk_scan_total(const int dt, const gk_sample_row *sr, const gk_scan_pred *sp,
                              local float *lds) {
  float sum = 0.0f;
  GK_FOR_GROUP(c, sr->cols, GK_S_WG) sum += gk_scan_weight(dt, sr, sp, c);
  return gk_group_sum(sum, lds, GK_S_WG);
}

/* The first index (in index order) where the running sum of weights exceeds
 * target. Work-item t scans a contiguous chunk; the chunk sums are scanned
 * in lds, and the work-item whose chunk crosses target walks it. If
 * rounding leaves no crossing, the last index with a weight is taken. */
GK_INLINE long gk_scan_find(const int dt, const gk_sample_row *sr, const gk_scan_pred *sp,
                            float target, local float *lds) {
  local float *sums = lds;
  local int *last = (local int *)(lds + GK_S_WG);
  local int *found = (local int *)(lds + 2 * GK_S_WG);
  uint lid = gk_local_id();
  long chunk = (sr->cols + GK_S_WG - 1) / GK_S_WG, begin = lid * chunk;
  long end = begin + chunk < sr->cols ? begin + chunk : sr->cols;
  float own = 0.0f;
  int own_last = -1;
  for (long c = begin; c < end; c++) {
    float w = gk_scan_weight(dt, sr, sp, c);
    own += w;
    if (w > 0.0f) own_last = (int)c;
  }
  if (lid == 0) *found = -1;
  sums[lid] = own;
  last[lid] = own_last;
  gk_barrier();
  for (uint n = 1; n < GK_S_WG; n <<= 1) { /* inclusive scan (Hillis-Steele) */
    float add = lid >= n ? sums[lid - n] : 0.0f;
    int later = lid + n < GK_S_WG ? last[lid + n] : -1;
    gk_barrier();
    sums[lid] += add;
    if (later > last[lid]) last[lid] = later; /* last[0] ends as the row's last */
    gk_barrier();
  }
  float before = lid > 0 ? sums[lid - 1] : 0.0f;
  if (before <= target && target < sums[lid]) { /* exactly one work-item */
    float run = before;
    int at = own_last;
    for (long c = begin; c < end; c++) {
      run += gk_scan_weight(dt, sr, sp, c);
      if (run > target) { at = (int)c; break; }
    }
    *found = at;
  }
  gk_barrier();
  long r = *found >= 0 ? *found : (last[0] >= 0 ? last[0] : 0);
  gk_barrier();
  return r;
}

/* The float whose order key is `key`. */
GK_INLINE float gk_key_value(uint key) {
  return gk_bits_f32((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

GK_INLINE long gk_sample_draw(const int dt, gk_ptr row, const gk_token_params *p, long r,
                              local float *lds) {
  gk_sample_row sr;
  sr.row = row;
  sr.cols = p->cols;
  sr.inv_t = 1.0f / p->temperature;
  sr.min_p = p->min_p;
  float max = -GK_INFINITY;
  GK_FOR_GROUP(c, p->cols, GK_S_WG) max = gk_max(max, gk_sample_logit(dt, &sr, c));
  sr.max = gk_group_max(max, lds, GK_S_WG);
  if (sr.max == -GK_INFINITY) return gk_row_argmax(dt, row, p->cols, lds); /* no finite logit */

  gk_scan_pred all = {{0u, p->cols - 1}, 0u, 0, 0, 0}; /* every token, weight 1 */
  gk_kept kept = all.kept;
  if (p->top_k > 0 && p->top_k < p->cols) {
    /* the k-th largest key, then as many of its ties (lowest index first) as fit */
    uint v = gk_search_key(dt, &sr, &kept, 0, (float)p->top_k, lds);
    gk_scan_pred above = {{v, -1}, 0u, 0, 0, 0};
    float ties = (float)p->top_k - gk_scan_total(dt, &sr, &above, lds);
    gk_scan_pred tied = {kept, v, 1, 0, 0};
    kept.tie_limit = gk_scan_find(dt, &sr, &tied, ties - 1.0f, lds);
    kept.thr = v;
  }
  if (p->top_p < 1.0f) {
    /* the smallest prefix whose mass reaches top_p of what top-k kept */
    gk_scan_pred in_kept = {kept, 0u, 0, 1, 0};
    float target = p->top_p * gk_scan_total(dt, &sr, &in_kept, lds);
    uint v = gk_search_key(dt, &sr, &kept, 1, target, lds);
    gk_scan_pred above = {{v, -1}, 0u, 0, 1, 0};
    float missing = target - gk_scan_total(dt, &sr, &above, lds);
    float ties = gk_ceil_at_least_one(missing / gk_sample_weight(&sr, gk_key_value(v)));
    gk_scan_pred tied = {kept, v, 1, 0, 0};
    long limit = gk_scan_find(dt, &sr, &tied, ties - 1.0f, lds);
    kept.tie_limit = v == kept.thr && kept.tie_limit < limit ? kept.tie_limit : limit;
    kept.thr = v;
  }
  gk_scan_pred draw = {kept, 0u, 0, 1, p->min_p > 0.0f};
  float u = (float)(gk_philox(p->seed, p->offset, (ulong)r) >> 8) * (1.0f / 16777216.0f);
  return gk_scan_find(dt, &sr, &draw, u * gk_scan_total(dt, &sr, &draw, lds), lds);
}

/* out, logits */
GK_INLINE void gk_sample_body(const int dt, gk_ptr out, gk_ptr logits, gk_token_params p,
                              local float *lds) {
  GK_FOR_ROWS(r, p.rows) {
    gk_ptr row = logits + p.logits_off + r * p.logits_row_stride * gk_size(dt);
    long token = p.temperature == 0.0f || p.top_k == 1 ? gk_row_argmax(dt, row, p.cols, lds)
                                                        : gk_sample_draw(dt, row, &p, r, lds);
    if (gk_local_id() == 0) ((global int *)(out + p.out_off))[r] = (int)token;
  }
}

#undef GK_S_WG
