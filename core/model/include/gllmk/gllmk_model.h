/*
 * gllmk_model.h - the generator: a whole decoder-only model on the device.
 *
 * libgllmk-model (pkg-config gllmk-model) is built only on libgllmk's public
 * op API and recordings, so it runs on every backend. A model's weights are
 * uploaded once; a session holds a paged KV cache and the working memory of
 * forward passes; during generation only token ids cross the bus.
 *
 *   gllmk_model_load(ctx, &load_options, &model);        weights on the device
 *   gllmk_session_create(model, &session_options, &s);   KV cache + scratch
 *   gllmk_session_seq_add(s, &seq);                       a sequence
 *   gllmk_session_forward(s, inputs, n, sampling, ids);   prefill / decode
 *   gllmk_session_decode(s, inputs, n, sampling, k, ids); k decode steps
 *
 * Conventions are libgllmk's (gllmk.h): every fallible call returns a
 * gllmk_status, on failure nothing changed and gllmk_last_error() says why;
 * results come back through out_ parameters; one session (and its model's
 * context) is used from one thread at a time.
 */
#ifndef GLLMK_GLLMK_MODEL_H_
#define GLLMK_GLLMK_MODEL_H_

#include <gllmk/gllmk.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(GLLMK_BUILDING_MODEL)
#define GLLMK_MODEL_API __attribute__((visibility("default")))
#else
#define GLLMK_MODEL_API
#endif

typedef struct gllmk_model gllmk_model;
typedef struct gllmk_session gllmk_session;

/* ------------------------------------------------------------------ model */

typedef enum gllmk_model_arch {
  GLLMK_ARCH_LLAMA = 0,   /* LlamaForCausalLM, MistralForCausalLM */
  GLLMK_ARCH_QWEN2 = 1,   /* Qwen2ForCausalLM: q/k/v bias */
  GLLMK_ARCH_QWEN3 = 2,   /* Qwen3ForCausalLM: per-head q/k RMSNorm */
} gllmk_model_arch;

/* Called while weights stream to the device: bytes uploaded so far of total. */
typedef void (*gllmk_model_progress)(void *user_data, uint64_t done_bytes, uint64_t total_bytes);

typedef struct gllmk_model_load_options {
  size_t struct_size; /* sizeof(gllmk_model_load_options) */
  /* A Hugging Face model directory (config.json and model.safetensors or a
   * sharded model.safetensors.index.json) ... */
  const char *path;
  /* ... or, instead of path, random weights of a known shape made on the
   * device: "tiny", "llama3.2-1b", "llama3-8b", "qwen2.5-7b". */
  const char *synthetic;
  uint64_t seed; /* synthetic weights */
  /* Compute and storage dtype on the device: GLLMK_F32, GLLMK_F16,
   * GLLMK_BF16, or -1 for the checkpoint's dtype. */
  int32_t dtype;
  gllmk_model_progress progress; /* may be NULL */
  void *progress_data;
} gllmk_model_load_options;

/* Loads a model onto the context's device. Errors name the file, tensor or
 * config key at fault. The context must outlive the model. */
GLLMK_MODEL_API gllmk_status gllmk_model_load(gllmk_context *context,
                                              const gllmk_model_load_options *options,
                                              gllmk_model **out_model);
/* Tensor parallelism: the model split over `count` contexts (one rank each,
 * all of one backend with collectives: cuda with NCCL, one GPU each, or cpu
 * contexts through a loopback). Rank r holds q/k/v and gate/up rows of its
 * heads and intermediate columns, the o and down columns that match (their
 * outputs are summed by an all-reduce), its rows of lm_head (the logits are
 * gathered on rank 0) and a copy of the embedding and the norms; each rank
 * reads only its part of a checkpoint's split tensors. Heads, kv heads,
 * intermediate size and vocabulary must divide by count (else
 * GLLMK_ERR_UNSUPPORTED). At most 16 ranks. The model's context
 * (gllmk_model_context) is contexts[0]; logits and tokens come from it. A
 * session then calls every context from the calling thread; they must
 * outlive the model. count 1 is gllmk_model_load. */
GLLMK_MODEL_API gllmk_status gllmk_model_load_parallel(gllmk_context *const *contexts,
                                                       uint32_t count,
                                                       const gllmk_model_load_options *options,
                                                       gllmk_model **out_model);
/* Frees the weights. Sessions of the model must be destroyed first. NULL is ignored. */
GLLMK_MODEL_API void gllmk_model_free(gllmk_model *model);

typedef struct gllmk_model_info {
  uint32_t arch;         /* gllmk_model_arch */
  char model_type[32];   /* config.json's model_type ("llama", "qwen2", ...) or the synthetic name */
  int32_t dtype;         /* gllmk_dtype on the device */
  uint32_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
  uint32_t max_position; /* max_position_embeddings (or sliding_window if smaller) */
  uint64_t weight_bytes; /* on the device */
  uint64_t step_weight_bytes; /* weights read by one decode step (lm_head and
                                 layers; one embedding row is negligible) */
  double load_seconds;   /* wall time of gllmk_model_load */
} gllmk_model_info;

GLLMK_MODEL_API gllmk_status gllmk_model_get_info(const gllmk_model *model,
                                                  gllmk_model_info *out_info);
GLLMK_MODEL_API gllmk_context *gllmk_model_context(const gllmk_model *model);

/* ---------------------------------------------------------------- session */

typedef struct gllmk_session_options {
  size_t struct_size; /* sizeof(gllmk_session_options) */
  /* KV cache size: cache_tokens tokens (over all sequences), or, if 0,
   * cache_bytes bytes of device memory; both 0: 4096 tokens. */
  uint64_t cache_tokens;
  uint64_t cache_bytes;
  uint32_t block_size;     /* tokens per cache block; 0 = 16 */
  uint32_t max_sequences;  /* live sequences at once; 0 = 64, at most 32768 */
  uint32_t max_batch_tokens; /* new tokens in one forward, over the batch; 0 = 512 */
} gllmk_session_options;

GLLMK_MODEL_API gllmk_status gllmk_session_create(gllmk_model *model,
                                                  const gllmk_session_options *options,
                                                  gllmk_session **out_session);
/* NULL is ignored. */
GLLMK_MODEL_API void gllmk_session_destroy(gllmk_session *session);

/* A new, empty sequence; its id is valid until gllmk_session_seq_free. */
GLLMK_MODEL_API gllmk_status gllmk_session_seq_add(gllmk_session *session, uint32_t *out_seq);
/* Frees a sequence and returns its cache blocks. */
GLLMK_MODEL_API gllmk_status gllmk_session_seq_free(gllmk_session *session, uint32_t seq);
/* Tokens of the sequence in the cache. */
GLLMK_MODEL_API gllmk_status gllmk_session_seq_length(const gllmk_session *session, uint32_t seq,
                                                      uint32_t *out_length);
/* Reserves cache blocks so that the sequence can grow to `length` tokens
 * (forward reserves what it needs by itself). */
GLLMK_MODEL_API gllmk_status gllmk_session_seq_reserve(gllmk_session *session, uint32_t seq,
                                                       uint32_t length);

typedef struct gllmk_session_stats {
  uint32_t block_size, blocks_total, blocks_free;
  uint32_t max_sequences, live_sequences, max_batch_tokens;
  uint32_t max_sequence_length; /* per sequence: the model's limit or the cache's */
  uint64_t cache_bytes;
  uint32_t recordings;          /* decode recordings made so far (one per batch bucket) */
} gllmk_session_stats;
GLLMK_MODEL_API gllmk_status gllmk_session_get_stats(const gllmk_session *session,
                                                     gllmk_session_stats *out_stats);

/* The new tokens of one sequence in a forward: a prefill chunk or one
 * decode token. */
typedef struct gllmk_seq_input {
  uint32_t seq;
  uint32_t token_count; /* >= 1 */
  const int32_t *tokens;
} gllmk_seq_input;

/* Sampling of one sequence's next token (gllmk_sample_args). temperature 0
 * is greedy (argmax); the draw is keyed by (seed, the token's position), so
 * the same seed gives the same tokens whatever the batch. */
typedef struct gllmk_sampling {
  float temperature;
  int32_t top_k;  /* 0 = off */
  float top_p;    /* 1 = off (0 is taken as 1) */
  float min_p;    /* 0 = off */
  uint64_t seed;
} gllmk_sampling;

/* Runs the new tokens of `count` distinct sequences through the model (in
 * one pass; at most max_batch_tokens tokens in all), appends them to the KV
 * cache and computes the logits of each sequence's last token.
 *  - out_logits (may be NULL): set to a device tensor [count, vocab] of the
 *    model's dtype, valid until the next forward on the session.
 *  - out_tokens (may be NULL): the next token of each sequence, sampled with
 *    sampling[i] (sampling NULL = greedy for all); this is the only transfer
 *    back to the host, and the only wait.
 * Fails, changing nothing, for an unknown or repeated sequence, a token id
 * outside the vocabulary, a sequence that would pass max_sequence_length, or
 * a cache without enough free blocks (GLLMK_ERR_OUT_OF_MEMORY). A batch of
 * single tokens replays a recording made once per batch-size bucket. */
GLLMK_MODEL_API gllmk_status gllmk_session_forward(gllmk_session *session,
                                                   const gllmk_seq_input *inputs, uint32_t count,
                                                   const gllmk_sampling *sampling,
                                                   gllmk_tensor *out_logits, int32_t *out_tokens);

/* `steps` decode steps of `count` distinct sequences, back to back: step 0
 * takes inputs[i].tokens[0] (token_count must be 1: each sequence's last
 * token), every later step the token the step before sampled, which stays
 * on the device. out_tokens[step * count + i] is the token step `step`
 * sampled for inputs[i]; the host waits once every 32 steps, not once a
 * step, so the device runs the steps without a gap between them. The tokens
 * are those of `steps` calls of gllmk_session_forward feeding each call's
 * out_tokens to the next (the same kernels; sampling is keyed by position),
 * and every sequence ends `steps` tokens longer. Fails, changing nothing,
 * as gllmk_session_forward does (checked for all `steps` tokens up front),
 * and for steps 0, out_tokens NULL or an input of several tokens. With
 * several ranks (gllmk_model_load_parallel) the ids come back to the host
 * each step. */
GLLMK_MODEL_API gllmk_status gllmk_session_decode(gllmk_session *session,
                                                  const gllmk_seq_input *inputs, uint32_t count,
                                                  const gllmk_sampling *sampling, uint32_t steps,
                                                  int32_t *out_tokens);

#ifdef __cplusplus
}
#endif

#endif /* GLLMK_GLLMK_MODEL_H_ */
