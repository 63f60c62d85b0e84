/*
 * forward.c - one forward pass as gllmk ops: token ids to the logits of each
 * sequence's last token. Every tensor it touches is on the device; the index
 * arrays (ids, positions, cache slots, block table) were written to the step
 * buffer beforehand, so the same calls can be recorded once and replayed.
 *
 * Per layer (pre-norm decoder, residual kept apart):
 *   qkv = normed · Wqkv (+ b)            one matmul for q, k and v
 *   q, k = rope(views of qkv)            (Qwen3: per-head RMSNorm first)
 *   kv_append(k, v view) at the slots;   attn = paged_attention(q, cache)
 *   proj = attn · Wo;                    residual += proj, normed = rmsnorm
 *   gate_up = normed · Wgu;              act = silu(gate) * up
 *   proj = act · Wdown;                  residual += proj, normed = next norm
 */
#include <math.h>
#include <string.h>

#include "model_internal.h"

typedef struct step_tensors {
  gllmk_tensor ids, positions, slots, q_starts, seq_lens, last_rows, block_table;
} step_tensors;

static gllmk_status i32_view(const session_state *s, uint64_t offset, int32_t ndim,
                             const int64_t *shape, gllmk_tensor *out) {
  return gllmk_tensor_make(s->step_buffer, offset * 4, GLLMK_I32, ndim, shape, out);
}

static gllmk_status make_step_tensors(const session_state *s, const step_layout *l,
                                      step_tensors *t) {
  const int64_t tokens = l->tokens, seqs = l->seqs, starts = l->seqs + 1;
  const int64_t table[2] = {seqs, s->max_blocks_per_seq};
  MODEL_TRY(i32_view(s, l->ids, 1, &tokens, &t->ids));
  MODEL_TRY(i32_view(s, l->positions, 1, &tokens, &t->positions));
  MODEL_TRY(i32_view(s, l->slots, 1, &tokens, &t->slots));
  MODEL_TRY(i32_view(s, l->q_starts, 1, &starts, &t->q_starts));
  MODEL_TRY(i32_view(s, l->seq_lens, 1, &seqs, &t->seq_lens));
  MODEL_TRY(i32_view(s, l->last_rows, 1, &seqs, &t->last_rows));
  return i32_view(s, l->block_table, 2, table, &t->block_table);
}

/* The first `rows` rows of a scratch tensor. */
static gllmk_status rows(const gllmk_tensor *t, int64_t n, gllmk_tensor *out) {
  return gllmk_tensor_slice(t, 0, 0, n, 1, out);
}

/* Columns [first, first + count) of a [T, W] matrix, seen as [T, heads, D]. */
static gllmk_status head_view(const gllmk_tensor *m, int64_t first, int64_t heads, int64_t d,
                              gllmk_tensor *out) {
  gllmk_tensor cols;
  MODEL_TRY(gllmk_tensor_slice(m, 1, first, heads * d, 1, &cols));
  *out = cols;
  out->ndim = 3;
  out->shape[1] = heads;
  out->shape[2] = d;
  out->strides[0] = m->strides[0];
  out->strides[1] = d;
  out->strides[2] = 1;
  return GLLMK_OK;
}

static gllmk_status as_matrix(const gllmk_tensor *t, int64_t r, int64_t c, gllmk_tensor *out) {
  const int64_t shape[2] = {r, c};
  return gllmk_tensor_reshape(t, 2, shape, out);
}

static gllmk_status linear(gllmk_context *ctx, const gllmk_tensor *out, const gllmk_tensor *a,
                           const gllmk_tensor *w, const gllmk_tensor *bias, bool has_bias) {
  return gllmk_matmul(ctx, &(gllmk_matmul_args){.out = out, .a = a, .b = w,
                                                .bias = has_bias ? bias : NULL, .alpha = 1.0f,
                                                .b_layout = GLLMK_B_NK});
}

typedef struct pass {
  session_state *s;
  const model_config *c;
  int64_t t; /* tokens */
  step_tensors idx;
  gllmk_tensor residual, normed, qkv, q, k, attn, proj, gate_up, act;
} pass;

/* rope (and Qwen3's per-head norm) from a view of qkv into a dense q or k. */
static gllmk_status position_heads(const pass *p, const gllmk_tensor *view, const gllmk_tensor *out,
                                   const gllmk_tensor *norm) {
  gllmk_context *ctx = p->s->context;
  const model_state *m = p->s->model;
  const gllmk_tensor *rope_in = view;
  if (p->c->qk_norm) {
    gllmk_tensor flat;
    MODEL_TRY(gllmk_copy(ctx, &(gllmk_copy_args){.out = out, .src = view}));
    MODEL_TRY(as_matrix(out, out->shape[0] * out->shape[1], out->shape[2], &flat));
    MODEL_TRY(gllmk_rmsnorm(ctx, &(gllmk_rmsnorm_args){.out = &flat, .x = &flat, .weight = norm,
                                                      .eps = (float)p->c->rms_eps}));
    rope_in = out;
  }
  bool scaled = p->c->rope_scaling != ROPE_SCALING_NONE;
  return gllmk_rope(ctx, &(gllmk_rope_args){.out = out, .x = rope_in, .positions = &p->idx.positions,
                                            .theta = (float)p->c->rope_theta,
                                            .rotary_dim = (int32_t)p->c->rotary_dim,
                                            .style = GLLMK_ROPE_NEOX,
                                            .inv_freq = scaled ? &m->inv_freq : NULL});
}

static gllmk_status attention_block(const pass *p, uint32_t index) {
  gllmk_context *ctx = p->s->context;
  const layer_weights *w = &p->s->model->layers[index];
  int64_t d = p->c->head_dim, hq = p->c->heads, hkv = p->c->kv_heads;
  gllmk_tensor q_view, k_view, v_view, attn_flat;
  MODEL_TRY(linear(ctx, &p->qkv, &p->normed, &w->qkv, &w->qkv_bias, w->has_qkv_bias));
  MODEL_TRY(head_view(&p->qkv, 0, hq, d, &q_view));
  MODEL_TRY(head_view(&p->qkv, hq * d, hkv, d, &k_view));
  MODEL_TRY(head_view(&p->qkv, (hq + hkv) * d, hkv, d, &v_view));
  MODEL_TRY(position_heads(p, &q_view, &p->q, &w->q_norm));
  MODEL_TRY(position_heads(p, &k_view, &p->k, &w->k_norm));
  MODEL_TRY(gllmk_kv_append(ctx, &(gllmk_kv_append_args){
      .k_cache = &p->s->k_cache[index], .v_cache = &p->s->v_cache[index], .k = &p->k,
      .v = &v_view, .slots = &p->idx.slots}));
  MODEL_TRY(gllmk_paged_attention(ctx, &(gllmk_paged_attention_args){
      .out = &p->attn, .q = &p->q, .k_cache = &p->s->k_cache[index],
      .v_cache = &p->s->v_cache[index], .block_table = &p->idx.block_table,
      .q_starts = &p->idx.q_starts, .seq_lens = &p->idx.seq_lens,
      .scale = (float)(1.0 / sqrt((double)d))}));
  MODEL_TRY(as_matrix(&p->attn, p->t, hq * d, &attn_flat));
  MODEL_TRY(linear(ctx, &p->proj, &attn_flat, &w->o, &w->o_bias, w->has_o_bias));
  return gllmk_add_rmsnorm(ctx, &(gllmk_add_rmsnorm_args){
      .out = &p->normed, .residual = &p->residual, .x = &p->proj, .weight = &w->post_norm,
      .eps = (float)p->c->rms_eps});
}

/* The MLP, then the residual add and the norm that the next layer (or the
 * final norm) needs. */
static gllmk_status mlp_block(const pass *p, uint32_t index, const gllmk_tensor *next_norm) {
  gllmk_context *ctx = p->s->context;
  const layer_weights *w = &p->s->model->layers[index];
  int64_t inter = p->c->intermediate;
  gllmk_tensor gate, up;
  MODEL_TRY(linear(ctx, &p->gate_up, &p->normed, &w->gate_up, &w->gate_up_bias, w->has_mlp_bias));
  MODEL_TRY(gllmk_tensor_slice(&p->gate_up, 1, 0, inter, 1, &gate));
  MODEL_TRY(gllmk_tensor_slice(&p->gate_up, 1, inter, inter, 1, &up));
  MODEL_TRY(gllmk_swiglu(ctx, &(gllmk_swiglu_args){.out = &p->act, .gate = &gate, .up = &up}));
  MODEL_TRY(linear(ctx, &p->proj, &p->act, &w->down, &w->down_bias, w->has_mlp_bias));
  return gllmk_add_rmsnorm(ctx, &(gllmk_add_rmsnorm_args){
      .out = &p->normed, .residual = &p->residual, .x = &p->proj, .weight = next_norm,
      .eps = (float)p->c->rms_eps});
}

static gllmk_status make_pass(session_state *s, const step_layout *l, pass *p) {
  const scratch *x = &s->x;
  memset(p, 0, sizeof *p);
  p->s = s;
  p->c = &s->model->config;
  p->t = l->tokens;
  MODEL_TRY(make_step_tensors(s, l, &p->idx));
  const struct { const gllmk_tensor *from; gllmk_tensor *to; } views[] = {
      {&x->residual, &p->residual}, {&x->normed, &p->normed}, {&x->qkv, &p->qkv},
      {&x->q, &p->q},   {&x->k, &p->k},       {&x->attn, &p->attn},
      {&x->proj, &p->proj}, {&x->gate_up, &p->gate_up}, {&x->act, &p->act}};
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
    MODEL_TRY(rows(views[i].from, p->t, views[i].to));
  return GLLMK_OK;
}

gllmk_status forward_enqueue(session_state *s, const step_layout *l) {
  const model_state *m = s->model;
  gllmk_context *ctx = s->context;
  pass p;
  MODEL_TRY(make_pass(s, l, &p));
  MODEL_TRY(gllmk_embedding(ctx, &(gllmk_embedding_args){.out = &p.residual, .table = &m->embed,
                                                         .ids = &p.idx.ids}));
  MODEL_TRY(gllmk_rmsnorm(ctx, &(gllmk_rmsnorm_args){.out = &p.normed, .x = &p.residual,
                                                    .weight = &m->layers[0].input_norm,
                                                    .eps = (float)p.c->rms_eps}));
  for (uint32_t i = 0; i < p.c->layers; i++) {
    const gllmk_tensor *next = i + 1 < p.c->layers ? &m->layers[i + 1].input_norm : &m->final_norm;
    MODEL_TRY(attention_block(&p, i));
    MODEL_TRY(mlp_block(&p, i, next));
  }
  /* Only each sequence's last row goes through lm_head; with one new token
   * per sequence that is every row. */
  gllmk_tensor last = p.normed, logits;
  if (l->tokens != l->seqs) {
    MODEL_TRY(rows(&s->x.last, l->seqs, &last));
    MODEL_TRY(gllmk_embedding(ctx, &(gllmk_embedding_args){.out = &last, .table = &p.normed,
                                                           .ids = &p.idx.last_rows}));
  }
  MODEL_TRY(rows(&s->x.logits, l->seqs, &logits));
  return linear(ctx, &logits, &last, &m->lm_head, NULL, false);
}
