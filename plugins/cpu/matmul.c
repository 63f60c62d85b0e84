/*
 * matmul.c - the matmul family on the cpu: matmul, out = alpha * a op(b) +
 * beta * out + bias, a's rows optionally RMS-normalized first (a_norm:
 * each row's scale is found once, then applied as the row is packed or
 * converted), the output optionally turned by a rope after (rope_dim) and
 * copied into paged caches (kv_k_cache), or its halves joined by a gated
 * linear unit (glu). The planning, packing and tasks are here; the micro-kernels and GEMV kernels
 * are the cpu_gemm_isa tables below it (cpu_gemm.h: cpu_gemm.c portable,
 * cpu_gemm_avx2.c, cpu_gemm_avx512.c), which attention.c uses too. From
 * below it also uses cpu_run_tasks (cpu_tasks.c) and the row conversions of
 * cpu_convert.c.
 *
 * Two paths:
 *  - GEMM (more than CPU_GEMV_MAX_ROWS rows): BLIS-style. The output is cut
 *    into tiles (tasks, up to GEMM_MC_MAX x GEMM_NC_MAX; plan_gemm weighs
 *    packing against balance); a task walks K in slices of GEMM_KC and, per
 *    slice, packs its b columns into panels of NR (L1-sized) and its rows of
 *    a in groups of a quarter of the L2, in panels of MR, and runs the
 *    micro-kernel for every pair of panels. While a group or panel is
 *    multiplied, the rows of a and b packed next are prefetched. Packing
 *    converts F16/BF16 to F32, so the micro-kernels only see F32.
 *  - GEMV (a few rows, decode): streams b once, reading its storage dtype
 *    directly; it is bound by memory bandwidth.
 * The micro-kernels and GEMV kernels come from an instruction-set table
 * (cpu_gemm.c, cpu_gemm_avx2.c, cpu_gemm_avx512.c).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_gemm.h"
#include "ops.h"

enum {
  GEMM_KC = 256,          /* depth of one packed slice */
  GEMM_MC_MAX = 1024,     /* rows of a task at most */
  GEMM_NC_MAX = 1024,     /* columns of a task at most (its packed b slice: GEMM_KC x them) */
  GEMM_GRID_MAX = 16,     /* grids the planner tries beyond the fewest tiles, along M and N */
  /* What packing one float of a or b costs, in multiply-adds of the
   * micro-kernel: about 0.3 ns against 0.025 ns (AVX2, Zen 3). */
  GEMM_PACK_COST = 16,
  GEMV_NK_ROWS = 64,      /* b rows per GEMV task (b as [N, K]) */
  GEMV_KN_BYTES = 16384   /* of each b row per GEMV task at most (b as [K, N]) */
};

/* Rows of a packed group of a within a task: a quarter of the L2 (128 on
 * Zen 3's 512 KiB), so that the group stays in L2 while each b panel (in
 * L1) meets all of it. */
static int64_t gemm_mc = 128;
static pthread_once_t gemm_mc_once = PTHREAD_ONCE_INIT;

static void find_gemm_mc(void) {
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 <= 0) return;
  int64_t rows = (int64_t)l2 / 4 / (GEMM_KC * (int64_t)sizeof(float));
  gemm_mc = rows < 24 ? 24 : rows > 480 ? 480 : rows;
}

/* ------------------------------------------------------------ the problem */

/* One matmul call, reduced to `batch_count` GEMMs of m x n x k. */
typedef struct matmul_job {
  const cpu_gemm_isa *isa;
  int32_t dtype;
  size_t esize;
  int b_kn; /* b is [K, N] */
  int64_t m, n, k;
  int64_t lda, ldb, ldo; /* row strides, elements */
  const char *a, *b, *bias;
  char *out;
  float alpha, beta;
  /* With a_norm, 1 / rms of every row of a (batch-major), else NULL. */
  float *row_scale;
  /* Batches: the leading dims of a, walked with each tensor's strides (b's
   * strides are all 0 when b is shared). */
  int64_t batch_count;
  int batch_dims;
  int64_t batch_shape[GLLMK_MAX_DIMS];
  int64_t a_batch_strides[GLLMK_MAX_DIMS], b_batch_strides[GLLMK_MAX_DIMS],
      out_batch_strides[GLLMK_MAX_DIMS];
  /* Task grid of one batch: m_tiles x n_tiles tiles of m_block x n_block. */
  int64_t m_block, n_block, m_tiles, n_tiles;
  int64_t m_group; /* rows of a packed group of a within a task (a multiple of MR) */
} matmul_job;

/* Whether the dims before the last flatten into rows with one stride (a
 * column slice of a wider matrix does; a transposed batch does not). */
static int rows_flatten(const gllmk_tensor *t, int64_t *row_stride) {
  int64_t stride = t->shape[t->ndim - 1], rows = 1;
  for (int32_t i = t->ndim - 2; i >= 0; i--) {
    if (t->shape[i] == 1) continue;
    if (rows == 1)
      stride = t->strides[i];
    else if (t->strides[i] != stride * rows)
      return 0;
    rows *= t->shape[i];
  }
  *row_stride = stride;
  return 1;
}

static void describe_job(const gllmk_matmul_args *args, matmul_job *job) {
  const gllmk_tensor *a = args->a, *b = args->b, *out = args->out;
  memset(job, 0, sizeof *job);
  job->isa = cpu_gemm_select();
  job->dtype = a->dtype;
  job->esize = gllmk_plugin_dtype_size(a->dtype);
  job->b_kn = args->b_layout == GLLMK_B_KN;
  job->m = a->shape[a->ndim - 2];
  job->k = a->shape[a->ndim - 1];
  job->n = job->b_kn ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
  job->lda = a->strides[a->ndim - 2];
  job->ldb = b->strides[b->ndim - 2];
  job->ldo = out->strides[out->ndim - 2];
  job->a = cpu_tensor_data(a);
  job->b = cpu_tensor_data(b);
  job->out = cpu_tensor_data(out);
  job->bias = args->bias ? cpu_tensor_data(args->bias) : NULL;
  job->alpha = args->alpha;
  job->beta = args->beta;

  int64_t lda, ldo;
  if (b->ndim == 2 && rows_flatten(a, &lda) && rows_flatten(out, &ldo)) {
    /* A shared b: every row of every batch is one tall GEMM. */
    for (int32_t i = 0; i < a->ndim - 2; i++) job->m *= a->shape[i];
    job->lda = lda;
    job->ldo = ldo;
    job->batch_count = 1;
    return;
  }
  job->batch_dims = a->ndim - 2;
  job->batch_count = 1;
  for (int i = 0; i < job->batch_dims; i++) {
    job->batch_shape[i] = a->shape[i];
    job->batch_count *= a->shape[i];
    job->a_batch_strides[i] = a->strides[i];
    job->out_batch_strides[i] = out->strides[i];
    job->b_batch_strides[i] = b->ndim == 2 ? 0 : b->strides[i];
  }
}

typedef struct batch_view {
  const char *a, *b;
  char *out;
} batch_view;

static batch_view batch_at(const matmul_job *job, int64_t batch) {
  int64_t a_off = 0, b_off = 0, out_off = 0;
  for (int d = job->batch_dims - 1; d >= 0; d--) {
    int64_t i = batch % job->batch_shape[d];
    batch /= job->batch_shape[d];
    a_off += i * job->a_batch_strides[d];
    b_off += i * job->b_batch_strides[d];
    out_off += i * job->out_batch_strides[d];
  }
  batch_view view = {job->a + (size_t)a_off * job->esize, job->b + (size_t)b_off * job->esize,
                     job->out + (size_t)out_off * job->esize};
  return view;
}

/* The bias of columns [n0, n0 + count) as F32 (converted into `buffer` when
 * stored narrower), or NULL without bias. */
static const float *bias_f32(const matmul_job *job, int64_t n0, int64_t count, float *buffer) {
  if (!job->bias) return NULL;
  const char *src = job->bias + (size_t)n0 * job->esize;
  if (job->dtype == GLLMK_F32) return (const float *)(const void *)src;
  cpu_load_f32(job->dtype, src, buffer, count);
  return buffer;
}

/* dst[0..count) = alpha * v + beta * dst + bias in dst's dtype; dst is not
 * read when beta = 0. Overwrites v; `old` is room for count floats. */
static void finish_row(const matmul_job *job, float *v, void *dst, int64_t count, float alpha,
                       const float *bias, float *old) {
  const float *prev = NULL;
  if (job->beta != 0.0f) {
    if (job->dtype == GLLMK_F32) {
      prev = dst;
    } else {
      cpu_load_f32(job->dtype, dst, old, count);
      prev = old;
    }
  }
  if (prev || bias || alpha != 1.0f) {
    for (int64_t j = 0; j < count; j++) {
      float x = alpha * v[j];
      if (prev) x += job->beta * prev[j];
      if (bias) x += bias[j];
      v[j] = x;
    }
  }
  cpu_store_f32(job->dtype, v, dst, count);
}

/* ------------------------------------------------------------------- GEMM */

/* The widest panel: rows handed to pack_transposed at once. */
enum { PACK_MAX_ROWS = 32 };
_Static_assert((int)CPU_GEMM_GENERIC_MR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_GENERIC_NR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_AVX2_MR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_AVX2_NR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_AVX512_MR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_AVX512_NR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_NEON_MR <= PACK_MAX_ROWS &&
                   (int)CPU_GEMM_NEON_NR <= PACK_MAX_ROWS,
               "a micro-tile is wider than PACK_MAX_ROWS");

/* Row `count` floats of src (dtype) as F32 times `scale`, into dst. */
static void load_scaled(int32_t dtype, const char *src, float scale, float *dst, int64_t count) {
  if (dtype == GLLMK_F32)
    memcpy(dst, src, (size_t)count * sizeof(float));
  else
    cpu_load_f32(dtype, src, dst, count);
  for (int64_t j = 0; j < count; j++) dst[j] *= scale;
}

/* Packs `count` rows of a (or of b as [N, K]) transposed for the micro-kernel,
 * converting F16/BF16 first into `converted` (room for width * kc floats),
 * and scaling row i by scales[i] there when scales is not NULL. */
static void pack_transposed(const cpu_gemm_isa *isa, int32_t dtype, const char *src, int64_t ld,
                            int64_t count, int64_t kc, int64_t width, const float *scales,
                            float *dst, float *converted) {
  size_t esize = gllmk_plugin_dtype_size(dtype);
  if (!scales && isa->pack_transposed_dtype) {
    const void *lines[PACK_MAX_ROWS];
    for (int64_t i = 0; i < count; i++) lines[i] = src + (size_t)(i * ld) * esize;
    isa->pack_transposed_dtype(dtype, lines, count, kc, width, dst);
    return;
  }
  const float *rows[PACK_MAX_ROWS];
  for (int64_t i = 0; i < count; i++) {
    const char *row = src + (size_t)(i * ld) * esize;
    if (scales) {
      load_scaled(dtype, row, scales[i], converted + i * kc, kc);
      rows[i] = converted + i * kc;
    } else if (dtype == GLLMK_F32) {
      rows[i] = (const float *)(const void *)row;
    } else {
      cpu_load_f32(dtype, row, converted + i * kc, kc);
      rows[i] = converted + i * kc;
    }
  }
  isa->pack_transposed(rows, count, kc, width, dst);
}

/* Packs b[k0 .. k0+kc, n0 .. n0+count) of b as [K, N] into panels of `width`
 * columns (zero past count): row by row, so that reads stay sequential.
 * `row` is room for count floats (used to convert F16/BF16). */
static void pack_b_kn(int32_t dtype, const char *src, int64_t ld, int64_t count, int64_t kc,
                      int64_t width, float *dst, float *row) {
  size_t esize = gllmk_plugin_dtype_size(dtype);
  for (int64_t k = 0; k < kc; k++) {
    const char *line = src + (size_t)(k * ld) * esize;
    const float *f32 = (const float *)(const void *)line;
    if (dtype != GLLMK_F32) {
      cpu_load_f32(dtype, line, row, count);
      f32 = row;
    }
    for (int64_t p = 0; p < count; p += width) {
      int64_t cols = count - p < width ? count - p : width;
      float *d = dst + p * kc + k * width;
      memcpy(d, f32 + p, (size_t)cols * sizeof(float));
      if (cols < width) memset(d + cols, 0, (size_t)(width - cols) * sizeof(float));
    }
  }
}

/* Scratch of one GEMM task, carved from the thread's scratch memory. */
typedef struct gemm_scratch {
  float *b_packed; /* GEMM_KC x n_block, in panels of NR columns */
  float *a_packed; /* m_group x GEMM_KC: a row group in panels of MR rows */
  float *rows;     /* F16/BF16 converted for packing: max(MR, NR) x GEMM_KC or n_block */
  float *edge;     /* MR x NR: a partial tile at the matrix border */
  float *bias;     /* n_block */
  float *old;      /* n_block */
  float *c_tile;   /* m_block x n_block: F32 sums when out is F16/BF16 */
} gemm_scratch;

/* Bytes of scratch a GEMM task needs; with `base`, also where each part is. */
static size_t gemm_scratch_layout(const matmul_job *job, char *base, gemm_scratch *s) {
  int64_t mr = job->isa->mr, nr = job->isa->nr;
  int64_t widest = (mr > nr ? mr : nr) * GEMM_KC;
  if (widest < job->n_block) widest = job->n_block;
  int64_t sizes[7] = {GEMM_KC * job->n_block,
                      job->m_group * GEMM_KC,
                      widest,
                      mr * nr,
                      job->n_block,
                      job->n_block,
                      job->dtype == GLLMK_F32 ? 0 : job->m_block * job->n_block};
  float **parts[7] = {&s->b_packed, &s->a_packed, &s->rows,  &s->edge,
                      &s->bias,     &s->old,      &s->c_tile};
  size_t offset = 0;
  for (int i = 0; i < 7; i++) {
    if (base) *parts[i] = (float *)(void *)(base + offset);
    offset += (size_t)cpu_round_up(sizes[i], 16) * sizeof(float);
  }
  return offset;
}

/* Packs the b panel of columns [j0, j0 + cols) of b as [N, K], k in
 * [k0, k0 + kc), into dst. */
static void pack_b_panel(const matmul_job *job, const char *b, int64_t k0, int64_t kc, int64_t j0,
                         int64_t cols, float *dst, float *converted) {
  pack_transposed(job->isa, job->dtype, b + (size_t)(j0 * job->ldb + k0) * job->esize, job->ldb,
                  cols, kc, job->isa->nr, NULL, dst, converted);
}

/* Software prefetch of a block of rows (a K slice of rows of a, or of b as
 * [N, K]) that is packed next, a few lines at a time while the
 * micro-kernels run: a slice's rows are short runs at a large stride, which
 * the hardware prefetcher hardly follows, and packing them from L3 or
 * memory otherwise waits for every line. */
typedef struct row_prefetch {
  const char *row;      /* the row of the next line */
  size_t stride, bytes; /* between rows; of each row */
  size_t at;            /* of the next line in its row */
  int64_t rows;         /* left, counting this one */
} row_prefetch;

static void prefetch_rows(row_prefetch *p, const char *base, size_t stride, int64_t rows,
                          size_t bytes) {
  p->row = base;
  p->stride = stride;
  p->bytes = bytes;
  p->at = 0;
  p->rows = bytes > 0 ? rows : 0;
}

/* Lines of the block in all (a row's may start within a line). */
static int64_t prefetch_lines(const row_prefetch *p) {
  return p->rows * (int64_t)((p->bytes + 63) / 64 + 1);
}

/* Asks for the next `count` lines of the block: every 64 bytes of each
 * row, and its last byte. */
static inline void prefetch_some(row_prefetch *p, int64_t count) {
  for (; count > 0 && p->rows > 0; count--) {
    __builtin_prefetch(p->row + p->at, 0, 3);
    if (p->at == p->bytes - 1) {
      p->row += p->stride;
      p->at = 0;
      p->rows--;
    } else {
      p->at = p->at + 64 < p->bytes ? p->at + 64 : p->bytes - 1;
    }
  }
}

/* Computes out[m0..m1, n0..n1) of one batch. */
static void gemm_tile(const matmul_job *job, const batch_view *view, const float *row_scale,
                      int64_t m0, int64_t m1, int64_t n0, int64_t n1, const gemm_scratch *s) {
  const cpu_gemm_isa *isa = job->isa;
  const int64_t mr = isa->mr, nr = isa->nr;
  const size_t a_row = (size_t)job->lda * job->esize, b_row = (size_t)job->ldb * job->esize;
  const float *bias = bias_f32(job, n0, n1 - n0, s->bias);
  /* F32 results go straight to out; narrower ones are summed in c_tile. */
  const int direct = job->dtype == GLLMK_F32;
  float *c_base = direct ? (float *)(void *)view->out + m0 * job->ldo + n0 : s->c_tile;
  const int64_t ldc = direct ? job->ldo : job->n_block;
  const cpu_gemm_epilogue plain = {1.0f, 0.0f, 0, NULL};
  const int64_t panels = (n1 - n0 + nr - 1) / nr;

  for (int64_t k0 = 0; k0 < job->k; k0 += GEMM_KC) {
    int64_t kc = job->k - k0 < GEMM_KC ? job->k - k0 : GEMM_KC;
    /* b as [K, N]: its rows are long runs, packed whole up front; b as
     * [N, K] is packed a panel at a time during the first row group, each
     * panel's rows asked for while the one before it is multiplied. */
    if (job->b_kn)
      pack_b_kn(job->dtype, view->b + (size_t)(k0 * job->ldb + n0) * job->esize, job->ldb,
                n1 - n0, kc, nr, s->b_packed, s->rows);
    /* The first slice applies beta and bias; later ones add to it. */
    cpu_gemm_epilogue ep = {job->alpha, 1.0f, 1, NULL};
    if (k0 == 0) {
      ep.read_c = direct && job->beta != 0.0f;
      ep.beta = job->beta;
      ep.bias = direct ? bias : NULL;
    }
    /* Row groups of m_group rows (about a quarter of the L2), packed whole;
     * each b panel (in L1) then meets every MR rows of the group, so per
     * step only MR floats of a come from L2, not NR of b. While a group is
     * multiplied, the rows of a that are packed next (the next group, or
     * the first of the next slice) are asked for. */
    for (int64_t g0 = m0; g0 < m1; g0 += job->m_group) {
      int64_t g1 = m1 - g0 < job->m_group ? m1 : g0 + job->m_group;
      for (int64_t i0 = g0; i0 < g1; i0 += mr) {
        int64_t rows = g1 - i0 < mr ? g1 - i0 : mr;
        pack_transposed(isa, job->dtype, view->a + (size_t)(i0 * job->lda + k0) * job->esize,
                        job->lda, rows, kc, mr, row_scale ? row_scale + i0 : NULL,
                        s->a_packed + (i0 - g0) * kc, s->rows);
      }
      row_prefetch next_a = {0};
      if (g1 < m1) {
        int64_t rows = m1 - g1 < job->m_group ? m1 - g1 : job->m_group;
        prefetch_rows(&next_a, view->a + (size_t)(g1 * job->lda + k0) * job->esize, a_row, rows,
                      (size_t)kc * job->esize);
      } else if (k0 + kc < job->k) {
        int64_t rows = m1 - m0 < job->m_group ? m1 - m0 : job->m_group;
        int64_t next_kc = job->k - k0 - kc < GEMM_KC ? job->k - k0 - kc : GEMM_KC;
        prefetch_rows(&next_a, view->a + (size_t)(m0 * job->lda + k0 + kc) * job->esize, a_row,
                      rows, (size_t)next_kc * job->esize);
      }
      const int64_t calls = (g1 - g0 + mr - 1) / mr;
      const int64_t a_share = (prefetch_lines(&next_a) + panels * calls - 1) / (panels * calls);
      const int first_group = g0 == m0 && !job->b_kn;
      row_prefetch next_b = {0};
      if (first_group)
        prefetch_rows(&next_b, view->b + (size_t)(n0 * job->ldb + k0) * job->esize, b_row,
                      n1 - n0 < nr ? n1 - n0 : nr, (size_t)kc * job->esize);
      for (int64_t j0 = n0; j0 < n1; j0 += nr) {
        int64_t cols = n1 - j0 < nr ? n1 - j0 : nr;
        float *panel = s->b_packed + (j0 - n0) * kc;
        int64_t b_share = 0;
        if (first_group) {
          pack_b_panel(job, view->b, k0, kc, j0, cols, panel, s->rows);
          int64_t after = n1 - j0 - cols < nr ? n1 - j0 - cols : nr;
          prefetch_rows(&next_b, view->b + (size_t)((j0 + cols) * job->ldb + k0) * job->esize,
                        b_row, after, (size_t)kc * job->esize);
          b_share = (prefetch_lines(&next_b) + calls - 1) / calls;
        }
        cpu_gemm_epilogue tile_ep = ep;
        if (ep.bias) tile_ep.bias = ep.bias + (j0 - n0);
        for (int64_t i0 = g0; i0 < g1; i0 += mr) {
          int64_t rows = g1 - i0 < mr ? g1 - i0 : mr;
          const float *a_panel = s->a_packed + (i0 - g0) * kc;
          float *c = c_base + (i0 - m0) * ldc + (j0 - n0);
          prefetch_some(&next_a, a_share);
          prefetch_some(&next_b, b_share);
          if (rows == mr && cols == nr) {
            isa->micro(kc, a_panel, panel, c, ldc, &tile_ep);
          } else {
            isa->micro(kc, a_panel, panel, s->edge, nr, &plain);
            cpu_gemm_store_tile(s->edge, nr, rows, cols, c, ldc, &tile_ep);
          }
        }
      }
      /* F16/BF16: after the last slice, the group's sums (just written, in
       * cache) go out. */
      if (!direct && k0 + kc == job->k) {
        for (int64_t i = g0; i < g1; i++)
          finish_row(job, s->c_tile + (i - m0) * job->n_block,
                     view->out + (size_t)(i * job->ldo + n0) * job->esize, n1 - n0, 1.0f, bias,
                     s->old);
      }
    }
  }
}

static void gemm_task(void *ctx, int64_t task, void *scratch) {
  const matmul_job *job = ctx;
  int64_t tiles = job->m_tiles * job->n_tiles;
  int64_t tile = task % tiles;
  int64_t m0 = tile / job->n_tiles * job->m_block, n0 = tile % job->n_tiles * job->n_block;
  int64_t m1 = m0 + job->m_block < job->m ? m0 + job->m_block : job->m;
  int64_t n1 = n0 + job->n_block < job->n ? n0 + job->n_block : job->n;
  batch_view view = batch_at(job, task / tiles);
  gemm_scratch s;
  gemm_scratch_layout(job, scratch, &s);
  const float *row_scale = job->row_scale ? job->row_scale + task / tiles * job->m : NULL;
  gemm_tile(job, &view, row_scale, m0, m1, n0, n1, &s);
}

/* Chooses the task grid. Every task packs its rows of a and its columns of
 * b (over all of K) once, so larger tiles pack less: a task of mb x nb
 * costs about mb * nb + GEMM_PACK_COST * (mb + nb) multiply-adds per step
 * of K. The threads take tasks in rounds of `threads`; the grid with the
 * least cost over its rounds wins (the first of equals: the fewest tiles). */
static void plan_gemm(matmul_job *job, int threads) {
  pthread_once(&gemm_mc_once, find_gemm_mc);
  const int64_t mr = job->isa->mr, nr = job->isa->nr;
  const int64_t m_most = (job->m + mr - 1) / mr, n_most = (job->n + nr - 1) / nr;
  const int64_t mt_min = (job->m + GEMM_MC_MAX - 1) / GEMM_MC_MAX;
  const int64_t nt_min = (job->n + GEMM_NC_MAX - 1) / GEMM_NC_MAX;
  double best = 0.0;
  job->m_block = job->n_block = 0;
  for (int64_t mt = mt_min; mt <= m_most && mt < mt_min + GEMM_GRID_MAX; mt++) {
    int64_t mb = cpu_round_up((job->m + mt - 1) / mt, mr);
    for (int64_t nt = nt_min; nt <= n_most && nt < nt_min + GEMM_GRID_MAX; nt++) {
      int64_t nb = cpu_round_up((job->n + nt - 1) / nt, nr);
      int64_t tasks = job->batch_count * ((job->m + mb - 1) / mb) * ((job->n + nb - 1) / nb);
      int64_t rounds = (tasks + threads - 1) / threads;
      double cost = (double)rounds * ((double)mb * (double)nb + GEMM_PACK_COST * (double)(mb + nb));
      if (job->m_block == 0 || cost < best) {
        best = cost;
        job->m_block = mb;
        job->n_block = nb;
      }
    }
  }
  job->m_tiles = (job->m + job->m_block - 1) / job->m_block;
  job->n_tiles = (job->n + job->n_block - 1) / job->n_block;
  job->m_group = gemm_mc / mr * mr;
  if (job->m_group < mr) job->m_group = mr;
  if (job->m_group > job->m_block) job->m_group = job->m_block;
}

/* ------------------------------------------------------------------- GEMV */

/* GEMV tasks: n_tiles chunks of n_block columns per batch (m_block unused). */
static void plan_gemv(matmul_job *job, int threads) {
  if (job->b_kn) {
    /* Each task reads a run of every b row: long runs stream much faster,
     * so the columns split evenly into as few rounds of one task per
     * thread as keep runs within GEMV_KN_BYTES. */
    int64_t most = GEMV_KN_BYTES / (int64_t)job->esize;
    int64_t rounds = (job->n + threads * most - 1) / (threads * most);
    job->n_block = cpu_round_up((job->n + threads * rounds - 1) / (threads * rounds), 16);
  } else {
    job->n_block = GEMV_NK_ROWS;
  }
  if (job->n_block > job->n) job->n_block = job->n;
  job->n_tiles = (job->n + job->n_block - 1) / job->n_block;
}

typedef struct gemv_scratch {
  float *a;    /* m x k: a as F32 when it is F16/BF16 or scaled (a_norm) */
  float *sums; /* m x n_block */
  float *bias, *old;
} gemv_scratch;

/* Bytes of scratch a GEMV task needs; with `base`, also where each part is. */
static size_t gemv_scratch_layout(const matmul_job *job, char *base, gemv_scratch *s) {
  int64_t sizes[4] = {job->dtype == GLLMK_F32 && !job->row_scale ? 0 : job->m * job->k,
                      job->m * job->n_block,
                      job->n_block, job->n_block};
  float **parts[4] = {&s->a, &s->sums, &s->bias, &s->old};
  size_t offset = 0;
  for (int i = 0; i < 4; i++) {
    if (base) *parts[i] = (float *)(void *)(base + offset);
    offset += (size_t)cpu_round_up(sizes[i], 16) * sizeof(float);
  }
  return offset;
}

static void gemv_task(void *ctx, int64_t task, void *scratch) {
  const matmul_job *job = ctx;
  batch_view view = batch_at(job, task / job->n_tiles);
  int64_t n0 = task % job->n_tiles * job->n_block;
  int64_t count = job->n - n0 < job->n_block ? job->n - n0 : job->n_block;
  gemv_scratch s;
  gemv_scratch_layout(job, scratch, &s);

  const float *a = (const float *)(const void *)view.a;
  int64_t lda = job->lda;
  if (job->row_scale) {
    const float *scale = job->row_scale + task / job->n_tiles * job->m;
    for (int64_t i = 0; i < job->m; i++)
      load_scaled(job->dtype, view.a + (size_t)(i * job->lda) * job->esize, scale[i],
                  s.a + i * job->k, job->k);
    a = s.a;
    lda = job->k;
  } else if (job->dtype != GLLMK_F32) {
    for (int64_t i = 0; i < job->m; i++)
      cpu_load_f32(job->dtype, view.a + (size_t)(i * job->lda) * job->esize, s.a + i * job->k,
                   job->k);
    a = s.a;
    lda = job->k;
  }
  if (job->b_kn)
    job->isa->gemv_kn(job->dtype, job->m, job->k, a, lda, view.b + (size_t)n0 * job->esize,
                      job->ldb, count, s.sums, job->n_block);
  else
    job->isa->gemv_nk(job->dtype, job->m, job->k, a, lda,
                      view.b + (size_t)(n0 * job->ldb) * job->esize, job->ldb, count, s.sums,
                      job->n_block);

  const float *bias = bias_f32(job, n0, count, s.bias);
  for (int64_t i = 0; i < job->m; i++)
    finish_row(job, s.sums + i * job->n_block, view.out + (size_t)(i * job->ldo + n0) * job->esize,
               count, job->alpha, bias, s.old);
}

/* 1 / sqrt(mean(row^2) + eps) of every row of a, batch by batch, summed in
 * double: a_norm's scales, found once for all of the call's tasks. */
static gllmk_status find_row_scales(matmul_job *job, float eps) {
  job->row_scale = malloc((size_t)(job->batch_count * job->m) * sizeof(float));
  if (!job->row_scale) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: matmul a_norm scales");
  float *row = malloc((size_t)job->k * sizeof(float));
  if (!row) {
    free(job->row_scale);
    job->row_scale = NULL;
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: matmul a_norm row");
  }
  for (int64_t b = 0; b < job->batch_count; b++) {
    const char *a = batch_at(job, b).a;
    for (int64_t i = 0; i < job->m; i++) {
      load_scaled(job->dtype, a + (size_t)(i * job->lda) * job->esize, 1.0f, row, job->k);
      double squares = 0.0;
      for (int64_t j = 0; j < job->k; j++) squares += (double)row[j] * row[j];
      job->row_scale[b * job->m + i] = (float)(1.0 / sqrt(squares / (double)job->k + eps));
    }
  }
  free(row);
  return GLLMK_OK;
}

static gllmk_status run_matmul(gllmk_plugin_device *device, matmul_job *job) {
  int threads = device->num_threads > 0 ? device->num_threads : 1;
  if (job->m <= CPU_GEMV_MAX_ROWS) {
    plan_gemv(job, threads);
    gemv_scratch sizing;
    return cpu_run_tasks(device, job->batch_count * job->n_tiles,
                         gemv_scratch_layout(job, NULL, &sizing), gemv_task, job);
  }
  plan_gemm(job, threads);
  gemm_scratch sizing;
  return cpu_run_tasks(device, job->batch_count * job->m_tiles * job->n_tiles,
                       gemm_scratch_layout(job, NULL, &sizing), gemm_task, job);
}

/* matmul's rope on the output (ABI 2.5): gllmk_rope in GPT-J style over out's
 * first rope_columns columns as [M, heads, rope_head_dim], in place. Here
 * the product is rounded to out's dtype before it turns (twice rounded in
 * F16/BF16, where a fused kernel rounds once). */
static gllmk_status rope_output(gllmk_plugin_device *device, const gllmk_matmul_args *args) {
  gllmk_tensor heads = *args->out;
  heads.ndim = 3;
  heads.shape[1] = args->rope_columns / args->rope_head_dim;
  heads.shape[2] = args->rope_head_dim;
  heads.strides[1] = args->rope_head_dim;
  heads.strides[2] = 1;
  return cpu_rope(device, &(gllmk_rope_args){.out = &heads, .x = &heads,
                                             .positions = args->rope_positions,
                                             .theta = args->rope_theta, .rotary_dim = args->rope_dim,
                                             .style = GLLMK_ROPE_GPTJ, .inv_freq = args->rope_inv_freq});
}

/* matmul's k and v into paged caches (ABI 2.6): gllmk_kv_append of out's
 * columns from kv_first as k, then v, each [M, Hkv, D]. */
static gllmk_status append_kv_output(gllmk_plugin_device *device, const gllmk_matmul_args *args) {
  const int64_t heads = args->kv_k_cache->shape[2], head_dim = args->kv_k_cache->shape[3];
  const size_t esize = gllmk_plugin_dtype_size(args->out->dtype);
  gllmk_tensor k = *args->out;
  k.ndim = 3;
  k.shape[1] = heads;
  k.shape[2] = head_dim;
  k.strides[1] = head_dim;
  k.strides[2] = 1;
  k.offset += (uint64_t)args->kv_first * esize;
  gllmk_tensor v = k;
  v.offset += (uint64_t)(heads * head_dim) * esize;
  return cpu_kv_append(device, &(gllmk_kv_append_args){.k_cache = args->kv_k_cache,
                                                       .v_cache = args->kv_v_cache, .k = &k,
                                                       .v = &v, .slots = args->kv_slots});
}

/* matmul's glu (ABI 2.6): the product into a dense scratch matrix of out's
 * dtype, then gllmk_swiglu of its halves into out (the product rounded to
 * out's dtype first, where a fused kernel rounds once). */
static gllmk_status glu_output(gllmk_plugin_device *device, const gllmk_matmul_args *args) {
  const int64_t m = args->a->shape[0], n = 2 * args->out->shape[1];
  const size_t esize = gllmk_plugin_dtype_size(args->out->dtype), bytes = (size_t)(m * n) * esize;
  gllmk_plugin_memory memory = {malloc(bytes ? bytes : 1), 0};
  if (!memory.data) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: matmul glu's product");
  gllmk_plugin_buffer buffer = {&memory, bytes};
  gllmk_tensor product = {.buffer = (gllmk_buffer *)(void *)&buffer, .dtype = args->out->dtype,
                          .ndim = 2, .shape = {m, n}, .strides = {n, 1}};
  gllmk_tensor gate = product, up = product;
  gate.shape[1] = up.shape[1] = n / 2;
  up.offset = (uint64_t)(n / 2) * esize;
  gllmk_matmul_args product_args = *args;
  product_args.out = &product;
  product_args.glu = GLLMK_GLU_NONE;
  gllmk_status status = cpu_matmul(device, &product_args);
  if (status == GLLMK_OK)
    status = cpu_swiglu(device, &(gllmk_swiglu_args){.out = args->out, .gate = &gate, .up = &up});
  free(memory.data);
  return status;
}

gllmk_status cpu_matmul(gllmk_plugin_device *device, const gllmk_matmul_args *args) {
  if (args->glu != GLLMK_GLU_NONE) return glu_output(device, args);
  matmul_job job;
  describe_job(args, &job);
  if (args->a_norm == GLLMK_A_NORM_RMS) {
    gllmk_status status = find_row_scales(&job, args->a_norm_eps);
    if (status != GLLMK_OK) return status;
  }
  gllmk_status status = run_matmul(device, &job);
  free(job.row_scale);
  if (status == GLLMK_OK && args->rope_dim != 0) status = rope_output(device, args);
  if (status == GLLMK_OK && args->kv_k_cache) status = append_kv_output(device, args);
  return status;
}
