/*
 * rope.cu - rope: rotary position embedding of rows (token, head), one
 * kernel for f32 rows and one with angles shared in shared memory for
 * 16-bit rows.
 */
#include "common.cuh"

/* ------------------------------------------------------------------ rope */

/* Features rotary_dim .. head_dim - 1 of token t's heads, which rope copies
 * unchanged when out is not x (the block's threads share them). */
template <class T> __device__ __forceinline__ void rope_copy_tail(const cuda_rope_params &p, int64_t t) {
  const int64_t tail = p.head_dim - p.rotary_dim;
  for (int64_t u = threadIdx.x; u < p.heads * tail; u += blockDim.x) {
    const int64_t h = u / tail, c = p.rotary_dim + u % tail;
    *ptr_at<T>(p.out, t * p.out_token_stride + h * p.out_stride + c) =
        *ptr_at<const T>(p.x, t * p.x_token_stride + h * p.x_stride + c);
  }
}

/* Rotates the pair (x0, x1) by the angle of cosine c and sine s. */
__device__ __forceinline__ void rotate_pair(float &x0, float &x1, float c, float s) {
  const float a = x0, b = x1;
  x0 = a * c - b * s;
  x1 = a * s + b * c;
}

/* A unit is what a thread turns at once: with `vec`, NeoX pairs (j, j + half)
 * for the W j's of the 16-byte vector at W g (W = 16 / sizeof(T)), or GPT-J's
 * W / 2 pairs inside the 16-byte vector at W g; else one pair, g. Threads
 * take consecutive units of a token's heads, so loads coalesce and there is
 * no shared memory and no barrier. The host makes the block a multiple of
 * the units per head: then a thread keeps one pair group g for every head
 * and token and computes its angles once per token, the frequencies
 * theta^(-2j / rotary_dim) as ratio^j (a few multiplications in double rather
 * than a pow per pair) unless the caller gave them (inv_freq). The loads go
 * out before the angles are computed. */
template <class T> __device__ void rope_impl(const cuda_rope_params &p) {
  constexpr int W = vec16<T>::elems;
  const int64_t half = p.rotary_dim / 2;
  const int pairs = !p.vec ? 1 : p.style == 0 ? W : W / 2;
  const int64_t per_head = half / pairs;
  const bool copy_tail = p.out != p.x && p.rotary_dim < p.head_dim;
  float cosine[W], sine[W];
  int64_t angle_token = -1, angle_g = -1;
  for (int64_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    const double pos = (double)reinterpret_cast<const int32_t *>(p.positions)[t];
    for (int64_t u = threadIdx.x; u < p.heads * per_head; u += blockDim.x) {
      const int64_t h = u / per_head, g = u % per_head;
      const T *x = ptr_at<const T>(p.x, t * p.x_token_stride + h * p.x_stride);
      T *out = ptr_at<T>(p.out, t * p.out_token_stride + h * p.out_stride);
      /* Element pairs (a[i], b[i]) for NeoX and single pairs; GPT-J's pair i
       * is (a[2i], a[2i + 1]). */
      const int64_t i0 = !p.vec && p.style != 0 ? 2 * g : g, i1 = !p.vec && p.style != 0 ? i0 + 1 : i0 + half;
      float a[W], b[W];
      if (p.vec) {
        load16(x + W * g, a);
        if (p.style == 0) load16(x + half + W * g, b);
      } else {
        a[0] = load1(x + i0);
        b[0] = load1(x + i1);
      }
      if (t != angle_token || g != angle_g) {
        /* Pair g * pairs + i turns by the caller's frequency of that pair,
         * or by ratio^(g pairs) (by squaring) times one more ratio per i. */
        const float *given = reinterpret_cast<const float *>(p.inv_freq);
        double frequency = 1.0, r = p.frequency_ratio;
        for (int64_t e = given ? 0 : g * pairs; e; e >>= 1, r *= r)
          if (e & 1) frequency *= r;
#pragma unroll
        for (int i = 0; i < W; i++, frequency *= p.frequency_ratio)
          if (i < pairs)
            rope_angle(pos, given ? (double)given[g * pairs + i] : frequency, cosine[i], sine[i]);
        angle_token = t;
        angle_g = g;
      }
      if (p.vec && p.style != 0) {
#pragma unroll
        for (int i = 0; i < W / 2; i++) {
          rotate_pair(a[2 * i], a[2 * i + 1], cosine[i], sine[i]);
        }
        store16(out + W * g, a);
      } else {
#pragma unroll
        for (int i = 0; i < W; i++) {
          if (i >= pairs) break;
          rotate_pair(a[i], b[i], cosine[i], sine[i]);
        }
        if (p.vec) {
          store16(out + W * g, a);
          store16(out + half + W * g, b);
        } else {
          store1(out + i0, a[0]);
          store1(out + i1, b[0]);
        }
      }
    }
    if (copy_tail) rope_copy_tail<T>(p, t);
  }
}

/* 16-bit rows: blocks walk tokens. Each block computes the pair frequencies
 * theta^(-2j / rotary_dim) (or reads the caller's) once, in double
 * precision; per token it turns the position into (cos, sin) of every pair
 * in shared memory, then rotates every head. At two bytes an element a
 * thread moves half the bytes per angle of f32, so sharing the angles over
 * the block's heads beats the barrier-free layout above (on an H100,
 * [8192, 32, 128] bf16: 51 us against 57). */
template <class T> __device__ void rope_shared_impl(const cuda_rope_params &p) {
  extern __shared__ double frequency[]; /* rotary_dim / 2 doubles, then the angles */
  const int half = p.rotary_dim / 2;
  float2 *angle = reinterpret_cast<float2 *>(frequency + half); /* (cos, sin) */
  const int64_t d = p.head_dim;
  const bool copy_tail = p.out != p.x && p.rotary_dim < d;
  const float *given = reinterpret_cast<const float *>(p.inv_freq); /* or null: theta's */
  for (int j = threadIdx.x; j < half; j += blockDim.x)
    frequency[j] = given ? (double)given[j] : pow((double)p.theta, -2.0 * j / p.rotary_dim);
  for (int64_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    const double pos = (double)reinterpret_cast<const int32_t *>(p.positions)[t];
    __syncthreads(); /* frequencies ready; the previous token is done with `angle` */
    for (int j = threadIdx.x; j < half; j += blockDim.x) {
      float s, c;
      rope_angle(pos, frequency[j], c, s);
      angle[j] = make_float2(c, s);
    }
    __syncthreads();
    /* Units: eight features per step when vectorised, one pair otherwise. */
    const int per_head = p.vec ? half / (p.style == 0 ? 8 : 4) : half;
    for (int64_t u = threadIdx.x; u < p.heads * per_head; u += blockDim.x) {
      const int64_t h = u / per_head, g = u % per_head;
      const T *x = ptr_at<const T>(p.x, t * p.x_token_stride + h * p.x_stride);
      T *out = ptr_at<T>(p.out, t * p.out_token_stride + h * p.out_stride);
      if (p.vec && p.style == 0) { /* NeoX: pairs (j, j + half), j = 8g .. 8g + 7 */
        float a[8], b[8];
        load8(x + 8 * g, a);
        load8(x + half + 8 * g, b);
#pragma unroll
        for (int i = 0; i < 8; i++) {
          const float2 cs = angle[8 * g + i];
          rotate_pair(a[i], b[i], cs.x, cs.y);
        }
        store8(out + 8 * g, a);
        store8(out + half + 8 * g, b);
      } else if (p.vec) { /* GPT-J: pairs (2j, 2j + 1), j = 4g .. 4g + 3 */
        float a[8];
        load8(x + 8 * g, a);
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const float2 cs = angle[4 * g + i];
          rotate_pair(a[2 * i], a[2 * i + 1], cs.x, cs.y);
        }
        store8(out + 8 * g, a);
      } else {
        const int64_t i0 = p.style == 0 ? g : 2 * g, i1 = p.style == 0 ? g + half : 2 * g + 1;
        const float2 cs = angle[g];
        float x0 = load1(x + i0), x1 = load1(x + i1);
        rotate_pair(x0, x1, cs.x, cs.y);
        store1(out + i0, x0);
        store1(out + i1, x1);
      }
    }
    if (copy_tail) rope_copy_tail<T>(p, t);
  }
}

/* f32 rows take the barrier-free kernel, 16-bit rows the shared-angle one. */
GK_ENTRY(, gk_rope_f32, cuda_rope_params, rope_impl<float>(p))
GK_ENTRY(, gk_rope_f16, cuda_rope_params, rope_shared_impl<f16>(p))
GK_ENTRY(, gk_rope_bf16, cuda_rope_params, rope_shared_impl<bf16>(p))
