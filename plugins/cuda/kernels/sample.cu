/*
 * sample.cu - argmax and sample: one block per row (GK_SAMPLE_THREADS
 * threads for sample), or for argmax of few rows several blocks a row whose
 * last merges; sample with 1 < top_k <= GK_SAMPLE_TOPK_MAX also has a
 * two-kernel path, with a block per chunk of the row first (below).
 *
 * sample keeps the tokens that survive top_k (every logit whose order key
 * is >= the top_k-th largest: ties at the threshold are all kept), then
 * top_p (over what top_k kept), then min_p (relative to the most likely
 * token), and draws one of them with probability proportional to
 * exp((logit - max) / temperature).
 * Probabilities are summed as 40-bit fixed-point integers, so every sum is
 * exact and independent of the order of the threads: the same inputs give
 * the same token on every run.
 */
#include "common.cuh"

#define SAMPLE_WARPS (GK_SAMPLE_THREADS / 32)

/* ----------------------------------------------------------------- argmax */

/* Whether (v, i) beats (best, best_i): larger value, then lower index; NaN
 * is smaller than every number, as the cpu backend defines it (a row of NaN
 * gives 0). "Nothing yet" is (NaN, no_index<I>()), which every element
 * beats. Indices are int64_t, or int32_t where a row's columns fit. */
template <class I> __device__ __forceinline__ I no_index() { return sizeof(I) == 4 ? (I)INT32_MAX : (I)INT64_MAX; }

template <class I> __device__ __forceinline__ bool beats(float v, I i, float best, I best_i) {
  if (v != v) return best != best && i < best_i;
  if (best != best) return true;
  return v > best || (v == best && i < best_i);
}

/* The warp's best (value, index) by beats(), in every lane. */
template <class I> __device__ __forceinline__ void warp_argmax(float *best, I *best_i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, *best, o);
    const I i = __shfl_xor_sync(0xffffffffu, *best_i, o);
    if (beats(v, i, *best, *best_i)) {
      *best = v;
      *best_i = i;
    }
  }
}

/* The block's best (value, index) by beats(), from each thread's own best,
 * for every thread. */
template <class I> __device__ I block_argmax(float best, I best_i, float *value) {
  __shared__ float best_value[32];
  __shared__ I best_index[32];
  warp_argmax(&best, &best_i);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) {
    best_value[warp] = best;
    best_index[warp] = best_i;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x >> 5;
    best = lane < warps ? best_value[lane] : __int_as_float(0x7fc00000);
    best_i = lane < warps ? best_index[lane] : no_index<I>();
    warp_argmax(&best, &best_i);
    if (lane == 0) {
      best_value[0] = best;
      best_index[0] = best_i;
    }
  }
  __syncthreads();
  *value = best_value[0];
  return best_index[0];
}

/* Index of the row's largest logit (lowest on ties) and its value, for
 * every thread. */
template <class T, class I> __device__ I row_argmax(const T *row, I cols, int vec, float *value) {
  /* First a bare >: a thread's columns come in order, so that keeps the
   * lowest index of its largest number in fewer instructions than beats()
   * (H100 [128, 128256]: bf16 24.8 -> 17.8 us, f32 29.6 -> 26.4; [1, 128256]
   * 17.8 -> 11.2), but never takes NaN or -inf; a thread that found nothing
   * so looks again with beats(). */
  float best = -INFINITY;
  I best_i = no_index<I>();
  if (vec)
    for_row_units<4, I>(row, cols, [&](I c, const float v[8]) {
      /* The unit's largest first (fmaxf passes NaN over), the column only
       * when it beats: 8 compares and selects of 64-bit columns a unit
       * became 7 max and 1 compare (bf16 was bound by instructions). */
      const float m = fmaxf(fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3])), fmaxf(fmaxf(v[4], v[5]), fmaxf(v[6], v[7])));
      if (m > best) {
        int e = 7;
#pragma unroll
        for (int k = 6; k >= 0; k--)
          if (v[k] == m) e = k;
        best = m;
        best_i = c + e;
      }
    });
  else
    for_row<4, I>(row, cols, vec, [&](I c, float v) {
      if (v > best) {
        best = v;
        best_i = c;
      }
    });
  if (best_i == no_index<I>()) {
    best = __int_as_float(0x7fc00000); /* NaN: nothing yet */
    for_row<4, I>(row, cols, vec, [&](I c, float v) {
      if (beats(v, c, best, best_i)) {
        best = v;
        best_i = c;
      }
    });
  }
  return block_argmax(best, best_i, value);
}

__device__ __forceinline__ int32_t *out_at(uint64_t out, int64_t cols, int64_t stride, int64_t r) {
  return reinterpret_cast<int32_t *>(out) + (r / cols) * stride + r % cols;
}

/* What a block of a split row leaves for the row's last block. */
struct argmax_partial {
  float value;
  int32_t column;
};

/* The row's answer from its blocks' partials, by warp 0 (in any order:
 * beats() is a total order). */
__device__ int32_t merge_argmax(const argmax_partial *partial, int splits) {
  float best = __int_as_float(0x7fc00000);
  int32_t best_i = INT32_MAX;
  for (int s = threadIdx.x; s < splits; s += 32) {
    const float2 q = __ldcg(reinterpret_cast<const float2 *>(partial + s));
    if (beats(q.x, __float_as_int(q.y), best, best_i)) {
      best = q.x;
      best_i = __float_as_int(q.y);
    }
  }
  warp_argmax(&best, &best_i);
  return best_i;
}

/* argmax: block x takes row x (the host launches at most MAX_GRID_X rows at
 * a time, moving logits and out along; out is contiguous). Its columns
 * count in int32_t (the host takes rows of at most 2^31 - 1 logits, as out
 * holds int32_t), for_row_units issues every load before unpacking any, and
 * the split form below is a kernel of its own: 64-bit columns and a loop
 * over rows had held registers the loads needed. gllmk-bench's bf16
 * [128, 128256] went from 14.3 to 11.3 us on an H200 (55 -> 70% of copy). */
template <class T> __device__ void argmax_impl(const cuda_argmax_params &p) {
  float value;
  const int32_t best = row_argmax(ptr_at<const T>(p.logits, blockIdx.x * p.stride), (int32_t)p.cols, p.vec, &value);
  if (threadIdx.x == 0) reinterpret_cast<int32_t *>(p.out)[blockIdx.x] = best;
}

/* argmax of few rows: block (s, r) takes columns [s * span, (s + 1) *
 * span) of row r and leaves its best (value, column) in partial[r * splits
 * + s]; the last of a row's blocks to arrive (counters[r]) picks the row's.
 * The host launches a block row a row, so the loop over rows runs once, but
 * written without it (return for continue) [1, 128256] took 5.7 us instead
 * of 4.5 on an H200, for reasons not found; so are its 64-bit columns. */
template <class T> __device__ void argmax_split_impl(const cuda_argmax_params &p) {
  const int64_t begin = blockIdx.x * p.span;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    float value;
    const int32_t best = (int32_t)(begin + row_argmax(ptr_at<const T>(p.logits, r * p.stride + begin),
                                                      min(p.span, p.cols - begin), p.vec, &value));
    argmax_partial *partial = reinterpret_cast<argmax_partial *>(p.partial) + r * p.splits;
    if (threadIdx.x == 0) partial[blockIdx.x] = {value, best};
    if (!last_to_arrive(p.counters, r, p.splits) || threadIdx.x >= 32) continue;
    const int32_t merged = merge_argmax(partial, p.splits);
    if (threadIdx.x == 0) *out_at(p.out, p.out_cols, p.out_stride, r) = merged;
  }
}

GK_FLOAT_KERNELS(argmax, argmax_impl, cuda_argmax_params, __launch_bounds__(1024))
GK_FLOAT_KERNELS(argmax_split, argmax_split_impl, cuda_argmax_params, __launch_bounds__(1024))

/* ----------------------------------------------------------------- sample */

/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"). */
__device__ uint64_t philox_64(uint64_t seed, uint64_t offset, uint64_t row) {
  uint32_t c0 = (uint32_t)offset, c1 = (uint32_t)(offset >> 32);
  uint32_t c2 = (uint32_t)row, c3 = (uint32_t)(row >> 32);
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int round = 0; round < 10; round++) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ((uint64_t)c0 << 32) | c1;
}

/* An unsigned key with the order of the floats. NaN with the sign bit
 * clear ranks above +inf, with it set below -inf; the keys of numbers run
 * from KEY_MINUS_INF to KEY_PLUS_INF. */
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
#define KEY_MINUS_INF 0x007fffffu
#define KEY_PLUS_INF 0xff800000u

#define FIXED_ONE 1099511627776.0f /* 2^40 */

struct sample_weights {
  float max, inv_temperature;

  /* Unnormalised probability exp((x - max) / temperature), in [0, 1]. */
  __device__ __forceinline__ float weight(float x) const { return expf((x - max) * inv_temperature); }
  __device__ __forceinline__ uint64_t fixed(float x) const {
    return (uint64_t)__float2ull_rz(weight(x) * FIXED_ONE);
  }
};

/* One step of a radix selection, by warp 0, over the 256-bin histogram of
 * the current digit: the largest bin b such that the bins >= b hold at
 * least `need` (bin 0 if none) goes to *bin, what the bins above it hold to
 * *above. Lane l sums bins 8l..8l+7, so the search is a scan over 32 lanes
 * rather than a walk over 256 bins by one thread. */
template <class Count> __device__ void pick_bin(const Count *hist, Count need, uint32_t *bin, Count *above) {
  const int lane = threadIdx.x & 31;
  Count own[8], sum = 0;
#pragma unroll
  for (int i = 0; i < 8; i++) sum += own[i] = hist[8 * lane + i];
  Count suffix = sum; /* lanes >= this one */
  for (int o = 1; o < 32; o <<= 1) {
    const Count n = __shfl_down_sync(0xffffffffu, suffix, o);
    if (lane + o < 32) suffix += n;
  }
  Count run = suffix - sum;
  int found = -1;
#pragma unroll
  for (int i = 7; i >= 0; i--)
    if (found < 0) {
      if (run + own[i] >= need || (lane == 0 && i == 0)) found = 8 * lane + i;
      else run += own[i];
    }
  if (lane == 31 - __clz(__ballot_sync(0xffffffffu, found >= 0))) {
    *bin = (uint32_t)found;
    *above = run;
  }
}

/* Shared by every radix_select of a kernel: one instance per template
 * argument set would multiply the kernel's shared memory. */
__shared__ unsigned long long sample_hist[SAMPLE_WARPS][256];

/* Radix selection over order keys, eight bits at a time from the top: finds
 * the largest key K such that the elements with key >= K (and >= `floor`)
 * have a total measure of at least `need`. The measure is 1 per element
 * (top_k) or the fixed-point weight (top_p). each(f) calls f(column, x) for
 * each of this thread's elements: the row's, or the top_k path's
 * candidates. Each warp fills its own histogram (warps w and w + 8 share
 * one in blocks of more than eight), so fewer threads contend for one bin. */
template <bool BY_MASS, class Each>
__device__ uint32_t radix_select(Each each, const sample_weights &w, uint32_t floor, uint64_t need) {
  __shared__ uint32_t chosen_bin;
  __shared__ unsigned long long chosen_above;
  const int warp = threadIdx.x >> 5;
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < SAMPLE_WARPS * 256; b += blockDim.x) sample_hist[b / 256][b % 256] = 0;
    __syncthreads();
    each([&](int64_t, float x) {
      const uint32_t key = order_key(x);
      if ((key & mask) == prefix && key >= floor)
        atomicAdd(&sample_hist[warp % SAMPLE_WARPS][(key >> shift) & 255u], BY_MASS ? (unsigned long long)w.fixed(x) : 1ull);
    });
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
      for (int v = 1; v < SAMPLE_WARPS; v++) sample_hist[0][b] += sample_hist[v][b];
    __syncthreads();
    if (warp == 0) pick_bin<unsigned long long>(sample_hist[0], need, &chosen_bin, &chosen_above);
    __syncthreads();
    prefix |= chosen_bin << shift;
    need -= chosen_above;
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

/* radix_select's top_k search, for the top_k path: the largest key K such
 * that at least `need` of the block's elements have key >= K (0 if there
 * are fewer), on 32-bit counts. get(i, &key), for i < items (the same for
 * every thread), says whether this thread has an element i and gives its
 * key. Every lane of a warp runs every i, so a warp adds once per distinct
 * bin (__match_any_sync): the largest logits share their leading digits,
 * and one add per lane would mostly queue on one bin. Two histograms take
 * turns, so clearing the next pass's needs no barrier of its own. */
template <class Get> __device__ uint32_t count_select(int items, Get get, uint32_t need) {
  __shared__ uint32_t hist[2][256];
  __shared__ uint32_t chosen_bin, chosen_above;
  const int lane = threadIdx.x & 31;
  for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[0][b] = 0;
  __syncthreads();
  uint32_t prefix = 0, mask = 0;
  for (int pass = 0; pass < 4; pass++) {
    const int shift = 24 - 8 * pass;
    /* The other histogram was last read by the previous pass's pick_bin,
     * which ended before that pass's last barrier. */
    for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[(pass + 1) & 1][b] = 0;
    uint32_t *h = hist[pass & 1];
#pragma unroll 8
    for (int i = 0; i < items; i++) {
      uint32_t key = 0;
      const bool in = get(i, &key) && (key & mask) == prefix;
      if (__any_sync(0xffffffffu, in)) {
        const uint32_t bin = in ? (key >> shift) & 255u : 256u;
        const unsigned peers = __match_any_sync(0xffffffffu, bin);
        if (in && lane == __ffs(peers) - 1) atomicAdd(&h[bin], (uint32_t)__popc(peers));
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) pick_bin<uint32_t>(h, need, &chosen_bin, &chosen_above);
    __syncthreads();
    prefix |= chosen_bin << shift;
    need -= chosen_above;
    mask |= 255u << shift;
  }
  return prefix;
}

/* Sum over the block of a 64-bit integer; every thread gets it. */
__device__ uint64_t block_sum_u64(uint64_t v) {
  __shared__ unsigned long long partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x >> 5) ? partial[lane] : 0;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* Exclusive prefix sum over the block, in thread order. */
__device__ uint64_t block_exclusive_scan_u64(uint64_t v) {
  __shared__ unsigned long long warp_total[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t n = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += n;
  }
  __syncthreads();
  if (lane == 31) warp_total[warp] = inclusive;
  __syncthreads();
  uint64_t before = 0;
  for (int w = 0; w < warp; w++) before += warp_total[w];
  return before + inclusive - v;
}

/* What follows top_k, for row r: top_p over the elements with key >=
 * `floor` (what top_k kept), min_p, and the draw; returns the token, for
 * every thread. each(f) calls f(column, x) for each of this thread's
 * elements, in a fixed order: the draw walks the kept ones thread by
 * thread, each thread's in that order. `best` (the most likely token) is
 * the answer when no kept token has a weight (no finite maximum). */
template <class Each>
__device__ int64_t draw_kept(Each each, const sample_weights &w, uint32_t floor, int64_t best,
                             const cuda_sample_params &p, int64_t r) {
  __shared__ int64_t drawn;
  if (p.top_p < 1.0f) {
    uint64_t mass = 0;
    each([&](int64_t, float x) {
      if (order_key(x) >= floor) mass += w.fixed(x);
    });
    mass = block_sum_u64(mass);
    uint64_t need = (uint64_t)((double)p.top_p * (double)mass);
    if (need == 0) need = 1;
    const uint32_t k = radix_select<true>(each, w, floor, need);
    floor = k > floor ? k : floor;
  }
  const float min_weight = p.min_p > 0.0f ? p.min_p : 0.0f;
  auto kept_mass = [&](float x) -> uint64_t {
    return order_key(x) >= floor && w.weight(x) >= min_weight ? w.fixed(x) : 0;
  };
  uint64_t own = 0;
  each([&](int64_t, float x) { own += kept_mass(x); });
  const uint64_t before = block_exclusive_scan_u64(own);
  const uint64_t total = block_sum_u64(own);
  if (threadIdx.x == 0) drawn = best;
  __syncthreads();
  if (total > 0) {
    const uint64_t target = __umul64hi(total, philox_64(p.seed, p.offset, (uint64_t)r));
    if (target >= before && target < before + own) {
      uint64_t run = before;
      int64_t found = -1;
      each([&](int64_t c, float x) {
        run += kept_mass(x);
        if (found < 0 && run > target) found = c;
      });
      drawn = found;
    }
  }
  __syncthreads();
  const int64_t token = drawn;
  __syncthreads();
  return token;
}

/* Row r's token from the whole row, one block: argmax, top_k by radix
 * selection over the row, then draw_kept over the row. */
template <class T> __device__ int64_t sample_row(const cuda_sample_params &p, int64_t r) {
  const T *logits = ptr_at<const T>(p.logits, r * p.stride);
  float top;
  const int64_t best = row_argmax(logits, p.cols, p.vec, &top);
  if (!(p.temperature > 0.0f) || p.top_k == 1) return best;
  const sample_weights w = {top, 1.0f / p.temperature};
  auto each = [&](auto f) { for_row(logits, p.cols, p.vec, f); };
  uint32_t floor = 0;
  if (p.top_k > 0 && p.top_k < p.cols) floor = radix_select<false>(each, w, 0, (uint64_t)p.top_k);
  return draw_kept(each, w, floor, best, p, r);
}

template <class T> __device__ void sample_impl(const cuda_sample_params &p) {
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const int64_t token = sample_row<T>(p, r);
    if (threadIdx.x == 0) *out_at(p.out, p.out_cols, p.out_stride, r) = (int32_t)token;
  }
}

GK_FLOAT_KERNELS(sample, sample_impl, cuda_sample_params, __launch_bounds__(GK_SAMPLE_THREADS))

/* ------------------------------------------------------ sample, top_k path */

/* For 1 < top_k <= GK_SAMPLE_TOPK_MAX (and temperature > 0) two kernels
 * share a row: sample_topk_chunks cuts it into chunks of GK_SAMPLE_CHUNK
 * logits, one block each, and keeps each chunk's top_k as candidates;
 * sample_topk_draw, one block a row, finds the row's top_k threshold among
 * the candidates (the union of every chunk's top_k holds the row's) and
 * runs top_p, min_p and the draw over them: the same tokens are kept as by
 * the whole-row kernel, with the same sums; only the order the draw walks
 * them in differs. Every step writes or reads in a fixed order, so the
 * token is the same on every run. */

static_assert(GK_SAMPLE_CHUNK == 8 * GK_SAMPLE_THREADS && GK_SAMPLE_THREADS == 256,
              "sample_topk_chunks: eight logits a thread, one histogram bin a thread");

/* A candidate: a logit and its column; column -1 fills a chunk's unused slots. */
struct sample_candidate {
  float value;
  int32_t column;
};

/* Row r's candidates: chunk c's top_k slots at ((r - row_begin) * chunks +
 * c) * top_k. A chunk's candidates are its logits with key > Kc (its top_k
 * threshold) in thread order, then those with key == Kc until top_k are
 * there; tie_keys holds Kc for a chunk that left some of them out, else 0
 * (no number's key: sample_topk_draw never takes it for its threshold). */
template <class T> __device__ void sample_topk_chunks_impl(const cuda_sample_params &p) {
  const int64_t r = p.row_begin + blockIdx.y, first = (int64_t)blockIdx.x * GK_SAMPLE_CHUNK;
  const T *logits = ptr_at<const T>(p.logits, r * p.stride);
  const uint32_t k = (uint32_t)p.top_k;
  /* Eight logits a thread, in registers: columns first + 8 * thread + j
   * (one or two 16-byte loads) when p.vec, else first + thread + 256 * j. */
  auto column = [&](int j) -> int64_t {
    return p.vec ? first + 8 * threadIdx.x + j : first + threadIdx.x + j * GK_SAMPLE_THREADS;
  };
  float x[8] = {0};
  uint32_t key[8], valid = 0;
  if (p.vec) {
    if (column(0) < p.cols) {
      load8(logits + column(0), x);
      valid = 0xffu;
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; j++)
      if (column(j) < p.cols) {
        x[j] = load1(logits + column(j));
        valid |= 1u << j;
      }
  }
#pragma unroll
  for (int j = 0; j < 8; j++) key[j] = order_key(x[j]);

  /* Kc; a chunk of top_k logits or fewer gets 0 and keeps them all. */
  const uint32_t kc = count_select(
      8,
      [&](int j, uint32_t *out_key) {
        *out_key = key[j];
        return (valid >> j & 1u) != 0;
      },
      k);

  /* Slots by a block scan of (greater, equal) counts in thread order. */
  uint64_t counts = 0;
#pragma unroll
  for (int j = 0; j < 8; j++)
    if (valid >> j & 1u) counts += key[j] > kc ? 1ull << 32 : key[j] == kc ? 1ull : 0ull;
  const uint64_t before = block_exclusive_scan_u64(counts), total = block_sum_u64(counts);
  const uint32_t greater = (uint32_t)(total >> 32), found = greater + (uint32_t)total;
  const int64_t chunk = (r - p.row_begin) * p.chunks + blockIdx.x;
  sample_candidate *out = reinterpret_cast<sample_candidate *>(p.candidates) + chunk * k;
  uint32_t at_greater = (uint32_t)(before >> 32), at_equal = greater + (uint32_t)before;
#pragma unroll
  for (int j = 0; j < 8; j++)
    if (valid >> j & 1u) {
      const sample_candidate c = {x[j], (int32_t)column(j)};
      if (key[j] > kc) {
        out[at_greater++] = c;
      } else if (key[j] == kc) {
        if (at_equal < k) out[at_equal] = c;
        at_equal++;
      }
    }
  for (uint32_t i = (found < k ? found : k) + threadIdx.x; i < k; i += GK_SAMPLE_THREADS) out[i] = {0.0f, -1};
  if (threadIdx.x == 0) reinterpret_cast<uint32_t *>(p.tie_keys)[chunk] = found > k ? kc : 0u;
}

/* A token the top_k threshold kept, for draw_few; mass is its fixed-point
 * weight as top_p or the draw counts it. */
struct kept_token {
  float value;
  int32_t column;
  unsigned long long mass;
};
#define KEPT_FEW 64 /* the most kept tokens draw_few takes: two a lane */

/* The sum of a 64-bit integer over the warp, in every lane. */
__device__ __forceinline__ uint64_t warp_sum_u64(uint64_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* draw_kept for n <= KEPT_FEW kept tokens (kept[0..n), in any order), by
 * warp 0 alone with two tokens a lane: top_p's threshold is the largest key
 * K whose tokens with key >= K weigh at least `need` (as radix_select
 * finds it; a pass over the n tokens per lane instead of four radix
 * passes), and the draw walks the tokens by column, so that the token does
 * not depend on the order they were stored in. Returns the token, or -1
 * when no kept token has a weight. */
__device__ int64_t draw_few(kept_token *kept, int n, uint32_t floor, const cuda_sample_params &p, int64_t r) {
  const int lane = threadIdx.x;
  const uint64_t random = philox_64(p.seed, p.offset, (uint64_t)r); /* first: it waits on nothing */
  float x[2];
  uint32_t key[2];
  int32_t column[2];
  bool in[2];
  float top = __int_as_float(0x7fc00000);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    in[h] = lane + 32 * h < n;
    const kept_token t = in[h] ? kept[lane + 32 * h] : kept_token{0.0f, -1, 0};
    x[h] = t.value;
    column[h] = t.column;
    key[h] = order_key(x[h]);
    if (in[h]) top = fmaxf(top, x[h]); /* NaN loses */
  }
  /* The threshold is a number's key, so the largest number among the
   * candidates is kept: this is the `top` that draw_kept's callers take
   * from block_argmax (up to the sign of a zero, which no weight sees). */
  for (int o = 16; o > 0; o >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
  const sample_weights w = {top, 1.0f / p.temperature};
  uint64_t fixed[2];
#pragma unroll
  for (int h = 0; h < 2; h++) fixed[h] = in[h] ? w.fixed(x[h]) : 0;

  if (p.top_p < 1.0f) {
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (in[h]) kept[lane + 32 * h].mass = fixed[h];
    __syncwarp();
    uint64_t need = (uint64_t)((double)p.top_p * (double)warp_sum_u64(fixed[0] + fixed[1]));
    if (need == 0) need = 1;
    uint64_t at_least[2] = {0, 0}; /* the mass of the tokens with key >= key[h] */
    for (int j = 0; j < n; j++) {
      const kept_token t = kept[j];
      const uint32_t k = order_key(t.value);
#pragma unroll
      for (int h = 0; h < 2; h++) at_least[h] += k >= key[h] ? t.mass : 0;
    }
    uint32_t threshold = 0; /* none: radix_select's 0 */
#pragma unroll
    for (int h = 0; h < 2; h++)
      if (in[h] && at_least[h] >= need && key[h] > threshold) threshold = key[h];
    for (int o = 16; o > 0; o >>= 1) threshold = max(threshold, __shfl_xor_sync(0xffffffffu, threshold, o));
    floor = threshold > floor ? threshold : floor;
    __syncwarp();
  }

  const float min_weight = p.min_p > 0.0f ? p.min_p : 0.0f;
  uint64_t mass[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    mass[h] = in[h] && key[h] >= floor && w.weight(x[h]) >= min_weight ? fixed[h] : 0;
    if (in[h]) kept[lane + 32 * h].mass = mass[h];
  }
  __syncwarp();
  const uint64_t total = warp_sum_u64(mass[0] + mass[1]);
  if (total == 0) return -1;
  const uint64_t target = __umul64hi(total, random);
  uint64_t through[2] = {0, 0}; /* the mass of the tokens of column <= column[h] */
  for (int j = 0; j < n; j++) {
    const kept_token t = kept[j];
#pragma unroll
    for (int h = 0; h < 2; h++) through[h] += t.column <= column[h] ? t.mass : 0;
  }
  int32_t token = -1;
#pragma unroll
  for (int h = 0; h < 2; h++)
    if (mass[h] > 0 && through[h] - mass[h] <= target && target < through[h]) token = column[h];
  for (int o = 16; o > 0; o >>= 1) token = max(token, __shfl_xor_sync(0xffffffffu, token, o));
  return token;
}

/* Row row_begin + blockIdx.x: the row's top_k threshold K is the top_k-th
 * largest key among its candidates. The candidates hold every logit with
 * key >= K but where a chunk left out ties at K: such a chunk is read whole
 * from the row instead of its candidates (after them). A row whose K is a
 * NaN's (then its largest number may be no candidate) is sampled from the
 * whole row as sample does.
 * Up to GK_SAMPLE_DRAW_ITEMS candidates a thread are held in registers
 * through the threshold's four passes (else each pass reads them again),
 * and where K leaves at most KEPT_FEW of them and no chunk was cut, they
 * go to shared memory for draw_few; other rows take draw_kept over the
 * candidates. */
template <class T> __device__ void sample_topk_draw_impl(const cuda_sample_params &p) {
  __shared__ int kept_count;
  __shared__ kept_token kept[KEPT_FEW];
  const int64_t r = p.row_begin + blockIdx.x, slots = p.chunks * p.top_k;
  const T *logits = ptr_at<const T>(p.logits, r * p.stride);
  const sample_candidate *candidates =
      reinterpret_cast<const sample_candidate *>(p.candidates) + (r - p.row_begin) * slots;
  const uint32_t *tie_keys = reinterpret_cast<const uint32_t *>(p.tie_keys) + (r - p.row_begin) * p.chunks;
  /* Loaded now, so that the check for cut chunks waits on no load. */
  const uint32_t own_tie_key = threadIdx.x < p.chunks ? tie_keys[threadIdx.x] : 0u;
  const bool held = slots <= GK_SAMPLE_DRAW_ITEMS * (int64_t)blockDim.x;
  sample_candidate own[GK_SAMPLE_DRAW_ITEMS];
  if (threadIdx.x == 0) kept_count = 0; /* count_select's first barrier orders this */
  uint32_t floor;
  if (held) {
#pragma unroll
    for (int i = 0; i < GK_SAMPLE_DRAW_ITEMS; i++) {
      const int64_t slot = threadIdx.x + (int64_t)i * blockDim.x;
      own[i] = slot < slots ? candidates[slot] : sample_candidate{0.0f, -1};
    }
    auto get = [&](int i, uint32_t *key) {
      *key = order_key(own[i].value);
      return own[i].column >= 0;
    };
    floor = count_select(GK_SAMPLE_DRAW_ITEMS, get, (uint32_t)p.top_k);
  } else {
    auto get = [&](int i, uint32_t *key) {
      const int64_t slot = threadIdx.x + (int64_t)i * blockDim.x;
      if (slot >= slots) return false;
      const sample_candidate c = candidates[slot];
      *key = order_key(c.value);
      return c.column >= 0;
    };
    floor = count_select((int)((slots + blockDim.x - 1) / blockDim.x), get, (uint32_t)p.top_k);
  }
  int64_t token;
  if (floor < KEY_MINUS_INF || floor > KEY_PLUS_INF) {
    token = sample_row<T>(p, r);
  } else {
    int cut = threadIdx.x < p.chunks && own_tie_key == floor;
    for (int64_t c = threadIdx.x + blockDim.x; c < p.chunks; c += blockDim.x) cut |= tie_keys[c] == floor;
    if (held)
#pragma unroll
      for (int i = 0; i < GK_SAMPLE_DRAW_ITEMS; i++)
        if (own[i].column >= 0 && order_key(own[i].value) >= floor) {
          const int at = atomicAdd(&kept_count, 1);
          if (at < KEPT_FEW) kept[at] = {own[i].value, own[i].column, 0};
        }
    const bool any_cut = __syncthreads_or(cut);
    const int n = kept_count;
    if (held && !any_cut && n <= KEPT_FEW) {
      if (threadIdx.x >= 32) return;
      token = draw_few(kept, n, floor, p, r);
      /* No kept token has a weight: the most likely candidate, as below. */
      if (token < 0) {
        float best = __int_as_float(0x7fc00000);
        int64_t best_i = INT64_MAX;
        for (int64_t i = threadIdx.x; i < slots; i += 32) {
          const sample_candidate c = candidates[i];
          if (c.column >= 0 && beats(c.value, (int64_t)c.column, best, best_i)) {
            best = c.value;
            best_i = c.column;
          }
        }
        warp_argmax(&best, &best_i);
        token = best_i;
      }
    } else {
      auto each = [&](auto f) {
        for (int64_t i = threadIdx.x; i < slots; i += blockDim.x) {
          const sample_candidate c = candidates[i];
          if (c.column >= 0 && !(any_cut && tie_keys[i / p.top_k] == floor)) f((int64_t)c.column, c.value);
        }
        for (int64_t c = 0; any_cut && c < p.chunks; c++)
          if (tie_keys[c] == floor) {
            const int64_t end = (c + 1) * GK_SAMPLE_CHUNK < p.cols ? (c + 1) * GK_SAMPLE_CHUNK : p.cols;
            for (int64_t col = c * GK_SAMPLE_CHUNK + threadIdx.x; col < end; col += blockDim.x)
              f(col, load1(logits + col));
          }
      };
      float best = __int_as_float(0x7fc00000), top;
      int64_t best_i = INT64_MAX;
      each([&](int64_t c, float x) {
        if (beats(x, c, best, best_i)) {
          best = x;
          best_i = c;
        }
      });
      best_i = block_argmax(best, best_i, &top);
      token = draw_kept(each, sample_weights{top, 1.0f / p.temperature}, floor, best_i, p, r);
    }
  }
  if (threadIdx.x == 0) *out_at(p.out, p.out_cols, p.out_stride, r) = (int32_t)token;
}

GK_FLOAT_KERNELS(sample_topk_chunks, sample_topk_chunks_impl, cuda_sample_params,
                 __launch_bounds__(GK_SAMPLE_THREADS))
GK_FLOAT_KERNELS(sample_topk_draw, sample_topk_draw_impl, cuda_sample_params,
                 __launch_bounds__(GK_SAMPLE_DRAW_THREADS))
