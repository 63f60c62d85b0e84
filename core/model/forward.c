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
 *
 * The RMSNorm weights before q/k/v and gate/up are folded into those
 * matrices when the model loads (weights.c), so the norms above need no
 * weight. Where the backend can (gllmk_op_supported), a forward is fused:
 * q/k/v and gate/up normalize their input rows themselves (matmul's
 * a_norm) straight from the residual, and o and down add into the residual
 * (beta = 1), so no add_rmsnorm runs between the layers:
 *   qkv = rms(residual) · Wqkv;  ...;  residual += attn · Wo
 *   gate_up = rms(residual) · Wgu;  act = ...;  residual += act · Wdown
 * Without per-head q/k norms, q and k weight rows are in rope-pair order
 * (weights.c), so rope turns GPT-J pairs, and where the backend can the
 * q/k/v matmul turns them itself (matmul's rope): no rope call then, and
 * it writes k and v into the caches too (matmul's kv): no kv_append; and
 * where it can, gate/up's matmul writes act itself (matmul's glu): no
 * gate_up, no swiglu call.
 *
 * With several ranks (tensor parallelism), each rank runs these calls on
 * its heads and intermediate columns, so its o and down outputs are partial
 * sums: an all-reduce completes them before the residual add, and every
 * rank keeps the whole residual. The ranks go in lockstep from one
 * collective to the next; lm_head gives each rank its vocabulary columns of
 * the logits, gathered on rank 0.
 */
#include <math.h>
#include <string.h>

#include "model_internal.h"

typedef struct step_tensors {
  gllmk_tensor ids, positions, slots, q_starts, seq_lens, last_rows, block_table;
} step_tensors;

static gllmk_status i32_view(const session_shard *s, uint64_t offset, int32_t ndim,
                             const int64_t *shape, gllmk_tensor *out) {
  return gllmk_tensor_make(s->step_buffer, offset * 4, GLLMK_I32, ndim, shape, out);
}

static gllmk_status make_step_tensors(const session_shard *s, uint32_t max_blocks_per_seq,
                                      const step_layout *l, step_tensors *t) {
  const int64_t tokens = l->tokens, seqs = l->seqs, starts = l->seqs + 1;
  const int64_t table[2] = {seqs, max_blocks_per_seq};
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

static gllmk_matmul_args linear_args(const gllmk_tensor *out, const gllmk_tensor *a,
                                     const gllmk_tensor *w, const gllmk_tensor *bias,
                                     bool has_bias) {
  return (gllmk_matmul_args){.out = out, .a = a, .b = w, .bias = has_bias ? bias : NULL,
                             .alpha = 1.0f, .b_layout = GLLMK_B_NK};
}

static gllmk_status linear(gllmk_context *ctx, const gllmk_tensor *out, const gllmk_tensor *a,
                           const gllmk_tensor *w, const gllmk_tensor *bias, bool has_bias) {
  gllmk_matmul_args args = linear_args(out, a, w, bias, has_bias);
  return gllmk_matmul(ctx, &args);
}

/* One rank's part of a forward. */
typedef struct pass {
  session_shard *shard;
  const model_shard *weights;
  const model_config *c; /* the rank's share */
  float eps;
  int64_t t; /* tokens */
  uint32_t prompt_rows; /* step_layout's */
  bool fused; /* norms inside q/k/v and gate/up, residual adds inside o and down */
  bool rope_fused; /* fused, and q/k/v's matmul turns q and k too (q, k: views of qkv) */
  bool kv_fused;   /* rope_fused, and q/k/v's matmul writes k and v into the caches too */
  bool glu_fused;  /* fused, and gate/up's matmul writes silu(gate) * up (act) itself */
  step_tensors idx;
  /* q, k: views of qk, or of qkv with rope_fused */
  gllmk_tensor residual, normed, qkv, qk, q, k, attn, attn_flat, proj, gate_up, act;
  gllmk_rope_args rope; /* rope's settings (pointing into this pass); out and x unset */
} pass;

/* out = the layer's normed input · w (+ bias); fused, rms(residual) · w. */
static gllmk_matmul_args input_args(const pass *p, bool fused, const gllmk_tensor *out,
                                    const gllmk_tensor *w, const gllmk_tensor *bias, bool has_bias) {
  gllmk_matmul_args args = linear_args(out, fused ? &p->residual : &p->normed, w, bias, has_bias);
  if (fused) {
    args.a_norm = GLLMK_A_NORM_RMS;
    args.a_norm_eps = p->eps;
  }
  return args;
}

static gllmk_status project_input(const pass *p, const gllmk_tensor *out, const gllmk_tensor *w,
                                  const gllmk_tensor *bias, bool has_bias) {
  gllmk_matmul_args args = input_args(p, p->fused, out, w, bias, has_bias);
  return gllmk_matmul(p->shard->context, &args);
}

/* q/k/v's matmul that also turns q's and k's heads (rope_fused) and, with
 * kv, writes k and v into layer `index`'s caches (kv_fused). */
static gllmk_matmul_args qkv_rope_args(const pass *p, uint32_t index, bool kv) {
  const layer_weights *w = &p->weights->layers[index];
  gllmk_matmul_args args = input_args(p, true, &p->qkv, &w->qkv, &w->qkv_bias, w->has_qkv_bias);
  args.rope_dim = p->rope.rotary_dim;
  args.rope_head_dim = (int32_t)p->c->head_dim;
  args.rope_columns = (int32_t)((p->c->heads + p->c->kv_heads) * p->c->head_dim);
  args.rope_theta = p->rope.theta;
  args.rope_positions = p->rope.positions;
  args.rope_inv_freq = p->rope.inv_freq;
  if (kv) {
    args.kv_first = (int32_t)(p->c->heads * p->c->head_dim);
    args.kv_k_cache = &p->shard->k_cache[index];
    args.kv_v_cache = &p->shard->v_cache[index];
    args.kv_slots = &p->idx.slots;
  }
  return args;
}

/* gate/up's matmul that also joins its halves into act (glu_fused). */
static gllmk_matmul_args gate_up_glu_args(const pass *p, const layer_weights *w) {
  gllmk_matmul_args args = input_args(p, true, &p->act, &w->gate_up, &w->gate_up_bias, w->has_mlp_bias);
  args.glu = GLLMK_GLU_SWIGLU;
  return args;
}

/* The o or down projection of a: into proj (a partial sum with several
 * ranks); fused, added into the residual instead (rank 0's with several
 * ranks, whose all-reduce then adds the other ranks' proj into every
 * residual: see reduce_proj). */
static gllmk_status project_output(const pass *p, uint32_t rank, const gllmk_tensor *a,
                                   const gllmk_tensor *w, const gllmk_tensor *bias, bool has_bias) {
  const bool into_residual = p->fused && rank == 0;
  gllmk_matmul_args args = linear_args(into_residual ? &p->residual : &p->proj, a, w, bias, has_bias);
  if (into_residual) args.beta = 1.0f;
  return gllmk_matmul(p->shard->context, &args);
}

/* q and k with their positions (rope) from qkv into qk: one rope over q's
 * and k's heads together, which sit side by side in both. With Qwen3's
 * per-head norms, each part is copied, normed and rotated apart. */
static gllmk_status position_heads(const pass *p, const layer_weights *w) {
  gllmk_context *ctx = p->shard->context;
  const int64_t d = p->c->head_dim, hq = p->c->heads, hkv = p->c->kv_heads;
  gllmk_rope_args rope = p->rope;
  if (!p->c->qk_norm) {
    gllmk_tensor q_and_k;
    MODEL_TRY(head_view(&p->qkv, 0, hq + hkv, d, &q_and_k));
    rope.out = &p->qk;
    rope.x = &q_and_k;
    return gllmk_rope(ctx, &rope);
  }
  const struct { int64_t first, heads; const gllmk_tensor *out, *norm; } parts[2] = {
      {0, hq, &p->q, &w->q_norm}, {hq * d, hkv, &p->k, &w->k_norm}};
  for (int i = 0; i < 2; i++) {
    gllmk_tensor view;
    MODEL_TRY(head_view(&p->qkv, parts[i].first, parts[i].heads, d, &view));
    MODEL_TRY(gllmk_copy(ctx, &(gllmk_copy_args){.out = parts[i].out, .src = &view}));
    MODEL_TRY(gllmk_rmsnorm(ctx, &(gllmk_rmsnorm_args){.out = parts[i].out, .x = parts[i].out,
                                                      .weight = parts[i].norm, .eps = p->eps}));
    rope.out = rope.x = parts[i].out;
    MODEL_TRY(gllmk_rope(ctx, &rope));
  }
  return GLLMK_OK;
}

/* [T, H, D] rows of `seqs` sequences of equal length as [seqs, T / seqs, H, D]. */
static void by_sequence(const gllmk_tensor *t, int64_t seqs, gllmk_tensor *out) {
  *out = *t;
  out->ndim = 4;
  out->shape[0] = seqs;
  out->shape[1] = t->shape[0] / seqs;
  out->strides[0] = t->strides[0] * out->shape[1];
  out->strides[1] = t->strides[0];
  for (int i = 1; i < 3; i++) {
    out->shape[i + 1] = t->shape[i];
    out->strides[i + 1] = t->strides[i];
  }
}

/* Prompts from position 0 attend only to their own tokens: causal attention
 * over this step's q, k and v, the backends' prefill kernel, which the
 * paged one (one query row at a time) is not. */
static gllmk_status prompt_attention(const pass *p, const gllmk_tensor *v, float scale) {
  const int64_t seqs = p->t / p->prompt_rows;
  gllmk_tensor q4, k4, v4, out4;
  by_sequence(&p->q, seqs, &q4);
  by_sequence(&p->k, seqs, &k4);
  by_sequence(v, seqs, &v4);
  by_sequence(&p->attn, seqs, &out4);
  return gllmk_attention(p->shard->context, &(gllmk_attention_args){
      .out = &out4, .q = &q4, .k = &k4, .v = &v4, .causal = 1, .scale = scale});
}

/* From the normed input to the attention's output, attn (o's input). */
static gllmk_status attention_block(const pass *p, uint32_t index) {
  gllmk_context *ctx = p->shard->context;
  const layer_weights *w = &p->weights->layers[index];
  int64_t d = p->c->head_dim, hq = p->c->heads, hkv = p->c->kv_heads;
  const float scale = (float)(1.0 / sqrt((double)d));
  gllmk_tensor v_view;
  MODEL_TRY(head_view(&p->qkv, (hq + hkv) * d, hkv, d, &v_view));
  if (p->rope_fused) {
    gllmk_matmul_args args = qkv_rope_args(p, index, p->kv_fused);
    MODEL_TRY(gllmk_matmul(ctx, &args));
  } else {
    MODEL_TRY(project_input(p, &p->qkv, &w->qkv, &w->qkv_bias, w->has_qkv_bias));
    MODEL_TRY(position_heads(p, w));
  }
  if (!p->kv_fused)
    MODEL_TRY(gllmk_kv_append(ctx, &(gllmk_kv_append_args){
        .k_cache = &p->shard->k_cache[index], .v_cache = &p->shard->v_cache[index], .k = &p->k,
        .v = &v_view, .slots = &p->idx.slots}));
  if (p->prompt_rows) MODEL_TRY(prompt_attention(p, &v_view, scale));
  else MODEL_TRY(gllmk_paged_attention(ctx, &(gllmk_paged_attention_args){
      .out = &p->attn, .q = &p->q, .k_cache = &p->shard->k_cache[index],
      .v_cache = &p->shard->v_cache[index], .block_table = &p->idx.block_table,
      .q_starts = &p->idx.q_starts, .seq_lens = &p->idx.seq_lens,
      .scale = scale}));
  return GLLMK_OK;
}

/* residual += proj; normed = rmsnorm(residual) * weight. */
static gllmk_status add_norm(const pass *p, const gllmk_tensor *weight) {
  return gllmk_add_rmsnorm(p->shard->context, &(gllmk_add_rmsnorm_args){
      .out = &p->normed, .residual = &p->residual, .x = &p->proj, .weight = weight,
      .eps = p->eps});
}

/* After the attention's residual add: the MLP up to the down projection's
 * input, act. */
static gllmk_status mlp_block(const pass *p, uint32_t index) {
  gllmk_context *ctx = p->shard->context;
  const layer_weights *w = &p->weights->layers[index];
  int64_t inter = p->c->intermediate;
  gllmk_tensor gate, up;
  if (!p->fused) MODEL_TRY(add_norm(p, &w->post_norm));
  if (p->glu_fused) {
    gllmk_matmul_args args = gate_up_glu_args(p, w);
    return gllmk_matmul(ctx, &args);
  }
  MODEL_TRY(project_input(p, &p->gate_up, &w->gate_up, &w->gate_up_bias, w->has_mlp_bias));
  MODEL_TRY(gllmk_tensor_slice(&p->gate_up, 1, 0, inter, 1, &gate));
  MODEL_TRY(gllmk_tensor_slice(&p->gate_up, 1, inter, inter, 1, &up));
  return gllmk_swiglu(ctx, &(gllmk_swiglu_args){.out = &p->act, .gate = &gate, .up = &up});
}

/* q and k in qk: side by side in each row, so that one rope writes both;
 * with per-head norms (which need rows of one stride) one after the other. */
static gllmk_status split_qk(pass *p) {
  const int64_t t = p->t, hq = p->c->heads, hkv = p->c->kv_heads, d = p->c->head_dim;
  if (!p->c->qk_norm) {
    MODEL_TRY(gllmk_tensor_slice(&p->qk, 1, 0, hq, 1, &p->q));
    return gllmk_tensor_slice(&p->qk, 1, hq, hkv, 1, &p->k);
  }
  gllmk_tensor flat, part;
  MODEL_TRY(gllmk_tensor_reshape(&p->qk, 1, (const int64_t[1]){t * (hq + hkv) * d}, &flat));
  MODEL_TRY(gllmk_tensor_slice(&flat, 0, 0, t * hq * d, 1, &part));
  MODEL_TRY(gllmk_tensor_reshape(&part, 3, (const int64_t[3]){t, hq, d}, &p->q));
  MODEL_TRY(gllmk_tensor_slice(&flat, 0, t * hq * d, t * hkv * d, 1, &part));
  return gllmk_tensor_reshape(&part, 3, (const int64_t[3]){t, hkv, d}, &p->k);
}

/* Whether the backend takes the norm into q/k/v's matmul at this many rows
 * (the other fused calls have the same shapes or need nothing new). */
static bool fusion_supported(const pass *p) {
  const layer_weights *w = &p->weights->layers[0];
  gllmk_matmul_args args = input_args(p, true, &p->qkv, &w->qkv, &w->qkv_bias, w->has_qkv_bias);
  return gllmk_op_supported(p->shard->context, GLLMK_OP_matmul, &args, sizeof args) == GLLMK_OK;
}

/* Whether q/k/v's matmul can also turn q and k at this many rows: with the
 * rows in pair order, fused, and the backend taking it (cuda: one row). */
static bool rope_fusion_supported(const pass *p, bool rope_paired) {
  if (!rope_paired || !p->fused) return false;
  gllmk_matmul_args args = qkv_rope_args(p, 0, false);
  return gllmk_op_supported(p->shard->context, GLLMK_OP_matmul, &args, sizeof args) == GLLMK_OK;
}

/* Whether that matmul can also write k and v into the caches (kv_append's work). */
static bool kv_fusion_supported(const pass *p) {
  if (!p->rope_fused) return false;
  gllmk_matmul_args args = qkv_rope_args(p, 0, true);
  return gllmk_op_supported(p->shard->context, GLLMK_OP_matmul, &args, sizeof args) == GLLMK_OK;
}

/* Whether gate/up's matmul can also join its halves (cuda: one row). */
static bool glu_fusion_supported(const pass *p) {
  if (!p->fused) return false;
  gllmk_matmul_args args = gate_up_glu_args(p, &p->weights->layers[0]);
  return gllmk_op_supported(p->shard->context, GLLMK_OP_matmul, &args, sizeof args) == GLLMK_OK;
}

/* rope's settings: NeoX pairs, or GPT-J ones once the rows are in pair order. */
static gllmk_rope_args rope_settings(const pass *p, bool rope_paired) {
  const bool scaled = p->c->rope_scaling != ROPE_SCALING_NONE;
  return (gllmk_rope_args){.positions = &p->idx.positions, .theta = (float)p->c->rope_theta,
                           .rotary_dim = (int32_t)p->c->rotary_dim,
                           .style = rope_paired ? GLLMK_ROPE_GPTJ : GLLMK_ROPE_NEOX,
                           .inv_freq = scaled ? &p->weights->inv_freq : NULL};
}

static gllmk_status make_pass(session_state *s, uint32_t rank, const step_layout *l, pass *p) {
  session_shard *shard = &s->shards[rank];
  const scratch *x = &shard->x;
  memset(p, 0, sizeof *p);
  p->shard = shard;
  p->weights = &s->model->shards[rank];
  p->c = &s->model->local;
  p->eps = (float)p->c->rms_eps;
  p->t = l->tokens;
  p->prompt_rows = l->prompt_rows;
  MODEL_TRY(make_step_tensors(shard, s->max_blocks_per_seq, l, &p->idx));
  const struct { const gllmk_tensor *from; gllmk_tensor *to; } views[] = {
      {&x->residual, &p->residual}, {&x->normed, &p->normed}, {&x->qkv, &p->qkv},
      {&x->qk, &p->qk}, {&x->attn, &p->attn},
      {&x->proj, &p->proj}, {&x->gate_up, &p->gate_up}, {&x->act, &p->act}};
  for (size_t i = 0; i < sizeof views / sizeof views[0]; i++)
    MODEL_TRY(rows(views[i].from, p->t, views[i].to));
  MODEL_TRY(as_matrix(&p->attn, p->t, p->c->heads * p->c->head_dim, &p->attn_flat));
  p->fused = fusion_supported(p);
  p->rope = rope_settings(p, s->model->rope_paired);
  p->rope_fused = rope_fusion_supported(p, s->model->rope_paired);
  p->kv_fused = kv_fusion_supported(p);
  p->glu_fused = glu_fusion_supported(p);
  if (!p->rope_fused) return split_qk(p);
  MODEL_TRY(head_view(&p->qkv, 0, p->c->heads, p->c->head_dim, &p->q));
  return head_view(&p->qkv, p->c->heads * p->c->head_dim, p->c->kv_heads, p->c->head_dim, &p->k);
}

/* Every rank's o or down output summed (one rank: nothing to do): in place
 * into proj, or, fused, into every rank's residual from rank 0's residual
 * (which holds its own part already) and the other ranks' proj. */
static gllmk_status reduce_proj(const session_state *s, const pass *passes) {
  uint32_t ranks = s->model->ranks;
  if (ranks == 1) return GLLMK_OK;
  gllmk_tensor ins[MODEL_MAX_RANKS], outs[MODEL_MAX_RANKS];
  for (uint32_t r = 0; r < ranks; r++) {
    const bool fused = passes[r].fused;
    ins[r] = fused && r == 0 ? passes[r].residual : passes[r].proj;
    outs[r] = fused ? passes[r].residual : passes[r].proj;
  }
  return gllmk_all_reduce(s->model->comm, outs, ins);
}

/* normed = rmsnorm(residual) * weight. */
static gllmk_status norm_residual(const pass *p, const gllmk_tensor *weight) {
  return gllmk_rmsnorm(p->shard->context, &(gllmk_rmsnorm_args){.out = &p->normed, .x = &p->residual,
                                                              .weight = weight, .eps = p->eps});
}

static gllmk_status embed(const pass *p) {
  gllmk_context *ctx = p->shard->context;
  MODEL_TRY(gllmk_embedding(ctx, &(gllmk_embedding_args){.out = &p->residual,
                                                         .table = &p->weights->embed,
                                                         .ids = &p->idx.ids}));
  if (p->fused) return GLLMK_OK;
  return norm_residual(p, &p->weights->layers[0].input_norm);
}

/* Each sequence's last row through lm_head (with one new token per
 * sequence that is every row): into `out`, [seqs, the rank's vocabulary]. */
static gllmk_status lm_head(const pass *p, const step_layout *l, const gllmk_tensor *out) {
  gllmk_context *ctx = p->shard->context;
  gllmk_tensor last = p->normed;
  if (l->tokens != l->seqs) {
    MODEL_TRY(rows(&p->shard->x.last, l->seqs, &last));
    MODEL_TRY(gllmk_embedding(ctx, &(gllmk_embedding_args){.out = &last, .table = &p->normed,
                                                           .ids = &p->idx.last_rows}));
  }
  return linear(ctx, out, &last, &p->weights->lm_head, NULL, false);
}

/* Rank 0's logits [S, vocab] from every rank's columns: an all-gather
 * into [ranks, S, vocab / ranks], then a copy that puts rank r's columns at
 * r * vocab / ranks. */
static gllmk_status gather_logits(session_state *s, const step_layout *l) {
  uint32_t ranks = s->model->ranks;
  int64_t seqs = l->seqs, part = s->model->local.vocab;
  const int64_t gathered_shape[3] = {ranks, seqs, part}, by_rank[3] = {seqs, ranks, part};
  gllmk_tensor parts[MODEL_MAX_RANKS], gathered[MODEL_MAX_RANKS], logits, src;
  for (uint32_t r = 0; r < ranks; r++) {
    MODEL_TRY(rows(&s->shards[r].logits_part, seqs, &parts[r]));
    MODEL_TRY(gllmk_tensor_make(s->shards[r].gathered, 0, (gllmk_dtype)s->model->dtype, 3,
                                gathered_shape, &gathered[r]));
  }
  MODEL_TRY(gllmk_all_gather(s->model->comm, gathered, parts));
  MODEL_TRY(rows(&s->shards[0].x.logits, seqs, &logits));
  MODEL_TRY(gllmk_tensor_reshape(&logits, 3, by_rank, &logits));
  MODEL_TRY(gllmk_tensor_permute(&gathered[0], (const int32_t[3]){1, 0, 2}, &src));
  return gllmk_copy(s->shards[0].context, &(gllmk_copy_args){.out = &logits, .src = &src});
}

static gllmk_status logits(session_state *s, const pass *passes, const step_layout *l) {
  uint32_t ranks = s->model->ranks;
  gllmk_tensor out;
  if (ranks == 1) {
    MODEL_TRY(rows(&s->shards[0].x.logits, l->seqs, &out));
    return lm_head(&passes[0], l, &out);
  }
  for (uint32_t r = 0; r < ranks; r++) {
    MODEL_TRY(rows(&s->shards[r].logits_part, l->seqs, &out));
    MODEL_TRY(lm_head(&passes[r], l, &out));
  }
  return gather_logits(s, l);
}

/* After the last layer: normed = the final norm of the residual (whose
 * weight stays apart: lm_head may be the embedding). Unfused, with the add
 * of the last down projection. */
static gllmk_status final_norm(const pass *p) {
  if (!p->fused) return add_norm(p, &p->weights->final_norm);
  return norm_residual(p, &p->weights->final_norm);
}

/* The ranks in lockstep: each runs up to the next collective. */
static gllmk_status layers(session_state *s, const pass *passes) {
  const model_state *m = s->model;
  const uint32_t last = m->config.layers - 1;
  for (uint32_t i = 0; i <= last; i++) {
    for (uint32_t r = 0; r < m->ranks; r++) {
      const layer_weights *w = &passes[r].weights->layers[i];
      MODEL_TRY(attention_block(&passes[r], i));
      MODEL_TRY(project_output(&passes[r], r, &passes[r].attn_flat, &w->o, &w->o_bias, w->has_o_bias));
    }
    MODEL_TRY(reduce_proj(s, passes));
    for (uint32_t r = 0; r < m->ranks; r++) {
      const layer_weights *w = &passes[r].weights->layers[i];
      MODEL_TRY(mlp_block(&passes[r], i));
      MODEL_TRY(project_output(&passes[r], r, &passes[r].act, &w->down, &w->down_bias,
                               w->has_down_bias));
    }
    MODEL_TRY(reduce_proj(s, passes));
    for (uint32_t r = 0; r < m->ranks; r++) {
      if (i == last) MODEL_TRY(final_norm(&passes[r]));
      else if (!passes[r].fused) MODEL_TRY(add_norm(&passes[r], &passes[r].weights->layers[i + 1].input_norm));
    }
  }
  return GLLMK_OK;
}

gllmk_status forward_enqueue(session_state *s, const step_layout *l) {
  pass passes[MODEL_MAX_RANKS];
  for (uint32_t r = 0; r < s->model->ranks; r++) {
    MODEL_TRY(make_pass(s, r, l, &passes[r]));
    MODEL_TRY(embed(&passes[r]));
  }
  MODEL_TRY(layers(s, passes));
  return logits(s, passes, l);
}
