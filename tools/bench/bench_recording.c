/*
 * bench_recording.c - the recordings row of gllmk-bench: a sequence of 200
 * small ops at decode size (one token, Llama-3-8B widths) issued one by one
 * and replayed from a recording, each timed for whole sequences with a
 * synchronize at the end. The ratio is what recordings buy at decode, where
 * launch overhead, not the GPU, sets the pace. Both ways must leave the same
 * bytes in every output.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define LAYER_OPS 10
#define SEQUENCE_LAYERS 20 /* 200 ops */
#define SEQUENCES_PER_SAMPLE 10
#define SAMPLES 9

/* Inputs first, then outputs (which the check poisons). */
enum { T_X, T_W, T_Y, T_Q, T_POS, T_H, T_M, T_A, T_S, T_G, T_QR, T_P, T_C, T_E, T_COUNT };

typedef struct sequence {
  gllmk_context *ctx;
  gllmk_buffer *buffer;
  gllmk_tensor t[T_COUNT];
  uint64_t bytes;
} sequence;

/* Every op writes a tensor no op of the sequence reads before, so the
 * sequence gives the same bytes however often it runs. */
static gllmk_status run_layer(sequence *s) {
  gllmk_tensor *t = s->t;
  gllmk_status st = gllmk_rmsnorm(s->ctx, &(gllmk_rmsnorm_args){&t[T_H], &t[T_X], &t[T_W], 1e-5f});
  if (!st) st = gllmk_mul(s->ctx, &(gllmk_mul_args){&t[T_M], &t[T_H], &t[T_W]});
  if (!st) st = gllmk_add(s->ctx, &(gllmk_add_args){&t[T_A], &t[T_M], &t[T_Y]});
  if (!st) st = gllmk_silu(s->ctx, &(gllmk_silu_args){&t[T_S], &t[T_A]});
  if (!st) st = gllmk_swiglu(s->ctx, &(gllmk_swiglu_args){&t[T_G], &t[T_S], &t[T_A]});
  if (!st)
    st = gllmk_rope(s->ctx, &(gllmk_rope_args){.out = &t[T_QR], .x = &t[T_Q],
                                               .positions = &t[T_POS], .theta = 500000.0f,
                                               .rotary_dim = 128, .style = GLLMK_ROPE_NEOX});
  if (!st) st = gllmk_softmax(s->ctx, &(gllmk_softmax_args){&t[T_P], &t[T_Q], 0.088f});
  if (!st) st = gllmk_copy(s->ctx, &(gllmk_copy_args){&t[T_C], &t[T_G]});
  if (!st) st = gllmk_gelu(s->ctx, &(gllmk_gelu_args){&t[T_E], &t[T_C], GLLMK_GELU_TANH});
  if (!st) st = gllmk_mul_add(s->ctx, &(gllmk_mul_add_args){&t[T_M], &t[T_H], &t[T_W], &t[T_Y]});
  return st;
}

static gllmk_status run_sequence(sequence *s) {
  gllmk_status status = GLLMK_OK;
  for (int i = 0; i < SEQUENCE_LAYERS && status == GLLMK_OK; i++) status = run_layer(s);
  return status;
}

static gllmk_status make_tensors(sequence *s) {
  const int64_t hidden = MODEL_HIDDEN, heads = MODEL_HEADS, dim = MODEL_HEAD_DIM;
  const int64_t vec[] = {1, hidden}, row[] = {hidden}, q[] = {1, heads, dim}, pos[] = {1};
  uint64_t offset = 0;
  gllmk_status status = GLLMK_OK;
  for (int i = 0; i < T_COUNT && status == GLLMK_OK; i++) {
    int is_heads = i == T_Q || i == T_QR || i == T_P;
    int32_t ndim = i == T_W || i == T_POS ? 1 : is_heads ? 3 : 2;
    const int64_t *shape = i == T_W ? row : i == T_POS ? pos : is_heads ? q : vec;
    gllmk_dtype dtype = i == T_POS ? GLLMK_I32 : GLLMK_BF16;
    status = gllmk_tensor_make(s->buffer, offset, dtype, ndim, shape, &s->t[i]);
    offset += 2 * (uint64_t)hidden * 2; /* room for any of them, 16-byte aligned */
  }
  return status;
}

static gllmk_status setup(sequence *s) {
  s->bytes = (uint64_t)T_COUNT * 4 * MODEL_HIDDEN;
  gllmk_status status = gllmk_buffer_alloc(s->ctx, s->bytes, &s->buffer);
  if (status) return status;
  uint16_t *init = malloc(s->bytes);
  if (!init) return GLLMK_ERR_OUT_OF_MEMORY;
  for (uint64_t i = 0; i < s->bytes / 2; i++) init[i] = (uint16_t)(0x3c00 + (i * 7919u) % 512u);
  status = gllmk_buffer_write(s->buffer, 0, init, s->bytes);
  free(init);
  if (!status) status = make_tensors(s);
  int32_t position = 17;
  if (!status) status = gllmk_buffer_write(s->buffer, s->t[T_POS].offset, &position, 4);
  return status;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median over SAMPLES of the seconds per sequence, SEQUENCES_PER_SAMPLE at a time. */
static gllmk_status time_sequences(sequence *s, gllmk_recording *replay, double *out_s) {
  double samples[SAMPLES];
  for (int k = -1; k < SAMPLES; k++) { /* k = -1 warms up */
    double start = now_seconds();
    gllmk_status status = GLLMK_OK;
    for (int i = 0; i < SEQUENCES_PER_SAMPLE && status == GLLMK_OK; i++)
      status = replay ? gllmk_recording_replay(replay) : run_sequence(s);
    if (!status) status = gllmk_synchronize(s->ctx);
    if (status) return status;
    if (k >= 0) samples[k] = (now_seconds() - start) / SEQUENCES_PER_SAMPLE;
  }
  qsort(samples, SAMPLES, sizeof samples[0], compare_doubles);
  *out_s = samples[SAMPLES / 2];
  return GLLMK_OK;
}

/* Both ways must leave the same bytes. */
static gllmk_status outputs_after(sequence *s, gllmk_recording *replay, void *out) {
  gllmk_status status = gllmk_buffer_fill(s->buffer, s->t[T_H].offset,
                                          s->bytes - s->t[T_H].offset, 0xFF);
  if (!status) status = replay ? gllmk_recording_replay(replay) : run_sequence(s);
  if (!status) status = gllmk_buffer_read(s->buffer, 0, out, s->bytes);
  return status;
}

int bench_recording(gllmk_context *ctx, int json) {
  sequence s = {.ctx = ctx};
  gllmk_recording *recording = NULL;
  double eager_s = NAN, replay_s = NAN;
  void *eager_out = NULL, *replay_out = NULL;
  gllmk_status status = setup(&s);
  if (!status) status = gllmk_recording_begin(ctx);
  if (!status) status = run_sequence(&s);
  if (!status) status = gllmk_recording_end(ctx, &recording);
  if (!status) status = time_sequences(&s, NULL, &eager_s);
  if (!status) status = time_sequences(&s, recording, &replay_s);
  if (!status && !(eager_out = malloc(s.bytes))) status = GLLMK_ERR_OUT_OF_MEMORY;
  if (!status && !(replay_out = malloc(s.bytes))) status = GLLMK_ERR_OUT_OF_MEMORY;
  if (!status) status = outputs_after(&s, NULL, eager_out);
  if (!status) status = outputs_after(&s, recording, replay_out);
  const char *verdict = status ? "error" : memcmp(eager_out, replay_out, s.bytes) ? "MISMATCH" : "ok";
  const char *form = gllmk_recording_is_native(recording) ? "native" : "core replay";
  int ops = LAYER_OPS * SEQUENCE_LAYERS;
  if (json)
    printf(",\n  {\"op\": \"recording\", \"ops\": %d, \"dtype\": \"bf16\", \"one_by_one_us\": %.2f, "
           "\"replayed_us\": %.2f, \"speedup\": %.3f, \"form\": \"%s\", \"check\": \"%s\"}",
           ops, eager_s * 1e6, replay_s * 1e6, eager_s / replay_s, form, verdict);
  else
    printf("recording: %d small bf16 ops at decode size: one by one %.1f us, replayed %.1f us "
           "(%s): %.2fx  %s\n", ops, eager_s * 1e6, replay_s * 1e6, form, eager_s / replay_s,
           verdict);
  if (status) fprintf(stderr, "gllmk-bench: recording: %s: %s\n", gllmk_status_string(status),
                      gllmk_last_error());
  free(eager_out);
  free(replay_out);
  gllmk_recording_free(recording);
  gllmk_buffer_free(s.buffer);
  return strcmp(verdict, "ok") != 0;
}
