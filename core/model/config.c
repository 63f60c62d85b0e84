/*
 * config.c - a Hugging Face config.json (transformers 4.x and 5.x spellings)
 * and the built-in synthetic shapes, read into a model_config.
 *
 * JSON is parsed by libjansson. Every key the forward depends on is checked
 * here, so that a config the generator cannot run fails at load with the key
 * named, not later with a shape error.
 */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "model_internal.h"

typedef struct config_reader {
  const json_t *root;
  const char *origin;
} config_reader;

/* An optional non-negative integer; `out` keeps its default when absent or null. */
static gllmk_status get_uint(const config_reader *r, const json_t *object, const char *key,
                             bool required, uint32_t *out) {
  const json_t *value = json_object_get(object, key);
  if (value == NULL || json_is_null(value)) {
    if (required)
      return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: \"%s\" is missing", r->origin, key);
    return GLLMK_OK;
  }
  if (!json_is_integer(value) || json_integer_value(value) < 0 ||
      json_integer_value(value) > (json_int_t)(1u << 30))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: \"%s\" must be an integer in [0, 2^30]", r->origin, key);
  *out = (uint32_t)json_integer_value(value);
  return GLLMK_OK;
}

static gllmk_status get_number(const config_reader *r, const json_t *object, const char *key,
                               double *out) {
  const json_t *value = json_object_get(object, key);
  if (value == NULL || json_is_null(value)) return GLLMK_OK;
  if (!json_is_number(value) || !isfinite(json_number_value(value)))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: \"%s\" must be a number", r->origin, key);
  *out = json_number_value(value);
  return GLLMK_OK;
}

static gllmk_status get_bool(const config_reader *r, const json_t *object, const char *key,
                             bool *out) {
  const json_t *value = json_object_get(object, key);
  if (value == NULL || json_is_null(value)) return GLLMK_OK;
  if (!json_is_boolean(value))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: \"%s\" must be true or false", r->origin,
                      key);
  *out = json_is_true(value);
  return GLLMK_OK;
}

/* NULL when absent or not a string. */
static const char *get_string(const json_t *object, const char *key) {
  return json_string_value(json_object_get(object, key));
}

static gllmk_status read_arch(const config_reader *r, model_config *c) {
  static const struct {
    const char *model_type, *architecture;
    gllmk_model_arch arch;
  } known[] = {
      {"llama", "LlamaForCausalLM", GLLMK_ARCH_LLAMA},
      {"mistral", "MistralForCausalLM", GLLMK_ARCH_LLAMA},
      {"qwen2", "Qwen2ForCausalLM", GLLMK_ARCH_QWEN2},
      {"qwen3", "Qwen3ForCausalLM", GLLMK_ARCH_QWEN3},
  };
  const char *model_type = get_string(r->root, "model_type");
  const char *architecture = json_string_value(json_array_get(json_object_get(r->root, "architectures"), 0));
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    bool match = model_type ? strcmp(model_type, known[i].model_type) == 0
                            : architecture && strcmp(architecture, known[i].architecture) == 0;
    if (!match) continue;
    c->arch = known[i].arch;
    snprintf(c->model_type, sizeof c->model_type, "%s", known[i].model_type);
    return GLLMK_OK;
  }
  return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED,
                    "%s: model_type \"%s\" (architecture \"%s\") is not supported: the generator "
                    "runs llama, mistral, qwen2 and qwen3",
                    r->origin, model_type ? model_type : "(none)",
                    architecture ? architecture : "(none)");
}

static gllmk_status read_dtype(const config_reader *r, model_config *c) {
  const char *name = get_string(r->root, "dtype");
  if (name == NULL) name = get_string(r->root, "torch_dtype");
  c->dtype = -1;
  if (name == NULL) return GLLMK_OK;
  static const struct { const char *name; gllmk_dtype dtype; } names[] = {
      {"float32", GLLMK_F32}, {"float16", GLLMK_F16}, {"bfloat16", GLLMK_BF16}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(name, names[i].name) == 0) c->dtype = names[i].dtype;
  if (c->dtype < 0)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "%s: dtype \"%s\" is not float32, float16 or bfloat16",
                      r->origin, name);
  return GLLMK_OK;
}

/* rope_theta and rope_scaling (4.x), or rope_parameters (5.x). */
static gllmk_status read_rope(const config_reader *r, model_config *c) {
  const json_t *params = json_object_get(r->root, "rope_parameters");
  const json_t *scaling = json_is_object(params) ? params : json_object_get(r->root, "rope_scaling");
  c->rope_theta = 10000.0;
  MODEL_TRY(get_number(r, r->root, "rope_theta", &c->rope_theta));
  if (json_is_object(params)) MODEL_TRY(get_number(r, params, "rope_theta", &c->rope_theta));
  /* Bounded so that every pair's frequency is a normal float. */
  if (!(c->rope_theta > 1.0 && c->rope_theta <= 1e10))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: rope_theta=%g is not in (1, 1e10]",
                      r->origin, c->rope_theta);
  c->rope_scaling = ROPE_SCALING_NONE;
  if (!json_is_object(scaling)) return GLLMK_OK;
  const char *type = get_string(scaling, "rope_type");
  if (type == NULL) type = get_string(scaling, "type");
  if (type == NULL || strcmp(type, "default") == 0) return GLLMK_OK;
  c->rope_factor = 1.0;
  MODEL_TRY(get_number(r, scaling, "factor", &c->rope_factor));
  if (!(c->rope_factor >= 1e-4 && c->rope_factor <= 1e4))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: rope factor=%g is not in [1e-4, 1e4]",
                      r->origin, c->rope_factor);
  if (strcmp(type, "linear") == 0) {
    c->rope_scaling = ROPE_SCALING_LINEAR;
    return GLLMK_OK;
  }
  if (strcmp(type, "llama3") != 0)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED,
                      "%s: rope scaling \"%s\" is not supported (default, linear, llama3)",
                      r->origin, type);
  c->rope_scaling = ROPE_SCALING_LLAMA3;
  c->rope_low_freq_factor = 1.0;
  c->rope_high_freq_factor = 4.0;
  c->rope_original_max_position = 8192.0;
  MODEL_TRY(get_number(r, scaling, "low_freq_factor", &c->rope_low_freq_factor));
  MODEL_TRY(get_number(r, scaling, "high_freq_factor", &c->rope_high_freq_factor));
  MODEL_TRY(get_number(r, scaling, "original_max_position_embeddings",
                       &c->rope_original_max_position));
  if (!(c->rope_high_freq_factor > c->rope_low_freq_factor && c->rope_low_freq_factor > 0 &&
        c->rope_original_max_position > 0))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: llama3 rope scaling needs high_freq_factor > low_freq_factor > 0 and "
                      "original_max_position_embeddings > 0",
                      r->origin);
  return GLLMK_OK;
}

static gllmk_status read_shape(const config_reader *r, model_config *c) {
  const json_t *root = r->root;
  MODEL_TRY(get_uint(r, root, "hidden_size", true, &c->hidden));
  MODEL_TRY(get_uint(r, root, "intermediate_size", true, &c->intermediate));
  MODEL_TRY(get_uint(r, root, "num_hidden_layers", true, &c->layers));
  MODEL_TRY(get_uint(r, root, "num_attention_heads", true, &c->heads));
  MODEL_TRY(get_uint(r, root, "vocab_size", true, &c->vocab));
  MODEL_TRY(get_uint(r, root, "max_position_embeddings", true, &c->max_position));
  c->kv_heads = c->heads;
  MODEL_TRY(get_uint(r, root, "num_key_value_heads", false, &c->kv_heads));
  c->head_dim = c->heads ? c->hidden / c->heads : 0;
  MODEL_TRY(get_uint(r, root, "head_dim", false, &c->head_dim));
  c->rms_eps = 1e-6;
  MODEL_TRY(get_number(r, root, "rms_norm_eps", &c->rms_eps));
  MODEL_TRY(get_bool(r, root, "tie_word_embeddings", &c->tied_embeddings));
  double partial = 1.0;
  MODEL_TRY(get_number(r, root, "partial_rotary_factor", &partial));
  if (!(partial > 0 && partial <= 1))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: partial_rotary_factor=%g is not in (0, 1]",
                      r->origin, partial);
  c->rotary_dim = (uint32_t)(c->head_dim * partial) & ~1u;
  /* Mistral (and Qwen2 when enabled) limit attention to a window; the
   * generator has no windowed attention, so sequences stop there. */
  uint32_t window = 0;
  bool use_window = true;
  MODEL_TRY(get_bool(r, root, "use_sliding_window", &use_window));
  MODEL_TRY(get_uint(r, root, "sliding_window", false, &window));
  if (use_window && window > 0 && window < c->max_position) c->max_position = window;
  return GLLMK_OK;
}

static gllmk_status read_features(const config_reader *r, model_config *c) {
  bool attention_bias = false, mlp_bias = false;
  MODEL_TRY(get_bool(r, r->root, "attention_bias", &attention_bias));
  MODEL_TRY(get_bool(r, r->root, "mlp_bias", &mlp_bias));
  c->qkv_bias = c->arch == GLLMK_ARCH_QWEN2 || attention_bias;
  c->o_bias = c->arch != GLLMK_ARCH_QWEN2 && attention_bias;
  c->mlp_bias = mlp_bias;
  c->qk_norm = c->arch == GLLMK_ARCH_QWEN3;
  const char *act = get_string(r->root, "hidden_act");
  if (act && strcmp(act, "silu") != 0)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "%s: hidden_act \"%s\" is not supported (silu)",
                      r->origin, act);
  return GLLMK_OK;
}

/* Limits of the ops the forward uses, and sizes that keep every product in 64 bits. */
static gllmk_status check_config(const char *origin, const model_config *c) {
  const struct { const char *key; uint32_t value; } positive[] = {
      {"hidden_size", c->hidden},   {"intermediate_size", c->intermediate},
      {"num_hidden_layers", c->layers}, {"num_attention_heads", c->heads},
      {"num_key_value_heads", c->kv_heads}, {"head_dim", c->head_dim},
      {"vocab_size", c->vocab}, {"max_position_embeddings", c->max_position}};
  for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
    if (positive[i].value == 0)
      return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: \"%s\" must be > 0", origin,
                        positive[i].key);
  if (c->heads % c->kv_heads != 0)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "%s: num_attention_heads=%u is not a multiple of num_key_value_heads=%u",
                      origin, c->heads, c->kv_heads);
  if (c->head_dim % 8 != 0 || c->head_dim > 256)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED,
                      "%s: head_dim=%u is not supported (a multiple of 8, at most 256)", origin,
                      c->head_dim);
  if (c->rotary_dim < 2)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: the rotary dimension is %u", origin,
                      c->rotary_dim);
  if (!(c->rms_eps > 0))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: rms_norm_eps must be > 0", origin);
  if ((uint64_t)c->heads * c->head_dim > (1u << 20) || c->layers > 4096)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "%s: %u heads of %u and %u layers are too many",
                      origin, c->heads, c->head_dim, c->layers);
  return GLLMK_OK;
}

gllmk_status model_config_parse(const char *text, size_t length, const char *origin,
                                model_config *out_config) {
  json_error_t error;
  json_t *root = json_loadb(text, length, JSON_REJECT_DUPLICATES, &error);
  if (root == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", origin, error.line,
                      error.column, error.text);
  model_config c;
  memset(&c, 0, sizeof c);
  config_reader r = {root, origin};
  gllmk_status status = json_is_object(root)
      ? GLLMK_OK
      : MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: not a JSON object", origin);
  if (status == GLLMK_OK) status = read_arch(&r, &c);
  if (status == GLLMK_OK) status = read_dtype(&r, &c);
  if (status == GLLMK_OK) status = read_shape(&r, &c);
  if (status == GLLMK_OK) status = read_rope(&r, &c);
  if (status == GLLMK_OK) status = read_features(&r, &c);
  if (status == GLLMK_OK) status = check_config(origin, &c);
  json_decref(root);
  if (status == GLLMK_OK) *out_config = c;
  return status;
}

/* ------------------------------------------------------------ synthetic */

static model_config llama_shape(uint32_t hidden, uint32_t intermediate, uint32_t layers,
                                uint32_t heads, uint32_t kv_heads, uint32_t vocab) {
  model_config c;
  memset(&c, 0, sizeof c);
  c.arch = GLLMK_ARCH_LLAMA;
  snprintf(c.model_type, sizeof c.model_type, "llama");
  c.hidden = hidden;
  c.intermediate = intermediate;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.rotary_dim = c.head_dim;
  c.vocab = vocab;
  c.max_position = 8192;
  c.rope_theta = 500000.0;
  c.rms_eps = 1e-5;
  c.dtype = GLLMK_BF16;
  return c;
}

gllmk_status model_config_synthetic(const char *name, model_config *out_config) {
  model_config c;
  if (strcmp(name, "tiny") == 0) {
    c = llama_shape(256, 512, 4, 8, 2, 1024);
    c.max_position = 2048;
  } else if (strcmp(name, "llama3-8b") == 0) {
    c = llama_shape(4096, 14336, 32, 32, 8, 128256);
  } else if (strcmp(name, "llama3.2-1b") == 0) {
    c = llama_shape(2048, 8192, 16, 32, 8, 128256);
    c.tied_embeddings = true;
    c.max_position = 131072;
    c.rope_scaling = ROPE_SCALING_LLAMA3;
    c.rope_factor = 32.0;
    c.rope_low_freq_factor = 1.0;
    c.rope_high_freq_factor = 4.0;
    c.rope_original_max_position = 8192.0;
  } else if (strcmp(name, "qwen2.5-7b") == 0) {
    c = llama_shape(3584, 18944, 28, 28, 4, 152064);
    c.arch = GLLMK_ARCH_QWEN2;
    snprintf(c.model_type, sizeof c.model_type, "qwen2");
    c.qkv_bias = true;
    c.max_position = 32768;
    c.rope_theta = 1000000.0;
    c.rms_eps = 1e-6;
  } else {
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "synthetic model \"%s\" is not one of tiny, llama3.2-1b, llama3-8b, "
                      "qwen2.5-7b",
                      name);
  }
  *out_config = c;
  return GLLMK_OK;
}

/* ------------------------------------------------------------------ rope */

/* transformers' default and linear inv_freq, then Llama 3.1's adjustment:
 * long wavelengths are slowed by `factor`, short ones kept, and those in
 * between blended. */
void model_config_inv_freq(const model_config *c, float *out_inv_freq) {
  const double pi = 3.14159265358979323846;
  uint32_t half = c->rotary_dim / 2;
  for (uint32_t j = 0; j < half; j++) {
    double inv = pow(c->rope_theta, -(double)(2 * j) / (double)c->rotary_dim);
    if (c->rope_scaling == ROPE_SCALING_LINEAR) inv /= c->rope_factor;
    if (c->rope_scaling == ROPE_SCALING_LLAMA3) {
      double wavelen = 2 * pi / inv;
      double low_wavelen = c->rope_original_max_position / c->rope_low_freq_factor;
      double high_wavelen = c->rope_original_max_position / c->rope_high_freq_factor;
      if (wavelen > low_wavelen) {
        inv /= c->rope_factor;
      } else if (wavelen >= high_wavelen) {
        double smooth = (c->rope_original_max_position / wavelen - c->rope_low_freq_factor) /
                        (c->rope_high_freq_factor - c->rope_low_freq_factor);
        inv = (1 - smooth) * inv / c->rope_factor + smooth * inv;
      }
    }
    out_inv_freq[j] = (float)inv;
  }
}
