/*
 * model_ref.h - tiny random Hugging Face decoder models, written to disk
 * the way transformers saves them, and a float64 forward of the same
 * weights to check a model runner against.
 *
 * A test builds a spec (ref_spec_tiny gives ready-made ones), creates the
 * model (random weights from the spec's seed), writes it to a directory
 * (config.json + model.safetensors, or shards + model.safetensors.index.json)
 * and compares the runner's logits or greedy tokens with ref_model_logits /
 * ref_model_greedy.
 *
 * The forward is plain C loops in double precision over the weights as
 * stored (each weight is rounded to the spec's dtype when created, so the
 * file and the forward agree bit for bit); it calls nothing from gllmk, so
 * it shares no mistake with the code under test. It follows transformers'
 * LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and
 * Qwen3ForCausalLM, but keeps every intermediate in double where
 * transformers rounds to the model dtype (and computes RoPE angles in
 * float32): compare with a tolerance, not exactly.
 */
#ifndef GLLMK_TESTS_MODEL_REF_H_
#define GLLMK_TESTS_MODEL_REF_H_

#include <stdint.h>

typedef enum ref_family { REF_LLAMA, REF_MISTRAL, REF_QWEN2, REF_QWEN3 } ref_family;

/* Same numbering as gllmk_dtype. */
typedef enum ref_dtype { REF_F32 = 0, REF_F16 = 1, REF_BF16 = 2 } ref_dtype;

typedef struct ref_model_spec {
  ref_family family;
  int hidden, layers, heads, kv_heads;
  int head_dim; /* 0: hidden / heads, and config.json has no "head_dim"
                   (except qwen3, whose config always names it) */
  int intermediate, vocab, max_position;
  double rope_theta, rms_eps;
  int tied_embeddings; /* tie_word_embeddings: lm_head is the embedding,
                          the file has no lm_head.weight */
  /* Llama 3.1 rope_scaling {rope_type llama3, factor, low_freq_factor,
   * high_freq_factor, original_max_position_embeddings}. */
  int rope_llama3;
  double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  int rope_original_max_position;
  /* llama, qwen3: q/k/v/o biases (config "attention_bias"). qwen2 always
   * has q/k/v biases and no o bias, whatever this says; mistral has none
   * (ref_model_create refuses a mistral spec that asks for them). */
  int attention_bias;
  /* mistral only: "sliding_window" (0 = null). A query at position i sees
   * keys i - sliding_window + 1 .. i, as transformers masks it. qwen2 is
   * written with "use_sliding_window": false and "sliding_window" equal to
   * max_position (as Qwen2.5 ships); qwen3 with null. */
  int sliding_window;
  ref_dtype weight_dtype; /* stored dtype of every tensor */
  /* Write config.json as transformers 5.x does: "dtype" for "torch_dtype",
   * "rope_parameters" {rope_type, rope_theta, llama3 keys} for
   * "rope_theta" and "rope_scaling". */
  int transformers_v5;
  /* 0 or 1: model.safetensors. N > 1: model-0000i-of-0000N.safetensors
   * (tensors split by size, in order, a layer's tensors may straddle two
   * shards) + model.safetensors.index.json. At most the tensor count. */
  int shards;
  uint64_t seed;
} ref_model_spec;

typedef struct ref_model ref_model;

/* A ready-made tiny spec (seed 1, one file, transformers 4.x config):
 *   family   hidden layers heads kv head_dim inter vocab  theta   eps   tied bias
 *   LLAMA     128     2     4    2   32(*)   352  1000   500000  1e-5   no   no
 *   MISTRAL   256     3     8    2   32(*)   512  1024   1e6     1e-5   no   --
 *   QWEN2     128     2     4    2   32(*)   320  1000   1e6     1e-6   yes  qkv
 *   QWEN3     128     2     4    2   64      384  1008   1e6     1e-6   no   no
 * (*) head_dim 0: derived from hidden / heads. max_position 512 for all. */
ref_model_spec ref_spec_tiny(ref_family family, ref_dtype dtype);

/* Turns on Llama 3.1 rope scaling with factor 8, low 1, high 4 and
 * original_max_position 256, so that with head_dim 32 and theta 5e5 (the
 * tiny llama) 3 frequencies are kept, 2 interpolated and 11 divided by 8. */
void ref_spec_set_llama3_rope(ref_model_spec *spec);

/* The head_dim the model uses (spec->head_dim, or hidden / heads). */
int ref_head_dim(const ref_model_spec *spec);

/* Random weights from spec->seed, each rounded to spec->weight_dtype
 * (a tensor's values depend only on the seed, its name and shape, and the
 * dtype): Linear std 1/sqrt(in) (o_proj and down_proj 4/sqrt(in)),
 * embedding and lm_head std 2/sqrt(hidden), norm weights 1 + 0.1 noise,
 * biases 0.1 noise. Logit rows then have a std near 2 and |logit| < 10;
 * the top-2 gap of a greedy pick is ~0.5 on average, but a few picks in 32
 * have gaps under 0.01 (see ref_model_greedy). NULL on an invalid spec or
 * out of memory. */
ref_model *ref_model_create(const ref_model_spec *spec);
void ref_model_free(ref_model *m);
const ref_model_spec *ref_model_spec_of(const ref_model *m);

/* Writes config.json and the safetensors file(s) into `dir`, which must
 * exist (files already there are replaced, others left). 0 on success, -1
 * on an I/O error or out of memory. */
int ref_model_write(const ref_model *m, const char *dir);

/* A tensor by its Hugging Face name ("model.layers.0.self_attn.q_proj.weight"),
 * its values as stored (exactly representable in the weight dtype), row
 * major; rows and cols get its shape (cols 1 for a vector). NULL when the
 * model has no such tensor (lm_head.weight of a tied model). */
const float *ref_model_tensor(const ref_model *m, const char *name, int64_t *rows,
                              int64_t *cols);

/* out_logits [n, vocab]: the logits after each of tokens[0..n-1], causal,
 * positions 0..n-1. 0, or -1 on a token out of range, n < 1, or no memory. */
int ref_model_logits(const ref_model *m, const int32_t *tokens, int n, double *out_logits);

/* Greedy decoding: feeds the prompt, then picks ref_argmax n_new times,
 * feeding each pick back; out_tokens [n_new]. gaps [n_new] (may be NULL)
 * gets the ref_top2_gap of each pick: a runner whose logits are off by e
 * may pick differently where the gap is below 2e, and from there on its
 * tokens owe nothing to these, so compare tokens up to the first such pick.
 * 0, or -1 as for ref_model_logits. */
int ref_model_greedy(const ref_model *m, const int32_t *prompt, int n_prompt, int n_new,
                     int32_t *out_tokens, double *gaps);

/* The RoPE inverse frequencies, out [head_dim / 2], llama3 scaling applied
 * when the spec asks for it (transformers' _compute_llama3_parameters). */
void ref_rope_inv_freq(const ref_model_spec *spec, double *out);

/* The index of the largest value (the lowest index among equals). */
int ref_argmax(const double *row, int vocab);
/* The largest value minus the second largest (0 when two are equal). */
double ref_top2_gap(const double *row, int vocab);

/* `value` rounded to `dtype`, to nearest even, subnormals included. */
double ref_dtype_round(ref_dtype dtype, double value);

#endif /* GLLMK_TESTS_MODEL_REF_H_ */
