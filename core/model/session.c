/*
 * session.c - a session: the paged KV cache with its block allocator, the
 * sequences, the scratch activations (gllmk_session_forward and
 * gllmk_session_decode are in step.c).
 *
 * Blocks are handed out from a free stack as sequences grow and return when
 * a sequence is freed. A forward checks everything first (sequences, token
 * ids, lengths, free blocks), so a failed call changes nothing; then it
 * writes all index arrays in one transfer, enqueues (or replays) the model
 * and, when asked for tokens, samples on the device and reads only the ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define DEFAULT_CACHE_TOKENS 4096
#define DEFAULT_BLOCK_SIZE 16
#define DEFAULT_MAX_SEQUENCES 64
#define DEFAULT_MAX_TOKENS 512

static uint32_t pow2_at_least(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p *= 2;
  return p;
}

/* A device tensor owned by a rank of the session. */
static gllmk_status shard_alloc(session_shard *shard, int32_t dtype, int32_t ndim,
                                const int64_t *shape, gllmk_tensor *out_tensor) {
  return buffer_list_tensor(&shard->buffers, shard->context, dtype, ndim, shape, out_tensor);
}

void step_layout_for(const session_state *s, uint32_t tokens, uint32_t seqs, step_layout *out) {
  step_layout l = {.tokens = tokens, .seqs = seqs};
  l.ids = 0;
  l.positions = l.ids + tokens;
  l.slots = l.positions + tokens;
  l.q_starts = l.slots + tokens;
  l.seq_lens = l.q_starts + seqs + 1;
  l.last_rows = l.seq_lens + seqs;
  l.block_table = l.last_rows + seqs;
  l.total = l.block_table + (uint64_t)seqs * s->max_blocks_per_seq;
  *out = l;
}

/* ---------------------------------------------------------------- create */

static gllmk_status check_session_options(const gllmk_session_options *o, gllmk_session **out) {
  if (o == NULL || out == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_session_create: options and out_session are required");
  if (o->struct_size < sizeof *o)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_session_create: options.struct_size=%zu, expected %zu",
                      o->struct_size, sizeof *o);
  /* A decode batch is padded to a power of two with one recording each:
   * SESSION_BUCKETS of them cover up to 2^(SESSION_BUCKETS - 1) sequences. */
  if (o->block_size > 4096 || o->max_sequences > (1u << (SESSION_BUCKETS - 1)) ||
      o->max_batch_tokens > (1u << 20))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "gllmk_session_create: block_size <= 4096, max_sequences <= %u and "
                      "max_batch_tokens <= 2^20 are the limits", 1u << (SESSION_BUCKETS - 1));
  return GLLMK_OK;
}

/* Sizes from the options: blocks from a token count or a byte budget. */
static gllmk_status size_session(session_state *s, const gllmk_session_options *o) {
  const model_config *c = &s->model->config;
  s->block_size = o->block_size ? o->block_size : DEFAULT_BLOCK_SIZE;
  s->max_sequences = o->max_sequences ? o->max_sequences : DEFAULT_MAX_SEQUENCES;
  uint32_t largest_bucket = pow2_at_least(s->max_sequences);
  s->max_tokens = o->max_batch_tokens ? o->max_batch_tokens : DEFAULT_MAX_TOKENS;
  if (s->max_tokens < largest_bucket) s->max_tokens = largest_bucket; /* a padded decode batch */
  /* A cache_bytes budget is each rank's: a rank holds its kv heads. */
  const model_config *local = &s->model->local;
  uint64_t token_bytes = 2ull * local->layers * local->kv_heads * local->head_dim *
                         gllmk_dtype_size((gllmk_dtype)s->model->dtype);
  uint64_t tokens = o->cache_tokens ? o->cache_tokens
                    : o->cache_bytes ? o->cache_bytes / token_bytes : DEFAULT_CACHE_TOKENS;
  uint64_t blocks = (tokens + s->block_size - 1) / s->block_size;
  if (blocks == 0 || blocks > INT32_MAX / s->block_size)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "gllmk_session_create: a cache of %llu tokens is not possible (%llu bytes per token)",
                      (unsigned long long)tokens, (unsigned long long)token_bytes);
  s->blocks_total = (uint32_t)blocks;
  uint64_t longest = (uint64_t)s->blocks_total * s->block_size;
  s->max_length = c->max_position < longest ? c->max_position : (uint32_t)longest;
  s->max_blocks_per_seq = (s->max_length + s->block_size - 1) / s->block_size;
  return GLLMK_OK;
}

static gllmk_status alloc_cache(session_state *s, session_shard *shard) {
  const model_config *c = &s->model->local;
  const int64_t shape[4] = {s->blocks_total, s->block_size, c->kv_heads, c->head_dim};
  shard->k_cache = calloc(c->layers, sizeof *shard->k_cache);
  shard->v_cache = calloc(c->layers, sizeof *shard->v_cache);
  if (shard->k_cache == NULL || shard->v_cache == NULL)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of memory");
  for (uint32_t i = 0; i < c->layers; i++) {
    gllmk_tensor *caches[2] = {&shard->k_cache[i], &shard->v_cache[i]};
    for (int j = 0; j < 2; j++) {
      MODEL_TRY(shard_alloc(shard, s->model->dtype, 4, shape, caches[j]));
      /* Padding rows of a decode bucket read block 0; it must hold numbers. */
      MODEL_TRY(gllmk_buffer_fill(caches[j]->buffer, 0, gllmk_buffer_size(caches[j]->buffer), 0));
    }
  }
  return GLLMK_OK;
}

/* Logits: rank 0's [S, vocab]; with several ranks, each rank's [S, vocab /
 * ranks] and the [ranks, S, vocab / ranks] they are gathered into. */
static gllmk_status alloc_logits(session_state *s, session_shard *shard, bool first_rank,
                                 int64_t rows) {
  const model_state *m = s->model;
  int32_t dt = m->dtype;
  const int64_t logits[2] = {rows, m->config.vocab}, part[2] = {rows, m->local.vocab};
  if (first_rank) {
    MODEL_TRY(shard_alloc(shard, dt, 2, logits, &shard->x.logits));
    MODEL_TRY(shard_alloc(shard, GLLMK_I32, 1, &rows, &shard->x.tokens));
    const int64_t history = DECODE_CHUNK * rows;
    MODEL_TRY(shard_alloc(shard, GLLMK_I32, 1, &history, &shard->x.token_history));
  }
  if (m->ranks == 1) return GLLMK_OK;
  MODEL_TRY(shard_alloc(shard, dt, 2, part, &shard->logits_part));
  return gllmk_buffer_alloc(shard->context,
                            (uint64_t)rows * m->config.vocab * gllmk_dtype_size((gllmk_dtype)dt),
                            &shard->gathered);
}

static gllmk_status alloc_scratch(session_state *s, session_shard *shard, bool first_rank) {
  const model_config *c = &s->model->local;
  scratch *x = &shard->x;
  int32_t dt = s->model->dtype;
  int64_t t = s->max_tokens, rows = pow2_at_least(s->max_sequences), d = c->head_dim;
  const int64_t hidden[2] = {t, c->hidden}, qkv[2] = {t, (int64_t)(c->heads + 2 * c->kv_heads) * d};
  const int64_t q[3] = {t, c->heads, d}, qk[3] = {t, (int64_t)(c->heads + c->kv_heads), d};
  const int64_t gate_up[2] = {t, 2 * (int64_t)c->intermediate}, act[2] = {t, c->intermediate};
  const int64_t last[2] = {rows, c->hidden};
  MODEL_TRY(shard_alloc(shard, dt, 2, hidden, &x->residual));
  MODEL_TRY(shard_alloc(shard, dt, 2, hidden, &x->normed));
  MODEL_TRY(shard_alloc(shard, dt, 2, qkv, &x->qkv));
  MODEL_TRY(shard_alloc(shard, dt, 3, qk, &x->qk));
  MODEL_TRY(shard_alloc(shard, dt, 3, q, &x->attn));
  MODEL_TRY(shard_alloc(shard, dt, 2, hidden, &x->proj));
  MODEL_TRY(shard_alloc(shard, dt, 2, gate_up, &x->gate_up));
  MODEL_TRY(shard_alloc(shard, dt, 2, act, &x->act));
  MODEL_TRY(shard_alloc(shard, dt, 2, last, &x->last));
  return alloc_logits(s, shard, first_rank, rows);
}

/* Host state: sequences, the free-block stack, the step arrays. */
static gllmk_status alloc_host(session_state *s) {
  s->seqs = calloc(s->max_sequences, sizeof *s->seqs);
  s->free_blocks = malloc((size_t)s->blocks_total * sizeof *s->free_blocks);
  if (s->seqs == NULL || s->free_blocks == NULL)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of memory");
  for (uint32_t i = 0; i < s->max_sequences; i++) {
    s->seqs[i].blocks = calloc(s->max_blocks_per_seq, sizeof *s->seqs[i].blocks);
    if (s->seqs[i].blocks == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of memory");
  }
  for (uint32_t i = 0; i < s->blocks_total; i++) /* block 0 handed out last */
    s->free_blocks[i] = (int32_t)(s->blocks_total - 1 - i);
  s->free_count = s->blocks_total;
  step_layout largest;
  step_layout_for(s, s->max_tokens, pow2_at_least(s->max_sequences), &largest);
  s->step_capacity = largest.total;
  s->step_host = calloc(s->step_capacity, sizeof *s->step_host);
  if (s->step_host == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of memory");
  return GLLMK_OK;
}

gllmk_status session_from_handle(const gllmk_session *handle, const char *fn,
                                 session_state **out) {
  *out = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_SESSION);
  if (*out == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: session is not a live session (NULL, destroyed, or its model freed)", fn);
  return GLLMK_OK;
}

static gllmk_status build_shard(session_state *s, uint32_t rank) {
  session_shard *shard = &s->shards[rank];
  shard->context = s->model->shards[rank].context;
  MODEL_TRY(alloc_cache(s, shard));
  MODEL_TRY(alloc_scratch(s, shard, rank == 0));
  MODEL_TRY(gllmk_buffer_alloc(shard->context, s->step_capacity * 4, &shard->step_buffer));
  return gllmk_synchronize(shard->context);
}

static gllmk_status build_session(session_state *s, const gllmk_session_options *options) {
  MODEL_TRY(size_session(s, options));
  MODEL_TRY(alloc_host(s));
  s->shards = calloc(s->model->ranks, sizeof *s->shards);
  if (s->shards == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of memory");
  for (uint32_t r = 0; r < s->model->ranks; r++) MODEL_TRY(build_shard(s, r));
  s->handle = core_handle_new(CORE_HANDLE_SESSION, s);
  if (s->handle == 0)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of handles");
  return GLLMK_OK;
}

gllmk_status gllmk_session_create(gllmk_model *model_handle, const gllmk_session_options *options,
                                  gllmk_session **out_session) {
  model_state *model;
  MODEL_TRY(model_from_handle(model_handle, "gllmk_session_create", &model));
  MODEL_TRY(check_session_options(options, out_session));
  session_state *s = calloc(1, sizeof *s);
  if (s == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_create: out of memory");
  s->model = model;
  gllmk_status status = build_session(s, options);
  if (status != GLLMK_OK) {
    char message[1024];
    snprintf(message, sizeof message, "%s", gllmk_last_error());
    session_free(s);
    return MODEL_FAIL(status, "%s", message);
  }
  s->next = model->sessions;
  model->sessions = s;
  *out_session = (gllmk_session *)(uintptr_t)s->handle;
  return GLLMK_OK;
}

static void free_shard(session_shard *shard) {
  for (uint32_t i = 0; i < SESSION_BUCKETS; i++) gllmk_recording_free(shard->recordings[i]);
  buffer_list_free(&shard->buffers);
  gllmk_buffer_free(shard->step_buffer);
  gllmk_buffer_free(shard->gathered);
  free(shard->k_cache);
  free(shard->v_cache);
}

void session_free(session_state *s) {
  for (uint32_t r = 0; s->shards && r < s->model->ranks; r++) free_shard(&s->shards[r]);
  free(s->shards);
  for (uint32_t i = 0; s->seqs && i < s->max_sequences; i++) free(s->seqs[i].blocks);
  free(s->seqs);
  free(s->free_blocks);
  free(s->step_host);
  free(s);
}

void gllmk_session_destroy(gllmk_session *handle) {
  session_state *s = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_SESSION);
  if (s == NULL) return;
  session_state **link = &s->model->sessions;
  while (*link != s) link = &(*link)->next;
  *link = s->next;
  core_handle_release(s->handle, CORE_HANDLE_SESSION);
  session_free(s);
}

/* ------------------------------------------------------------ sequences */

/* The session of a live handle and a live sequence of it. */
static gllmk_status seq_arg(const gllmk_session *handle, const char *fn, uint32_t seq,
                            session_state **out) {
  MODEL_TRY(session_from_handle(handle, fn, out));
  const session_state *s = *out;
  if (seq >= s->max_sequences || !s->seqs[seq].live)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: sequence %u is not a live sequence", fn, seq);
  return GLLMK_OK;
}

gllmk_status gllmk_session_seq_add(gllmk_session *handle, uint32_t *out_seq) {
  session_state *s;
  MODEL_TRY(session_from_handle(handle, "gllmk_session_seq_add", &s));
  if (out_seq == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_session_seq_add: out_seq is NULL");
  for (uint32_t i = 0; i < s->max_sequences; i++) {
    if (s->seqs[i].live) continue;
    s->seqs[i].live = true;
    s->seqs[i].length = 0;
    s->seqs[i].block_count = 0;
    *out_seq = i;
    return GLLMK_OK;
  }
  return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_session_seq_add: all %u sequences are in use",
                    s->max_sequences);
}

/* Returns blocks [keep, block_count) of a sequence to the free stack. */
void session_release(session_state *s, seq_state *q, uint32_t keep) {
  while (q->block_count > keep) s->free_blocks[s->free_count++] = q->blocks[--q->block_count];
}

gllmk_status gllmk_session_seq_free(gllmk_session *handle, uint32_t seq) {
  session_state *s;
  MODEL_TRY(seq_arg(handle, "gllmk_session_seq_free", seq, &s));
  session_release(s, &s->seqs[seq], 0);
  s->seqs[seq].live = false;
  return GLLMK_OK;
}

gllmk_status gllmk_session_seq_length(const gllmk_session *handle, uint32_t seq,
                                      uint32_t *out_length) {
  session_state *s;
  MODEL_TRY(seq_arg(handle, "gllmk_session_seq_length", seq, &s));
  if (out_length == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_session_seq_length: out_length is NULL");
  *out_length = s->seqs[seq].length;
  return GLLMK_OK;
}

static uint32_t blocks_for(const session_state *s, uint32_t length) {
  return (length + s->block_size - 1) / s->block_size;
}

gllmk_status session_check_length(const session_state *s, const char *fn, uint32_t seq,
                                  uint64_t length) {
  if (length > s->max_length)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: sequence %u would hold %llu tokens, past its limit of %u (%s)", fn, seq,
                      (unsigned long long)length, s->max_length,
                      s->max_length == s->model->config.max_position ? "the model's positions"
                                                                     : "the KV cache's size");
  return GLLMK_OK;
}

/* Takes blocks from the free stack until the sequence can hold `length`
 * tokens; the caller has checked that enough are free. */
void session_grow(session_state *s, seq_state *q, uint32_t length) {
  while (q->block_count < blocks_for(s, length)) q->blocks[q->block_count++] = s->free_blocks[--s->free_count];
}

gllmk_status gllmk_session_seq_reserve(gllmk_session *handle, uint32_t seq, uint32_t length) {
  const char *fn = "gllmk_session_seq_reserve";
  session_state *s;
  MODEL_TRY(seq_arg(handle, fn, seq, &s));
  MODEL_TRY(session_check_length(s, fn, seq, length));
  seq_state *q = &s->seqs[seq];
  uint32_t need = blocks_for(s, length) > q->block_count ? blocks_for(s, length) - q->block_count : 0;
  if (need > s->free_count)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: the KV cache is full: sequence %u needs %u more "
                      "blocks of %u tokens, %u are free", fn, seq, need, s->block_size, s->free_count);
  session_grow(s, q, length);
  return GLLMK_OK;
}

gllmk_status gllmk_session_get_stats(const gllmk_session *handle, gllmk_session_stats *out) {
  session_state *s;
  MODEL_TRY(session_from_handle(handle, "gllmk_session_get_stats", &s));
  if (out == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_session_get_stats: out_stats is NULL");
  gllmk_session_stats st = {s->block_size, s->blocks_total, s->free_count, s->max_sequences, 0,
                            s->max_tokens, s->max_length, 0, s->recording_count};
  for (uint32_t i = 0; i < s->max_sequences; i++) st.live_sequences += s->seqs[i].live;
  for (uint32_t r = 0; r < s->model->ranks; r++)
    for (uint32_t i = 0; i < s->model->config.layers; i++)
      st.cache_bytes += 2 * gllmk_tensor_extent_bytes(&s->shards[r].k_cache[i]);
  *out = st;
  return GLLMK_OK;
}
