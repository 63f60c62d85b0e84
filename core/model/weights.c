/*
 * weights.c - the model's tensors on the device: allocation, upload from a
 * checkpoint (streamed from the mmap'd files, converted on the device), and
 * synthetic random weights made on the device.
 *
 * Each tensor has its own buffer: some backends cap one buffer's size (a
 * Vulkan storage buffer is often limited to 4 GiB) and an 8B model's largest
 * tensor is 1 GiB. q/k/v and gate/up are fused into one matrix each, so
 * that a layer runs one matmul for them; their rows are filled from the
 * checkpoint's separate tensors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* Staging for dtype conversion: rows go through it in chunks this large. */
#define STAGING_BYTES (64u << 20)

gllmk_status buffer_list_tensor(buffer_list *list, gllmk_context *context, int32_t dtype,
                                int32_t ndim, const int64_t *shape, gllmk_tensor *out_tensor) {
  uint64_t bytes = gllmk_dtype_size((gllmk_dtype)dtype);
  for (int32_t i = 0; i < ndim; i++) bytes *= (uint64_t)shape[i];
  if (list->count == list->capacity) {
    uint32_t capacity = list->capacity ? 2 * list->capacity : 64;
    gllmk_buffer **grown = realloc(list->items, capacity * sizeof *grown);
    if (grown == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "out of host memory");
    list->items = grown;
    list->capacity = capacity;
  }
  gllmk_buffer *buffer;
  MODEL_TRY(gllmk_buffer_alloc(context, bytes, &buffer));
  list->items[list->count++] = buffer;
  return gllmk_tensor_make(buffer, 0, (gllmk_dtype)dtype, ndim, shape, out_tensor);
}

void buffer_list_free(buffer_list *list) {
  for (uint32_t i = 0; i < list->count; i++) gllmk_buffer_free(list->items[i]);
  free(list->items);
  memset(list, 0, sizeof *list);
}

/* A weight tensor, counted in the model's bytes. */
static gllmk_status alloc_weight(model_state *m, int32_t dtype, int32_t ndim, const int64_t *shape,
                                 gllmk_tensor *out) {
  MODEL_TRY(buffer_list_tensor(&m->buffers, m->context, dtype, ndim, shape, out));
  m->weight_bytes += gllmk_tensor_extent_bytes(out);
  return GLLMK_OK;
}

static gllmk_status alloc_matrix(model_state *m, int64_t rows, int64_t cols, gllmk_tensor *out) {
  const int64_t shape[2] = {rows, cols};
  return alloc_weight(m, m->dtype, 2, shape, out);
}

static gllmk_status alloc_vector(model_state *m, int64_t length, gllmk_tensor *out) {
  return alloc_weight(m, m->dtype, 1, &length, out);
}

static gllmk_status alloc_layer(model_state *m, layer_weights *l) {
  const model_config *c = &m->config;
  int64_t h = c->hidden, d = c->head_dim, inter = c->intermediate;
  int64_t q_rows = (int64_t)c->heads * d, qkv_rows = q_rows + 2 * (int64_t)c->kv_heads * d;
  MODEL_TRY(alloc_vector(m, h, &l->input_norm));
  MODEL_TRY(alloc_vector(m, h, &l->post_norm));
  MODEL_TRY(alloc_matrix(m, qkv_rows, h, &l->qkv));
  MODEL_TRY(alloc_matrix(m, h, q_rows, &l->o));
  MODEL_TRY(alloc_matrix(m, 2 * inter, h, &l->gate_up));
  MODEL_TRY(alloc_matrix(m, h, inter, &l->down));
  l->has_qkv_bias = c->qkv_bias;
  l->has_o_bias = c->o_bias;
  l->has_mlp_bias = c->mlp_bias;
  if (c->qkv_bias) MODEL_TRY(alloc_vector(m, qkv_rows, &l->qkv_bias));
  if (c->o_bias) MODEL_TRY(alloc_vector(m, h, &l->o_bias));
  if (c->mlp_bias) {
    MODEL_TRY(alloc_vector(m, 2 * inter, &l->gate_up_bias));
    MODEL_TRY(alloc_vector(m, h, &l->down_bias));
  }
  if (c->qk_norm) {
    MODEL_TRY(alloc_vector(m, d, &l->q_norm));
    MODEL_TRY(alloc_vector(m, d, &l->k_norm));
  }
  return GLLMK_OK;
}

gllmk_status model_alloc_weights(model_state *m) {
  const model_config *c = &m->config;
  m->layers = calloc(c->layers, sizeof *m->layers);
  if (m->layers == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  MODEL_TRY(alloc_matrix(m, c->vocab, c->hidden, &m->embed));
  MODEL_TRY(alloc_vector(m, c->hidden, &m->final_norm));
  if (c->tied_embeddings)
    m->lm_head = m->embed;
  else
    MODEL_TRY(alloc_matrix(m, c->vocab, c->hidden, &m->lm_head));
  for (uint32_t i = 0; i < c->layers; i++) MODEL_TRY(alloc_layer(m, &m->layers[i]));
  int64_t half = c->rotary_dim / 2;
  MODEL_TRY(alloc_weight(m, GLLMK_F32, 1, &half, &m->inv_freq));
  float *inv_freq = malloc((size_t)half * sizeof *inv_freq);
  if (inv_freq == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  model_config_inv_freq(c, inv_freq);
  gllmk_status status = gllmk_buffer_write(m->inv_freq.buffer, 0, inv_freq, (uint64_t)half * 4);
  free(inv_freq);
  return status;
}

/* ------------------------------------------------------------ checkpoint */

typedef struct uploader {
  model_state *model;
  const st_model *files;
  const gllmk_model_load_options *options;
  gllmk_buffer *staging; /* created on the first conversion */
  uint64_t done, total;
} uploader;

/* `rows` rows of `t` starting at row `first` (a vector is one row per element). */
static gllmk_status rows_of(const gllmk_tensor *t, int64_t first, int64_t rows, gllmk_tensor *out) {
  return gllmk_tensor_slice(t, 0, first, rows, 1, out);
}

static void report(uploader *u, uint64_t bytes) {
  u->done += bytes;
  if (u->options && u->options->progress)
    u->options->progress(u->options->progress_data, u->done, u->total);
}

/* Rows of a file tensor in another dtype: staged in chunks, cast on the device. */
static gllmk_status upload_converted(uploader *u, const st_tensor *src, const gllmk_tensor *dst) {
  int64_t row_elems = dst->ndim == 2 ? dst->shape[1] : 1, rows = dst->shape[0];
  uint64_t src_row_bytes = (uint64_t)row_elems * gllmk_dtype_size((gllmk_dtype)src->dtype);
  if (u->staging == NULL) MODEL_TRY(gllmk_buffer_alloc(u->model->context, STAGING_BYTES, &u->staging));
  int64_t chunk = (int64_t)(STAGING_BYTES / src_row_bytes);
  if (chunk < 1)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "%s: tensor \"%s\" has rows over %u bytes", src->file,
                      src->name, STAGING_BYTES);
  for (int64_t first = 0; first < rows; first += chunk) {
    int64_t n = rows - first < chunk ? rows - first : chunk;
    const int64_t shape[2] = {n, row_elems};
    gllmk_tensor staged, out;
    MODEL_TRY(gllmk_buffer_write(u->staging, 0, src->data + (uint64_t)first * src_row_bytes,
                                 (uint64_t)n * src_row_bytes));
    MODEL_TRY(gllmk_tensor_make(u->staging, 0, (gllmk_dtype)src->dtype, dst->ndim, shape, &staged));
    MODEL_TRY(rows_of(dst, first, n, &out));
    MODEL_TRY(gllmk_copy(u->model->context, &(gllmk_copy_args){.out = &out, .src = &staged}));
    report(u, (uint64_t)n * src_row_bytes);
  }
  return GLLMK_OK;
}

/* Same dtype: straight from the mapping into the tensor, in chunks for the
 * progress callback. */
static gllmk_status upload_direct(uploader *u, const st_tensor *src, const gllmk_tensor *dst) {
  for (uint64_t done = 0; done < src->bytes; done += STAGING_BYTES) {
    uint64_t n = src->bytes - done < STAGING_BYTES ? src->bytes - done : STAGING_BYTES;
    MODEL_TRY(gllmk_buffer_write(dst->buffer, dst->offset + done, src->data + done, n));
    report(u, n);
  }
  return GLLMK_OK;
}

static gllmk_status shape_error(const st_tensor *t, const gllmk_tensor *dst) {
  char want[64], have[64];
  int w = 0, h = 0;
  for (int32_t i = 0; i < dst->ndim; i++)
    w += snprintf(want + w, sizeof want - (size_t)w, "%s%lld", i ? ", " : "", (long long)dst->shape[i]);
  for (int32_t i = 0; i < t->ndim && h < (int)sizeof have - 24; i++)
    h += snprintf(have + h, sizeof have - (size_t)h, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (t->ndim == 0) snprintf(have, sizeof have, "a scalar");
  return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" has shape [%s], the config needs [%s]",
                    t->file, t->name, have, want);
}

/* The checkpoint tensor `name` into `dst` (a tensor or a row range of one). */
static gllmk_status upload(uploader *u, const char *name, const gllmk_tensor *dst) {
  const st_tensor *src = st_model_find(u->files, name);
  if (src == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" is missing from the checkpoint",
                      u->options->path, name);
  bool same = src->ndim == dst->ndim;
  for (int32_t i = 0; same && i < dst->ndim; i++) same = src->shape[i] == dst->shape[i];
  if (!same) return shape_error(src, dst);
  if (src->dtype == dst->dtype) return upload_direct(u, src, dst);
  return upload_converted(u, src, dst);
}

/* `name` into rows [first, first + rows) of `fused`. */
static gllmk_status upload_rows(uploader *u, const char *name, const gllmk_tensor *fused,
                                int64_t first, int64_t rows) {
  gllmk_tensor part;
  MODEL_TRY(rows_of(fused, first, rows, &part));
  return upload(u, name, &part);
}

static gllmk_status upload_fused_qkv(uploader *u, const char *prefix, const gllmk_tensor *dst,
                                     const char *suffix) {
  const model_config *c = &u->model->config;
  int64_t q = (int64_t)c->heads * c->head_dim, kv = (int64_t)c->kv_heads * c->head_dim;
  const char *const parts[] = {"q_proj", "k_proj", "v_proj"};
  const int64_t first[] = {0, q, q + kv}, rows[] = {q, kv, kv};
  char name[256];
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "%s.self_attn.%s.%s", prefix, parts[i], suffix);
    MODEL_TRY(upload_rows(u, name, dst, first[i], rows[i]));
  }
  return GLLMK_OK;
}

static gllmk_status upload_fused_gate_up(uploader *u, const char *prefix, const gllmk_tensor *dst,
                                         const char *suffix) {
  int64_t inter = u->model->config.intermediate;
  char name[256];
  snprintf(name, sizeof name, "%s.mlp.gate_proj.%s", prefix, suffix);
  MODEL_TRY(upload_rows(u, name, dst, 0, inter));
  snprintf(name, sizeof name, "%s.mlp.up_proj.%s", prefix, suffix);
  return upload_rows(u, name, dst, inter, inter);
}

static gllmk_status upload_named(uploader *u, const char *prefix, const char *leaf,
                                 const gllmk_tensor *dst) {
  char name[256];
  snprintf(name, sizeof name, "%s.%s", prefix, leaf);
  return upload(u, name, dst);
}

static gllmk_status upload_layer(uploader *u, uint32_t index) {
  const layer_weights *l = &u->model->layers[index];
  char prefix[64];
  snprintf(prefix, sizeof prefix, "model.layers.%u", index);
  MODEL_TRY(upload_named(u, prefix, "input_layernorm.weight", &l->input_norm));
  MODEL_TRY(upload_named(u, prefix, "post_attention_layernorm.weight", &l->post_norm));
  MODEL_TRY(upload_fused_qkv(u, prefix, &l->qkv, "weight"));
  if (l->has_qkv_bias) MODEL_TRY(upload_fused_qkv(u, prefix, &l->qkv_bias, "bias"));
  MODEL_TRY(upload_named(u, prefix, "self_attn.o_proj.weight", &l->o));
  if (l->has_o_bias) MODEL_TRY(upload_named(u, prefix, "self_attn.o_proj.bias", &l->o_bias));
  if (u->model->config.qk_norm) {
    MODEL_TRY(upload_named(u, prefix, "self_attn.q_norm.weight", &l->q_norm));
    MODEL_TRY(upload_named(u, prefix, "self_attn.k_norm.weight", &l->k_norm));
  }
  MODEL_TRY(upload_fused_gate_up(u, prefix, &l->gate_up, "weight"));
  MODEL_TRY(upload_named(u, prefix, "mlp.down_proj.weight", &l->down));
  if (l->has_mlp_bias) {
    MODEL_TRY(upload_fused_gate_up(u, prefix, &l->gate_up_bias, "bias"));
    MODEL_TRY(upload_named(u, prefix, "mlp.down_proj.bias", &l->down_bias));
  }
  return GLLMK_OK;
}

/* Bytes the upload reads from the files, for the progress callback. */
static uint64_t checkpoint_bytes(const model_state *m, const st_model *files) {
  uint64_t total = 0;
  for (uint32_t f = 0; f < files->file_count; f++)
    for (uint32_t i = 0; i < files->files[f].count; i++) {
      const st_tensor *t = &files->files[f].tensors[i];
      bool skipped = m->config.tied_embeddings && strcmp(t->name, "lm_head.weight") == 0;
      if (!skipped) total += t->bytes;
    }
  return total;
}

static gllmk_status upload_all(uploader *u) {
  model_state *m = u->model;
  MODEL_TRY(upload(u, "model.embed_tokens.weight", &m->embed));
  for (uint32_t i = 0; i < m->config.layers; i++) MODEL_TRY(upload_layer(u, i));
  MODEL_TRY(upload(u, "model.norm.weight", &m->final_norm));
  if (!m->config.tied_embeddings) MODEL_TRY(upload(u, "lm_head.weight", &m->lm_head));
  /* Conversions are enqueued: wait for them before the files are unmapped. */
  return gllmk_synchronize(m->context);
}

gllmk_status model_upload_checkpoint(model_state *m, const char *dir,
                                     const gllmk_model_load_options *options) {
  st_model files;
  MODEL_TRY(st_model_open(dir, &files));
  uploader u = {m, &files, options, NULL, 0, checkpoint_bytes(m, &files)};
  gllmk_status status = upload_all(&u);
  if (u.staging) {
    gllmk_status synced = gllmk_synchronize(m->context);
    if (status == GLLMK_OK) status = synced;
    gllmk_buffer_free(u.staging);
  }
  st_model_close(&files);
  return status;
}

/* ------------------------------------------------------------- synthetic */

/* A pool of random values on the device; each weight is filled with copies
 * of pool ranges at random offsets. POOL_ELEMS is odd so that ranges of
 * consecutive tensors do not line up. */
#define POOL_ELEMS ((1u << 20) + 7)

typedef struct synth {
  model_state *model;
  gllmk_buffer *pool;
  uint64_t state;
} synth;

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform values of standard deviation 1/sqrt(hidden): projections keep
 * activations near unit scale, so logits have a spread of a few units. */
static gllmk_status make_pool(synth *s) {
  float *values = malloc((size_t)POOL_ELEMS * sizeof *values);
  if (values == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  float scale = sqrtf(3.0f / (float)s->model->config.hidden);
  for (uint32_t i = 0; i < POOL_ELEMS; i++)
    values[i] = scale * (2.0f * (float)(next_random(&s->state) >> 40) / (float)(1 << 24) - 1.0f);
  gllmk_buffer *f32 = NULL;
  gllmk_status status = gllmk_buffer_alloc(s->model->context, (uint64_t)POOL_ELEMS * 4, &f32);
  if (status == GLLMK_OK) status = gllmk_buffer_write(f32, 0, values, (uint64_t)POOL_ELEMS * 4);
  free(values);
  int64_t n = POOL_ELEMS;
  gllmk_tensor src, dst;
  if (status == GLLMK_OK)
    status = gllmk_buffer_alloc(s->model->context, (uint64_t)n * gllmk_dtype_size((gllmk_dtype)s->model->dtype), &s->pool);
  if (status == GLLMK_OK) status = gllmk_tensor_make(f32, 0, GLLMK_F32, 1, &n, &src);
  if (status == GLLMK_OK) status = gllmk_tensor_make(s->pool, 0, (gllmk_dtype)s->model->dtype, 1, &n, &dst);
  if (status == GLLMK_OK) status = gllmk_copy(s->model->context, &(gllmk_copy_args){.out = &dst, .src = &src});
  if (status == GLLMK_OK) status = gllmk_synchronize(s->model->context);
  gllmk_buffer_free(f32);
  return status;
}

static gllmk_status fill_random(synth *s, const gllmk_tensor *t) {
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)t->dtype), total = (uint64_t)gllmk_tensor_numel(t);
  for (uint64_t done = 0; done < total;) {
    uint64_t start = next_random(&s->state) % (POOL_ELEMS / 2);
    uint64_t n = total - done < POOL_ELEMS / 2 ? total - done : POOL_ELEMS / 2;
    MODEL_TRY(gllmk_buffer_copy(t->buffer, t->offset + done * elem, s->pool, start * elem, n * elem));
    done += n;
  }
  return GLLMK_OK;
}

static gllmk_status fill_ones(synth *s, const gllmk_tensor *t) {
  return gllmk_fill(s->model->context, &(gllmk_fill_args){.out = t, .value = 1.0f});
}

static gllmk_status fill_layer(synth *s, const layer_weights *l) {
  MODEL_TRY(fill_ones(s, &l->input_norm));
  MODEL_TRY(fill_ones(s, &l->post_norm));
  const gllmk_tensor *const random[] = {&l->qkv, &l->o, &l->gate_up, &l->down};
  for (size_t i = 0; i < sizeof random / sizeof random[0]; i++) MODEL_TRY(fill_random(s, random[i]));
  if (l->has_qkv_bias) MODEL_TRY(fill_random(s, &l->qkv_bias));
  if (s->model->config.qk_norm) {
    MODEL_TRY(fill_ones(s, &l->q_norm));
    MODEL_TRY(fill_ones(s, &l->k_norm));
  }
  return GLLMK_OK;
}

gllmk_status model_fill_synthetic(model_state *m, uint64_t seed) {
  synth s = {m, NULL, seed};
  gllmk_status status = make_pool(&s);
  if (status == GLLMK_OK) status = fill_random(&s, &m->embed);
  if (status == GLLMK_OK) status = fill_ones(&s, &m->final_norm);
  if (status == GLLMK_OK && !m->config.tied_embeddings) status = fill_random(&s, &m->lm_head);
  for (uint32_t i = 0; status == GLLMK_OK && i < m->config.layers; i++)
    status = fill_layer(&s, &m->layers[i]);
  if (status == GLLMK_OK) status = gllmk_synchronize(m->context);
  gllmk_buffer_free(s.pool);
  return status;
}
