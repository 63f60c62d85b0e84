/*
 * matmul.c - the matmul family: matmul (batched, b [N, K] or [K, N],
 * alpha, beta, bias). Kernels: kernels/matmul_gemv.comp (a few rows of a),
 * kernels/matmul_khr_f16.comp and matmul_khr_bf16.comp (tensor cores through
 * VK_KHR_cooperative_matrix, kernels/matmul_khr.glsl), kernels/matmul_coop.comp
 * (VK_NV_cooperative_matrix), both fed by kernels/matmul_pack.comp where the
 * operands need a packed copy, and kernels/matmul.comp (the tiled path for
 * everything else). From below it takes the launch (vk_call_* of
 * dispatch.c), the device's scratch space (device.c) for packed operands,
 * and what probe learned of the device's cooperative matrices (plugin.c).
 */
#include <string.h>

#include "ops.h"

/* The distance between matrices of a batched operand: the stride of its
 * innermost batch dim with extent > 1 (the core checks that they flatten). */
static int64_t vk_batch_stride(const gllmk_tensor *t) {
  for (int32_t i = t->ndim - 3; i >= 0; i--)
    if (t->shape[i] > 1) return t->strides[i];
  return 0;
}

typedef struct vk_matmul_push {
  uint32_t M, N, K, batch;
  uint32_t a_offset, lda, a_batch_stride;
  uint32_t b_offset, ldb, b_batch_stride;
  uint32_t out_offset, ldo, out_batch_stride;
  uint32_t bias_offset, has_bias;
  float alpha, beta;
  /* matmul_gemv.comp's FUSE: a_norm's eps, the rope on the output, kv */
  float a_norm_eps;
  uint32_t rope_dim, rope_head_dim, rope_columns, pos_offset, pos_stride, freq_offset;
  uint32_t kv_first, kv_width, kc_offset, vc_offset, slots_offset, kv_capacity;
} vk_matmul_push;
_Static_assert(sizeof(vk_matmul_push) <= 128, "the pipeline layout's push constants");

/* Tile of the plain kernel: BM x BN outputs, BK deep, TM x TN per invocation. */
enum { VK_MM_BM = 64, VK_MM_BN = 64, VK_MM_BK = 16, VK_MM_TM = 4, VK_MM_TN = 4 };
/* matmul_gemv.comp: at most GEMV_M rows of a; RN outputs per workgroup for b
 * [N, K]; K in KSPLIT slices for b [K, N]. */
enum { VK_GEMV_M = 4, VK_GEMV_RN = 4, VK_GEMV_KSPLIT = 4, VK_GEMV_GROUP = 256 };
/* matmul_gemv.comp's FUSE bits */
enum { VK_GEMV_A_NORM = 1, VK_GEMV_ROPE = 2, VK_GEMV_INV_FREQ = 4, VK_GEMV_GLU = 8, VK_GEMV_KV = 16 };

/* Fills the push constants common to matmul.comp and matmul_gemv.comp and
 * binds out (0), a (1), b (2) and bias (3). */
static vk_matmul_push vk_matmul_bind(vk_call *call, const gllmk_matmul_args *args) {
  const gllmk_tensor *a = args->a, *b = args->b, *out = args->out;
  int32_t nd = a->ndim;
  int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = out->shape[nd - 1];
  int64_t batch = vk_numel(a) / (M * K);
  vk_matmul_push p;
  memset(&p, 0, sizeof p);
  p.M = vk_call_u32(call, M, "M");
  p.N = vk_call_u32(call, N, "N");
  p.K = vk_call_u32(call, K, "K");
  p.batch = vk_call_u32(call, batch, "the batch count");
  p.a_offset = vk_call_tensor(call, 1, a);
  p.lda = vk_call_stride(call, a, nd - 2);
  p.a_batch_stride = vk_call_u32(call, vk_batch_stride(a), "a batch stride");
  p.b_offset = vk_call_tensor(call, 2, b);
  p.ldb = vk_call_stride(call, b, b->ndim - 2);
  if (b->ndim > 2) p.b_batch_stride = vk_call_u32(call, vk_batch_stride(b), "a batch stride");
  p.out_offset = vk_call_tensor(call, 0, out);
  p.ldo = vk_call_stride(call, out, nd - 2);
  p.out_batch_stride = vk_call_u32(call, vk_batch_stride(out), "a batch stride");
  if (args->bias) {
    p.bias_offset = vk_call_tensor(call, 3, args->bias);
    p.has_bias = 1;
  }
  p.alpha = args->alpha;
  p.beta = args->beta;
  return p;
}

static gllmk_status vk_matmul_tiled(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_matmul, args->out->dtype,
               (VK_MM_BM / VK_MM_TM) * (VK_MM_BN / VK_MM_TN));
  call.key.variant = args->b_layout == GLLMK_B_NK ? 0 : 1;
  const uint32_t tile[VK_MAX_SPEC_EXTRA] = {VK_MM_BM, VK_MM_BN, VK_MM_BK, VK_MM_TM, VK_MM_TN};
  memcpy(call.key.extra, tile, sizeof tile);
  vk_matmul_push p = vk_matmul_bind(&call, args);
  return vk_call_run(&call, &p, sizeof p, vk_groups(p.N, VK_MM_BN), vk_groups(p.M, VK_MM_BM),
                     p.batch);
}

static gllmk_status vk_matmul_gemv(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_matmul_gemv, args->out->dtype, VK_GEMV_GROUP);
  int nk = args->b_layout == GLLMK_B_NK;
  call.key.variant = nk ? 0 : 1;
  vk_matmul_push p = vk_matmul_bind(&call, args);
  uint32_t vectors = nk && (p.K | p.lda | p.ldb | p.a_offset | p.b_offset | p.a_batch_stride |
                            p.b_batch_stride) % 8 == 0;
  uint32_t fuse = args->a_norm == GLLMK_A_NORM_RMS ? VK_GEMV_A_NORM : 0;
  p.a_norm_eps = args->a_norm_eps;
  if (args->rope_dim) {
    /* a pair of columns in one workgroup: RN is even */
    gllmk_status s = vk_rope_frequencies(dev, &call, (vk_rope_slots){.table_slot = 5, .inv_slot = 6},
                                         args->rope_theta, args->rope_dim, args->rope_inv_freq,
                                         &p.freq_offset);
    if (s != GLLMK_OK) return s;
    fuse |= VK_GEMV_ROPE | (args->rope_inv_freq ? VK_GEMV_INV_FREQ : 0);
    p.rope_dim = (uint32_t)args->rope_dim;
    p.rope_head_dim = (uint32_t)args->rope_head_dim;
    p.rope_columns = (uint32_t)args->rope_columns;
    p.pos_offset = vk_call_tensor(&call, 4, args->rope_positions);
    p.pos_stride = vk_call_stride(&call, args->rope_positions, 0);
  }
  /* glu: out's N columns, of b's 2 N rows; a workgroup's RN dot products
   * are RN / 2 gate columns and their up columns */
  if (args->glu == GLLMK_GLU_SWIGLU) fuse |= VK_GEMV_GLU;
  if (args->kv_k_cache) {
    const gllmk_tensor *kc = args->kv_k_cache;
    fuse |= VK_GEMV_KV;
    p.kv_first = (uint32_t)args->kv_first;
    p.kv_width = vk_call_u32(&call, kc->shape[2] * kc->shape[3], "kv's width");
    p.kv_capacity = vk_call_u32(&call, kc->shape[0] * kc->shape[1], "the cache's slot count");
    p.slots_offset = vk_call_tensor(&call, 7, args->kv_slots);
    p.kc_offset = vk_call_tensor(&call, 9, kc);
    p.vc_offset = vk_call_tensor(&call, 10, args->kv_v_cache);
  }
  const uint32_t spec[VK_MAX_SPEC_EXTRA] = {p.M, VK_GEMV_RN, VK_GEMV_KSPLIT, vectors, fuse};
  memcpy(call.key.extra, spec, sizeof spec);
  uint64_t per_group = !nk                  ? VK_GEMV_GROUP / VK_GEMV_KSPLIT
                       : fuse & VK_GEMV_GLU ? VK_GEMV_RN / 2
                                            : VK_GEMV_RN;
  return vk_call_run(&call, &p, sizeof p, vk_groups(p.N, per_group), 1, p.batch);
}

/* ------------------------------------------------ cooperative matrices */

static uint64_t vk_round_up(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

/* Where one operand's packed copy and scales live in dev->scratch. */
typedef struct vk_packed {
  uint64_t rows_p, count; /* padded rows; matrices (batch or 1) */
  uint64_t data_at, data_bytes, scale_at, scale_bytes;
} vk_packed;

static uint64_t vk_packed_layout(vk_packed *pk, uint64_t rows_p, uint64_t k_p, uint64_t count,
                                 uint64_t at, uint64_t align) {
  pk->rows_p = rows_p;
  pk->count = count;
  pk->data_at = at;
  pk->data_bytes = count * rows_p * k_p * 2;
  pk->scale_at = vk_round_up(at + pk->data_bytes, align);
  pk->scale_bytes = count * rows_p * 4;
  return vk_round_up(pk->scale_at + pk->scale_bytes, align);
}

/* matmul_pack.comp: `t` (rows of length K, or with transposed, K rows of
 * `rows`) into pk as dtype_out (F16 with per-row scales for a BF16 t, else a
 * copy). */
static gllmk_status vk_pack(gllmk_plugin_device *dev, const gllmk_tensor *t, int32_t dtype_out,
                            int transposed, uint64_t rows, uint64_t k, uint64_t k_p,
                            const vk_packed *pk) {
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_matmul_pack, t->dtype, 256);
  call.key.dtype_out = (uint32_t)dtype_out;
  call.key.variant = transposed ? 1 : 0;
  vk_call_memory(&call, 0, &dev->scratch, pk->data_at, pk->data_bytes);
  vk_call_memory(&call, 2, &dev->scratch, pk->scale_at, pk->scale_bytes);
  struct {
    uint32_t rows, k, rows_p, k_p, batch, src_offset, src_ld, src_batch_stride, dst_offset,
        dst_batch_stride, scale_offset, scale_batch_stride;
  } p = {0};
  p.rows = (uint32_t)rows;
  p.k = (uint32_t)k;
  p.rows_p = vk_call_u32(&call, (int64_t)pk->rows_p, "a padded dimension");
  p.k_p = (uint32_t)k_p;
  p.batch = (uint32_t)pk->count;
  p.src_offset = vk_call_tensor(&call, 1, t);
  p.src_ld = vk_call_stride(&call, t, t->ndim - 2);
  p.src_batch_stride = pk->count > 1 ? vk_call_u32(&call, vk_batch_stride(t), "a batch stride") : 0;
  p.dst_batch_stride = vk_call_u32(&call, (int64_t)(pk->rows_p * k_p), "a packed matrix");
  p.scale_batch_stride = (uint32_t)pk->rows_p;
  call.key.extra[0] = !transposed && (p.k | p.src_ld | p.src_offset | p.src_batch_stride) % 8 == 0;
  uint64_t groups = transposed ? pk->rows_p / 32 : pk->rows_p;
  return vk_call_run(&call, &p, sizeof p, groups, 1, pk->count);
}

/* F16/BF16 matmul on tensor cores: pack a and b into dev->scratch, then
 * matmul_coop.comp. Returns GLLMK_ERR_UNSUPPORTED (without a message) where
 * the problem does not suit it, and the caller takes the plain path. */
static gllmk_status vk_matmul_coop(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  const gllmk_tensor *a = args->a, *b = args->b, *out = args->out;
  int32_t nd = a->ndim;
  uint64_t M = (uint64_t)a->shape[nd - 2], K = (uint64_t)a->shape[nd - 1];
  uint64_t N = (uint64_t)out->shape[nd - 1], batch = (uint64_t)vk_numel(a) / (M * K);
  uint64_t k_p = vk_round_up(K, VK_COOP_BK);
  uint64_t align = dev->phys->limits.minStorageBufferOffsetAlignment;
  if (align < 256) align = 256;
  vk_packed pa, pb;
  uint64_t b_count = b->ndim > 2 ? batch : 1;
  uint64_t end = vk_packed_layout(&pa, vk_round_up(M, VK_COOP_BM), k_p, batch, 0, align);
  end = vk_packed_layout(&pb, vk_round_up(N, VK_COOP_BN), k_p, b_count, end, align);
  /* 32-bit indices in halves, and bindable in one range each. */
  uint64_t limit = dev->phys->limits.maxStorageBufferRange;
  if (pa.data_bytes / 2 > UINT32_MAX || pb.data_bytes / 2 > UINT32_MAX || pa.data_bytes > limit ||
      pb.data_bytes > limit)
    return GLLMK_ERR_UNSUPPORTED;
  if (vk_scratch_reserve(dev, end) != GLLMK_OK) return GLLMK_ERR_UNSUPPORTED;

  gllmk_status s = vk_pack(dev, a, GLLMK_F16, 0, M, K, k_p, &pa);
  if (s == GLLMK_OK) s = vk_pack(dev, b, GLLMK_F16, args->b_layout == GLLMK_B_KN, N, K, k_p, &pb);
  if (s != GLLMK_OK) return s;

  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_matmul_coop, out->dtype,
               (VK_COOP_BM / 64) * (VK_COOP_BN / 64) * 32);
  const uint32_t tile[VK_MAX_SPEC_EXTRA] = {VK_COOP_BM, VK_COOP_BN, VK_COOP_STAGES};
  memcpy(call.key.extra, tile, sizeof tile);
  vk_call_memory(&call, 1, &dev->scratch, pa.data_at, pa.data_bytes);
  vk_call_memory(&call, 2, &dev->scratch, pb.data_at, pb.data_bytes);
  vk_call_memory(&call, 4, &dev->scratch, pa.scale_at, pa.scale_bytes);
  vk_call_memory(&call, 5, &dev->scratch, pb.scale_at, pb.scale_bytes);
  struct {
    uint32_t M, N, k_p, batch, a_batch_stride, b_batch_stride, sa_batch_stride, sb_batch_stride,
        out_offset, ldo, out_batch_stride, bias_offset, has_bias;
    float alpha, beta;
  } p = {0};
  p.M = (uint32_t)M;
  p.N = (uint32_t)N;
  p.k_p = (uint32_t)k_p;
  p.batch = (uint32_t)batch;
  p.a_batch_stride = (uint32_t)(pa.rows_p * k_p);
  p.b_batch_stride = b_count > 1 ? (uint32_t)(pb.rows_p * k_p) : 0;
  p.sa_batch_stride = (uint32_t)pa.rows_p;
  p.sb_batch_stride = b_count > 1 ? (uint32_t)pb.rows_p : 0;
  p.out_offset = vk_call_tensor(&call, 0, out);
  p.ldo = vk_call_stride(&call, out, nd - 2);
  p.out_batch_stride = vk_call_u32(&call, vk_batch_stride(out), "a batch stride");
  if (args->bias) {
    p.bias_offset = vk_call_tensor(&call, 3, args->bias);
    p.has_bias = 1;
  }
  p.alpha = args->alpha;
  p.beta = args->beta;
  return vk_call_run(&call, &p, sizeof p, pb.rows_p / VK_COOP_BN, pa.rows_p / VK_COOP_BM, batch);
}

/* ------------------------------------- KHR cooperative matrices (F16, BF16) */

/* Packs what matmul_khr.glsl cannot read in place into dev->scratch (a copy
 * of the same type, K rounded up to 8; b [K, N] transposed) and points the
 * call's binding and p at the copy: a when !a_direct, b when !b_direct.
 * A K that is not a multiple of 8 packs both, and the kernel's K becomes
 * the padded one (zeros).
 *
 * A transposed b gets rows of K rounded up to VK_PACK_TILE (more zeros the
 * kernel never reads): matmul_pack.comp's transposing pass writes whole tiles
 * of 32 K columns, so with rows of K rounded to 8 only, the last tile of
 * each row spilled zeros over the first columns of the next row (issue 20:
 * bf16 b [K, N] with K = 777 on NVIDIA's KHR path, 0.113 x max|ref| off;
 * the NV path's rows, K rounded to VK_COOP_BK = 32, never spilled). */
enum { VK_PACK_TILE = 32 };
static gllmk_status vk_khr_pack(gllmk_plugin_device *dev, vk_call *call,
                                const gllmk_matmul_args *args, int a_direct, int b_direct,
                                vk_matmul_push *p) {
  uint64_t M = p->M, N = p->N, K = p->K, batch = p->batch;
  uint64_t k_p = vk_round_up(K, 8);
  uint64_t align = dev->phys->limits.minStorageBufferOffsetAlignment;
  if (align < 256) align = 256;
  uint64_t b_count = args->b->ndim > 2 ? batch : 1;
  int b_transposed = args->b_layout == GLLMK_B_KN;
  uint64_t kb_p = b_transposed ? vk_round_up(K, VK_PACK_TILE) : k_p; /* b's row length */
  vk_packed pa = {0}, pb = {0};
  uint64_t end = 0;
  /* Rows padded to the transposing pass's 32; the kernel reads only real rows. */
  if (!a_direct) end = vk_packed_layout(&pa, vk_round_up(M, 32), k_p, batch, end, align);
  if (!b_direct) end = vk_packed_layout(&pb, vk_round_up(N, 32), kb_p, b_count, end, align);
  uint64_t limit = dev->phys->limits.maxStorageBufferRange;
  if (pa.data_bytes / 2 > UINT32_MAX || pb.data_bytes / 2 > UINT32_MAX || pa.data_bytes > limit ||
      pb.data_bytes > limit)
    return GLLMK_ERR_UNSUPPORTED;
  if (vk_scratch_reserve(dev, end) != GLLMK_OK) return GLLMK_ERR_UNSUPPORTED;
  gllmk_status s = GLLMK_OK;
  if (!a_direct) s = vk_pack(dev, args->a, args->a->dtype, 0, M, K, k_p, &pa);
  if (s == GLLMK_OK && !b_direct)
    s = vk_pack(dev, args->b, args->b->dtype, b_transposed, N, K, kb_p, &pb);
  if (s != GLLMK_OK) return s;
  if (!a_direct) {
    vk_call_memory(call, 1, &dev->scratch, pa.data_at, pa.data_bytes);
    p->a_offset = 0;
    p->lda = (uint32_t)k_p;
    p->a_batch_stride = (uint32_t)(pa.rows_p * k_p);
  }
  if (!b_direct) {
    vk_call_memory(call, 2, &dev->scratch, pb.data_at, pb.data_bytes);
    p->b_offset = 0;
    p->ldb = (uint32_t)kb_p;
    p->b_batch_stride = b_count > 1 ? (uint32_t)(pb.rows_p * kb_p) : 0;
  }
  p->K = (uint32_t)k_p; /* == K unless both are packed */
  return GLLMK_OK;
}

/* F16/BF16 matmul on tensor cores through matmul_khr_f16/bf16.comp: a and
 * b [N, K] are read in place where their offsets and strides allow 16-byte
 * words, else through vk_khr_pack. Returns GLLMK_ERR_UNSUPPORTED (without
 * a message) where the scratch space does not suit, and the caller takes
 * another path. */
static gllmk_status vk_matmul_khr(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  vk_call call;
  vk_kernel kernel = args->a->dtype == GLLMK_BF16 ? VK_KERNEL_matmul_khr_bf16
                                                  : VK_KERNEL_matmul_khr_f16;
  vk_call_init(&call, dev, kernel, args->out->dtype, (VK_KHR_BM / 64) * (VK_KHR_BN / 64) * 32);
  vk_matmul_push p = vk_matmul_bind(&call, args);
  /* With K = 0 the kernel reads neither operand (and there is nothing to pack). */
  int a_direct = p.K == 0 || (p.K | p.lda | p.a_offset | p.a_batch_stride) % 8 == 0;
  int b_direct = p.K == 0 || (args->b_layout == GLLMK_B_NK &&
                              (p.K | p.ldb | p.b_offset | p.b_batch_stride) % 8 == 0);
  if (!a_direct || !b_direct) {
    gllmk_status s = vk_khr_pack(dev, &call, args, a_direct, b_direct, &p);
    if (s != GLLMK_OK) return s;
  }
  uint32_t out_vec = (p.ldo | p.out_offset | p.out_batch_stride) % 8 == 0;
  const uint32_t spec[VK_MAX_SPEC_EXTRA] = {VK_KHR_BM, VK_KHR_BN, VK_KHR_STAGES, VK_KHR_BK,
                                            out_vec};
  memcpy(call.key.extra, spec, sizeof spec);
  uint64_t tiles = vk_groups(p.M, VK_KHR_BM) * vk_groups(p.N, VK_KHR_BN);
  return vk_call_run(&call, &p, sizeof p, tiles, 1, p.batch);
}

/* Whether a matmul of this dtype has a cooperative-matrix kernel: 2 = KHR,
 * 1 = NV (F16 tiles, BF16 packed with scales), 0 = none. */
static int vk_coopmat_kind(const vk_physical *phys, int32_t dtype) {
  if ((dtype == GLLMK_BF16 && phys->coopmat_khr_bf16) ||
      (dtype == GLLMK_F16 && phys->coopmat_khr_f16))
    return 2;
  return dtype != GLLMK_F32 && phys->coopmat_nv ? 1 : 0;
}

gllmk_status vk_matmul(gllmk_plugin_device *dev, const gllmk_matmul_args *args) {
  int32_t nd = args->a->ndim;
  int64_t M = args->a->shape[nd - 2], N = args->out->shape[nd - 1];
  /* a_norm, rope, glu and kv: in the GEMV's reduction (decode), where they
   * save a pass and a launch */
  if ((args->a_norm != GLLMK_A_NORM_NONE || args->rope_dim != 0 || args->glu != GLLMK_GLU_NONE ||
       args->kv_k_cache) &&
      (M > VK_GEMV_M || args->b_layout != GLLMK_B_NK))
    return vk_host->fail(GLLMK_ERR_UNSUPPORTED,
                         "gllmk_matmul: the vulkan backend takes a_norm, rope, glu and kv only with b "
                         "as [N, K] and at most %d rows of a", VK_GEMV_M);
  if (M <= VK_GEMV_M) return vk_matmul_gemv(dev, args);
  int kind = vk_coopmat_kind(dev->phys, args->a->dtype);
  if (kind != 0 && M >= VK_COOP_MIN && N >= VK_COOP_MIN) {
    gllmk_status s = kind == 2 ? vk_matmul_khr(dev, args) : vk_matmul_coop(dev, args);
    if (s != GLLMK_ERR_UNSUPPORTED) return s;
  }
  return vk_matmul_tiled(dev, args);
}
