/*
 * gather.cu - embedding and kv_append: ops that move rows of a tensor as an
 * index tensor says (embedding reads the table rows its ids name, kv_append
 * writes k and v rows to the cache slots its slots name).
 */
#include "common.cuh"

/* -------------------------------------------------------- row copies */

/* Moves element `c` of `heads` rows of `n` elements each from src rows to
 * dst rows (row h at h * stride), in 16-byte units when `vec` (the host
 * checked alignment and n * sizeof(T) % 16 == 0). A null src writes zeros.
 * The threads of the block share the work. */
template <class T>
__device__ __forceinline__ void copy_rows(T *dst, int64_t dst_stride, const T *src, int64_t src_stride,
                                          int64_t heads, int64_t n, int vec) {
  if (vec) {
    const int64_t units = n * (int64_t)sizeof(T) / 16;
    for (int64_t u = threadIdx.x; u < heads * units; u += blockDim.x) {
      const int64_t h = u / units, w = u % units;
      uint4 *d = reinterpret_cast<uint4 *>(dst + h * dst_stride) + w;
      *d = src ? reinterpret_cast<const uint4 *>(src + h * src_stride)[w] : make_uint4(0, 0, 0, 0);
    }
  } else {
    for (int64_t u = threadIdx.x; u < heads * n; u += blockDim.x) {
      const int64_t h = u / n, c = u % n;
      dst[h * dst_stride + c] = src ? src[h * src_stride + c] : from_f32<T>(0.0f);
    }
  }
}

/* ------------------------------------------------------------- embedding */

/* One block per id; an id outside [0, vocab) writes a row of zeros and
 * raises the embedding error bit. */
template <class T> __device__ void embedding_impl(const cuda_embedding_params &p) {
  for (int64_t i = blockIdx.x; i < p.count; i += gridDim.x) {
    const int32_t id = index_at(p.ids, i);
    const bool valid = id >= 0 && id < p.vocab;
    if (!valid && threadIdx.x == 0) raise_error(p.error_flag, GK_ERROR_EMBEDDING);
    const T *row = valid ? ptr_at<const T>(p.table, (int64_t)id * p.table_stride) : nullptr;
    copy_rows(ptr_at<T>(p.out, i * p.out_stride), 0, row, 0, 1, p.dim, p.vec);
  }
}

GK_FLOAT_KERNELS(embedding, embedding_impl, cuda_embedding_params, )

/* ------------------------------------------------------------- kv_append */

/* One block per new token: its k and v rows of every head go to the slot. A
 * negative slot is padding; a slot past the cache raises the error bit. */
template <class T> __device__ void kv_append_impl(const cuda_kv_append_params &p) {
  for (int64_t t = blockIdx.x; t < p.tokens; t += gridDim.x) {
    const int32_t slot = index_at(p.slots, t);
    if (slot < 0) continue;
    if (slot >= p.slot_count) {
      if (threadIdx.x == 0) raise_error(p.error_flag, GK_ERROR_KV_APPEND);
      continue;
    }
    const int64_t dst_row = (int64_t)slot * p.heads;
    copy_rows(ptr_at<T>(p.k_cache, dst_row * p.k_cache_stride), p.k_cache_stride,
              ptr_at<const T>(p.k, t * p.k_token_stride), p.k_stride, p.heads, p.head_dim, p.vec);
    copy_rows(ptr_at<T>(p.v_cache, dst_row * p.v_cache_stride), p.v_cache_stride,
              ptr_at<const T>(p.v, t * p.v_token_stride), p.v_stride, p.heads, p.head_dim, p.vec);
  }
}

GK_FLOAT_KERNELS(kv_append, kv_append_impl, cuda_kv_append_params, )
