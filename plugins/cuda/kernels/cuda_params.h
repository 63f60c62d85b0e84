/*
 * cuda_params.h - kernel parameter blocks, shared by the host code (C11) and
 * the kernels (CUDA C++). Every kernel takes exactly one of these structs by
 * value, so the two sides agree on the layout by construction. Device
 * addresses are uint64_t; strides and sizes are in elements. The structs are
 * named cuda_*: other backends have params structs of the same roles and
 * other layouts.
 */
#ifndef GLLMK_CUDA_PARAMS_H_
#define GLLMK_CUDA_PARAMS_H_

#include <stdint.h>

/* Bits of the device error word (one per op that checks device data). */
#define GK_ERROR_EMBEDDING 1u
#define GK_ERROR_KV_APPEND 2u
#define GK_ERROR_PAGED_ATTENTION 4u
#define GK_ERROR_COLLECTIVE 8u /* an all_reduce gave up waiting for another rank */

/* Element-wise ops over rows: out = f(a, b, c). A stride of 0 broadcasts a
 * row. `vec` = 1 when cols % 8 == 0 and every row of every tensor starts on a
 * 16-byte boundary, so eight elements move as one 16-byte (or two) access. */
typedef struct cuda_ew_params {
  uint64_t out, a, b, c;
  int64_t rows, cols;
  int64_t out_stride, a_stride, b_stride, c_stride;
  float value;       /* fill */
  int32_t gelu_kind; /* gelu, add_gelu */
  int32_t vec;
  int32_t pad_;
} cuda_ew_params;

/* copy/cast: out is row-strided; src either row-strided (ndim = 0, src_stride)
 * or described by up to 8 dims of any strides (ndim > 0). */
typedef struct cuda_copy_params {
  uint64_t out, src;
  int64_t rows, cols, out_stride, src_stride;
  int64_t shape[8], strides[8];
  int32_t ndim;
  int32_t vec;
} cuda_copy_params;

/* rmsnorm, add_rmsnorm, layernorm, softmax: one row per block. */
typedef struct cuda_norm_params {
  uint64_t out, x, residual, weight, bias;
  int64_t rows, cols;
  int64_t out_stride, x_stride, residual_stride;
  float eps, scale;
  int32_t vec;
  int32_t stash_vecs; /* softmax_stash: 16-byte vectors per thread in shared memory */
} cuda_norm_params;

/* rope on rows (token, head) of head_dim elements: row (t, h) of x starts
 * at t * x_token_stride + h * x_stride (any strides: x and out may be head
 * slices of a fused q/k/v tensor, or have their leading dims permuted).
 * inv_freq: the caller's F32 frequencies [rotary_dim / 2], or 0 (theta's). */
typedef struct cuda_rope_params {
  uint64_t out, x, positions, inv_freq;
  int64_t tokens, heads, head_dim;
  int64_t out_stride, x_stride;             /* between the heads of a token */
  int64_t out_token_stride, x_token_stride; /* between tokens */
  double frequency_ratio; /* theta^(-2 / rotary_dim): pair j turns by pos * ratio^j (no inv_freq) */
  float theta;
  int32_t rotary_dim;
  int32_t style;
  int32_t vec; /* head_dim % 8 == 0, rotary_dim % 16 == 0, rows 16-byte aligned */
} cuda_rope_params;

/* An I32 index tensor read as a flat list: element i sits at
 * (i / cols) * stride + i % cols. */
typedef struct cuda_index_view {
  uint64_t data;
  int64_t cols, stride;
} cuda_index_view;

typedef struct cuda_embedding_params {
  uint64_t out, table, error_flag;
  cuda_index_view ids;
  int64_t count, dim, vocab;
  int64_t out_stride, table_stride;
  int32_t vec;
  int32_t pad_;
} cuda_embedding_params;

/* kv_append: rows (token, head) of head_dim elements; row (t, h) of k
 * starts at t * k_token_stride + h * k_stride (any strides), the caches are
 * contiguous. */
typedef struct cuda_kv_append_params {
  uint64_t k_cache, v_cache, k, v, error_flag;
  cuda_index_view slots;
  int64_t tokens, heads, head_dim;
  int64_t k_stride, v_stride, k_cache_stride, v_cache_stride; /* between heads */
  int64_t k_token_stride, v_token_stride;                     /* between tokens */
  int64_t slot_count;
  int32_t vec;
  int32_t pad_;
} cuda_kv_append_params;

/* out[z] = alpha * a[z] op(b[z]) + beta * out[z] (+ bias), z < batch. */
typedef struct cuda_matmul_params {
  uint64_t out, a, b, bias;
  int64_t m, n, k, batch;
  int64_t lda, ldb, ldo;
  int64_t a_batch_stride, b_batch_stride, out_batch_stride;
  float alpha, beta;
  int32_t b_kn; /* 1: b is [K, N]; 0: b is [N, K] */
  int32_t has_bias;
  int32_t vec; /* K (NK) or N (KN) % 8 == 0 and rows 16-byte aligned */
  int32_t a_rms; /* a_norm: a's row divided by its RMS (gemv_nk, matmul_skinny_fused) */
  float a_rms_eps;
  int32_t vec4; /* K (and N for [K, N]) % 4 == 0, a and b rows 4-element aligned */
  /* rope on the output (gemv_nk, matmul_skinny_fused): GPT-J pairs of the first
   * rope_columns columns, in heads of rope_head_dim; rope_dim 0 = none. */
  int32_t rope_dim, rope_head_dim, rope_columns;
  int32_t glu; /* silu(gate) * up of the product's halves (gemv_nk, matmul_skinny_fused); n is the product's */
  double rope_log2_ratio; /* pair j's frequency theta^(-2j / rope_dim) = 2^(-j * this) */
  uint64_t rope_positions, rope_inv_freq; /* I32 [M]; F32 [rope_dim / 2] or 0 */
  /* k and v into paged caches too (gemv_nk, matmul_skinny_fused): columns [kv_first,
   * kv_first + kv_width) to kv_k_cache's slot, the next kv_width to
   * kv_v_cache's; caches [kv_slot_count, kv_width] dense; 0 = none. */
  uint64_t kv_k_cache, kv_v_cache, kv_slots, error_flag;
  int64_t kv_slot_count;
  int32_t kv_first, kv_width;
} cuda_matmul_params;

/* matmul_skinny: a matmul of few rows (M <= 64, decode batches) split over
 * K into `splits` blocks per column tile when the tiles alone would leave
 * multiprocessors idle. Split s covers K [s * k_split, (s + 1) * k_split)
 * and writes its f32 tile to partial[(tile * splits + s) * BM * BN ...];
 * counters[tile] counts the splits done, and the last one sums the partials
 * in split order (the same bits every run), writes out and resets its
 * counter to 0 for the next launch. */
typedef struct cuda_matmul_skinny_params {
  cuda_matmul_params p;
  uint64_t partial, counters;
  int64_t k_split;
  int32_t splits;
  int32_t pad_;
} cuda_matmul_skinny_params;

/* A CUtensorMap (the Hopper tensor memory accelerator's descriptor of a
 * global tensor), opaque, 64-byte aligned. */
#ifdef __cplusplus
#define GK_ALIGN64 alignas(64)
#else
#define GK_ALIGN64 _Alignas(64)
#endif
typedef struct cuda_tensor_map {
  GK_ALIGN64 uint64_t opaque[16];
} cuda_tensor_map;

/* matmul_wgmma: a and b described as 3-D tensors (K, rows, batch) of
 * 128 x 64 and bn x 64 boxes with the 128-byte swizzle; with
 * store_by_tma (beta = 0 and out describable), out as (N, M, batch) in
 * boxes of 64 x 64, which the epilogue stores through shared memory. */
typedef struct cuda_matmul_tma_params {
  cuda_tensor_map a_map, b_map, out_map;
  cuda_matmul_params p;
  int32_t store_by_tma;
  int32_t pad_;
} cuda_matmul_tma_params;

/* matmul_skinny_wgmma (sm_90a): matmul_skinny's tiles and K splits, with b
 * (the weights) described for TMA in boxes of GK_MATMUL_SKINNY_BN rows x
 * 64 and a in boxes of bm (32 or 64) rows x 64, both (K, rows, 1) with the
 * 128-byte swizzle. */
typedef struct cuda_matmul_skinny_tma_params {
  cuda_tensor_map a_map, b_map;
  cuda_matmul_skinny_params s;
} cuda_matmul_skinny_tma_params;

/* attention and paged_attention. Rows of D elements: q and out rows are
 * (token, q head); k and v rows are (sequence position, kv head) for
 * contiguous attention and (cache slot, kv head) when paged. Tokens are
 * numbered 0..tokens-1 across the batch; a contiguous batch has q_len tokens
 * per sequence, a paged one takes them from q_starts. Every tensor has its
 * own strides (the API allows any on the leading dims): row (b, i, h) of q,
 * query i of sequence b, starts at b * q_batch_stride + i * q_token_stride
 * + h * q_stride; paged, token t's row at t * q_token_stride + h * q_stride
 * and cache slot s's at s * k_token_stride + h * k_stride. */
typedef struct cuda_attention_params {
  uint64_t out, q, k, v, lse, kv_lens;
  uint64_t block_table, q_starts, seq_lens, error_flag;
  uint64_t partial_out, partial_lse; /* split-K scratch (splits > 1) */
  int64_t q_stride, k_stride, v_stride, out_stride; /* between heads */
  int64_t q_token_stride, k_token_stride, v_token_stride, out_token_stride; /* positions / slots */
  int64_t q_batch_stride, k_batch_stride, v_batch_stride, out_batch_stride; /* sequences (not paged) */
  int64_t lse_stride, block_table_stride;
  int32_t batch, tokens, q_len, kv_len; /* q_len, kv_len: contiguous only */
  int32_t q_heads, kv_heads, head_dim;
  int32_t block_size, num_blocks, max_blocks; /* paged only */
  int32_t causal, paged;
  int32_t splits, split_keys;   /* keys [s * split_keys, (s + 1) * split_keys); paged: see keys_per_split */
  int32_t heads_per_block, tokens_per_block; /* SIMT kernel's row grouping */
  int32_t stages; /* SIMT kernel: 2 = double-buffered key/value tiles */
  int32_t vec;    /* q, k, v rows 16-byte aligned */
  float scale;
  int32_t pad_;
} cuda_attention_params;

/* attention_wgmma: q, k and v described as 4-D tensors (head dim, tokens,
 * heads, batch) read in boxes of 64 x rows with the 128-byte swizzle. */
typedef struct cuda_attention_tma_params {
  cuda_tensor_map q_map, k_map, v_map;
  cuda_attention_params p;
} cuda_attention_tma_params;

/* Combines split-K partial results of attention into out (and lse). */
typedef cuda_attention_params cuda_attention_combine_params;

/* argmax: block x takes row x, into out[x] (out is contiguous); argmax_split's block
 * (s, r) takes columns [s * span, (s + 1) * span) of row r, leaves its best
 * (value, column) in partial[r * splits + s], and the last of a row's
 * blocks to arrive (counters[r]) picks the row's. */
typedef struct cuda_argmax_params {
  uint64_t logits, out;
  int64_t rows, cols, stride;
  int64_t out_cols, out_stride;
  uint64_t partial, counters;
  int64_t span;
  int32_t splits;
  int32_t vec; /* cols % 8 == 0 and rows 16-byte aligned */
} cuda_argmax_params;

/* sample; the top_k path (sample_topk_chunks, then sample_topk_draw) takes
 * rows row_begin + blockIdx.y (.x) of `chunks` chunks of GK_SAMPLE_CHUNK
 * logits each, with top_k candidates (8 bytes) and a tie key (4 bytes) per
 * chunk in the scratch at `candidates` and `tie_keys`. */
typedef struct cuda_sample_params {
  uint64_t logits, out;
  int64_t rows, cols, stride;
  int64_t out_cols, out_stride;
  uint64_t seed, offset;
  uint64_t candidates, tie_keys;
  int64_t chunks, row_begin;
  float temperature, top_p, min_p;
  int32_t top_k;
  int32_t vec; /* cols % 8 == 0 and rows 16-byte aligned */
  int32_t pad_;
} cuda_sample_params;

/* Launch shapes the host and the kernels agree on. */
#define GK_MATMUL_MMA_BM 128
#define GK_MATMUL_MMA_BN 128
#define GK_MATMUL_MMA_THREADS 256
#define GK_MATMUL_MMA_SMEM (4 * (128 * 32 + 128 * 32) * 2)
#define GK_MATMUL_WGMMA_BM 128
#define GK_MATMUL_WGMMA_THREADS 384 /* a loader and two multiplying warpgroups */
#define GK_MATMUL_WGMMA_BK 64
/* Tiles 128 x bn (bn = 128, 256): as many stages of a and b as fit in
 * 200 KiB (6, 4), each with its two barriers, plus 1 KiB to align. */
#define GK_MATMUL_WGMMA_STAGES(bn) ((200 * 1024) / ((128 + (bn)) * 64 * 2))
#define GK_MATMUL_WGMMA_SMEM(bn) (GK_MATMUL_WGMMA_STAGES(bn) * ((128 + (bn)) * 64 * 2 + 16) + 1024)
#define GK_MATMUL_SIMT_TILE 128     /* matmul_simt: square tiles */
#define GK_MATMUL_SIMT_THREADS 256
#define GK_MATMUL_SIMT64_TILE 64    /* matmul_simt64 */
#define GK_MATMUL_SIMT64_THREADS 64
#define GK_MATMUL_SKINNY_BN 128     /* columns per block */
#define GK_MATMUL_SKINNY_THREADS 256 /* eight warps of 16 columns */
#define GK_MATMUL_SKINNY_KSTEP 128   /* K per pass of the main loop */
/* A split's partial: its tile of bm x BN f32 sums, then the bm rows' sums
 * of a's squares (a_rms). */
#define GK_MATMUL_SKINNY_SLOT_FLOATS(bm) ((bm) * (GK_MATMUL_SKINNY_BN + 1))
/* matmul_skinny_wgmma: two multiplying warpgroups and a loading warp, and
 * as many stages of b (128 x 64) and a (bm x 64) as fit in 100 KiB (5 at
 * bm = 32, 4 at 64), so that two blocks share a multiprocessor. */
#define GK_MATMUL_SKINNY_WGMMA_THREADS 288
#define GK_MATMUL_SKINNY_WGMMA_STAGES(bm) ((100 * 1024) / ((GK_MATMUL_SKINNY_BN + (bm)) * 64 * 2))
#define GK_MATMUL_SKINNY_WGMMA_SMEM(bm) \
  (GK_MATMUL_SKINNY_WGMMA_STAGES(bm) * ((GK_MATMUL_SKINNY_BN + (bm)) * 64 * 2 + 16) + 1024)
#define GK_GEMV_NK_OUTPUTS 8   /* warps per block (an output each, or a pair) */
#define GK_GEMV_KN_OUTPUTS 64
#define GK_ARRIVAL_COUNTERS 4096 /* tiles or rows that can be split at once */
#define GK_SAMPLE_THREADS 256
#define GK_SAMPLE_CHUNK 2048    /* logits per block of sample_topk_chunks, 8 a thread */
#define GK_SAMPLE_TOPK_MAX 256  /* the largest top_k of sample's top_k path */
#define GK_SAMPLE_DRAW_THREADS 512 /* sample_topk_draw, a block per row */
#define GK_SAMPLE_DRAW_ITEMS 8  /* candidates a thread of it holds in registers, when they fit */
#define GK_NORM_MAX_THREADS 512
/* softmax_stash: threads of its one block per multiprocessor, and the
 * 16-byte vectors of a row each keeps in registers. */
#define GK_SOFTMAX_STASH_THREADS 1024
#define GK_SOFTMAX_STASH_REGS 8
#define GK_ATTENTION_WARPS 4   /* SIMT attention: one query row per warp */
#define GK_ATTENTION_KEYS 32   /* keys per tile (one per lane) */
#define GK_ATTENTION_MMA_ROWS 64 /* query rows per block (16 per warp) */
/* SIMT attention: bytes between key rows in shared memory (an odd number of
 * 16-byte units, so the 32 lanes reading 32 rows hit distinct banks) and the
 * dynamic shared memory of one block. */
#define GK_ATTENTION_PITCH(d, esize) (((((d) * (esize)) / 16) | 1) * 16)
#define GK_ATTENTION_SMEM(d, esize, stages) \
  (GK_ATTENTION_WARPS * ((d) + 32) * 4 + (stages) * 2 * GK_ATTENTION_KEYS * GK_ATTENTION_PITCH(d, esize))
/* Tensor-core attention by rows: 8 query rows a block, warps of 16 keys
 * each, Q and two tiles of K and V (head dims padded to 64, 128 or 256). */
#define GK_ATTENTION_ROWS_QROWS 8
#define GK_ATTENTION_ROWS_WARPS 4
#define GK_ATTENTION_ROWS_KEYS (16 * GK_ATTENTION_ROWS_WARPS)
#define GK_ATTENTION_ROWS_SMEM(dp) ((GK_ATTENTION_ROWS_QROWS * (dp) + 4 * GK_ATTENTION_ROWS_KEYS * (dp)) * 2)
/* Tensor-core attention: head dims padded to 64, 128 or 256; keys per tile. */
#define GK_ATTENTION_MMA_KEYS(dp) ((dp) == 256 ? 32 : 64)
#define GK_ATTENTION_MMA_SMEM(dp) \
  ((GK_ATTENTION_MMA_ROWS * (dp) + 4 * GK_ATTENTION_MMA_KEYS(dp) * (dp)) * 2)
/* Hopper attention: query rows per block (two multiplying warpgroups of 64,
 * behind a loading one), keys per tile, stages of the K and V rings (more
 * were no faster on an H200); Q, the rings, 1024 bytes to align them to the
 * swizzle pattern and the barriers. */
#define GK_ATTENTION_WGMMA_ROWS 128
#define GK_ATTENTION_WGMMA_KEYS(dp) ((dp) == 256 ? 64 : 128)
#define GK_ATTENTION_WGMMA_THREADS 384
#define GK_ATTENTION_WGMMA_STAGES 2
#define GK_ATTENTION_WGMMA_SMEM(dp) \
  ((GK_ATTENTION_WGMMA_ROWS + 2 * GK_ATTENTION_WGMMA_STAGES * GK_ATTENTION_WGMMA_KEYS(dp)) * (dp) * 2 + 1024 + 128)

/* all_reduce through peer memory (collective.cu, p2p.c). Each rank has a
 * mailbox in its own memory: the flags other ranks raise,
 * [GK_P2P_MAX_RANKS sender][GK_P2P_MAX_BLOCKS block] u32, then a counter per
 * block of the calls that block has run, [GK_P2P_MAX_BLOCKS] u32, then the
 * senders' data, [2 parities][ranks sender][GK_P2P_MAX_BYTES]. A block moves
 * GK_P2P_BLOCK_BYTES of the tensor; sums of more than GK_P2P_MAX_BYTES go
 * through NCCL. A rank waits for the others at most GK_P2P_TIMEOUT_NS. */
#define GK_P2P_MAX_RANKS 16
#define GK_P2P_THREADS 512
#define GK_P2P_BLOCK_BYTES (GK_P2P_THREADS * 16)
#define GK_P2P_MAX_BLOCKS 128
#define GK_P2P_MAX_BYTES (GK_P2P_BLOCK_BYTES * GK_P2P_MAX_BLOCKS)
#define GK_P2P_HEADER_BYTES ((GK_P2P_MAX_RANKS + 1) * GK_P2P_MAX_BLOCKS * 4)
#define GK_P2P_TIMEOUT_NS 20000000000ull

/* n elements of in summed over every rank into out (out may be in). `vec`
 * = 1 when in and out start on 16 bytes and n fills whole 16-byte units. */
typedef struct cuda_all_reduce_params {
  uint64_t out, in;
  uint64_t mailboxes[GK_P2P_MAX_RANKS]; /* rank r's, mapped on every rank */
  uint64_t error_flag;
  int64_t n;
  uint32_t rank, ranks;
  int32_t vec;
  int32_t pad_;
} cuda_all_reduce_params;

#endif /* GLLMK_CUDA_PARAMS_H_ */
