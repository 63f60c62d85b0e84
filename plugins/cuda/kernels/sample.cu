/*
 * sample.cu - argmax and sample: one block per row (GK_SAMPLE_THREADS
 * threads for sample).
 *
 * sample keeps the tokens that survive top_k, then top_p (over what top_k
 * kept), then min_p (relative to the most likely token), and draws one of
 * them with probability proportional to exp((logit - max) / temperature).
 * Probabilities are summed as 40-bit fixed-point integers, so every sum is
 * exact and independent of the order of the threads: the same inputs give
 * the same token on every run.
 */
#include "common.cuh"

#define SAMPLE_WARPS (GK_SAMPLE_THREADS / 32)

/* ----------------------------------------------------------------- argmax */

/* Whether (v, i) beats (best, best_i): larger value, then lower index; NaN
 * is smaller than every number, as the cpu backend defines it (a row of NaN
 * gives 0). "Nothing yet" is (NaN, INT64_MAX), which every element beats. */
__device__ __forceinline__ bool beats(float v, int64_t i, float best, int64_t best_i) {
  if (v != v) return best != best && i < best_i;
  if (best != best) return true;
  return v > best || (v == best && i < best_i);
}

/* Index of the row's largest logit (lowest on ties), for every thread. */
template <class T> __device__ int64_t row_argmax(const T *row, int64_t cols, int vec) {
  __shared__ float best_value[32];
  __shared__ int64_t best_index[32];
  /* First a bare >: a thread's columns come in order, so that keeps the
   * lowest index of its largest number in fewer instructions than beats()
   * (H100 [128, 128256]: bf16 24.8 -> 17.8 us, f32 29.6 -> 26.4; [1, 128256]
   * 17.8 -> 11.2), but never takes NaN or -inf; a thread that found nothing
   * so looks again with beats(). */
  float best = -INFINITY;
  int64_t best_i = INT64_MAX;
  for_row(row, cols, vec, [&](int64_t c, float v) {
    if (v > best) {
      best = v;
      best_i = c;
    }
  });
  if (best_i == INT64_MAX) {
    best = __int_as_float(0x7fc00000); /* NaN: nothing yet */
    for_row(row, cols, vec, [&](int64_t c, float v) {
      if (beats(v, c, best, best_i)) {
        best = v;
        best_i = c;
      }
    });
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, best, o);
    const int64_t i = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (beats(v, i, best, best_i)) {
      best = v;
      best_i = i;
    }
  }
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
    best_i = lane < warps ? best_index[lane] : INT64_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, best, o);
      const int64_t i = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (beats(v, i, best, best_i)) {
        best = v;
        best_i = i;
      }
    }
    if (lane == 0) best_index[0] = best_i;
  }
  __syncthreads();
  return best_index[0];
}

__device__ __forceinline__ int32_t *out_at(uint64_t out, int64_t cols, int64_t stride, int64_t r) {
  return reinterpret_cast<int32_t *>(out) + (r / cols) * stride + r % cols;
}

template <class T> __device__ void argmax_impl(const cuda_argmax_params &p) {
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const int64_t best = row_argmax(ptr_at<const T>(p.logits, r * p.stride), p.cols, p.vec);
    if (threadIdx.x == 0) *out_at(p.out, p.out_cols, p.out_stride, r) = (int32_t)best;
  }
}

GK_FLOAT_KERNELS(argmax, argmax_impl, cuda_argmax_params, __launch_bounds__(1024))

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

/* An unsigned key with the order of the floats. */
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

#define FIXED_ONE 1099511627776.0f /* 2^40 */

struct sample_row {
  const void *logits;
  int64_t cols;
  int vec;
  float max, inv_temperature;

  template <class T, class F> __device__ __forceinline__ void each(F f) const {
    for_row(reinterpret_cast<const T *>(logits), cols, vec, f);
  }
  /* Unnormalised probability exp((x - max) / temperature), in [0, 1]. */
  __device__ __forceinline__ float weight(float x) const { return expf((x - max) * inv_temperature); }
  __device__ __forceinline__ uint64_t fixed(float x) const {
    return (uint64_t)__float2ull_rz(weight(x) * FIXED_ONE);
  }
};

/* Radix selection over order keys, eight bits at a time from the top: finds
 * the largest key K such that the elements with key >= K (and >= `floor`)
 * have a total `measure` of at least `need`. The measure is 1 per element
 * (top_k) or the fixed-point weight (top_p). Each warp fills its own
 * histogram, so fewer threads contend for one bin. */
template <class T, bool BY_MASS>
__device__ uint32_t radix_select(const sample_row &row, uint32_t floor, uint64_t need) {
  __shared__ unsigned long long hist[SAMPLE_WARPS][256];
  __shared__ uint32_t chosen_prefix;
  __shared__ unsigned long long chosen_need;
  const int warp = threadIdx.x >> 5;
  uint32_t prefix = 0, mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < SAMPLE_WARPS * 256; b += blockDim.x) hist[b / 256][b % 256] = 0;
    __syncthreads();
    row.each<T>([&](int64_t, float x) {
      const uint32_t key = order_key(x);
      if ((key & mask) == prefix && key >= floor)
        atomicAdd(&hist[warp][(key >> shift) & 255u], BY_MASS ? (unsigned long long)row.fixed(x) : 1ull);
    });
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
      for (int w = 1; w < SAMPLE_WARPS; w++) hist[0][b] += hist[w][b];
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long above = 0;
      int b = 255;
      for (; b > 0; b--) {
        if (above + hist[0][b] >= need) break;
        above += hist[0][b];
      }
      chosen_prefix = prefix | ((uint32_t)b << shift);
      chosen_need = need - above;
    }
    __syncthreads();
    prefix = chosen_prefix;
    need = chosen_need;
    mask |= 255u << shift;
    __syncthreads();
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

template <class T> __device__ void sample_impl(const cuda_sample_params &p) {
  __shared__ int64_t drawn;
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T *logits = ptr_at<const T>(p.logits, r * p.stride);
    int32_t *out = out_at(p.out, p.out_cols, p.out_stride, r);
    const int64_t best = row_argmax(logits, p.cols, p.vec);
    if (!(p.temperature > 0.0f) || p.top_k == 1) {
      if (threadIdx.x == 0) *out = (int32_t)best;
      continue;
    }
    const sample_row row = {logits, p.cols, p.vec, load1(logits + best), 1.0f / p.temperature};
    uint32_t floor = 0;
    if (p.top_k > 0 && p.top_k < p.cols) floor = radix_select<T, false>(row, 0, (uint64_t)p.top_k);
    if (p.top_p < 1.0f) {
      uint64_t mass = 0;
      row.each<T>([&](int64_t, float x) {
        if (order_key(x) >= floor) mass += row.fixed(x);
      });
      mass = block_sum_u64(mass);
      uint64_t need = (uint64_t)((double)p.top_p * (double)mass);
      if (need == 0) need = 1;
      const uint32_t k = radix_select<T, true>(row, floor, need);
      floor = k > floor ? k : floor;
    }
    const float min_weight = p.min_p > 0.0f ? p.min_p : 0.0f;
    /* The draw walks the kept tokens in a fixed order: thread by thread,
     * each thread's own elements in for_row's order. */
    auto kept_mass = [&](float x) -> uint64_t {
      return order_key(x) >= floor && row.weight(x) >= min_weight ? row.fixed(x) : 0;
    };
    uint64_t own = 0;
    row.each<T>([&](int64_t, float x) { own += kept_mass(x); });
    const uint64_t before = block_exclusive_scan_u64(own);
    const uint64_t total = block_sum_u64(own);
    if (threadIdx.x == 0) drawn = best;
    __syncthreads();
    if (total > 0) {
      const uint64_t target = __umul64hi(total, philox_64(p.seed, p.offset, (uint64_t)r));
      if (target >= before && target < before + own) {
        uint64_t run = before;
        int64_t found = -1;
        row.each<T>([&](int64_t c, float x) {
          run += kept_mass(x);
          if (found < 0 && run > target) found = c;
        });
        drawn = found;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) *out = (int32_t)drawn;
    __syncthreads();
  }
}

GK_FLOAT_KERNELS(sample, sample_impl, cuda_sample_params, __launch_bounds__(GK_SAMPLE_THREADS))
