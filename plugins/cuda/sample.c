/*
 * sample.c - the sampling family: argmax and sample (temperature, top_k,
 * top_p, min_p, seeded), one block a row, or for argmax of few rows several
 * blocks a row whose last merges; sample with a small top_k runs two
 * kernels, a block per chunk of a row and then one per row. Each op fills a
 * cuda_argmax_params or cuda_sample_params (kernels/cuda_params.h), picks
 * its kernels from kernels/sample.cu and their launch shapes, and enqueues
 * them on the context's stream. From below it uses launch.h's helpers,
 * cuda_launch, cuda_scratch and the arrival counters (device.c); it answers
 * cuda_argmax_supports and cuda_sample_supports, which grow the scratch
 * before a recording needs it.
 */
#include <string.h>

#include "launch.h"

/* Kernels are picked as CK_<op>_f32 + variant(dtype). */
_Static_assert(CUDA_DTYPE_VARIANTS(argmax) && CUDA_DTYPE_VARIANTS(argmax_split) && CUDA_DTYPE_VARIANTS(sample) &&
                   CUDA_DTYPE_VARIANTS(sample_topk_chunks) && CUDA_DTYPE_VARIANTS(sample_topk_draw),
               "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");

/* The most scratch the top_k path's candidates take at once: larger batches
 * run as several pairs of launches, each over as many rows as fit. */
#define SAMPLE_SCRATCH_BYTES ((int64_t)32 << 20)

/* argmax of fewer rows than half the multiprocessors splits each row over
 * blocks of ARGMAX_SPLIT_THREADS, up to ARGMAX_BLOCKS_PER_SM blocks a
 * multiprocessor in all, at least ARGMAX_MIN_SPAN columns each: one block a
 * row left most multiprocessors idle (H200, [1, 128256] f32 9.8 -> 4.7 us).
 * More rows keep a block of up to 1024 threads a row: split 4 ways, 128
 * rows took 20.3 us instead of 18.6 (f32) and 16.8 instead of 14.9 (bf16). */
#define ARGMAX_SPLIT_THREADS 256
#define ARGMAX_BLOCKS_PER_SM 4 /* what their registers let stay resident */
#define ARGMAX_MIN_SPAN 2048

static gllmk_status run_argmax(gllmk_plugin_device *dev, const gllmk_argmax_args *args) {
  const rows_t rl = gllmk_plugin_as_rows(args->logits);
  /* The kernel counts a row's columns in int32_t, as out holds them. */
  if (rl.cols > INT32_MAX)
    return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "cuda: argmax over rows of more than 2^31 - 1 logits");
  const cuda_index_view out = index_view(args->out);
  cuda_argmax_params p;
  memset(&p, 0, sizeof p);
  p.logits = cuda_tensor_address(args->logits);
  p.out = out.data;
  p.out_cols = out.cols;
  p.out_stride = out.stride;
  p.rows = rl.rows;
  p.cols = rl.cols;
  p.stride = rl.row_stride;
  p.vec = p.cols % 8 == 0 && rows_aligned16(args->logits, p.stride);
  p.span = p.cols;
  p.splits = 1;
  const int64_t wanted = (int64_t)ARGMAX_BLOCKS_PER_SM * dev->multiprocessors / p.rows;
  const int64_t most = p.cols / ARGMAX_MIN_SPAN;
  if (2 * p.rows < dev->multiprocessors && wanted > 1 && most > 1) {
    p.span = ceil_div(ceil_div(p.cols, wanted < most ? wanted : most), 8) * 8; /* keeps 16-byte loads aligned */
    p.splits = (int32_t)ceil_div(p.cols, p.span);
  }
  if (p.splits == 1) {
    const int64_t rows = p.rows, row_bytes = p.stride * (int64_t)gllmk_plugin_dtype_size(args->logits->dtype);
    gllmk_status status = GLLMK_OK;
    for (int64_t first = 0; first < rows && status == GLLMK_OK; first += MAX_GRID_X) {
      status = cuda_launch(dev, CK_argmax_f32 + variant(args->logits->dtype), clamp_u32(rows - first, MAX_GRID_X), 1,
                           1, block_for(ceil_div(p.cols, 64), 1024), 0, &p);
      p.logits += (uint64_t)(MAX_GRID_X * row_bytes);
      p.out += (uint64_t)MAX_GRID_X * sizeof(int32_t);
    }
    return status;
  }
  CUdeviceptr scratch;
  const gllmk_status status = cuda_scratch(dev, (size_t)(p.rows * p.splits * 8), &scratch);
  if (status != GLLMK_OK) return status;
  p.partial = scratch;
  p.counters = dev->arrivals;
  return cuda_launch(dev, CK_argmax_split_f32 + variant(args->logits->dtype), (uint32_t)p.splits, (uint32_t)p.rows, 1,
                     ARGMAX_SPLIT_THREADS, 0, &p);
}

static gllmk_status run_sample(gllmk_plugin_device *dev, const gllmk_sample_args *args) {
  const rows_t rl = gllmk_plugin_as_rows(args->logits);
  const cuda_index_view out = index_view(args->out);
  cuda_sample_params p;
  memset(&p, 0, sizeof p);
  p.logits = cuda_tensor_address(args->logits);
  p.out = out.data;
  p.out_cols = out.cols;
  p.out_stride = out.stride;
  p.rows = rl.rows;
  p.cols = rl.cols;
  p.stride = rl.row_stride;
  p.seed = args->seed;
  p.offset = args->offset;
  p.temperature = args->temperature;
  p.top_p = args->top_p;
  p.min_p = args->min_p;
  p.top_k = args->top_k;
  p.vec = p.cols % 8 == 0 && rows_aligned16(args->logits, p.stride);
  const int v = variant(args->logits->dtype);
  /* One block a row searches its whole row for each threshold, about 800
   * us over 128256 logits; a small top_k lets a block per chunk of 2048
   * narrow the row to top_k candidates a chunk first. Greedy rows, top_k 0
   * and larger top_k keep the one-block kernel. */
  if (!(p.temperature > 0.0f) || p.top_k <= 1 || p.top_k > GK_SAMPLE_TOPK_MAX || p.top_k >= p.cols ||
      p.cols > INT32_MAX)
    return cuda_launch(dev, CK_sample_f32 + v, clamp_u32(p.rows, MAX_GRID_X), 1, 1, GK_SAMPLE_THREADS, 0, &p);
  p.chunks = ceil_div(p.cols, GK_SAMPLE_CHUNK);
  const int64_t row_bytes = p.chunks * (p.top_k * 8 + 4); /* candidates, tie keys */
  int64_t group = SAMPLE_SCRATCH_BYTES / row_bytes;
  if (group > p.rows) group = p.rows;
  if (group > MAX_GRID_YZ) group = MAX_GRID_YZ;
  if (group < 1) group = 1;
  CUdeviceptr scratch;
  gllmk_status status = cuda_scratch(dev, (size_t)(group * row_bytes), &scratch);
  if (status != GLLMK_OK) return status;
  p.candidates = scratch;
  p.tie_keys = scratch + (uint64_t)(group * p.chunks * p.top_k * 8);
  for (int64_t first = 0; first < p.rows && status == GLLMK_OK; first += group) {
    const uint32_t rows = (uint32_t)(p.rows - first < group ? p.rows - first : group);
    p.row_begin = first;
    status = cuda_launch(dev, CK_sample_topk_chunks_f32 + v, (uint32_t)p.chunks, rows, 1, GK_SAMPLE_THREADS, 0, &p);
    if (status == GLLMK_OK)
      status = cuda_launch(dev, CK_sample_topk_draw_f32 + v, rows, 1, 1, GK_SAMPLE_DRAW_THREADS, 0, &p);
  }
  return status;
}

CUDA_OP_ENTRY(argmax)
CUDA_OP_ENTRY(sample)
CUDA_OP_SUPPORTS(argmax)
CUDA_OP_SUPPORTS(sample)
