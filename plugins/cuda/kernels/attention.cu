/*
 * attention.cu - attention and paged_attention.
 *
 *  - attention_rows: the rows of one kv head (paged decode, chunked prefill,
 *    prefill after a prefix, contiguous attention with few query rows) on
 *    tensor cores (f16/bf16, sm_80+): 8 query rows a block, 16 keys of each
 *    tile a warp, the products transposed so that the rows are the MMA's n;
 *    long key ranges are split across blocks (flash-decoding) and merged by
 *    attention_combine.
 *  - attention_simt: the same work on CUDA cores (f32, sm_75, unaligned
 *    rows), one query row per warp, key/value tiles of 32 keys (one per
 *    lane) shared by the block's 4 rows.
 *  - attention_mma: flash attention on tensor cores (f16/bf16, sm_80+) for
 *    contiguous prefill: 64 query rows of one head per block, 16 per warp,
 *    S = Q K^T and O += P V with mma.sync, P kept in registers.
 *  - attention_wgmma: the same on Hopper's warpgroup MMA (sm_90a image,
 *    head dims up to 256), FlashAttention-3 style: a TMA loader warpgroup
 *    and two multiplying warpgroups of 64 query rows taking turns at the
 *    tensor cores; 128-key tiles (64 at D = 256).
 *
 * Rows are (token, head); a key j is visible to query token i of a sequence
 * with q_len new tokens and L keys when j < L and, if causal,
 * j <= i + L - q_len.
 */
#include "mma.cuh"
#include "wgmma.cuh"

/* ----------------------------------------------------------- sequences */

struct seq_info {
  int64_t q_start; /* first token */
  int32_t q_len, len;
  bool ok; /* paged: the device data describes a possible sequence */
};

/* The sequence that token t belongs to. */
__device__ int seq_of_token(const cuda_attention_params &p, int64_t t) {
  if (!p.paged) return (int)(t / p.q_len);
  const int32_t *starts = reinterpret_cast<const int32_t *>(p.q_starts);
  int lo = 0, hi = p.batch - 1; /* the last b with starts[b] <= t */
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (starts[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* The keys of (unpaged) sequence `seq`: kv_lens[seq] clamped to [0, kv_len],
 * or kv_len without kv_lens. */
__device__ __forceinline__ int kv_len_of(const cuda_attention_params &p, int seq) {
  if (!p.kv_lens) return p.kv_len;
  const int32_t len = reinterpret_cast<const int32_t *>(p.kv_lens)[seq];
  return len < 0 ? 0 : (len > p.kv_len ? p.kv_len : len);
}

__device__ seq_info seq_info_of(const cuda_attention_params &p, int seq) {
  seq_info s;
  if (!p.paged) {
    s.q_start = (int64_t)seq * p.q_len;
    s.q_len = p.q_len;
    s.len = kv_len_of(p, seq);
    s.ok = true;
    return s;
  }
  const int32_t *starts = reinterpret_cast<const int32_t *>(p.q_starts);
  const int32_t begin = starts[seq], end = starts[seq + 1];
  s.q_start = begin;
  s.q_len = end - begin;
  s.len = reinterpret_cast<const int32_t *>(p.seq_lens)[seq];
  s.ok = begin >= 0 && end <= p.tokens && s.q_len >= 0 && s.len >= s.q_len &&
         (int64_t)s.len <= (int64_t)p.max_blocks * p.block_size;
  if (!s.ok) s.len = 0;
  return s;
}

/* Keys [0, end) are visible to query i (0-based within its sequence). */
__device__ __forceinline__ int visible_end(const cuda_attention_params &p, const seq_info &s, int64_t i) {
  if (!p.causal) return s.len;
  const int64_t end = i + s.len - s.q_len + 1;
  return (int)(end < 0 ? 0 : (end > s.len ? s.len : end));
}

/* Where key j of sequence seq lives: its position j (contiguous) or its
 * cache slot (paged), or -1 if the block table points outside the cache. */
__device__ __forceinline__ int64_t key_slot(const cuda_attention_params &p, int seq, int j) {
  if (!p.paged) return j;
  const int32_t *table = reinterpret_cast<const int32_t *>(p.block_table) + (int64_t)seq * p.block_table_stride;
  const int32_t block = table[j / p.block_size];
  if (block < 0 || block >= p.num_blocks) return -1;
  return (int64_t)block * p.block_size + j % p.block_size;
}

/* Element offsets of the rows of k and v for slot `slot` (from key_slot) of
 * sequence seq, kv head hk: each tensor with its own strides. */
__device__ __forceinline__ int64_t k_row_at(const cuda_attention_params &p, int seq, int64_t slot, int hk) {
  return (p.paged ? 0 : (int64_t)seq * p.k_batch_stride) + slot * p.k_token_stride + (int64_t)hk * p.k_stride;
}
__device__ __forceinline__ int64_t v_row_at(const cuda_attention_params &p, int seq, int64_t slot, int hk) {
  return (p.paged ? 0 : (int64_t)seq * p.v_batch_stride) + slot * p.v_token_stride + (int64_t)hk * p.v_stride;
}

/* Element offsets of the rows of q and out for token t, query i of sequence
 * seq (i = t - the sequence's first token), head h. */
__device__ __forceinline__ int64_t q_row_at(const cuda_attention_params &p, int seq, int64_t t, int64_t i, int h) {
  return (p.paged ? t * p.q_token_stride : (int64_t)seq * p.q_batch_stride + i * p.q_token_stride) +
         (int64_t)h * p.q_stride;
}
__device__ __forceinline__ int64_t out_row_at(const cuda_attention_params &p, int seq, int64_t t, int64_t i, int h) {
  return (p.paged ? t * p.out_token_stride : (int64_t)seq * p.out_batch_stride + i * p.out_token_stride) +
         (int64_t)h * p.out_stride;
}

/* ------------------------------------------------------- SIMT attention */

/* Loads keys j0 .. j0 + 31 (those below `end`; the rest become zeros) of
 * head hk into shared memory rows `pitch` elements apart. Four threads share
 * a key, so each looks up its cache row once. */
static_assert(GK_ATTENTION_WARPS * 32 == 4 * GK_ATTENTION_KEYS, "four threads per key");
template <class T>
__device__ void load_kv_tile(const cuda_attention_params &p, T *k_dst, T *v_dst, int pitch, int seq, int hk,
                             int j0, int end) {
  const T *k = reinterpret_cast<const T *>(p.k), *v = reinterpret_cast<const T *>(p.v);
  const int d = p.head_dim, r = threadIdx.x >> 2, part = threadIdx.x & 3, j = j0 + r;
  int64_t row = -1;
  if (j < end) {
    row = key_slot(p, seq, j);
    if (row < 0 && part == 0) raise_error(p.error_flag, GK_ERROR_PAGED_ATTENTION);
  }
  const T *ks = row >= 0 ? k + k_row_at(p, seq, row, hk) : k, *vs = row >= 0 ? v + v_row_at(p, seq, row, hk) : v;
  if (p.vec) {
    constexpr int E = 16 / (int)sizeof(T); /* elements per 16-byte copy */
    for (int c = E * part; c < d; c += 4 * E) {
      cp_async16(k_dst + r * pitch + c, ks + c, row >= 0 ? 16 : 0);
      cp_async16(v_dst + r * pitch + c, vs + c, row >= 0 ? 16 : 0);
    }
  } else {
    for (int c = part; c < d; c += 4) {
      k_dst[r * pitch + c] = row >= 0 ? ks[c] : from_f32<T>(0.0f);
      v_dst[r * pitch + c] = row >= 0 ? vs[c] : from_f32<T>(0.0f);
    }
  }
}

/* One warp's query row: running max, sum and output; lane owns dims
 * 4 lane + 128 i + e (o[4 i + e], i < 2, e < 4). */
struct warp_row {
  float m, l, o[8];
};

/* Folds one tile of keys into the row: lane `lane` scores key j0 + lane,
 * then the warp adds p_j v_j over the tile with `probs` (the warp's 32
 * floats of shared memory) broadcasting the probabilities. */
template <class T>
__device__ __forceinline__ void attend_tile(warp_row &w, const float *q, float *probs, const T *kt, const T *vt,
                                            int pitch, int d, float scale, bool visible) {
  const int lane = threadIdx.x & 31;
  float s = -INFINITY;
  if (visible) {
    const T *krow = kt + lane * pitch;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
    for (int c = 0; c < d; c += 8) {
      float kv[8];
      load8(krow + c, kv);
      const float4 q0 = *reinterpret_cast<const float4 *>(q + c);
      const float4 q1 = *reinterpret_cast<const float4 *>(q + c + 4);
      acc[0] = fmaf(q0.x, kv[0], acc[0]);
      acc[1] = fmaf(q0.y, kv[1], acc[1]);
      acc[2] = fmaf(q0.z, kv[2], acc[2]);
      acc[3] = fmaf(q0.w, kv[3], acc[3]);
      acc[0] = fmaf(q1.x, kv[4], acc[0]);
      acc[1] = fmaf(q1.y, kv[5], acc[1]);
      acc[2] = fmaf(q1.z, kv[6], acc[2]);
      acc[3] = fmaf(q1.w, kv[7], acc[3]);
    }
    s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) * scale;
  }
  const float m_new = fmaxf(w.m, warp_max(s));
  if (m_new == -INFINITY) return; /* nothing visible yet */
  const float alpha = expf(w.m - m_new);
  const float prob = expf(s - m_new);
  w.l = w.l * alpha + warp_sum(prob);
  w.m = m_new;
#pragma unroll
  for (int i = 0; i < 8; i++) w.o[i] *= alpha;
  probs[lane] = prob;
  __syncwarp();
  for (int j = 0; j < GK_ATTENTION_KEYS; j += 4) {
    const float4 p4 = *reinterpret_cast<const float4 *>(probs + j);
    const float pj[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
    for (int u = 0; u < 4; u++) {
      const T *vrow = vt + (j + u) * pitch;
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const int c = 4 * lane + 128 * i;
        if (c < d) {
          float vv[4];
          load4(vrow + c, vv);
#pragma unroll
          for (int e = 0; e < 4; e++) w.o[4 * i + e] = fmaf(pj[u], vv[e], w.o[4 * i + e]);
        }
      }
    }
  }
  __syncwarp(); /* probs is rewritten by the next tile */
}

/* Writes a finished row: the normalised output and log-sum-exp, to out (and
 * lse) or, when the keys are split, to the partial buffers. */
template <class T>
__device__ void finish_row(const cuda_attention_params &p, const warp_row &w, int64_t t, int h, int seq, int64_t i) {
  const int lane = threadIdx.x & 31, d = p.head_dim;
  const float inv = w.l > 0.0f ? 1.0f / w.l : 0.0f;
  const float lse = w.l > 0.0f ? w.m + logf(w.l) : -INFINITY;
  const int64_t row = t * p.q_heads + h;
  float *po = nullptr;
  T *out = nullptr;
  if (p.splits > 1) {
    const int64_t prow = (int64_t)blockIdx.z * p.tokens * p.q_heads + row;
    po = reinterpret_cast<float *>(p.partial_out) + prow * d;
    if (lane == 0) reinterpret_cast<float *>(p.partial_lse)[prow] = lse;
  } else {
    out = ptr_at<T>(p.out, out_row_at(p, seq, t, i, h));
    if (p.lse && lane == 0)
      reinterpret_cast<float *>(p.lse)[((int64_t)seq * p.q_heads + h) * p.lse_stride + i] = lse;
  }
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int c = 4 * lane + 128 * i + e;
      if (c >= d) continue;
      if (po) po[c] = w.o[4 * i + e] * inv;
      else store1(out + c, w.o[4 * i + e] * inv);
    }
}

/* Keys a split of the block takes (split z: [z n, z n + n)). Contiguous
 * attention splits at p.split_keys; paged attention shares out the keys the
 * block's rows see (known only here, from seq_lens) among its p.splits, so
 * that a count chosen once, and kept in a recorded decode step, still
 * divides the work evenly as the sequences grow. Multiples of the kernel's
 * tile of keys. */
__device__ __forceinline__ int keys_per_split(const cuda_attention_params &p, int block_end, int tile) {
  if (!p.paged) return p.split_keys;
  const int share = (block_end + p.splits - 1) / p.splits;
  const int tiles = (share + tile - 1) / tile;
  return (tiles > 1 ? tiles : 1) * tile;
}

/* Block: tokens [x * tokens_per_block, ...) x heads_per_block heads of kv
 * head hk (blockIdx.y / chunks), keys of split blockIdx.z. The tokens of a
 * block may span sequences; each sequence present is one pass over its keys. */
template <class T> __device__ void attention_simt_impl(const cuda_attention_params &p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int d = p.head_dim, warp = threadIdx.x >> 5;
  const int pitch = GK_ATTENTION_PITCH(d, (int)sizeof(T)) / (int)sizeof(T);
  float *q_row = reinterpret_cast<float *>(smem) + warp * d;
  float *probs = reinterpret_cast<float *>(smem) + GK_ATTENTION_WARPS * d + warp * 32;
  T *tiles = reinterpret_cast<T *>(smem + GK_ATTENTION_WARPS * (d + 32) * 4);
  const int tile_elems = GK_ATTENTION_KEYS * pitch;

  const int group = p.q_heads / p.kv_heads;
  const int chunks = (group + p.heads_per_block - 1) / p.heads_per_block;
  const int hk = blockIdx.y / chunks, hc = blockIdx.y % chunks;
  const int64_t t0 = (int64_t)blockIdx.x * p.tokens_per_block;
  const int64_t t_end = t0 + p.tokens_per_block < p.tokens ? t0 + p.tokens_per_block : p.tokens;
  const int64_t t = t0 + warp / p.heads_per_block;
  const int g = hc * p.heads_per_block + warp % p.heads_per_block;
  const bool has_row = warp < p.tokens_per_block * p.heads_per_block && t < p.tokens && g < group;
  const int h = hk * group + g;
  const int my_seq = has_row ? seq_of_token(p, t) : -1;

  const int seq_last = seq_of_token(p, t_end - 1);
  for (int seq = seq_of_token(p, t0); seq <= seq_last; seq++) {
    const seq_info s = seq_info_of(p, seq);
    if (!s.ok && threadIdx.x == 0) raise_error(p.error_flag, GK_ERROR_PAGED_ATTENTION);
    const bool active = has_row && my_seq == seq;
    const int64_t i = t - s.q_start;
    const int row_end = active ? visible_end(p, s, i) : 0;
    /* The block's last token of this sequence sees the most keys. */
    const int64_t seq_end = s.q_start + s.q_len < t_end ? s.q_start + s.q_len : t_end;
    const int block_end = seq_end > s.q_start ? visible_end(p, s, seq_end - 1 - s.q_start) : 0;
    const int split_keys = keys_per_split(p, block_end, GK_ATTENTION_KEYS);
    const int k_begin = p.splits > 1 ? blockIdx.z * split_keys : 0;
    const int k_end = p.splits > 1 && k_begin + split_keys < block_end ? k_begin + split_keys : block_end;

    if (active) {
      const T *q = ptr_at<const T>(p.q, q_row_at(p, seq, t, i, h));
      for (int c = threadIdx.x & 31; c < d; c += 32) q_row[c] = load1(q + c);
    }
    warp_row w;
    w.m = -INFINITY;
    w.l = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) w.o[k] = 0.0f;

    const int ntiles = k_end > k_begin ? (k_end - k_begin + GK_ATTENTION_KEYS - 1) / GK_ATTENTION_KEYS : 0;
    if (ntiles > 0 && p.stages == 2) load_kv_tile(p, tiles, tiles + tile_elems, pitch, seq, hk, k_begin, k_end);
    cp_async_commit();
    for (int it = 0; it < ntiles; it++) {
      const int j0 = k_begin + it * GK_ATTENTION_KEYS;
      const int buf = p.stages == 2 ? it & 1 : 0;
      T *kt = tiles + 2 * buf * tile_elems;
      if (p.stages == 2) {
        if (it + 1 < ntiles) {
          T *next = tiles + 2 * (buf ^ 1) * tile_elems;
          load_kv_tile(p, next, next + tile_elems, pitch, seq, hk, j0 + GK_ATTENTION_KEYS, k_end);
        }
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        load_kv_tile(p, kt, kt + tile_elems, pitch, seq, hk, j0, k_end);
        cp_async_commit();
        cp_async_wait<0>();
      }
      __syncthreads();
      if (active && j0 < row_end) {
        const int j = j0 + (threadIdx.x & 31);
        attend_tile(w, q_row, probs, kt, kt + tile_elems, pitch, d, p.scale, j < row_end && j < k_end);
      }
      __syncthreads(); /* the tile may be overwritten next */
    }
    cp_async_wait<0>();
    if (active) finish_row<T>(p, w, t, h, seq, i);
  }
}

GK_FLOAT_KERNELS(attention_simt, attention_simt_impl, cuda_attention_params,
                 __launch_bounds__(GK_ATTENTION_WARPS * 32))

/* Merges the splits of every row (token, head): a thread per 4 dims of a
 * row (head_dim is a multiple of 8; a warp covers 128 dims). Each takes the
 * splits 16 at a time, every load of a group issued before any is used, with
 * a running maximum of their log-sum-exps: few rows of many splits (decode
 * of one sequence, 16-32 splits) then wait on memory once or twice, where a
 * loop of one split a step waited on every split in turn (B = 1: 8.5 us for
 * 16 splits, 14.5 us for 32, on an H200). Merging in attention_rows' last
 * split to finish (arrival counters) instead of here was no faster: B = 1
 * L = 4096 6% slower, batch-1 decode 1% slower, on an H200. */
template <class T> __device__ void attention_combine_impl(const cuda_attention_params &p) {
  constexpr int GROUP = 16;
  const int d = p.head_dim, chunks = d / 4;
  const int64_t rows = (int64_t)p.tokens * p.q_heads;
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * chunks) return;
  const int64_t row = i / chunks;
  const int c = 4 * (int)(i % chunks); /* this thread's first dim */
  const float *plse = reinterpret_cast<const float *>(p.partial_lse);
  const float *pout = reinterpret_cast<const float *>(p.partial_out);
  float m = -INFINITY, total = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int s0 = 0; s0 < p.splits; s0 += GROUP) {
    float lse[GROUP], v[GROUP][4];
#pragma unroll
    for (int g = 0; g < GROUP; g++) {
      const int s = s0 + g;
      lse[g] = s < p.splits ? plse[s * rows + row] : -INFINITY;
      const float4 q = s < p.splits ? *reinterpret_cast<const float4 *>(pout + (s * rows + row) * d + c)
                                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[g][0] = q.x, v[g][1] = q.y, v[g][2] = q.z, v[g][3] = q.w;
    }
    float m_group = m;
#pragma unroll
    for (int g = 0; g < GROUP; g++) m_group = fmaxf(m_group, lse[g]);
    if (m_group == -INFINITY) continue; /* no split so far saw a key */
    const float rescale = expf(m - m_group); /* 0 while m is -inf, when total and acc are 0 */
    total *= rescale;
#pragma unroll
    for (int e = 0; e < 4; e++) acc[e] *= rescale;
    m = m_group;
#pragma unroll
    for (int g = 0; g < GROUP; g++) {
      const float w = expf(lse[g] - m); /* 0 for a split that saw no key */
      total += w;
#pragma unroll
      for (int e = 0; e < 4; e++) acc[e] = fmaf(w, w > 0.0f ? v[g][e] : 0.0f, acc[e]);
    }
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  const int64_t t = row / p.q_heads;
  const int h = (int)(row % p.q_heads);
  const int seq = p.paged ? 0 : (int)(t / p.q_len); /* paged rows need no sequence */
  T *out = ptr_at<T>(p.out, out_row_at(p, seq, t, t - (int64_t)seq * p.q_len, h));
#pragma unroll
  for (int e = 0; e < 4; e++) store1(out + c + e, acc[e] * inv);
  if (p.lse && c == 0 && !p.paged) {
    reinterpret_cast<float *>(p.lse)[((int64_t)seq * p.q_heads + h) * p.lse_stride + t - (int64_t)seq * p.q_len] =
        total > 0.0f ? m + logf(total) : -INFINITY;
  }
}

GK_FLOAT_KERNELS(attention_combine, attention_combine_impl, cuda_attention_params, __launch_bounds__(128))

/* P V on tensor cores multiplies P rounded once to T (f16 2^-11, bf16 2^-9
 * relative): the output then carries up to that rounding of sum_j w_j |v_j|,
 * which the tests allow for (an earlier f16 path split P into two halves,
 * hi + lo, at twice the P V products). */

/* The A fragments of P for keys 16 ks .. 16 ks + 15 from the S accumulators. */
template <class T> __device__ __forceinline__ void p_fragments(const float s0[4], const float s1[4], uint32_t a[4]) {
  a[0] = pack2((T *)nullptr, s0[0], s0[1]);
  a[1] = pack2((T *)nullptr, s0[2], s0[3]);
  a[2] = pack2((T *)nullptr, s1[0], s1[1]);
  a[3] = pack2((T *)nullptr, s1[2], s1[3]);
}

/* Folds a tile of KEYS scores per row (log2 units, masked ones -inf, in
 * m16n8 accumulator layout: this lane's two rows are elements 0-1 and 2-3)
 * into the running maximum m, sum l and output o of those rows, and turns
 * the scores into the probabilities P, rounded to T as P V takes them. */
template <class T, int KEYS, int DP>
__device__ __forceinline__ void softmax_fold(float (&s)[KEYS / 8][4], float (&o)[DP / 8][4], float (&m)[2],
                                             float (&l)[2]) {
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    float mx = -INFINITY;
#pragma unroll
    for (int i = 0; i < KEYS / 8; i++) mx = fmaxf(mx, fmaxf(s[i][2 * hr], s[i][2 * hr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(m[hr], mx);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    const float alpha = exp2f(m[hr] - m_use);
    l[hr] *= alpha;
#pragma unroll
    for (int i = 0; i < DP / 8; i++) {
      o[i][2 * hr] *= alpha;
      o[i][2 * hr + 1] *= alpha;
    }
#pragma unroll
    for (int i = 0; i < KEYS / 8; i++)
#pragma unroll
      for (int e = 2 * hr; e < 2 * hr + 2; e++) {
        const float pr = to_f32(from_f32<T>(exp2f(s[i][e] - m_use)));
        s[i][e] = pr;
        l[hr] += pr;
      }
    m[hr] = m_new;
  }
}

/* o += P V for one tile of KEYS keys: P from softmax_fold, V the tile's
 * shared-memory rows (DP elements, swizzled in 16-byte chunks). */
template <class T, int KEYS, int DP>
__device__ __forceinline__ void accumulate_pv(const float (&s)[KEYS / 8][4], float (&o)[DP / 8][4], const T *vt,
                                              int lane) {
  constexpr int CH = DP / 8;
#pragma unroll
  for (int ks = 0; ks < KEYS / 16; ks++) {
    uint32_t a[4];
    p_fragments<T>(s[2 * ks], s[2 * ks + 1], a);
#pragma unroll
    for (int dp = 0; dp < DP / 16; dp++) {
      const int r = 16 * ks + 8 * ((lane >> 3) & 1) + (lane & 7), c = 2 * dp + (lane >> 4);
      uint32_t t[4];
      ldmatrix_x4_trans(t, vt + r * DP + 8 * swizzle<CH>(r, c));
      mma_16816(o[2 * dp], a, t, (T *)nullptr);
      mma_16816(o[2 * dp + 1], a, t + 2, (T *)nullptr);
    }
  }
}

/* ------------------------------------- tensor-core attention by rows */

/* The attention_simt work split (rows of one kv head, any sequences, split
 * keys) on tensor cores, for f16/bf16 on sm_80+. A block of
 * GK_ATTENTION_ROWS_WARPS warps owns up to 8 query rows (tokens_per_block
 * tokens x heads_per_block heads) and walks tiles of GK_ATTENTION_ROWS_KEYS
 * keys; each warp copies (double-buffered) and attends to 16 keys of every
 * tile on its own, with its own running max, sum and output, and the warps
 * merge theirs at the end. The products are transposed so that the rows are
 * the MMAs' n = 8 (decode has 4-8 heads a kv head, where the rows as m = 16
 * wasted 3/4 of every MMA): S^T = K Q^T and O^T += V^T P^T, P^T reaching its
 * B fragments through movmatrix. Half the MMAs and accumulators of rows as
 * m keep the instructions per key low, so that decode is bound by reading
 * the cache. Shared memory rows are DP elements, swizzled in 16-byte chunks. */
template <class T, int DP> __device__ void attention_rows_mma_impl(const cuda_attention_params &p) {
#if __CUDA_ARCH__ >= 800
  constexpr int ROWS = GK_ATTENTION_ROWS_QROWS, WARPS = GK_ATTENTION_ROWS_WARPS, KEYS = GK_ATTENTION_ROWS_KEYS;
  constexpr int CH = DP / 8, THREADS = WARPS * 32;
  static_assert(ROWS == 8 && KEYS == 16 * WARPS && CH <= 32, "tile shape");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T *q_s = reinterpret_cast<T *>(smem_raw);
  T *k_s = q_s + ROWS * DP; /* [2][KEYS][DP] */
  T *v_s = k_s + 2 * KEYS * DP;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, d = p.head_dim;
  const int g = lane >> 2, t2 = 2 * (lane & 3); /* fragment row; first of this lane's two columns */
  const int group = p.q_heads / p.kv_heads;
  const int chunks = (group + p.heads_per_block - 1) / p.heads_per_block;
  const int hk = blockIdx.y / chunks, hc = blockIdx.y % chunks;
  const int64_t t0 = (int64_t)blockIdx.x * p.tokens_per_block;
  const int64_t t_end = t0 + p.tokens_per_block < p.tokens ? t0 + p.tokens_per_block : p.tokens;
  const T *Q = reinterpret_cast<const T *>(p.q), *K = reinterpret_cast<const T *>(p.k),
          *V = reinterpret_cast<const T *>(p.v);
  const float scale_log2 = p.scale * 1.4426950408889634f;

  /* Row r of the block: token t0 + r / heads_per_block, head hc * heads_per_block + r % heads_per_block. */
  auto row_token = [&](int r) { return t0 + r / p.heads_per_block; };
  auto row_head = [&](int r) { return hc * p.heads_per_block + r % p.heads_per_block; };
  auto row_exists = [&](int r) {
    return r < p.tokens_per_block * p.heads_per_block && row_token(r) < t_end && row_head(r) < group;
  };

  const int seq_last = seq_of_token(p, t_end - 1);
  for (int seq = seq_of_token(p, t0); seq <= seq_last; seq++) {
    const seq_info s = seq_info_of(p, seq);
    if (!s.ok && tid == 0) raise_error(p.error_flag, GK_ERROR_PAGED_ATTENTION);
    auto in_seq = [&](int r) {
      return row_exists(r) && row_token(r) >= s.q_start && row_token(r) < s.q_start + s.q_len;
    };
    auto end_of = [&](int r) { return in_seq(r) ? visible_end(p, s, row_token(r) - s.q_start) : 0; };
    /* The keys this lane's two rows (t2, t2 + 1) see, and the block's. */
    const int row_end[2] = {end_of(t2), end_of(t2 + 1)};
    int block_end = end_of(lane & 7);
    for (int o = 4; o > 0; o >>= 1) block_end = max(block_end, __shfl_xor_sync(0xffffffffu, block_end, o));
    const int split_keys = keys_per_split(p, block_end, KEYS);
    const int k_begin = p.splits > 1 ? blockIdx.z * split_keys : 0;
    const int k_end = p.splits > 1 && k_begin + split_keys < block_end ? k_begin + split_keys : block_end;
    const int ntiles = k_end > k_begin ? (k_end - k_begin + KEYS - 1) / KEYS : 0;

    for (int q = tid; q < ROWS * CH; q += THREADS) {
      const int r = q / CH, c = q % CH;
      const bool ok = in_seq(r) && 8 * c < d;
      const T *src =
          ok ? Q + q_row_at(p, seq, row_token(r), row_token(r) - s.q_start, hk * group + row_head(r)) + 8 * c : Q;
      cp_async16(q_s + r * DP + 8 * swizzle<CH>(r, c), src, ok ? 16 : 0);
    }
    /* Each warp copies its own 16 keys of every tile, whole rows at a time
     * (32 / CH keys an instruction, so that requests cover whole lines), and
     * needs no other warp's: the warps' pipelines run apart. Lane j (< 16)
     * looks up the cache row of the warp's key j a tile ahead of the copy,
     * so that the block-table read never stalls the pipeline. */
    auto row_of = [&](int j0) -> int64_t {
      const int j = j0 + 16 * warp + (lane & 15);
      if (j >= k_end) return -1;
      const int64_t row = key_slot(p, seq, j);
      if (row < 0) raise_error(p.error_flag, GK_ERROR_PAGED_ATTENTION);
      return row;
    };
    auto load_tile = [&](int buf, int64_t row) {
      T *k_dst = k_s + buf * KEYS * DP + 16 * warp * DP, *v_dst = v_s + buf * KEYS * DP + 16 * warp * DP;
#pragma unroll
      for (int q = lane; q < 16 * CH; q += 32) {
        const int key = q / CH, c = q % CH;
        const int64_t key_row = __shfl_sync(0xffffffffu, row, key);
        const int n = key_row >= 0 && 8 * c < d ? 16 : 0; /* bytes copied; the rest of the 16 zero-filled */
        const int at = key * DP + 8 * swizzle<CH>(key, c);
        cp_async16(k_dst + at, n ? K + k_row_at(p, seq, key_row, hk) + 8 * c : K, n);
        cp_async16(v_dst + at, n ? V + v_row_at(p, seq, key_row, hk) + 8 * c : V, n);
      }
    };
    if (ntiles > 0) load_tile(0, row_of(k_begin));
    cp_async_commit();
    int64_t next_row = ntiles > 1 ? row_of(k_begin + KEYS) : -1;

    /* o[i]: O^T for dims 16 i + g (+ 8 for elements 2-3), rows t2 and t2 + 1. */
    float o[DP / 16][4];
#pragma unroll
    for (int i = 0; i < DP / 16; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) o[i][e] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    uint32_t qf[DP / 16][2]; /* B fragments of Q^T: row g, dims 16 ks + t2 (+ 8) */

    for (int it = 0; it < ntiles; it++) {
      const int j0 = k_begin + it * KEYS + 16 * warp; /* this warp's first key */
      if (it + 1 < ntiles) load_tile((it + 1) & 1, next_row);
      cp_async_commit();
      next_row = it + 2 < ntiles ? row_of(k_begin + (it + 2) * KEYS) : -1;
      cp_async_wait<1>();
      __syncwarp();
      if (it == 0) {
        __syncthreads(); /* every warp's copies of Q have landed */
#pragma unroll
        for (int ks = 0; ks < DP / 16; ks += 2) {
          uint32_t f[4];
          ldmatrix_x4(f, q_s + (lane & 7) * DP + 8 * swizzle<CH>(lane & 7, 2 * ks + (lane >> 3)));
          qf[ks][0] = f[0], qf[ks][1] = f[1], qf[ks + 1][0] = f[2], qf[ks + 1][1] = f[3];
        }
      }
      const T *kt = k_s + (it & 1) * KEYS * DP + 16 * warp * DP, *vt = v_s + (it & 1) * KEYS * DP + 16 * warp * DP;
      /* S^T for keys j0 + g (elements 0-1) and j0 + g + 8 (2-3), rows t2, t2 + 1 */
      float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int ks = 0; ks < DP / 16; ks++) {
        uint32_t a[4];
        const int r = lane & 15, c = 2 * ks + (lane >> 4);
        ldmatrix_x4(a, kt + r * DP + 8 * swizzle<CH>(r, c)); /* rows 16 warp + r: the same swizzle */
        mma_16816(sc, a, qf[ks], (T *)nullptr);
      }
      float pr[4];
#pragma unroll
      for (int hr = 0; hr < 2; hr++) { /* row t2 + hr: elements hr and 2 + hr */
        float s0 = sc[hr], s1 = sc[2 + hr];
        s0 = j0 + g < row_end[hr] && j0 + g < k_end ? s0 * scale_log2 : -INFINITY;
        s1 = j0 + g + 8 < row_end[hr] && j0 + g + 8 < k_end ? s1 * scale_log2 : -INFINITY;
        float mx = fmaxf(s0, s1);
        for (int o2 = 4; o2 < 32; o2 <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o2));
        const float m_new = fmaxf(m[hr], mx);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float alpha = exp2f(m[hr] - m_use);
        m[hr] = m_new;
        /* the weights as the MMA sees them */
        const float p0 = to_f32(from_f32<T>(exp2f(s0 - m_use))), p1 = to_f32(from_f32<T>(exp2f(s1 - m_use)));
        l[hr] = l[hr] * alpha + p0 + p1;
        pr[hr] = p0, pr[2 + hr] = p1;
        if (__any_sync(0xffffffffu, alpha != 1.0f)) {
#pragma unroll
          for (int i = 0; i < DP / 16; i++) {
            o[i][hr] *= alpha;
            o[i][2 + hr] *= alpha;
          }
        }
      }
      /* P^T as B fragments: rows g, keys t2 (+ 1) and t2 + 8 (+ 1). */
      uint32_t b[2];
      b[0] = movmatrix_trans(pack2((T *)nullptr, pr[0], pr[1]));
      b[1] = movmatrix_trans(pack2((T *)nullptr, pr[2], pr[3]));
#pragma unroll
      for (int i = 0; i < DP / 16; i++) {
        uint32_t a[4]; /* V^T for dims 16 i .. 16 i + 15 x the warp's 16 keys */
        const int r = 8 * (lane >> 4) + (lane & 7), c = 2 * i + ((lane >> 3) & 1);
        ldmatrix_x4_trans(a, vt + r * DP + 8 * swizzle<CH>(r, c));
        mma_16816(o[i], a, b, (T *)nullptr);
      }
      __syncwarp(); /* the warp's tile may be overwritten next */
    }
    cp_async_wait<0>();
    __syncthreads();

    /* Every warp's output, row maxima (log2 units) and row sums go to the
     * (now idle) tiles. Then one thread a row weighs the warps' parts (their
     * exponentials of the maxima over the row's total), writes the row's
     * log-sum-exp and finds where the row goes, once; and the block writes
     * the rows out whole, each element a sum of the warps' parts. (Doing the
     * row's part for every element, with its divisions by heads_per_block,
     * took over half of the instructions of a decode block: B = 1 is bound
     * by the latency of the block's instructions, one warp a scheduler.) */
    float *merge_o = reinterpret_cast<float *>(k_s); /* [WARPS][ROWS][DP] */
    float *merge_ml = merge_o + WARPS * ROWS * DP;   /* [WARPS][ROWS][2] */
    float *row_weight = merge_ml + WARPS * ROWS * 2; /* [ROWS][WARPS] */
    int64_t *row_dst = reinterpret_cast<int64_t *>(row_weight + ROWS * WARPS); /* element offset, or -1 */
    static_assert((WARPS * ROWS * DP + WARPS * ROWS * 3 + 2 * ROWS) * 4 <= 4 * KEYS * DP * (int)sizeof(T),
                  "merge fits");
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      float total = l[hr];
      for (int o2 = 4; o2 < 32; o2 <<= 1) total += __shfl_xor_sync(0xffffffffu, total, o2);
      float *row_o = merge_o + (warp * ROWS + t2 + hr) * DP;
#pragma unroll
      for (int i = 0; i < DP / 16; i++) {
        row_o[16 * i + g] = o[i][hr];
        row_o[16 * i + g + 8] = o[i][2 + hr];
      }
      if (g == 0) *reinterpret_cast<float2 *>(merge_ml + (warp * ROWS + t2 + hr) * 2) = make_float2(m[hr], total);
    }
    __syncthreads();
    if (tid < ROWS) {
      const int r = tid;
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < WARPS; w++) mx = fmaxf(mx, merge_ml[(w * ROWS + r) * 2]);
      const float m_use = mx == -INFINITY ? 0.0f : mx;
      float f[WARPS], total = 0.0f;
#pragma unroll
      for (int w = 0; w < WARPS; w++) {
        f[w] = exp2f(merge_ml[(w * ROWS + r) * 2] - m_use);
        total += merge_ml[(w * ROWS + r) * 2 + 1] * f[w];
      }
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
#pragma unroll
      for (int w = 0; w < WARPS; w++) row_weight[r * WARPS + w] = f[w] * inv;
      /* Natural log-sum-exp of the scaled scores (mx is in log2 units). */
      const float lse = total > 0.0f ? mx * 0.69314718055994531f + logf(total) : -INFINITY;
      const int64_t t = row_token(r);
      const int h = hk * group + row_head(r);
      int64_t dst = -1;
      if (in_seq(r)) {
        if (p.splits > 1) {
          const int64_t prow = (int64_t)blockIdx.z * p.tokens * p.q_heads + t * p.q_heads + h;
          dst = prow * d;
          reinterpret_cast<float *>(p.partial_lse)[prow] = lse;
        } else {
          dst = out_row_at(p, seq, t, t - s.q_start, h);
          if (p.lse)
            reinterpret_cast<float *>(p.lse)[((int64_t)seq * p.q_heads + h) * p.lse_stride + t - s.q_start] = lse;
        }
      }
      row_dst[r] = dst;
    }
    __syncthreads();
    for (int q = tid; q < ROWS * DP; q += THREADS) {
      const int r = q / DP, c = q % DP;
      const int64_t dst = row_dst[r];
      if (dst < 0 || c >= d) continue;
      float acc = 0.0f;
#pragma unroll
      for (int w = 0; w < WARPS; w++) acc += merge_o[(w * ROWS + r) * DP + c] * row_weight[r * WARPS + w];
      if (p.splits > 1) reinterpret_cast<float *>(p.partial_out)[dst + c] = acc;
      else store1(ptr_at<T>(p.out, dst) + c, acc);
    }
    __syncthreads(); /* q_s and the tiles are rewritten for the next sequence */
  }
#endif
}

/* Three blocks a multiprocessor fit its shared memory below DP = 256 (one
 * at 256): registers are capped to match. */
#define GK_ATTENTION_ROWS_KERNEL(dname, T, DP)                                           \
  GK_ENTRY(__launch_bounds__(GK_ATTENTION_ROWS_WARPS * 32, (DP) == 256 ? 1 : 3),          \
           gk_attention_rows_##dname##_d##DP, cuda_attention_params, attention_rows_mma_impl<T, DP>(p))
GK_ATTENTION_ROWS_KERNEL(f16, f16, 64)
GK_ATTENTION_ROWS_KERNEL(bf16, bf16, 64)
GK_ATTENTION_ROWS_KERNEL(f16, f16, 128)
GK_ATTENTION_ROWS_KERNEL(bf16, bf16, 128)
GK_ATTENTION_ROWS_KERNEL(f16, f16, 256)
GK_ATTENTION_ROWS_KERNEL(bf16, bf16, 256)

/* ------------------------------------------------ tensor-core attention */

/* The end of both tensor-core kernels: a thread owns rows row0 and row0 + 8
 * of the query tile, with its part l[hr] of each row's sum (the 4 threads of
 * a quad share a row) and the row's max m[hr] in log2 units; acc(i, e) is
 * element e of its n8 chunk i of the output, e = 2 hr + {0, 1} for row hr.
 * Writes out = acc / sum and, if asked, the row's natural log-sum-exp. */
template <class T, int DP, class Acc>
__device__ __forceinline__ void write_attention_rows(const cuda_attention_params &p, int b, int h, int sq, int d,
                                                     int row0, int lane, const float (&m)[2], const float (&l)[2],
                                                     Acc acc) {
#pragma unroll
  for (int hr = 0; hr < 2; hr++) {
    float total = l[hr];
    total += __shfl_xor_sync(0xffffffffu, total, 1);
    total += __shfl_xor_sync(0xffffffffu, total, 2);
    const int row = row0 + 8 * hr;
    if (row >= sq) continue;
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    T *out = ptr_at<T>(p.out, (int64_t)b * p.out_batch_stride + (int64_t)row * p.out_token_stride +
                                  (int64_t)h * p.out_stride);
#pragma unroll
    for (int i = 0; i < DP / 8; i++) {
      const int c = 8 * i + 2 * (lane & 3);
      if (c < d) *reinterpret_cast<uint32_t *>(out + c) = pack2(out, acc(i, 2 * hr) * inv, acc(i, 2 * hr + 1) * inv);
    }
    if (p.lse && (lane & 3) == 0)
      reinterpret_cast<float *>(p.lse)[((int64_t)b * p.q_heads + h) * p.lse_stride + row] =
          total > 0.0f ? m[hr] * 0.69314718055994531f + logf(total) : -INFINITY;
  }
}

template <class T, int DP>
__device__ void attention_mma_impl(const cuda_attention_params &p) {
#if __CUDA_ARCH__ >= 800
  constexpr int BQ = GK_ATTENTION_MMA_ROWS, BKV = GK_ATTENTION_MMA_KEYS(DP), CH = DP / 8;
  constexpr bool Q_IN_REGISTERS = DP <= 128;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T *q_s = reinterpret_cast<T *>(smem_raw);
  T *k_s = q_s + BQ * DP;
  T *v_s = k_s + 2 * BKV * DP;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int qt = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x; /* longest first */
  const int q0 = qt * BQ, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.q_heads / p.kv_heads);
  const int d = p.head_dim, sq = p.q_len;
  const int len = kv_len_of(p, b);
  const int shift = len - sq; /* causal: key j visible to query i iff j <= i + shift */
  int key_end = len;
  if (p.causal && q0 + BQ + shift < key_end) key_end = q0 + BQ + shift;
  if (key_end < 0) key_end = 0;
  const int ntiles = (key_end + BKV - 1) / BKV;
  const T *Q = reinterpret_cast<const T *>(p.q);
  const T *K = reinterpret_cast<const T *>(p.k);
  const T *V = reinterpret_cast<const T *>(p.v);

  for (int q = threadIdx.x; q < BQ * CH; q += blockDim.x) {
    const int r = q / CH, c = q % CH, s = q0 + r;
    const bool ok = s < sq && 8 * c < d;
    const T *src =
        ok ? Q + (int64_t)b * p.q_batch_stride + (int64_t)s * p.q_token_stride + (int64_t)h * p.q_stride + 8 * c : Q;
    cp_async16(q_s + r * DP + 8 * swizzle<CH>(r, c), src, ok ? 16 : 0);
  }
  auto load_kv = [&](int buf, int tile) {
    const int j0 = tile * BKV;
    for (int q = threadIdx.x; q < BKV * CH; q += blockDim.x) {
      const int r = q / CH, c = q % CH, j = j0 + r;
      const bool ok = j < key_end && 8 * c < d;
      const int at = buf * BKV * DP + r * DP + 8 * swizzle<CH>(r, c);
      cp_async16(k_s + at, ok ? K + k_row_at(p, b, j, hk) + 8 * c : K, ok ? 16 : 0);
      cp_async16(v_s + at, ok ? V + v_row_at(p, b, j, hk) + 8 * c : V, ok ? 16 : 0);
    }
  };
  if (ntiles > 0) load_kv(0, 0);
  cp_async_commit();

  float o[DP / 8][4];
#pragma unroll
  for (int i = 0; i < DP / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) o[i][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  uint32_t qf[Q_IN_REGISTERS ? DP / 16 : 1][4];
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const int row0 = q0 + 16 * warp + (lane >> 2); /* this thread's rows: row0, row0 + 8 */
  const int qr = 16 * warp + (lane & 15);        /* ldmatrix row of Q */

  for (int it = 0; it < ntiles; it++) {
    cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < ntiles) load_kv((it + 1) & 1, it + 1);
    cp_async_commit();
    if (Q_IN_REGISTERS && it == 0) {
#pragma unroll
      for (int ks = 0; ks < DP / 16; ks++)
        ldmatrix_x4(qf[Q_IN_REGISTERS ? ks : 0], q_s + qr * DP + 8 * swizzle<CH>(qr, 2 * ks + (lane >> 4)));
    }
    const T *kt = k_s + (it & 1) * BKV * DP, *vt = v_s + (it & 1) * BKV * DP;

    float s[BKV / 8][4];
#pragma unroll
    for (int i = 0; i < BKV / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) s[i][e] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < DP / 16; ks++) {
      uint32_t a[4];
      if (Q_IN_REGISTERS) {
#pragma unroll
        for (int e = 0; e < 4; e++) a[e] = qf[Q_IN_REGISTERS ? ks : 0][e];
      } else {
        ldmatrix_x4(a, q_s + qr * DP + 8 * swizzle<CH>(qr, 2 * ks + (lane >> 4)));
      }
#pragma unroll
      for (int np = 0; np < BKV / 16; np++) {
        const int r = 16 * np + 8 * (lane >> 4) + (lane & 7), c = 2 * ks + ((lane >> 3) & 1);
        uint32_t t[4];
        ldmatrix_x4(t, kt + r * DP + 8 * swizzle<CH>(r, c));
        mma_16816(s[2 * np], a, t, (T *)nullptr);
        mma_16816(s[2 * np + 1], a, t + 2, (T *)nullptr);
      }
    }

    /* Mask, scale to log2 units, and fold into the running softmax. */
    const int j0 = it * BKV;
#pragma unroll
    for (int i = 0; i < BKV / 8; i++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int j = j0 + 8 * i + 2 * (lane & 3) + (e & 1);
        const int row = row0 + 8 * (e >> 1);
        const bool visible = j < key_end && (!p.causal || j <= row + shift);
        s[i][e] = visible ? s[i][e] * scale_log2 : -INFINITY;
      }
    softmax_fold<T, BKV, DP>(s, o, m, l);

    accumulate_pv<T, BKV, DP>(s, o, vt, lane);
  }
  cp_async_wait<0>();

  write_attention_rows<T, DP>(p, b, h, sq, d, row0, lane, m, l, [&](int i, int e) { return o[i][e]; });
#endif
}

#define GK_ATTENTION_MMA_KERNEL(dname, T, DP)                                                \
  GK_ENTRY(__launch_bounds__(128), gk_attention_mma_##dname##_d##DP, cuda_attention_params, \
           attention_mma_impl<T, DP>(p))
GK_ATTENTION_MMA_KERNEL(f16, f16, 64)
GK_ATTENTION_MMA_KERNEL(f16, f16, 128)
GK_ATTENTION_MMA_KERNEL(f16, f16, 256)
GK_ATTENTION_MMA_KERNEL(bf16, bf16, 64)
GK_ATTENTION_MMA_KERNEL(bf16, bf16, 128)
GK_ATTENTION_MMA_KERNEL(bf16, bf16, 256)

/* ---------------------------------------- Hopper tensor-core attention */

/* One step of O += P V on a warpgroup (P in registers, V N-major in shared
 * memory), N = 64, 128 or 256 columns. */
template <int N, class T>
__device__ __forceinline__ void wgmma_pv(float *d, const uint32_t a[4], uint64_t desc_b) {
  if constexpr (N == 64) wgmma_m64n64k16_rs<1>(d, a, desc_b, 1, (T *)nullptr);
  else if constexpr (N == 128) wgmma_m64n128k16_rs<1>(d, a, desc_b, 1, (T *)nullptr);
  else wgmma_m64n256k16_rs<1>(d, a, desc_b, 1, (T *)nullptr);
}
/* One step of S (+)= Q K^T on a warpgroup, both K-major in shared memory,
 * N = 64 or 128 keys. */
template <int N, class T>
__device__ __forceinline__ void wgmma_qk(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
  if constexpr (N == 64) wgmma_m64n64k16_ss(d, desc_a, desc_b, accumulate, (T *)nullptr);
  else wgmma_m64n128k16_ss(d, desc_a, desc_b, accumulate, (T *)nullptr);
}

/* Contiguous prefill on Hopper (sm_90a image), f16/bf16, head dims padded
 * to 64, 128 or 256, in the manner of FlashAttention-3: 128 query rows of
 * one head a block and three warpgroups. One thread of warpgroup 0 loads Q
 * once and K and V tiles of BKV keys into rings of two stages with TMA
 * (full barriers complete when a tile's bytes land, empty ones when both
 * multiplying warpgroups are done with it); warpgroups 1 and 2 each own 64
 * query rows. Both products are wgmma: S = Q K^T from shared memory, O +=
 * P V with P straight from the S accumulators in registers and V read
 * N-major (never transposed). A step issues the next tile's scores and this
 * tile's P V together, then turns the scores into probabilities while the
 * tensor cores work on P V; and the two warpgroups take turns to issue
 * (two named barriers), so that one's softmax runs under the other's
 * products. Tiles past the causal diagonal are never loaded; only tiles
 * that cross it (or the end of the keys) are masked.
 *
 * Shared memory: Q and each K or V tile as DP / 64 slices [rows][64],
 * 128-byte rows with 16-byte chunk c of row r at c ^ (r % 8) (TMA's and
 * wgmma's 128-byte swizzle). TMA fills what lies past the tensors' ends
 * (rows past q_len or kv_len, dims past head_dim) with zeros; a V tile
 * that holds keys past a shorter kv_lens[b] is copied by the loading warp
 * with cp.async instead, zero-filled, since a 0 probability times
 * whatever lies there could still be a NaN. */
template <class T, int DP> __device__ void attention_wgmma_impl(const cuda_attention_tma_params &P) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  const cuda_attention_params &p = P.p;
  constexpr int BQ = GK_ATTENTION_WGMMA_ROWS, BKV = GK_ATTENTION_WGMMA_KEYS(DP);
  constexpr int STAGES = GK_ATTENTION_WGMMA_STAGES, SLICES = DP / 64, CH = DP / 8;
  constexpr int TILE = BKV * DP; /* elements of a K or V tile */
  extern __shared__ __align__(128) unsigned char smem_raw[];
  /* The swizzle pattern repeats every 1024 bytes: align the tiles to it. */
  T *q_s = reinterpret_cast<T *>(smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023));
  T *k_s = q_s + BQ * DP; /* STAGES tiles */
  T *v_s = k_s + STAGES * TILE;
  uint64_t *q_full = reinterpret_cast<uint64_t *>(v_s + STAGES * TILE);
  uint64_t *k_full = q_full + 1, *k_empty = k_full + STAGES, *v_full = k_empty + STAGES, *v_empty = v_full + STAGES;
  const int warpgroup = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  /* Blocks start in the grid's order, x first. Causal (heads, query tiles,
   * batch): every head's longest tiles of a sequence go before any shorter
   * one, so that a sequence's last wave holds short blocks. Otherwise
   * (query tiles, heads, batch): a wave shares few heads' keys in L2. */
  const int qt = p.causal ? gridDim.y - 1 - blockIdx.y : blockIdx.x;
  const int q0 = qt * BQ, h = p.causal ? blockIdx.x : blockIdx.y, b = blockIdx.z;
  const int hk = h / (p.q_heads / p.kv_heads);
  const int d = p.head_dim, sq = p.q_len;
  const int len = kv_len_of(p, b);
  /* Keys [0, row_end(q)) are visible to query q. */
  auto row_end = [&](int q) {
    const int end = p.causal && q + len - sq + 1 < len ? q + len - sq + 1 : len;
    return end < 0 ? 0 : end;
  };
  const int key_end = row_end(q0 + BQ - 1), unmasked_end = row_end(q0);
  const int ntiles = (key_end + BKV - 1) / BKV;
  if (threadIdx.x == 0) {
    mbarrier_init(q_full, 1);
    for (int s = 0; s < STAGES; s++) {
      mbarrier_init(&k_full[s], 1);
      mbarrier_init(&v_full[s], 1);
      mbarrier_init(&k_empty[s], 2);
      mbarrier_init(&v_empty[s], 2);
    }
  }
  __syncthreads();

  if (warpgroup == 0) { /* loader */
    setmaxnreg_dec<40>();
    if (warp != 0 || ntiles == 0) return;
    constexpr uint32_t Q_BYTES = BQ * DP * 2, TILE_BYTES = TILE * 2;
    if (lane == 0) {
      mbarrier_arrive_expect_tx(q_full, Q_BYTES);
      for (int sl = 0; sl < SLICES; sl++) tma_load_4d(q_s + sl * BQ * 64, &P.q_map, 64 * sl, q0, h, b, q_full);
    }
    const T *V = reinterpret_cast<const T *>(p.v);
    for (int it = 0; it < ntiles; it++) {
      const int s = it % STAGES, j0 = it * BKV;
      T *kt = k_s + s * TILE, *vt = v_s + s * TILE;
      if (it >= STAGES) mbarrier_wait(&k_empty[s], ((it / STAGES) & 1) ^ 1);
      if (lane == 0) {
        mbarrier_arrive_expect_tx(&k_full[s], TILE_BYTES);
        for (int sl = 0; sl < SLICES; sl++) tma_load_4d(kt + sl * BKV * 64, &P.k_map, 64 * sl, j0, hk, b, &k_full[s]);
      }
      if (it >= STAGES) mbarrier_wait(&v_empty[s], ((it / STAGES) & 1) ^ 1);
      if (j0 + BKV > len && len < p.kv_len) {
        for (int i = lane; i < BKV * CH; i += 32) {
          const int r = i / CH, c = i % CH;
          const bool ok = j0 + r < len && 8 * c < d;
          cp_async16(vt + (c / 8) * BKV * 64 + r * 64 + 8 * ((c ^ r) & 7),
                     ok ? V + v_row_at(p, b, j0 + r, hk) + 8 * c : V, ok ? 16 : 0);
        }
        cp_async_commit();
        cp_async_wait<0>();
        fence_proxy_async();
        __syncwarp();
        if (lane == 0) mbarrier_arrive(&v_full[s]);
      } else if (lane == 0) {
        mbarrier_arrive_expect_tx(&v_full[s], TILE_BYTES);
        for (int sl = 0; sl < SLICES; sl++) tma_load_4d(vt + sl * BKV * 64, &P.v_map, 64 * sl, j0, hk, b, &v_full[s]);
      }
      __syncwarp();
    }
    return;
  }
  setmaxnreg_inc<232>();

  const int group = warpgroup - 1; /* query rows 64 group .. 64 group + 63 of the block */
  /* Scale: a negative one runs on attention_mma (the host's choice); a zero
   * one becomes the smallest normal float so that masked scores stay -inf. */
  const float scale_log2 = fmaxf(p.scale * 1.4426950408889634f, 1.17549435e-38f);
  /* This thread's rows: row0 and row0 + 8 (accumulator elements 4 j + {0, 1}
   * and 4 j + {2, 3}), keys / columns 8 j + 2 (lane % 4) + {0, 1}. */
  const int row0 = q0 + 64 * group + 16 * warp + (lane >> 2);
  const int end[2] = {row_end(row0), row_end(row0 + 8)};
  float s[BKV / 2], o[DP / 2];
#pragma unroll
  for (int i = 0; i < DP / 2; i++) o[i] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* m in log2 units */
  uint32_t pf[BKV / 16][4];

  const T *q_rows = q_s + group * 64 * 64;
  auto issue_scores = [&](const T *kt) {
#pragma unroll
    for (int ks = 0; ks < DP / 16; ks++)
      wgmma_qk<BKV, T>(s, wgmma_descriptor(q_rows + (ks / 4) * BQ * 64 + (ks % 4) * 16),
                       wgmma_descriptor(kt + (ks / 4) * BKV * 64 + (ks % 4) * 16), ks > 0);
    wgmma_commit();
  };
  auto issue_pv = [&](const T *vt) {
#pragma unroll
    for (int kk = 0; kk < BKV / 16; kk++) {
      const uint64_t desc = wgmma_descriptor_n_major(vt + kk * 16 * 64, BKV * 128);
      wgmma_pv<DP, T>(o, pf[kk], desc);
    }
    wgmma_commit();
  };
  /* Scores of keys j0 .. j0 + BKV - 1 into probabilities (in place). The
   * running max m a row's probabilities are taken against only moves when
   * the scores outgrow it by more than 2^8: probabilities up to 256 are as
   * exact in f32 and 16 bits as any, and the output so far needs no
   * rescaling. Returns whether it does (warp-uniform; alpha = the factors). */
  auto fold_scores = [&](int j0, float alpha[2]) {
    if (j0 + BKV > unmasked_end) {
#pragma unroll
      for (int i = 0; i < BKV / 2; i++) {
        const int j = j0 + 8 * (i / 4) + 2 * (lane & 3) + (i & 1);
        if (j >= end[(i >> 1) & 1]) s[i] = -INFINITY;
      }
    }
    float m_tile[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < BKV / 8; c++) mx = fmaxf(mx, fmaxf(s[4 * c + 2 * hr], s[4 * c + 2 * hr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      m_tile[hr] = mx * scale_log2;
    }
    const bool grow[2] = {m_tile[0] > m[0] + 8.0f, m_tile[1] > m[1] + 8.0f};
    const bool rescale = __any_sync(0xffffffffu, grow[0] || grow[1]);
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
      alpha[hr] = 1.0f;
      if (grow[hr]) {
        alpha[hr] = exp2_ftz(m[hr] - m_tile[hr]);
        m[hr] = m_tile[hr];
      }
      const float m_use = m[hr] == -INFINITY ? 0.0f : m[hr];
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < BKV / 8; c++)
#pragma unroll
        for (int e = 2 * hr; e < 2 * hr + 2; e++) {
          s[4 * c + e] = exp2_ftz(fmaf(s[4 * c + e], scale_log2, -m_use));
          sum += s[4 * c + e];
        }
      l[hr] = l[hr] * alpha[hr] + sum;
    }
    return rescale;
  };
  /* P as A fragments. P V multiplies the probabilities rounded, while l
   * sums them as they were: the weights' rounding is what the tolerance
   * allows either way, and summing the rounded ones cost the softmax-bound
   * D = 64 kernel 7%. */
  auto to_fragments = [&]() {
#pragma unroll
    for (int kk = 0; kk < BKV / 16; kk++) p_fragments<T>(s + 8 * kk, s + 8 * kk + 4, pf[kk]);
  };
  /* Hands stage `st` of a ring back to the loader (one arrival a warpgroup). */
  auto release = [&](uint64_t *empty, int st) {
    if ((threadIdx.x & 127) == 0) mbarrier_arrive(&empty[st]);
  };
  /* Turns at the tensor cores: warpgroup g issues between a sync on barrier
   * 1 + g and an arrival at the other's. Each takes ntiles + 1 turns; the
   * first turn is group 0's, and group 1 does not pass on its last. */
  auto my_turn = [&]() { named_barrier_sync(1 + group, 256); };
  auto pass_turn = [&]() { named_barrier_arrive(2 - group, 256); };

  if (ntiles > 0) {
    if (group == 1) pass_turn();
    mbarrier_wait(q_full, 0);
    mbarrier_wait(&k_full[0], 0);
    my_turn();
    wgmma_fence();
    issue_scores(k_s);
    pass_turn();
    wgmma_wait<0>();
    wgmma_fence_registers(s);
    release(k_empty, 0);
    float alpha[2];
    fold_scores(0, alpha);
    to_fragments();
  }
  for (int it = 1; it < ntiles; it++) {
    const int st = it % STAGES, prev = (it - 1) % STAGES;
    mbarrier_wait(&k_full[st], (it / STAGES) & 1);
    /* (Waiting between the two issues would make ptxas fence them apart.) */
    mbarrier_wait(&v_full[prev], ((it - 1) / STAGES) & 1);
    my_turn();
    wgmma_fence();
    issue_scores(k_s + st * TILE);
    issue_pv(v_s + prev * TILE);
    pass_turn();
    float alpha[2];
    wgmma_wait<1>(); /* the scores */
    wgmma_fence_registers(s);
    release(k_empty, st);
    const bool rescale = fold_scores(it * BKV, alpha);
    wgmma_wait<0>(); /* P V */
    wgmma_fence_registers(o);
    release(v_empty, prev);
    if (rescale)
#pragma unroll
      for (int i = 0; i < DP / 2; i++) o[i] *= alpha[(i >> 1) & 1];
    to_fragments();
  }
  if (ntiles > 0) {
    const int last = (ntiles - 1) % STAGES;
    mbarrier_wait(&v_full[last], ((ntiles - 1) / STAGES) & 1);
    my_turn();
    wgmma_fence();
    issue_pv(v_s + last * TILE);
    if (group == 0) pass_turn();
    wgmma_wait<0>();
    wgmma_fence_registers(o);
  }

  write_attention_rows<T, DP>(p, b, h, sq, d, row0, lane, m, l, [&](int i, int e) { return o[4 * i + e]; });
#endif
}

#define GK_ATTENTION_WGMMA_KERNEL(dname, T, DP)                                                      \
  GK_ENTRY(__launch_bounds__(GK_ATTENTION_WGMMA_THREADS, 1), gk_attention_wgmma_##dname##_d##DP, \
           __grid_constant__ cuda_attention_tma_params, attention_wgmma_impl<T, DP>(p))
GK_ATTENTION_WGMMA_KERNEL(f16, f16, 64)
GK_ATTENTION_WGMMA_KERNEL(bf16, bf16, 64)
GK_ATTENTION_WGMMA_KERNEL(f16, f16, 128)
GK_ATTENTION_WGMMA_KERNEL(bf16, bf16, 128)
GK_ATTENTION_WGMMA_KERNEL(f16, f16, 256)
GK_ATTENTION_WGMMA_KERNEL(bf16, bf16, 256)
