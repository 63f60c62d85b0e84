/*
 * elementwise.cu - fill, copy/cast and the element-wise ops (add, mul,
 * mul_add, silu, gelu, add_gelu, swiglu).
 *
 * Grid: blockIdx.y walks rows, blockIdx.x and threadIdx.x walk the columns of
 * a row, eight elements (one 16-byte access for 2-byte types) per step when
 * the host says the rows are aligned for it.
 */
#include "common.cuh"

/* ---------------------------------------------------------------- math */

/* 1 / x in one MUFU instruction (rcp.approx: at most 1 ulp off). */
__device__ __forceinline__ float rcp_fast(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* gelu(x) = x Phi(x), both forms written so that no cancellation happens
 * for negative x, where Phi is a small tail that needs relative accuracy.
 * Exact (erf) form: the tail q = erfc(|x| / sqrt 2) / 2 is t 2^(-x^2
 * log2(e) / 2 + P(t)) with t = 1 / (1 + 0.6 |x| / sqrt 2) (the form of
 * Numerical Recipes' erfcc) and P a least-squares fit of degree 6 (log2(e)
 * and the halving folded in): relative error below 1.3e-6 for |x| <= 10.6,
 * 6e-6 at 12; twelve float operations and two MUFU ones, few enough that
 * the 16-bit forms stay memory-bound. Tanh form: 0.5 x (1 + tanh(u)) =
 * x / (1 + e^(-2u)). */
__device__ __forceinline__ float gelu(float x, int kind) {
  if (kind != 0) {
    const float u2_log2e = x * fmaf(1.029432396e-01f, x * x, 2.302208198e+00f); /* 2 u log2(e) */
    return __fdividef(x, 1.0f + exp2_ftz(-u2_log2e));
  }
  const float t = rcp_fast(fmaf(4.242640687e-01f, fabsf(x), 1.0f));
  float p = -2.857853010e-01f;
  p = fmaf(p, t, 1.208466814e+00f);
  p = fmaf(p, t, -1.766426520e+00f);
  p = fmaf(p, t, 6.597447063e-01f);
  p = fmaf(p, t, 2.811350349e-01f);
  p = fmaf(p, t, 1.466889947e+00f);
  p = fmaf(p, t, -2.564024854e+00f);
  const float q = t * exp2_ftz(fmaf(x * x, -0.72134752044448170f, p));
  return x * (x < 0.0f ? q : 1.0f - q);
}

struct op_fill {
  static constexpr int inputs = 0;
  static __device__ float f(float, float, float, const cuda_ew_params &p) { return p.value; }
};
struct op_add {
  static constexpr int inputs = 2;
  static __device__ float f(float a, float b, float, const cuda_ew_params &) { return a + b; }
};
struct op_mul {
  static constexpr int inputs = 2;
  static __device__ float f(float a, float b, float, const cuda_ew_params &) { return a * b; }
};
struct op_mul_add {
  static constexpr int inputs = 3;
  static __device__ float f(float a, float b, float c, const cuda_ew_params &) { return fmaf(a, b, c); }
};
struct op_silu {
  static constexpr int inputs = 1;
  static __device__ float f(float a, float, float, const cuda_ew_params &) { return silu(a); }
};
struct op_gelu {
  static constexpr int inputs = 1;
  static __device__ float f(float a, float, float, const cuda_ew_params &p) { return gelu(a, p.gelu_kind); }
};
struct op_add_gelu {
  static constexpr int inputs = 2;
  static __device__ float f(float a, float b, float, const cuda_ew_params &p) {
    return gelu(a + b, p.gelu_kind);
  }
};
struct op_swiglu {
  static constexpr int inputs = 2;
  static __device__ float f(float a, float b, float, const cuda_ew_params &) { return silu(a) * b; }
};

/* ------------------------------------------------------------ element-wise */

template <class T, class Op> __device__ void ew_rows(const cuda_ew_params &p) {
  const int64_t units = p.vec ? p.cols / 8 : p.cols;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    T *out = ptr_at<T>(p.out, r * p.out_stride);
    const T *a = ptr_at<const T>(p.a, r * p.a_stride);
    const T *b = ptr_at<const T>(p.b, r * p.b_stride);
    const T *c = ptr_at<const T>(p.c, r * p.c_stride);
    for (int64_t u = first; u < units; u += step) {
      if (p.vec) {
        float x[8], y[8] = {0}, z[8] = {0};
        if (Op::inputs >= 1) load8(a + 8 * u, x);
        if (Op::inputs >= 2) load8(b + 8 * u, y);
        if (Op::inputs >= 3) load8(c + 8 * u, z);
#pragma unroll
        for (int i = 0; i < 8; i++) x[i] = Op::f(Op::inputs >= 1 ? x[i] : 0.0f, y[i], z[i], p);
        store8(out + 8 * u, x);
      } else {
        const float x = Op::inputs >= 1 ? load1(a + u) : 0.0f;
        const float y = Op::inputs >= 2 ? load1(b + u) : 0.0f;
        const float z = Op::inputs >= 3 ? load1(c + u) : 0.0f;
        store1(out + u, Op::f(x, y, z, p));
      }
    }
  }
}

template <class T> __device__ void fill_impl(const cuda_ew_params &p) { ew_rows<T, op_fill>(p); }
template <class T> __device__ void add_impl(const cuda_ew_params &p) { ew_rows<T, op_add>(p); }
template <class T> __device__ void mul_impl(const cuda_ew_params &p) { ew_rows<T, op_mul>(p); }
template <class T> __device__ void mul_add_impl(const cuda_ew_params &p) { ew_rows<T, op_mul_add>(p); }
template <class T> __device__ void silu_impl(const cuda_ew_params &p) { ew_rows<T, op_silu>(p); }
template <class T> __device__ void gelu_impl(const cuda_ew_params &p) { ew_rows<T, op_gelu>(p); }
template <class T> __device__ void add_gelu_impl(const cuda_ew_params &p) { ew_rows<T, op_add_gelu>(p); }
template <class T> __device__ void swiglu_impl(const cuda_ew_params &p) { ew_rows<T, op_swiglu>(p); }

/* fill_f32 also fills I32 tensors: the host passes the integer's bits as
 * `value`, and a float store moves bits unchanged. */
GK_FLOAT_KERNELS(fill, fill_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(add, add_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(mul, mul_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(mul_add, mul_add_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(silu, silu_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(gelu, gelu_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(add_gelu, add_gelu_impl, cuda_ew_params, )
GK_FLOAT_KERNELS(swiglu, swiglu_impl, cuda_ew_params, )

/* ------------------------------------------------------------- copy / cast */

/* Offset of flat element e of a tensor with the given shape and strides. */
__device__ __forceinline__ int64_t nd_offset(int64_t e, const cuda_copy_params &p) {
  int64_t offset = 0;
  for (int d = p.ndim - 1; d >= 0; d--) {
    const int64_t extent = p.shape[d];
    offset += (e % extent) * p.strides[d];
    e /= extent;
  }
  return offset;
}

template <class S, class D> __device__ void copy_impl(const cuda_copy_params &p) {
  const S *src = reinterpret_cast<const S *>(p.src);
  D *out = reinterpret_cast<D *>(p.out);
  if (p.ndim > 0) {
    const int64_t n = p.rows * p.cols;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
         e += (int64_t)gridDim.x * blockDim.x) {
      store1(out + (e / p.cols) * p.out_stride + e % p.cols, load1(src + nd_offset(e, p)));
    }
    return;
  }
  const int64_t units = p.vec ? p.cols / 8 : p.cols;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  for (int64_t r = blockIdx.y; r < p.rows; r += gridDim.y) {
    const S *s = src + r * p.src_stride;
    D *o = out + r * p.out_stride;
    for (int64_t u = first; u < units; u += step) {
      if (p.vec) {
        float v[8];
        load8(s + 8 * u, v);
        store8(o + 8 * u, v);
      } else {
        store1(o + u, load1(s + u));
      }
    }
  }
}

#define GK_COPY_KERNEL(sname, S, dname, D) \
  GK_ENTRY(, gk_copy_##sname##_##dname, cuda_copy_params, copy_impl<S, D>(p))
GK_COPY_KERNEL(f32, float, f32, float)
GK_COPY_KERNEL(f32, float, f16, f16)
GK_COPY_KERNEL(f32, float, bf16, bf16)
GK_COPY_KERNEL(f16, f16, f32, float)
GK_COPY_KERNEL(f16, f16, f16, f16)
GK_COPY_KERNEL(f16, f16, bf16, bf16)
GK_COPY_KERNEL(bf16, bf16, f32, float)
GK_COPY_KERNEL(bf16, bf16, f16, f16)
GK_COPY_KERNEL(bf16, bf16, bf16, bf16)
