/*
 * attention.c - the attention family: attention (causal or not, grouped
 * kv heads, kv_lens, lse) and paged_attention (a block table over a paged
 * kv cache). Kernels: kernels/attention.comp and kernels/attention_paged.comp
 * (one shared flash loop, kernels/attention_attend.glsl),
 * kernels/attention_khr_f16.comp and attention_khr_bf16.comp (attention on
 * tensor cores, kernels/attention_khr.glsl) and
 * kernels/attention_paged_decode.comp (paged decode as flash-decoding). From
 * below it takes the launch (vk_call_* of dispatch.c), the device's scratch
 * space (device.c) for decode's partial results, and what probe learned of
 * the device's cooperative matrices and subgroups (plugin.c).
 */
#include <string.h>

#include "ops.h"

#define VK_ATTENTION_GROUP 128

/* Rows per workgroup, keys per tile and the head_dim bound of the shared
 * tiles, by head_dim: every choice stays under 26 KiB of shared memory. */
static void vk_attention_tiles(vk_call *call, int64_t head_dim) {
  uint32_t bq = 16, bk = 16, dmax = 128;
  if (head_dim <= 64) {
    bk = 32;
    dmax = 64;
  } else if (head_dim > 128) {
    bq = 8;
    bk = 8;
    dmax = 256;
  }
  call->key.extra[0] = bq;
  call->key.extra[1] = bk;
  call->key.extra[2] = dmax;
}

/* attention_khr.glsl: 32 rows per workgroup of 64 invocations, head_dim
 * 64 or 128, keys in tiles of 32 (BF16) or 16 (F16, whose split P takes a
 * second tile of P). Its shared memory in bytes: Q, K, V and P in 16 bits,
 * the scores in F32, a 16 x 16 F32 block per subgroup, 20 bytes of
 * statistics per row. */
#define VK_ATTENTION_KHR_GROUP 64
#define VK_ATTENTION_KHR_ROWS 32
static uint32_t vk_attention_khr_keys(int32_t dtype) { return dtype == GLLMK_F16 ? 16 : 32; }
static uint64_t vk_attention_khr_shared(int32_t dtype, uint64_t head_dim) {
  uint64_t rows = VK_ATTENTION_KHR_ROWS, keys = vk_attention_khr_keys(dtype);
  uint64_t p_tiles = dtype == GLLMK_F16 ? 2 : 1;
  return 2 * (rows + 2 * keys) * head_dim + 4 * rows * keys + 2 * p_tiles * rows * keys +
         2 * 256 * 4 + 20 * rows + 4;
}

/* Whether a kernel can read t's rows as 16-byte words: the last dim
 * contiguous, the offset and the other strides multiples of 8 elements, and
 * bindings that start on 16 bytes. */
static int vk_rows_in_words(const gllmk_plugin_device *dev, const gllmk_tensor *t) {
  uint64_t align = dev->phys->limits.minStorageBufferOffsetAlignment;
  int64_t strides = 0;
  for (int32_t i = 0; i + 1 < t->ndim; i++) strides |= t->strides[i];
  return t->strides[t->ndim - 1] == 1 && t->offset % 8 == 0 && strides % 8 == 0 &&
         align % 16 == 0;
}

/* Sets up call for the op's kernel: attention_khr_f16/bf16 on tensor cores
 * where the device has the matching cooperative matrices and the shared
 * memory and q, k and v allow 16-byte rows, attention.comp otherwise.
 * Returns the kernel's rows per workgroup. */
static uint32_t vk_attention_kernel(vk_call *call, gllmk_plugin_device *dev,
                                    const gllmk_attention_args *args) {
  const vk_physical *phys = dev->phys;
  const gllmk_tensor *q = args->q;
  int32_t dtype = q->dtype;
  uint64_t head_dim = (uint64_t)q->shape[3];
  int khr = ((dtype == GLLMK_BF16 && phys->coopmat_khr_bf16) ||
             (dtype == GLLMK_F16 && phys->coopmat_khr_f16)) &&
            (head_dim == 64 || head_dim == 128) &&
            vk_attention_khr_shared(dtype, head_dim) <= phys->limits.maxComputeSharedMemorySize &&
            vk_rows_in_words(dev, q) && vk_rows_in_words(dev, args->k) &&
            vk_rows_in_words(dev, args->v);
  if (!khr) {
    vk_call_init(call, dev, VK_KERNEL_attention, dtype, VK_ATTENTION_GROUP);
    vk_attention_tiles(call, q->shape[3]);
    return call->key.extra[0];
  }
  vk_call_init(call, dev,
               dtype == GLLMK_BF16 ? VK_KERNEL_attention_khr_bf16 : VK_KERNEL_attention_khr_f16,
               dtype, VK_ATTENTION_KHR_GROUP);
  call->key.extra[0] = (uint32_t)head_dim;
  call->key.extra[1] = vk_attention_khr_keys(dtype);
  return VK_ATTENTION_KHR_ROWS;
}

gllmk_status vk_attention(gllmk_plugin_device *dev, const gllmk_attention_args *args) {
  const gllmk_tensor *q = args->q, *k = args->k, *v = args->v, *out = args->out;
  vk_call call;
  uint32_t rows_per_group = vk_attention_kernel(&call, dev, args);
  call.key.variant = args->causal ? 1 : 0;
  struct {
    uint32_t sq, skv, hq, head_dim, group;
    float scale;
    uint32_t has_lens, has_lse;
    uint32_t q_offset, q_sb, q_ss, q_sh, k_offset, k_sb, k_ss, k_sh, v_offset, v_sb, v_ss, v_sh,
        o_offset, o_sb, o_ss, o_sh, lens_offset, lse_offset;
  } p;
  memset(&p, 0, sizeof p);
  p.sq = vk_call_u32(&call, q->shape[1], "Sq");
  p.skv = vk_call_u32(&call, k->shape[1], "Skv");
  p.hq = vk_call_u32(&call, q->shape[2], "Hq");
  p.head_dim = (uint32_t)q->shape[3];
  p.group = (uint32_t)(q->shape[2] / k->shape[2]);
  p.scale = args->scale;
  p.o_offset = vk_call_tensor(&call, 0, out);
  p.q_offset = vk_call_tensor(&call, 1, q);
  p.k_offset = vk_call_tensor(&call, 2, k);
  p.v_offset = vk_call_tensor(&call, 3, v);
  uint32_t *strides[4][3] = {{&p.o_sb, &p.o_ss, &p.o_sh},
                             {&p.q_sb, &p.q_ss, &p.q_sh},
                             {&p.k_sb, &p.k_ss, &p.k_sh},
                             {&p.v_sb, &p.v_ss, &p.v_sh}};
  const gllmk_tensor *tensors[4] = {out, q, k, v};
  for (int t = 0; t < 4; t++)
    for (int d = 0; d < 3; d++) *strides[t][d] = vk_call_stride(&call, tensors[t], d);
  if (args->kv_lens) {
    p.has_lens = 1;
    p.lens_offset = vk_call_tensor(&call, 4, args->kv_lens);
  }
  if (args->lse) {
    p.has_lse = 1;
    p.lse_offset = vk_call_tensor(&call, 5, args->lse);
  }
  uint64_t rows = (uint64_t)p.sq * p.group;
  return vk_call_run(&call, &p, sizeof p, vk_groups(rows, rows_per_group),
                     (uint64_t)k->shape[2], (uint64_t)q->shape[0]);
}

/* The push constants of attention_paged.comp and attention_paged_decode.comp
 * (which alone reads the last three). */
typedef struct vk_paged_push {
  uint32_t tokens, batch, hq, head_dim, group;
  float scale;
  uint32_t block_size, max_blocks, cache_blocks, hkv;
  uint32_t q_offset, q_st, q_sh, o_offset, o_st, o_sh;
  uint32_t k_offset, v_offset, table_offset, starts_offset, lens_offset;
  uint32_t splits, split_keys, head_chunks;
} vk_paged_push;

/* Binds the op's tensors to `call` and fills everything in `p` but the
 * split. */
static void vk_paged_bind(vk_call *call, const gllmk_paged_attention_args *args,
                          vk_paged_push *p) {
  const gllmk_tensor *q = args->q, *out = args->out, *kc = args->k_cache;
  memset(p, 0, sizeof *p);
  p->tokens = vk_call_u32(call, q->shape[0], "T");
  p->batch = vk_call_u32(call, args->block_table->shape[0], "the batch");
  p->hq = vk_call_u32(call, q->shape[1], "Hq");
  p->head_dim = (uint32_t)q->shape[2];
  p->group = (uint32_t)(q->shape[1] / kc->shape[2]);
  p->scale = args->scale;
  p->block_size = vk_call_u32(call, kc->shape[1], "the block size");
  p->max_blocks = vk_call_u32(call, args->block_table->shape[1], "max_blocks");
  p->cache_blocks = vk_call_u32(call, kc->shape[0], "the cache blocks");
  p->hkv = (uint32_t)kc->shape[2];
  p->o_offset = vk_call_tensor(call, 0, out);
  p->o_st = vk_call_stride(call, out, 0);
  p->o_sh = vk_call_stride(call, out, 1);
  p->q_offset = vk_call_tensor(call, 1, q);
  p->q_st = vk_call_stride(call, q, 0);
  p->q_sh = vk_call_stride(call, q, 1);
  p->k_offset = vk_call_tensor(call, 2, kc);
  p->v_offset = vk_call_tensor(call, 3, args->v_cache);
  p->table_offset = vk_call_tensor(call, 4, args->block_table);
  p->starts_offset = vk_call_tensor(call, 5, args->q_starts);
  p->lens_offset = vk_call_tensor(call, 6, args->seq_lens);
}

/* attention_paged_decode.comp: workgroup size, and how many of its
 * workgroups a compute unit holds at once (NVIDIA H100: 64 registers an
 * invocation for 16-bit caches, 80 for F32). Keys are split so that every
 * workgroup of the dispatch is resident at once: a second, partial wave cost
 * more than shorter splits save (H100, bf16 / f32 B=16 L=4096, bf16 B=64
 * L=1024, us: aiming at 16 workgroups per unit 146-148 / 235-242 / 141-143,
 * at 8 151 / 237 / 130, one wave 121-124 / 219-222 / 122-128). */
#define VK_DECODE_GROUP 128
#define VK_DECODE_RESIDENT_16BIT 8
#define VK_DECODE_RESIDENT_F32 6
#define VK_DECODE_MIN_SPLIT_KEYS 128
/* Its bounds HEADS_MAX and WPL_MAX: query heads per workgroup, and 16-byte
 * words of a key row per invocation (head_dim 256 needs subgroups of 32). */
#define VK_DECODE_HEADS 2
#define VK_DECODE_WORDS_PER_LANE 2

/* attention_paged_decode.comp where it applies (at most one new token per
 * sequence on average, head_dim 8 * a power of two up to 256 and at most
 * 16 * subgroup size, q and the caches in 16-byte words); returns 0
 * elsewhere. */
static int vk_paged_decode(gllmk_plugin_device *dev, const gllmk_paged_attention_args *args,
                           gllmk_status *status) {
  const vk_physical *phys = dev->phys;
  const gllmk_tensor *q = args->q, *kc = args->k_cache;
  int64_t tokens = q->shape[0], head_dim = q->shape[2];
  int64_t words = head_dim / 8;
  if (!phys->subgroup_shuffle || tokens == 0 || tokens > args->block_table->shape[0] ||
      head_dim % 8 != 0 || words > 32 || (words & (words - 1)) != 0 ||
      !vk_rows_in_words(dev, q) || kc->offset % 8 != 0 || args->v_cache->offset % 8 != 0)
    return 0;
  uint32_t lanes = (uint32_t)words < phys->subgroup_size ? (uint32_t)words : phys->subgroup_size;
  if (words / lanes > VK_DECODE_WORDS_PER_LANE) return 0;
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_attention_paged_decode, q->dtype, VK_DECODE_GROUP);
  vk_paged_push p;
  vk_paged_bind(&call, args, &p);
  uint32_t heads = p.group < VK_DECODE_HEADS ? p.group : VK_DECODE_HEADS;
  call.key.extra[0] = heads;
  call.key.extra[1] = lanes;
  call.key.extra[2] = (uint32_t)words / lanes;
  call.key.extra[3] = p.block_size;
  p.head_chunks = (p.group + heads - 1) / heads;
  /* Split every token's keys (at most max_keys) into as many parts as keep
   * the dispatch one wave, with VK_DECODE_MIN_SPLIT_KEYS keys at least. */
  uint64_t resident = q->dtype == GLLMK_F32 ? VK_DECODE_RESIDENT_F32 : VK_DECODE_RESIDENT_16BIT;
  uint64_t splits;
  uint64_t split_keys = vk_split_into(
      (uint64_t)p.max_blocks * p.block_size,
      resident * vk_compute_units(dev) / ((uint64_t)p.tokens * p.hkv * p.head_chunks),
      VK_DECODE_MIN_SPLIT_KEYS, 1, &splits);
  p.split_keys = vk_call_u32(&call, split_keys, "a split of the keys");
  p.splits = (uint32_t)splits;
  uint64_t partials = (uint64_t)p.tokens * p.hq * p.splits * (p.head_dim + 2) * sizeof(float);
  *status = vk_scratch_reserve(dev, partials);
  if (*status != GLLMK_OK) return 1;
  vk_call_memory(&call, 7, &dev->scratch, 0, partials);
  *status = vk_call_run(&call, &p, sizeof p, p.tokens, (uint64_t)p.hkv * p.head_chunks, p.splits);
  if (*status != GLLMK_OK) return 1;
  call.key.variant = 1;
  *status = vk_call_run(&call, &p, sizeof p, (uint64_t)p.tokens * p.hq, 1, 1);
  return 1;
}

gllmk_status vk_paged_attention(gllmk_plugin_device *dev, const gllmk_paged_attention_args *args) {
  gllmk_status s;
  if (vk_paged_decode(dev, args, &s)) return s;
  const gllmk_tensor *q = args->q;
  vk_call call;
  vk_call_init(&call, dev, VK_KERNEL_attention_paged, q->dtype, VK_ATTENTION_GROUP);
  vk_attention_tiles(&call, q->shape[2]);
  vk_paged_push p;
  vk_paged_bind(&call, args, &p);
  /* Any one sequence may hold all T tokens: the grid covers that. */
  uint64_t rows = (uint64_t)p.tokens * p.group;
  return vk_call_run(&call, &p, sizeof p, vk_groups(rows, call.key.extra[0]), p.hkv, p.batch);
}
