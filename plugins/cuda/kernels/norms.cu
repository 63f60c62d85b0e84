/*
 * norms.cu - rmsnorm, add_rmsnorm, layernorm and softmax: one block per row
 * (softmax of long f32 rows on sm_90: one cluster of blocks per row, below).
 *
 * When the row fits (at most CACHED_UNITS 8-element units per thread, 16-byte
 * aligned) each thread keeps its part of the row in registers, so the row is
 * read from memory once and written once; few registers keep many rows in
 * flight per multiprocessor. Longer rows are streamed twice; the second pass
 * mostly hits L1/L2. Streaming loads are issued four units at a time so that
 * a block with few rows in flight still keeps the memory system busy.
 */
#include "common.cuh"

#define CACHED_UNITS 2

/* Whether this block's row fits in registers (uniform across the block). */
__device__ __forceinline__ bool row_cached(const gk_norm_params &p) {
  return p.vec && p.cols / 8 <= (int64_t)CACHED_UNITS * blockDim.x;
}

/* The thread's units of a row, in registers. */
struct cached_row {
  float v[CACHED_UNITS][8];
};

template <class T> __device__ __forceinline__ void cache_load(cached_row &r, const T *row, int64_t cols) {
#pragma unroll
  for (int i = 0; i < CACHED_UNITS; i++) {
    const int64_t u = threadIdx.x + (int64_t)i * blockDim.x;
    if (u < cols / 8) load8(row + 8 * u, r.v[i]);
  }
}

/* Calls f(column, value) for every cached element. */
template <class F> __device__ __forceinline__ void cache_each(const cached_row &r, int64_t cols, F f) {
#pragma unroll
  for (int i = 0; i < CACHED_UNITS; i++) {
    const int64_t u = threadIdx.x + (int64_t)i * blockDim.x;
    if (u < cols / 8)
#pragma unroll
      for (int e = 0; e < 8; e++) f(8 * u + e, r.v[i][e]);
  }
}

/* out = g(cached value, weight, bias) element-wise, the weight and bias
 * (either may be null) loaded 8 at a time; transforms the cache in place. */
template <class T, class G>
__device__ __forceinline__ void cache_store(cached_row &r, T *out, const T *w, const T *b, int64_t cols, G g) {
#pragma unroll
  for (int i = 0; i < CACHED_UNITS; i++) {
    const int64_t u = threadIdx.x + (int64_t)i * blockDim.x;
    if (u >= cols / 8) continue;
    float wv[8];
    if (w) {
      load8(w + 8 * u, wv);
#pragma unroll
      for (int e = 0; e < 8; e++) r.v[i][e] = g(r.v[i][e], wv[e], 0.0f);
    } else {
#pragma unroll
      for (int e = 0; e < 8; e++) r.v[i][e] = g(r.v[i][e], 1.0f, 0.0f);
    }
    if (b) {
      load8(b + 8 * u, wv);
#pragma unroll
      for (int e = 0; e < 8; e++) r.v[i][e] += wv[e];
    }
    store8(out + 8 * u, r.v[i]);
  }
}

/* Streaming: out[c] = g(c, row[c]) for every column; `out` may be `row`. */
template <class T, class G>
__device__ __forceinline__ void map_row(T *out, const T *row, int64_t cols, int vec, G g) {
  if (vec) {
    for (int64_t u = threadIdx.x; u < cols / 8; u += blockDim.x) {
      float v[8];
      load8(row + 8 * u, v);
#pragma unroll
      for (int i = 0; i < 8; i++) v[i] = g(8 * u + i, v[i]);
      store8(out + 8 * u, v);
    }
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) store1(out + c, g(c, load1(row + c)));
  }
}

template <class T> __device__ void rmsnorm_impl(const gk_norm_params &p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *x = ptr_at<const T>(p.x, r * p.x_stride);
  T *out = ptr_at<T>(p.out, r * p.out_stride);
  const T *w = ptr_at<const T>(p.weight, 0);
  float sum = 0.0f;
  if (row_cached(p)) {
    cached_row c;
    cache_load(c, x, p.cols);
    cache_each(c, p.cols, [&](int64_t, float v) { sum = fmaf(v, v, sum); });
    const float inv = 1.0f / sqrtf(block_sum(sum, scratch) / (float)p.cols + p.eps);
    cache_store(c, out, w, (const T *)nullptr, p.cols, [&](float v, float wv, float) { return v * inv * wv; });
    return;
  }
  for_row<2>(x, p.cols, p.vec, [&](int64_t, float v) { sum = fmaf(v, v, sum); });
  const float inv = 1.0f / sqrtf(block_sum(sum, scratch) / (float)p.cols + p.eps);
  map_row(out, x, p.cols, p.vec, [&](int64_t c, float v) { return v * inv * to_f32(w[c]); });
}

/* residual += x (rounded to T); out = rmsnorm(residual). */
template <class T> __device__ void add_rmsnorm_impl(const gk_norm_params &p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *x = ptr_at<const T>(p.x, r * p.x_stride);
  T *res = ptr_at<T>(p.residual, r * p.residual_stride);
  T *out = ptr_at<T>(p.out, r * p.out_stride);
  const T *w = ptr_at<const T>(p.weight, 0);
  float sum = 0.0f;
  if (row_cached(p)) {
    cached_row c, xs;
    cache_load(c, res, p.cols);
    cache_load(xs, x, p.cols);
#pragma unroll
    for (int i = 0; i < CACHED_UNITS; i++) {
      const int64_t u = threadIdx.x + (int64_t)i * blockDim.x;
      if (u >= p.cols / 8) continue;
#pragma unroll
      for (int e = 0; e < 8; e++) {
        c.v[i][e] = to_f32(from_f32<T>(c.v[i][e] + xs.v[i][e]));
        sum = fmaf(c.v[i][e], c.v[i][e], sum);
      }
      store8(res + 8 * u, c.v[i]);
    }
    const float inv = 1.0f / sqrtf(block_sum(sum, scratch) / (float)p.cols + p.eps);
    cache_store(c, out, w, (const T *)nullptr, p.cols, [&](float v, float wv, float) { return v * inv * wv; });
    return;
  }
  if (p.vec) {
    for (int64_t u = threadIdx.x; u < p.cols / 8; u += blockDim.x) {
      float a[8], b[8];
      load8(res + 8 * u, a);
      load8(x + 8 * u, b);
#pragma unroll
      for (int i = 0; i < 8; i++) {
        a[i] = to_f32(from_f32<T>(a[i] + b[i]));
        sum = fmaf(a[i], a[i], sum);
      }
      store8(res + 8 * u, a);
    }
  } else {
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      const float v = to_f32(from_f32<T>(load1(res + c) + load1(x + c)));
      sum = fmaf(v, v, sum);
      store1(res + c, v);
    }
  }
  const float inv = 1.0f / sqrtf(block_sum(sum, scratch) / (float)p.cols + p.eps);
  /* Each thread reads back only the elements it wrote itself. */
  map_row(out, res, p.cols, p.vec, [&](int64_t c, float v) { return v * inv * to_f32(w[c]); });
}

template <class T> __device__ void layernorm_impl(const gk_norm_params &p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *x = ptr_at<const T>(p.x, r * p.x_stride);
  T *out = ptr_at<T>(p.out, r * p.out_stride);
  const T *w = ptr_at<const T>(p.weight, 0);
  const T *b = p.bias ? ptr_at<const T>(p.bias, 0) : nullptr;
  float sum = 0.0f, dev = 0.0f;
  if (row_cached(p)) {
    cached_row c;
    cache_load(c, x, p.cols);
    cache_each(c, p.cols, [&](int64_t, float v) { sum += v; });
    const float mean = block_sum(sum, scratch) / (float)p.cols;
    cache_each(c, p.cols, [&](int64_t, float v) { dev = fmaf(v - mean, v - mean, dev); });
    const float inv = 1.0f / sqrtf(block_sum(dev, scratch) / (float)p.cols + p.eps);
    cache_store(c, out, w, b, p.cols, [&](float v, float wv, float) { return (v - mean) * inv * wv; });
    return;
  }
  for_row<2>(x, p.cols, p.vec, [&](int64_t, float v) { sum += v; });
  const float mean = block_sum(sum, scratch) / (float)p.cols;
  for_row<2>(x, p.cols, p.vec, [&](int64_t, float v) { dev = fmaf(v - mean, v - mean, dev); });
  const float inv = 1.0f / sqrtf(block_sum(dev, scratch) / (float)p.cols + p.eps);
  map_row(out, x, p.cols, p.vec, [&](int64_t c, float v) {
    const float y = (v - mean) * inv * to_f32(w[c]);
    return b ? y + to_f32(b[c]) : y;
  });
}

/* Running (max, sum of exp(v - max)) of one thread. */
struct softmax_state {
  float m = -INFINITY, s = 0.0f;
  __device__ __forceinline__ void add(float v) {
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else if (v != -INFINITY) {
      s += expf(v - m);
    }
  }
};

/* softmax(scale * x): one pass for the running max and sum, one to write. */
template <class T> __device__ void softmax_impl(const gk_norm_params &p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *x = ptr_at<const T>(p.x, r * p.x_stride);
  T *out = ptr_at<T>(p.out, r * p.out_stride);
  const float scale = p.scale;
  softmax_state st;
  const bool cached = row_cached(p);
  cached_row c;
  if (cached) {
    cache_load(c, x, p.cols);
    cache_each(c, p.cols, [&](int64_t, float v) { st.add(v * scale); });
  } else {
    for_row<2>(x, p.cols, p.vec, [&](int64_t, float v) { st.add(v * scale); });
  }
  const float row_max = block_max(st.m, scratch);
  const float s = st.m == -INFINITY ? 0.0f : st.s * expf(st.m - row_max);
  const float inv = 1.0f / block_sum(s, scratch);
  if (cached)
    cache_store(c, out, (const T *)nullptr, (const T *)nullptr, p.cols,
                [&](float v, float, float) { return expf(v * scale - row_max) * inv; });
  else
    map_row(out, x, p.cols, p.vec, [&](int64_t, float v) { return expf(v * scale - row_max) * inv; });
}

/* The pair of the union of two sets of values. */
__device__ __forceinline__ softmax_state merge(softmax_state a, const softmax_state &b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return a; /* both empty */
  a.s = a.s * expf(a.m - m) + b.s * expf(b.m - m);
  a.m = m;
  return a;
}
__device__ __forceinline__ softmax_state warp_merge(softmax_state v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    softmax_state other;
    other.m = __shfl_xor_sync(0xffffffffu, v.m, o);
    other.s = __shfl_xor_sync(0xffffffffu, v.s, o);
    v = merge(v, other);
  }
  return v;
}

/* softmax(scale * x) of f32 rows longer than one block's registers hold, on
 * sm_90: a cluster of CTAs shares each row, every thread holding
 * GK_SOFTMAX_THREAD_ELEMS elements of it in registers from one batch of
 * 16-byte loads, so the row is read once and written once. A thread turns its
 * values into exp(v - its max) at once; each CTA merges its threads' (max,
 * sum) into one pair in shared memory, and after a cluster barrier every warp
 * merges the cluster's pairs through distributed shared memory. Waiting for
 * the other CTAs to finish reading this CTA's pair is left until after the
 * stores. */
GK_KERNEL __launch_bounds__(GK_SOFTMAX_CLUSTER_THREADS, 2) gk_softmax_cluster_f32(const gk_norm_params p) {
#if __CUDA_ARCH__ >= 900
  constexpr int per_vec = 4, vecs = GK_SOFTMAX_THREAD_ELEMS / per_vec;
  __shared__ softmax_state warp_pair[32];
  __shared__ float2 cta_pair;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const uint32_t ctas = cluster_ctas();
  /* Column of this thread's i-th 16-byte vector: consecutive threads take
   * consecutive vectors of the CTA's part of the row. */
  const int64_t first = ((int64_t)cluster_rank() * blockDim.x * vecs + threadIdx.x) * per_vec;
  const int64_t step = (int64_t)blockDim.x * per_vec;
  for (int64_t r = cluster_index_x(); r < p.rows; r += cluster_count_x()) {
    const float *x = ptr_at<const float>(p.x, r * p.x_stride);
    float *out = ptr_at<float>(p.out, r * p.out_stride);
    float v[GK_SOFTMAX_THREAD_ELEMS], m = -INFINITY;
    /* Vectors past the row's end load its last one instead (masked below),
     * so that the loads need no branches and all go out before any use. */
#pragma unroll
    for (int i = 0; i < vecs; i++) load4(x + min(first + i * step, p.cols - per_vec), v + i * per_vec);
#pragma unroll
    for (int i = 0; i < vecs; i++) {
      float *vi = v + i * per_vec;
      const bool inside = first + i * step < p.cols;
#pragma unroll
      for (int e = 0; e < per_vec; e++) {
        vi[e] = inside ? vi[e] * p.scale : -INFINITY;
        m = fmaxf(m, vi[e]);
      }
    }
    const float shift = m == -INFINITY ? 0.0f : m; /* no -inf - -inf */
    softmax_state mine;
    mine.m = m;
#pragma unroll
    for (int k = 0; k < GK_SOFTMAX_THREAD_ELEMS; k++) {
      v[k] = expf(v[k] - shift);
      mine.s += v[k];
    }
    mine = warp_merge(mine);
    if (lane == 0) warp_pair[warp] = mine;
    __syncthreads();
    if (warp == 0) {
      softmax_state w = lane < (int)(blockDim.x >> 5) ? warp_pair[lane] : softmax_state();
      w = warp_merge(w);
      if (lane == 0) cta_pair = make_float2(w.m, w.s);
    }
    cluster_arrive();
    cluster_wait(); /* every CTA's pair is ready */
    softmax_state row;
    if ((uint32_t)lane < ctas) {
      const float2 pair = cluster_load(&cta_pair, lane);
      row.m = pair.x;
      row.s = pair.y;
    }
    row = warp_merge(row);
    cluster_arrive(); /* done with the other CTAs' pairs */
    const float factor = m == -INFINITY ? 0.0f : expf(m - row.m) / row.s;
#pragma unroll
    for (int i = 0; i < vecs; i++) {
      const int64_t c = first + i * step;
      if (c >= p.cols) continue;
      float *vi = v + i * per_vec;
#pragma unroll
      for (int e = 0; e < per_vec; e++) vi[e] *= factor;
      store16(out + c, vi);
    }
    cluster_wait(); /* the others have read this CTA's pair: it may change */
  }
#endif
}

GK_FLOAT_KERNELS(rmsnorm, rmsnorm_impl, gk_norm_params, __launch_bounds__(512))
GK_FLOAT_KERNELS(add_rmsnorm, add_rmsnorm_impl, gk_norm_params, __launch_bounds__(512))
GK_FLOAT_KERNELS(layernorm, layernorm_impl, gk_norm_params, __launch_bounds__(512))
GK_FLOAT_KERNELS(softmax, softmax_impl, gk_norm_params, __launch_bounds__(1024))
