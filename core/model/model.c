/*
 * model.c - gllmk_model_load / free / info: the config, then the weights.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* config.json of `dir`, read whole and parsed. */
static gllmk_status read_config(const char *dir, model_config *out_config) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_model_load: path is too long");
  FILE *file = fopen(path, "rb");
  if (file == NULL) return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: cannot open it", path);
  char *text = NULL;
  size_t length = 0, capacity = 0;
  gllmk_status status = GLLMK_OK;
  for (;;) { /* config.json is small; grow until the end of the file */
    if (length == capacity) {
      capacity = capacity ? 2 * capacity : 16384;
      char *grown = capacity <= (64u << 20) ? realloc(text, capacity) : NULL;
      if (grown == NULL) {
        status = MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: too large for a config", path);
        break;
      }
      text = grown;
    }
    size_t n = fread(text + length, 1, capacity - length, file);
    length += n;
    if (n == 0) break;
  }
  if (status == GLLMK_OK && ferror(file))
    status = MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: read error", path);
  fclose(file);
  if (status == GLLMK_OK) status = model_config_parse(text, length, path, out_config);
  free(text);
  return status;
}

static gllmk_status check_options(gllmk_context *const *contexts, uint32_t count,
                                  const gllmk_model_load_options *o, gllmk_model **out_model) {
  if (contexts == NULL || o == NULL || out_model == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_model_load: context, options and out_model are required");
  if (count == 0 || count > MODEL_MAX_RANKS)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "gllmk_model_load_parallel: count=%u, expected 1 to %u contexts", count,
                      MODEL_MAX_RANKS);
  for (uint32_t r = 0; r < count; r++)
    if (contexts[r] == NULL)
      return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_model_load: contexts[%u] is NULL", r);
  if (o->struct_size < sizeof *o)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "gllmk_model_load: options.struct_size=%zu, expected %zu", o->struct_size,
                      sizeof *o);
  if ((o->path == NULL) == (o->synthetic == NULL))
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "gllmk_model_load: give exactly one of options.path and options.synthetic");
  if (o->dtype != -1 && o->dtype != GLLMK_F32 && o->dtype != GLLMK_F16 && o->dtype != GLLMK_BF16)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT,
                      "gllmk_model_load: dtype=%d is not f32, f16, bf16 or -1", o->dtype);
  return GLLMK_OK;
}

/* One rank's share of the config; every split dimension must divide. */
static gllmk_status split_config(model_state *m) {
  const model_config *c = &m->config;
  const struct { const char *name; uint32_t value; } dims[] = {
      {"attention heads", c->heads}, {"kv heads", c->kv_heads},
      {"intermediate columns", c->intermediate}, {"vocabulary rows", c->vocab}};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i].value % m->ranks != 0)
      return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED,
                        "gllmk_model_load: %s: %u %s do not split over %u devices (tensor "
                        "parallelism needs a divisor)",
                        m->name, dims[i].value, dims[i].name, m->ranks);
  m->local = *c;
  m->local.heads /= m->ranks;
  m->local.kv_heads /= m->ranks;
  m->local.intermediate /= m->ranks;
  m->local.vocab /= m->ranks;
  return GLLMK_OK;
}

static gllmk_status load(model_state *m, gllmk_context *const *contexts,
                         const gllmk_model_load_options *o) {
  if (o->path)
    MODEL_TRY(read_config(o->path, &m->config));
  else
    MODEL_TRY(model_config_synthetic(o->synthetic, &m->config));
  snprintf(m->name, sizeof m->name, "%s", o->synthetic ? o->synthetic : m->config.model_type);
  m->dtype = o->dtype >= 0 ? o->dtype : m->config.dtype >= 0 ? m->config.dtype : GLLMK_BF16;
  MODEL_TRY(split_config(m));
  if (m->ranks > 1) MODEL_TRY(gllmk_communicator_create(contexts, m->ranks, &m->comm));
  MODEL_TRY(model_alloc_weights(m));
  if (o->path) MODEL_TRY(model_upload_checkpoint(m, o->path, o));
  else MODEL_TRY(model_fill_synthetic(m, o->seed));
  MODEL_TRY(model_fold_norms(m));
  MODEL_TRY(model_pair_rope_rows(m));
  return GLLMK_OK;
}

static void model_destroy(model_state *m) {
  while (m->sessions) {
    session_state *s = m->sessions;
    m->sessions = s->next;
    core_handle_release(s->handle, CORE_HANDLE_SESSION);
    session_free(s);
  }
  for (uint32_t r = 0; r < m->ranks; r++) {
    buffer_list_free(&m->shards[r].buffers);
    free(m->shards[r].layers);
  }
  gllmk_communicator_free(m->comm);
  free(m->shards);
  free(m);
}

gllmk_status model_from_handle(const gllmk_model *handle, const char *fn, model_state **out) {
  *out = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_MODEL);
  if (*out == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: model is not a live model (NULL or freed)",
                      fn);
  return GLLMK_OK;
}

static gllmk_status new_model(gllmk_context *const *contexts, uint32_t count, model_state **out) {
  model_state *m = calloc(1, sizeof *m);
  model_shard *shards = calloc(count, sizeof *shards);
  if (m == NULL || shards == NULL) {
    free(m);
    free(shards);
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  }
  m->ranks = count;
  m->shards = shards;
  for (uint32_t r = 0; r < count; r++) shards[r].context = contexts[r];
  *out = m;
  return GLLMK_OK;
}

gllmk_status gllmk_model_load_parallel(gllmk_context *const *contexts, uint32_t count,
                                       const gllmk_model_load_options *options,
                                       gllmk_model **out_model) {
  MODEL_TRY(check_options(contexts, count, options, out_model));
  double start = now_seconds();
  model_state *m = NULL;
  MODEL_TRY(new_model(contexts, count, &m));
  gllmk_status status = load(m, contexts, options);
  if (status == GLLMK_OK) {
    m->handle = core_handle_new(CORE_HANDLE_MODEL, m);
    if (m->handle == 0) status = MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of handles");
  }
  if (status != GLLMK_OK) {
    /* Keep the message: freeing may call into gllmk. */
    char message[1024];
    snprintf(message, sizeof message, "%s", gllmk_last_error());
    model_destroy(m);
    return MODEL_FAIL(status, "%s", message);
  }
  m->load_seconds = now_seconds() - start;
  *out_model = (gllmk_model *)(uintptr_t)m->handle;
  return GLLMK_OK;
}

gllmk_status gllmk_model_load(gllmk_context *context, const gllmk_model_load_options *options,
                              gllmk_model **out_model) {
  return gllmk_model_load_parallel(context ? &context : NULL, 1, options, out_model);
}

void gllmk_model_free(gllmk_model *handle) {
  model_state *m = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_MODEL);
  if (m == NULL) return;
  core_handle_release(m->handle, CORE_HANDLE_MODEL);
  model_destroy(m);
}

gllmk_context *gllmk_model_context(const gllmk_model *handle) {
  model_state *m = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_MODEL);
  return m ? m->shards[0].context : NULL;
}

/* Bytes of weights one decode step reads, over all ranks: every layer and
 * lm_head (each rank reads one embedding row, negligible). */
static uint64_t step_bytes(const model_state *m) {
  const model_shard *shard = &m->shards[0];
  uint64_t embeds_unread = m->config.tied_embeddings ? m->ranks - 1 : m->ranks; /* copies */
  return m->weight_bytes - embeds_unread * gllmk_tensor_extent_bytes(&shard->embed) -
         m->ranks * gllmk_tensor_extent_bytes(&shard->inv_freq);
}

gllmk_status gllmk_model_get_info(const gllmk_model *handle, gllmk_model_info *out_info) {
  model_state *m;
  MODEL_TRY(model_from_handle(handle, "gllmk_model_get_info", &m));
  if (out_info == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "gllmk_model_get_info: out_info is NULL");
  const model_config *c = &m->config;
  gllmk_model_info info;
  memset(&info, 0, sizeof info);
  info.arch = c->arch;
  snprintf(info.model_type, sizeof info.model_type, "%s", m->name);
  info.dtype = m->dtype;
  info.hidden = c->hidden;
  info.intermediate = c->intermediate;
  info.layers = c->layers;
  info.heads = c->heads;
  info.kv_heads = c->kv_heads;
  info.head_dim = c->head_dim;
  info.vocab = c->vocab;
  info.max_position = c->max_position;
  info.weight_bytes = m->weight_bytes;
  info.step_weight_bytes = step_bytes(m);
  info.load_seconds = m->load_seconds;
  *out_info = info;
  return GLLMK_OK;
}
