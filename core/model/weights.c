/*
 * weights.c - the model's tensors on the device: allocation, upload from a
 * checkpoint (streamed from the mmap'd files, converted on the device), and
 * synthetic random weights made on the device; then the norms before q/k/v
 * and gate/up folded into those matrices.
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

/* A weight tensor of a shard, counted in the model's bytes. */
static gllmk_status alloc_weight(model_state *m, model_shard *shard, int32_t dtype, int32_t ndim,
                                 const int64_t *shape, gllmk_tensor *out) {
  MODEL_TRY(buffer_list_tensor(&shard->buffers, shard->context, dtype, ndim, shape, out));
  m->weight_bytes += gllmk_tensor_extent_bytes(out);
  return GLLMK_OK;
}

static gllmk_status alloc_matrix(model_state *m, model_shard *shard, int64_t rows, int64_t cols,
                                 gllmk_tensor *out) {
  const int64_t shape[2] = {rows, cols};
  return alloc_weight(m, shard, m->dtype, 2, shape, out);
}

static gllmk_status alloc_vector(model_state *m, model_shard *shard, int64_t length,
                                 gllmk_tensor *out) {
  return alloc_weight(m, shard, m->dtype, 1, &length, out);
}

/* A rank's layer: its heads' q/k/v rows, its intermediate columns. Biases
 * added after o and down go to rank 0 only (the all-reduce then adds them
 * once). */
static gllmk_status alloc_layer(model_state *m, model_shard *shard, bool first_rank,
                                layer_weights *l) {
  const model_config *c = &m->local;
  int64_t h = c->hidden, d = c->head_dim, inter = c->intermediate;
  int64_t q_rows = (int64_t)c->heads * d, qkv_rows = q_rows + 2 * (int64_t)c->kv_heads * d;
  MODEL_TRY(alloc_vector(m, shard, h, &l->input_norm));
  MODEL_TRY(alloc_vector(m, shard, h, &l->post_norm));
  MODEL_TRY(alloc_matrix(m, shard, qkv_rows, h, &l->qkv));
  MODEL_TRY(alloc_matrix(m, shard, h, q_rows, &l->o));
  MODEL_TRY(alloc_matrix(m, shard, 2 * inter, h, &l->gate_up));
  MODEL_TRY(alloc_matrix(m, shard, h, inter, &l->down));
  l->has_qkv_bias = c->qkv_bias;
  l->has_o_bias = c->o_bias && first_rank;
  l->has_mlp_bias = c->mlp_bias;
  l->has_down_bias = c->mlp_bias && first_rank;
  if (c->qkv_bias) MODEL_TRY(alloc_vector(m, shard, qkv_rows, &l->qkv_bias));
  if (l->has_o_bias) MODEL_TRY(alloc_vector(m, shard, h, &l->o_bias));
  if (c->mlp_bias) {
    MODEL_TRY(alloc_vector(m, shard, 2 * inter, &l->gate_up_bias));
    if (l->has_down_bias) MODEL_TRY(alloc_vector(m, shard, h, &l->down_bias));
  }
  if (c->qk_norm) {
    MODEL_TRY(alloc_vector(m, shard, d, &l->q_norm));
    MODEL_TRY(alloc_vector(m, shard, d, &l->k_norm));
  }
  return GLLMK_OK;
}

static gllmk_status alloc_shard(model_state *m, uint32_t rank) {
  model_shard *shard = &m->shards[rank];
  const model_config *c = &m->local;
  shard->layers = calloc(c->layers, sizeof *shard->layers);
  if (shard->layers == NULL)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  MODEL_TRY(alloc_matrix(m, shard, m->config.vocab, c->hidden, &shard->embed));
  MODEL_TRY(alloc_vector(m, shard, c->hidden, &shard->final_norm));
  if (c->tied_embeddings) /* this rank's vocabulary rows of the embedding */
    MODEL_TRY(gllmk_tensor_slice(&shard->embed, 0, (int64_t)rank * c->vocab, c->vocab, 1,
                                 &shard->lm_head));
  else
    MODEL_TRY(alloc_matrix(m, shard, c->vocab, c->hidden, &shard->lm_head));
  for (uint32_t i = 0; i < c->layers; i++)
    MODEL_TRY(alloc_layer(m, shard, rank == 0, &shard->layers[i]));
  int64_t half = c->rotary_dim / 2;
  MODEL_TRY(alloc_weight(m, shard, GLLMK_F32, 1, &half, &shard->inv_freq));
  float *inv_freq = malloc((size_t)half * sizeof *inv_freq);
  if (inv_freq == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  model_config_inv_freq(c, inv_freq);
  gllmk_status status = gllmk_buffer_write(shard->inv_freq.buffer, 0, inv_freq, (uint64_t)half * 4);
  free(inv_freq);
  return status;
}

gllmk_status model_alloc_weights(model_state *m) {
  for (uint32_t r = 0; r < m->ranks; r++) MODEL_TRY(alloc_shard(m, r));
  return GLLMK_OK;
}

/* ------------------------------------------------------------ the split */

/* Where a rank's tensor sits: a field of its model_shard (layer -1) or of
 * its layer `layer`. */
typedef struct weight_ref {
  int32_t layer;
  size_t field;
} weight_ref;
#define SHARD_FIELD(name) ((weight_ref){-1, offsetof(model_shard, name)})

static const gllmk_tensor *tensor_at(const model_shard *shard, weight_ref ref) {
  const char *base = ref.layer < 0 ? (const char *)shard : (const char *)&shard->layers[ref.layer];
  return (const gllmk_tensor *)(const void *)(base + ref.field);
}

typedef enum split_kind {
  SPLIT_NONE,  /* every rank holds all of it */
  SPLIT_ROWS,  /* rank r holds rows [r n, (r + 1) n): q/k/v, gate/up, lm_head */
  SPLIT_COLS,  /* rank r holds cols [r n, (r + 1) n): o, down */
  SPLIT_FIRST, /* rank 0 holds it: the biases added after an all-reduce */
} split_kind;

typedef enum fill_kind { FILL_RANDOM, FILL_ONES } fill_kind;

/* One checkpoint tensor, whole [rows(, cols)] as the config says: its name,
 * where each rank's part of it goes (rows [dst_row, ...) of the rank's
 * tensor `ref`), and, for synthetic weights, its place in the fused whole
 * tensor that one stream of random values fills (its rows from fused_row). */
typedef struct weight_block {
  char name[96];
  weight_ref ref;
  split_kind split;
  fill_kind fill;
  int32_t ndim;
  int64_t rows, cols, dst_row, fused_row;
} weight_block;

/* Every weight, in the order synthetic weights draw their random values. */
typedef struct block_list {
  weight_block *items;
  uint32_t count, capacity;
} block_list;

static gllmk_status add_block(block_list *list, const weight_block *block) {
  if (list->count == list->capacity) {
    uint32_t capacity = list->capacity ? 2 * list->capacity : 256;
    weight_block *grown = realloc(list->items, capacity * sizeof *grown);
    if (grown == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
    list->items = grown;
    list->capacity = capacity;
  }
  list->items[list->count++] = *block;
  return GLLMK_OK;
}

typedef struct block_builder {
  block_list *list;
  uint32_t layer;
  int64_t hidden;
} block_builder;

/* A block of layer b->layer named "model.layers.<i>.<leaf>". */
static gllmk_status layer_block(const block_builder *b, const char *leaf, size_t field,
                                split_kind split, fill_kind fill, int32_t ndim, int64_t rows,
                                int64_t dst_row, int64_t fused_row) {
  weight_block w = {.ref = {(int32_t)b->layer, field}, .split = split, .fill = fill,
                    .ndim = ndim, .rows = rows, .cols = ndim == 2 ? b->hidden : 1,
                    .dst_row = dst_row, .fused_row = fused_row};
  snprintf(w.name, sizeof w.name, "model.layers.%u.%s", b->layer, leaf);
  return add_block(b->list, &w);
}

/* q, k, v (weights or biases) into a rank's fused qkv rows: its q heads,
 * then its k heads, then its v heads. */
static gllmk_status qkv_blocks(const block_builder *b, const model_state *m, const char *suffix,
                               size_t field, int32_t ndim) {
  int64_t d = m->config.head_dim, q = m->config.heads * d, kv = m->config.kv_heads * d;
  int64_t q_local = q / m->ranks, kv_local = kv / m->ranks;
  const char *const parts[] = {"q_proj", "k_proj", "v_proj"};
  const int64_t rows[] = {q, kv, kv}, dst[] = {0, q_local, q_local + kv_local},
                fused[] = {0, q, q + kv};
  for (int i = 0; i < 3; i++) {
    char leaf[64];
    snprintf(leaf, sizeof leaf, "self_attn.%s.%s", parts[i], suffix);
    MODEL_TRY(layer_block(b, leaf, field, SPLIT_ROWS, FILL_RANDOM, ndim, rows[i], dst[i], fused[i]));
  }
  return GLLMK_OK;
}

static gllmk_status gate_up_blocks(const block_builder *b, const model_state *m,
                                   const char *suffix, size_t field, int32_t ndim) {
  int64_t inter = m->config.intermediate;
  char leaf[64];
  snprintf(leaf, sizeof leaf, "mlp.gate_proj.%s", suffix);
  MODEL_TRY(layer_block(b, leaf, field, SPLIT_ROWS, FILL_RANDOM, ndim, inter, 0, 0));
  snprintf(leaf, sizeof leaf, "mlp.up_proj.%s", suffix);
  return layer_block(b, leaf, field, SPLIT_ROWS, FILL_RANDOM, ndim, inter, inter / m->ranks, inter);
}

/* o and down: [hidden, inputs], split by input columns. */
static gllmk_status column_block(const block_builder *b, const char *leaf, size_t field,
                                 int64_t inputs) {
  weight_block w = {.ref = {(int32_t)b->layer, field}, .split = SPLIT_COLS,
                    .fill = FILL_RANDOM, .ndim = 2, .rows = b->hidden, .cols = inputs};
  snprintf(w.name, sizeof w.name, "model.layers.%u.%s", b->layer, leaf);
  return add_block(b->list, &w);
}

static gllmk_status layer_blocks(block_list *list, const model_state *m, uint32_t i) {
  const model_config *c = &m->config;
  const block_builder b = {list, i, c->hidden};
  int64_t h = c->hidden;
  MODEL_TRY(layer_block(&b, "input_layernorm.weight", offsetof(layer_weights, input_norm),
                        SPLIT_NONE, FILL_ONES, 1, h, 0, 0));
  MODEL_TRY(layer_block(&b, "post_attention_layernorm.weight",
                        offsetof(layer_weights, post_norm), SPLIT_NONE, FILL_ONES, 1, h, 0, 0));
  MODEL_TRY(qkv_blocks(&b, m, "weight", offsetof(layer_weights, qkv), 2));
  MODEL_TRY(column_block(&b, "self_attn.o_proj.weight", offsetof(layer_weights, o),
                         (int64_t)c->heads * c->head_dim));
  MODEL_TRY(gate_up_blocks(&b, m, "weight", offsetof(layer_weights, gate_up), 2));
  MODEL_TRY(column_block(&b, "mlp.down_proj.weight", offsetof(layer_weights, down),
                         c->intermediate));
  if (c->qkv_bias) MODEL_TRY(qkv_blocks(&b, m, "bias", offsetof(layer_weights, qkv_bias), 1));
  if (c->qk_norm) {
    MODEL_TRY(layer_block(&b, "self_attn.q_norm.weight", offsetof(layer_weights, q_norm),
                          SPLIT_NONE, FILL_ONES, 1, c->head_dim, 0, 0));
    MODEL_TRY(layer_block(&b, "self_attn.k_norm.weight", offsetof(layer_weights, k_norm),
                          SPLIT_NONE, FILL_ONES, 1, c->head_dim, 0, 0));
  }
  if (c->o_bias)
    MODEL_TRY(layer_block(&b, "self_attn.o_proj.bias", offsetof(layer_weights, o_bias),
                          SPLIT_FIRST, FILL_RANDOM, 1, h, 0, 0));
  if (c->mlp_bias) {
    MODEL_TRY(gate_up_blocks(&b, m, "bias", offsetof(layer_weights, gate_up_bias), 1));
    MODEL_TRY(layer_block(&b, "mlp.down_proj.bias", offsetof(layer_weights, down_bias),
                          SPLIT_FIRST, FILL_RANDOM, 1, h, 0, 0));
  }
  return GLLMK_OK;
}

static gllmk_status model_blocks(const model_state *m, block_list *list) {
  const model_config *c = &m->config;
  int64_t vocab = c->vocab, h = c->hidden;
  const weight_block embed = {"model.embed_tokens.weight", SHARD_FIELD(embed), SPLIT_NONE,
                              FILL_RANDOM, 2, vocab, h, 0, 0};
  const weight_block norm = {"model.norm.weight", SHARD_FIELD(final_norm), SPLIT_NONE,
                             FILL_ONES, 1, h, 1, 0, 0};
  const weight_block lm_head = {"lm_head.weight", SHARD_FIELD(lm_head), SPLIT_ROWS,
                                FILL_RANDOM, 2, vocab, h, 0, 0};
  MODEL_TRY(add_block(list, &embed));
  MODEL_TRY(add_block(list, &norm));
  if (!c->tied_embeddings) MODEL_TRY(add_block(list, &lm_head));
  for (uint32_t i = 0; i < c->layers; i++) MODEL_TRY(layer_blocks(list, m, i));
  return GLLMK_OK;
}

/* Rank r's part of a block: rows [row0, ...) x cols [col0, ...) of the
 * whole (file) tensor go to `dst`, a dense [rows, cols] view of the rank's
 * tensor. Ranks that hold nothing of it (SPLIT_FIRST) get false. */
typedef struct weight_part {
  int64_t row0, col0;
  gllmk_tensor dst;
} weight_part;

static bool part_of(const model_state *m, uint32_t rank, const weight_block *w,
                    weight_part *out) {
  if (w->split == SPLIT_FIRST && rank > 0) return false;
  const gllmk_tensor *t = tensor_at(&m->shards[rank], w->ref);
  int64_t rows = w->split == SPLIT_ROWS ? w->rows / m->ranks : w->rows;
  out->row0 = w->split == SPLIT_ROWS ? (int64_t)rank * rows : 0;
  out->col0 = w->split == SPLIT_COLS ? (int64_t)rank * (w->cols / m->ranks) : 0;
  return gllmk_tensor_slice(t, 0, w->dst_row, rows, 1, &out->dst) == GLLMK_OK;
}

static int64_t part_rows(const weight_part *p) { return p->dst.shape[0]; }
static int64_t part_cols(const weight_part *p) { return p->dst.ndim == 2 ? p->dst.shape[1] : 1; }

/* ------------------------------------------------------------ checkpoint */

typedef struct uploader {
  model_state *model;
  const st_model *files;
  const gllmk_model_load_options *options;
  gllmk_buffer *staging[MODEL_MAX_RANKS]; /* each rank's, made on its first conversion */
  uint8_t *gathered;                      /* host rows of a column part */
  uint64_t done, total;                   /* device bytes, for the progress callback */
} uploader;

static void report(uploader *u, uint64_t bytes) {
  u->done += bytes;
  if (u->options && u->options->progress)
    u->options->progress(u->options->progress_data, u->done, u->total);
}

/* `rows` rows of `row_elems` host values of `src_dtype` into the dense view
 * `dst` of rank `rank`: written straight, or staged on the device and cast
 * there when the dtypes differ. */
static gllmk_status upload_host_rows(uploader *u, uint32_t rank, const uint8_t *host,
                                     int32_t src_dtype, int64_t rows, int64_t row_elems,
                                     const gllmk_tensor *dst) {
  gllmk_context *context = u->model->shards[rank].context;
  uint64_t row_bytes = (uint64_t)row_elems * gllmk_dtype_size((gllmk_dtype)src_dtype);
  int64_t chunk = (int64_t)(STAGING_BYTES / row_bytes);
  if (chunk < 1)
    return MODEL_FAIL(GLLMK_ERR_UNSUPPORTED, "gllmk_model_load: rows over %u bytes", STAGING_BYTES);
  bool cast = src_dtype != dst->dtype;
  if (cast && u->staging[rank] == NULL)
    MODEL_TRY(gllmk_buffer_alloc(context, STAGING_BYTES, &u->staging[rank]));
  for (int64_t first = 0; first < rows; first += chunk) {
    int64_t n = rows - first < chunk ? rows - first : chunk;
    const uint8_t *from = host + (uint64_t)first * row_bytes;
    gllmk_tensor out;
    MODEL_TRY(gllmk_tensor_slice(dst, 0, first, n, 1, &out));
    if (cast) {
      const int64_t shape[2] = {n, row_elems};
      gllmk_tensor staged;
      MODEL_TRY(gllmk_buffer_write(u->staging[rank], 0, from, (uint64_t)n * row_bytes));
      MODEL_TRY(gllmk_tensor_make(u->staging[rank], 0, (gllmk_dtype)src_dtype, dst->ndim, shape,
                                  &staged));
      MODEL_TRY(gllmk_copy(context, &(gllmk_copy_args){.out = &out, .src = &staged}));
    } else {
      MODEL_TRY(gllmk_buffer_write(out.buffer, out.offset, from, (uint64_t)n * row_bytes));
    }
    report(u, gllmk_tensor_extent_bytes(&out));
  }
  return GLLMK_OK;
}

/* A rank's part of a file tensor of `full_cols` columns: whole rows come
 * straight from the mapping; a column part is gathered row by row into
 * host memory first, so only the rank's bytes of the file are read. */
static gllmk_status upload_part(uploader *u, uint32_t rank, const st_tensor *src,
                                int64_t full_cols, const weight_part *p) {
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)src->dtype);
  int64_t rows = part_rows(p), cols = part_cols(p);
  uint64_t row_bytes = (uint64_t)full_cols * elem, part_bytes = (uint64_t)cols * elem;
  const uint8_t *first = src->data + (uint64_t)p->row0 * row_bytes + (uint64_t)p->col0 * elem;
  if (cols == full_cols) return upload_host_rows(u, rank, first, src->dtype, rows, cols, &p->dst);
  if (u->gathered == NULL && (u->gathered = malloc(STAGING_BYTES)) == NULL)
    return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  int64_t chunk = (int64_t)(STAGING_BYTES / part_bytes);
  for (int64_t row = 0; row < rows; row += chunk) {
    int64_t n = rows - row < chunk ? rows - row : chunk;
    for (int64_t i = 0; i < n; i++)
      memcpy(u->gathered + (uint64_t)i * part_bytes, first + (uint64_t)(row + i) * row_bytes,
             part_bytes);
    gllmk_tensor rows_view;
    MODEL_TRY(gllmk_tensor_slice(&p->dst, 0, row, n, 1, &rows_view));
    MODEL_TRY(upload_host_rows(u, rank, u->gathered, src->dtype, n, cols, &rows_view));
  }
  return GLLMK_OK;
}

static gllmk_status shape_error(const st_tensor *t, const weight_block *w) {
  char want[64], have[64];
  int h = 0;
  if (w->ndim == 2)
    snprintf(want, sizeof want, "%lld, %lld", (long long)w->rows, (long long)w->cols);
  else
    snprintf(want, sizeof want, "%lld", (long long)w->rows);
  for (int32_t i = 0; i < t->ndim && h < (int)sizeof have - 24; i++)
    h += snprintf(have + h, sizeof have - (size_t)h, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
  if (t->ndim == 0) snprintf(have, sizeof have, "a scalar");
  return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" has shape [%s], the config needs [%s]",
                    t->file, t->name, have, want);
}

static gllmk_status upload_block(uploader *u, const weight_block *w) {
  const st_tensor *src = st_model_find(u->files, w->name);
  if (src == NULL)
    return MODEL_FAIL(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor \"%s\" is missing from the checkpoint",
                      u->options->path, w->name);
  bool same = src->ndim == w->ndim && src->shape[0] == w->rows &&
              (w->ndim == 1 || src->shape[1] == w->cols);
  if (!same) return shape_error(src, w);
  for (uint32_t r = 0; r < u->model->ranks; r++) {
    weight_part part;
    if (part_of(u->model, r, w, &part)) MODEL_TRY(upload_part(u, r, src, w->cols, &part));
  }
  return GLLMK_OK;
}

static gllmk_status upload_all(uploader *u, const block_list *blocks) {
  for (uint32_t i = 0; i < blocks->count; i++) MODEL_TRY(upload_block(u, &blocks->items[i]));
  /* Conversions are enqueued: wait for them before the files are unmapped. */
  for (uint32_t r = 0; r < u->model->ranks; r++) MODEL_TRY(gllmk_synchronize(u->model->shards[r].context));
  return GLLMK_OK;
}

/* Device bytes of every weight but the rope table (computed, not loaded). */
static uint64_t upload_bytes(const model_state *m) {
  return m->weight_bytes - m->ranks * gllmk_tensor_extent_bytes(&m->shards[0].inv_freq);
}

gllmk_status model_upload_checkpoint(model_state *m, const char *dir,
                                     const gllmk_model_load_options *options) {
  st_model files;
  MODEL_TRY(st_model_open(dir, &files));
  uploader u = {.model = m, .files = &files, .options = options, .total = upload_bytes(m)};
  block_list blocks = {0};
  gllmk_status status = model_blocks(m, &blocks);
  if (status == GLLMK_OK) status = upload_all(&u, &blocks);
  for (uint32_t r = 0; r < m->ranks; r++) {
    if (u.staging[r] == NULL) continue;
    gllmk_status synced = gllmk_synchronize(m->shards[r].context);
    if (status == GLLMK_OK) status = synced;
    gllmk_buffer_free(u.staging[r]);
  }
  free(u.gathered);
  free(blocks.items);
  st_model_close(&files);
  return status;
}

/* ----------------------------------------------------------------- folding */

/* w[n, k] *= norm[k], then norm = 1. */
static gllmk_status fold_norm(gllmk_context *ctx, const gllmk_tensor *w, const gllmk_tensor *norm) {
  MODEL_TRY(gllmk_mul(ctx, &(gllmk_mul_args){.out = w, .a = w, .b = norm}));
  return gllmk_fill(ctx, &(gllmk_fill_args){.out = norm, .value = 1.0f});
}

/* The RMSNorm weights before q/k/v and gate/up go into those matrices
 * (rms(x) * g · W = rms(x) · (W g), one rounding of W g in the weights'
 * dtype), and the norms become ones: a decode step can then normalize
 * inside the matmul (a_norm, which has no weight), and every other step
 * norms as before, with ones (forward.c). */
gllmk_status model_fold_norms(model_state *m) {
  for (uint32_t r = 0; r < m->ranks; r++) {
    const model_shard *shard = &m->shards[r];
    for (uint32_t i = 0; i < m->local.layers; i++) {
      const layer_weights *l = &shard->layers[i];
      MODEL_TRY(fold_norm(shard->context, &l->qkv, &l->input_norm));
      MODEL_TRY(fold_norm(shard->context, &l->gate_up, &l->post_norm));
    }
    MODEL_TRY(gllmk_synchronize(shard->context));
  }
  return GLLMK_OK;
}

/* ------------------------------------------------------------ rope pairs */

/* Rows [0, rotary_dim) of each of `heads` heads of t ([heads * head_dim,
 * cols], or a 1-D bias as cols 1) reordered (0, half, 1, half + 1, ...), so
 * that a NeoX pair (j, j + half) becomes the GPT-J pair (2j, 2j + 1): a copy
 * into `staging` through a permuted view, and back. */
static gllmk_status pair_rows(gllmk_context *ctx, const gllmk_tensor *t, int64_t heads,
                              int64_t head_dim, int64_t rotary_dim, gllmk_buffer *staging) {
  const int64_t half = rotary_dim / 2, cols = t->ndim == 2 ? t->shape[1] : 1, row = t->strides[0];
  gllmk_tensor pairs = *t; /* [heads, half, 2, cols]: element (h, j, s) is row h d + s half + j */
  pairs.ndim = 4;
  const int64_t shape[4] = {heads, half, 2, cols}, strides[4] = {head_dim * row, row, half * row, 1};
  memcpy(pairs.shape, shape, sizeof shape);
  memcpy(pairs.strides, strides, sizeof strides);
  gllmk_tensor packed, rotated = pairs; /* rotated: the same rows in their new order */
  MODEL_TRY(gllmk_tensor_make(staging, 0, (gllmk_dtype)t->dtype, 4, shape, &packed));
  rotated.strides[1] = 2 * row;
  rotated.strides[2] = row;
  MODEL_TRY(gllmk_copy(ctx, &(gllmk_copy_args){.out = &packed, .src = &pairs}));
  return gllmk_copy(ctx, &(gllmk_copy_args){.out = &rotated, .src = &packed});
}

gllmk_status model_pair_rope_rows(model_state *m) {
  const model_config *c = &m->local;
  m->rope_paired = !c->qk_norm;
  if (!m->rope_paired) return GLLMK_OK;
  const int64_t heads = (int64_t)c->heads + c->kv_heads, d = c->head_dim, h = c->hidden;
  for (uint32_t r = 0; r < m->ranks; r++) {
    const model_shard *shard = &m->shards[r];
    gllmk_buffer *staging;
    const size_t bytes = (size_t)(heads * c->rotary_dim * h) * gllmk_dtype_size((gllmk_dtype)m->dtype);
    MODEL_TRY(gllmk_buffer_alloc(shard->context, bytes, &staging));
    gllmk_status status = GLLMK_OK;
    for (uint32_t i = 0; i < c->layers && status == GLLMK_OK; i++) {
      const layer_weights *l = &shard->layers[i];
      status = pair_rows(shard->context, &l->qkv, heads, d, c->rotary_dim, staging);
      if (status == GLLMK_OK && l->has_qkv_bias)
        status = pair_rows(shard->context, &l->qkv_bias, heads, d, c->rotary_dim, staging);
    }
    gllmk_status synced = gllmk_synchronize(shard->context);
    gllmk_buffer_free(staging);
    MODEL_TRY(status);
    MODEL_TRY(synced);
  }
  return GLLMK_OK;
}

/* ------------------------------------------------------------- synthetic */

/* A pool of random values on each rank's device; a whole weight is filled
 * with copies of pool ranges at random offsets, and each rank copies the
 * parts of those ranges that fall in its share, so every split of a model
 * holds the same numbers. POOL_ELEMS is odd so that ranges of consecutive
 * tensors do not line up. */
#define POOL_ELEMS ((1u << 20) + 7)
#define POOL_RANGE (POOL_ELEMS / 2)

typedef struct synth {
  model_state *model;
  gllmk_buffer *pools[MODEL_MAX_RANKS];
  uint64_t state;
} synth;

static uint64_t next_random(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The pool in the model's dtype on one rank, from F32 `values`. */
static gllmk_status make_pool(synth *s, uint32_t rank, const float *values) {
  gllmk_context *context = s->model->shards[rank].context;
  int64_t n = POOL_ELEMS;
  gllmk_buffer *f32 = NULL;
  gllmk_tensor src, dst;
  gllmk_status status = gllmk_buffer_alloc(context, (uint64_t)n * 4, &f32);
  if (status == GLLMK_OK) status = gllmk_buffer_write(f32, 0, values, (uint64_t)n * 4);
  if (status == GLLMK_OK)
    status = gllmk_buffer_alloc(context, (uint64_t)n * gllmk_dtype_size((gllmk_dtype)s->model->dtype),
                                &s->pools[rank]);
  if (status == GLLMK_OK) status = gllmk_tensor_make(f32, 0, GLLMK_F32, 1, &n, &src);
  if (status == GLLMK_OK)
    status = gllmk_tensor_make(s->pools[rank], 0, (gllmk_dtype)s->model->dtype, 1, &n, &dst);
  if (status == GLLMK_OK) status = gllmk_copy(context, &(gllmk_copy_args){.out = &dst, .src = &src});
  if (status == GLLMK_OK) status = gllmk_synchronize(context);
  gllmk_buffer_free(f32);
  return status;
}

/* Uniform values of standard deviation 1/sqrt(hidden): projections keep
 * activations near unit scale, so logits have a spread of a few units. */
static gllmk_status make_pools(synth *s) {
  float *values = malloc((size_t)POOL_ELEMS * sizeof *values);
  if (values == NULL) return MODEL_FAIL(GLLMK_ERR_OUT_OF_MEMORY, "gllmk_model_load: out of memory");
  float scale = sqrtf(3.0f / (float)s->model->config.hidden);
  for (uint32_t i = 0; i < POOL_ELEMS; i++)
    values[i] = scale * (2.0f * (float)(next_random(&s->state) >> 40) / (float)(1 << 24) - 1.0f);
  gllmk_status status = GLLMK_OK;
  for (uint32_t r = 0; r < s->model->ranks && status == GLLMK_OK; r++) status = make_pool(s, r, values);
  free(values);
  return status;
}

/* A rank's part of a whole weight being filled; part.row0 counts from the
 * first row of the fused whole (q, k and v rows one after another). */
typedef struct fill_piece {
  uint32_t rank;
  weight_part part;
} fill_piece;

/* Rows [first, first + count) of a piece, all inside one pool range: the
 * whole row run is one strided copy from the pool. `a` is the whole
 * weight's element where the range starts, `start` the pool's. */
static gllmk_status copy_rows(synth *s, const fill_piece *p, int64_t cols_whole, int64_t first,
                              int64_t count, int64_t a, uint64_t start) {
  gllmk_context *context = s->model->shards[p->rank].context;
  const weight_part *w = &p->part;
  int64_t begin = (w->row0 + first) * cols_whole + w->col0 - a;
  const int64_t shape[2] = {count, part_cols(w)};
  gllmk_tensor src, dst;
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)w->dst.dtype);
  MODEL_TRY(gllmk_tensor_make(s->pools[p->rank], (start + (uint64_t)begin) * elem,
                              (gllmk_dtype)w->dst.dtype, 2, shape, &src));
  src.strides[0] = cols_whole;
  MODEL_TRY(gllmk_tensor_slice(&w->dst, 0, first, count, 1, &dst));
  if (dst.ndim == 1) MODEL_TRY(gllmk_tensor_reshape(&dst, 2, shape, &dst));
  return gllmk_copy(context, &(gllmk_copy_args){.out = &dst, .src = &src});
}

/* The part of one row of a piece that a pool range [a, a + n) covers. */
static gllmk_status copy_row_part(synth *s, const fill_piece *p, int64_t cols_whole, int64_t row,
                                  int64_t lo, int64_t hi, int64_t a, uint64_t start) {
  const weight_part *w = &p->part;
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)w->dst.dtype);
  int64_t seg = (w->row0 + row) * cols_whole + w->col0;
  uint64_t dst = w->dst.offset + (uint64_t)(row * part_cols(w) + (lo - seg)) * elem;
  return gllmk_buffer_copy(w->dst.buffer, dst, s->pools[p->rank], (start + (uint64_t)(lo - a)) * elem,
                           (uint64_t)(hi - lo) * elem);
}

/* Fills what a piece holds of the whole weight's elements [a, a + n),
 * which are pool elements [start, start + n). */
static gllmk_status fill_range(synth *s, const fill_piece *p, int64_t cols_whole, int64_t a,
                               int64_t n, uint64_t start) {
  const weight_part *w = &p->part;
  int64_t rows = part_rows(w), cols = part_cols(w);
  int64_t first = a / cols_whole - w->row0, last = (a + n - 1) / cols_whole - w->row0;
  if (first < 0) first = 0;
  if (last > rows - 1) last = rows - 1;
  int64_t run = -1; /* first row of a run of rows the range holds whole */
  for (int64_t row = first; row <= last; row++) {
    int64_t seg = (w->row0 + row) * cols_whole + w->col0;
    int64_t lo = seg > a ? seg : a, hi = seg + cols < a + n ? seg + cols : a + n;
    bool whole = lo == seg && hi == seg + cols;
    if (whole && run < 0) run = row;
    if (whole) continue;
    if (run >= 0) MODEL_TRY(copy_rows(s, p, cols_whole, run, row - run, a, start));
    run = -1;
    if (lo < hi) MODEL_TRY(copy_row_part(s, p, cols_whole, row, lo, hi, a, start));
  }
  if (run >= 0) MODEL_TRY(copy_rows(s, p, cols_whole, run, last + 1 - run, a, start));
  return GLLMK_OK;
}

/* `count` blocks that fill one whole weight (a fused one: q, k, v rows) from
 * one stream of pool ranges. */
static gllmk_status fill_random(synth *s, const weight_block *blocks, uint32_t count) {
  const model_state *m = s->model;
  fill_piece pieces[4 * MODEL_MAX_RANKS];
  uint32_t n_pieces = 0;
  int64_t rows = 0, cols = blocks[0].cols;
  for (uint32_t b = 0; b < count; b++) {
    rows = blocks[b].fused_row + blocks[b].rows;
    for (uint32_t r = 0; r < m->ranks; r++) {
      fill_piece *p = &pieces[n_pieces];
      if (!part_of(m, r, &blocks[b], &p->part)) continue;
      p->rank = r;
      p->part.row0 += blocks[b].fused_row;
      n_pieces++;
    }
  }
  int64_t total = rows * cols;
  for (int64_t done = 0; done < total;) {
    uint64_t start = next_random(&s->state) % POOL_RANGE;
    int64_t n = total - done < (int64_t)POOL_RANGE ? total - done : (int64_t)POOL_RANGE;
    for (uint32_t i = 0; i < n_pieces; i++) MODEL_TRY(fill_range(s, &pieces[i], cols, done, n, start));
    done += n;
  }
  return GLLMK_OK;
}

static gllmk_status fill_ones(synth *s, const weight_block *w) {
  for (uint32_t r = 0; r < s->model->ranks; r++) {
    weight_part part;
    if (!part_of(s->model, r, w, &part)) continue;
    MODEL_TRY(gllmk_fill(s->model->shards[r].context, &(gllmk_fill_args){.out = &part.dst, .value = 1.0f}));
  }
  return GLLMK_OK;
}

/* Consecutive blocks of one rank tensor (q, k, v of a fused qkv). */
static uint32_t fused_count(const block_list *list, uint32_t first) {
  uint32_t end = first + 1;
  const weight_ref ref = list->items[first].ref;
  while (end < list->count && list->items[end].ref.layer == ref.layer &&
         list->items[end].ref.field == ref.field)
    end++;
  return end - first;
}

static gllmk_status fill_blocks(synth *s, const block_list *blocks) {
  for (uint32_t i = 0; i < blocks->count;) {
    uint32_t n = fused_count(blocks, i);
    if (blocks->items[i].fill == FILL_ONES) MODEL_TRY(fill_ones(s, &blocks->items[i]));
    else MODEL_TRY(fill_random(s, &blocks->items[i], n));
    i += n;
  }
  for (uint32_t r = 0; r < s->model->ranks; r++) MODEL_TRY(gllmk_synchronize(s->model->shards[r].context));
  return GLLMK_OK;
}

gllmk_status model_fill_synthetic(model_state *m, uint64_t seed) {
  synth s = {.model = m, .state = seed};
  block_list blocks = {0};
  gllmk_status status = model_blocks(m, &blocks);
  if (status == GLLMK_OK) status = make_pools(&s);
  if (status == GLLMK_OK) status = fill_blocks(&s, &blocks);
  for (uint32_t r = 0; r < m->ranks; r++) gllmk_buffer_free(s.pools[r]);
  free(blocks.items);
  return status;
}
