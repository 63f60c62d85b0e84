/*
 * model_internal.h - libgllmk-model's private types: the parsed config, the
 * safetensors reader, the weights on the device and the session.
 */
#ifndef GLLMK_MODEL_INTERNAL_H_
#define GLLMK_MODEL_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../handles.h"
#include "gllmk/gllmk.h"
#include "gllmk/gllmk_model.h"

/* The objects behind the public handles (gllmk_model, gllmk_session are
 * handles from handles.c, never pointers to these). */
typedef struct model_state model_state;
typedef struct session_state session_state;

/* Returns from the calling function when `expr` is not GLLMK_OK. */
#define MODEL_TRY(expr)                          \
  do {                                           \
    gllmk_status model_try_status_ = (expr);     \
    if (model_try_status_ != GLLMK_OK) return model_try_status_; \
  } while (0)

#define MODEL_FAIL(status, ...) gllmk_set_error((status), __VA_ARGS__)

/* ---------------------------------------------------------------- buffers */

/* Device buffers a model or session owns, freed together. */
typedef struct buffer_list {
  gllmk_buffer **items;
  uint32_t count, capacity;
} buffer_list;

/* A dense device tensor in a buffer of its own, added to `list`. */
gllmk_status buffer_list_tensor(buffer_list *list, gllmk_context *context, int32_t dtype,
                                int32_t ndim, const int64_t *shape, gllmk_tensor *out_tensor);
void buffer_list_free(buffer_list *list);

/* ---------------------------------------------------------------- config */

typedef struct model_config {
  uint32_t arch; /* gllmk_model_arch */
  char model_type[32];
  uint32_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
  uint32_t max_position;
  uint32_t rotary_dim;
  double rope_theta, rms_eps;
  bool tied_embeddings;
  bool qkv_bias, o_bias, mlp_bias, qk_norm;
  int32_t dtype; /* the checkpoint's dtype (torch_dtype / dtype), -1 if absent */
  /* Rope frequency scaling: none, linear or llama3. */
  enum { ROPE_SCALING_NONE, ROPE_SCALING_LINEAR, ROPE_SCALING_LLAMA3 } rope_scaling;
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  double rope_original_max_position;
} model_config;

/* Parses config.json's text; `origin` names it in errors. */
gllmk_status model_config_parse(const char *text, size_t length, const char *origin,
                                model_config *out_config);
/* A built-in shape ("tiny", "llama3-8b", ...). */
gllmk_status model_config_synthetic(const char *name, model_config *out_config);
/* The per-pair frequencies of rope, [rotary_dim / 2]. */
void model_config_inv_freq(const model_config *config, float *out_inv_freq);

/* ------------------------------------------------------------ safetensors */

typedef struct st_tensor {
  char *name;
  int32_t dtype; /* gllmk_dtype */
  int32_t ndim;
  int64_t shape[GLLMK_MAX_DIMS];
  const uint8_t *data; /* inside the file's mapping */
  uint64_t bytes;
  const char *file; /* the file's path, for errors */
} st_tensor;

typedef struct st_file {
  char *path;
  const uint8_t *map; /* whole file */
  uint64_t size;
  bool mapped;        /* map came from mmap (else it belongs to the caller) */
  st_tensor *tensors;
  uint32_t count;
} st_file;

/* Parses a safetensors file held in memory (`bytes` stays owned by the
 * caller and must outlive the result). */
gllmk_status st_parse(const uint8_t *bytes, uint64_t size, const char *path, st_file *out_file);
/* mmaps and parses one file. */
gllmk_status st_open(const char *path, st_file *out_file);
void st_close(st_file *file);

/* Every tensor of a model directory: one file or the shards an index names. */
typedef struct st_model {
  st_file *files;
  uint32_t file_count;
} st_model;

gllmk_status st_model_open(const char *dir, st_model *out_model);
void st_model_close(st_model *model);
/* NULL if no file holds `name`. */
const st_tensor *st_model_find(const st_model *model, const char *name);

/* ---------------------------------------------------------------- weights */

typedef struct layer_weights {
  gllmk_tensor input_norm, post_norm;
  gllmk_tensor qkv, qkv_bias;   /* [(Hq + 2 Hkv) D, hidden]: q, k, v rows fused */
  gllmk_tensor o, o_bias;
  gllmk_tensor q_norm, k_norm;  /* [D] (Qwen3) */
  gllmk_tensor gate_up, gate_up_bias; /* [2 I, hidden]: gate rows, then up rows */
  gllmk_tensor down, down_bias;
  /* o and down biases are rank 0's alone (added once, before the all-reduce). */
  bool has_qkv_bias, has_o_bias, has_mlp_bias, has_down_bias;
} layer_weights;

/* Tensor parallelism: at most this many ranks (contexts) per model. */
#define MODEL_MAX_RANKS 16

/* One rank's part of the weights (all of them when there is one rank): q/k/v
 * and gate/up rows of its heads and intermediate columns, o and down columns
 * to match, its vocabulary rows of lm_head; the embedding and norms whole. */
typedef struct model_shard {
  gllmk_context *context;
  buffer_list buffers; /* every device allocation of the shard */
  gllmk_tensor embed, final_norm, lm_head;
  gllmk_tensor inv_freq; /* F32 [rotary_dim / 2] */
  layer_weights *layers;
} model_shard;

struct model_state {
  model_config config; /* the whole model */
  model_config local;  /* one rank's share: heads, kv_heads, intermediate, vocab / ranks */
  uint32_t ranks;
  model_shard *shards;       /* [ranks] */
  gllmk_communicator *comm;  /* NULL with one rank */
  int32_t dtype;
  char name[32];
  /* q and k rows of each head in GPT-J pair order (model_pair_rope_rows):
   * rope turns pairs (2j, 2j + 1), and matmul can turn them itself. */
  bool rope_paired;
  uint64_t weight_bytes; /* over all ranks */
  double load_seconds;
  uint64_t handle;
  session_state *sessions; /* alive, linked by `next`: freed with the model */
};

/* Allocates every rank's weight tensors (contents unset). */
gllmk_status model_alloc_weights(model_state *model);
/* Fills the weights from a checkpoint directory. */
gllmk_status model_upload_checkpoint(model_state *model, const char *dir,
                                     const gllmk_model_load_options *options);
/* Fills the weights with seeded random values, made on the device. */
gllmk_status model_fill_synthetic(model_state *model, uint64_t seed);
/* After either: the norms before q/k/v and gate/up folded into them (weights.c). */
gllmk_status model_fold_norms(model_state *model);
/* Then, without per-head q/k norms: each head's q and k rows reordered so
 * that rope's NeoX pairs sit side by side (rope_paired; weights.c). */
gllmk_status model_pair_rope_rows(model_state *model);

/* ---------------------------------------------------------------- session */

typedef struct seq_state {
  bool live;
  uint32_t length;      /* tokens in the cache */
  uint32_t block_count; /* blocks held */
  int32_t *blocks;      /* [max_blocks_per_seq] */
  uint32_t blocks_before; /* block_count before the forward in progress */
  uint64_t batch_mark;  /* the forward call that last named it (duplicate check) */
} seq_state;

/* Where each index array sits in the step buffer (in I32 elements), for a
 * forward of `tokens` new tokens of `seqs` sequences. */
typedef struct step_layout {
  uint32_t tokens, seqs;
  /* Tokens of each sequence when every sequence of the step is a prompt of
   * that many tokens from position 0 (its attention needs no cache), else 0. */
  uint32_t prompt_rows;
  uint64_t ids, positions, slots, q_starts, seq_lens, last_rows, block_table, total;
} step_layout;

/* Activations of one forward on one rank (its share of the heads and of the
 * intermediate columns), sized for max_tokens rows. */
typedef struct scratch {
  gllmk_tensor residual, normed; /* [T, hidden] */
  gllmk_tensor qkv;              /* [T, (Hq + 2 Hkv) D] */
  gllmk_tensor qk;               /* [T, Hq + Hkv, D]: q's heads then k's, after rope */
  gllmk_tensor attn;             /* [T, Hq, D] */
  gllmk_tensor proj;             /* [T, hidden]: o and down outputs */
  gllmk_tensor gate_up, act;     /* [T, 2 I], [T, I] */
  gllmk_tensor last;             /* [S, hidden]: each sequence's last row */
  gllmk_tensor logits;           /* [S, vocab] */
  gllmk_tensor tokens;           /* I32 [S] */
  /* I32 [DECODE_CHUNK * S]: gllmk_session_decode's tokens of up to
   * DECODE_CHUNK steps (each step's `count` ids packed), read back at once */
  gllmk_tensor token_history;
} scratch;

/* Steps of gllmk_session_decode between reads of its tokens. */
#define DECODE_CHUNK 32

/* Decode recordings, one per batch-size bucket (powers of two). */
#define SESSION_BUCKETS 16

/* One rank's device state of a session. */
typedef struct session_shard {
  gllmk_context *context;
  gllmk_tensor *k_cache, *v_cache; /* [layers] of [blocks, block_size, local kv_heads, D] */
  buffer_list buffers;             /* every device allocation but the step buffer */
  scratch x;
  gllmk_tensor logits_part;        /* [S, local vocab] (several ranks) */
  gllmk_buffer *gathered;          /* [ranks, S, local vocab] (several ranks) */
  gllmk_buffer *step_buffer;       /* I32 index arrays of a forward */
  gllmk_recording *recordings[SESSION_BUCKETS];
} session_shard;

struct session_state {
  model_state *model;
  uint32_t block_size, blocks_total, max_sequences, max_tokens;
  uint32_t max_blocks_per_seq, max_length;
  int32_t *free_blocks;            /* stack */
  uint32_t free_count;
  seq_state *seqs;                 /* [max_sequences] */
  uint64_t batch_serial;
  session_shard *shards;           /* [model->ranks]; rank 0 samples */
  int32_t *step_host;              /* the index arrays' host copy, written in one transfer */
  uint64_t step_capacity;          /* elements */
  uint32_t recording_count;
  /* Decode runs call by call: the ranks' collectives cannot be recorded on
   * this backend (no native recordings). */
  bool unrecorded_decode;
  uint64_t handle;
  session_state *next; /* the model's next session */
};

/* The state behind a live handle, or GLLMK_ERR_INVALID_ARGUMENT naming `fn`
 * (a freed, destroyed or never issued handle). */
gllmk_status model_from_handle(const gllmk_model *handle, const char *fn, model_state **out);
gllmk_status session_from_handle(const gllmk_session *handle, const char *fn,
                                 session_state **out);
/* GLLMK_ERR_INVALID_ARGUMENT when a sequence would pass its limit. */
gllmk_status session_check_length(const session_state *s, const char *fn, uint32_t seq,
                                  uint64_t length);
/* Frees a session (unlinked from its model by the caller). */
void session_free(session_state *s);

/* Takes blocks from the free stack until the sequence can hold `length`
 * tokens (the caller has checked that enough are free). */
void session_grow(session_state *s, seq_state *q, uint32_t length);
/* Returns blocks [keep, block_count) of a sequence to the free stack. */
void session_release(session_state *s, seq_state *q, uint32_t keep);
void step_layout_for(const session_state *s, uint32_t tokens, uint32_t seqs, step_layout *out);
/* Enqueues the model from ids to logits for a step laid out by `layout`
 * (rows [0, seqs) of s->x.logits). */
gllmk_status forward_enqueue(session_state *s, const step_layout *layout);

#endif /* GLLMK_MODEL_INTERNAL_H_ */
