/*
 * cuda_ops.c - one entry per op: reads the (validated) tensor descriptors,
 * picks a kernel and its launch shape, and enqueues it on the context's
 * stream. Nothing here waits for the device.
 */
#include <math.h>
#include <string.h>

#include "cuda_internal.h"

typedef gllmk_plugin_rows rows_t;

#define MAX_GRID_YZ 65535u
#define MAX_GRID_X 0x7fffffffu

/* ------------------------------------------------------------- helpers */

static size_t elem_size(const gllmk_tensor *t) { return gllmk_plugin_dtype_size(t->dtype); }

/* Kernel variant for a dtype: families are listed f32, f16, bf16. I32 data
 * only moves, so it takes the f32 kernels (which move bits unchanged). */
static int variant(int32_t dtype) { return dtype == GLLMK_I32 ? GLLMK_F32 : dtype; }

static int aligned16(CUdeviceptr address) { return (address & 15u) == 0; }

/* Whether rows of `cols` elements, `stride` apart, all start on 16 bytes. */
static int rows_aligned16(const gllmk_tensor *t, int64_t stride) {
  return aligned16(cuda_tensor_address(t)) && (stride * (int64_t)elem_size(t)) % 16 == 0;
}

/* The stride of dim `dim`, 0 where its extent is 1 (its index is always 0,
 * so whatever stride it has is never used nor checked for alignment). */
static int64_t dim_stride(const gllmk_tensor *t, int32_t dim) {
  return t->shape[dim] > 1 ? t->strides[dim] : 0;
}

/* Whether every row of a tensor starts on 16 bytes: its address and each
 * of the `count` element strides. */
static int strides_aligned16(const gllmk_tensor *t, const int64_t *strides, int count) {
  if (!aligned16(cuda_tensor_address(t))) return 0;
  for (int i = 0; i < count; i++)
    if ((strides[i] * (int64_t)elem_size(t)) % 16 != 0) return 0;
  return 1;
}

static uint32_t clamp_u32(int64_t n, uint32_t max) { return n < 1 ? 1u : n > (int64_t)max ? max : (uint32_t)n; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A block size for `units` of work per block: a multiple of 32 in [32, max]. */
static uint32_t block_for(int64_t units, uint32_t max) {
  const int64_t rounded = ceil_div(units, 32) * 32;
  return clamp_u32(rounded < 32 ? 32 : rounded, max);
}

/* The row stride an input uses against the output's rows: 0 broadcasts one row. */
static int64_t input_stride(const gllmk_tensor *t) {
  const rows_t r = gllmk_plugin_as_rows(t);
  return r.rows == 1 ? 0 : r.row_stride;
}

static gk_index_view index_view(const gllmk_tensor *t) {
  const rows_t r = gllmk_plugin_as_rows(t);
  gk_index_view v = {cuda_tensor_address(t), r.cols, r.row_stride};
  return v;
}

/* Whether an arbitrary tensor is row-strided (unit last stride, leading dims
 * collapsing into rows with one stride), and its rows if so. */
static int row_strided(const gllmk_tensor *t, rows_t *out) {
  rows_t r = {1, t->shape[t->ndim - 1], 0};
  if (r.cols > 1 && t->strides[t->ndim - 1] != 1) return 0;
  int64_t expected = 0;
  for (int32_t i = t->ndim - 2; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (expected == 0) r.row_stride = t->strides[i];
    else if (t->strides[i] != expected) return 0;
    expected = t->strides[i] * t->shape[i];
    r.rows *= t->shape[i];
  }
  if (r.rows == 1) r.row_stride = r.cols;
  *out = r;
  return 1;
}

/* --------------------------------------------------- element-wise ops */

/* out = f(a, b, c) row by row; a, b, c may be NULL (unused by the kernel). */
static gllmk_status launch_elementwise(gllmk_plugin_device *dev, int family, const gllmk_tensor *out,
                                       const gllmk_tensor *a, const gllmk_tensor *b, const gllmk_tensor *c,
                                       float value, int32_t gelu_kind) {
  const rows_t ro = gllmk_plugin_as_rows(out);
  const gllmk_tensor *inputs[3] = {a, b, c};
  gk_ew_params p;
  memset(&p, 0, sizeof p);
  uint64_t *addresses[3] = {&p.a, &p.b, &p.c};
  int64_t *strides[3] = {&p.a_stride, &p.b_stride, &p.c_stride};
  p.out = cuda_tensor_address(out);
  p.rows = ro.rows;
  p.cols = ro.cols;
  p.out_stride = ro.row_stride;
  p.value = value;
  p.gelu_kind = gelu_kind;
  int dense = ro.row_stride == ro.cols, vec = rows_aligned16(out, ro.row_stride);
  for (int i = 0; i < 3; i++) {
    if (!inputs[i]) continue;
    *addresses[i] = cuda_tensor_address(inputs[i]);
    *strides[i] = input_stride(inputs[i]);
    dense = dense && *strides[i] == ro.cols;
    vec = vec && rows_aligned16(inputs[i], *strides[i]);
  }
  if (dense || p.rows == 1) { /* one long row balances best */
    p.cols *= p.rows;
    p.rows = 1;
  }
  p.vec = vec && p.cols % 8 == 0;
  const int64_t units = p.vec ? p.cols / 8 : p.cols;
  return cuda_launch(dev, family + variant(out->dtype), clamp_u32(ceil_div(units, 256), MAX_GRID_YZ),
                     clamp_u32(p.rows, MAX_GRID_YZ), 1, 256, 0, &p);
}

static gllmk_status run_fill(gllmk_plugin_device *dev, const gllmk_fill_args *args) {
  float value = args->value;
  if (args->out->dtype == GLLMK_I32) { /* truncated, saturating; the f32 kernel stores the bits */
    const float v = args->value;
    const int32_t i = v != v ? 0 : v >= 2147483648.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
    memcpy(&value, &i, sizeof value);
  }
  return launch_elementwise(dev, CK_fill_f32, args->out, NULL, NULL, NULL, value, 0);
}

static gllmk_status run_add(gllmk_plugin_device *dev, const gllmk_add_args *args) {
  return launch_elementwise(dev, CK_add_f32, args->out, args->a, args->b, NULL, 0.0f, 0);
}
static gllmk_status run_mul(gllmk_plugin_device *dev, const gllmk_mul_args *args) {
  return launch_elementwise(dev, CK_mul_f32, args->out, args->a, args->b, NULL, 0.0f, 0);
}
static gllmk_status run_mul_add(gllmk_plugin_device *dev, const gllmk_mul_add_args *args) {
  return launch_elementwise(dev, CK_mul_add_f32, args->out, args->a, args->b, args->c, 0.0f, 0);
}
static gllmk_status run_silu(gllmk_plugin_device *dev, const gllmk_silu_args *args) {
  return launch_elementwise(dev, CK_silu_f32, args->out, args->x, NULL, NULL, 0.0f, 0);
}
static gllmk_status run_gelu(gllmk_plugin_device *dev, const gllmk_gelu_args *args) {
  return launch_elementwise(dev, CK_gelu_f32, args->out, args->x, NULL, NULL, 0.0f, args->kind);
}
static gllmk_status run_add_gelu(gllmk_plugin_device *dev, const gllmk_add_gelu_args *args) {
  return launch_elementwise(dev, CK_add_gelu_f32, args->out, args->x, args->bias, NULL, 0.0f, args->kind);
}
static gllmk_status run_swiglu(gllmk_plugin_device *dev, const gllmk_swiglu_args *args) {
  return launch_elementwise(dev, CK_swiglu_f32, args->out, args->gate, args->up, NULL, 0.0f, 0);
}

static gllmk_status run_copy(gllmk_plugin_device *dev, const gllmk_copy_args *args) {
  const gllmk_tensor *out = args->out, *src = args->src;
  const rows_t ro = gllmk_plugin_as_rows(out);
  gk_copy_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.src = cuda_tensor_address(src);
  p.rows = ro.rows;
  p.cols = ro.cols;
  p.out_stride = ro.row_stride;
  const int kernel = CK_copy_f32_f32 + 3 * variant(src->dtype) + variant(out->dtype);
  rows_t rs;
  if (!row_strided(src, &rs)) {
    p.ndim = src->ndim;
    for (int32_t i = 0; i < src->ndim; i++) {
      p.shape[i] = src->shape[i];
      p.strides[i] = src->strides[i];
    }
    return cuda_launch(dev, kernel, clamp_u32(ceil_div(p.rows * p.cols, 256), 1u << 20), 1, 1, 256, 0, &p);
  }
  const int dense = (ro.rows == 1 || ro.row_stride == ro.cols) && (rs.rows == 1 || rs.row_stride == rs.cols);
  if (dense && src->dtype == out->dtype)
    return cuda_check(cu.cuMemcpyDtoDAsync(p.out, p.src, (size_t)(p.rows * p.cols) * elem_size(out), dev->stream),
                      "cuMemcpyDtoDAsync");
  p.src_stride = rs.row_stride;
  if (dense) {
    p.cols *= p.rows;
    p.rows = 1;
  }
  p.vec = p.cols % 8 == 0 && rows_aligned16(out, p.out_stride) && rows_aligned16(src, p.src_stride);
  const int64_t units = p.vec ? p.cols / 8 : p.cols;
  return cuda_launch(dev, kernel, clamp_u32(ceil_div(units, 256), MAX_GRID_YZ), clamp_u32(p.rows, MAX_GRID_YZ), 1,
                     256, 0, &p);
}

/* ---------------------------------------------------------------- norms */

static gllmk_status launch_norm(gllmk_plugin_device *dev, int family, const gllmk_tensor *out,
                                const gllmk_tensor *x, const gllmk_tensor *residual, const gllmk_tensor *weight,
                                const gllmk_tensor *bias, float eps, float scale) {
  const rows_t ro = gllmk_plugin_as_rows(out), rx = gllmk_plugin_as_rows(x);
  gk_norm_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.x = cuda_tensor_address(x);
  p.rows = ro.rows;
  p.cols = ro.cols;
  p.out_stride = ro.row_stride;
  p.x_stride = rx.row_stride;
  p.eps = eps;
  p.scale = scale;
  int vec = ro.cols % 8 == 0 && rows_aligned16(out, p.out_stride) && rows_aligned16(x, p.x_stride);
  if (residual) {
    const rows_t rr = gllmk_plugin_as_rows(residual);
    p.residual = cuda_tensor_address(residual);
    p.residual_stride = rr.row_stride;
    vec = vec && rows_aligned16(residual, p.residual_stride);
  }
  /* The register-cached path reads weight and bias eight at a time too. */
  if (weight) {
    p.weight = cuda_tensor_address(weight);
    vec = vec && aligned16(p.weight);
  }
  if (bias) {
    p.bias = cuda_tensor_address(bias);
    vec = vec && aligned16(p.bias);
  }
  p.vec = vec;
  const int64_t units = vec ? p.cols / 8 : p.cols;
  /* Softmax rows longer than one block keeps in registers (two units a
   * thread, 1024 threads): one block per multiprocessor keeps as much of
   * each row as fits in registers and shared memory, so that it is read from
   * DRAM once (softmax_stash_impl). */
  const int64_t vecs = p.cols / (16 / (int64_t)elem_size(out));
  if (family == CK_softmax_f32 && vec && units > 2 * 1024 && vecs <= INT32_MAX) {
    const int64_t per_thread = ceil_div(vecs, GK_SOFTMAX_STASH_THREADS);
    const int64_t room = cuda_softmax_stash_smem(dev) / (16 * GK_SOFTMAX_STASH_THREADS);
    const int64_t rest = per_thread - GK_SOFTMAX_STASH_REGS;
    p.stash_vecs = (int32_t)(rest < 0 ? 0 : rest < room ? rest : room);
    return cuda_launch(dev, CK_softmax_stash_f32 + variant(out->dtype), clamp_u32(p.rows, (uint32_t)dev->multiprocessors),
                       1, 1, GK_SOFTMAX_STASH_THREADS, (uint32_t)p.stash_vecs * 16 * GK_SOFTMAX_STASH_THREADS, &p);
  }
  /* Two units a thread (what the kernels keep in registers); softmax rows
   * are usually a vocabulary long and stream, so it takes bigger blocks. */
  const uint32_t max_threads = family == CK_softmax_f32 ? 1024 : GK_NORM_MAX_THREADS;
  return cuda_launch(dev, family + variant(out->dtype), clamp_u32(p.rows, MAX_GRID_X), 1, 1,
                     block_for(ceil_div(units, 2), max_threads), 0, &p);
}

static gllmk_status run_rmsnorm(gllmk_plugin_device *dev, const gllmk_rmsnorm_args *args) {
  return launch_norm(dev, CK_rmsnorm_f32, args->out, args->x, NULL, args->weight, NULL, args->eps, 1.0f);
}
static gllmk_status run_add_rmsnorm(gllmk_plugin_device *dev, const gllmk_add_rmsnorm_args *args) {
  return launch_norm(dev, CK_add_rmsnorm_f32, args->out, args->x, args->residual, args->weight, NULL, args->eps, 1.0f);
}
static gllmk_status run_layernorm(gllmk_plugin_device *dev, const gllmk_layernorm_args *args) {
  return launch_norm(dev, CK_layernorm_f32, args->out, args->x, NULL, args->weight, args->bias, args->eps, 1.0f);
}
static gllmk_status run_softmax(gllmk_plugin_device *dev, const gllmk_softmax_args *args) {
  return launch_norm(dev, CK_softmax_f32, args->out, args->x, NULL, NULL, NULL, 0.0f, args->scale);
}

/* ----------------------------------------------------------------- rows */

static gllmk_status run_rope(gllmk_plugin_device *dev, const gllmk_rope_args *args) {
  const gllmk_tensor *x = args->x, *out = args->out;
  gk_rope_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.x = cuda_tensor_address(x);
  p.positions = cuda_tensor_address(args->positions);
  p.inv_freq = args->inv_freq ? cuda_tensor_address(args->inv_freq) : 0; /* 0: theta's */
  /* [tokens, heads, head_dim] with any strides on the leading dims (a head
   * slice of a fused q/k/v tensor, permuted dims, padded rows). */
  p.tokens = x->shape[0];
  p.heads = x->shape[1];
  p.head_dim = x->shape[2];
  p.x_token_stride = dim_stride(x, 0);
  p.x_stride = dim_stride(x, 1);
  p.out_token_stride = dim_stride(out, 0);
  p.out_stride = dim_stride(out, 1);
  p.frequency_ratio = pow((double)args->theta, -2.0 / args->rotary_dim);
  p.theta = args->theta;
  p.rotary_dim = args->rotary_dim;
  p.style = args->style;
  p.vec = p.head_dim % 8 == 0 && p.rotary_dim % 16 == 0 &&
          strides_aligned16(x, (const int64_t[]){p.x_token_stride, p.x_stride}, 2) &&
          strides_aligned16(out, (const int64_t[]){p.out_token_stride, p.out_stride}, 2);
  const enum cuda_kernel_id kernel = CK_rope_f32 + variant(out->dtype);
  /* Enough blocks to fill the device; each walks several tokens. */
  const uint32_t blocks = clamp_u32(p.tokens, 16u * (uint32_t)dev->multiprocessors);
  if (out->dtype != GLLMK_F32) {
    const uint32_t smem = (uint32_t)(p.rotary_dim / 2) * 16u; /* frequencies and (cos, sin) */
    if (smem > 48 * 1024)
      return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "gllmk_rope: the cuda backend supports 16-bit rotary_dim up to 6144");
    const int64_t units = p.heads * (p.vec ? p.rotary_dim / 16 : p.rotary_dim / 2);
    return cuda_launch(dev, kernel, blocks, 1, 1, block_for(units, 256), smem, &p);
  }
  /* f32: pairs a thread turns at once and such units per head (as the
   * kernel counts them); a block of whole heads' units lets each thread keep
   * one pair group, so each angle it computes serves two heads of a token. */
  const int64_t pairs = !p.vec ? 1 : p.style == GLLMK_ROPE_NEOX ? 4 : 2;
  const int64_t per_head = p.rotary_dim / 2 / pairs;
  const uint32_t threads =
      per_head <= 256 ? (uint32_t)per_head * clamp_u32(ceil_div(p.heads, 2), (uint32_t)(256 / per_head)) : 256u;
  return cuda_launch(dev, kernel, blocks, 1, 1, threads, 0, &p);
}

static gllmk_status run_embedding(gllmk_plugin_device *dev, const gllmk_embedding_args *args) {
  const rows_t ro = gllmk_plugin_as_rows(args->out), rt = gllmk_plugin_as_rows(args->table);
  gk_embedding_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(args->out);
  p.table = cuda_tensor_address(args->table);
  p.error_flag = dev->error_device;
  p.ids = index_view(args->ids);
  p.count = ro.rows;
  p.dim = ro.cols;
  p.vocab = rt.rows;
  p.out_stride = ro.row_stride;
  p.table_stride = rt.row_stride;
  const size_t es = elem_size(args->out);
  p.vec = (p.dim * (int64_t)es) % 16 == 0 && rows_aligned16(args->out, p.out_stride) &&
          rows_aligned16(args->table, p.table_stride);
  const int64_t units = p.vec ? p.dim * (int64_t)es / 16 : p.dim;
  return cuda_launch(dev, CK_embedding_f32 + variant(args->out->dtype), clamp_u32(p.count, MAX_GRID_X), 1, 1,
                     block_for(units, 256), 0, &p);
}

static gllmk_status run_kv_append(gllmk_plugin_device *dev, const gllmk_kv_append_args *args) {
  const gllmk_tensor *k = args->k, *v = args->v, *kc = args->k_cache;
  const rows_t rkc = gllmk_plugin_as_rows(kc), rvc = gllmk_plugin_as_rows(args->v_cache);
  gk_kv_append_params p;
  memset(&p, 0, sizeof p);
  p.k_cache = cuda_tensor_address(kc);
  p.v_cache = cuda_tensor_address(args->v_cache);
  p.k = cuda_tensor_address(k);
  p.v = cuda_tensor_address(args->v);
  p.error_flag = dev->error_device;
  p.slots = index_view(args->slots);
  /* k and v [tokens, heads, head_dim] with any strides on the leading dims;
   * the caches are contiguous. */
  p.tokens = k->shape[0];
  p.heads = k->shape[1];
  p.head_dim = k->shape[2];
  p.k_token_stride = dim_stride(k, 0);
  p.k_stride = dim_stride(k, 1);
  p.v_token_stride = dim_stride(v, 0);
  p.v_stride = dim_stride(v, 1);
  p.k_cache_stride = rkc.row_stride;
  p.v_cache_stride = rvc.row_stride;
  p.slot_count = kc->shape[0] * kc->shape[1];
  const size_t es = elem_size(k);
  p.vec = (p.head_dim * (int64_t)es) % 16 == 0 &&
          strides_aligned16(k, (const int64_t[]){p.k_token_stride, p.k_stride}, 2) &&
          strides_aligned16(v, (const int64_t[]){p.v_token_stride, p.v_stride}, 2) &&
          rows_aligned16(kc, p.k_cache_stride) && rows_aligned16(args->v_cache, p.v_cache_stride);
  const int64_t units = p.heads * (p.vec ? p.head_dim * (int64_t)es / 16 : p.head_dim);
  return cuda_launch(dev, CK_kv_append_f32 + variant(k->dtype), clamp_u32(p.tokens, MAX_GRID_X), 1, 1,
                     block_for(units, 256), 0, &p);
}

/* --------------------------------------------------------------- matmul */

/* A TMA descriptor of a 16-bit K-major operand seen as (K, rows, batch),
 * read in boxes of `box_rows` rows x 64 columns with the 128-byte swizzle.
 * Returns 0 where the driver cannot describe it (then another kernel runs). */
static int describe_for_tma(gk_tensor_map *map, int32_t dtype, uint64_t address, int64_t k, int64_t rows,
                            int64_t batch, int64_t row_stride, int64_t batch_stride, uint32_t box_rows) {
  if (!cu.cuTensorMapEncodeTiled) return 0;
  const uint64_t dims[3] = {(uint64_t)k, (uint64_t)rows, (uint64_t)batch};
  const uint64_t strides[2] = {(uint64_t)row_stride * 2, (uint64_t)batch_stride * 2};
  const uint32_t box[3] = {GK_MATMUL_WGMMA_BK, box_rows, 1}, element_strides[3] = {1, 1, 1};
  return cu.cuTensorMapEncodeTiled(map, dtype == GLLMK_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                   3, (void *)(uintptr_t)address, dims, strides, box, element_strides,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* The distance between the matrices of a batched operand: the stride of its
 * innermost batch dim with extent > 1 (the core checked that they flatten
 * into one), 0 for a single matrix. */
static int64_t matrix_batch_stride(const gllmk_tensor *t) {
  for (int32_t i = t->ndim - 3; i >= 0; i--)
    if (t->shape[i] > 1) return t->strides[i];
  return 0;
}

static gllmk_status run_matmul(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  const gllmk_tensor *a = args->a, *b = args->b, *out = args->out;
  const int32_t dtype = out->dtype, nd = a->ndim, bd = b->ndim;
  gk_matmul_params p;
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
  p.n = out->shape[nd - 1];
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
  const int v = variant(dtype);
  if (p.m == 1 && p.batch <= MAX_GRID_YZ) {
    if (p.b_kn)
      return cuda_launch(dev, CK_gemv_kn_f32 + v, clamp_u32(ceil_div(p.n, GK_GEMV_KN_OUTPUTS), MAX_GRID_X),
                         (uint32_t)p.batch, 1, 256, 0, &p);
    return cuda_launch(dev, CK_gemv_nk_f32 + v, clamp_u32(ceil_div(p.n, GK_GEMV_NK_OUTPUTS), MAX_GRID_X),
                       (uint32_t)p.batch, 1, GK_GEMV_NK_OUTPUTS * 32, 0, &p);
  }
  if (dtype != GLLMK_F32 && dev->wgmma && !p.b_kn && p.vec && p.m >= 64 && p.batch <= MAX_GRID_YZ &&
      p.lda > 0 && p.ldb > 0 && p.a_batch_stride > 0) {
    gk_matmul_tma_params tp;
    if (describe_for_tma(&tp.a_map, dtype, p.a, p.k, p.m, p.batch, p.lda, p.a_batch_stride, GK_MATMUL_WGMMA_BM) &&
        describe_for_tma(&tp.b_map, dtype, p.b, p.k, p.n, p.b_batch_stride ? p.batch : 1, p.ldb,
                         p.b_batch_stride ? p.b_batch_stride : p.n * p.ldb, GK_MATMUL_WGMMA_BN)) {
      tp.p = p;
      const int64_t tiles = ceil_div(p.m, GK_MATMUL_WGMMA_BM) * ceil_div(p.n, GK_MATMUL_WGMMA_BN);
      return cuda_launch(dev, dtype == GLLMK_BF16 ? CK_matmul_wgmma_bf16 : CK_matmul_wgmma_f16, (uint32_t)tiles,
                         (uint32_t)p.batch, 1, GK_MATMUL_WGMMA_THREADS, GK_MATMUL_WGMMA_SMEM, &tp);
    }
  }
  const int64_t tiles = ceil_div(p.m, GK_MATMUL_MMA_BM) * ceil_div(p.n, GK_MATMUL_MMA_BN);
  if (dtype != GLLMK_F32 && dev->sm >= 80 && p.vec && p.batch <= MAX_GRID_YZ && tiles <= MAX_GRID_X) {
    const int kernel = CK_matmul_mma_f16_nk + (dtype == GLLMK_BF16) + 2 * p.b_kn;
    return cuda_launch(dev, kernel, (uint32_t)tiles, (uint32_t)p.batch, 1, GK_MATMUL_MMA_THREADS, GK_MATMUL_MMA_SMEM,
                       &p);
  }
  return cuda_launch(dev, CK_matmul_simt_f32 + v, clamp_u32(ceil_div(p.n, 128), MAX_GRID_X),
                     clamp_u32(ceil_div(p.m, 128), MAX_GRID_YZ), clamp_u32(p.batch, MAX_GRID_YZ), 256, 0, &p);
}

/* ------------------------------------------------------------ attention */

/* Launches attention by rows: each block takes the rows (token, head) of
 * some tokens and heads of one kv head, on tensor cores for f16/bf16 on
 * sm_80+ (16 rows a warp), else on CUDA cores (one row a warp). Long key
 * ranges are split across blocks when rows are few, then combined. `max_keys`
 * bounds every sequence's length. */
static gllmk_status launch_attention_rows(gllmk_plugin_device *dev, gk_attention_params *p, int32_t dtype,
                                          int64_t max_keys) {
  const int esize = (int)gllmk_plugin_dtype_size(dtype);
  const int group = p->q_heads / p->kv_heads;
  const int tensor_cores = dtype != GLLMK_F32 && dev->sm >= 80 && p->vec;
  const int rows_per_block = tensor_cores ? 16 : GK_ATTENTION_WARPS;
  p->heads_per_block = group < rows_per_block ? group : rows_per_block;
  p->tokens_per_block = rows_per_block / p->heads_per_block;
  /* A block whose tokens span sequences walks each one's keys in turn: keep
   * one token a block when sequences are one token (decode) or short. */
  if ((p->paged && p->tokens <= p->batch) || (!p->paged && p->q_len < p->tokens_per_block))
    p->tokens_per_block = p->paged ? 1 : p->q_len;
  const int64_t gx = ceil_div(p->tokens, p->tokens_per_block);
  const int64_t gy = (int64_t)p->kv_heads * ceil_div(group, p->heads_per_block);
  int kernel, threads;
  int64_t smem;
  if (tensor_cores) {
    const int dp_index = p->head_dim <= 64 ? 0 : p->head_dim <= 128 ? 1 : 2;
    kernel = CK_attention_rows_f16_d64 + (dtype == GLLMK_BF16) + 2 * dp_index;
    threads = 32;
    smem = GK_ATTENTION_ROWS_SMEM(64 << dp_index);
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
  /* Split the keys until there are about four waves of blocks (each split
   * still a few tiles long), so that few rows still fill the device. */
  int64_t resident = (int64_t)dev->smem_per_sm / (smem + 1024);
  if (resident > 2048 / threads) resident = 2048 / threads;
  if (resident > 32) resident = 32;
  if (resident < 1) resident = 1;
  const int64_t min_split_keys = tensor_cores ? 8 * GK_ATTENTION_KEYS : 4 * GK_ATTENTION_KEYS;
  int64_t splits = ceil_div(4 * resident * dev->multiprocessors, gx * gy);
  if (splits > ceil_div(max_keys, min_split_keys)) splits = ceil_div(max_keys, min_split_keys);
  if (splits < 1) splits = 1;
  int64_t split_keys = ceil_div(ceil_div(max_keys, splits), GK_ATTENTION_KEYS) * GK_ATTENTION_KEYS;
  if (split_keys < GK_ATTENTION_KEYS) split_keys = GK_ATTENTION_KEYS;
  splits = ceil_div(max_keys, split_keys);
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
  return cuda_launch(dev, CK_attention_combine_f32 + variant(dtype), clamp_u32(ceil_div(rows, 4), MAX_GRID_X), 1, 1,
                     128, 0, p);
}

static gllmk_status run_attention(gllmk_plugin_device *dev, const gllmk_attention_args *args) {
  const gllmk_tensor *q = args->q, *k = args->k, *v = args->v, *out = args->out;
  gk_attention_params p;
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
  if (prefill && dev->wgmma && dp_index < 2) {
    const int kernel = CK_attention_wgmma_f16_d64 + (dtype == GLLMK_BF16) + 2 * dp_index;
    return cuda_launch(dev, kernel, (uint32_t)ceil_div(p.q_len, GK_ATTENTION_WGMMA_ROWS), (uint32_t)p.q_heads,
                       (uint32_t)p.batch, GK_ATTENTION_WGMMA_THREADS,
                       GK_ATTENTION_WGMMA_SMEM(64 << dp_index, dtype == GLLMK_BF16), &p);
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
  gk_attention_params p;
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

/* ------------------------------------------------------------- sampling */

static gllmk_status run_argmax(gllmk_plugin_device *dev, const gllmk_argmax_args *args) {
  const rows_t rl = gllmk_plugin_as_rows(args->logits);
  const gk_index_view out = index_view(args->out);
  gk_argmax_params p;
  memset(&p, 0, sizeof p);
  p.logits = cuda_tensor_address(args->logits);
  p.out = out.data;
  p.out_cols = out.cols;
  p.out_stride = out.stride;
  p.rows = rl.rows;
  p.cols = rl.cols;
  p.stride = rl.row_stride;
  p.vec = p.cols % 8 == 0 && rows_aligned16(args->logits, p.stride);
  return cuda_launch(dev, CK_argmax_f32 + variant(args->logits->dtype), clamp_u32(p.rows, MAX_GRID_X), 1, 1,
                     block_for(ceil_div(p.cols, 64), 1024), 0, &p);
}

static gllmk_status run_sample(gllmk_plugin_device *dev, const gllmk_sample_args *args) {
  const rows_t rl = gllmk_plugin_as_rows(args->logits);
  const gk_index_view out = index_view(args->out);
  gk_sample_params p;
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
  return cuda_launch(dev, CK_sample_f32 + variant(args->logits->dtype), clamp_u32(p.rows, MAX_GRID_X), 1, 1,
                     GK_SAMPLE_THREADS, 0, &p);
}

/* ---------------------------------------------------------- entry points */

#define GLLMK_OP(name)                                                                         \
  gllmk_status cuda_##name(gllmk_plugin_device *dev, const gllmk_##name##_args *args) {        \
    gllmk_status status = cuda_enter(dev);                                                     \
    if (status != GLLMK_OK) return status;                                                     \
    status = run_##name(dev, args);                                                            \
    cuda_leave(dev);                                                                           \
    return status;                                                                             \
  }
#include "gllmk/gllmk_ops.def"

/* Only rope (16-bit rotary_dim past what shared memory holds) and attention
 * (a head dim or grid past the device's limits) can refuse a valid call:
 * their host code runs as for a launch, launching nothing, and answers. */
gllmk_status cuda_supports(gllmk_plugin_device *dev, gllmk_op op, const void *args) {
  if (op != GLLMK_OP_rope && op != GLLMK_OP_attention && op != GLLMK_OP_paged_attention)
    return GLLMK_OK;
  dev->planning = 1;
  const gllmk_status status = op == GLLMK_OP_rope        ? run_rope(dev, args)
                              : op == GLLMK_OP_attention ? run_attention(dev, args)
                                                         : run_paged_attention(dev, args);
  dev->planning = 0;
  return status;
}
