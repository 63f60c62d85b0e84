/*
 * model_ref.c - tiny random Hugging Face models on disk and their float64
 * forward; see model_ref.h.
 *
 * Layout of the file: random numbers and dtype rounding, the spec (checks
 * and ready-made ones), building the weights, writing config.json and the
 * safetensors files, and the forward (one token at a time over a KV cache,
 * which computes exactly what a full causal prefill computes).
 */
#include "model_ref.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- random */

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *state) {
  return (double)(splitmix64(state) >> 11) * 0x1p-53;
}

/* Mean 0, variance 1, close to normal (Irwin-Hall with 12 terms). Built
 * from additions only, not Box-Muller's log and cos, so that every libm
 * draws the same weights from the same seed. */
static double rng_normal(uint64_t *state) {
  double sum = 0.0;
  for (int i = 0; i < 12; i++) sum += rng_uniform(state);
  return sum - 6.0;
}

/* A tensor's own stream, from the seed and its name: a tensor gets the
 * same values whatever other tensors the spec adds or drops (tying the
 * embeddings or adding biases leaves the rest of the model unchanged). */
static uint64_t tensor_stream(uint64_t seed, const char *name) {
  uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a */
  for (const char *c = name; *c; c++) hash = (hash ^ (unsigned char)*c) * 0x100000001b3ull;
  uint64_t state = seed ^ hash;
  splitmix64(&state);
  return state;
}

/* ------------------------------------------------------------- dtypes */

/* v rounded to nearest even on the grid of a binary format with
 * `significand_bits` (implicit bit included) whose smallest normal is
 * 2^min_exp; below it the spacing stays 2^(min_exp - significand_bits + 1)
 * (subnormals). Scaling by powers of two is exact and nearbyint rounds
 * ties to even in the default rounding mode, so this is one exact rounding
 * of the double, not a double rounding through float. */
static double round_to_grid(double v, int significand_bits, int min_exp) {
  if (v == 0.0 || !isfinite(v)) return v;
  int exp2;
  frexp(v, &exp2); /* |v| in [2^(exp2 - 1), 2^exp2) */
  int e = exp2 - 1 < min_exp ? min_exp : exp2 - 1;
  int ulp_exp = e - (significand_bits - 1);
  return ldexp(nearbyint(ldexp(v, -ulp_exp)), ulp_exp);
}

double ref_dtype_round(ref_dtype dtype, double value) {
  double rounded, max;
  switch (dtype) {
  case REF_F16:
    rounded = round_to_grid(value, 11, -14);
    max = 65504.0;
    break;
  case REF_BF16:
    rounded = round_to_grid(value, 8, -126);
    max = 0x1.fep127;
    break;
  default:
    rounded = round_to_grid(value, 24, -126);
    max = 0x1.fffffep127;
    break;
  }
  /* Past the largest finite value the grid step lands on 2^(emax + 1). */
  return fabs(rounded) > max ? copysign(INFINITY, value) : rounded;
}

static int dtype_size(ref_dtype dtype) { return dtype == REF_F32 ? 4 : 2; }

static const char *dtype_safetensors_name(ref_dtype dtype) {
  return dtype == REF_F16 ? "F16" : dtype == REF_BF16 ? "BF16" : "F32";
}

static const char *dtype_torch_name(ref_dtype dtype) {
  return dtype == REF_F16 ? "float16" : dtype == REF_BF16 ? "bfloat16" : "float32";
}

/* The f16 bits of v, which must be representable in f16 (already rounded). */
static uint16_t f16_bits(float v) {
  uint16_t sign = signbit(v) ? 0x8000u : 0u;
  double a = fabs((double)v);
  if (isinf(a)) return sign | 0x7c00u;
  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)(a * 0x1p24)); /* subnormal */
  int exp2;
  frexp(a, &exp2);
  int e = exp2 - 1;
  uint32_t significand = (uint32_t)ldexp(a, 10 - e); /* 1024..2047 */
  return (uint16_t)(sign | (uint32_t)(e + 15) << 10 | (significand - 1024u));
}

/* The bf16 bits of v, which must be representable in bf16: the top half
 * of its float bits, the bottom half being zero. */
static uint16_t bf16_bits(float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return (uint16_t)(bits >> 16);
}

/* value as the dtype's little-endian bytes at out. */
static void encode_value(ref_dtype dtype, float value, unsigned char *out) {
  uint32_t bits;
  if (dtype == REF_F32) {
    memcpy(&bits, &value, sizeof bits);
  } else {
    bits = dtype == REF_F16 ? f16_bits(value) : bf16_bits(value);
  }
  for (int b = 0; b < dtype_size(dtype); b++) out[b] = (unsigned char)(bits >> (8 * b));
}

/* --------------------------------------------------------------- spec */

ref_model_spec ref_spec_tiny(ref_family family, ref_dtype dtype) {
  ref_model_spec spec = {0};
  spec.family = family;
  spec.weight_dtype = dtype;
  spec.max_position = 512;
  spec.seed = 1;
  spec.layers = 2;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.hidden = 128;
  spec.rope_theta = 1e6;
  spec.rms_eps = 1e-6;
  switch (family) {
  case REF_LLAMA:
    spec.intermediate = 352;
    spec.vocab = 1000;
    spec.rope_theta = 500000.0;
    spec.rms_eps = 1e-5;
    break;
  case REF_MISTRAL:
    spec.hidden = 256;
    spec.layers = 3;
    spec.heads = 8;
    spec.intermediate = 512;
    spec.vocab = 1024;
    spec.rms_eps = 1e-5;
    break;
  case REF_QWEN2:
    spec.intermediate = 320;
    spec.vocab = 1000;
    spec.tied_embeddings = 1;
    break;
  case REF_QWEN3:
    spec.head_dim = 64; /* heads * head_dim != hidden, as in Qwen3 */
    spec.intermediate = 384;
    spec.vocab = 1008;
    break;
  }
  return spec;
}

void ref_spec_set_llama3_rope(ref_model_spec *spec) {
  spec->rope_llama3 = 1;
  spec->rope_factor = 8.0;
  spec->rope_low_freq_factor = 1.0;
  spec->rope_high_freq_factor = 4.0;
  spec->rope_original_max_position = 256;
}

int ref_head_dim(const ref_model_spec *spec) {
  return spec->head_dim ? spec->head_dim : spec->hidden / spec->heads;
}

/* Which biases the family has (see model_ref.h on attention_bias). */
static int has_qkv_bias(const ref_model_spec *spec) {
  return spec->family == REF_QWEN2 ||
         (spec->attention_bias && (spec->family == REF_LLAMA || spec->family == REF_QWEN3));
}

static int has_o_bias(const ref_model_spec *spec) {
  return spec->attention_bias && (spec->family == REF_LLAMA || spec->family == REF_QWEN3);
}

enum { MAX_TENSORS_PER_LAYER = 15 };

static int tensor_capacity(const ref_model_spec *spec) {
  return 3 + MAX_TENSORS_PER_LAYER * spec->layers;
}

static int spec_valid(const ref_model_spec *s) {
  if (s->family < REF_LLAMA || s->family > REF_QWEN3) return 0;
  if (s->weight_dtype < REF_F32 || s->weight_dtype > REF_BF16) return 0;
  if (s->hidden < 1 || s->layers < 1 || s->heads < 1 || s->kv_heads < 1 ||
      s->intermediate < 1 || s->vocab < 2 || s->max_position < 1)
    return 0;
  if (s->heads % s->kv_heads != 0 || s->head_dim < 0) return 0;
  if (s->head_dim == 0 && s->hidden % s->heads != 0) return 0;
  if (ref_head_dim(s) % 2 != 0) return 0;
  if (!(s->rope_theta > 0.0) || !(s->rms_eps > 0.0)) return 0;
  if (s->family == REF_MISTRAL && s->attention_bias) return 0;
  if (s->sliding_window < 0 || (s->sliding_window && s->family != REF_MISTRAL)) return 0;
  if (s->rope_llama3 &&
      (!(s->rope_factor > 0.0) || !(s->rope_low_freq_factor > 0.0) ||
       !(s->rope_high_freq_factor > s->rope_low_freq_factor) ||
       s->rope_original_max_position < 1))
    return 0;
  return s->shards >= 0 && s->shards <= tensor_capacity(s);
}

/* ------------------------------------------------------------ weights */

enum { TENSOR_NAME_SIZE = 96 };

typedef struct ref_tensor {
  char name[TENSOR_NAME_SIZE];
  int64_t rows, cols; /* cols 0: a vector of `rows` */
  float *data;        /* values exactly representable in the weight dtype */
} ref_tensor;

/* A layer's weights, as the forward reads them; biases and q/k norms NULL
 * where the family has none. */
typedef struct ref_layer {
  const float *input_norm, *q, *k, *v, *o, *q_bias, *k_bias, *v_bias, *o_bias;
  const float *q_norm, *k_norm, *post_norm, *gate, *up, *down;
} ref_layer;

struct ref_model {
  ref_model_spec spec;
  int head_dim;
  ref_tensor *tensors; /* in the order transformers' state_dict lists them */
  int tensor_count;
  const float *embed, *final_norm, *lm_head; /* lm_head == embed when tied */
  ref_layer *layers;
};

static int64_t tensor_elements(const ref_tensor *t) {
  return t->rows * (t->cols ? t->cols : 1);
}

/* Appends a tensor of mean + std * noise, each value rounded to the
 * weight dtype. NULL when out of memory. */
static float *add_tensor(ref_model *m, const char *name, int64_t rows, int64_t cols,
                         double mean, double std) {
  ref_tensor *t = &m->tensors[m->tensor_count];
  int64_t count = rows * (cols ? cols : 1);
  t->data = malloc(sizeof(float) * (size_t)count);
  if (!t->data) return NULL;
  m->tensor_count++;
  snprintf(t->name, sizeof t->name, "%s", name);
  t->rows = rows;
  t->cols = cols;
  uint64_t state = tensor_stream(m->spec.seed, name);
  for (int64_t i = 0; i < count; i++) {
    double value = mean + std * rng_normal(&state);
    t->data[i] = (float)ref_dtype_round(m->spec.weight_dtype, value);
  }
  return t->data;
}

/* A Linear weight [out, in]: std 1/sqrt(in) keeps activations near unit
 * size through the layers, so the attention is neither uniform nor one-hot
 * and the logits spread over a few units. */
static float *add_linear(ref_model *m, const char *name, int64_t out, int64_t in) {
  return add_tensor(m, name, out, in, 0.0, 1.0 / sqrt((double)in));
}

/* o_proj and down_proj, which write into the residual stream, are 4 times
 * larger: the residual then outgrows the embedding, whose own row would
 * otherwise dominate the final state of a tied model and make greedy
 * decoding repeat the last token (every norm input is normalized, so the
 * scale changes nothing else). */
static float *add_residual_linear(ref_model *m, const char *name, int64_t out, int64_t in) {
  return add_tensor(m, name, out, in, 0.0, 4.0 / sqrt((double)in));
}

/* Norm weights near 1, biases small but large enough that leaving one out
 * moves the logits well past any dtype's error. */
static float *add_norm(ref_model *m, const char *name, int64_t n) {
  return add_tensor(m, name, n, 0, 1.0, 0.1);
}

static float *add_bias(ref_model *m, const char *name, int64_t n) {
  return add_tensor(m, name, n, 0, 0.0, 0.1);
}

/* model.layers.{i}.{suffix} */
static const char *layer_name(char *buf, int layer, const char *suffix) {
  snprintf(buf, TENSOR_NAME_SIZE, "model.layers.%d.%s", layer, suffix);
  return buf;
}

/* self_attn.{which}_proj.weight [out, in], and its bias when `bias`. */
static int add_projection(ref_model *m, int i, char which, int64_t out, int64_t in, int bias,
                          const float **weight, const float **bias_out) {
  char n[TENSOR_NAME_SIZE], suffix[40];
  snprintf(suffix, sizeof suffix, "self_attn.%c_proj.weight", which);
  layer_name(n, i, suffix);
  *weight = which == 'o' ? add_residual_linear(m, n, out, in) : add_linear(m, n, out, in);
  if (!*weight) return -1;
  if (!bias) return 0;
  snprintf(suffix, sizeof suffix, "self_attn.%c_proj.bias", which);
  *bias_out = add_bias(m, layer_name(n, i, suffix), out);
  return *bias_out ? 0 : -1;
}

static int add_attention(ref_model *m, int i, ref_layer *l) {
  const ref_model_spec *s = &m->spec;
  int64_t q_dim = (int64_t)s->heads * m->head_dim, kv_dim = (int64_t)s->kv_heads * m->head_dim;
  int qkv_bias = has_qkv_bias(s);
  if (add_projection(m, i, 'q', q_dim, s->hidden, qkv_bias, &l->q, &l->q_bias) ||
      add_projection(m, i, 'k', kv_dim, s->hidden, qkv_bias, &l->k, &l->k_bias) ||
      add_projection(m, i, 'v', kv_dim, s->hidden, qkv_bias, &l->v, &l->v_bias) ||
      add_projection(m, i, 'o', s->hidden, q_dim, has_o_bias(s), &l->o, &l->o_bias))
    return -1;
  if (s->family != REF_QWEN3) return 0;
  char n[TENSOR_NAME_SIZE];
  l->q_norm = add_norm(m, layer_name(n, i, "self_attn.q_norm.weight"), m->head_dim);
  l->k_norm = add_norm(m, layer_name(n, i, "self_attn.k_norm.weight"), m->head_dim);
  return l->q_norm && l->k_norm ? 0 : -1;
}

/* One decoder layer's tensors, in transformers' state_dict order (the
 * order its modules are built in), which decides how shards split. */
static int add_layer(ref_model *m, int i) {
  const ref_model_spec *s = &m->spec;
  ref_layer *l = &m->layers[i];
  char n[TENSOR_NAME_SIZE];
  if (add_attention(m, i, l)) return -1;
  l->gate = add_linear(m, layer_name(n, i, "mlp.gate_proj.weight"), s->intermediate, s->hidden);
  l->up = add_linear(m, layer_name(n, i, "mlp.up_proj.weight"), s->intermediate, s->hidden);
  l->down = add_residual_linear(m, layer_name(n, i, "mlp.down_proj.weight"), s->hidden,
                                s->intermediate);
  l->input_norm = add_norm(m, layer_name(n, i, "input_layernorm.weight"), s->hidden);
  l->post_norm = add_norm(m, layer_name(n, i, "post_attention_layernorm.weight"), s->hidden);
  return l->gate && l->up && l->down && l->input_norm && l->post_norm ? 0 : -1;
}

/* The embedding doubles as lm_head when tied, so it gets lm_head's scale:
 * std 2/sqrt(hidden) makes logits of a unit-RMS final state spread by ~2.
 * Rows differ (independent draws). */
static int add_weights(ref_model *m) {
  const ref_model_spec *s = &m->spec;
  double head_std = 2.0 / sqrt((double)s->hidden);
  m->embed = add_tensor(m, "model.embed_tokens.weight", s->vocab, s->hidden, 0.0, head_std);
  if (!m->embed) return -1;
  for (int i = 0; i < s->layers; i++)
    if (add_layer(m, i)) return -1;
  if (!(m->final_norm = add_norm(m, "model.norm.weight", s->hidden))) return -1;
  m->lm_head = s->tied_embeddings
                   ? m->embed
                   : add_tensor(m, "lm_head.weight", s->vocab, s->hidden, 0.0, head_std);
  return m->lm_head ? 0 : -1;
}

ref_model *ref_model_create(const ref_model_spec *spec) {
  if (!spec_valid(spec)) return NULL;
  ref_model *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->spec = *spec;
  m->head_dim = ref_head_dim(spec);
  m->tensors = calloc((size_t)tensor_capacity(spec), sizeof *m->tensors);
  m->layers = calloc((size_t)spec->layers, sizeof *m->layers);
  if (!m->tensors || !m->layers || add_weights(m) || m->tensor_count < spec->shards) {
    ref_model_free(m);
    return NULL;
  }
  return m;
}

void ref_model_free(ref_model *m) {
  if (!m) return;
  for (int i = 0; i < m->tensor_count; i++) free(m->tensors[i].data);
  free(m->tensors);
  free(m->layers);
  free(m);
}

const ref_model_spec *ref_model_spec_of(const ref_model *m) { return &m->spec; }

const float *ref_model_tensor(const ref_model *m, const char *name, int64_t *rows,
                              int64_t *cols) {
  for (int i = 0; i < m->tensor_count; i++) {
    const ref_tensor *t = &m->tensors[i];
    if (strcmp(t->name, name) != 0) continue;
    if (rows) *rows = t->rows;
    if (cols) *cols = t->cols ? t->cols : 1;
    return t->data;
  }
  return NULL;
}

/* ------------------------------------------------------- config.json */

/* json_object_set_new, which takes `value` in every case and fails on a
 * NULL object or value (an allocation that failed); jansson's array and
 * object setters all behave so, so building a document needs no check
 * per call, only the OR of their results. */
static int put(json_t *object, const char *key, json_t *value) {
  return json_object_set_new(object, key, value) ? -1 : 0;
}

static const char *model_type(ref_family family) {
  static const char *const names[] = {"llama", "mistral", "qwen2", "qwen3"};
  return names[family];
}

static const char *architecture(ref_family family) {
  static const char *const names[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                      "Qwen2ForCausalLM", "Qwen3ForCausalLM"};
  return names[family];
}

/* The llama3 keys, shared by 4.x "rope_scaling" and 5.x "rope_parameters". */
static int put_llama3_keys(json_t *object, const ref_model_spec *s) {
  int err = put(object, "factor", json_real(s->rope_factor));
  err |= put(object, "low_freq_factor", json_real(s->rope_low_freq_factor));
  err |= put(object, "high_freq_factor", json_real(s->rope_high_freq_factor));
  err |= put(object, "original_max_position_embeddings",
             json_integer(s->rope_original_max_position));
  return err;
}

/* 4.x: "rope_theta" and "rope_scaling" (null or the llama3 object).
 * 5.x: "rope_parameters" holding rope_type and rope_theta as well. */
static int put_rope(json_t *config, const ref_model_spec *s) {
  const char *type = s->rope_llama3 ? "llama3" : "default";
  if (s->transformers_v5) {
    json_t *params = json_object();
    int err = put(params, "rope_type", json_string(type));
    err |= put(params, "rope_theta", json_real(s->rope_theta));
    if (s->rope_llama3) err |= put_llama3_keys(params, s);
    return put(config, "rope_parameters", params) | err;
  }
  int err = put(config, "rope_theta", json_real(s->rope_theta));
  if (!s->rope_llama3) return err | put(config, "rope_scaling", json_null());
  json_t *scaling = json_object();
  err |= put(scaling, "rope_type", json_string(type));
  err |= put_llama3_keys(scaling, s);
  return put(config, "rope_scaling", scaling) | err;
}

/* The keys every family's config has. */
static int put_common(json_t *config, const ref_model_spec *s) {
  json_t *architectures = json_array();
  int err = json_array_append_new(architectures, json_string(architecture(s->family)));
  err |= put(config, "architectures", architectures);
  err |= put(config, "model_type", json_string(model_type(s->family)));
  err |= put(config, "attention_dropout", json_real(0.0));
  err |= put(config, "bos_token_id", json_integer(1));
  err |= put(config, "eos_token_id", json_integer(2));
  err |= put(config, "hidden_act", json_string("silu"));
  err |= put(config, "hidden_size", json_integer(s->hidden));
  err |= put(config, "initializer_range", json_real(0.02));
  err |= put(config, "intermediate_size", json_integer(s->intermediate));
  err |= put(config, "max_position_embeddings", json_integer(s->max_position));
  err |= put(config, "num_attention_heads", json_integer(s->heads));
  err |= put(config, "num_hidden_layers", json_integer(s->layers));
  err |= put(config, "num_key_value_heads", json_integer(s->kv_heads));
  err |= put(config, "rms_norm_eps", json_real(s->rms_eps));
  err |= put(config, "tie_word_embeddings", json_boolean(s->tied_embeddings));
  err |= put(config, "use_cache", json_true());
  err |= put(config, "vocab_size", json_integer(s->vocab));
  err |= put(config, s->transformers_v5 ? "dtype" : "torch_dtype",
             json_string(dtype_torch_name(s->weight_dtype)));
  err |= put(config, "transformers_version",
             json_string(s->transformers_v5 ? "5.0.0" : "4.51.3"));
  if (s->head_dim || s->family == REF_QWEN3)
    err |= put(config, "head_dim", json_integer(ref_head_dim(s)));
  return err | put_rope(config, s);
}

/* What only some families write. */
static int put_family(json_t *config, const ref_model_spec *s) {
  int err = 0;
  switch (s->family) {
  case REF_LLAMA:
    err |= put(config, "attention_bias", json_boolean(s->attention_bias));
    err |= put(config, "mlp_bias", json_false());
    err |= put(config, "pretraining_tp", json_integer(1));
    break;
  case REF_MISTRAL:
    err |= put(config, "sliding_window",
               s->sliding_window ? json_integer(s->sliding_window) : json_null());
    break;
  case REF_QWEN2:
    /* A window is named but off: a runner must look at use_sliding_window. */
    err |= put(config, "use_sliding_window", json_false());
    err |= put(config, "sliding_window", json_integer(s->max_position));
    err |= put(config, "max_window_layers", json_integer(s->layers));
    break;
  case REF_QWEN3:
    err |= put(config, "attention_bias", json_boolean(s->attention_bias));
    err |= put(config, "use_sliding_window", json_false());
    err |= put(config, "sliding_window", json_null());
    err |= put(config, "max_window_layers", json_integer(s->layers));
    break;
  }
  return err;
}

/* dir/name into buf; -1 when it does not fit. */
static int join_path(char *buf, size_t size, const char *dir, const char *name) {
  int n = snprintf(buf, size, "%s/%s", dir, name);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* 15 significant digits when they give back every real of the spec
 * exactly (1e-05 as transformers writes it, not 1.0000000000000001e-05),
 * else 17, which always do. */
static int real_precision(const ref_model_spec *s) {
  const double reals[] = {s->rope_theta, s->rms_eps, s->rope_factor, s->rope_low_freq_factor,
                          s->rope_high_freq_factor};
  for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
    char text[64];
    snprintf(text, sizeof text, "%.15g", reals[i]);
    if (strtod(text, NULL) != reals[i]) return 17;
  }
  return 15;
}

/* Pretty-printed with sorted keys, as transformers' to_json_file does. */
static int dump_json_file(json_t *document, const char *dir, const char *name, int precision) {
  char path[4096];
  if (join_path(path, sizeof path, dir, name)) return -1;
  return json_dump_file(document, path,
                        JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(precision));
}

static int write_config(const ref_model *m, const char *dir) {
  json_t *config = json_object();
  int err = put_common(config, &m->spec) | put_family(config, &m->spec);
  if (!err) err = dump_json_file(config, dir, "config.json", real_precision(&m->spec));
  json_decref(config);
  return err ? -1 : 0;
}

/* -------------------------------------------------------- safetensors */

static uint64_t tensor_bytes(const ref_model *m, const ref_tensor *t) {
  return (uint64_t)tensor_elements(t) * (uint64_t)dtype_size(m->spec.weight_dtype);
}

/* ids sorted by tensor name, the order safetensors writes tensors in (an
 * insertion sort: a model has tens of tensors). */
static void sort_by_name(const ref_model *m, int *ids, int count) {
  for (int i = 1; i < count; i++) {
    int id = ids[i], j = i;
    for (; j > 0 && strcmp(m->tensors[ids[j - 1]].name, m->tensors[id].name) > 0; j--)
      ids[j] = ids[j - 1];
    ids[j] = id;
  }
}

/* The header for tensors `ids` (sorted by name, the order their data
 * follows in), as compact JSON: {"__metadata__": {"format": "pt"},
 * name: {dtype, shape, data_offsets}, ...}. NULL when out of memory. */
static char *safetensors_header(const ref_model *m, const int *ids, int count) {
  json_t *header = json_object(), *metadata = json_object();
  int err = put(metadata, "format", json_string("pt"));
  err |= put(header, "__metadata__", metadata);
  uint64_t offset = 0;
  for (int i = 0; i < count && !err; i++) {
    const ref_tensor *t = &m->tensors[ids[i]];
    json_t *entry = json_object(), *shape = json_array(), *offsets = json_array();
    err |= json_array_append_new(shape, json_integer(t->rows));
    if (t->cols) err |= json_array_append_new(shape, json_integer(t->cols));
    uint64_t end = offset + tensor_bytes(m, t);
    err |= json_array_append_new(offsets, json_integer((json_int_t)offset));
    err |= json_array_append_new(offsets, json_integer((json_int_t)end));
    err |= put(entry, "dtype", json_string(dtype_safetensors_name(m->spec.weight_dtype)));
    err |= put(entry, "shape", shape);
    err |= put(entry, "data_offsets", offsets);
    err |= put(header, t->name, entry);
    offset = end;
  }
  char *text = err ? NULL : json_dumps(header, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(header);
  return text;
}

/* The 8-byte little-endian length, then the header padded with spaces to
 * a multiple of 8 (so that the data starts aligned), as safetensors does. */
static int write_header(FILE *file, const char *header) {
  size_t length = strlen(header), padded = (length + 7) / 8 * 8;
  unsigned char prefix[8];
  for (int b = 0; b < 8; b++) prefix[b] = (unsigned char)((uint64_t)padded >> (8 * b));
  if (fwrite(prefix, 1, 8, file) != 8 || fwrite(header, 1, length, file) != length) return -1;
  for (size_t i = length; i < padded; i++)
    if (fputc(' ', file) == EOF) return -1;
  return 0;
}

static int write_tensor_data(FILE *file, const ref_model *m, const ref_tensor *t) {
  ref_dtype dtype = m->spec.weight_dtype;
  size_t bytes = (size_t)tensor_bytes(m, t), size = (size_t)dtype_size(dtype);
  unsigned char *buf = malloc(bytes);
  if (!buf) return -1;
  for (size_t i = 0; i < bytes / size; i++) encode_value(dtype, t->data[i], buf + i * size);
  int err = fwrite(buf, 1, bytes, file) != bytes ? -1 : 0;
  free(buf);
  return err;
}

/* Writes tensors `ids` (reordered by name) to dir/name. */
static int write_safetensors(const ref_model *m, int *ids, int count, const char *dir,
                             const char *name) {
  char path[4096];
  if (join_path(path, sizeof path, dir, name)) return -1;
  sort_by_name(m, ids, count);
  char *header = safetensors_header(m, ids, count);
  if (!header) return -1;
  FILE *file = fopen(path, "wb");
  int err = file ? write_header(file, header) : -1;
  for (int i = 0; i < count && !err; i++) err = write_tensor_data(file, m, &m->tensors[ids[i]]);
  if (file && fclose(file) != 0) err = -1;
  free(header);
  return err;
}

/* shard[i] for each tensor, in state_dict order: a shard closes once the
 * bytes so far reach its share of the total, or when the tensors left are
 * only enough for one per remaining shard; so no shard is empty and big
 * layers straddle shards, as save_pretrained's size-based split does. */
static void assign_shards(const ref_model *m, int shards, int *shard) {
  uint64_t total = 0, before = 0;
  for (int i = 0; i < m->tensor_count; i++) total += tensor_bytes(m, &m->tensors[i]);
  int s = 0, in_shard = 0;
  for (int i = 0; i < m->tensor_count; i++) {
    int must_move = m->tensor_count - i == shards - 1 - s;
    int full = before * (uint64_t)shards >= total * (uint64_t)(s + 1);
    if (in_shard && s < shards - 1 && (full || must_move)) {
      s++;
      in_shard = 0;
    }
    shard[i] = s;
    in_shard++;
    before += tensor_bytes(m, &m->tensors[i]);
  }
}

static void shard_file_name(char *buf, size_t size, int index, int shards) {
  snprintf(buf, size, "model-%05d-of-%05d.safetensors", index + 1, shards);
}

/* model.safetensors.index.json: total_size (the tensors' bytes, headers
 * left out, as transformers counts it) and the shard of every tensor. */
static int write_index(const ref_model *m, const int *shard, int shards, const char *dir) {
  json_t *doc = json_object(), *metadata = json_object(), *map = json_object();
  int err = 0;
  uint64_t total = 0;
  for (int i = 0; i < m->tensor_count; i++) {
    char file[64];
    shard_file_name(file, sizeof file, shard[i], shards);
    err |= put(map, m->tensors[i].name, json_string(file));
    total += tensor_bytes(m, &m->tensors[i]);
  }
  err |= put(metadata, "total_size", json_integer((json_int_t)total));
  /* Filled before attached: put drops its value when it fails. */
  err |= put(doc, "metadata", metadata) | put(doc, "weight_map", map);
  if (!err) err = dump_json_file(doc, dir, "model.safetensors.index.json", 17);
  json_decref(doc);
  return err ? -1 : 0;
}

static int write_shards(const ref_model *m, const char *dir) {
  int shards = m->spec.shards, count = m->tensor_count;
  int *shard = malloc(sizeof(int) * (size_t)count), *ids = malloc(sizeof(int) * (size_t)count);
  int err = !shard || !ids ? -1 : 0;
  if (!err) assign_shards(m, shards, shard);
  for (int s = 0; s < shards && !err; s++) {
    int n = 0;
    for (int i = 0; i < count; i++)
      if (shard[i] == s) ids[n++] = i;
    char file[64];
    shard_file_name(file, sizeof file, s, shards);
    err = write_safetensors(m, ids, n, dir, file);
  }
  if (!err) err = write_index(m, shard, shards, dir);
  free(shard);
  free(ids);
  return err;
}

int ref_model_write(const ref_model *m, const char *dir) {
  if (write_config(m, dir)) return -1;
  if (m->spec.shards > 1) return write_shards(m, dir);
  int *ids = malloc(sizeof(int) * (size_t)m->tensor_count);
  if (!ids) return -1;
  for (int i = 0; i < m->tensor_count; i++) ids[i] = i;
  int err = write_safetensors(m, ids, m->tensor_count, dir, "model.safetensors");
  free(ids);
  return err;
}

/* --------------------------------------------------------------- rope */

/* transformers' _compute_llama3_parameters: long wavelengths (low
 * frequencies) are slowed down by `factor`, short ones kept, and those in
 * between blended by how many original contexts their wavelength spans. */
static double llama3_adjust(const ref_model_spec *s, double inv_freq) {
  const double pi = 3.14159265358979323846;
  double orig = s->rope_original_max_position;
  double low = s->rope_low_freq_factor, high = s->rope_high_freq_factor;
  double wavelen = 2.0 * pi / inv_freq;
  double low_freq_wavelen = orig / low, high_freq_wavelen = orig / high;
  if (wavelen > low_freq_wavelen) return inv_freq / s->rope_factor;
  if (wavelen < high_freq_wavelen) return inv_freq;
  double smooth = (orig / wavelen - low) / (high - low);
  return (1.0 - smooth) * inv_freq / s->rope_factor + smooth * inv_freq;
}

void ref_rope_inv_freq(const ref_model_spec *spec, double *out) {
  int head_dim = ref_head_dim(spec);
  for (int j = 0; j < head_dim / 2; j++) {
    double inv_freq = pow(spec->rope_theta, -(2.0 * j) / head_dim);
    out[j] = spec->rope_llama3 ? llama3_adjust(spec, inv_freq) : inv_freq;
  }
}

/* NeoX rotation (transformers' rotate_half): element j pairs with
 * j + head_dim/2 and both turn by the angle of frequency j. */
static void rope_rotate(double *x, int head_dim, const double *cos_t, const double *sin_t) {
  int half = head_dim / 2;
  for (int j = 0; j < half; j++) {
    double a = x[j], b = x[j + half];
    x[j] = a * cos_t[j] - b * sin_t[j];
    x[j + half] = b * cos_t[j] + a * sin_t[j];
  }
}

/* ------------------------------------------------------------ forward */

/* The running state of one sequence: the KV cache of every layer and the
 * per-token scratch vectors. */
typedef struct fwd_state {
  const ref_model *m;
  int capacity, len;
  int64_t q_dim, kv_dim;
  double *k_cache, *v_cache; /* [layers][capacity][kv_dim] */
  double *x, *h, *q, *k, *v, *att, *gate, *up, *scores, *inv_freq, *cos_t, *sin_t;
  double *block; /* everything above lives in this one allocation */
} fwd_state;

static double *take(double **cursor, int64_t n) {
  double *p = *cursor;
  *cursor += n;
  return p;
}

static int state_init(fwd_state *st, const ref_model *m, int capacity) {
  const ref_model_spec *s = &m->spec;
  int half = m->head_dim / 2;
  st->m = m;
  st->capacity = capacity;
  st->len = 0;
  st->q_dim = (int64_t)s->heads * m->head_dim;
  st->kv_dim = (int64_t)s->kv_heads * m->head_dim;
  int64_t cache = (int64_t)s->layers * capacity * st->kv_dim;
  int64_t total = 2 * cache + 2 * s->hidden + 2 * st->q_dim + 2 * st->kv_dim +
                  2 * s->intermediate + capacity + 3 * half;
  st->block = malloc(sizeof(double) * (size_t)total);
  if (!st->block) return -1;
  double *c = st->block;
  st->k_cache = take(&c, cache);
  st->v_cache = take(&c, cache);
  st->x = take(&c, s->hidden);
  st->h = take(&c, s->hidden);
  st->q = take(&c, st->q_dim);
  st->att = take(&c, st->q_dim);
  st->k = take(&c, st->kv_dim);
  st->v = take(&c, st->kv_dim);
  st->gate = take(&c, s->intermediate);
  st->up = take(&c, s->intermediate);
  st->scores = take(&c, capacity);
  st->inv_freq = take(&c, half);
  st->cos_t = take(&c, half);
  st->sin_t = take(&c, half);
  ref_rope_inv_freq(s, st->inv_freq);
  return 0;
}

static void state_free(fwd_state *st) { free(st->block); }

/* y = W x (+ b): a Linear layer, W [rows, cols] as transformers stores it
 * (y = x W^T for a row vector x). */
static void linear(const float *w, const float *b, int64_t rows, int64_t cols, const double *x,
                   double *y) {
  for (int64_t r = 0; r < rows; r++) {
    const float *row = w + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; c++) sum += (double)row[c] * x[c];
    y[r] = b ? sum + b[r] : sum;
  }
}

/* out = x / sqrt(mean(x^2) + eps) * w; out may be x. */
static void rmsnorm(const double *x, const float *w, int64_t n, double eps, double *out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; i++) sum += x[i] * x[i];
  double inv = 1.0 / sqrt(sum / (double)n + eps);
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* q, k and v of the current token; q and k normed per head (qwen3) and
 * rotated, k and v stored in the cache at this position. */
static void project_qkv(fwd_state *st, const ref_layer *l, int layer) {
  const ref_model *m = st->m;
  const ref_model_spec *s = &m->spec;
  int hd = m->head_dim;
  linear(l->q, l->q_bias, st->q_dim, s->hidden, st->h, st->q);
  linear(l->k, l->k_bias, st->kv_dim, s->hidden, st->h, st->k);
  linear(l->v, l->v_bias, st->kv_dim, s->hidden, st->h, st->v);
  for (int h = 0; h < s->heads; h++) {
    if (l->q_norm) rmsnorm(st->q + h * hd, l->q_norm, hd, s->rms_eps, st->q + h * hd);
    rope_rotate(st->q + h * hd, hd, st->cos_t, st->sin_t);
  }
  for (int h = 0; h < s->kv_heads; h++) {
    if (l->k_norm) rmsnorm(st->k + h * hd, l->k_norm, hd, s->rms_eps, st->k + h * hd);
    rope_rotate(st->k + h * hd, hd, st->cos_t, st->sin_t);
  }
  int64_t at = ((int64_t)layer * st->capacity + st->len) * st->kv_dim;
  memcpy(st->k_cache + at, st->k, sizeof(double) * (size_t)st->kv_dim);
  memcpy(st->v_cache + at, st->v, sizeof(double) * (size_t)st->kv_dim);
}

/* One query head over the cached positions first..len: softmax(q k / sqrt(d)) v. */
static void attend_head(fwd_state *st, int layer, int head, int first, double *out) {
  const ref_model_spec *s = &st->m->spec;
  int hd = st->m->head_dim, kv_head = head / (s->heads / s->kv_heads);
  const double *q = st->q + head * hd;
  const double *keys = st->k_cache + (int64_t)layer * st->capacity * st->kv_dim + kv_head * hd;
  const double *values = st->v_cache + (int64_t)layer * st->capacity * st->kv_dim + kv_head * hd;
  double scale = 1.0 / sqrt((double)hd), max = -INFINITY, sum = 0.0;
  for (int j = first; j <= st->len; j++) {
    double dot = 0.0;
    for (int d = 0; d < hd; d++) dot += q[d] * keys[j * st->kv_dim + d];
    st->scores[j] = dot * scale;
    if (st->scores[j] > max) max = st->scores[j];
  }
  for (int j = first; j <= st->len; j++) sum += st->scores[j] = exp(st->scores[j] - max);
  for (int d = 0; d < hd; d++) out[d] = 0.0;
  for (int j = first; j <= st->len; j++)
    for (int d = 0; d < hd; d++) out[d] += st->scores[j] / sum * values[j * st->kv_dim + d];
}

/* x += o_proj(attention(input_layernorm(x))). */
static void attention_block(fwd_state *st, const ref_layer *l, int layer) {
  const ref_model_spec *s = &st->m->spec;
  rmsnorm(st->x, l->input_norm, s->hidden, s->rms_eps, st->h);
  project_qkv(st, l, layer);
  /* Mistral's window: key j is seen from position i when i - j < window. */
  int first = s->sliding_window && st->len >= s->sliding_window
                  ? st->len - s->sliding_window + 1
                  : 0;
  for (int h = 0; h < s->heads; h++) attend_head(st, layer, h, first, st->att + h * st->m->head_dim);
  linear(l->o, l->o_bias, s->hidden, st->q_dim, st->att, st->h);
  for (int i = 0; i < s->hidden; i++) st->x[i] += st->h[i];
}

/* x += down(silu(gate(h)) * up(h)), h = post_attention_layernorm(x). */
static void mlp_block(fwd_state *st, const ref_layer *l) {
  const ref_model_spec *s = &st->m->spec;
  rmsnorm(st->x, l->post_norm, s->hidden, s->rms_eps, st->h);
  linear(l->gate, NULL, s->intermediate, s->hidden, st->h, st->gate);
  linear(l->up, NULL, s->intermediate, s->hidden, st->h, st->up);
  for (int i = 0; i < s->intermediate; i++) st->gate[i] = silu(st->gate[i]) * st->up[i];
  linear(l->down, NULL, s->hidden, s->intermediate, st->gate, st->h);
  for (int i = 0; i < s->hidden; i++) st->x[i] += st->h[i];
}

/* Feeds `token` at position st->len; logits [vocab] get its logits. */
static void state_step(fwd_state *st, int32_t token, double *logits) {
  const ref_model *m = st->m;
  const ref_model_spec *s = &m->spec;
  for (int i = 0; i < s->hidden; i++) st->x[i] = m->embed[(int64_t)token * s->hidden + i];
  for (int j = 0; j < m->head_dim / 2; j++) {
    st->cos_t[j] = cos(st->len * st->inv_freq[j]);
    st->sin_t[j] = sin(st->len * st->inv_freq[j]);
  }
  for (int layer = 0; layer < s->layers; layer++) {
    attention_block(st, &m->layers[layer], layer);
    mlp_block(st, &m->layers[layer]);
  }
  rmsnorm(st->x, m->final_norm, s->hidden, s->rms_eps, st->h);
  linear(m->lm_head, NULL, s->vocab, s->hidden, st->h, logits);
  st->len++;
}

static int tokens_valid(const ref_model *m, const int32_t *tokens, int n) {
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= m->spec.vocab) return 0;
  return 1;
}

int ref_model_logits(const ref_model *m, const int32_t *tokens, int n, double *out_logits) {
  fwd_state st;
  if (n < 1 || !tokens_valid(m, tokens, n) || state_init(&st, m, n)) return -1;
  for (int i = 0; i < n; i++) state_step(&st, tokens[i], out_logits + (int64_t)i * m->spec.vocab);
  state_free(&st);
  return 0;
}

int ref_model_greedy(const ref_model *m, const int32_t *prompt, int n_prompt, int n_new,
                     int32_t *out_tokens, double *gaps) {
  if (n_prompt < 1 || n_new < 1 || !tokens_valid(m, prompt, n_prompt)) return -1;
  double *row = malloc(sizeof(double) * (size_t)m->spec.vocab);
  fwd_state st;
  if (!row || state_init(&st, m, n_prompt + n_new)) {
    free(row);
    return -1;
  }
  for (int i = 0; i < n_prompt; i++) state_step(&st, prompt[i], row);
  for (int i = 0; i < n_new; i++) {
    out_tokens[i] = ref_argmax(row, m->spec.vocab);
    if (gaps) gaps[i] = ref_top2_gap(row, m->spec.vocab);
    if (i + 1 < n_new) state_step(&st, out_tokens[i], row);
  }
  state_free(&st);
  free(row);
  return 0;
}

/* ------------------------------------------------------------- greedy */

int ref_argmax(const double *row, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; i++)
    if (row[i] > row[best]) best = i;
  return best;
}

double ref_top2_gap(const double *row, int vocab) {
  int best = ref_argmax(row, vocab);
  double second = -INFINITY;
  for (int i = 0; i < vocab; i++)
    if (i != best && row[i] > second) second = row[i];
  return row[best] - second;
}
