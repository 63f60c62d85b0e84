/*
 * attention.c - the attention family on the cpu: attention and
 * paged_attention. The host code and the flash-attention loop are here,
 * with the portable softmax step and direct products; their AVX2 and NEON
 * versions are in attention_avx2.c and attention_neon.c (attention.h). The
 * packed products run on the GEMM micro-kernels below (cpu_gemm.h:
 * cpu_gemm.c, cpu_gemm_avx2.c, cpu_gemm_avx512.c, cpu_gemm_neon.c), the
 * tasks on cpu_run_tasks (cpu_tasks.c).
 *
 * Both attention ops describe each sequence the same way (attn_seq: where
 * its query and output rows are, which keys each query position sees, where
 * a key's row lives: directly or through a block table) and share one
 * flash-attention loop (attend). A task holds up to ATTN_ROWS query rows,
 * walks their keys in blocks of ATTN_KEYS and keeps a running max, sum and
 * output per row (online softmax), so memory does not grow with the
 * sequence lengths. Tasks come in two shapes:
 *  - head tiles (prefill): the heads of one kv head's group times a few
 *    query positions, over all keys. The products of a block, scores =
 *    Q K^T and out += P V, run on the GEMM micro-kernels over packed tiles.
 *  - key chunks (decode, a few rows per kv head): every head of a sequence
 *    over one range of keys, so that each key position's rows of all heads
 *    are read together (the cache is read sequentially); the products run
 *    straight on the key and value rows. With several chunks per sequence
 *    (to use every thread), their partial results are merged at the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "ops.h"

enum {
  ATTN_ROWS = 96,       /* query rows per task: a multiple of every micro-kernel's MR */
  ATTN_KEYS = 64,       /* keys per block: a multiple of every micro-kernel's NR, <= ATTN_ROWS */
  ATTN_DIRECT_ROWS = 8, /* rows per kv head up to which products skip packing */
  ATTN_CHUNK_KEYS = 256, /* fewest keys worth a chunk of their own */
  ATTN_THREAD_CHUNKS = 8 /* key chunks per thread for a few sequences (decode) */
};
_Static_assert(ATTN_ROWS % CPU_GEMM_GENERIC_MR == 0 && ATTN_ROWS % CPU_GEMM_AVX2_MR == 0 &&
                   ATTN_ROWS % CPU_GEMM_AVX512_MR == 0 && ATTN_ROWS % CPU_GEMM_NEON_MR == 0,
               "ATTN_ROWS must be a multiple of every micro-kernel's MR");
_Static_assert(ATTN_KEYS % CPU_GEMM_GENERIC_NR == 0 && ATTN_KEYS % CPU_GEMM_AVX2_NR == 0 &&
                   ATTN_KEYS % CPU_GEMM_AVX512_NR == 0 && ATTN_KEYS % CPU_GEMM_NEON_NR == 0 &&
                   ATTN_KEYS <= ATTN_ROWS,
               "ATTN_KEYS must be a multiple of every micro-kernel's NR, at most ATTN_ROWS");

static void softmax_step_generic(float *row, int64_t visible, int64_t width, float *max, float *sum,
                                 float *o, int64_t d) {
  float block_max = row[0];
  for (int64_t j = 1; j < visible; j++)
    if (row[j] > block_max) block_max = row[j];
  if (block_max > *max) {
    float rescale = expf(*max - block_max); /* 0 on the first block (max = -inf) */
    *sum *= rescale;
    for (int64_t i = 0; i < d; i++) o[i] *= rescale;
    *max = block_max;
  }
  for (int64_t j = 0; j < visible; j++) {
    row[j] = expf(row[j] - *max);
    *sum += row[j];
  }
  for (int64_t j = visible; j < width; j++) row[j] = 0.0f;
}

static void scores_generic(int32_t dtype, int64_t rows, int64_t keys, int64_t d, const float *q,
                           int64_t ldq, const void *const *k_rows, float scale, float *s,
                           int64_t lds) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < keys; j++) {
      float sum = 0.0f;
      for (int64_t i = 0; i < d; i++)
        sum += q[r * ldq + i] * cpu_element_f32(dtype, k_rows[j], i);
      s[r * lds + j] = scale * sum;
    }
}

static void accumulate_generic(int32_t dtype, int64_t rows, int64_t keys, int64_t d,
                               const float *p, int64_t ldp, const void *const *v_rows, float *o,
                               int64_t ldo) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t j = 0; j < keys; j++)
      for (int64_t i = 0; i < d; i++)
        o[r * ldo + i] += p[r * ldp + j] * cpu_element_f32(dtype, v_rows[j], i);
}

static const cpu_attention_direct attention_direct_generic = {
    .scores = scores_generic,
    .accumulate = accumulate_generic,
};

/* ------------------------------------------------------- the shared loop */

/* Where the keys and values of one sequence and kv head are. */
typedef struct kv_source {
  int32_t dtype;
  int64_t d;
  const char *k, *v;      /* position 0, or slot 0 of cache block 0 when paged */
  int64_t k_step, v_step; /* elements from one position (or slot) to the next */
  /* Paged: the sequence's block table row; NULL for contiguous keys. */
  const int32_t *blocks;
  int64_t block_size, k_block_step, v_block_step;
} kv_source;

/* One sequence of either op. Query position i sees keys 0 .. last(i), with
 * last(i) = last0 (+ i when causal); a position whose last key is not below
 * `keys` sees none (its output is zeros). Steps are in elements. */
typedef struct attn_seq {
  int64_t q_len;
  const char *q;
  char *out;
  float *lse; /* NULL: not wanted */
  int64_t q_pos_step, q_head_step, out_pos_step, out_head_step, lse_pos_step, lse_head_step;
  int64_t last0;
  int causal;
  int64_t keys;
  kv_source kv; /* of kv head 0 */
  int64_t k_head_step, v_head_step;
} attn_seq;

static int64_t seq_last(const attn_seq *seq, int64_t i) {
  int64_t last = seq->causal ? seq->last0 + i : seq->last0;
  return last < seq->keys && last >= 0 ? last : -1;
}

/* The query rows of one task, in groups that share a kv head: group g is
 * rows [g ? group_end[g - 1] : 0, group_end[g]) and reads kv[g]. */
typedef struct attn_rows {
  int64_t count, groups;
  int64_t group_end[ATTN_ROWS];
  kv_source kv[ATTN_ROWS];
  const char *q[ATTN_ROWS];
  char *out[ATTN_ROWS];
  float *lse[ATTN_ROWS];   /* NULL: not wanted */
  int64_t last[ATTN_ROWS]; /* the last key position the row sees; -1: none */
} attn_rows;

/* Adds the rows of kv head `kv_head`'s query heads [h0, h1) at positions
 * [i0, i1) as one group. */
static void add_group(attn_rows *rows, const attn_seq *seq, int64_t kv_head, int64_t h0, int64_t h1,
                      int64_t i0, int64_t i1) {
  size_t esize = gllmk_plugin_dtype_size(seq->kv.dtype);
  kv_source *kv = &rows->kv[rows->groups];
  *kv = seq->kv;
  kv->k += (size_t)(kv_head * seq->k_head_step) * esize;
  kv->v += (size_t)(kv_head * seq->v_head_step) * esize;
  for (int64_t i = i0; i < i1; i++) {
    int64_t last = seq_last(seq, i);
    for (int64_t h = h0; h < h1; h++) {
      int64_t r = rows->count++;
      rows->q[r] = seq->q + (size_t)(i * seq->q_pos_step + h * seq->q_head_step) * esize;
      rows->out[r] = seq->out + (size_t)(i * seq->out_pos_step + h * seq->out_head_step) * esize;
      rows->lse[r] = seq->lse ? seq->lse + i * seq->lse_pos_step + h * seq->lse_head_step : NULL;
      rows->last[r] = last;
    }
  }
  rows->group_end[rows->groups++] = rows->count;
}

/* Per-task memory. Row counts are padded to whole micro-tiles (the padding
 * rows hold zeros), head dims to whole NR panels. */
typedef struct attn_scratch {
  float *q;         /* ATTN_ROWS x d: F32 rows (direct) or micro-kernel A panels */
  float *o;         /* ATTN_ROWS x d_pad: running output sums */
  float *s;         /* ATTN_ROWS x ATTN_KEYS: scores, then probabilities */
  float *p_packed;  /* ATTN_ROWS x ATTN_KEYS, as A panels */
  float *k_packed;  /* ATTN_KEYS x d, as B panels of K^T */
  float *v_packed;  /* ATTN_KEYS x d_pad, as B panels */
  float *tile;      /* ATTN_ROWS x d: rows converted to F32 (queries, F16/BF16 keys) */
  float *max, *sum; /* ATTN_ROWS: the online-softmax state */
} attn_scratch;

/* Bytes of scratch a task needs; with `base`, also where each part is. */
static size_t attn_scratch_layout(const cpu_gemm_isa *isa, int64_t d, char *base, attn_scratch *s) {
  int64_t d_pad = cpu_round_up(d, isa->nr);
  int64_t sizes[9] = {ATTN_ROWS * d,         ATTN_ROWS * d_pad, ATTN_ROWS * ATTN_KEYS,
                      ATTN_ROWS * ATTN_KEYS, ATTN_KEYS * d,     ATTN_KEYS * d_pad,
                      ATTN_ROWS * d,         ATTN_ROWS,         ATTN_ROWS};
  float **parts[9] = {&s->q,        &s->o,    &s->s,   &s->p_packed, &s->k_packed,
                      &s->v_packed, &s->tile, &s->max, &s->sum};
  size_t offset = 0;
  for (int i = 0; i < 9; i++) {
    if (base) *parts[i] = (float *)(void *)(base + offset);
    offset += (size_t)cpu_round_up(sizes[i], 16) * sizeof(float);
  }
  return offset;
}

/* The element offsets from the kv head's base of the key (values: value)
 * rows of positions [first, first + count). Paged caches are walked slot by
 * slot rather than divided for every position. */
static void kv_offsets(const kv_source *kv, int values, int64_t first, int64_t count,
                       int64_t *offsets) {
  const int64_t step = values ? kv->v_step : kv->k_step;
  if (!kv->blocks) {
    for (int64_t j = 0; j < count; j++) offsets[j] = (first + j) * step;
    return;
  }
  const int64_t block_step = values ? kv->v_block_step : kv->k_block_step;
  int64_t block = first / kv->block_size, slot = first % kv->block_size;
  for (int64_t j = 0; j < count; j++, slot++) {
    if (slot == kv->block_size) {
      block++;
      slot = 0;
    }
    offsets[j] = kv->blocks[block] * block_step + slot * step;
  }
}

/* Points rows[j] at the F32 key (values: value) row of position first + j,
 * for j < count <= ATTN_KEYS: the row itself for F32, else converted into
 * `tile`. */
static void kv_rows(const kv_source *kv, int values, int64_t first, int64_t count,
                    const float **rows, float *tile) {
  const size_t esize = gllmk_plugin_dtype_size(kv->dtype);
  const char *base = values ? kv->v : kv->k;
  int64_t offsets[ATTN_KEYS];
  kv_offsets(kv, values, first, count, offsets);
  for (int64_t j = 0; j < count; j++) {
    const char *row = base + (size_t)offsets[j] * esize;
    if (kv->dtype == GLLMK_F32) {
      rows[j] = (const float *)(const void *)row;
    } else {
      cpu_load_f32(kv->dtype, row, tile + j * kv->d, kv->d);
      rows[j] = tile + j * kv->d;
    }
  }
}

/* c (rows x cols, both multiples of the micro-tile; row stride ldc) =
 * epilogue(a_packed * b_packed) over kc steps. */
static void tile_product(const cpu_gemm_isa *isa, int64_t rows, int64_t cols, int64_t kc,
                         const float *a_packed, const float *b_packed, float *c, int64_t ldc,
                         const cpu_gemm_epilogue *ep) {
  for (int64_t i = 0; i < rows; i += isa->mr)
    for (int64_t j = 0; j < cols; j += isa->nr)
      isa->micro(kc, a_packed + i * kc, b_packed + j * kc, c + i * ldc + j, ldc, ep);
}

/* Packs `count` F32 rows of kc elements into A panels (zero rows up to a
 * whole panel). */
static void pack_a(const cpu_gemm_isa *isa, const float *const *rows, int64_t count, int64_t kc,
                   float *dst) {
  for (int64_t i = 0; i < count; i += isa->mr)
    isa->pack_transposed(rows + i, count - i < isa->mr ? count - i : isa->mr, kc, isa->mr,
                         dst + i * kc);
}

/* Packs count rows of d values into B panels of nr columns (zero past d). */
static void pack_b(const cpu_gemm_isa *isa, const float **rows, int64_t count, int64_t d,
                   float *dst) {
  for (int64_t j = 0; j < d; j += isa->nr) {
    isa->pack_rows(rows, count, d - j < isa->nr ? d - j : isa->nr, isa->nr, dst + j * count);
    for (int64_t k = 0; k < count; k++) rows[k] += isa->nr; /* on to the next panel */
  }
}

/* What a task does with its rows' sums at the end: divides them out into
 * the outputs, or (one key chunk of several) leaves max, sum and the sums
 * in `partial`, d + 2 floats per row. */
static void finish_rows(const attn_rows *rows, int64_t d, int64_t d_pad, const attn_scratch *s,
                        float *partial) {
  int32_t dtype = rows->kv[0].dtype;
  for (int64_t r = 0; r < rows->count; r++) {
    float *o = s->o + r * d_pad;
    float sum = s->sum[r];
    if (partial) {
      float *p = partial + r * (d + 2);
      p[0] = s->max[r];
      p[1] = sum;
      memcpy(p + 2, o, (size_t)d * sizeof(float));
      continue;
    }
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t i = 0; i < d; i++) o[i] *= inv;
    cpu_store_f32(dtype, o, rows->out[r], d);
    if (rows->lse[r]) *rows->lse[r] = sum > 0.0f ? s->max[r] + logf(sum) : -INFINITY;
  }
}

/* One pass of the direct products over a block of keys: which rows it reads
 * (keys, or values) and where, in elements from each kv head's base. Every
 * group's rows share the layout; only the kv head's base differs. */
typedef struct kv_pass {
  int values;
  int64_t count;
  int64_t offsets[ATTN_KEYS];
} kv_pass;

/* The pass over the block of keys from `first` (the rows see keys up to
 * `end`). */
static void kv_pass_of(const attn_rows *rows, int values, int64_t first, int64_t end,
                       kv_pass *pass) {
  pass->values = values;
  pass->count = end - first < ATTN_KEYS ? end - first : ATTN_KEYS;
  kv_offsets(&rows->kv[0], values, first, pass->count, pass->offsets);
}

/* Prefetches `step` rows of `pass`'s keys [j, j + step) for group g's call
 * (over a step, the calls of all groups fetch all those rows). Rows shorter
 * than 512 bytes are taken key by key (every group's row of key j, then of
 * key j + 1, ...), which is address order where a position holds every kv
 * head's row side by side; longer ones group by group (group g's rows).
 * Read-only tests of this access pattern on two AVX2 cores (2026-11-29):
 * 256-byte rows 15.8-16.9 GB/s group by group, 18.9-20.0 in address order;
 * 512-byte rows 20.9-22.3 against 19.5-20.4. The hardware prefetcher
 * follows neither across a cache block's positions by itself. Inlined: as a
 * function of its own GCC finds it free of side effects and drops the
 * calls. */
static ALWAYS_INLINE void prefetch_rows(const attn_rows *rows, const kv_pass *pass, int64_t j,
                                        int64_t g, int64_t step) {
  const size_t esize = gllmk_plugin_dtype_size(rows->kv[0].dtype);
  const int64_t row_bytes = rows->kv[0].d * (int64_t)esize, groups = rows->groups;
  const int by_key = row_bytes < 512;
  int64_t t = by_key ? j + g * step / groups : j, h = by_key ? g * step % groups : g;
  for (int64_t x = 0; x < step && t < pass->count; x++) {
    const char *row =
        (pass->values ? rows->kv[h].v : rows->kv[h].k) + (size_t)pass->offsets[t] * esize;
    for (int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row + b, 0, 3);
    if (!by_key) {
      t++;
    } else if (++h == groups) {
      h = 0;
      t++;
    }
  }
}

/* Scores (or, for a values pass, o += P V) of every group for the keys of
 * `pass`, straight from the key and value rows as stored. A few keys at a
 * time go through all groups, so that each position's rows of all kv heads
 * are read close together (in the usual layout: the cache sequentially).
 * Meanwhile the rows of the next few keys are prefetched (prefetch_rows:
 * STEP rows per group's call, so all groups' rows of STEP keys a step): this
 * pass's, then those of `next` (NULL: none), so that no pass starts on rows
 * still in memory (the first STEP keys of every pass did, which cost more
 * than the rest). STEP 4 measured a little faster than 8 and much faster
 * than 16: fewer prefetches in flight at once. */
static void direct_products(const cpu_attention_direct *isa, const attn_rows *rows,
                            const kv_pass *pass, const kv_pass *next, float scale,
                            int64_t d_pad, const attn_scratch *s) {
  enum { STEP = 4 };
  const int32_t dtype = rows->kv[0].dtype;
  const int64_t d = rows->kv[0].d;
  const size_t esize = gllmk_plugin_dtype_size(dtype);
  const int64_t count = pass->count;
  const void *ptrs[STEP];
  for (int64_t j = 0; j < count; j += STEP) {
    int64_t keys = count - j < STEP ? count - j : STEP;
    for (int64_t g = 0, r0 = 0; g < rows->groups; r0 = rows->group_end[g++]) {
      const char *base = pass->values ? rows->kv[g].v : rows->kv[g].k;
      for (int64_t t = 0; t < keys; t++) ptrs[t] = base + (size_t)pass->offsets[j + t] * esize;
      if (j + STEP < count)
        prefetch_rows(rows, pass, j + STEP, g, STEP);
      else if (next)
        prefetch_rows(rows, next, 0, g, STEP);
      int64_t n = rows->group_end[g] - r0;
      if (pass->values)
        isa->accumulate(dtype, n, keys, d, s->s + r0 * ATTN_KEYS + j, ATTN_KEYS, ptrs,
                        s->o + r0 * d_pad, d_pad);
      else
        isa->scores(dtype, n, keys, d, s->q + r0 * d, d, ptrs, scale, s->s + r0 * ATTN_KEYS + j,
                    ATTN_KEYS);
    }
  }
}

/* Runs the rows over keys [key_begin, key_end) (each row stops at its last
 * key). Packed products need a single group. */
static void attend(const attn_rows *rows, int64_t key_begin, int64_t key_end, float scale,
                   const attn_scratch *s, float *partial) {
  const cpu_gemm_isa *isa = cpu_gemm_select();
  const cpu_attention_direct *direct_isa = &attention_direct_generic;
  cpu_softmax_step_fn softmax_step = softmax_step_generic;
#if defined(__x86_64__)
  if (cpu_has.avx2 && cpu_has.fma && cpu_has.f16c) {
    direct_isa = &cpu_attention_direct_avx2;
    softmax_step = cpu_softmax_step_avx2;
  }
#elif defined(__aarch64__)
  if (cpu_has.neon) {
    direct_isa = &cpu_attention_direct_neon;
    softmax_step = cpu_softmax_step_neon;
  }
#endif
  const int64_t d = rows->kv[0].d, d_pad = cpu_round_up(d, isa->nr);
  const int direct = rows->groups > 1 || rows->count <= ATTN_DIRECT_ROWS;
  const int64_t padded_rows = direct ? rows->count : cpu_round_up(rows->count, isa->mr);
  const cpu_gemm_epilogue scores_ep = {scale, 0.0f, 0, NULL};
  const cpu_gemm_epilogue add_ep = {1.0f, 1.0f, 1, NULL};
  const float *row_ptrs[ATTN_ROWS], *kv_ptrs[ATTN_KEYS];

  /* Q as F32 rows; packed into A panels unless direct. */
  float *q_rows = direct ? s->q : s->tile;
  int64_t end = key_begin;
  for (int64_t r = 0; r < rows->count; r++) {
    cpu_load_f32(rows->kv[0].dtype, rows->q[r], q_rows + r * d, d);
    row_ptrs[r] = q_rows + r * d;
    s->max[r] = -INFINITY;
    s->sum[r] = 0.0f;
    if (rows->last[r] + 1 > end) end = rows->last[r] + 1;
  }
  if (end > key_end) end = key_end;
  if (!direct) pack_a(isa, row_ptrs, rows->count, d, s->q);
  memset(s->o, 0, (size_t)(padded_rows * d_pad) * sizeof(float));
  /* From here on row_ptrs are the rows of P; padding rows stay zero. */
  for (int64_t r = 0; r < padded_rows; r++) row_ptrs[r] = s->s + r * ATTN_KEYS;
  memset(s->s, 0, (size_t)(padded_rows * ATTN_KEYS) * sizeof(float));

  /* Direct: the block's key and value passes and the next block's keys. */
  kv_pass passes[3], *k_pass = &passes[0], *v_pass = &passes[1], *next_k_pass = &passes[2];
  if (direct && key_begin < end) kv_pass_of(rows, 0, key_begin, end, k_pass);
  for (int64_t first = key_begin; first < end; first += ATTN_KEYS) {
    int64_t count = end - first < ATTN_KEYS ? end - first : ATTN_KEYS;
    /* scores = scale * Q K^T (packed: keys past `count` are zeros) */
    if (direct) {
      kv_pass_of(rows, 1, first, end, v_pass);
      direct_products(direct_isa, rows, k_pass, v_pass, scale, d_pad, s);
    } else {
      kv_rows(&rows->kv[0], 0, first, count, kv_ptrs, s->tile);
      for (int64_t j = 0; j < ATTN_KEYS; j += isa->nr) {
        int64_t keys = count - j < isa->nr ? count - j : isa->nr;
        isa->pack_transposed(kv_ptrs + j, keys > 0 ? keys : 0, d, isa->nr, s->k_packed + j * d);
      }
      tile_product(isa, padded_rows, ATTN_KEYS, d, s->q, s->k_packed, s->s, ATTN_KEYS, &scores_ep);
    }
    for (int64_t r = 0; r < rows->count; r++) {
      float *row = s->s + r * ATTN_KEYS;
      int64_t visible = rows->last[r] - first + 1;
      if (visible > count) visible = count;
      if (visible > 0)
        softmax_step(row, visible, ATTN_KEYS, &s->max[r], &s->sum[r], s->o + r * d_pad, d_pad);
      else
        memset(row, 0, ATTN_KEYS * sizeof(float));
    }
    /* o += P V */
    if (direct) {
      const int64_t next = first + ATTN_KEYS;
      if (next < end) kv_pass_of(rows, 0, next, end, next_k_pass);
      direct_products(direct_isa, rows, v_pass, next < end ? next_k_pass : NULL, scale, d_pad, s);
      kv_pass *done = k_pass;
      k_pass = next_k_pass;
      next_k_pass = done;
    } else {
      kv_rows(&rows->kv[0], 1, first, count, kv_ptrs, s->tile);
      pack_b(isa, kv_ptrs, count, d, s->v_packed);
      pack_a(isa, row_ptrs, padded_rows, count, s->p_packed);
      tile_product(isa, padded_rows, d_pad, count, s->p_packed, s->v_packed, s->o, d_pad, &add_ep);
    }
  }
  finish_rows(rows, d, d_pad, s, partial);
}

/* ----------------------------------------------------------- the tasks */

/* How a head tile's rows split a kv head's query heads and query positions. */
typedef struct row_split {
  int64_t group;      /* query heads per kv head */
  int64_t heads;      /* query heads per task */
  int64_t head_parts; /* tasks across one group's heads */
  int64_t positions;  /* query positions per task */
} row_split;

static row_split split_rows(int64_t hq, int64_t hkv) {
  row_split split;
  split.group = hq / hkv;
  split.heads = split.group < ATTN_ROWS ? split.group : ATTN_ROWS;
  split.head_parts = (split.group + split.heads - 1) / split.heads;
  split.positions = ATTN_ROWS / split.heads;
  return split;
}

/* The work of one attention call: its sequences and how they split. */
typedef struct attn_job {
  int64_t sequences, hq, hkv, d;
  float scale;
  row_split split;
  attn_seq *seqs;         /* [sequences] */
  int64_t *task_start;    /* [sequences + 1] */
  int64_t *chunks;        /* [sequences]: key chunks of all heads, or 0 for head tiles */
  int64_t *chunk_keys;    /* [sequences] */
  int64_t *partial_start; /* [sequences]: floats before the sequence's partial results */
  float *partials;        /* when some sequence has several chunks */
} attn_job;

/* Adds every head of sequence `seq` at every position, one group per kv head. */
static void add_all_heads(attn_rows *rows, const attn_job *job, const attn_seq *seq) {
  for (int64_t g = 0; g < job->hkv; g++)
    add_group(rows, seq, g, g * job->split.group, (g + 1) * job->split.group, 0, seq->q_len);
}

static void attn_task(void *ctx, int64_t task, void *scratch) {
  const attn_job *job = ctx;
  int64_t lo = 0, hi = job->sequences; /* b: task_start[b] <= task < task_start[b + 1] */
  while (hi - lo > 1) {
    int64_t mid = (lo + hi) / 2;
    if (job->task_start[mid] <= task)
      lo = mid;
    else
      hi = mid;
  }
  const int64_t b = lo;
  const attn_seq *seq = &job->seqs[b];
  task -= job->task_start[b];
  attn_scratch s;
  attn_scratch_layout(cpu_gemm_select(), job->d, scratch, &s);
  attn_rows rows;
  rows.count = rows.groups = 0;

  if (job->chunks[b] > 0) {
    add_all_heads(&rows, job, seq);
    float *partial = job->chunks[b] > 1
                         ? job->partials + job->partial_start[b] + task * rows.count * (job->d + 2)
                         : NULL;
    attend(&rows, task * job->chunk_keys[b], (task + 1) * job->chunk_keys[b], job->scale, &s,
           partial);
    return;
  }
  /* Head tiles; those of late query positions (most keys if causal) first. */
  int64_t position_blocks = (seq->q_len + job->split.positions - 1) / job->split.positions;
  int64_t block = position_blocks - 1 - task % position_blocks;
  task /= position_blocks;
  int64_t head_part = task % job->split.head_parts, kv_head = task / job->split.head_parts;
  int64_t h0 = kv_head * job->split.group + head_part * job->split.heads;
  int64_t h1 = h0 + job->split.heads;
  if (h1 > (kv_head + 1) * job->split.group) h1 = (kv_head + 1) * job->split.group;
  int64_t i0 = block * job->split.positions;
  int64_t i1 = i0 + job->split.positions < seq->q_len ? i0 + job->split.positions : seq->q_len;
  add_group(&rows, seq, kv_head, h0, h1, i0, i1);
  attend(&rows, 0, INT64_MAX, job->scale, &s, NULL);
}

/* Combines the key chunks of sequence b: the row sums of each chunk count
 * with weight exp(chunk max - overall max). */
static void merge_chunks(const attn_job *job, int64_t b) {
  const attn_seq *seq = &job->seqs[b];
  attn_rows rows;
  rows.count = rows.groups = 0;
  add_all_heads(&rows, job, seq);
  const int64_t d = job->d, stride = rows.count * (d + 2);
  const float *partials = job->partials + job->partial_start[b];
  float o[256];
  for (int64_t r = 0; r < rows.count; r++) {
    float max = -INFINITY, sum = 0.0f;
    for (int64_t c = 0; c < job->chunks[b]; c++) {
      const float *p = partials + c * stride + r * (d + 2);
      if (p[1] > 0.0f && p[0] > max) max = p[0];
    }
    memset(o, 0, (size_t)d * sizeof(float));
    for (int64_t c = 0; c < job->chunks[b]; c++) {
      const float *p = partials + c * stride + r * (d + 2);
      if (!(p[1] > 0.0f)) continue;
      float weight = expf(p[0] - max);
      sum += weight * p[1];
      for (int64_t i = 0; i < d; i++) o[i] += weight * p[2 + i];
    }
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t i = 0; i < d; i++) o[i] *= inv;
    cpu_store_f32(seq->kv.dtype, o, rows.out[r], d);
    if (rows.lse[r]) *rows.lse[r] = sum > 0.0f ? max + logf(sum) : -INFINITY;
  }
}

static void merge_range(void *ctx, int64_t begin, int64_t end) {
  const attn_job *job = ctx;
  for (int64_t b = begin; b < end; b++)
    if (job->chunks[b] > 1) merge_chunks(job, b);
}

/* Splits the sequences (job->seqs filled in) into tasks and runs them. A
 * sequence whose rows all fit one task with few rows per kv head (decode)
 * runs as key chunks, enough of them to give every thread several, so that
 * a thread that another process slows down takes fewer (one sequence on two
 * threads, 8 chunks a thread against 2: faster in 5 of 6 quieter runs,
 * within the noise on a loaded machine). */
static gllmk_status attn_run(gllmk_plugin_device *device, attn_job *job) {
  const int64_t n = job->sequences;
  int64_t threads = device->num_threads > 1 ? device->num_threads : 1;
  int64_t chunked = 0;
  for (int64_t b = 0; b < n; b++) {
    const attn_seq *seq = &job->seqs[b];
    int chunk = seq->q_len > 0 && seq->q_len * job->hq <= ATTN_ROWS &&
                seq->q_len * job->split.group <= ATTN_DIRECT_ROWS;
    job->chunks[b] = chunk;
    chunked += chunk;
  }
  int64_t partial_floats = 0;
  job->task_start[0] = 0;
  for (int64_t b = 0; b < n; b++) {
    const attn_seq *seq = &job->seqs[b];
    int64_t tasks = 0;
    if (job->chunks[b]) {
      int64_t span = 0; /* keys the sequence reads */
      for (int64_t i = 0; i < seq->q_len; i++)
        if (seq_last(seq, i) + 1 > span) span = seq_last(seq, i) + 1;
      int64_t chunks = (ATTN_THREAD_CHUNKS * threads + chunked - 1) / chunked;
      int64_t most = (span + ATTN_CHUNK_KEYS - 1) / ATTN_CHUNK_KEYS;
      if (chunks > most) chunks = most > 1 ? most : 1;
      job->chunk_keys[b] = cpu_round_up((span + chunks - 1) / chunks, ATTN_KEYS);
      if (job->chunk_keys[b] == 0) job->chunk_keys[b] = ATTN_KEYS;
      tasks = job->chunks[b] = (span + job->chunk_keys[b] - 1) / job->chunk_keys[b];
      if (tasks == 0) tasks = job->chunks[b] = 1; /* no keys: writes zeros */
      job->partial_start[b] = partial_floats;
      if (tasks > 1) partial_floats += tasks * seq->q_len * job->hq * (job->d + 2);
    } else {
      int64_t position_blocks = (seq->q_len + job->split.positions - 1) / job->split.positions;
      tasks = job->hkv * job->split.head_parts * position_blocks;
    }
    job->task_start[b + 1] = job->task_start[b] + tasks;
  }
  job->partials = NULL;
  if (partial_floats > 0) {
    job->partials = malloc((size_t)partial_floats * sizeof(float));
    if (!job->partials)
      return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu attention: out of host memory");
  }
  attn_scratch sizing;
  gllmk_status status =
      cpu_run_tasks(device, job->task_start[n],
                    attn_scratch_layout(cpu_gemm_select(), job->d, NULL, &sizing), attn_task, job);
  if (status == GLLMK_OK && job->partials) cpu_parallel_for(device, n, 1, merge_range, job);
  free(job->partials);
  return status;
}

/* Room for a job's per-sequence arrays (one allocation; NULL when out of memory). */
static void *attn_job_alloc(attn_job *job, int64_t sequences) {
  size_t count = (size_t)sequences;
  char *memory = malloc(count * sizeof(attn_seq) + (4 * count + 1) * sizeof(int64_t));
  if (!memory) return NULL;
  job->sequences = sequences;
  job->seqs = (attn_seq *)(void *)memory;
  job->task_start = (int64_t *)(void *)(memory + count * sizeof(attn_seq));
  job->chunks = job->task_start + count + 1;
  job->chunk_keys = job->chunks + count;
  job->partial_start = job->chunk_keys + count;
  return memory;
}

/* ------------------------------------------------------------- attention */

gllmk_status cpu_attention(gllmk_plugin_device *device, const gllmk_attention_args *args) {
  const gllmk_tensor *q = args->q, *k = args->k, *v = args->v, *out = args->out;
  const int64_t batch = q->shape[0], sq = q->shape[1], skv = k->shape[1];
  const size_t esize = gllmk_plugin_dtype_size(q->dtype);
  attn_job job;
  job.hq = q->shape[2];
  job.d = q->shape[3];
  job.hkv = k->shape[2];
  job.scale = args->scale;
  job.split = split_rows(job.hq, job.hkv);
  void *memory = attn_job_alloc(&job, batch);
  if (!memory)
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_attention: out of host memory");

  for (int64_t b = 0; b < batch; b++) {
    int64_t len = skv;
    if (args->kv_lens) {
      int32_t given =
          ((const int32_t *)cpu_tensor_data(args->kv_lens))[b * args->kv_lens->strides[0]];
      len = given;
      if (given < 0 || given > skv) {
        cpu_raise(device, GLLMK_ERR_OUT_OF_RANGE,
                  "gllmk_attention: kv_lens[%lld]=%d is outside [0, %lld]", (long long)b, given,
                  (long long)skv);
        len = 0; /* its rows get zeros */
      }
    }
    attn_seq *seq = &job.seqs[b];
    seq->q_len = sq;
    seq->q = (const char *)cpu_tensor_data(q) + (size_t)(b * q->strides[0]) * esize;
    seq->out = (char *)cpu_tensor_data(out) + (size_t)(b * out->strides[0]) * esize;
    seq->q_pos_step = q->strides[1];
    seq->q_head_step = q->strides[2];
    seq->out_pos_step = out->strides[1];
    seq->out_head_step = out->strides[2];
    seq->lse = NULL;
    seq->lse_pos_step = seq->lse_head_step = 0;
    if (args->lse) {
      seq->lse = (float *)cpu_tensor_data(args->lse) + b * args->lse->strides[0];
      seq->lse_head_step = args->lse->strides[1];
      seq->lse_pos_step = args->lse->strides[2];
    }
    seq->causal = args->causal;
    seq->last0 = args->causal ? len - sq : len - 1;
    seq->keys = len;
    seq->kv = (kv_source){
        .dtype = q->dtype,
        .d = job.d,
        .k = (const char *)cpu_tensor_data(k) + (size_t)(b * k->strides[0]) * esize,
        .v = (const char *)cpu_tensor_data(v) + (size_t)(b * v->strides[0]) * esize,
        .k_step = k->strides[1],
        .v_step = v->strides[1],
    };
    seq->k_head_step = k->strides[2];
    seq->v_head_step = v->strides[2];
  }
  gllmk_status status = attn_run(device, &job);
  free(memory);
  return status;
}

/* ------------------------------------------------------- paged_attention */

typedef struct paged_view {
  const int32_t *q_starts, *seq_lens, *table;
  int64_t q_starts_stride, seq_lens_stride, table_stride, table_width, cache_blocks;
} paged_view;

static paged_view paged_view_of(const gllmk_paged_attention_args *args) {
  paged_view view = {cpu_tensor_data(args->q_starts),    cpu_tensor_data(args->seq_lens),
                     cpu_tensor_data(args->block_table), args->q_starts->strides[0],
                     args->seq_lens->strides[0],         args->block_table->strides[0],
                     args->block_table->shape[1],        args->k_cache->shape[0]};
  return view;
}

/* The positions of sequence b whose cache blocks can be read: all of them,
 * or up to the first logical block whose table entry is outside the cache
 * (reported; the queries that need it get zeros). */
static int64_t paged_readable(gllmk_plugin_device *device, const paged_view *view, int64_t b,
                              int64_t seq_len, int64_t block_size) {
  const int32_t *row = view->table + b * view->table_stride;
  int64_t needed = (seq_len + block_size - 1) / block_size;
  for (int64_t i = 0; i < needed; i++) {
    if (i >= view->table_width) {
      cpu_raise(
          device, GLLMK_ERR_OUT_OF_RANGE,
          "gllmk_paged_attention: seq_lens[%lld]=%lld needs more than the table's %lld blocks",
          (long long)b, (long long)seq_len, (long long)view->table_width);
      return i * block_size;
    }
    if (row[i] < 0 || row[i] >= view->cache_blocks) {
      cpu_raise(
          device, GLLMK_ERR_OUT_OF_RANGE,
          "gllmk_paged_attention: block_table[%lld][%lld]=%d is outside the cache of %lld blocks",
          (long long)b, (long long)i, row[i], (long long)view->cache_blocks);
      return i * block_size;
    }
  }
  return seq_len;
}

/* Checks the sequence layout the device data describes: q_starts must rise
 * from 0 to T and no sequence may have more new tokens than its length. */
static int paged_layout_ok(gllmk_plugin_device *device, const paged_view *view, int64_t sequences,
                           int64_t tokens) {
  if (view->q_starts[0] != 0 || view->q_starts[sequences * view->q_starts_stride] != tokens) {
    cpu_raise(device, GLLMK_ERR_OUT_OF_RANGE,
              "gllmk_paged_attention: q_starts must run from 0 to %lld", (long long)tokens);
    return 0;
  }
  for (int64_t b = 0; b < sequences; b++) {
    int64_t start = view->q_starts[b * view->q_starts_stride];
    int64_t end = view->q_starts[(b + 1) * view->q_starts_stride];
    int64_t seq_len = view->seq_lens[b * view->seq_lens_stride];
    if (end < start) {
      cpu_raise(device, GLLMK_ERR_OUT_OF_RANGE,
                "gllmk_paged_attention: q_starts[%lld]=%lld is below q_starts[%lld]=%lld",
                (long long)(b + 1), (long long)end, (long long)b, (long long)start);
      return 0;
    }
    if (seq_len < end - start) {
      cpu_raise(device, GLLMK_ERR_OUT_OF_RANGE,
                "gllmk_paged_attention: seq_lens[%lld]=%lld is less than its %lld new tokens",
                (long long)b, (long long)seq_len, (long long)(end - start));
      return 0;
    }
  }
  return 1;
}

static void zero_rows(const gllmk_tensor *out) {
  size_t esize = gllmk_plugin_dtype_size(out->dtype);
  for (int64_t t = 0; t < out->shape[0]; t++)
    for (int64_t h = 0; h < out->shape[1]; h++)
      memset((char *)cpu_tensor_data(out) +
                 (size_t)(t * out->strides[0] + h * out->strides[1]) * esize,
             0, (size_t)out->shape[2] * esize);
}

gllmk_status cpu_paged_attention(gllmk_plugin_device *device,
                                 const gllmk_paged_attention_args *args) {
  const gllmk_tensor *q = args->q, *out = args->out, *kc = args->k_cache, *vc = args->v_cache;
  const size_t esize = gllmk_plugin_dtype_size(q->dtype);
  const int64_t sequences = args->seq_lens->shape[0], block_size = kc->shape[1];
  const paged_view view = paged_view_of(args);
  if (!paged_layout_ok(device, &view, sequences, q->shape[0])) {
    zero_rows(out); /* the layout is unusable; the error is reported */
    return GLLMK_OK;
  }
  attn_job job;
  job.hq = q->shape[1];
  job.d = q->shape[2];
  job.hkv = kc->shape[2];
  job.scale = args->scale;
  job.split = split_rows(job.hq, job.hkv);
  void *memory = attn_job_alloc(&job, sequences);
  if (!memory)
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_paged_attention: out of host memory");

  for (int64_t b = 0; b < sequences; b++) {
    int64_t q_first = view.q_starts[b * view.q_starts_stride];
    int64_t q_len = view.q_starts[(b + 1) * view.q_starts_stride] - q_first;
    int64_t seq_len = view.seq_lens[b * view.seq_lens_stride];
    attn_seq *seq = &job.seqs[b];
    seq->q_len = q_len;
    seq->q = (const char *)cpu_tensor_data(q) + (size_t)(q_first * q->strides[0]) * esize;
    seq->out = (char *)cpu_tensor_data(out) + (size_t)(q_first * out->strides[0]) * esize;
    seq->q_pos_step = q->strides[0];
    seq->q_head_step = q->strides[1];
    seq->out_pos_step = out->strides[0];
    seq->out_head_step = out->strides[1];
    seq->lse = NULL;
    seq->lse_pos_step = seq->lse_head_step = 0;
    /* Query i sits at position seq_len - q_len + i and sees up to there. */
    seq->causal = 1;
    seq->last0 = seq_len - q_len;
    seq->keys = q_len > 0 ? paged_readable(device, &view, b, seq_len, block_size) : 0;
    seq->kv = (kv_source){
        .dtype = q->dtype,
        .d = job.d,
        .k = cpu_tensor_data(kc),
        .v = cpu_tensor_data(vc),
        .k_step = kc->strides[1],
        .v_step = vc->strides[1],
        .blocks = view.table + b * view.table_stride,
        .block_size = block_size,
        .k_block_step = kc->strides[0],
        .v_block_step = vc->strides[0],
    };
    seq->k_head_step = kc->strides[2];
    seq->v_head_step = vc->strides[2];
  }
  gllmk_status status = attn_run(device, &job);
  free(memory);
  return status;
}
