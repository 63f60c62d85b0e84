/*
 * bench_ops_rows.c - row-wise ops: elementwise, norms, softmax, rope,
 * embedding, argmax and sample. Each op has a setup (tensors, host data,
 * bytes), a run (the gllmk call) and a float64 reference of one output row.
 *
 * Case sizes (bench_case): n = row length, m = minimum rows; the rows grow
 * until every streamed tensor is at least DRAM_TENSOR_BYTES. argmax and
 * sample take m rows of n logits as they are.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#define NORM_EPS 1e-5f
#define ROPE_THETA 500000.0f /* Llama 3 */
#define SAMPLE_TEMPERATURE 0.8f
#define SAMPLE_TOP_K 50
#define SAMPLE_TOP_P 0.9f
#define SAMPLE_SEED 1234u

/* ----------------------------------------------------------- helpers */

/* [rows, cols] of the case, rows by the DRAM rule. */
static void streaming_shape(const workload *w, int64_t cols, int64_t shape[2]) {
  shape[0] = dram_rows(cols, w->bcase->dtype, w->bcase->m);
  shape[1] = cols;
}

/* A bandwidth-bound row: shape text of `index`, default bytes, copy ceiling. */
static int streaming_done(workload *w, int index) {
  wl_shape_text(w, index);
  w->bytes = wl_default_bytes(w);
  w->ceiling = CEILING_COPY;
  return 0;
}

/* Row `row` of tensor `index` as doubles in new memory the caller frees;
 * NULL when host memory ran out. */
static double *row_copy(const workload *w, int index, int64_t row) {
  double *values = malloc((size_t)tensor_cols(&w->tensors[index]) * sizeof *values);
  if (values) wl_row(w, index, row, values);
  return values;
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

static double gelu(double x, int kind) {
  if (kind == GLLMK_GELU_ERF) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  double inner = sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + tanh(inner));
}

/* ------------------------------------------------------ copy / cast */

enum { COPY_OUT, COPY_SRC };

static int copy_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_tensor(w, COPY_OUT, "out", w->bcase->dtype2, ROLE_OUT, CHECK_FLOAT, 2, shape) ||
      wl_input(w, COPY_SRC, "src", 2, shape, -4, 4))
    return -1;
  return streaming_done(w, COPY_SRC);
}

static gllmk_status copy_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_copy_args args = {.out = &t[COPY_OUT], .src = &t[COPY_SRC]};
  return gllmk_copy(ctx, &args);
}

static int copy_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  wl_row(w, COPY_SRC, row, expect);
  return 0;
}

const bench_op op_copy = {GLLMK_OP_copy, copy_setup, copy_run, copy_ref, NULL, NULL};

/* --------------------------------------------------------------- add */

enum { ADD_OUT, ADD_A, ADD_B };

static int add_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, ADD_OUT, 2, shape) || wl_input(w, ADD_A, "a", 2, shape, -1, 1) ||
      wl_input(w, ADD_B, "b", 2, shape, -1, 1))
    return -1;
  return streaming_done(w, ADD_OUT);
}

static gllmk_status add_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_add_args args = {.out = &t[ADD_OUT], .a = &t[ADD_A], .b = &t[ADD_B]};
  return gllmk_add(ctx, &args);
}

static int add_ref(const workload *w, int tensor, int64_t row, double *expect) {
  double *b = row_copy(w, ADD_B, row);
  if (!b) return -1;
  wl_row(w, ADD_A, row, expect);
  for (int64_t i = 0; i < tensor_cols(&w->tensors[tensor]); i++) expect[i] += b[i];
  free(b);
  return 0;
}

const bench_op op_add = {GLLMK_OP_add, add_setup, add_run, add_ref, NULL, NULL};

/* ----------------------------------------------------------- mul_add */

enum { FMA_OUT, FMA_A, FMA_B, FMA_C };

static int mul_add_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, FMA_OUT, 2, shape) || wl_input(w, FMA_A, "a", 2, shape, -1, 1) ||
      wl_input(w, FMA_B, "b", 2, shape, -1, 1) || wl_input(w, FMA_C, "c", 2, shape, -1, 1))
    return -1;
  return streaming_done(w, FMA_OUT);
}

static gllmk_status mul_add_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_mul_add_args args = {.out = &t[FMA_OUT], .a = &t[FMA_A], .b = &t[FMA_B], .c = &t[FMA_C]};
  return gllmk_mul_add(ctx, &args);
}

static int mul_add_ref(const workload *w, int tensor, int64_t row, double *expect) {
  double *b = row_copy(w, FMA_B, row), *c = row_copy(w, FMA_C, row);
  if (b && c) {
    wl_row(w, FMA_A, row, expect);
    for (int64_t i = 0; i < tensor_cols(&w->tensors[tensor]); i++)
      expect[i] = expect[i] * b[i] + c[i];
  }
  free(b);
  free(c);
  return b && c ? 0 : -1;
}

const bench_op op_mul_add = {GLLMK_OP_mul_add, mul_add_setup, mul_add_run, mul_add_ref, NULL, NULL};

/* ----------------------------------------------------------- rmsnorm */

enum { RMS_OUT, RMS_X, RMS_W };

static int rmsnorm_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, RMS_OUT, 2, shape) || wl_input(w, RMS_X, "x", 2, shape, -2, 2) ||
      wl_input(w, RMS_W, "weight", 1, &shape[1], 0.5, 1.5))
    return -1;
  return streaming_done(w, RMS_OUT);
}

static gllmk_status rmsnorm_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_rmsnorm_args args = {.out = &t[RMS_OUT], .x = &t[RMS_X], .weight = &t[RMS_W],
                             .eps = NORM_EPS};
  return gllmk_rmsnorm(ctx, &args);
}

/* values = values / sqrt(mean(values^2) + eps) * weight, in place. */
static void rmsnorm_row(double *values, const double *weight, int64_t cols) {
  double sum_sq = 0;
  for (int64_t i = 0; i < cols; i++) sum_sq += values[i] * values[i];
  double inv = 1.0 / sqrt(sum_sq / (double)cols + (double)NORM_EPS);
  for (int64_t i = 0; i < cols; i++) values[i] *= inv * weight[i];
}

static int rmsnorm_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  double *weight = row_copy(w, RMS_W, 0);
  if (!weight) return -1;
  wl_row(w, RMS_X, row, expect);
  rmsnorm_row(expect, weight, tensor_cols(&w->tensors[RMS_X]));
  free(weight);
  return 0;
}

const bench_op op_rmsnorm = {GLLMK_OP_rmsnorm, rmsnorm_setup, rmsnorm_run, rmsnorm_ref, NULL, NULL};

/* ------------------------------------------------------- add_rmsnorm */

enum { ARMS_OUT, ARMS_RESIDUAL, ARMS_X, ARMS_W };

static int add_rmsnorm_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, ARMS_OUT, 2, shape) ||
      wl_tensor(w, ARMS_RESIDUAL, "residual", w->bcase->dtype, ROLE_INOUT, CHECK_FLOAT, 2,
                shape) ||
      wl_input(w, ARMS_X, "x", 2, shape, -1, 1) ||
      wl_input(w, ARMS_W, "weight", 1, &shape[1], 0.5, 1.5))
    return -1;
  wl_fill_uniform(w, ARMS_RESIDUAL, -2, 2);
  return streaming_done(w, ARMS_OUT);
}

static gllmk_status add_rmsnorm_run(gllmk_context *ctx, const workload *w,
                                    const gllmk_tensor *t) {
  (void)w;
  gllmk_add_rmsnorm_args args = {.out = &t[ARMS_OUT], .residual = &t[ARMS_RESIDUAL],
                                 .x = &t[ARMS_X], .weight = &t[ARMS_W], .eps = NORM_EPS};
  return gllmk_add_rmsnorm(ctx, &args);
}

/* The residual after `residual += x`, as the tensor stores it; the norm is
 * of that stored residual. */
static int add_rmsnorm_ref(const workload *w, int tensor, int64_t row, double *expect) {
  int64_t cols = tensor_cols(&w->tensors[ARMS_X]);
  double *x = row_copy(w, ARMS_X, row), *weight = row_copy(w, ARMS_W, 0);
  if (x && weight) {
    wl_row(w, ARMS_RESIDUAL, row, expect);
    for (int64_t i = 0; i < cols; i++)
      expect[i] = dtype_round(w->bcase->dtype, expect[i] + x[i]);
    if (tensor == ARMS_OUT) rmsnorm_row(expect, weight, cols);
  }
  free(x);
  free(weight);
  return x && weight ? 0 : -1;
}

const bench_op op_add_rmsnorm = {GLLMK_OP_add_rmsnorm, add_rmsnorm_setup, add_rmsnorm_run,
                                 add_rmsnorm_ref, NULL, NULL};

/* --------------------------------------------------------- layernorm */

enum { LN_OUT, LN_X, LN_W, LN_B };

static int layernorm_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, LN_OUT, 2, shape) || wl_input(w, LN_X, "x", 2, shape, -1, 3) ||
      wl_input(w, LN_W, "weight", 1, &shape[1], 0.5, 1.5) ||
      wl_input(w, LN_B, "bias", 1, &shape[1], -0.5, 0.5))
    return -1;
  return streaming_done(w, LN_OUT);
}

static gllmk_status layernorm_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_layernorm_args args = {.out = &t[LN_OUT], .x = &t[LN_X], .weight = &t[LN_W],
                               .bias = &t[LN_B], .eps = NORM_EPS};
  return gllmk_layernorm(ctx, &args);
}

static int layernorm_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  int64_t cols = tensor_cols(&w->tensors[LN_X]);
  double *weight = row_copy(w, LN_W, 0), *bias = row_copy(w, LN_B, 0);
  if (weight && bias) {
    wl_row(w, LN_X, row, expect);
    double mean = 0, var = 0;
    for (int64_t i = 0; i < cols; i++) mean += expect[i];
    mean /= (double)cols;
    for (int64_t i = 0; i < cols; i++) var += (expect[i] - mean) * (expect[i] - mean);
    double inv = 1.0 / sqrt(var / (double)cols + (double)NORM_EPS);
    for (int64_t i = 0; i < cols; i++) expect[i] = (expect[i] - mean) * inv * weight[i] + bias[i];
  }
  free(weight);
  free(bias);
  return weight && bias ? 0 : -1;
}

const bench_op op_layernorm = {GLLMK_OP_layernorm, layernorm_setup, layernorm_run,
                               layernorm_ref, NULL, NULL};

/* ----------------------------------------------------------- softmax */

enum { SOFTMAX_OUT, SOFTMAX_X };

static int softmax_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, SOFTMAX_OUT, 2, shape) || wl_input(w, SOFTMAX_X, "x", 2, shape, -8, 8))
    return -1;
  return streaming_done(w, SOFTMAX_OUT);
}

static gllmk_status softmax_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_softmax_args args = {.out = &t[SOFTMAX_OUT], .x = &t[SOFTMAX_X], .scale = 1.0f};
  return gllmk_softmax(ctx, &args);
}

static int softmax_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  int64_t cols = tensor_cols(&w->tensors[SOFTMAX_X]);
  wl_row(w, SOFTMAX_X, row, expect);
  double max = -INFINITY, sum = 0;
  for (int64_t i = 0; i < cols; i++) max = fmax(max, expect[i]);
  for (int64_t i = 0; i < cols; i++) sum += (expect[i] = exp(expect[i] - max));
  for (int64_t i = 0; i < cols; i++) expect[i] /= sum;
  return 0;
}

const bench_op op_softmax = {GLLMK_OP_softmax, softmax_setup, softmax_run, softmax_ref, NULL, NULL};

/* ------------------------------------------------------ silu / gelu */

enum { ACT_OUT, ACT_X, ACT_BIAS };

static int activation_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, ACT_OUT, 2, shape) || wl_input(w, ACT_X, "x", 2, shape, -5, 5)) return -1;
  return streaming_done(w, ACT_OUT);
}

static gllmk_status silu_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_silu_args args = {.out = &t[ACT_OUT], .x = &t[ACT_X]};
  return gllmk_silu(ctx, &args);
}

static int silu_ref(const workload *w, int tensor, int64_t row, double *expect) {
  wl_row(w, ACT_X, row, expect);
  for (int64_t i = 0; i < tensor_cols(&w->tensors[tensor]); i++) expect[i] = silu(expect[i]);
  return 0;
}

const bench_op op_silu = {GLLMK_OP_silu, activation_setup, silu_run, silu_ref, NULL, NULL};

/* gelu: the exact (erf) form; add_gelu below uses the tanh form. */
static gllmk_status gelu_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_gelu_args args = {.out = &t[ACT_OUT], .x = &t[ACT_X], .kind = GLLMK_GELU_ERF};
  return gllmk_gelu(ctx, &args);
}

static int gelu_ref(const workload *w, int tensor, int64_t row, double *expect) {
  wl_row(w, ACT_X, row, expect);
  for (int64_t i = 0; i < tensor_cols(&w->tensors[tensor]); i++)
    expect[i] = gelu(expect[i], GLLMK_GELU_ERF);
  return 0;
}

const bench_op op_gelu = {GLLMK_OP_gelu, activation_setup, gelu_run, gelu_ref, NULL, NULL};

static int add_gelu_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, ACT_OUT, 2, shape) || wl_input(w, ACT_X, "x", 2, shape, -4, 4) ||
      wl_input(w, ACT_BIAS, "bias", 1, &shape[1], -1, 1))
    return -1;
  return streaming_done(w, ACT_OUT);
}

static gllmk_status add_gelu_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_add_gelu_args args = {.out = &t[ACT_OUT], .x = &t[ACT_X], .bias = &t[ACT_BIAS],
                              .kind = GLLMK_GELU_TANH};
  return gllmk_add_gelu(ctx, &args);
}

static int add_gelu_ref(const workload *w, int tensor, int64_t row, double *expect) {
  double *bias = row_copy(w, ACT_BIAS, 0);
  if (!bias) return -1;
  wl_row(w, ACT_X, row, expect);
  for (int64_t i = 0; i < tensor_cols(&w->tensors[tensor]); i++)
    expect[i] = gelu(expect[i] + bias[i], GLLMK_GELU_TANH);
  free(bias);
  return 0;
}

const bench_op op_add_gelu = {GLLMK_OP_add_gelu, add_gelu_setup, add_gelu_run, add_gelu_ref,
                              NULL, NULL};

/* ------------------------------------------------------------ swiglu */

enum { SWIGLU_OUT, SWIGLU_GATE, SWIGLU_UP };

static int swiglu_setup(workload *w) {
  int64_t shape[2];
  streaming_shape(w, w->bcase->n, shape);
  if (wl_output(w, SWIGLU_OUT, 2, shape) || wl_input(w, SWIGLU_GATE, "gate", 2, shape, -5, 5) ||
      wl_input(w, SWIGLU_UP, "up", 2, shape, -2, 2))
    return -1;
  return streaming_done(w, SWIGLU_OUT);
}

static gllmk_status swiglu_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_swiglu_args args = {.out = &t[SWIGLU_OUT], .gate = &t[SWIGLU_GATE], .up = &t[SWIGLU_UP]};
  return gllmk_swiglu(ctx, &args);
}

static int swiglu_ref(const workload *w, int tensor, int64_t row, double *expect) {
  double *up = row_copy(w, SWIGLU_UP, row);
  if (!up) return -1;
  wl_row(w, SWIGLU_GATE, row, expect);
  for (int64_t i = 0; i < tensor_cols(&w->tensors[tensor]); i++)
    expect[i] = silu(expect[i]) * up[i];
  free(up);
  return 0;
}

const bench_op op_swiglu = {GLLMK_OP_swiglu, swiglu_setup, swiglu_run, swiglu_ref, NULL, NULL};

/* -------------------------------------------------------------- rope */

enum { ROPE_OUT, ROPE_X, ROPE_POS };

/* q of [tokens, heads, head_dim] at positions 0, 1, 2, ... (a prefill). */
static int rope_setup(workload *w) {
  int64_t tokens = dram_rows(MODEL_HEADS * MODEL_HEAD_DIM, w->bcase->dtype, w->bcase->m);
  int64_t shape[3] = {tokens, MODEL_HEADS, MODEL_HEAD_DIM};
  if (wl_output(w, ROPE_OUT, 3, shape) || wl_input(w, ROPE_X, "x", 3, shape, -1, 1) ||
      wl_tensor(w, ROPE_POS, "positions", GLLMK_I32, ROLE_IN, CHECK_NONE, 1, &tokens))
    return -1;
  int32_t *positions = w->tensors[ROPE_POS].host;
  for (int64_t i = 0; i < tokens; i++) positions[i] = (int32_t)i;
  return streaming_done(w, ROPE_OUT);
}

static gllmk_status rope_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_rope_args args = {.out = &t[ROPE_OUT], .x = &t[ROPE_X], .positions = &t[ROPE_POS],
                          .theta = ROPE_THETA, .rotary_dim = MODEL_HEAD_DIM,
                          .style = GLLMK_ROPE_NEOX};
  return gllmk_rope(ctx, &args);
}

/* Row = one (token, head); NeoX pairs (j, j + dim/2) turn by pos * theta^(-2j/dim). */
static int rope_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  const int32_t *positions = w->tensors[ROPE_POS].host;
  double pos = positions[row / MODEL_HEADS];
  int half = MODEL_HEAD_DIM / 2;
  wl_row(w, ROPE_X, row, expect);
  for (int j = 0; j < half; j++) {
    double angle = pos * pow((double)ROPE_THETA, -2.0 * j / MODEL_HEAD_DIM);
    double x1 = expect[j], x2 = expect[j + half];
    expect[j] = x1 * cos(angle) - x2 * sin(angle);
    expect[j + half] = x2 * cos(angle) + x1 * sin(angle);
  }
  return 0;
}

const bench_op op_rope = {GLLMK_OP_rope, rope_setup, rope_run, rope_ref, NULL, NULL};

/* --------------------------------------------------------- embedding */

enum { EMB_OUT, EMB_TABLE, EMB_IDS };

/* Case: n = hidden, k = vocab, m = minimum tokens. */
static int embedding_setup(workload *w) {
  const bench_case *c = w->bcase;
  int64_t tokens = dram_rows(c->n, c->dtype, c->m);
  int64_t out_shape[2] = {tokens, c->n}, table_shape[2] = {c->k, c->n};
  if (wl_output(w, EMB_OUT, 2, out_shape) ||
      wl_input(w, EMB_TABLE, "table", 2, table_shape, -1, 1) ||
      wl_tensor(w, EMB_IDS, "ids", GLLMK_I32, ROLE_IN, CHECK_NONE, 1, &tokens))
    return -1;
  int32_t *ids = w->tensors[EMB_IDS].host;
  for (int64_t i = 0; i < tokens; i++) /* scattered over the table, all in range */
    ids[i] = (int32_t)(((uint64_t)i * 2654435761u + (uint64_t)w->seed) % (uint64_t)c->k);
  snprintf(w->shape, sizeof w->shape, "%lld ids of [%lld, %lld]", (long long)tokens,
           (long long)c->k, (long long)c->n);
  /* Only the looked-up rows of the table are read. */
  w->bytes = (double)w->tensors[EMB_IDS].bytes + 2.0 * (double)w->tensors[EMB_OUT].bytes;
  w->ceiling = CEILING_COPY;
  return 0;
}

static gllmk_status embedding_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_embedding_args args = {.out = &t[EMB_OUT], .table = &t[EMB_TABLE], .ids = &t[EMB_IDS]};
  return gllmk_embedding(ctx, &args);
}

static int embedding_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  const int32_t *ids = w->tensors[EMB_IDS].host;
  wl_row(w, EMB_TABLE, ids[row], expect);
  return 0;
}

const bench_op op_embedding = {GLLMK_OP_embedding, embedding_setup, embedding_run,
                               embedding_ref, NULL, NULL};

/* ---------------------------------------------------- argmax, sample */

enum { TOKEN_OUT, TOKEN_LOGITS };

/* m rows of n logits; out I32 [m]. */
static int token_setup(workload *w, bench_check check) {
  const bench_case *c = w->bcase;
  int64_t shape[2] = {c->m, c->n};
  if (wl_tensor(w, TOKEN_OUT, "out", GLLMK_I32, ROLE_OUT, check, 1, shape) ||
      wl_input(w, TOKEN_LOGITS, "logits", 2, shape, -8, 8))
    return -1;
  return streaming_done(w, TOKEN_LOGITS);
}

static int argmax_setup(workload *w) { return token_setup(w, CHECK_EXACT); }

static gllmk_status argmax_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_argmax_args args = {.out = &t[TOKEN_OUT], .logits = &t[TOKEN_LOGITS]};
  return gllmk_argmax(ctx, &args);
}

/* out is 1-D, so its only row holds every row's token; lowest index on ties. */
static int argmax_ref(const workload *w, int tensor, int64_t row, double *expect) {
  (void)tensor;
  (void)row;
  const bench_tensor *logits = &w->tensors[TOKEN_LOGITS];
  int64_t cols = tensor_cols(logits);
  for (int64_t r = 0; r < tensor_rows(logits); r++) {
    int64_t best = 0;
    double best_value = dtype_get(logits->dtype, logits->host, r * cols);
    for (int64_t i = 1; i < cols; i++) {
      double value = dtype_get(logits->dtype, logits->host, r * cols + i);
      if (value > best_value) {
        best_value = value;
        best = i;
      }
    }
    expect[r] = (double)best;
  }
  return 0;
}

const bench_op op_argmax = {GLLMK_OP_argmax, argmax_setup, argmax_run, argmax_ref, NULL, NULL};

static int sample_setup(workload *w) { return token_setup(w, CHECK_VALIDATE); }

static gllmk_status sample_run(gllmk_context *ctx, const workload *w, const gllmk_tensor *t) {
  (void)w;
  gllmk_sample_args args = {.out = &t[TOKEN_OUT], .logits = &t[TOKEN_LOGITS],
                            .temperature = SAMPLE_TEMPERATURE, .top_p = SAMPLE_TOP_P,
                            .min_p = 0.0f, .top_k = SAMPLE_TOP_K, .seed = SAMPLE_SEED,
                            .offset = 0};
  return gllmk_sample(ctx, &args);
}

/* Whether `token` may come out of top-k then top-p sampling of row `row`.
 * top-p is tested on the probabilities before top-k renormalises them,
 * the larger of the two nuclei, so either convention passes. */
static int token_allowed(const bench_tensor *logits, int64_t row, int32_t token) {
  int64_t cols = tensor_cols(logits), first = row * cols;
  if (token < 0 || token >= cols) return 0;
  double max = -INFINITY, sum = 0, above = 0;
  double chosen = dtype_get(logits->dtype, logits->host, first + token);
  int64_t rank = 0; /* logits strictly larger than the token's */
  for (int64_t i = 0; i < cols; i++)
    max = fmax(max, dtype_get(logits->dtype, logits->host, first + i));
  for (int64_t i = 0; i < cols; i++) {
    double value = dtype_get(logits->dtype, logits->host, first + i);
    double p = exp((value - max) / SAMPLE_TEMPERATURE);
    sum += p;
    if (value > chosen) {
      rank++;
      above += p;
    }
  }
  return rank < SAMPLE_TOP_K && above / sum < SAMPLE_TOP_P + 1e-4;
}

static double sample_validate(const workload *w, int tensor, const void *raw) {
  const bench_tensor *logits = &w->tensors[TOKEN_LOGITS];
  int64_t rows = tensor_rows(logits), bad = 0;
  (void)tensor;
  for (int64_t r = 0; r < rows; r++)
    bad += !token_allowed(logits, r, ((const int32_t *)raw)[r]);
  return (double)bad / (double)rows;
}

const bench_op op_sample = {GLLMK_OP_sample, sample_setup, sample_run, NULL, sample_validate, NULL};
