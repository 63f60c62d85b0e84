/*
 * attention.c - the attention family: attention (contiguous [B, S, H, D],
 * optional causal mask, kv_lens and lse) and paged_attention (a paged KV
 * cache through block tables). Each op fills a cuda_attention_params
 * (kernels/cuda_params.h) and picks a kernel from kernels/attention.cu:
 * wgmma (Hopper) or mma.sync (sm_80+) prefill, else by rows (tensor cores or
 * SIMT) with long key ranges split across blocks and merged by
 * attention_combine, then enqueues it on the context's stream; it also
 * answers cuda_attention_supports and cuda_paged_attention_supports (a head
 * dim or grid past the device's limits). From below it uses launch.h's
 * helpers, cuda_launch and cuda_scratch (device.c).
 */
#include <string.h>

#include "launch.h"

/* Splits of a paged attention's keys at most (each row's combine reads them all). */
#define CUDA_PAGED_SPLITS 32

/* Kernels are picked as CK_<kernel>_f32 + variant(dtype), and
 * CK_attention_<rows|mma|wgmma>_f16_d64 + (dtype == GLLMK_BF16) + 2 * i for
 * head dims padded to 64 << i. */
_Static_assert(CUDA_DTYPE_VARIANTS(attention_simt) && CUDA_DTYPE_VARIANTS(attention_combine),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");
_Static_assert(CUDA_F16_BF16_PAIRS(attention_rows, d64, d128) && CUDA_F16_BF16_PAIRS(attention_rows, d128, d256),
               "kernels.def: attention_rows order");
_Static_assert(CUDA_F16_BF16_PAIRS(attention_mma, d64, d128) && CUDA_F16_BF16_PAIRS(attention_mma, d128, d256),
               "kernels.def: attention_mma order");
_Static_assert(CUDA_F16_BF16_PAIRS(attention_wgmma, d64, d128) && CUDA_F16_BF16_PAIRS(attention_wgmma, d128, d256),
               "kernels.def: attention_wgmma order");

/* Of 1 .. max_splits splits of `blocks` blocks, the fewest whose waves of
 * `slots` resident blocks are fullest (2% more fill to take more splits):
 * 512 blocks a wave of 396 leave the second wave 30% full, 384 fill one. */
static int64_t fullest_waves(int64_t blocks, int64_t slots, int64_t max_splits) {
  int64_t best = 1;
  double best_fill = 0.0;
  for (int64_t s = 1; s <= max_splits; s++) {
    const int64_t n = blocks * s;
    const double fill = (double)n / (double)(ceil_div(n, slots) * slots);
    if (fill > best_fill * 1.02) {
      best = s;
      best_fill = fill;
    }
  }
  return best;
}

/* Of 1 .. max_splits splits of `blocks` blocks (at most `slots`), the most
 * that still run as one wave of resident blocks: every block starts at once
 * and none waits for a slot, so no tail runs on a part of the device. Paged
 * decode at B = 32 (256 blocks, 396 slots on an H200) took 42.5 us unsplit
 * against 50.2 at the 3 splits fullest_waves picks (their 768 blocks fill 2
 * waves), which also pay the combine; B = 16 (128 blocks) is fastest at 3. */
static int64_t one_wave_splits(int64_t blocks, int64_t slots, int64_t max_splits) {
  const int64_t fit = slots / blocks;
  return fit < max_splits ? fit : max_splits;
}

/* Launches attention by rows: each block takes the rows (token, head) of
 * some tokens and heads of one kv head, on tensor cores for f16/bf16 on
 * sm_80+ (8 rows a block, 16 keys of each tile a warp), else on CUDA cores
 * (one row a warp). Long key
 * ranges are split across blocks when rows are few, then combined. `max_keys`
 * bounds every sequence's length. */
static gllmk_status launch_attention_rows(gllmk_plugin_device *dev, cuda_attention_params *p, int32_t dtype,
                                          int64_t max_keys) {
  const int esize = (int)gllmk_plugin_dtype_size(dtype);
  const int group = p->q_heads / p->kv_heads;
  const int dp = p->head_dim <= 64 ? 64 : p->head_dim <= 128 ? 128 : 256;
  const int tensor_cores =
      dtype != GLLMK_F32 && dev->sm >= 80 && p->vec && GK_ATTENTION_ROWS_SMEM(dp) <= dev->smem_optin;
  const int rows_per_block = tensor_cores ? GK_ATTENTION_ROWS_QROWS : GK_ATTENTION_WARPS;
  p->heads_per_block = group < rows_per_block ? group : rows_per_block;
  p->tokens_per_block = rows_per_block / p->heads_per_block;
  /* A block whose tokens span sequences walks each one's keys in turn: keep
   * one token a block when sequences are one token (decode) or short. */
  if ((p->paged && p->tokens <= p->batch) || (!p->paged && p->q_len < p->tokens_per_block))
    p->tokens_per_block = p->paged ? 1 : p->q_len;
  const int64_t gx = ceil_div(p->tokens, p->tokens_per_block);
  const int64_t gy = (int64_t)p->kv_heads * ceil_div(group, p->heads_per_block);
  int kernel, threads, tile = GK_ATTENTION_KEYS;
  int64_t smem;
  if (tensor_cores) {
    kernel = CK_attention_rows_f16_d64 + (dtype == GLLMK_BF16) + 2 * (dp == 128) + 4 * (dp == 256);
    threads = GK_ATTENTION_ROWS_WARPS * 32;
    tile = GK_ATTENTION_ROWS_KEYS;
    smem = GK_ATTENTION_ROWS_SMEM(dp);
  } else {
    kernel = CK_attention_simt_f32 + variant(dtype);
    threads = GK_ATTENTION_WARPS * 32;
    smem = GK_ATTENTION_SMEM(p->head_dim, esize, 2);
    p->stages = 2;
    if (smem > dev->smem_optin) {
      smem = GK_ATTENTION_SMEM(p->head_dim, esize, 1);
      p->stages = 1;
    }
  }
  if (smem > dev->smem_optin || gx > MAX_GRID_X || gy > MAX_GRID_YZ)
    return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: attention with head_dim %d in %s exceeds this device",
                           p->head_dim, dtype == GLLMK_F32 ? "f32" : "16-bit");
  /* Split the keys so that few rows still fill the device: at most four
   * waves of blocks, each split still a few tiles long, and of those counts
   * the fewest whose last wave is nearly full (paged attention whose blocks
   * fit one wave: the most splits that still do). Paged attention's kernels
   * share out each block's actual keys among the splits (keys_per_split),
   * so only its split count is chosen here, against the block table's
   * capacity, at most CUDA_PAGED_SPLITS (the combine's work); with blocks for
   * under a quarter of the multiprocessors (decode of one or two sequences)
   * down to one tile a split. */
  int64_t resident = (int64_t)dev->smem_per_sm / (smem + 1024);
  if (resident > 2048 / threads) resident = 2048 / threads;
  if (resident > 32) resident = 32;
  if (resident < 1) resident = 1;
  const int few_blocks = 4 * gx * gy < dev->multiprocessors;
  const int64_t min_split_keys = p->paged && few_blocks ? tile : 4 * tile;
  int64_t max_splits = ceil_div(4 * resident * dev->multiprocessors, gx * gy);
  if (max_splits > ceil_div(max_keys, min_split_keys)) max_splits = ceil_div(max_keys, min_split_keys);
  if (p->paged && max_splits > CUDA_PAGED_SPLITS) max_splits = CUDA_PAGED_SPLITS;
  const int64_t slots = resident * dev->multiprocessors;
  int64_t splits = p->paged && gx * gy <= slots ? one_wave_splits(gx * gy, slots, max_splits)
                                                 : fullest_waves(gx * gy, slots, max_splits);
  int64_t split_keys = ceil_div(ceil_div(max_keys, splits), tile) * tile;
  if (split_keys < tile) split_keys = tile;
  if (!p->paged) splits = ceil_div(max_keys, split_keys);
  if (splits < 1) splits = 1;
  if (splits > MAX_GRID_YZ) return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: attention over too many keys");
  p->splits = (int32_t)splits;
  p->split_keys = (int32_t)split_keys;
  if (splits > 1) {
    const int64_t rows = (int64_t)p->tokens * p->q_heads;
    CUdeviceptr scratch;
    const gllmk_status status = cuda_scratch(dev, (size_t)(splits * rows * (p->head_dim + 1)) * 4, &scratch);
    if (status != GLLMK_OK) return status;
    p->partial_out = scratch;
    p->partial_lse = scratch + (uint64_t)(splits * rows * p->head_dim) * 4;
  }
  gllmk_status status =
      cuda_launch(dev, kernel, (uint32_t)gx, (uint32_t)gy, (uint32_t)splits, (uint32_t)threads, (uint32_t)smem, p);
  if (status != GLLMK_OK || splits == 1) return status;
  const int64_t rows = (int64_t)p->tokens * p->q_heads;
  const int64_t combine_blocks = ceil_div(rows * (p->head_dim / 4), 128); /* a thread for 4 dims of a row */
  return cuda_launch(dev, CK_attention_combine_f32 + variant(dtype), clamp_u32(combine_blocks, MAX_GRID_X), 1, 1, 128, 0,
                     p);
}

/* attention_wgmma's TMA descriptors of q, k and v as (head dim, tokens,
 * heads, batch) in boxes of 64 x its query rows or keys per tile; 0 where
 * the driver cannot describe one (then attention_mma runs). Planning
 * (cuda_attention_supports) assumes it can: either kernel takes the call. */
static int describe_heads_for_tma(const gllmk_plugin_device *dev, cuda_attention_tma_params *tp,
                                  const cuda_attention_params *p, int32_t dtype, int dp) {
  if (dev->planning) return 1; /* the driver encodes only in a current context; nothing launches now */
  const uint32_t keys = GK_ATTENTION_WGMMA_KEYS(dp);
  const uint64_t q_dims[4] = {(uint64_t)p->head_dim, (uint64_t)p->q_len, (uint64_t)p->q_heads, (uint64_t)p->batch};
  const uint64_t kv_dims[4] = {(uint64_t)p->head_dim, (uint64_t)p->kv_len, (uint64_t)p->kv_heads, (uint64_t)p->batch};
  const uint32_t q_box[4] = {64, GK_ATTENTION_WGMMA_ROWS, 1, 1}, kv_box[4] = {64, keys, 1, 1};
  tp->p = *p;
  return describe_16bit_for_tma(&tp->q_map, dtype, p->q, 4, q_dims,
                                (const int64_t[]){p->q_token_stride, p->q_stride, p->q_batch_stride}, q_box) &&
         describe_16bit_for_tma(&tp->k_map, dtype, p->k, 4, kv_dims,
                                (const int64_t[]){p->k_token_stride, p->k_stride, p->k_batch_stride}, kv_box) &&
         describe_16bit_for_tma(&tp->v_map, dtype, p->v, 4, kv_dims,
                                (const int64_t[]){p->v_token_stride, p->v_stride, p->v_batch_stride}, kv_box);
}

static gllmk_status run_attention(gllmk_plugin_device *dev, const gllmk_attention_args *args) {
  const gllmk_tensor *q = args->q, *k = args->k, *v = args->v, *out = args->out;
  cuda_attention_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.q = cuda_tensor_address(q);
  p.k = cuda_tensor_address(k);
  p.v = cuda_tensor_address(v);
  p.kv_lens = args->kv_lens ? cuda_tensor_address(args->kv_lens) : 0;
  p.lse = args->lse ? cuda_tensor_address(args->lse) : 0;
  p.lse_stride = args->lse ? gllmk_plugin_as_rows(args->lse).row_stride : 0;
  /* [B, S, H, D], each tensor with any strides on its leading dims (head
   * slices of one fused q/k/v tensor, permuted dims, padded rows). */
  int64_t *const strides[4][3] = {{&p.q_batch_stride, &p.q_token_stride, &p.q_stride},
                                  {&p.k_batch_stride, &p.k_token_stride, &p.k_stride},
                                  {&p.v_batch_stride, &p.v_token_stride, &p.v_stride},
                                  {&p.out_batch_stride, &p.out_token_stride, &p.out_stride}};
  const gllmk_tensor *const tensors[4] = {q, k, v, out};
  p.vec = 1;
  for (int i = 0; i < 4; i++) {
    for (int32_t d = 0; d < 3; d++) *strides[i][d] = dim_stride(tensors[i], d);
    p.vec = p.vec && strides_aligned16(tensors[i], (const int64_t[]){*strides[i][0], *strides[i][1], *strides[i][2]}, 3);
  }
  p.batch = (int32_t)q->shape[0];
  p.q_len = (int32_t)q->shape[1];
  p.q_heads = (int32_t)q->shape[2];
  p.head_dim = (int32_t)q->shape[3];
  p.kv_len = (int32_t)k->shape[1];
  p.kv_heads = (int32_t)k->shape[2];
  p.tokens = p.batch * p.q_len;
  p.causal = args->causal != 0;
  p.scale = args->scale;
  const int32_t dtype = q->dtype;
  const int dp_index = p.head_dim <= 64 ? 0 : p.head_dim <= 128 ? 1 : 2;
  const int prefill = dtype != GLLMK_F32 && p.vec && p.q_len >= 16 && p.batch <= (int32_t)MAX_GRID_YZ &&
                      p.q_heads <= (int32_t)MAX_GRID_YZ;
  cuda_attention_tma_params tp;
  const int64_t q_tiles = ceil_div(p.q_len, GK_ATTENTION_WGMMA_ROWS);
  if (prefill && dev->wgmma && p.scale >= 0.0f && q_tiles <= MAX_GRID_YZ && describe_heads_for_tma(dev, &tp, &p, dtype, 64 << dp_index)) {
    const int kernel = CK_attention_wgmma_f16_d64 + (dtype == GLLMK_BF16) + 2 * dp_index;
    /* The grid's order: see attention_wgmma_impl. */
    const uint32_t gx = (uint32_t)(p.causal ? p.q_heads : q_tiles), gy = (uint32_t)(p.causal ? q_tiles : p.q_heads);
    return cuda_launch(dev, kernel, gx, gy, (uint32_t)p.batch, GK_ATTENTION_WGMMA_THREADS,
                       GK_ATTENTION_WGMMA_SMEM(64 << dp_index), &tp);
  }
  if (prefill && dev->sm >= 80) {
    const int kernel = CK_attention_mma_f16_d64 + (dtype == GLLMK_BF16) + 2 * dp_index;
    return cuda_launch(dev, kernel, (uint32_t)ceil_div(p.q_len, GK_ATTENTION_MMA_ROWS), (uint32_t)p.q_heads,
                       (uint32_t)p.batch, 128, GK_ATTENTION_MMA_SMEM(64 << dp_index), &p);
  }
  return launch_attention_rows(dev, &p, dtype, p.kv_len);
}

static gllmk_status run_paged_attention(gllmk_plugin_device *dev, const gllmk_paged_attention_args *args) {
  const gllmk_tensor *q = args->q, *kc = args->k_cache, *vc = args->v_cache, *out = args->out;
  const rows_t rk = gllmk_plugin_as_rows(kc), rv = gllmk_plugin_as_rows(vc), rt = gllmk_plugin_as_rows(args->block_table);
  cuda_attention_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.q = cuda_tensor_address(q);
  p.k = cuda_tensor_address(kc);
  p.v = cuda_tensor_address(vc);
  p.block_table = cuda_tensor_address(args->block_table);
  p.q_starts = cuda_tensor_address(args->q_starts);
  p.seq_lens = cuda_tensor_address(args->seq_lens);
  p.error_flag = dev->error_device;
  /* q and out [T, H, D] with any strides on the leading dims; the caches
   * are contiguous: slot s, head h at (s * kv_heads + h) * D. */
  p.q_token_stride = dim_stride(q, 0);
  p.q_stride = dim_stride(q, 1);
  p.out_token_stride = dim_stride(out, 0);
  p.out_stride = dim_stride(out, 1);
  p.k_stride = rk.cols;
  p.v_stride = rv.cols;
  p.k_token_stride = kc->shape[2] * rk.cols;
  p.v_token_stride = vc->shape[2] * rv.cols;
  p.block_table_stride = rt.row_stride;
  p.tokens = (int32_t)q->shape[0];
  p.q_heads = (int32_t)q->shape[1];
  p.head_dim = (int32_t)q->shape[2];
  p.num_blocks = (int32_t)kc->shape[0];
  p.block_size = (int32_t)kc->shape[1];
  p.kv_heads = (int32_t)kc->shape[2];
  p.batch = (int32_t)args->block_table->shape[0];
  p.max_blocks = (int32_t)rt.cols;
  p.causal = 1;
  p.paged = 1;
  p.scale = args->scale;
  p.vec = strides_aligned16(q, (const int64_t[]){p.q_token_stride, p.q_stride}, 2) &&
          strides_aligned16(out, (const int64_t[]){p.out_token_stride, p.out_stride}, 2) &&
          rows_aligned16(kc, p.k_stride) && rows_aligned16(vc, p.v_stride);
  return launch_attention_rows(dev, &p, q->dtype, (int64_t)p.max_blocks * p.block_size);
}

CUDA_OP_ENTRY(attention)
CUDA_OP_ENTRY(paged_attention)
CUDA_OP_SUPPORTS(attention)
CUDA_OP_SUPPORTS(paged_attention)
