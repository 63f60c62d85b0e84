/*
 * matmul.c - the matmul family: matmul (out = alpha * a op(b) + beta * out
 * + bias, batched, b as [N, K] or [K, N], a's rows RMS-normalized first
 * with a_norm, the output turned by a rope with rope_dim and copied into
 * paged caches with kv_k_cache, or its halves joined with glu: only
 * gemv_nk does those, cuda_matmul_supports refuses them for the other
 * kernels). It fills a cuda_matmul_params (kernels/cuda_params.h) and
 * picks a kernel from kernels/matmul.cu: gemv for one row, skinny
 * (mma.sync fed from registers) for up to 64 rows, or on Hopper from 17
 * rows skinny_wgmma (b streamed by TMA as wgmma's M), wgmma with TMA
 * descriptors on Hopper (sm_90a), mma.sync on sm_80+, SIMT otherwise, then
 * enqueues it on the context's stream. From below it uses launch.h's
 * helpers, cuda_launch (device.c) and the driver's cuTensorMapEncodeTiled
 * (`cu`, driver.c).
 */
#include <math.h>
#include <string.h>

#include "launch.h"

/* Kernels are picked as CK_<kernel>_f32 + variant(dtype),
 * CK_matmul_mma_f16_nk + (dtype == GLLMK_BF16) + 2 * b_kn, and
 * CK_matmul_wgmma_f16_n128 + (dtype == GLLMK_BF16) + 2 * (tile width 256). */
_Static_assert(CUDA_DTYPE_VARIANTS(gemv_nk) && CUDA_DTYPE_VARIANTS(gemv_nk_pairs) && CUDA_DTYPE_VARIANTS(gemv_kn) && CUDA_DTYPE_VARIANTS(matmul_simt) &&
                   CUDA_DTYPE_VARIANTS(matmul_simt64),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_mma, nk, kn), "kernels.def: matmul_mma_{f16,bf16}_{nk,kn} order");
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_wgmma, n128, n256), "kernels.def: matmul_wgmma_{f16,bf16}_n{128,256} order");
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_skinny, m1, m2) && CUDA_F16_BF16_PAIRS(matmul_skinny, m2, m4),
               "kernels.def: matmul_skinny_{f16,bf16}_m{1,2,4} order");
_Static_assert(CUDA_F16_BF16_PAIRS(matmul_skinny_wgmma, m32, m64) &&
                   CK_matmul_skinny_wgmma_fused_bf16_m32 == CK_matmul_skinny_wgmma_fused_f16_m32 + 1,
               "kernels.def: matmul_skinny_wgmma_{f16,bf16}_m{32,64}, matmul_skinny_wgmma_fused_{f16,bf16}_m32 order");
_Static_assert(CK_matmul_skinny_fused_bf16_m1 == CK_matmul_skinny_fused_f16_m1 + 1,
               "kernels.def: matmul_skinny_fused_{f16,bf16}_m1 order");

/* A TMA descriptor of a 16-bit K-major operand seen as (K, rows, batch),
 * read in boxes of `box_rows` rows x 64 columns with the 128-byte swizzle. */
static int describe_for_tma(cuda_tensor_map *map, int32_t dtype, uint64_t address, int64_t k, int64_t rows,
                            int64_t batch, int64_t row_stride, int64_t batch_stride, uint32_t box_rows) {
  const uint64_t dims[3] = {(uint64_t)k, (uint64_t)rows, (uint64_t)batch};
  const int64_t strides[2] = {row_stride, batch_stride};
  const uint32_t box[3] = {GK_MATMUL_WGMMA_BK, box_rows, 1};
  return describe_16bit_for_tma(map, dtype, address, 3, dims, strides, box);
}

/* The distance between the matrices of a batched operand: the stride of its
 * innermost batch dim with extent > 1 (the core checked that they flatten
 * into one), 0 for a single matrix. */
static int64_t matrix_batch_stride(const gllmk_tensor *t) {
  for (int32_t i = t->ndim - 3; i >= 0; i--)
    if (t->shape[i] > 1) return t->strides[i];
  return 0;
}

/* Whether the call asks for a_norm, rope, kv or glu. */
static int fuses(const cuda_matmul_params *p) { return p->a_rms || p->rope_dim || p->glu || p->kv_k_cache; }

/* Whether matmul_skinny_wgmma takes a call of matmul_skinny's (TMA
 * descriptors permitting): on Hopper, 17 to 64 rows. */
static int runs_skinny_wgmma(const gllmk_plugin_device *dev, const cuda_matmul_params *p) {
  return dev->wgmma && p->m > 16;
}

/* matmul_skinny_wgmma's TMA descriptors: a in boxes of 32 or 64 rows
 * (bm), b in boxes of a block's columns, or with glu of its gate columns
 * (the kernel loads their up columns with a second box). Whether TMA can
 * describe them. */
static int describe_skinny_for_tma(int32_t dtype, const cuda_matmul_params *p, int bm,
                                   cuda_matmul_skinny_tma_params *out_params) {
  const uint32_t b_rows = p->glu ? GK_MATMUL_SKINNY_BN / 2 : GK_MATMUL_SKINNY_BN;
  return describe_for_tma(&out_params->a_map, dtype, p->a, p->k, p->m, 1, p->lda, p->a_batch_stride, (uint32_t)bm) &&
         describe_for_tma(&out_params->b_map, dtype, p->b, p->k, p->n, 1, p->ldb, 0, b_rows);
}

static int skinny_wgmma_rows(const cuda_matmul_params *p) { return p->m <= 32 ? 32 : 64; }

/* matmul_skinny for M <= 64 rows: blocks of GK_MATMUL_SKINNY_BN columns,
 * and while those are fewer than the CUDA_SKINNY_BLOCKS_PER_SM per
 * multiprocessor that can run at once, K split among as many blocks as
 * still fit in that one wave (at least 512 of K each), so that every
 * multiprocessor streams b. One split more would start a second wave, in
 * which a few blocks run alone as long as the whole first one took (q/k/v
 * at 32 rows: 48 tiles, 6 splits were 288 blocks for 264 places). The
 * partial buffer holds twice the blocks of a wave. matmul_skinny_wgmma
 * splits K only until its tiles fill one block a multiprocessor: each of
 * its blocks keeps 80 KB of b in flight through TMA, and every split adds
 * its partial tile and the last block's sum to the kernel's end (on an
 * H200 at 32 rows, as many splits as fill two blocks a multiprocessor took
 * q/k/v 22.7 us, o 21.1 and down 41.2, one block 19.1, 15.0 and 35.3;
 * decode of 32 sequences 4700 against 5080 tok/s). Where TMA cannot
 * describe the operands, matmul_skinny runs with those splits. */
static gllmk_status launch_skinny(gllmk_plugin_device *dev, const cuda_matmul_params *p, int32_t dtype) {
  cuda_matmul_skinny_params sp;
  memset(&sp, 0, sizeof sp);
  sp.p = *p;
  sp.partial = dev->skinny_partial;
  sp.counters = dev->arrivals;
  /* with glu a block takes BN / 2 gate columns and their up columns */
  const int64_t tiles = p->glu ? ceil_div(p->n / 2, GK_MATMUL_SKINNY_BN / 2) : ceil_div(p->n, GK_MATMUL_SKINNY_BN);
  const int wgmma = runs_skinny_wgmma(dev, p);
  const int64_t wanted = (int64_t)(wgmma ? 1 : CUDA_SKINNY_BLOCKS_PER_SM) * dev->multiprocessors;
  int64_t splits = 1;
  if (tiles < wanted && tiles <= GK_ARRIVAL_COUNTERS) {
    const int64_t most = p->k / 512 > 1 ? p->k / 512 : 1;
    splits = wanted / tiles < most ? wanted / tiles : most;
  }
  sp.k_split = ceil_div(ceil_div(p->k, splits), GK_MATMUL_SKINNY_KSTEP) * GK_MATMUL_SKINNY_KSTEP;
  sp.splits = (int32_t)ceil_div(p->k, sp.k_split);
  if (wgmma) {
    cuda_matmul_skinny_tma_params tp;
    const int bm = skinny_wgmma_rows(p);
    if (describe_skinny_for_tma(dtype, p, bm, &tp)) {
      tp.s = sp;
      const int kernel = fuses(p) ? CK_matmul_skinny_wgmma_fused_f16_m32 : CK_matmul_skinny_wgmma_f16_m32 + 2 * (bm == 64);
      return cuda_launch(dev, kernel + (dtype == GLLMK_BF16), (uint32_t)tiles, (uint32_t)sp.splits, 1,
                         GK_MATMUL_SKINNY_WGMMA_THREADS, GK_MATMUL_SKINNY_WGMMA_SMEM(bm), &tp);
    }
    /* cuda_matmul_supports asked the same of TMA for fused calls */
    if (fuses(p)) return cuda_host->fail(GLLMK_ERR_BACKEND, "gllmk_matmul: cuda: TMA refused the operands");
  }
  const int rows = p->m <= 16 ? 0 : p->m <= 32 ? 1 : 2; /* 16, 32 or 64 rows */
  const int first = fuses(p) ? CK_matmul_skinny_fused_f16_m1 : CK_matmul_skinny_f16_m1; /* fused: rows 0 */
  return cuda_launch(dev, first + (dtype == GLLMK_BF16) + 2 * rows, (uint32_t)tiles, (uint32_t)sp.splits, 1,
                     GK_MATMUL_SKINNY_THREADS, 0, &sp);
}

/* The call as kernel parameters: operands, sizes and strides, batches
 * folded into rows where they can be. */
static void describe_matmul(const gllmk_matmul_args *args, cuda_matmul_params *out_params) {
  const gllmk_tensor *a = args->a, *b = args->b, *out = args->out;
  const int32_t nd = a->ndim, bd = b->ndim;
  cuda_matmul_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.a = cuda_tensor_address(a);
  p.b = cuda_tensor_address(b);
  p.bias = args->bias ? cuda_tensor_address(args->bias) : 0;
  p.has_bias = args->bias != NULL;
  p.alpha = args->alpha;
  p.beta = args->beta;
  p.b_kn = args->b_layout == GLLMK_B_KN;
  p.m = a->shape[nd - 2];
  p.k = a->shape[nd - 1];
  p.n = out->shape[nd - 1] * (args->glu ? 2 : 1); /* the product's columns */
  p.batch = 1;
  for (int32_t i = 0; i < nd - 2; i++) p.batch *= a->shape[i];
  /* Row strides (a dim of extent 1 takes the dense one: it is never
   * stepped), and each operand's own batch stride: the API lets every
   * operand have any row and batch strides (a column slice, batches of a
   * permuted tensor, a zero batch stride that repeats one matrix). */
  const int64_t b_rows = b->shape[bd - 2];
  p.lda = p.m > 1 ? a->strides[nd - 2] : p.k;
  p.ldb = b_rows > 1 ? b->strides[bd - 2] : b->shape[bd - 1];
  p.ldo = p.m > 1 ? out->strides[nd - 2] : p.n;
  p.a_batch_stride = matrix_batch_stride(a);
  p.b_batch_stride = bd > 2 ? matrix_batch_stride(b) : 0;
  p.out_batch_stride = matrix_batch_stride(out);
  if (p.m == 1 && p.batch > 1) { /* single rows: a batch's row is just its matrix */
    p.lda = p.a_batch_stride;
    p.ldo = p.out_batch_stride;
  }
  /* One b for every batch and batches laid out as rows of one taller
   * matrix: one batch of more rows. */
  if (p.batch > 1 && p.b_batch_stride == 0 && (p.m == 1 || (p.a_batch_stride == p.m * p.lda &&
                                                           p.out_batch_stride == p.m * p.ldo))) {
    p.m *= p.batch;
    p.batch = 1;
  }
  if (p.batch == 1) { /* strides a single batch never uses; sizes TMA accepts */
    p.a_batch_stride = p.m * p.lda;
    p.b_batch_stride = 0;
    p.out_batch_stride = p.m * p.ldo;
  }
  const int64_t inner = p.b_kn ? p.n : p.k; /* b's contiguous extent */
  p.vec = inner % 8 == 0 && p.k % 8 == 0 && strides_aligned16(a, (const int64_t[]){p.lda, p.a_batch_stride}, 2) &&
          strides_aligned16(b, (const int64_t[]){p.ldb, p.b_batch_stride}, 2);
  p.vec4 = inner % 4 == 0 && p.k % 4 == 0 &&
           strides_aligned(a, (const int64_t[]){p.lda, p.a_batch_stride}, 2, 4 * (int64_t)elem_size(a)) &&
           strides_aligned(b, (const int64_t[]){p.ldb, p.b_batch_stride}, 2, 4 * (int64_t)elem_size(b));
  p.a_rms = args->a_norm == GLLMK_A_NORM_RMS;
  p.a_rms_eps = args->a_norm_eps;
  p.rope_dim = args->rope_dim;
  p.rope_head_dim = args->rope_head_dim;
  p.rope_columns = args->rope_columns;
  p.rope_log2_ratio = args->rope_dim ? 2.0 * log2((double)args->rope_theta) / args->rope_dim : 0.0;
  p.rope_positions = args->rope_dim ? cuda_tensor_address(args->rope_positions) : 0;
  p.rope_inv_freq = args->rope_inv_freq ? cuda_tensor_address(args->rope_inv_freq) : 0;
  p.glu = args->glu;
  if (args->kv_k_cache) {
    const gllmk_tensor *kc = args->kv_k_cache;
    p.kv_k_cache = cuda_tensor_address(kc);
    p.kv_v_cache = cuda_tensor_address(args->kv_v_cache);
    p.kv_slots = cuda_tensor_address(args->kv_slots);
    p.kv_slot_count = kc->shape[0] * kc->shape[1];
    p.kv_first = args->kv_first;
    p.kv_width = (int32_t)(kc->shape[2] * kc->shape[3]);
  }
  *out_params = p;
}

/* matmul_simt: tiles in x, batches in y (its blocks loop over what a grid
 * this size leaves over). 128 x 128 tiles where they give every
 * multiprocessor a block, else 64 x 64 ones (on an H200, 2048^3 f32 with
 * its 256 tiles of 128: 440 us, against 490 us as 64 x 64 tiles). */
static gllmk_status launch_simt(gllmk_plugin_device *dev, cuda_matmul_params *p, int variant) {
  const int64_t tiles = ceil_div(p->m, GK_MATMUL_SIMT_TILE) * ceil_div(p->n, GK_MATMUL_SIMT_TILE);
  const uint32_t batches = clamp_u32(p->batch, MAX_GRID_YZ);
  if (tiles * batches >= (int64_t)dev->multiprocessors)
    return cuda_launch(dev, CK_matmul_simt_f32 + variant, clamp_u32(tiles, MAX_GRID_X), batches, 1,
                       GK_MATMUL_SIMT_THREADS, 0, p);
  const int64_t small = ceil_div(p->m, GK_MATMUL_SIMT64_TILE) * ceil_div(p->n, GK_MATMUL_SIMT64_TILE);
  return cuda_launch(dev, CK_matmul_simt64_f32 + variant, clamp_u32(small, MAX_GRID_X), batches, 1,
                     GK_MATMUL_SIMT64_THREADS, 0, p);
}

static int runs_gemv(const cuda_matmul_params *p) { return p->m == 1 && p->batch <= MAX_GRID_YZ; }

static int runs_skinny(const gllmk_plugin_device *dev, const cuda_matmul_params *p, int32_t dtype) {
  return dtype != GLLMK_F32 && dev->skinny_partial && !p->b_kn && p->vec && p->m <= 64 && p->batch == 1 &&
         ceil_div(p->n, GK_MATMUL_SKINNY_BN) <= MAX_GRID_X;
}

/* Only gemv_nk (one row of a), matmul_skinny_fused (up to 16 rows, f16
 * and bf16, sm_80+; kernels/matmul.cu says why not more) and
 * matmul_skinny_wgmma_fused (17 to 32 rows on Hopper, where TMA describes
 * the operands) normalize a's rows (a_norm), turn their output (rope),
 * copy k and v into caches (kv_k_cache) and join their halves (glu), with
 * b as [N, K]. At 33 to 64 rows the separate calls were faster: on an H200
 * a decode step of 64 (48) sequences took 1.3% longer fused with a 64-row
 * form of the kernel, whose q/k/v took 37-42 us alone against the plain
 * one's 27; at 20, 24 and 32 rows the fused step was 3%, 2.6% and 1.9%
 * faster (docs/performance.md). */
static int runs_fusions(const gllmk_plugin_device *dev, const cuda_matmul_params *p, int32_t dtype) {
  if (runs_gemv(p)) return !p->b_kn;
  if (p->m <= 1 || !runs_skinny(dev, p, dtype)) return 0;
  if (!runs_skinny_wgmma(dev, p)) return p->m <= 16;
  if (p->m > 32) return 0;
  cuda_matmul_skinny_tma_params tp;
  return describe_skinny_for_tma(dtype, p, skinny_wgmma_rows(p), &tp);
}

/* gemv_nk's warps: one an output; gemv_nk_pairs' (a rope, kv or glu): one
 * two adjacent outputs, or with glu a gate column and its up column
 * (kernels/matmul.cu, gemv_nk_columns). */
static int gemv_nk_paired(const cuda_matmul_params *p) { return p->rope_dim || p->glu || p->kv_k_cache; }

static int64_t gemv_nk_warps(const cuda_matmul_params *p) {
  if (p->glu) return p->n / 2;
  return gemv_nk_paired(p) ? ceil_div(p->n, 2) : p->n;
}

static gllmk_status refuse_fusion(void) {
  return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "gllmk_matmul: the cuda backend applies a_norm, rope, kv and glu "
                                                "with b as [N, K] only: to one row of a (M = 1), or, f16 and bf16 "
                                                "with 16-byte aligned rows, to up to 16 on sm_80 or newer and up "
                                                "to 32 on Hopper (sm_90)");
}

/* The wgmma kernel's tile width for a problem: 128 columns where their
 * waves over the multiprocessors take less time than those of 256-column
 * tiles (o and down at prefill batches of 512: 64 wide tiles leave half the
 * multiprocessors idle), else 256. On an H200 a 128-column tile took 0.75x
 * as long as a 256-column one (measured at M = 4096: 1.5x the time per
 * column, docs/performance.md). */
static int wgmma_tile_n(const gllmk_plugin_device *dev, const cuda_matmul_params *p) {
  const int64_t rows = ceil_div(p->m, GK_MATMUL_WGMMA_BM) * p->batch;
  const int64_t waves_256 = ceil_div(rows * ceil_div(p->n, 256), dev->multiprocessors);
  const int64_t waves_128 = ceil_div(rows * ceil_div(p->n, 128), dev->multiprocessors);
  return 3 * waves_128 < 4 * waves_256 ? 128 : 256;
}

static gllmk_status run_matmul(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  const int32_t dtype = args->out->dtype;
  cuda_matmul_params p;
  describe_matmul(args, &p);
  if (fuses(&p) && !runs_fusions(dev, &p, dtype)) return refuse_fusion();
  p.error_flag = dev->error_device;
  const int v = variant(dtype);
  if (runs_gemv(&p)) {
    if (p.b_kn)
      return cuda_launch(dev, CK_gemv_kn_f32 + v, clamp_u32(ceil_div(p.n, GK_GEMV_KN_OUTPUTS), MAX_GRID_X),
                         (uint32_t)p.batch, 1, 256, 0, &p);
    return cuda_launch(dev, (gemv_nk_paired(&p) ? CK_gemv_nk_pairs_f32 : CK_gemv_nk_f32) + v,
                       clamp_u32(ceil_div(gemv_nk_warps(&p), GK_GEMV_NK_OUTPUTS), MAX_GRID_X), (uint32_t)p.batch, 1,
                       GK_GEMV_NK_OUTPUTS * 32, 0, &p);
  }
  if (runs_skinny(dev, &p, dtype)) return launch_skinny(dev, &p, dtype);
  if (dtype != GLLMK_F32 && dev->wgmma && !p.b_kn && p.vec && p.m >= 64 && p.batch <= MAX_GRID_YZ &&
      p.lda > 0 && p.ldb > 0 && p.a_batch_stride > 0) {
    const int bn = wgmma_tile_n(dev, &p);
    cuda_matmul_tma_params tp;
    memset(&tp, 0, sizeof tp); /* out_map stays unused without store_by_tma */
    if (describe_for_tma(&tp.a_map, dtype, p.a, p.k, p.m, p.batch, p.lda, p.a_batch_stride, GK_MATMUL_WGMMA_BM) &&
        describe_for_tma(&tp.b_map, dtype, p.b, p.k, p.n, p.b_batch_stride ? p.batch : 1, p.ldb,
                         p.b_batch_stride, (uint32_t)bn)) {
      tp.p = p;
      /* The output through shared memory and TMA where nothing is read
       * back (beta = 0) and TMA can describe it (16-byte aligned rows). */
      tp.store_by_tma = p.beta == 0.0f && describe_for_tma(&tp.out_map, dtype, p.out, p.n, p.m, p.batch, p.ldo,
                                                           p.out_batch_stride, 64 /* a warpgroup's rows */);
      const int64_t tiles = ceil_div(p.m, GK_MATMUL_WGMMA_BM) * ceil_div(p.n, bn);
      const int kernel = CK_matmul_wgmma_f16_n128 + (dtype == GLLMK_BF16) + 2 * (bn == 256);
      return cuda_launch(dev, kernel, (uint32_t)tiles, (uint32_t)p.batch, 1, GK_MATMUL_WGMMA_THREADS,
                         GK_MATMUL_WGMMA_SMEM(bn), &tp);
    }
  }
  const int64_t tiles = ceil_div(p.m, GK_MATMUL_MMA_BM) * ceil_div(p.n, GK_MATMUL_MMA_BN);
  if (dtype != GLLMK_F32 && dev->sm >= 80 && p.vec && p.batch <= MAX_GRID_YZ && tiles <= MAX_GRID_X) {
    const int kernel = CK_matmul_mma_f16_nk + (dtype == GLLMK_BF16) + 2 * p.b_kn;
    return cuda_launch(dev, kernel, (uint32_t)tiles, (uint32_t)p.batch, 1, GK_MATMUL_MMA_THREADS, GK_MATMUL_MMA_SMEM,
                       &p);
  }
  return launch_simt(dev, &p, v);
}

CUDA_OP_ENTRY(matmul)

gllmk_status cuda_matmul_supports(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  cuda_matmul_params p;
  describe_matmul(args, &p);
  if (!fuses(&p)) return GLLMK_OK;
  /* runs_fusions may ask the driver to encode TMA descriptors, which wants
   * the device's context current (the core calls this from any thread) */
  gllmk_status status = cuda_enter(dev);
  if (status != GLLMK_OK) return status;
  const int runs = runs_fusions(dev, &p, args->out->dtype);
  cuda_leave(dev);
  return runs ? GLLMK_OK : refuse_fusion();
}
