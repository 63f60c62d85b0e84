/*
 * sample.c - the sample family on the cpu: argmax and sample, over rows of
 * logits. The host code and the selection are here; a row's maximum is the
 * cpu_vec table's max_scaled and the double exponentials its exp_f64
 * (cpu_vec.inc, built for each instruction set by cpu_vec*.c). From below
 * it also uses cpu_parallel_for (cpu_pool.c) and cpu_rows.h.
 *
 * argmax: the index of the largest logit, the lowest index on ties; NaN
 * counts as smaller than every number (a row of NaN gives 0).
 *
 * sample, per row r of V logits l[i] (converted exactly to double), all in
 * double precision. Candidates are always visited in ascending token id
 * ("id order"); sums are plain left-to-right sums in the order stated.
 *
 *  0. If !(temperature > 0) or top_k == 1: the argmax of the row.
 *  1. Temperature: z[i] = l[i] / temperature; a NaN logit becomes -inf.
 *  2. Top-k: if 0 < top_k < V, the candidates are the top_k tokens by
 *     (z descending, id ascending); otherwise all V tokens.
 *  3. Weights: m = max z over the candidates (if m is -inf, no finite logit:
 *     the answer is the argmax of step 0); e[i] = exp(z[i] - m), so the most
 *     likely token has e = 1 and p[i] = e[i] / S with S = sum of e over the
 *     candidates in id order. (The renormalised probabilities p are never
 *     formed; every rule below is written in e and S.)
 *  4. Filters, on the candidates ordered by (e descending, id ascending):
 *     top-p (if top_p < 1): keep the shortest prefix whose running sum of e
 *       (in that order) is >= top_p * S, i.e. probability mass >= top_p;
 *     min-p (if min_p > 0): drop every token with e < min_p, i.e. with
 *       p < min_p * p_max.
 *     The first token of the order is always kept.
 *  5. Draw: u = uniform double in [0, 1) (below); W = sum of e over the kept
 *     tokens in id order; t = u * W; walking the kept tokens in id order with
 *     a running sum c of e, the answer is the first token with t < c (if
 *     rounding leaves none, the last kept token with e > 0). A token with
 *     e = 0 is never drawn.
 *
 * The random number: (r0, r1, r2, r3) = Philox4x32-10 (Salmon et al., SC'11)
 * of counter (offset & 0xffffffff, offset >> 32, r & 0xffffffff, r >> 32)
 * with key (seed & 0xffffffff, seed >> 32); u = ((r0 >> 5) * 2^26 +
 * (r1 >> 6)) * 2^-53. Rows are independent, so the result depends on the
 * inputs only, never on the thread count.
 *
 * exp is the plugin's own double exp (within 2 ulp of the true value), so a
 * float64 reference agrees except when t falls within ~1e-15 of a boundary.
 * Only the candidates that can pass top-p are sorted: a histogram of e by
 * binary exponent bounds the prefix first.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_rows.h"
#include "ops.h"

/* ------------------------------------------------------------ argmax */

static int32_t row_argmax(int32_t dtype, const char *row, int64_t n) {
  /* The largest value and the first block whose maximum it is, in one pass
   * (the row once from memory; a second pass re-read all of a row larger
   * than the L2 cache); then that block's first element equal to it. Every
   * block before has a smaller maximum, so the search starts there (and
   * goes on past it only when every logit is NaN or -inf). */
  float best = -__builtin_inff();
  int64_t first = 0;
  for (int64_t col = 0; col < n; col += CPU_BLOCK) {
    int64_t count = n - col < CPU_BLOCK ? n - col : CPU_BLOCK;
    float block_max = cpu_vec->max_scaled(dtype, cpu_at(row, dtype, col), 1.0f, count);
    if (block_max > best) {
      best = block_max;
      first = col;
    }
  }
  for (int64_t col = first; col < n; col += CPU_BLOCK) {
    int64_t count = n - col < CPU_BLOCK ? n - col : CPU_BLOCK;
    if (cpu_vec->max_scaled(dtype, cpu_at(row, dtype, col), 1.0f, count) != best) continue;
    float scratch[CPU_BLOCK];
    const float *x = cpu_in_f32(dtype, cpu_at(row, dtype, col), scratch, count);
    for (int64_t i = 0; i < count; i++)
      if (x[i] == best) return (int32_t)(col + i);
  }
  return 0; /* every logit is NaN */
}

typedef struct argmax_job {
  cpu_rows out, logits;
} argmax_job;

static void argmax_range(void *ctx, int64_t begin, int64_t end) {
  const argmax_job *job = ctx;
  for (int64_t row = begin; row < end; row++) {
    int32_t index = row_argmax(job->logits.dtype, cpu_row(&job->logits, row), job->logits.cols);
    *(int32_t *)(void *)cpu_flat(&job->out, row) = index;
  }
}

gllmk_status cpu_argmax(gllmk_plugin_device *device, const gllmk_argmax_args *args) {
  argmax_job job = {.out = cpu_rows_of(args->out), .logits = cpu_rows_of(args->logits)};
  cpu_parallel_for(device, job.logits.rows, cpu_row_grain(job.logits.cols), argmax_range, &job);
  return GLLMK_OK;
}

/* ------------------------------------------------------------ random */

static void philox4x32_10(uint32_t counter[4], uint32_t key0, uint32_t key1) {
  for (int round = 0; round < 10; round++) {
    if (round > 0) {
      key0 += 0x9e3779b9u;
      key1 += 0xbb67ae85u;
    }
    uint64_t product0 = (uint64_t)0xd2511f53u * counter[0];
    uint64_t product1 = (uint64_t)0xcd9e8d57u * counter[2];
    uint32_t next[4] = {
        (uint32_t)(product1 >> 32) ^ counter[1] ^ key0,
        (uint32_t)product1,
        (uint32_t)(product0 >> 32) ^ counter[3] ^ key1,
        (uint32_t)product0,
    };
    for (int k = 0; k < 4; k++) counter[k] = next[k];
  }
}

/* Uniform in [0, 1) with 53 random bits, for (seed, offset, row). */
static double sample_uniform(uint64_t seed, uint64_t offset, uint64_t row) {
  uint32_t counter[4] = {(uint32_t)offset, (uint32_t)(offset >> 32), (uint32_t)row,
                         (uint32_t)(row >> 32)};
  philox4x32_10(counter, (uint32_t)seed, (uint32_t)(seed >> 32));
  uint64_t bits = ((uint64_t)(counter[0] >> 5) << 26) | (counter[1] >> 6);
  return (double)bits * 0x1p-53;
}

/* ------------------------------------------------------------ top-k */

static int compare_int32(const void *a, const void *b) {
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Top-k order: (value descending, id ascending). */
static int value_before(const double *value, int32_t a, int32_t b) {
  return value[a] > value[b] || (value[a] == value[b] && a < b);
}

/* Fills ids with the k best tokens, then sorts them by id. A min-heap (root
 * = the worst token kept so far) sees each token once. */
static void select_top_k(const double *value, int64_t vocab, int32_t k, int32_t *ids) {
  int32_t *heap = ids;
  for (int64_t i = 0; i < vocab; i++) {
    int32_t token = (int32_t)i;
    int64_t hole;
    if (i < k) {
      hole = i; /* sift up */
      while (hole > 0 && value_before(value, heap[(hole - 1) / 2], token)) {
        heap[hole] = heap[(hole - 1) / 2];
        hole = (hole - 1) / 2;
      }
    } else {
      if (!value_before(value, token, heap[0])) continue;
      hole = 0; /* replace the root, sift down */
      for (;;) {
        int64_t child = 2 * hole + 1;
        if (child >= k) break;
        if (child + 1 < k && value_before(value, heap[child], heap[child + 1])) child++;
        if (!value_before(value, token, heap[child])) break;
        heap[hole] = heap[child];
        hole = child;
      }
    }
    heap[hole] = token;
  }
  qsort(ids, (size_t)k, sizeof *ids, compare_int32);
}

/* ------------------------------------------------------------ candidates
 *
 * Top-k needs only the tokens that can be among the k best. The maxima of
 * blocks of CANDIDATE_BLOCK tokens bound them: the k-th largest block
 * maximum t is at most the k-th largest logit (k blocks hold a value >= t),
 * so every top-k token has a logit >= t, and only blocks whose maximum
 * reaches t hold any. The candidates are those tokens, in id order, so
 * select_top_k on them (ties by position = ties by id) keeps exactly the
 * tokens it would keep over the whole row. */

enum { CANDIDATE_BLOCK = 64 };

/* The k-th largest of values[0..n) (0 < k <= n) by a min-heap of the k
 * largest (`heap`: room for k). */
static float kth_largest(const float *values, int64_t n, int64_t k, float *heap) {
  for (int64_t i = 0; i < n; i++) {
    float v = values[i];
    int64_t hole;
    if (i < k) {
      hole = i; /* sift up */
      while (hole > 0 && heap[(hole - 1) / 2] > v) {
        heap[hole] = heap[(hole - 1) / 2];
        hole = (hole - 1) / 2;
      }
    } else {
      if (!(v > heap[0])) continue;
      hole = 0; /* replace the root, sift down */
      for (;;) {
        int64_t child = 2 * hole + 1;
        if (child >= k) break;
        if (child + 1 < k && heap[child + 1] < heap[child]) child++;
        if (!(heap[child] < v)) break;
        heap[hole] = heap[child];
        hole = child;
      }
    }
    heap[hole] = v;
  }
  return heap[0];
}

/* The candidates of a row for top_k (0 < top_k < vocab): their logits in
 * double (NaN as -inf) and their ids, ascending, in *value and *token
 * (malloc'ed here, the caller frees them). Returns their count (>= top_k),
 * or -1 when host memory ran out. */
static int64_t top_k_candidates(int32_t dtype, const char *logits, int64_t vocab, int32_t top_k,
                                double **value, int32_t **token) {
  int64_t blocks = (vocab + CANDIDATE_BLOCK - 1) / CANDIDATE_BLOCK;
  float threshold = -INFINITY; /* -inf: every token (NaN as -inf) is a candidate */
  float *block_max = NULL;
  int64_t capacity = vocab;
  *value = NULL;
  *token = NULL;
  if (blocks >= top_k) {
    /* calloc, not malloc: GCC with ASan cannot tell that every element is
     * written before kth_largest reads it (-Wmaybe-uninitialized). */
    block_max = calloc((size_t)(blocks + top_k), sizeof(float));
    if (!block_max) return -1;
    for (int64_t b = 0; b < blocks; b++) {
      int64_t col = b * CANDIDATE_BLOCK;
      int64_t n = vocab - col < CANDIDATE_BLOCK ? vocab - col : CANDIDATE_BLOCK;
      block_max[b] = cpu_vec->max_scaled(dtype, cpu_at(logits, dtype, col), 1.0f, n);
    }
    threshold = kth_largest(block_max, blocks, top_k, block_max + blocks);
    if (threshold != -INFINITY) {
      capacity = 0;
      for (int64_t b = 0; b < blocks; b++) capacity += block_max[b] >= threshold;
      capacity *= CANDIDATE_BLOCK;
    }
  }
  *value = malloc((size_t)capacity * sizeof(double));
  *token = malloc((size_t)capacity * sizeof(int32_t));
  if (!*value || !*token) {
    free(block_max);
    return -1;
  }
  int64_t count = 0;
  float scratch[CANDIDATE_BLOCK];
  for (int64_t b = 0; b < blocks; b++) {
    if (threshold != -INFINITY && !(block_max[b] >= threshold)) continue;
    int64_t col = b * CANDIDATE_BLOCK;
    int64_t n = vocab - col < CANDIDATE_BLOCK ? vocab - col : CANDIDATE_BLOCK;
    const float *l = cpu_in_f32(dtype, cpu_at(logits, dtype, col), scratch, n);
    for (int64_t i = 0; i < n; i++) {
      if (threshold != -INFINITY && !(l[i] >= threshold)) continue;
      (*value)[count] = isnan(l[i]) ? -INFINITY : (double)l[i];
      (*token)[count++] = (int32_t)(col + i);
    }
  }
  free(block_max);
  return count;
}

/* ------------------------------------------------------------ top-p */

enum { OCTAVES = 64 };

/* Which power-of-two range e in [0, 1] lies in: 0 for e = 1, b for
 * [2^-b, 2^-(b-1)), the last one for anything smaller (and 0). */
static int octave_of(double e) {
  uint64_t bits;
  memcpy(&bits, &e, sizeof bits);
  int64_t octave = 1023 - (int64_t)(bits >> 52);
  return octave < 0 ? 0 : octave >= OCTAVES ? OCTAVES - 1 : (int)octave;
}

/* Sorts (key, position) pairs by key ascending, equal keys keeping their
 * order: LSD radix sort on bytes, skipping bytes that are all equal. */
static void radix_sort(uint64_t *keys, int32_t *positions, uint64_t *key_tmp, int32_t *position_tmp,
                       int64_t n) {
  for (int shift = 0; shift < 64; shift += 8) {
    int64_t count[257] = {0};
    for (int64_t i = 0; i < n; i++) count[((keys[i] >> shift) & 0xff) + 1]++;
    if (count[((keys[0] >> shift) & 0xff) + 1] == n) continue; /* one value: nothing moves */
    for (int d = 0; d < 256; d++) count[d + 1] += count[d];
    for (int64_t i = 0; i < n; i++) {
      int64_t to = count[(keys[i] >> shift) & 0xff]++;
      key_tmp[to] = keys[i];
      position_tmp[to] = positions[i];
    }
    memcpy(keys, key_tmp, (size_t)n * sizeof *keys);
    memcpy(positions, position_tmp, (size_t)n * sizeof *positions);
  }
}

/* Per-thread scratch for rows of V logits; C = top_k when 0 < top_k < V,
 * else V. */
typedef struct sample_scratch {
  double *logits;      /* [V] the row in double, NaN as -inf (only when C = V) */
  double *e;           /* [C] per candidate: z, then exp(z - m) */
  int32_t *ids;        /* [C] top-k candidate ids, ascending */
  unsigned char *kept; /* [C] per candidate */
  uint64_t *keys, *key_tmp;
  int32_t *order, *order_tmp; /* [C] candidate positions being sorted */
} sample_scratch;

/* Step 4 with top_p < 1: marks kept[c]. The exact walk needs the candidates
 * in order, but only as far as mass top_p: a histogram of e by octave finds
 * a set that surely holds that prefix (with a margin far above rounding),
 * and only that set is sorted. */
static void keep_top_p(const sample_scratch *s, int64_t count, double sum, float top_p,
                       double min_e) {
  double target = (double)top_p * sum;
  double mass[OCTAVES] = {0};
  for (int64_t c = 0; c < count; c++)
    if (s->e[c] >= min_e) mass[octave_of(s->e[c])] += s->e[c];
  int last = OCTAVES - 1;
  double running = 0.0;
  for (int b = 0; b < OCTAVES; b++) {
    running += mass[b];
    if (running >= target * (1.0 + 1e-9)) {
      last = b;
      break;
    }
  }
  int64_t n = 0;
  for (int64_t c = 0; c < count; c++) {
    if (s->e[c] < min_e || octave_of(s->e[c]) > last) continue;
    uint64_t bits;
    memcpy(&bits, &s->e[c], sizeof bits);
    s->keys[n] = ~bits; /* e >= 0: larger e, smaller key */
    s->order[n++] = (int32_t)c;
  }
  radix_sort(s->keys, s->order, s->key_tmp, s->order_tmp, n);
  running = 0.0;
  for (int64_t i = 0; i < n; i++) {
    int32_t c = s->order[i];
    s->kept[c] = 1;
    running += s->e[c];
    if (running >= target) break;
  }
}

/* ------------------------------------------------------------ sample */

typedef struct sample_job {
  cpu_rows out, logits;
  float temperature, top_p, min_p;
  int32_t top_k;
  uint64_t seed, offset;
  int out_of_memory; /* set by a thread that could not get scratch memory */
} sample_job;

/* The token row `row` draws; -1 when host memory ran out. */
static int32_t sample_row(const sample_job *job, const sample_scratch *s, int64_t row) {
  int32_t dtype = job->logits.dtype;
  const char *logits = cpu_row(&job->logits, row);
  int64_t vocab = job->logits.cols;
  double temperature = job->temperature;

  /* 1-2. The logits in double; z = l / temperature has the same order (for
   * temperature > 0 distinct floats stay distinct), so top-k runs on l and
   * only the candidates are divided. */
  int64_t count = vocab; /* candidate c is token ids[c], or token c when all are in */
  const int32_t *ids = NULL;
  if (job->top_k > 0 && job->top_k < vocab) {
    double *value;
    int32_t *token;
    int64_t n = top_k_candidates(dtype, logits, vocab, job->top_k, &value, &token);
    if (n >= 0) {
      count = job->top_k;
      select_top_k(value, n, job->top_k, s->ids); /* positions: ascending = ids ascending */
      for (int64_t c = 0; c < count; c++) {
        s->e[c] = value[s->ids[c]] / temperature;
        s->ids[c] = token[s->ids[c]];
      }
      ids = s->ids;
    }
    free(value);
    free(token);
    if (n < 0) return -1;
  } else {
    float block[CPU_BLOCK];
    for (int64_t col = 0; col < vocab; col += CPU_BLOCK) {
      int64_t n = vocab - col < CPU_BLOCK ? vocab - col : CPU_BLOCK;
      const float *l = cpu_in_f32(dtype, cpu_at(logits, dtype, col), block, n);
      for (int64_t i = 0; i < n; i++) s->logits[col + i] = isnan(l[i]) ? -INFINITY : (double)l[i];
    }
    for (int64_t c = 0; c < count; c++) s->e[c] = s->logits[c] / temperature;
  }

  /* 3. weights */
  double m = -INFINITY;
  for (int64_t c = 0; c < count; c++)
    if (s->e[c] > m) m = s->e[c];
  if (m == -INFINITY) return row_argmax(dtype, logits, vocab);
  cpu_vec->exp_f64(s->e, s->e, m, count);
  double sum = 0.0;
  for (int64_t c = 0; c < count; c++) sum += s->e[c];

  /* 4. filters; the first token (e = 1) passes min-p whatever min_p is */
  double min_e = job->min_p > 0.0f ? fmin((double)job->min_p, 1.0) : 0.0;
  int filtered = job->top_p < 1.0f || job->min_p > 0.0f;
  if (job->top_p < 1.0f) {
    memset(s->kept, 0, (size_t)count);
    keep_top_p(s, count, sum, job->top_p, min_e);
  } else if (filtered) {
    for (int64_t c = 0; c < count; c++) s->kept[c] = s->e[c] >= min_e;
  }

  /* 5. draw */
  double kept_mass = 0.0;
  for (int64_t c = 0; c < count; c++)
    if (!filtered || s->kept[c]) kept_mass += s->e[c];
  double target = sample_uniform(job->seed, job->offset, (uint64_t)row) * kept_mass;
  double running = 0.0;
  int64_t last_possible = 0;
  for (int64_t c = 0; c < count; c++) {
    if (filtered && !s->kept[c]) continue;
    running += s->e[c];
    if (s->e[c] > 0.0) last_possible = c;
    if (target < running) {
      last_possible = c;
      break;
    }
  }
  return ids ? ids[last_possible] : (int32_t)last_possible;
}

static void sample_range(void *ctx, int64_t begin, int64_t end) {
  sample_job *job = ctx;
  size_t vocab = (size_t)job->logits.cols;
  int top_k = job->top_k > 0 && (size_t)job->top_k < vocab;
  size_t candidates = top_k ? (size_t)job->top_k : vocab;
  sample_scratch s = {
      .logits = top_k ? NULL : malloc(vocab * sizeof(double)),
      .e = malloc(candidates * sizeof(double)),
      .ids = malloc(candidates * sizeof(int32_t)),
      .kept = malloc(candidates),
      .keys = malloc(candidates * sizeof(uint64_t)),
      .key_tmp = malloc(candidates * sizeof(uint64_t)),
      .order = malloc(candidates * sizeof(int32_t)),
      .order_tmp = malloc(candidates * sizeof(int32_t)),
  };
  int ok = (top_k || s.logits) && s.e && s.ids && s.kept && s.keys && s.key_tmp && s.order &&
           s.order_tmp;
  for (int64_t row = begin; row < end && ok; row++) {
    int32_t token = sample_row(job, &s, row);
    *(int32_t *)(void *)cpu_flat(&job->out, row) = token;
    ok = token >= 0;
  }
  if (!ok) {
    __atomic_store_n(&job->out_of_memory, 1, __ATOMIC_RELAXED);
  }
  free(s.logits);
  free(s.e);
  free(s.ids);
  free(s.kept);
  free(s.keys);
  free(s.key_tmp);
  free(s.order);
  free(s.order_tmp);
}

gllmk_status cpu_sample(gllmk_plugin_device *device, const gllmk_sample_args *args) {
  if (!(args->temperature > 0.0f) || args->top_k == 1) {
    gllmk_argmax_args argmax = {.out = args->out, .logits = args->logits};
    return cpu_argmax(device, &argmax);
  }
  sample_job job = {
      .out = cpu_rows_of(args->out),
      .logits = cpu_rows_of(args->logits),
      .temperature = args->temperature,
      .top_p = args->top_p,
      .min_p = args->min_p,
      .top_k = args->top_k,
      .seed = args->seed,
      .offset = args->offset,
  };
  /* One chunk per thread, so each thread allocates its scratch once. */
  int64_t rows = job.logits.rows;
  int64_t grain = (rows + device->num_threads - 1) / device->num_threads;
  cpu_parallel_for(device, rows, grain, sample_range, &job);
  if (job.out_of_memory)
    return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_sample: out of host memory");
  return GLLMK_OK;
}
