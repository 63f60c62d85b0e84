/*
 * model.c - the generator (libgllmk-model) on every backend with a device.
 *
 * usage: model [--quick] [--seed N] [--backend NAME] [--plugin-dir DIR]
 *              [--skip-software]
 *
 * Tiny random models of each family are written as real Hugging Face
 * directories by tests/model_ref.c, loaded, and run; their logits are
 * compared with model_ref's float64 forward (plain C, no gllmk), every step:
 *  - families: Llama (Llama 3.1 rope scaling; tied embeddings; a 5.x
 *    config; shards), Mistral, Qwen2 (q/k/v bias), Qwen3 (q/k norm), with
 *    F32, F16 and BF16 weights and compute dtypes (also converted on load);
 *  - greedy generation of 32 tokens agrees with the reference, under the
 *    tie rule: the reference runs along gllmk's tokens, and where its argmax
 *    differs from gllmk's token, the reference's logit for gllmk's token
 *    must be within the dtype's tolerance of its best (a near tie that
 *    rounding may decide either way); ties are counted and printed;
 *  - mixed batches (a prefill beside decodes) give each sequence the logits
 *    it gets alone; sampled tokens do not depend on the batch;
 *  - gllmk_session_decode's steps give the tokens of gllmk_session_forward
 *    fed its own, greedy and sampled; bad requests change nothing;
 *  - blocks freed by one sequence are reused by another; a full cache, a
 *    token id outside the vocabulary, a sequence past its positions: a
 *    clear error and nothing changed;
 *  - broken files (truncated, overlapping or out-of-file offsets, a wrong
 *    shape or dtype, a missing tensor, an unknown model_type, bad JSON):
 *    a clear error naming the file or tensor, nothing leaked;
 *  - models and sessions used after free: a clear error; models on four
 *    threads at once agree (also under ThreadSanitizer);
 *  - tensor parallelism (gllmk_model_load_parallel) over 2 contexts where
 *    the backend has collectives (cpu: the loopback; cuda: one GPU each):
 *    families against the float64 forward, synthetic weights against the
 *    unsplit model, and splits that cannot be made refused by name.
 */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gllmk/gllmk_model.h"
#include "model_ref.h"
#include "testlib.h"

static test_backend backends[TEST_MAX_BACKENDS];
static int backend_count;

#define PROMPT 12
#define NEW_TOKENS 32

/* ------------------------------------------------------------ helpers */

static void must(gllmk_status status, const char *what) {
  ck_assert_msg(status == GLLMK_OK, "%s: %s: %s", what, gllmk_status_string(status),
                gllmk_last_error());
}

static gllmk_context *open_backend(int backend) {
  gllmk_context_options options = {.backend = backends[backend].name,
                                   .plugin_dir = test_opts.plugin_dir};
  gllmk_context *ctx;
  must(gllmk_context_create(&options, &ctx), "gllmk_context_create");
  return ctx;
}

/* A model directory with `spec`'s random weights; the model stays for the
 * reference forward. */
static ref_model *write_model(const ref_model_spec *spec, char *dir, size_t size) {
  ref_model *m = ref_model_create(spec);
  ck_assert_ptr_nonnull(m);
  test_temp_dir(dir, size, "gllmk-model");
  ck_assert_int_eq(ref_model_write(m, dir), 0);
  return m;
}

static gllmk_status load(gllmk_context *ctx, const char *dir, int32_t dtype, gllmk_model **out) {
  gllmk_model_load_options o = {.struct_size = sizeof o, .path = dir, .dtype = dtype};
  return gllmk_model_load(ctx, &o, out);
}

static gllmk_session *open_session(gllmk_model *model, uint64_t cache_tokens, uint32_t block) {
  gllmk_session_options o = {.struct_size = sizeof o, .cache_tokens = cache_tokens,
                             .block_size = block, .max_sequences = 8, .max_batch_tokens = 128};
  gllmk_session *s;
  must(gllmk_session_create(model, &o, &s), "gllmk_session_create");
  return s;
}

/* Logits [rows, vocab] of a forward, from the device into doubles. */
static void read_logits(const gllmk_tensor *t, double *out) {
  int64_t n = gllmk_tensor_numel(t);
  size_t elem = gllmk_dtype_size((gllmk_dtype)t->dtype);
  void *raw = malloc((size_t)n * elem);
  ck_assert_ptr_nonnull(raw);
  ck_assert(gllmk_tensor_is_contiguous(t));
  must(gllmk_buffer_read(t->buffer, t->offset, raw, (uint64_t)n * elem), "gllmk_buffer_read");
  for (int64_t i = 0; i < n; i++) out[i] = test_load((gllmk_dtype)t->dtype, raw, i);
  free(raw);
}

/* Error allowed in a logit, relative to the row's largest |logit|: the
 * compute dtype's rounding of every activation over a few layers. */
static double tolerance(int32_t dtype) {
  return dtype == GLLMK_F32 ? 2e-3 : dtype == GLLMK_F16 ? 2e-2 : 6e-2;
}

static double row_scale(const double *row, int vocab) {
  double scale = 1.0;
  for (int i = 0; i < vocab; i++) scale = fmax(scale, fabs(row[i]));
  return scale;
}

/* max |got - want| over a row, relative to the row's scale. */
static double row_error(const double *got, const double *want, int vocab) {
  double error = 0;
  for (int i = 0; i < vocab; i++) {
    if (!isfinite(got[i])) return INFINITY;
    error = fmax(error, fabs(got[i] - want[i]));
  }
  return error / row_scale(want, vocab);
}

static void random_tokens(test_rng *rng, int vocab, int32_t *out, int n) {
  for (int i = 0; i < n; i++) out[i] = (int32_t)test_rng_int(rng, 0, vocab - 1);
}

/* ------------------------------------------------------- model families */

typedef struct family_case {
  const char *name;
  ref_family family;
  ref_dtype weights;
  int32_t compute; /* -1: the checkpoint's */
  int llama3_rope, tied, v5, shards, attention_bias;
} family_case;

static const family_case family_cases[] = {
    {"llama f32, llama3 rope", REF_LLAMA, REF_F32, -1, 1, 0, 0, 0, 0},
    {"llama bf16, tied, 5.x config, 2 shards", REF_LLAMA, REF_BF16, -1, 0, 1, 1, 2, 0},
    {"llama f32 weights as f16, attention bias", REF_LLAMA, REF_F32, GLLMK_F16, 0, 0, 0, 0, 1},
    {"mistral f16", REF_MISTRAL, REF_F16, -1, 0, 0, 0, 0, 0},
    {"qwen2 bf16 weights as f32", REF_QWEN2, REF_BF16, GLLMK_F32, 0, 0, 0, 0, 0},
    {"qwen3 f32", REF_QWEN3, REF_F32, -1, 0, 0, 0, 0, 0},
    {"qwen3 bf16, 3 shards", REF_QWEN3, REF_BF16, -1, 0, 0, 0, 3, 0},
};
#define FAMILY_CASES ((int)(sizeof family_cases / sizeof family_cases[0]))

static ref_model_spec spec_of(const family_case *fc) {
  ref_model_spec spec = ref_spec_tiny(fc->family, fc->weights);
  if (fc->llama3_rope) ref_spec_set_llama3_rope(&spec);
  spec.tied_embeddings = fc->tied;
  spec.transformers_v5 = fc->v5;
  spec.shards = fc->shards;
  spec.attention_bias = fc->attention_bias;
  spec.seed = test_opts.seed;
  return spec;
}

/* Greedy generation with gllmk, each step's logits checked against the
 * reference run along gllmk's tokens; returns the number of ties. */
static int generate_and_check(const family_case *fc, const ref_model *ref, gllmk_session *s,
                              int32_t dtype, const int32_t *prompt) {
  int vocab = ref_model_spec_of(ref)->vocab;
  int32_t tokens[PROMPT + NEW_TOKENS];
  memcpy(tokens, prompt, sizeof(int32_t) * PROMPT);
  double *got = malloc(sizeof(double) * (size_t)vocab * NEW_TOKENS);
  double *want = malloc(sizeof(double) * (size_t)vocab * (PROMPT + NEW_TOKENS));
  ck_assert(got && want);
  uint32_t seq;
  must(gllmk_session_seq_add(s, &seq), "gllmk_session_seq_add");
  for (int step = 0; step < NEW_TOKENS; step++) {
    int first = step == 0 ? 0 : PROMPT + step - 1, count = step == 0 ? PROMPT : 1;
    gllmk_seq_input in = {seq, (uint32_t)count, tokens + first};
    gllmk_tensor logits;
    must(gllmk_session_forward(s, &in, 1, NULL, &logits, &tokens[PROMPT + step]),
         "gllmk_session_forward");
    read_logits(&logits, got + (size_t)step * vocab);
  }
  ck_assert_int_eq(ref_model_logits(ref, tokens, PROMPT + NEW_TOKENS - 1, want), 0);
  int ties = 0;
  double worst = 0;
  for (int step = 0; step < NEW_TOKENS; step++) {
    const double *g = got + (size_t)step * vocab, *w = want + (size_t)(PROMPT - 1 + step) * vocab;
    double error = row_error(g, w, vocab), scale = row_scale(w, vocab);
    worst = fmax(worst, error);
    ck_assert_msg(error <= tolerance(dtype), "%s: step %d: logits differ by %.3g of max |logit| "
                  "(tolerance %.3g)", fc->name, step, error, tolerance(dtype));
    int best = ref_argmax(w, vocab), token = tokens[PROMPT + step];
    if (token == best) continue;
    ck_assert_msg(w[best] - w[token] <= tolerance(dtype) * scale,
                  "%s: step %d: gllmk chose %d, the reference %d by a margin of %.3g", fc->name,
                  step, token, best, w[best] - w[token]);
    ties++;
  }
  printf("model: %s: %d tokens, logits within %.2g of max |logit|, %d tie(s)\n", fc->name,
         NEW_TOKENS, worst, ties);
  free(got);
  free(want);
  return ties;
}

/* Loop index = backend * FAMILY_CASES + case. */
START_TEST(families) {
  int backend = _i / FAMILY_CASES;
  const family_case *fc = &family_cases[_i % FAMILY_CASES];
  ref_model_spec spec = spec_of(fc);
  char dir[PATH_MAX];
  ref_model *ref = write_model(&spec, dir, sizeof dir);
  gllmk_context *ctx = open_backend(backend);
  gllmk_model *model;
  must(load(ctx, dir, fc->compute, &model), "gllmk_model_load");
  gllmk_model_info info;
  must(gllmk_model_get_info(model, &info), "gllmk_model_get_info");
  ck_assert_int_eq(info.vocab, spec.vocab);
  ck_assert_int_eq(info.dtype, fc->compute >= 0 ? fc->compute : (int32_t)fc->weights);
  gllmk_session *s = open_session(model, 256, 16);
  test_rng rng = test_rng_for((uint64_t)_i);
  int32_t prompt[PROMPT];
  random_tokens(&rng, spec.vocab, prompt, PROMPT);
  printf("model: %s on %s\n", fc->name, backends[backend].name);
  int ties = generate_and_check(fc, ref, s, info.dtype, prompt);
  ck_assert_msg(ties <= NEW_TOKENS / 4, "%s: %d ties in %d tokens", fc->name, ties, NEW_TOKENS);
  gllmk_session_stats stats;
  must(gllmk_session_get_stats(s, &stats), "gllmk_session_get_stats");
  ck_assert_int_eq(stats.recordings, 1); /* decode steps of batch 1 replayed one recording */
  gllmk_session_destroy(s);
  gllmk_model_free(model);
  gllmk_context_destroy(ctx);
  ref_model_free(ref);
  test_remove_dir(dir);
}
END_TEST

/* ---------------------------------------------------------- mixed batch */

typedef struct fixture {
  char dir[PATH_MAX];
  ref_model *ref;
  gllmk_context *ctx;
  gllmk_model *model;
  int vocab;
} fixture;

static void fixture_open(fixture *f, int backend, ref_family family, int max_position) {
  ref_model_spec spec = ref_spec_tiny(family, REF_F32);
  spec.seed = test_opts.seed;
  if (max_position) spec.max_position = max_position;
  f->ref = write_model(&spec, f->dir, sizeof f->dir);
  f->vocab = spec.vocab;
  f->ctx = open_backend(backend);
  must(load(f->ctx, f->dir, -1, &f->model), "gllmk_model_load");
}

static void fixture_close(fixture *f) {
  gllmk_model_free(f->model);
  gllmk_context_destroy(f->ctx);
  ref_model_free(f->ref);
  test_remove_dir(f->dir);
}

/* The reference logits after tokens[0..n-1]. */
static void ref_last(const fixture *f, const int32_t *tokens, int n, double *out) {
  double *all = malloc(sizeof(double) * (size_t)n * f->vocab);
  ck_assert_ptr_nonnull(all);
  ck_assert_int_eq(ref_model_logits(f->ref, tokens, n, all), 0);
  memcpy(out, all + (size_t)(n - 1) * f->vocab, sizeof(double) * f->vocab);
  free(all);
}

/* Sequence `tokens` run alone in a fresh session, in one forward. */
static void alone(const fixture *f, const int32_t *tokens, int n, double *out) {
  gllmk_session *s = open_session(f->model, 256, 16);
  uint32_t seq;
  must(gllmk_session_seq_add(s, &seq), "gllmk_session_seq_add");
  gllmk_seq_input in = {seq, (uint32_t)n, tokens};
  gllmk_tensor logits;
  must(gllmk_session_forward(s, &in, 1, NULL, &logits, NULL), "gllmk_session_forward");
  read_logits(&logits, out);
  gllmk_session_destroy(s);
}

/* Prefill of A in the same forward as decodes of B and C; then the three
 * decode together (a padded bucket of 4); and seeded sampling of each
 * sequence gives the same token alone and in the batch. */
START_TEST(mixed_batch) {
  fixture f;
  fixture_open(&f, _i, REF_QWEN2, 0);
  test_rng rng = test_rng_for(1000 + (uint64_t)_i);
  int32_t a[11], b[10], c[7];
  random_tokens(&rng, f.vocab, a, 11);
  random_tokens(&rng, f.vocab, b, 10);
  random_tokens(&rng, f.vocab, c, 7);
  gllmk_session *s = open_session(f.model, 256, 4);
  uint32_t sa, sb, sc;
  must(gllmk_session_seq_add(s, &sa), "seq_add");
  must(gllmk_session_seq_add(s, &sb), "seq_add");
  must(gllmk_session_seq_add(s, &sc), "seq_add");
  const gllmk_seq_input prefill[2] = {{sb, 9, b}, {sc, 6, c}};
  must(gllmk_session_forward(s, prefill, 2, NULL, NULL, NULL), "prefill of B and C");
  const gllmk_seq_input mixed[3] = {{sa, 10, a}, {sb, 1, b + 9}, {sc, 1, c + 6}};
  gllmk_tensor logits;
  must(gllmk_session_forward(s, mixed, 3, NULL, &logits, NULL), "mixed forward");
  double *got = malloc(sizeof(double) * 3 * f.vocab), *want = malloc(sizeof(double) * f.vocab);
  ck_assert(got && want);
  read_logits(&logits, got);
  const int32_t *seqs[3] = {a, b, c};
  const int lengths[3] = {10, 10, 7};
  for (int i = 0; i < 3; i++) {
    alone(&f, seqs[i], lengths[i], want);
    double error = row_error(got + (size_t)i * f.vocab, want, f.vocab);
    ck_assert_msg(error <= 1e-4, "sequence %d: mixed batch vs alone differ by %.3g", i, error);
    ref_last(&f, seqs[i], lengths[i], want);
    error = row_error(got + (size_t)i * f.vocab, want, f.vocab);
    ck_assert_msg(error <= tolerance(GLLMK_F32), "sequence %d: vs the reference %.3g", i, error);
  }
  /* All three decode (A's 11th token, B's and C's are arbitrary ids). */
  int32_t next[3] = {a[10], 5, 6};
  const gllmk_seq_input decode[3] = {{sa, 1, &next[0]}, {sb, 1, &next[1]}, {sc, 1, &next[2]}};
  const gllmk_sampling sampling[3] = {{0.8f, 50, 0.9f, 0.0f, 7}, {0, 0, 1, 0, 0}, {1.0f, 0, 1, 0.05f, 9}};
  int32_t batch_tokens[3], alone_token;
  must(gllmk_session_forward(s, decode, 3, sampling, &logits, batch_tokens), "decode of 3");
  read_logits(&logits, got);
  ref_last(&f, a, 11, want);
  ck_assert_msg(row_error(got, want, f.vocab) <= tolerance(GLLMK_F32), "A after a padded decode");
  ck_assert_int_eq(batch_tokens[1], ref_argmax(got + f.vocab, f.vocab));
  /* A alone from the same state: a fresh session replaying A's 11 tokens. */
  gllmk_session *s2 = open_session(f.model, 256, 16);
  uint32_t sa2;
  must(gllmk_session_seq_add(s2, &sa2), "seq_add");
  gllmk_seq_input in = {sa2, 10, a};
  must(gllmk_session_forward(s2, &in, 1, NULL, NULL, NULL), "A alone");
  in = (gllmk_seq_input){sa2, 1, a + 10};
  must(gllmk_session_forward(s2, &in, 1, &sampling[0], NULL, &alone_token), "A alone, sampled");
  ck_assert_int_eq(alone_token, batch_tokens[0]);
  gllmk_session_destroy(s2);
  gllmk_session_destroy(s);
  free(got);
  free(want);
  fixture_close(&f);
}
END_TEST

/* Prompts of one length from position 0 in one forward (the generator's
 * batched prefill, which attends with the backend's prefill attention
 * rather than the paged one): each sequence's logits against the reference. */
START_TEST(equal_prompts) {
  fixture f;
  fixture_open(&f, _i, REF_LLAMA, 0);
  test_rng rng = test_rng_for(2000 + (uint64_t)_i);
  enum { SEQS = 3, LEN = 12 };
  int32_t prompts[SEQS][LEN];
  gllmk_session *s = open_session(f.model, 256, 4);
  gllmk_seq_input in[SEQS];
  for (int i = 0; i < SEQS; i++) {
    random_tokens(&rng, f.vocab, prompts[i], LEN);
    uint32_t seq;
    must(gllmk_session_seq_add(s, &seq), "seq_add");
    in[i] = (gllmk_seq_input){seq, LEN, prompts[i]};
  }
  gllmk_tensor logits;
  must(gllmk_session_forward(s, in, SEQS, NULL, &logits, NULL), "three prompts");
  double *got = malloc(sizeof(double) * SEQS * f.vocab), *want = malloc(sizeof(double) * f.vocab);
  ck_assert(got && want);
  read_logits(&logits, got);
  for (int i = 0; i < SEQS; i++) {
    ref_last(&f, prompts[i], LEN, want);
    double error = row_error(got + (size_t)i * f.vocab, want, f.vocab);
    ck_assert_msg(error <= tolerance(GLLMK_F32), "prompt %d: vs the reference %.3g", i, error);
  }
  gllmk_session_destroy(s);
  free(got);
  free(want);
  fixture_close(&f);
}
END_TEST

/* ---------------------------------------------- cache and bad requests */

static void expect_error(gllmk_status status, gllmk_status expected, const char *needle) {
  ck_assert_msg(status == expected, "expected %s, got %s: %s", gllmk_status_string(expected),
                gllmk_status_string(status), gllmk_last_error());
  ck_assert_msg(test_contains(gllmk_last_error(), needle), "message \"%s\" lacks \"%s\"",
                gllmk_last_error(), needle);
}

static void expect_state(gllmk_session *s, uint32_t seq, uint32_t length, uint32_t free_blocks) {
  uint32_t got;
  gllmk_session_stats stats;
  must(gllmk_session_seq_length(s, seq, &got), "seq_length");
  must(gllmk_session_get_stats(s, &stats), "get_stats");
  ck_assert_uint_eq(got, length);
  ck_assert_uint_eq(stats.blocks_free, free_blocks);
}

/* A cache of 4 blocks of 16: a full cache refuses, changing nothing; blocks
 * a freed sequence held serve the next one, whose logits stay right. */
START_TEST(cache_blocks) {
  fixture f;
  fixture_open(&f, _i, REF_LLAMA, 0);
  test_rng rng = test_rng_for(2000 + (uint64_t)_i);
  int32_t a[40], b[20];
  random_tokens(&rng, f.vocab, a, 40);
  random_tokens(&rng, f.vocab, b, 20);
  gllmk_session *s = open_session(f.model, 64, 16);
  uint32_t sa, sb;
  must(gllmk_session_seq_add(s, &sa), "seq_add");
  must(gllmk_session_seq_add(s, &sb), "seq_add");
  gllmk_seq_input in = {sa, 40, a};
  must(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), "A");
  expect_state(s, sa, 40, 1);
  in = (gllmk_seq_input){sb, 20, b};
  expect_error(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), GLLMK_ERR_OUT_OF_MEMORY,
               "KV cache is full");
  expect_state(s, sb, 0, 1);
  must(gllmk_session_seq_free(s, sa), "seq_free");
  expect_state(s, sb, 0, 4);
  gllmk_tensor logits;
  must(gllmk_session_forward(s, &in, 1, NULL, &logits, NULL), "B in A's blocks");
  double *got = malloc(sizeof(double) * f.vocab), *want = malloc(sizeof(double) * f.vocab);
  ck_assert(got && want);
  read_logits(&logits, got);
  ref_last(&f, b, 20, want);
  ck_assert_msg(row_error(got, want, f.vocab) <= tolerance(GLLMK_F32), "B after reuse");
  expect_error(gllmk_session_seq_length(s, sa, &(uint32_t){0}), GLLMK_ERR_INVALID_ARGUMENT,
               "not a live sequence");
  /* Bad requests: nothing changes. */
  int32_t bad = f.vocab;
  in = (gllmk_seq_input){sb, 1, &bad};
  expect_error(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), GLLMK_ERR_INVALID_ARGUMENT,
               "outside the vocabulary");
  const gllmk_seq_input twice[2] = {{sb, 1, b}, {sb, 1, b}};
  expect_error(gllmk_session_forward(s, twice, 2, NULL, NULL, NULL), GLLMK_ERR_INVALID_ARGUMENT,
               "appears twice");
  in = (gllmk_seq_input){sa, 1, b};
  expect_error(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), GLLMK_ERR_INVALID_ARGUMENT,
               "not a live sequence");
  expect_state(s, sb, 20, 2);
  gllmk_session_destroy(s);
  free(got);
  free(want);
  fixture_close(&f);
}
END_TEST

/* A model with 40 positions: the 41st token is refused. */
START_TEST(position_limit) {
  fixture f;
  fixture_open(&f, _i, REF_LLAMA, 40);
  int32_t tokens[41] = {0};
  gllmk_session *s = open_session(f.model, 256, 16);
  uint32_t seq;
  must(gllmk_session_seq_add(s, &seq), "seq_add");
  gllmk_seq_input in = {seq, 40, tokens};
  must(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), "40 tokens");
  in = (gllmk_seq_input){seq, 1, tokens + 40};
  expect_error(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), GLLMK_ERR_INVALID_ARGUMENT,
               "past its limit of 40");
  expect_state(s, seq, 40, 16 - 3);
  gllmk_session_destroy(s);
  /* More sequences than decode buckets cover. */
  gllmk_session_options too_many = {.struct_size = sizeof too_many, .max_sequences = 40000};
  expect_error(gllmk_session_create(f.model, &too_many, &s), GLLMK_ERR_INVALID_ARGUMENT,
               "max_sequences <= 32768");
  fixture_close(&f);
}
END_TEST

/* ------------------------------------------------------- decode steps */

#define DECODE_STEPS 40

/* Prompts of 10, 7 and 4 tokens, each prefilled alone; then DECODE_STEPS
 * steps of the three together (a bucket of 4, blocks of 4 tokens), through
 * gllmk_session_forward fed its own tokens (way 0) or one
 * gllmk_session_decode (way 1), into tokens[step][3]. */
static void decode_three(const fixture *f, int way, const int32_t (*prompts)[10],
                         const gllmk_sampling *sampling, int32_t (*tokens)[3]) {
  static const uint32_t lengths[3] = {10, 7, 4};
  gllmk_session *s = open_session(f->model, 256, 4);
  uint32_t seq[3];
  int32_t next[3];
  gllmk_seq_input in[3];
  for (int i = 0; i < 3; i++) {
    must(gllmk_session_seq_add(s, &seq[i]), "seq_add");
    in[i] = (gllmk_seq_input){seq[i], lengths[i], prompts[i]};
    must(gllmk_session_forward(s, &in[i], 1, sampling ? &sampling[i] : NULL, NULL, &next[i]), "prompt");
    in[i] = (gllmk_seq_input){seq[i], 1, &next[i]};
  }
  if (way == 1) must(gllmk_session_decode(s, in, 3, sampling, DECODE_STEPS, tokens[0]), "decode");
  for (int step = 0; way == 0 && step < DECODE_STEPS; step++) {
    must(gllmk_session_forward(s, in, 3, sampling, NULL, tokens[step]), "forward");
    memcpy(next, tokens[step], sizeof next);
  }
  for (int i = 0; i < 3; i++) {
    uint32_t length;
    must(gllmk_session_seq_length(s, seq[i], &length), "seq_length");
    ck_assert_uint_eq(length, lengths[i] + DECODE_STEPS);
  }
  gllmk_session_destroy(s);
}

/* gllmk_session_decode's tokens are those of gllmk_session_forward fed its
 * own (greedy; then seeded sampling beside a greedy row), past one chunk of
 * steps and across cache blocks. */
START_TEST(decode_steps) {
  fixture f;
  fixture_open(&f, _i, REF_LLAMA, 0);
  test_rng rng = test_rng_for(3000 + (uint64_t)_i);
  int32_t prompts[3][10];
  for (int i = 0; i < 3; i++) random_tokens(&rng, f.vocab, prompts[i], 10);
  const gllmk_sampling mixed[3] = {{.temperature = 0.8f, .top_k = 20, .top_p = 0.9f, .seed = 11},
                                   {.temperature = 0},
                                   {.temperature = 1.0f, .min_p = 0.05f, .seed = 12}};
  for (int mode = 0; mode < 2; mode++) {
    int32_t want[DECODE_STEPS][3], got[DECODE_STEPS][3];
    decode_three(&f, 0, prompts, mode ? mixed : NULL, want);
    decode_three(&f, 1, prompts, mode ? mixed : NULL, got);
    for (int step = 0; step < DECODE_STEPS; step++)
      for (int i = 0; i < 3; i++)
        ck_assert_msg(got[step][i] == want[step][i], "%s: step %d, sequence %d: decode %d, forward %d",
                      mode ? "sampled" : "greedy", step, i, got[step][i], want[step][i]);
  }
  fixture_close(&f);
}
END_TEST

/* A cache of 16 blocks of 4 and 64 positions: bad requests refused, nothing
 * changed; then 3 steps go through. */
START_TEST(decode_errors) {
  fixture f;
  fixture_open(&f, _i, REF_LLAMA, 64);
  int32_t tokens[40] = {0}, out[64];
  gllmk_session *s = open_session(f.model, 64, 4);
  uint32_t a, b;
  must(gllmk_session_seq_add(s, &a), "seq_add");
  must(gllmk_session_seq_add(s, &b), "seq_add");
  gllmk_seq_input in = {a, 40, tokens};
  must(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), "A");
  in = (gllmk_seq_input){b, 10, tokens};
  must(gllmk_session_forward(s, &in, 1, NULL, NULL, NULL), "B");
  expect_state(s, b, 10, 3);
  in = (gllmk_seq_input){b, 1, tokens};
  expect_error(gllmk_session_decode(s, &in, 1, NULL, 0, out), GLLMK_ERR_INVALID_ARGUMENT, "steps must be");
  expect_error(gllmk_session_decode(s, &in, 1, NULL, 2, NULL), GLLMK_ERR_INVALID_ARGUMENT, "out_tokens");
  expect_error(gllmk_session_decode(s, &in, 1, NULL, 20, out), GLLMK_ERR_OUT_OF_MEMORY, "KV cache is full");
  in = (gllmk_seq_input){a, 1, tokens};
  expect_error(gllmk_session_decode(s, &in, 1, NULL, 25, out), GLLMK_ERR_INVALID_ARGUMENT, "past its limit of 64");
  in = (gllmk_seq_input){b, 2, tokens};
  expect_error(gllmk_session_decode(s, &in, 1, NULL, 1, out), GLLMK_ERR_INVALID_ARGUMENT, "one token");
  expect_error(gllmk_session_decode(NULL, &in, 1, NULL, 1, out), GLLMK_ERR_INVALID_ARGUMENT, "not a live session");
  expect_state(s, b, 10, 3);
  expect_state(s, a, 40, 3);
  in = (gllmk_seq_input){b, 1, tokens};
  must(gllmk_session_decode(s, &in, 1, NULL, 3, out), "3 steps");
  expect_state(s, b, 13, 2);
  for (int i = 0; i < 3; i++) ck_assert(out[i] >= 0 && out[i] < f.vocab);
  gllmk_session_destroy(s);
  fixture_close(&f);
}
END_TEST

/* ------------------------------------------------------------ bad files */

typedef void (*header_edit)(json_t *header);

/* Rewrites model.safetensors of `dir` with its header edited (the data
 * bytes are kept). */
static void edit_header(const char *dir, header_edit edit) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  FILE *file = fopen(path, "rb");
  ck_assert_ptr_nonnull(file);
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  unsigned char *bytes = malloc((size_t)size);
  ck_assert(bytes && fread(bytes, 1, (size_t)size, file) == (size_t)size);
  fclose(file);
  uint64_t length = 0;
  for (int i = 0; i < 8; i++) length |= (uint64_t)bytes[i] << (8 * i);
  json_t *header = json_loadb((const char *)bytes + 8, length, 0, NULL);
  ck_assert_ptr_nonnull(header);
  edit(header);
  char *text = json_dumps(header, JSON_COMPACT);
  json_decref(header);
  uint64_t new_length = strlen(text);
  file = fopen(path, "wb");
  ck_assert_ptr_nonnull(file);
  for (int i = 0; i < 8; i++) fputc((int)(new_length >> (8 * i)) & 0xff, file);
  fwrite(text, 1, new_length, file);
  fwrite(bytes + 8 + length, 1, (size_t)size - 8 - length, file);
  fclose(file);
  free(text);
  free(bytes);
}

static void edit_config(const char *dir, const char *key, json_t *value) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/config.json", dir);
  json_t *config = json_load_file(path, 0, NULL);
  ck_assert_ptr_nonnull(config);
  json_object_set_new(config, key, value);
  ck_assert_int_eq(json_dump_file(config, path, JSON_INDENT(2)), 0);
  json_decref(config);
}

#define UP "model.layers.1.mlp.up_proj.weight"
#define GATE "model.layers.1.mlp.gate_proj.weight"

static void overlap_offsets(json_t *h) {
  json_object_set(json_object_get(h, UP), "data_offsets",
                  json_object_get(json_object_get(h, GATE), "data_offsets"));
}
static void offsets_past_end(json_t *h) {
  json_t *offsets = json_object_get(json_object_get(h, UP), "data_offsets");
  json_int_t begin = json_integer_value(json_array_get(offsets, 0));
  json_int_t end = json_integer_value(json_array_get(offsets, 1));
  json_array_set_new(offsets, 0, json_integer(begin + (1 << 24)));
  json_array_set_new(offsets, 1, json_integer(end + (1 << 24)));
}
static void transposed_shape(json_t *h) {
  json_t *shape = json_object_get(json_object_get(h, UP), "shape");
  json_t *rows = json_copy(json_array_get(shape, 0));
  json_array_set(shape, 0, json_array_get(shape, 1));
  json_array_set_new(shape, 1, rows);
}
static void integer_dtype(json_t *h) {
  json_object_set_new(json_object_get(h, UP), "dtype", json_string("I32"));
}
static void missing_tensor(json_t *h) { json_object_del(h, UP); }

static void truncate_file(const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  FILE *file = fopen(path, "rb+");
  ck_assert_ptr_nonnull(file);
  fseek(file, 0, SEEK_END);
  ck_assert_int_eq(ftruncate(fileno(file), ftell(file) - 100), 0);
  fclose(file);
}

static void garbage_config(const char *dir) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *file = fopen(path, "w");
  ck_assert_ptr_nonnull(file);
  fputs("{\"model_type\": \"llama\", \"hidden_size\": ", file);
  fclose(file);
}

/* Case `_i` of the list below, on the cpu backend (loading is the same on
 * every backend; leaks of device buffers show there, under ASan/valgrind). */
START_TEST(bad_files) {
  ref_model_spec spec = ref_spec_tiny(REF_LLAMA, REF_BF16);
  char dir[PATH_MAX];
  ref_model *ref = write_model(&spec, dir, sizeof dir);
  const char *needle = NULL;
  gllmk_status expected = GLLMK_ERR_INVALID_ARGUMENT;
  switch (_i) {
    case 0: truncate_file(dir); needle = "truncated"; break;
    case 1: edit_header(dir, overlap_offsets); needle = "overlap"; break;
    case 2: edit_header(dir, offsets_past_end); needle = "run past"; break;
    case 3: edit_header(dir, transposed_shape); needle = UP "\" has shape"; break;
    case 4: edit_header(dir, integer_dtype); needle = "dtype I32"; expected = GLLMK_ERR_UNSUPPORTED; break;
    case 5: edit_header(dir, missing_tensor); needle = UP "\" is missing"; break;
    case 6: edit_config(dir, "model_type", json_string("gemma")); needle = "\"gemma\""; expected = GLLMK_ERR_UNSUPPORTED; break;
    case 7: edit_config(dir, "num_hidden_layers", json_integer(3)); needle = "model.layers.2."; break;
    case 8: edit_config(dir, "num_key_value_heads", json_integer(3)); needle = "num_key_value_heads"; break;
    case 9: garbage_config(dir); needle = "config.json:1:"; break;
    default: edit_config(dir, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "yarn", "factor", 4.0));
      needle = "\"yarn\""; expected = GLLMK_ERR_UNSUPPORTED; break;
  }
  gllmk_context_options options = {.backend = "cpu", .plugin_dir = test_opts.plugin_dir};
  gllmk_context *ctx;
  must(gllmk_context_create(&options, &ctx), "gllmk_context_create");
  gllmk_model *model = NULL;
  expect_error(load(ctx, dir, -1, &model), expected, needle);
  ck_assert_ptr_null(model);
  printf("model: bad file %d: %s\n", _i, gllmk_last_error());
  gllmk_context_destroy(ctx);
  ref_model_free(ref);
  test_remove_dir(dir);
}
END_TEST
#define BAD_FILE_CASES 11

/* Handles used after free: a clear error, never a read of freed memory; a
 * model freed with a session alive takes the session with it. */
START_TEST(stale_handles) {
  gllmk_context *ctx = open_backend(_i);
  gllmk_model_load_options o = {.struct_size = sizeof o, .synthetic = "tiny", .dtype = -1};
  gllmk_model *model;
  must(gllmk_model_load(ctx, &o, &model), "synthetic tiny");
  gllmk_session *s = open_session(model, 64, 16), *kept = open_session(model, 64, 16);
  uint32_t seq;
  gllmk_session_destroy(s);
  expect_error(gllmk_session_seq_add(s, &seq), GLLMK_ERR_INVALID_ARGUMENT, "not a live session");
  gllmk_session_destroy(s); /* twice: ignored */
  must(gllmk_session_seq_add(kept, &seq), "seq_add on the other session");
  gllmk_model_free(model); /* frees `kept` too */
  gllmk_model_info info;
  expect_error(gllmk_model_get_info(model, &info), GLLMK_ERR_INVALID_ARGUMENT, "not a live model");
  expect_error(gllmk_session_seq_add(kept, &seq), GLLMK_ERR_INVALID_ARGUMENT, "not a live session");
  gllmk_session *none;
  gllmk_session_options so = {.struct_size = sizeof so};
  expect_error(gllmk_session_create(model, &so, &none), GLLMK_ERR_INVALID_ARGUMENT, "not a live model");
  expect_error(gllmk_session_create(NULL, &so, &none), GLLMK_ERR_INVALID_ARGUMENT, "not a live model");
  gllmk_session_destroy(kept);
  gllmk_model_free(model);
  gllmk_model_free(NULL);
  gllmk_context_destroy(ctx);
}
END_TEST

/* Models on several threads at once, each with its own context: the same
 * tokens on each (run under ThreadSanitizer by make check SANITIZE=thread). */
#define THREADS 4

typedef struct thread_run {
  const char *backend;
  int32_t tokens[6];
  gllmk_status status;
  char error[256];
} thread_run;

static gllmk_status thread_generate(thread_run *run, gllmk_context *ctx) {
  gllmk_model_load_options o = {.struct_size = sizeof o, .synthetic = "tiny", .seed = 3, .dtype = -1};
  gllmk_model *model;
  gllmk_status status = gllmk_model_load(ctx, &o, &model);
  if (status != GLLMK_OK) return status;
  gllmk_session_options so = {.struct_size = sizeof so, .cache_tokens = 64};
  gllmk_session *s;
  uint32_t seq;
  int32_t prompt[5] = {9, 8, 7, 6, 5};
  gllmk_seq_input in = {0, 5, prompt};
  status = gllmk_session_create(model, &so, &s);
  if (status == GLLMK_OK) status = gllmk_session_seq_add(s, &seq);
  in.seq = seq;
  for (int step = 0; status == GLLMK_OK && step < 6; step++) {
    status = gllmk_session_forward(s, &in, 1, NULL, NULL, &run->tokens[step]);
    in = (gllmk_seq_input){seq, 1, &run->tokens[step]};
  }
  gllmk_model_free(model); /* and its session */
  return status;
}

static void *thread_main(void *arg) {
  thread_run *run = arg;
  gllmk_context_options options = {.backend = run->backend, .plugin_dir = test_opts.plugin_dir,
                                   .num_threads = 1};
  gllmk_context *ctx;
  run->status = gllmk_context_create(&options, &ctx);
  if (run->status == GLLMK_OK) {
    run->status = thread_generate(run, ctx);
    gllmk_context_destroy(ctx);
  }
  snprintf(run->error, sizeof run->error, "%s", gllmk_last_error());
  return NULL;
}

START_TEST(threads) {
  thread_run runs[THREADS];
  pthread_t ids[THREADS];
  memset(runs, 0, sizeof runs);
  for (int t = 0; t < THREADS; t++) {
    runs[t].backend = backends[_i].name;
    ck_assert_int_eq(pthread_create(&ids[t], NULL, thread_main, &runs[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_join(ids[t], NULL), 0);
  for (int t = 0; t < THREADS; t++) {
    ck_assert_msg(runs[t].status == GLLMK_OK, "thread %d: %s", t, runs[t].error);
    ck_assert_mem_eq(runs[t].tokens, runs[0].tokens, sizeof runs[0].tokens);
  }
}
END_TEST

/* Random weights made on the device: finite logits, the same tokens twice. */
START_TEST(synthetic_tiny) {
  gllmk_context *ctx = open_backend(_i);
  int32_t first[8], prompt[16];
  for (int i = 0; i < 16; i++) prompt[i] = 3 * i + 1;
  for (int run = 0; run < 2; run++) {
    gllmk_model_load_options o = {.struct_size = sizeof o, .synthetic = "tiny", .seed = 5, .dtype = -1};
    gllmk_model *model;
    must(gllmk_model_load(ctx, &o, &model), "synthetic tiny");
    gllmk_session *s = open_session(model, 256, 16);
    uint32_t seq;
    must(gllmk_session_seq_add(s, &seq), "seq_add");
    int32_t token;
    gllmk_seq_input in = {seq, 16, prompt};
    for (int step = 0; step < 8; step++) {
      must(gllmk_session_forward(s, &in, 1, NULL, NULL, &token), "forward");
      if (run == 0) first[step] = token;
      ck_assert_int_eq(token, first[step]);
      in = (gllmk_seq_input){seq, 1, &first[step]};
    }
    gllmk_session_destroy(s);
    gllmk_model_free(model);
  }
  gllmk_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------- tensor parallelism */

#define TP_RANKS 2

/* TP_RANKS contexts of a backend and whether it can join them; if not, the
 * reason. */
static bool open_ranks(int backend, gllmk_context **ctx, char *why, size_t why_size) {
  gllmk_communicator *probe;
  if (!test_open_ranks(backends[backend].name, TP_RANKS, ctx, &probe, why, why_size)) return false;
  gllmk_communicator_free(probe);
  return true;
}

static void close_ranks(gllmk_context **ctx) {
  for (uint32_t r = 0; r < TP_RANKS; r++) gllmk_context_destroy(ctx[r]);
}

/* The family cases that cover every split weight: plain, tied embeddings
 * and shards, q/k/v bias, q/k norm. */
static const int tp_family_cases[] = {0, 1, 4, 6};
#define TP_CASES ((int)(sizeof tp_family_cases / sizeof tp_family_cases[0]))

/* Loop index = backend * TP_CASES + case. */
START_TEST(tensor_parallel) {
  int backend = _i / TP_CASES;
  const family_case *fc = &family_cases[tp_family_cases[_i % TP_CASES]];
  gllmk_context *ctx[TP_RANKS];
  char why[512];
  if (!open_ranks(backend, ctx, why, sizeof why)) {
    printf("model: tensor parallel %s on %s: skipped: %s\n", fc->name, backends[backend].name, why);
    return;
  }
  ref_model_spec spec = spec_of(fc);
  char dir[PATH_MAX];
  ref_model *ref = write_model(&spec, dir, sizeof dir);
  gllmk_model_load_options o = {.struct_size = sizeof o, .path = dir, .dtype = fc->compute};
  gllmk_model *model;
  must(gllmk_model_load_parallel(ctx, TP_RANKS, &o, &model), "gllmk_model_load_parallel");
  ck_assert_ptr_eq(gllmk_model_context(model), ctx[0]);
  gllmk_model_info info;
  must(gllmk_model_get_info(model, &info), "gllmk_model_get_info");
  gllmk_session *s = open_session(model, 256, 16);
  test_rng rng = test_rng_for((uint64_t)_i + 1000);
  int32_t prompt[PROMPT];
  random_tokens(&rng, spec.vocab, prompt, PROMPT);
  printf("model: %s on %s, split over %d ranks\n", fc->name, backends[backend].name, TP_RANKS);
  int ties = generate_and_check(fc, ref, s, info.dtype, prompt);
  ck_assert_msg(ties <= NEW_TOKENS / 4, "%s: %d ties in %d tokens", fc->name, ties, NEW_TOKENS);
  /* Decode steps replay the ranks' recordings where they compile natively
   * (cuda graphs holding NCCL calls); the cpu loopback runs them call by call. */
  gllmk_session_stats stats;
  must(gllmk_session_get_stats(s, &stats), "gllmk_session_get_stats");
  ck_assert_int_eq(stats.recordings, strcmp(backends[backend].name, "cpu") == 0 ? 0 : 1);
  gllmk_session_destroy(s);
  gllmk_model_free(model);
  close_ranks(ctx);
  ref_model_free(ref);
  test_remove_dir(dir);
}
END_TEST

/* Greedy tokens and the last step's logits of synthetic "tiny" (f32). */
static void synthetic_run(gllmk_context *const *ctx, uint32_t ranks, int32_t *tokens,
                          double *logits) {
  gllmk_model_load_options o = {.struct_size = sizeof o, .synthetic = "tiny", .seed = 9,
                                .dtype = GLLMK_F32};
  gllmk_model *model;
  must(gllmk_model_load_parallel(ctx, ranks, &o, &model), "synthetic tiny");
  gllmk_session *s = open_session(model, 256, 16);
  uint32_t seq;
  must(gllmk_session_seq_add(s, &seq), "seq_add");
  int32_t prompt[16];
  for (int i = 0; i < 16; i++) prompt[i] = 7 * i + 3;
  gllmk_seq_input in = {seq, 16, prompt};
  gllmk_tensor out;
  for (int step = 0; step < 8; step++) {
    must(gllmk_session_forward(s, &in, 1, NULL, &out, &tokens[step]), "forward");
    in = (gllmk_seq_input){seq, 1, &tokens[step]};
  }
  read_logits(&out, logits);
  gllmk_session_destroy(s);
  gllmk_model_free(model);
}

/* The split model computes what the whole one does: same synthetic
 * weights (each rank copies its part of the same random stream), same
 * greedy tokens, logits equal up to the order of the partial sums. */
START_TEST(tensor_parallel_synthetic) {
  gllmk_context *ctx[TP_RANKS];
  char why[512];
  if (!open_ranks(_i, ctx, why, sizeof why)) {
    printf("model: tensor parallel synthetic on %s: skipped: %s\n", backends[_i].name, why);
    return;
  }
  enum { VOCAB = 1024 }; /* synthetic "tiny" */
  int32_t whole[8], split[8];
  double *a = malloc(sizeof(double) * VOCAB), *b = malloc(sizeof(double) * VOCAB);
  synthetic_run(ctx, 1, whole, a);
  synthetic_run(ctx, TP_RANKS, split, b);
  ck_assert_mem_eq(whole, split, sizeof whole);
  double err = row_error(b, a, VOCAB);
  ck_assert_msg(err <= 1e-5, "split logits differ by %.3g of max |logit|", err);
  printf("model: synthetic tiny on %s over %d ranks: the same 8 tokens, logits within %.2g\n",
         backends[_i].name, TP_RANKS, err);
  free(a);
  free(b);
  close_ranks(ctx);
}
END_TEST

/* A model that cannot be split says why; nothing is left behind. */
START_TEST(tensor_parallel_errors) {
  gllmk_context *ctx[3];
  for (int r = 0; r < 3; r++) ctx[r] = open_backend(_i);
  gllmk_model_load_options o = {.struct_size = sizeof o, .synthetic = "tiny", .dtype = -1};
  gllmk_model *model = NULL;
  gllmk_status status = gllmk_model_load_parallel(ctx, 3, &o, &model); /* 8 heads, 2 kv heads */
  ck_assert_int_eq(status, GLLMK_ERR_UNSUPPORTED);
  ck_assert_msg(test_contains(gllmk_last_error(), "do not split over 3 devices"), "%s",
                gllmk_last_error());
  ck_assert_int_eq(gllmk_model_load_parallel(ctx, 0, &o, &model), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(gllmk_model_load_parallel(ctx, 17, &o, &model), GLLMK_ERR_INVALID_ARGUMENT);
  gllmk_context *missing[2] = {ctx[0], NULL};
  ck_assert_int_eq(gllmk_model_load_parallel(missing, 2, &o, &model), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(model);
  for (int r = 0; r < 3; r++) gllmk_context_destroy(ctx[r]);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  backend_count = test_find_backends("model", backends, TEST_MAX_BACKENDS);
  printf("model: seed %llu, backends:", (unsigned long long)test_opts.seed);
  for (int b = 0; b < backend_count; b++) printf(" %s", backends[b].name);
  printf("\n");
  if (backend_count == 0) {
    fprintf(stderr, "model: no backend has a device; nothing was tested\n");
    return EXIT_FAILURE;
  }
  Suite *suite = suite_create("model");
  for (int b = 0; b < backend_count; b++) {
    TCase *tc = test_tcase(backends[b].name);
    tcase_add_loop_test(tc, families, b * FAMILY_CASES, (b + 1) * FAMILY_CASES);
    tcase_add_loop_test(tc, mixed_batch, b, b + 1);
    tcase_add_loop_test(tc, equal_prompts, b, b + 1);
    tcase_add_loop_test(tc, cache_blocks, b, b + 1);
    tcase_add_loop_test(tc, position_limit, b, b + 1);
    tcase_add_loop_test(tc, synthetic_tiny, b, b + 1);
    tcase_add_loop_test(tc, decode_steps, b, b + 1);
    tcase_add_loop_test(tc, decode_errors, b, b + 1);
    tcase_add_loop_test(tc, stale_handles, b, b + 1);
    if (!backends[b].software) tcase_add_loop_test(tc, threads, b, b + 1);
    tcase_add_loop_test(tc, tensor_parallel, b * TP_CASES, (b + 1) * TP_CASES);
    tcase_add_loop_test(tc, tensor_parallel_synthetic, b, b + 1);
    if (strcmp(backends[b].name, "cpu") == 0) {
      tcase_add_loop_test(tc, bad_files, 0, BAD_FILE_CASES);
      tcase_add_loop_test(tc, tensor_parallel_errors, b, b + 1);
    }
    suite_add_tcase(suite, tc);
  }
  return test_run_suite(suite);
}
