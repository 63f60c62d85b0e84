/*
 * bench_ops_matmul.c - matmul, attention, kv_append and paged_attention.
 *
 * Case sizes (bench_case):
 *   matmul           m, n, k: out [M, N] = a [M, K] . b [N, K]^T (Linear weight)
 *   attention        m = sequence length S, n = head dim (0: 128), k = batch (0: 1);
 *                    op_attention is causal, op_attention_full is not
 *   kv_append        m = minimum tokens (grown to DRAM size)
 *   paged_attention  m = sequences decoding one token each, n = context length
 * Heads (and head_dim but for attention's n) are Llama-3-8B's (bench.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* Reference work per sampled row is bounded by this many multiply-adds. */
#define REF_ROW_BUDGET (64.0 * 1024 * 1024)

/* ------------------------------------------------------------ matmul */

static int matmul_setup(workload *w) {
  const bench_case *c = w->bcase;
  int64_t out_shape[2] = {c->m, c->n}, a_shape[2] = {c->m, c->k}, b_shape[2] = {c->n, c->k};
  if (wl_output(w, MATMUL_OUT, 2, out_shape) || wl_input(w, MATMUL_A, "a", 2, a_shape, -1, 1) ||
      wl_input(w, MATMUL_B, "b", 2, b_shape, -1, 1))
    return -1;
  snprintf(w->shape, sizeof w->shape, "M=%lld N=%lld K=%lld", (long long)c->m, (long long)c->n,
           (long long)c->k);
  w->bytes = wl_default_bytes(w); /* the weight is read once */
  w->flops = 2.0 * (double)c->m * (double)c->n * (double)c->k;
  /* A decode batch's matmul (a GEMV at one row) streams the weight once:
   * bandwidth-bound up to tens of rows (a bf16 H100 does ~300 flops per
   * byte streamed, 64 rows need 64). */
  w->ceiling = c->m <= 64 ? CEILING_COPY : CEILING_PEER;
  double rows = REF_ROW_BUDGET / ((double)c->n * (double)c->k);
  w->sample_rows = rows < 2 ? 2 : rows > 16 ? 16 : (int)rows;
  return 0;
}

static gllmk_status matmul_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_matmul_args args = {.out = &t[MATMUL_OUT], .a = &t[MATMUL_A], .b = &t[MATMUL_B],
                            .bias = NULL, .alpha = 1.0f, .beta = 0.0f, .b_layout = GLLMK_B_NK};
  return gllmk_matmul(ctx, &args);
}

static int matmul_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  const bench_tensor *b = &w->tensors[MATMUL_B];
  int64_t n = b->shape[0], k = b->shape[1];
  double *a_row = malloc((size_t)k * sizeof *a_row), *b_row = malloc((size_t)k * sizeof *b_row);
  if (a_row && b_row) {
    wl_row(w, MATMUL_A, row, a_row);
    for (int64_t j = 0; j < n; j++) {
      dtype_get_run(b->dtype, b->host, j * k, k, b_row);
      double sum = 0;
      for (int64_t i = 0; i < k; i++) sum += a_row[i] * b_row[i];
      expect[j] = sum;
    }
  }
  free(a_row);
  free(b_row);
  return a_row && b_row ? 0 : -1;
}

const bench_op op_matmul = {GLLMK_OP_matmul, matmul_setup, matmul_run, matmul_ref, NULL, NULL};

/* ------------------------------------------------ attention reference */

/* out = sum_j softmax_j(scale * q . k_j) v_j over `count` keys, where key j
 * is row key_rows[j] of tensors k_index and v_index (rows of head_dim). */
static int attend(const workload *w, int k_index, int v_index, const double *q,
                  const int64_t *key_rows, int64_t count, double *out) {
  const int64_t dim = tensor_cols(&w->tensors[k_index]);
  double scale = 1.0 / sqrt((double)dim), max = -INFINITY, sum = 0;
  double *scores = malloc((size_t)(count + dim) * sizeof *scores), *row = scores + count;
  if (!scores) return -1;
  for (int64_t j = 0; j < count; j++) {
    wl_row(w, k_index, key_rows[j], row);
    double dot = 0;
    for (int64_t d = 0; d < dim; d++) dot += q[d] * row[d];
    scores[j] = scale * dot;
    max = fmax(max, scores[j]);
  }
  for (int64_t d = 0; d < dim; d++) out[d] = 0;
  for (int64_t j = 0; j < count; j++) {
    double p = exp(scores[j] - max);
    sum += p;
    wl_row(w, v_index, key_rows[j], row);
    for (int64_t d = 0; d < dim; d++) out[d] += p * row[d];
  }
  for (int64_t d = 0; d < dim; d++) out[d] /= sum;
  free(scores);
  return 0;
}

static float attention_scale(int64_t dim) { return 1.0f / sqrtf((float)dim); }

/* --------------------------------------------------------- attention */

enum { ATT_OUT, ATT_Q, ATT_K, ATT_V };

static int64_t attention_dim(const bench_case *c) { return c->n ? c->n : MODEL_HEAD_DIM; }
static int64_t attention_batch(const bench_case *c) { return c->k ? c->k : 1; }
static int attention_causal(const bench_case *c) { return c->op == &op_attention; }

/* "B=4 S=4096 H=32/8 D=64 causal"; batch 1 leaves "B=" out, which keeps the
 * text of the rows that predate batches (before/after runs match on it). */
static void attention_describe(const bench_case *c, char *text, size_t size) {
  char batch[32] = "";
  if (attention_batch(c) > 1)
    snprintf(batch, sizeof batch, "B=%lld ", (long long)attention_batch(c));
  snprintf(text, size, "%sS=%lld H=%d/%d D=%lld %s", batch, (long long)c->m, MODEL_HEADS,
           MODEL_KV_HEADS, (long long)attention_dim(c),
           attention_causal(c) ? "causal" : "non-causal");
}

/* A prefill of m tokens in each of B sequences: q [B, S, 32, D], k and v
 * [B, S, 8, D]. */
static int attention_setup(workload *w) {
  const bench_case *c = w->bcase;
  int64_t batch = attention_batch(c), s = c->m, dim = attention_dim(c);
  int64_t q_shape[4] = {batch, s, MODEL_HEADS, dim};
  int64_t kv_shape[4] = {batch, s, MODEL_KV_HEADS, dim};
  if (wl_output(w, ATT_OUT, 4, q_shape) || wl_input(w, ATT_Q, "q", 4, q_shape, -1, 1) ||
      wl_input(w, ATT_K, "k", 4, kv_shape, -1, 1) || wl_input(w, ATT_V, "v", 4, kv_shape, -1, 1))
    return -1;
  attention_describe(c, w->shape, sizeof w->shape);
  w->bytes = wl_default_bytes(w);
  /* Query i sees keys 0..i (causal: S(S+1)/2 pairs) or all S keys; a QK^T
   * and a PV product each. */
  double pairs = attention_causal(c) ? (double)s * (double)(s + 1) / 2 : (double)s * (double)s;
  w->flops = 4.0 * (double)batch * MODEL_HEADS * (double)dim * pairs;
  w->ceiling = CEILING_PEER;
  w->sample_rows = 64;
  return 0;
}

static gllmk_status attention_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  gllmk_attention_args args = {.out = &t[ATT_OUT], .q = &t[ATT_Q], .k = &t[ATT_K],
                               .v = &t[ATT_V], .kv_lens = NULL, .lse = NULL,
                               .scale = attention_scale(attention_dim(w->bcase)),
                               .causal = attention_causal(w->bcase)};
  return gllmk_attention(ctx, &args);
}

/* Row = (sequence b, token s, head h); it sees keys 0..s (causal) or all
 * keys of sequence b, of kv head h / (32/8). */
static int attention_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  const bench_tensor *q = &w->tensors[ATT_Q];
  int64_t len = q->shape[1], token = row / MODEL_HEADS, seq = token / len, s = token % len;
  int64_t kv_head = row % MODEL_HEADS / (MODEL_HEADS / MODEL_KV_HEADS);
  int64_t count = attention_causal(w->bcase) ? s + 1 : len;
  double *q_row = malloc((size_t)q->shape[3] * sizeof *q_row);
  int64_t *key_rows = malloc((size_t)count * sizeof *key_rows);
  int rc = -1;
  if (q_row && key_rows) {
    for (int64_t j = 0; j < count; j++)
      key_rows[j] = (seq * len + j) * MODEL_KV_HEADS + kv_head;
    wl_row(w, ATT_Q, row, q_row);
    rc = attend(w, ATT_K, ATT_V, q_row, key_rows, count, expect);
  }
  free(q_row);
  free(key_rows);
  return rc;
}

const bench_op op_attention = {GLLMK_OP_attention, attention_setup, attention_run,
                               attention_ref, NULL, attention_describe};
const bench_op op_attention_full = {GLLMK_OP_attention, attention_setup, attention_run,
                                    attention_ref, NULL, attention_describe};

/* --------------------------------------------------------- kv_append */

enum { KVA_K_CACHE, KVA_V_CACHE, KVA_K, KVA_V, KVA_SLOTS };

/* T tokens into a cache of exactly T slots whose blocks are handed out in a
 * random order, as a paged allocator would. w->aux maps a cache block back
 * to the block of tokens written into it. */
static int kv_append_setup(workload *w) {
  int64_t row = MODEL_KV_HEADS * MODEL_HEAD_DIM;
  int64_t tokens = dram_rows(row, w->bcase->dtype, w->bcase->m);
  tokens = (tokens + KV_BLOCK_SIZE - 1) / KV_BLOCK_SIZE * KV_BLOCK_SIZE;
  int64_t blocks = tokens / KV_BLOCK_SIZE;
  int64_t kv_shape[3] = {tokens, MODEL_KV_HEADS, MODEL_HEAD_DIM};
  int64_t cache_shape[4] = {blocks, KV_BLOCK_SIZE, MODEL_KV_HEADS, MODEL_HEAD_DIM};
  gllmk_dtype dtype = w->bcase->dtype;
  int32_t *order = malloc((size_t)blocks * sizeof *order);
  w->aux = malloc((size_t)blocks * sizeof *w->aux);
  if (!order || !w->aux ||
      wl_tensor(w, KVA_K_CACHE, "k_cache", dtype, ROLE_INOUT, CHECK_FLOAT, 4, cache_shape) ||
      wl_tensor(w, KVA_V_CACHE, "v_cache", dtype, ROLE_INOUT, CHECK_FLOAT, 4, cache_shape) ||
      wl_input(w, KVA_K, "k", 3, kv_shape, -1, 1) || wl_input(w, KVA_V, "v", 3, kv_shape, -1, 1) ||
      wl_tensor(w, KVA_SLOTS, "slots", GLLMK_I32, ROLE_IN, CHECK_NONE, 1, &tokens)) {
    free(order);
    return -1;
  }
  wl_permutation(w, 1, order, blocks);
  int32_t *slots = w->tensors[KVA_SLOTS].host;
  for (int64_t t = 0; t < tokens; t++)
    slots[t] = order[t / KV_BLOCK_SIZE] * KV_BLOCK_SIZE + (int32_t)(t % KV_BLOCK_SIZE);
  for (int64_t b = 0; b < blocks; b++) w->aux[order[b]] = (int32_t)b;
  free(order);
  snprintf(w->shape, sizeof w->shape, "T=%lld H=%d D=%d block %d", (long long)tokens,
           MODEL_KV_HEADS, MODEL_HEAD_DIM, KV_BLOCK_SIZE);
  /* k, v and slots read; the same bytes of k and v written into the caches. */
  w->bytes = 2.0 * (double)(w->tensors[KVA_K].bytes + w->tensors[KVA_V].bytes) +
             (double)w->tensors[KVA_SLOTS].bytes;
  w->ceiling = CEILING_COPY;
  return 0;
}

static gllmk_status kv_append_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_kv_append_args args = {.k_cache = &t[KVA_K_CACHE], .v_cache = &t[KVA_V_CACHE],
                               .k = &t[KVA_K], .v = &t[KVA_V], .slots = &t[KVA_SLOTS]};
  return gllmk_kv_append(ctx, &args);
}

/* Row = (slot, kv head) of a cache: the k or v row of the token written there. */
static int kv_append_ref(const workload *w, int tensor, int64_t row, double *expect) {
  int64_t slot = row / MODEL_KV_HEADS, head = row % MODEL_KV_HEADS;
  int64_t token = (int64_t)w->aux[slot / KV_BLOCK_SIZE] * KV_BLOCK_SIZE + slot % KV_BLOCK_SIZE;
  wl_row(w, tensor == KVA_K_CACHE ? KVA_K : KVA_V, token * MODEL_KV_HEADS + head, expect);
  return 0;
}

const bench_op op_kv_append = {GLLMK_OP_kv_append, kv_append_setup, kv_append_run,
                               kv_append_ref, NULL, NULL};

/* --------------------------------------------------- paged_attention */

enum { PA_OUT, PA_Q, PA_K_CACHE, PA_V_CACHE, PA_TABLE, PA_Q_STARTS, PA_SEQ_LENS };

/* Writes the I32 bookkeeping of m sequences decoding one token after n
 * tokens each: q_starts 0..m, seq_lens n, block tables over a shuffled cache. */
static void paged_tables(workload *w, int64_t seqs, int64_t len) {
  int64_t blocks = w->tensors[PA_TABLE].shape[0] * w->tensors[PA_TABLE].shape[1];
  int32_t *q_starts = w->tensors[PA_Q_STARTS].host, *seq_lens = w->tensors[PA_SEQ_LENS].host;
  wl_permutation(w, 2, w->tensors[PA_TABLE].host, blocks);
  for (int64_t b = 0; b <= seqs; b++) q_starts[b] = (int32_t)b;
  for (int64_t b = 0; b < seqs; b++) seq_lens[b] = (int32_t)len;
}

static int paged_attention_setup(workload *w) {
  int64_t seqs = w->bcase->m, len = w->bcase->n, per_seq = len / KV_BLOCK_SIZE;
  int64_t q_shape[3] = {seqs, MODEL_HEADS, MODEL_HEAD_DIM};
  int64_t cache_shape[4] = {seqs * per_seq, KV_BLOCK_SIZE, MODEL_KV_HEADS, MODEL_HEAD_DIM};
  int64_t table_shape[2] = {seqs, per_seq}, starts = seqs + 1;
  if (wl_output(w, PA_OUT, 3, q_shape) || wl_input(w, PA_Q, "q", 3, q_shape, -1, 1) ||
      wl_input(w, PA_K_CACHE, "k_cache", 4, cache_shape, -1, 1) ||
      wl_input(w, PA_V_CACHE, "v_cache", 4, cache_shape, -1, 1) ||
      wl_tensor(w, PA_TABLE, "block_table", GLLMK_I32, ROLE_IN, CHECK_NONE, 2, table_shape) ||
      wl_tensor(w, PA_Q_STARTS, "q_starts", GLLMK_I32, ROLE_IN, CHECK_NONE, 1, &starts) ||
      wl_tensor(w, PA_SEQ_LENS, "seq_lens", GLLMK_I32, ROLE_IN, CHECK_NONE, 1, &seqs))
    return -1;
  paged_tables(w, seqs, len);
  snprintf(w->shape, sizeof w->shape, "B=%lld L=%lld H=%d/%d D=%d", (long long)seqs,
           (long long)len, MODEL_HEADS, MODEL_KV_HEADS, MODEL_HEAD_DIM);
  w->bytes = wl_default_bytes(w); /* every cache block belongs to one sequence */
  w->flops = 4.0 * (double)seqs * MODEL_HEADS * (double)len * MODEL_HEAD_DIM;
  w->ceiling = CEILING_COPY; /* decode attention streams the cache once */
  w->sample_rows = 64;
  return 0;
}

static gllmk_status paged_attention_run(gllmk_context *ctx, const workload *w,
                                        const gllmk_tensor *t) {
  (void)w;
  gllmk_paged_attention_args args = {
      .out = &t[PA_OUT], .q = &t[PA_Q], .k_cache = &t[PA_K_CACHE], .v_cache = &t[PA_V_CACHE],
      .block_table = &t[PA_TABLE], .q_starts = &t[PA_Q_STARTS], .seq_lens = &t[PA_SEQ_LENS],
      .scale = attention_scale(MODEL_HEAD_DIM)};
  return gllmk_paged_attention(ctx, &args);
}

/* Row = (sequence b, head h): its one query sees all len cached positions. */
static int paged_attention_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  const bench_tensor *table = &w->tensors[PA_TABLE];
  const int32_t *blocks = table->host;
  int64_t seq = row / MODEL_HEADS, kv_head = row % MODEL_HEADS / (MODEL_HEADS / MODEL_KV_HEADS);
  int64_t len = table->shape[1] * KV_BLOCK_SIZE;
  double q[MODEL_HEAD_DIM];
  int64_t *key_rows = malloc((size_t)len * sizeof *key_rows);
  if (!key_rows) return -1;
  for (int64_t p = 0; p < len; p++) {
    int64_t block = blocks[seq * table->shape[1] + p / KV_BLOCK_SIZE];
    key_rows[p] = (block * KV_BLOCK_SIZE + p % KV_BLOCK_SIZE) * MODEL_KV_HEADS + kv_head;
  }
  wl_row(w, PA_Q, row, q);
  int rc = attend(w, PA_K_CACHE, PA_V_CACHE, q, key_rows, len, expect);
  free(key_rows);
  return rc;
}

const bench_op op_paged_attention = {GLLMK_OP_paged_attention, paged_attention_setup,
                                     paged_attention_run, paged_attention_ref, NULL, NULL};
