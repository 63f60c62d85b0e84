/*
 * step.c - gllmk_session_forward: check the batch, hand out cache blocks,
 * write the index arrays in one transfer, run the model (a decode batch
 * replays its bucket's recording), sample, read back the ids; and
 * gllmk_session_decode: decode steps back to back, each step's ids fed to
 * the next on the device, read back every DECODE_CHUNK steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static const char *const FN = "gllmk_session_forward";
static const char *const FN_DECODE = "gllmk_session_decode";

/* A call's checks: the function named in messages, and the steps each
 * input's tokens start (gllmk_session_forward: 1; gllmk_session_decode:
 * every step after the first adds one more token to each sequence). */
typedef struct batch_request {
  const char *fn;
  uint32_t steps;
} batch_request;

static gllmk_status check_input(session_state *s, const batch_request *r, const gllmk_seq_input *in,
                                uint32_t i) {
  const char *const fn = r->fn;
  if (in->seq >= s->max_sequences || !s->seqs[in->seq].live)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: inputs[%u].seq=%u is not a live sequence",
                      fn, i, in->seq);
  seq_state *q = &s->seqs[in->seq];
  if (q->batch_mark == s->batch_serial)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: sequence %u appears twice in the batch", fn,
                      in->seq);
  q->batch_mark = s->batch_serial;
  if (in->token_count == 0 || in->tokens == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: sequence %u has no new tokens", fn, in->seq);
  uint32_t vocab = s->model->config.vocab;
  for (uint32_t t = 0; t < in->token_count; t++)
    if (in->tokens[t] < 0 || (uint32_t)in->tokens[t] >= vocab)
      return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                        "%s: sequence %u, new token %u: id %d is outside the vocabulary [0, %u)",
                        fn, in->seq, t, in->tokens[t], vocab);
  return session_check_length(s, fn, in->seq, (uint64_t)q->length + in->token_count + r->steps - 1);
}

static gllmk_status check_sampling(const char *fn, const gllmk_sampling *p, uint32_t i) {
  float top_p = p->top_p == 0 ? 1.0f : p->top_p;
  if (!(p->temperature >= 0) || p->top_k < 0 || !(top_p > 0 && top_p <= 1) ||
      !(p->min_p >= 0 && p->min_p <= 1))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: sampling[%u] is out of range (temperature >= 0, top_k >= 0, top_p in "
                      "(0, 1], min_p in [0, 1])",
                      fn, i);
  return GLLMK_OK;
}

/* Everything that can be refused, before anything changes. */
static gllmk_status check_batch(session_state *s, const batch_request *r, const gllmk_seq_input *inputs,
                                uint32_t count, const gllmk_sampling *sampling, uint32_t *out_tokens) {
  const char *const fn = r->fn;
  if (inputs == NULL || count == 0)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: at least one input is required", fn);
  if (count > s->max_sequences)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: %u sequences, the session takes %u", fn,
                      count, s->max_sequences);
  s->batch_serial++;
  uint64_t tokens = 0, blocks = 0;
  for (uint32_t i = 0; i < count; i++) {
    MODEL_TRY(check_input(s, r, &inputs[i], i));
    if (sampling) MODEL_TRY(check_sampling(fn, &sampling[i], i));
    const seq_state *q = &s->seqs[inputs[i].seq];
    uint64_t end = (uint64_t)q->length + inputs[i].token_count + r->steps - 1;
    uint64_t need = (end + s->block_size - 1) / s->block_size;
    blocks += need > q->block_count ? need - q->block_count : 0;
    tokens += inputs[i].token_count;
  }
  if (tokens > s->max_tokens)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: %llu new tokens in one forward, the session takes %u (max_batch_tokens)",
                      fn, (unsigned long long)tokens, s->max_tokens);
  if (blocks > s->free_count)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY,
                      "%s: the KV cache is full: the batch needs %llu more blocks of %u tokens, "
                      "%u are free",
                      fn, (unsigned long long)blocks, s->block_size, s->free_count);
  *out_tokens = (uint32_t)tokens;
  return GLLMK_OK;
}

/* The index arrays of a step; sequences past `count` (up to layout->seqs)
 * are padding: no cache write (slot -1), one token attending to block 0. */
static void fill_step(session_state *s, const gllmk_seq_input *inputs, uint32_t count,
                      const step_layout *l, bool with_table) {
  int32_t *h = s->step_host;
  uint32_t row = 0, bs = s->block_size;
  if (with_table) memset(h + l->block_table, 0, (size_t)l->seqs * s->max_blocks_per_seq * sizeof *h);
  for (uint32_t b = 0; b < l->seqs; b++) {
    h[l->q_starts + b] = (int32_t)row;
    const seq_state *q = b < count ? &s->seqs[inputs[b].seq] : NULL;
    uint32_t n = q ? inputs[b].token_count : 1;
    for (uint32_t t = 0; t < n; t++, row++) {
      uint32_t position = q ? q->length + t : 0;
      h[l->ids + row] = q ? inputs[b].tokens[t] : 0;
      h[l->positions + row] = (int32_t)position;
      h[l->slots + row] = q ? q->blocks[position / bs] * (int32_t)bs + (int32_t)(position % bs) : -1;
    }
    h[l->seq_lens + b] = (int32_t)(q ? q->length + n : 1);
    h[l->last_rows + b] = (int32_t)row - 1;
    if (q && with_table)
      memcpy(h + l->block_table + (uint64_t)b * s->max_blocks_per_seq, q->blocks,
             q->block_count * sizeof *h);
  }
  h[l->q_starts + l->seqs] = (int32_t)row;
}

/* Ends every rank's recording in progress; keeps them (all) only when the
 * step was recorded whole, and natively where the ranks have collectives. */
static gllmk_status end_recordings(session_state *s, uint32_t bucket, uint32_t begun,
                                   gllmk_status status) {
  uint32_t ranks = s->model->ranks;
  gllmk_recording *made[MODEL_MAX_RANKS] = {NULL};
  for (uint32_t r = 0; r < begun; r++) {
    gllmk_status ended = gllmk_recording_end(s->shards[r].context, &made[r]);
    if (status == GLLMK_OK) status = ended;
  }
  /* The ranks' recordings are compiled together when the last one ends. */
  for (uint32_t r = 0; ranks > 1 && r < begun && status == GLLMK_OK; r++)
    if (!gllmk_recording_is_native(made[r]))
      status = MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "%s: the backend could not compile a recording",
                          FN);
  for (uint32_t r = 0; r < ranks; r++) {
    if (status == GLLMK_OK) s->shards[r].recordings[bucket] = made[r];
    else gllmk_recording_free(made[r]);
  }
  return status;
}

/* Records a decode step of `bucket` on every rank. A step whose collectives
 * the backend cannot record (no native recordings: the cpu loopback) makes
 * the session run decode call by call from then on. */
static gllmk_status record_decode(session_state *s, uint32_t bucket, const step_layout *l) {
  uint32_t begun = 0;
  gllmk_status status = GLLMK_OK;
  while (begun < s->model->ranks &&
         (status = gllmk_recording_begin(s->shards[begun].context)) == GLLMK_OK)
    begun++;
  if (status == GLLMK_OK) status = forward_enqueue(s, l);
  /* The first failure's message: ending and freeing the recordings may
   * overwrite it (a failure of their own keeps its own message). */
  char message[1024] = "";
  if (status != GLLMK_OK) snprintf(message, sizeof message, "%s", gllmk_last_error());
  gllmk_status recorded = status;
  status = end_recordings(s, bucket, begun, status);
  if (status == GLLMK_OK) {
    s->recording_count++;
    return GLLMK_OK;
  }
  if (status == GLLMK_ERR_UNSUPPORTED && s->model->ranks > 1) {
    s->unrecorded_decode = true;
    return GLLMK_OK;
  }
  return recorded != GLLMK_OK ? MODEL_FAIL(status, "%s", message) : status;
}

/* A decode batch replays its bucket's recording on every rank, made on first use. */
static gllmk_status replay_decode(session_state *s, const step_layout *l) {
  uint32_t bucket = (uint32_t)__builtin_ctz(l->seqs);
  if (!s->unrecorded_decode && s->shards[0].recordings[bucket] == NULL)
    MODEL_TRY(record_decode(s, bucket, l));
  if (s->unrecorded_decode) return forward_enqueue(s, l);
  for (uint32_t r = 0; r < s->model->ranks; r++)
    MODEL_TRY(gllmk_recording_replay(s->shards[r].recordings[bucket]));
  return GLLMK_OK;
}

/* The token count of every sequence when each starts a prompt (nothing in
 * the cache) of that same length, 0 otherwise. */
static uint32_t whole_prompts(const session_state *s, const gllmk_seq_input *inputs, uint32_t count) {
  for (uint32_t i = 0; i < count; i++)
    if (s->seqs[inputs[i].seq].length != 0 || inputs[i].token_count != inputs[0].token_count) return 0;
  return inputs[0].token_count;
}

/* The ids the step before sampled (x.tokens, still on the device) over
 * the ids just written for this step: gllmk_session_decode's later steps. */
static gllmk_status feed_ids(session_state *s, uint32_t count, const step_layout *l) {
  const gllmk_tensor *sampled = &s->shards[0].x.tokens;
  return gllmk_buffer_copy(s->shards[0].step_buffer, l->ids * 4, sampled->buffer, sampled->offset,
                           (uint64_t)count * 4);
}

/* One forward: the index arrays written, then the model enqueued (a decode
 * batch: its bucket's recording replayed). `fed`: a later step of
 * gllmk_session_decode (one rank), whose ids come from the step before
 * (feed_ids) and whose block table is the one the step before wrote (the
 * decode reserved every step's blocks first): only the arrays ahead of the
 * table go (a batch of 32 with a cache of 37k tokens: 0.8 KB of 300 KB). */
static gllmk_status run_step(session_state *s, const gllmk_seq_input *inputs, uint32_t count,
                             uint32_t tokens, bool fed) {
  bool decode = tokens == count;
  uint32_t seqs = count;
  if (decode) { /* pad to the bucket */
    seqs = 1;
    while (seqs < count) seqs *= 2;
  }
  step_layout l;
  step_layout_for(s, decode ? seqs : tokens, seqs, &l);
  l.prompt_rows = decode ? 0 : whole_prompts(s, inputs, count);
  fill_step(s, inputs, count, &l, !fed);
  const uint64_t upload = fed ? l.block_table : l.total;
  for (uint32_t r = 0; r < s->model->ranks; r++)
    MODEL_TRY(gllmk_buffer_write(s->shards[r].step_buffer, 0, s->step_host, upload * 4));
  if (fed) MODEL_TRY(feed_ids(s, count, &l));
  return decode ? replay_decode(s, &l) : forward_enqueue(s, &l);
}

static bool greedy(const gllmk_sampling *p) { return p->temperature == 0 || p->top_k == 1; }

/* Greedy rows in one argmax; the others one sample call each, keyed by the
 * sequence's position so that the draw does not depend on the batch. */
static gllmk_status sample(session_state *s, const gllmk_seq_input *inputs, uint32_t count,
                           const gllmk_sampling *sampling) {
  bool all_greedy = true;
  for (uint32_t i = 0; sampling && i < count; i++) all_greedy = all_greedy && greedy(&sampling[i]);
  const session_shard *first = &s->shards[0];
  gllmk_tensor logits, out;
  if (all_greedy) {
    MODEL_TRY(gllmk_tensor_slice(&first->x.logits, 0, 0, count, 1, &logits));
    MODEL_TRY(gllmk_tensor_slice(&first->x.tokens, 0, 0, count, 1, &out));
    return gllmk_argmax(first->context, &(gllmk_argmax_args){.out = &out, .logits = &logits});
  }
  for (uint32_t i = 0; i < count; i++) {
    const gllmk_sampling *p = &sampling[i];
    MODEL_TRY(gllmk_tensor_slice(&first->x.logits, 0, i, 1, 1, &logits));
    MODEL_TRY(gllmk_tensor_slice(&first->x.tokens, 0, i, 1, 1, &out));
    MODEL_TRY(gllmk_sample(first->context, &(gllmk_sample_args){
        .out = &out, .logits = &logits, .temperature = p->temperature, .top_k = p->top_k,
        .top_p = p->top_p == 0 ? 1.0f : p->top_p, .min_p = p->min_p, .seed = p->seed,
        .offset = s->seqs[inputs[i].seq].length + inputs[i].token_count}));
  }
  return GLLMK_OK;
}

/* Cache blocks for the new tokens; undone if the step fails. */
static void reserve_blocks(session_state *s, const gllmk_seq_input *inputs, uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    seq_state *q = &s->seqs[inputs[i].seq];
    q->blocks_before = q->block_count;
    session_grow(s, q, q->length + inputs[i].token_count);
  }
}

static void undo_blocks(session_state *s, const gllmk_seq_input *inputs, uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    seq_state *q = &s->seqs[inputs[i].seq];
    session_release(s, q, q->blocks_before);
  }
}

/* The sampled ids to the host: the step's one wait. */
static gllmk_status read_tokens(session_state *s, uint32_t count, int32_t *out_tokens) {
  const gllmk_tensor *sampled = &s->shards[0].x.tokens;
  return gllmk_buffer_read(sampled->buffer, sampled->offset, out_tokens,
                           (uint64_t)count * sizeof *out_tokens);
}

static gllmk_status run_and_sample(session_state *s, const gllmk_seq_input *inputs, uint32_t count,
                                   uint32_t tokens, const gllmk_sampling *sampling,
                                   int32_t *out_tokens) {
  MODEL_TRY(run_step(s, inputs, count, tokens, false));
  if (out_tokens == NULL) return GLLMK_OK;
  MODEL_TRY(sample(s, inputs, count, sampling));
  return read_tokens(s, count, out_tokens);
}

gllmk_status gllmk_session_forward(gllmk_session *handle, const gllmk_seq_input *inputs,
                                   uint32_t count, const gllmk_sampling *sampling,
                                   gllmk_tensor *out_logits, int32_t *out_tokens) {
  session_state *s;
  MODEL_TRY(session_from_handle(handle, FN, &s));
  uint32_t tokens = 0;
  const batch_request request = {FN, 1};
  MODEL_TRY(check_batch(s, &request, inputs, count, sampling, &tokens));
  reserve_blocks(s, inputs, count);
  gllmk_status status = run_and_sample(s, inputs, count, tokens, sampling, out_tokens);
  if (status != GLLMK_OK) {
    undo_blocks(s, inputs, count);
    return status;
  }
  for (uint32_t i = 0; i < count; i++) s->seqs[inputs[i].seq].length += inputs[i].token_count;
  if (out_logits) return gllmk_tensor_slice(&s->shards[0].x.logits, 0, 0, count, 1, out_logits);
  return GLLMK_OK;
}

/* Step `step`'s ids into token_history (DECODE_CHUNK steps of `count`),
 * which goes to out_tokens once full or after the last step: one wait per
 * DECODE_CHUNK steps. */
static gllmk_status keep_tokens(session_state *s, uint32_t count, uint32_t step, uint32_t steps,
                                int32_t *out_tokens) {
  const scratch *x = &s->shards[0].x;
  const uint32_t slot = step % DECODE_CHUNK;
  const uint64_t row_bytes = (uint64_t)count * sizeof *out_tokens;
  MODEL_TRY(gllmk_buffer_copy(x->token_history.buffer, x->token_history.offset + slot * row_bytes,
                              x->tokens.buffer, x->tokens.offset, row_bytes));
  if (slot + 1 < DECODE_CHUNK && step + 1 < steps) return GLLMK_OK;
  return gllmk_buffer_read(x->token_history.buffer, x->token_history.offset,
                           out_tokens + (size_t)(step - slot) * count, (slot + 1) * row_bytes);
}

/* The decode steps themselves (blocks reserved, lengths advanced as they
 * go). With one rank each step's ids feed the next on the device; with
 * several (whose step buffers are on other devices) they come back to the
 * host each step, as gllmk_session_forward's would. */
static gllmk_status decode_steps(session_state *s, gllmk_seq_input *inputs, uint32_t count,
                                 const gllmk_sampling *sampling, uint32_t steps, int32_t *out_tokens) {
  const bool fed = s->model->ranks == 1;
  for (uint32_t step = 0; step < steps; step++) {
    MODEL_TRY(run_step(s, inputs, count, count, fed && step > 0));
    MODEL_TRY(sample(s, inputs, count, sampling));
    int32_t *row = out_tokens + (size_t)step * count;
    MODEL_TRY(fed ? keep_tokens(s, count, step, steps, out_tokens) : read_tokens(s, count, row));
    for (uint32_t i = 0; i < count; i++) {
      s->seqs[inputs[i].seq].length++;
      if (!fed) inputs[i].tokens = &row[i];
    }
  }
  return GLLMK_OK;
}

gllmk_status gllmk_session_decode(gllmk_session *handle, const gllmk_seq_input *inputs,
                                  uint32_t count, const gllmk_sampling *sampling, uint32_t steps,
                                  int32_t *out_tokens) {
  session_state *s;
  MODEL_TRY(session_from_handle(handle, FN_DECODE, &s));
  if (steps == 0 || out_tokens == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: steps must be at least 1 and out_tokens not NULL",
                      FN_DECODE);
  const batch_request request = {FN_DECODE, steps};
  uint32_t tokens = 0;
  MODEL_TRY(check_batch(s, &request, inputs, count, sampling, &tokens));
  if (tokens != count)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: each input must be one token (its sequence's last), not a prompt", FN_DECODE);
  gllmk_seq_input *step_inputs = malloc(count * sizeof *step_inputs);
  uint32_t *lengths = malloc(count * sizeof *lengths);
  if (step_inputs == NULL || lengths == NULL) {
    free(step_inputs);
    free(lengths);
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of host memory", FN_DECODE);
  }
  for (uint32_t i = 0; i < count; i++) {
    seq_state *q = &s->seqs[inputs[i].seq];
    step_inputs[i] = inputs[i];
    lengths[i] = q->length;
    q->blocks_before = q->block_count;
    session_grow(s, q, q->length + steps);
  }
  gllmk_status status = decode_steps(s, step_inputs, count, sampling, steps, out_tokens);
  for (uint32_t i = 0; i < count && status != GLLMK_OK; i++) {
    seq_state *q = &s->seqs[inputs[i].seq];
    q->length = lengths[i];
    session_release(s, q, q->blocks_before);
  }
  free(step_inputs);
  free(lengths);
  return status;
}
