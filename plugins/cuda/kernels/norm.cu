/*
 * norm.cu - rmsnorm, add_rmsnorm, layernorm and softmax: one block per row
 * (softmax of rows longer than that: one block per multiprocessor, below).
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
__device__ __forceinline__ bool row_cached(const cuda_norm_params &p) {
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

template <class T> __device__ void rmsnorm_impl(const cuda_norm_params &p) {
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
template <class T> __device__ void add_rmsnorm_impl(const cuda_norm_params &p) {
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

template <class T> __device__ void layernorm_impl(const cuda_norm_params &p) {
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

/* Running (max, sum of 2^(t - max)) of values t in log2 units, taken a
 * vector at a time: one comparison per element and one 2^x, rather than
 * a branch per element. */
struct softmax_log2_state {
  float m = -INFINITY, s = 0.0f;
  template <int N> __device__ __forceinline__ void add(const float (&t)[N]) {
    float top = t[0];
#pragma unroll
    for (int e = 1; e < N; e++) top = fmaxf(top, t[e]);
    if (top == -INFINITY) return; /* adds nothing; keeps -inf - -inf out */
    if (top > m) {
      s *= exp2_ftz(m - top);
      m = top;
    }
#pragma unroll
    for (int e = 0; e < N; e++) s += exp2_ftz(t[e] - m);
  }
};

/* softmax(scale * x): one pass for the running max and sum, one to write;
 * exponentials in log2 units as in softmax_stash_impl. */
template <class T> __device__ void softmax_impl(const cuda_norm_params &p) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T *x = ptr_at<const T>(p.x, r * p.x_stride);
  T *out = ptr_at<T>(p.out, r * p.out_stride);
  const float to_log2 = p.scale * 1.4426950408889634f; /* scale * log2(e) */
  softmax_log2_state st;
  auto add = [&](int64_t, float v) {
    const float t[1] = {v * to_log2};
    st.add(t);
  };
  const bool cached = row_cached(p);
  cached_row c;
  if (cached) {
    cache_load(c, x, p.cols);
    cache_each(c, p.cols, add);
  } else {
    for_row<2>(x, p.cols, p.vec, add);
  }
  const float row_max = block_max(st.m, scratch);
  const float s = st.m == -INFINITY ? 0.0f : st.s * exp2_ftz(st.m - row_max);
  const float inv = 1.0f / block_sum(s, scratch);
  if (cached)
    cache_store(c, out, (const T *)nullptr, (const T *)nullptr, p.cols,
                [&](float v, float, float) { return exp2_ftz(v * to_log2 - row_max) * inv; });
  else
    map_row(out, x, p.cols, p.vec, [&](int64_t, float v) { return exp2_ftz(v * to_log2 - row_max) * inv; });
}


/* softmax(scale * x) of rows longer than one block keeps in registers: one
 * block per multiprocessor, looping over rows. Thread t takes the row's
 * 16-byte vectors t, t + T, t + 2T, ...: the first GK_SOFTMAX_STASH_REGS stay
 * in registers, the next p.stash_vecs are copied into shared memory with
 * cp.async, and the rest are read twice, the second time newest first so that
 * it hits L2. What stays on chip is read from DRAM once; the rest too as long
 * as it fits in L2 for every row in flight (one per multiprocessor). Unlike
 * several blocks per row, one block per row keeps the work in one wave when
 * there are about as many rows as multiprocessors ([131, 128256] f32 on an
 * H100: 352 KiB of each 501 KiB row on chip). The exponentials are
 * ex2.approx of values scaled to log2 units by one multiply (two MUFU
 * operations per element in all): with expf the arithmetic, not memory, was
 * the limit. */
template <class T> __device__ void softmax_stash_impl(const cuda_norm_params &p) {
  constexpr int per_vec = vec16<T>::elems, regs = GK_SOFTMAX_STASH_REGS, batch = 2;
  extern __shared__ uint4 stash[];
  __shared__ float scratch[32];
  const int threads = (int)blockDim.x;
  const int vecs = (int)(p.cols / per_vec); /* the host checks that it fits */
  const int per_thread = (vecs + threads - 1) / threads;
  const int on_chip = min(per_thread, regs + p.stash_vecs);
  const float to_log2 = p.scale * 1.4426950408889634f; /* scale * log2(e) */
  /* The thread's k-th vector of the row, and its slot in shared memory. */
  auto index = [&](int k) { return (int)threadIdx.x + k * threads; };
  auto slot = [&](int k) -> uint4 & { return stash[(k - regs) * threads + threadIdx.x]; };
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const uint4 *x = reinterpret_cast<const uint4 *>(ptr_at<const T>(p.x, r * p.x_stride));
    uint4 *out = reinterpret_cast<uint4 *>(ptr_at<T>(p.out, r * p.out_stride));
    uint4 held[regs];
#pragma unroll
    for (int k = 0; k < regs; k++)
      if (index(k) < vecs) held[k] = __ldcs(x + index(k));
    for (int k = regs; k < on_chip; k++)
      if (index(k) < vecs) cp_async16(&slot(k), x + index(k), 16);
    cp_async_commit();
    softmax_log2_state st;
    auto add = [&](uint4 u) {
      float t[per_vec];
      unpack16((T *)nullptr, u, t);
#pragma unroll
      for (int e = 0; e < per_vec; e++) t[e] *= to_log2;
      st.add(t);
    };
    /* In the order the data arrive: registers, the streamed part (`batch`
     * loads in flight; a vector past the row's end loads the row's last one
     * instead and is not counted), shared memory. */
#pragma unroll
    for (int k = 0; k < regs; k++)
      if (index(k) < vecs) add(held[k]);
    for (int k = on_chip; k < per_thread; k += batch) {
      uint4 u[batch];
#pragma unroll
      for (int b = 0; b < batch; b++) u[b] = __ldcg(x + min(index(k + b), vecs - 1));
#pragma unroll
      for (int b = 0; b < batch; b++)
        if (k + b < per_thread && index(k + b) < vecs) add(u[b]);
    }
    cp_async_wait<0>();
    for (int k = regs; k < on_chip; k++)
      if (index(k) < vecs) add(slot(k));

    const float row_max = block_max(st.m, scratch);
    const float s = st.m == -INFINITY ? 0.0f : st.s * exp2_ftz(st.m - row_max);
    const float inv = 1.0f / block_sum(s, scratch);
    auto result = [&](uint4 u) {
      float v[per_vec];
      unpack16((T *)nullptr, u, v);
#pragma unroll
      for (int e = 0; e < per_vec; e++) v[e] = exp2_ftz(fmaf(v[e], to_log2, -row_max)) * inv;
      return pack16((T *)nullptr, v);
    };
    /* The streamed part again first, newest first (its loads wait on L2,
     * so they go out before the stores from chip rather than after them: on
     * an H100 [131, 128256] f32 took 54 us that way against 59); a batch of
     * loads goes out before its stores, which may alias them (in place). */
    for (int k = per_thread - 1; k >= on_chip; k -= batch) {
      uint4 u[batch];
#pragma unroll
      for (int b = 0; b < batch; b++) u[b] = __ldcs(x + min(index(max(k - b, on_chip)), vecs - 1));
#pragma unroll
      for (int b = 0; b < batch; b++)
        if (k - b >= on_chip && index(k - b) < vecs) __stcs(out + index(k - b), result(u[b]));
    }
#pragma unroll
    for (int k = 0; k < regs; k++)
      if (index(k) < vecs) __stcs(out + index(k), result(held[k]));
    for (int k = regs; k < on_chip; k++)
      if (index(k) < vecs) __stcs(out + index(k), result(slot(k)));
  }
}

GK_FLOAT_KERNELS(rmsnorm, rmsnorm_impl, cuda_norm_params, __launch_bounds__(512))
GK_FLOAT_KERNELS(add_rmsnorm, add_rmsnorm_impl, cuda_norm_params, __launch_bounds__(512))
GK_FLOAT_KERNELS(layernorm, layernorm_impl, cuda_norm_params, __launch_bounds__(512))
GK_FLOAT_KERNELS(softmax, softmax_impl, cuda_norm_params, __launch_bounds__(1024))
GK_FLOAT_KERNELS(softmax_stash, softmax_stash_impl, cuda_norm_params, __launch_bounds__(GK_SOFTMAX_STASH_THREADS, 1))
