/*
 * gk_params.h - the parameter blocks of the hsa kernels, shared by the host
 * code (C11, x86-64) and the kernels (OpenCL C, amdgcn or PoCL).
 *
 * Every kernel takes N global pointers and then one of these structs by
 * value (gk_kernels.def says which). The layouts must be identical on both
 * sides, so each struct holds 8-byte fields first, then 4-byte fields, and
 * pads its size to a multiple of 8; the host asserts the sizes and the
 * code-object test checks them against the compiled kernels' metadata.
 *
 * Offsets (`*_off`) are in bytes from the pointer passed for that tensor;
 * strides and sizes are in elements.
 */
#ifndef GK_PARAMS_H_
#define GK_PARAMS_H_

#if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__) || defined(GK_OPENCL_SOURCE)
typedef long gk_i64;
typedef ulong gk_u64;
typedef int gk_i32;
typedef uint gk_u32;
typedef float gk_f32;
typedef double gk_f64;
#else
#include <stdint.h>
typedef int64_t gk_i64;
typedef uint64_t gk_u64;
typedef int32_t gk_i32;
typedef uint32_t gk_u32;
typedef float gk_f32;
typedef double gk_f64;
#endif

/* Dtype codes, equal to gllmk_dtype. */
#define GK_F32 0
#define GK_F16 1
#define GK_BF16 2
#define GK_I32 3

/* Work-group sizes (work-items), one per kernel family. */
#define GK_WG_ELEMENTWISE 256
#define GK_WG_ROW 256 /* one work-group reduces one row */
#define GK_WG_ROPE 64
#define GK_WG_MATMUL 256
#define GK_WG_ATTENTION 64

/* Matmul tiling: a GK_TILE_M x GK_TILE_N block of out per work-group,
 * GK_TILE_K deep steps through K; each work-item owns 4 x 4 outputs. */
#define GK_TILE_M 64
#define GK_TILE_N 64
#define GK_TILE_K 16
/* The GEMV kernel: GK_GEMV_N columns of out per work-group. */
#define GK_GEMV_N 16

/* The device error word and what the kernels store after it (see
 * gk_raise() in gk_common.h); the host reads it at synchronize. */
#define GK_ERROR_EMBEDDING_ID 1
#define GK_ERROR_KV_SLOT 2
#define GK_ERROR_PAGED_TABLE 3 /* a block table entry outside the cache */
#define GK_ERROR_PAGED_SEQUENCE 4 /* q_starts / seq_lens that do not fit */
#define GK_ERROR_KV_LENS 5
#define GK_ERROR_WORDS 8 /* code, index lo/hi, value lo/hi, limit lo/hi, unused */

/* mem_copy / mem_fill on raw bytes. */
typedef struct gk_bytes_params {
  gk_i64 dst_off, src_off, size;
  gk_u32 value; /* fill byte */
  gk_u32 pad;
} gk_bytes_params;

/* copy: any strides on both sides, up to 8 dims, dtypes chosen at run time.
 * The last dim sits in slot 7 and the leading ndim - 1 dims in slots 0..,
 * so the kernel indexes the arrays only by constants. */
typedef struct gk_copy_params {
  gk_i64 shape[8];
  gk_i64 dst_strides[8];
  gk_i64 src_strides[8];
  gk_i64 dst_off, src_off;
  gk_i32 ndim, dst_dtype, src_dtype, pad;
} gk_copy_params;

/* fill: rows of `cols` elements of `elem_size` bytes set to `bits`. */
typedef struct gk_fill_params {
  gk_i64 rows, cols, row_stride, off;
  gk_u32 bits;
  gk_i32 elem_size;
} gk_fill_params;

/* Elementwise ops over rows: tensor 0 is out, 1..3 the inputs in the
 * order of the op's args; a row stride of 0 broadcasts a 1-D input. */
typedef struct gk_eltwise_params {
  gk_i64 rows, cols;
  gk_i64 off[4];
  gk_i64 row_stride[4];
  gk_i32 kind; /* gllmk_gelu_kind */
  gk_i32 pad;
} gk_eltwise_params;

/* Row reductions (norms, softmax): tensors in the op's argument order,
 * weight and bias with row stride 0. */
typedef struct gk_norm_params {
  gk_i64 rows, cols;
  gk_i64 off[5];
  gk_i64 row_stride[5];
  gk_f32 eps, scale;
  gk_i32 has_bias, pad;
} gk_norm_params;

/* has_inv_freq: pair j's frequency is inv_freq[j] (F32, dense) rather
 * than theta^(-2j / rotary_dim). */
typedef struct gk_rope_params {
  gk_i64 tokens, heads, head_dim;
  gk_i64 out_off, x_off, pos_off, inv_freq_off;
  gk_i64 out_stride_t, out_stride_h, x_stride_t, x_stride_h, pos_stride;
  gk_f64 log2_theta; /* computed on the host in double */
  gk_i32 rotary_dim, style, has_inv_freq, pad;
} gk_rope_params;

typedef struct gk_embedding_params {
  gk_i64 count, dim, vocab;
  gk_i64 out_off, table_off, ids_off;
  gk_i64 out_row_stride, table_row_stride;
} gk_embedding_params;

typedef struct gk_kv_append_params {
  gk_i64 tokens, heads, head_dim, slots_total;
  gk_i64 k_cache_off, v_cache_off, k_off, v_off, slots_off;
  gk_i64 k_stride_t, k_stride_h, v_stride_t, v_stride_h;
} gk_kv_append_params;

/* out [batch, m, n] = alpha a [batch, m, k] op(b) + beta out + bias. Row
 * strides (`*_rs`) and batch strides (`*_bs`, 0 when b is shared). */
typedef struct gk_matmul_params {
  gk_i64 batch, m, n, k;
  gk_i64 out_off, a_off, b_off, bias_off;
  gk_i64 out_rs, a_rs, b_rs;
  gk_i64 out_bs, a_bs, b_bs;
  gk_f32 alpha, beta;
  gk_i32 b_layout, has_bias;
} gk_matmul_params;

/* Strides of q/k/v/out as [batch, seq, head] (d has stride 1). */
typedef struct gk_attention_params {
  gk_i64 batch, sq, skv, hq, hkv, d;
  gk_i64 out_off, q_off, k_off, v_off, kv_lens_off, lse_off;
  gk_i64 out_strides[3], q_strides[3], k_strides[3], v_strides[3];
  gk_f32 scale;
  gk_i32 causal, has_kv_lens, has_lse;
} gk_attention_params;

/* q and out [tokens, hq, d] with strides [token, head]; caches, block table,
 * q_starts and seq_lens contiguous. */
typedef struct gk_paged_params {
  gk_i64 tokens, seqs, hq, hkv, d, blocks, block_size, max_blocks;
  gk_i64 out_off, q_off, k_cache_off, v_cache_off, table_off, q_starts_off, seq_lens_off;
  gk_i64 out_strides[2], q_strides[2];
  gk_f32 scale;
  gk_i32 pad;
} gk_paged_params;

/* argmax and sample: logits rows, one I32 token per row into out. */
typedef struct gk_token_params {
  gk_i64 rows, cols, logits_row_stride;
  gk_i64 out_off, logits_off;
  gk_u64 seed, offset;
  gk_f32 temperature, top_p, min_p;
  gk_i32 top_k;
} gk_token_params;

#endif /* GK_PARAMS_H_ */
