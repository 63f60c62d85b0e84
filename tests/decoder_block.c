/*
 * decoder_block.c - one Llama-style decoder layer (a prefill) computed with
 * gllmk ops the way an inference engine chains them, against the same math
 * in float64:
 *
 *   h   = rmsnorm(x)                        residual = x
 *   q,k,v = h Wq^T, h Wk^T, h Wv^T          rope(q), rope(k) in place
 *   a   = attention(q, k, v), causal, GQA
 *   residual += a Wo^T ; h2 = rmsnorm(residual)          (add_rmsnorm)
 *   [gate | up] = h2 Wgu^T                  (one matmul; two column slices)
 *   residual += swiglu(gate, up) Wd^T       (matmul with beta = 1)
 *
 * The ops are each checked alone by the conformance suite; this catches
 * what only their combination shows: views and reshapes between ops, in-place
 * updates, the rounding of every intermediate to the dtype, GQA head mapping
 * against the rope layout. The residual is read and judged after each half.
 * Inputs are rounded to the dtype before the reference sees them; the
 * reference keeps its intermediates in float64, so the tolerances allow for
 * the device rounding each intermediate to the dtype.
 */
#include "decoder_block.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"
#include "testlib.h"

typedef struct block_dims {
  int64_t tokens, hidden, q_heads, kv_heads, head_dim, ffn;
} block_dims;

/* Small: emulated devices and --quick. Full: head_dim 128 and more than 128
 * tokens, so GPU kernels run whole and partial tiles. */
static const block_dims small_dims = {13, 128, 4, 2, 32, 224};
static const block_dims full_dims = {136, 768, 6, 2, 128, 2048};

static const double rms_eps = 1e-5;
static const double rope_theta = 500000.0;

enum { MAX_BUFFERS = 24, MAX_HOST_ARRAYS = 24 };

typedef struct block_run {
  gllmk_context *ctx;
  gllmk_dtype dtype;
  test_rng rng;
  gllmk_buffer *buffers[MAX_BUFFERS];
  int buffer_count;
  double *host_arrays[MAX_HOST_ARRAYS];
  int host_array_count;
} block_run;

static void must(gllmk_status status, const char *what) {
  ck_assert_msg(status == GLLMK_OK, "decoder block: %s: %s: %s", what,
                gllmk_status_string(status), gllmk_last_error());
}

static int64_t product(int32_t ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int32_t i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* n doubles, freed with the run. */
static double *host_array(block_run *run, int64_t n) {
  ck_assert_int_lt(run->host_array_count, MAX_HOST_ARRAYS);
  double *array = malloc(sizeof(double) * (size_t)n);
  ck_assert_ptr_nonnull(array);
  return run->host_arrays[run->host_array_count++] = array;
}

/* A device buffer of `bytes`, freed with the run. */
static gllmk_buffer *new_buffer(block_run *run, uint64_t bytes) {
  ck_assert_int_lt(run->buffer_count, MAX_BUFFERS);
  gllmk_buffer **buffer = &run->buffers[run->buffer_count++];
  must(gllmk_buffer_alloc(run->ctx, bytes, buffer), "gllmk_buffer_alloc");
  return *buffer;
}

/* A fresh dense tensor of the run's dtype, every bit set (NaN in each float
 * dtype) so that an element the op never writes shows. */
static gllmk_tensor poisoned(block_run *run, int32_t ndim, const int64_t *shape) {
  uint64_t bytes = (uint64_t)product(ndim, shape) * gllmk_dtype_size(run->dtype);
  gllmk_buffer *buffer = new_buffer(run, bytes);
  must(gllmk_buffer_fill(buffer, 0, bytes, 0xff), "gllmk_buffer_fill");
  gllmk_tensor tensor;
  must(gllmk_tensor_make(buffer, 0, run->dtype, ndim, shape, &tensor), "gllmk_tensor_make");
  return tensor;
}

/* Random values in [lo, hi) rounded to the run's dtype, in `host` (which the
 * reference reads) and in a new device tensor. */
static gllmk_tensor random_tensor(block_run *run, int32_t ndim, const int64_t *shape, double lo,
                                  double hi, double *host) {
  int64_t n = product(ndim, shape);
  uint8_t *encoded = malloc((size_t)n * gllmk_dtype_size(run->dtype));
  ck_assert_ptr_nonnull(encoded);
  for (int64_t i = 0; i < n; i++) {
    host[i] = test_round(run->dtype, test_rng_uniform(&run->rng, lo, hi));
    test_store(run->dtype, encoded, i, host[i]);
  }
  gllmk_tensor tensor = poisoned(run, ndim, shape);
  must(gllmk_buffer_write(tensor.buffer, 0, encoded, (uint64_t)n * gllmk_dtype_size(run->dtype)),
       "gllmk_buffer_write");
  free(encoded);
  return tensor;
}

/* A weight [rows, cols] scaled so that a product with unit-variance inputs
 * has unit variance. */
static gllmk_tensor random_weight(block_run *run, int64_t rows, int64_t cols, double *host) {
  double bound = sqrt(3.0 / (double)cols);
  return random_tensor(run, 2, (int64_t[]){rows, cols}, -bound, bound, host);
}

static gllmk_tensor reshaped(const gllmk_tensor *t, int32_t ndim, const int64_t *shape) {
  gllmk_tensor out;
  must(gllmk_tensor_reshape(t, ndim, shape, &out), "gllmk_tensor_reshape");
  return out;
}

static void matmul(block_run *run, const gllmk_tensor *out, const gllmk_tensor *a,
                   const gllmk_tensor *w, float beta) {
  gllmk_matmul_args args = {.out = out, .a = a, .b = w, .alpha = 1.0f, .beta = beta,
                            .b_layout = GLLMK_B_NK};
  must(gllmk_matmul(run->ctx, &args), "gllmk_matmul");
}

/* out [rows, n] (+)= a [rows, k] w^T, w [n, k], in float64. */
static void ref_linear(int64_t rows, int64_t n, int64_t k, const double *a, const double *w,
                       double beta, double *out) {
  ref_matmul_problem p = {.batch = 1, .m = rows, .n = n, .k = k, .b_layout = GLLMK_B_NK,
                          .alpha = 1.0, .beta = beta};
  ref_matmul(&p, a, w, NULL, out);
}

/* Reads the device residual and fails the test if it is further from `want`
 * than the dtype allows, measured against want's root mean square. */
static void expect_residual(block_run *run, const gllmk_tensor *residual, const double *want,
                            int64_t n, const char *stage) {
  size_t size = gllmk_dtype_size(run->dtype);
  uint8_t *raw = malloc((size_t)n * size);
  ck_assert_ptr_nonnull(raw);
  must(gllmk_buffer_read(residual->buffer, 0, raw, (uint64_t)n * size), "gllmk_buffer_read");
  double err2 = 0, ref2 = 0, worst = 0;
  int64_t worst_at = 0;
  for (int64_t i = 0; i < n; i++) {
    double err = fabs(test_load(run->dtype, raw, i) - want[i]);
    if (!(err <= worst)) worst = err, worst_at = i; /* NaN is always the worst */
    err2 += err * err;
    ref2 += want[i] * want[i];
  }
  free(raw);
  /* Seen on the cpu backend and lavapipe: an rms error of about one unit
   * roundoff of the dtype (6 for f32) times the result's rms, the worst
   * element 5 to 8 times that. The tolerances allow 4 to 10 times as much; a
   * wrong head, pair, slice or tile gives errors of the order of the rms. */
  double rms_tol = run->dtype == GLLMK_F32 ? 4e-6 : run->dtype == GLLMK_F16 ? 2e-3 : 1.6e-2;
  double rms = sqrt(ref2 / (double)n), err_rms = sqrt(err2 / (double)n);
  ck_assert_msg(err_rms <= rms_tol * rms && worst <= 8 * rms_tol * rms,
                "decoder block %s, %s: error rms %.3g, worst %.3g at %lld (want %.6g), "
                "against a result rms of %.3g (tolerance %.3g, worst %.3g)",
                gllmk_dtype_name(run->dtype), stage, err_rms, worst, (long long)worst_at,
                want[worst_at], rms, rms_tol * rms, 8 * rms_tol * rms);
}

static void free_run(block_run *run) {
  for (int i = 0; i < run->buffer_count; i++) gllmk_buffer_free(run->buffers[i]);
  for (int i = 0; i < run->host_array_count; i++) free(run->host_arrays[i]);
}

void decoder_block_check(gllmk_context *ctx, gllmk_dtype dtype, bool small, uint64_t seed) {
  const block_dims d = small ? small_dims : full_dims;
  const int64_t T = d.tokens, H = d.hidden, D = d.head_dim, F = d.ffn;
  const int64_t QW = d.q_heads * D, KW = d.kv_heads * D; /* projection widths */
  block_run run = {.ctx = ctx, .dtype = dtype, .rng = test_rng_for(seed)};

  /* Host arrays: inputs as the device holds them, then the reference. */
  double *x = host_array(&run, T * H), *norm1 = host_array(&run, H),
         *norm2 = host_array(&run, H), *wq = host_array(&run, QW * H),
         *wk = host_array(&run, KW * H), *wv = host_array(&run, KW * H),
         *wo = host_array(&run, H * QW), *wgu = host_array(&run, 2 * F * H),
         *wd = host_array(&run, H * F), *h = host_array(&run, T * H),
         *q = host_array(&run, T * QW), *k = host_array(&run, T * KW),
         *q_rot = host_array(&run, T * QW), *k_rot = host_array(&run, T * KW),
         *v = host_array(&run, T * KW), *attn = host_array(&run, T * QW),
         *gu = host_array(&run, T * 2 * F), *act = host_array(&run, T * F);
  int32_t *positions = (int32_t *)host_array(&run, T); /* a double holds an int32_t */

  /* ---- inputs (x has unit variance, like a model's residual stream) */
  gllmk_tensor residual = random_tensor(&run, 2, (int64_t[]){T, H}, -sqrt(3.0), sqrt(3.0), x);
  gllmk_tensor norm1_w = random_tensor(&run, 1, &H, 0.5, 1.5, norm1);
  gllmk_tensor norm2_w = random_tensor(&run, 1, &H, 0.5, 1.5, norm2);
  gllmk_tensor wq_t = random_weight(&run, QW, H, wq), wk_t = random_weight(&run, KW, H, wk),
               wv_t = random_weight(&run, KW, H, wv), wo_t = random_weight(&run, H, QW, wo),
               wgu_t = random_weight(&run, 2 * F, H, wgu), wd_t = random_weight(&run, H, F, wd);
  /* Positions continue a prefix of random length, as after a cached prompt. */
  int32_t first_position = (int32_t)test_rng_int(&run.rng, 0, 3000);
  for (int64_t t = 0; t < T; t++) positions[t] = first_position + (int32_t)t;
  gllmk_buffer *positions_buffer = new_buffer(&run, sizeof(int32_t) * (uint64_t)T);
  must(gllmk_buffer_write(positions_buffer, 0, positions, sizeof(int32_t) * (uint64_t)T),
       "gllmk_buffer_write");
  gllmk_tensor positions_t;
  must(gllmk_tensor_make(positions_buffer, 0, GLLMK_I32, 1, &T, &positions_t),
       "gllmk_tensor_make");

  /* ---- attention half on the device */
  const float scale = (float)(1.0 / sqrt((double)D));
  gllmk_tensor h_t = poisoned(&run, 2, (int64_t[]){T, H});
  gllmk_tensor q_t = poisoned(&run, 2, (int64_t[]){T, QW});
  gllmk_tensor k_t = poisoned(&run, 2, (int64_t[]){T, KW});
  gllmk_tensor v_t = poisoned(&run, 2, (int64_t[]){T, KW});
  gllmk_tensor a_t = poisoned(&run, 2, (int64_t[]){T, QW});
  gllmk_tensor o_t = poisoned(&run, 2, (int64_t[]){T, H});
  must(gllmk_rmsnorm(ctx, &(gllmk_rmsnorm_args){.out = &h_t, .x = &residual,
                                                .weight = &norm1_w, .eps = (float)rms_eps}),
       "gllmk_rmsnorm");
  matmul(&run, &q_t, &h_t, &wq_t, 0.0f);
  matmul(&run, &k_t, &h_t, &wk_t, 0.0f);
  matmul(&run, &v_t, &h_t, &wv_t, 0.0f);
  gllmk_tensor q_heads = reshaped(&q_t, 3, (int64_t[]){T, d.q_heads, D});
  gllmk_tensor k_heads = reshaped(&k_t, 3, (int64_t[]){T, d.kv_heads, D});
  gllmk_rope_args rope = {.positions = &positions_t, .theta = (float)rope_theta,
                          .rotary_dim = (int32_t)D, .style = GLLMK_ROPE_NEOX};
  rope.out = rope.x = &q_heads;
  must(gllmk_rope(ctx, &rope), "gllmk_rope q");
  rope.out = rope.x = &k_heads;
  must(gllmk_rope(ctx, &rope), "gllmk_rope k");
  gllmk_tensor q4 = reshaped(&q_t, 4, (int64_t[]){1, T, d.q_heads, D});
  gllmk_tensor k4 = reshaped(&k_t, 4, (int64_t[]){1, T, d.kv_heads, D});
  gllmk_tensor v4 = reshaped(&v_t, 4, (int64_t[]){1, T, d.kv_heads, D});
  gllmk_tensor a4 = reshaped(&a_t, 4, (int64_t[]){1, T, d.q_heads, D});
  must(gllmk_attention(ctx, &(gllmk_attention_args){.out = &a4, .q = &q4, .k = &k4, .v = &v4,
                                                    .scale = scale, .causal = 1}),
       "gllmk_attention");
  matmul(&run, &o_t, &a_t, &wo_t, 0.0f);
  gllmk_tensor h2_t = poisoned(&run, 2, (int64_t[]){T, H});
  must(gllmk_add_rmsnorm(ctx, &(gllmk_add_rmsnorm_args){.out = &h2_t, .residual = &residual,
                                                        .x = &o_t, .weight = &norm2_w,
                                                        .eps = (float)rms_eps}),
       "gllmk_add_rmsnorm");

  /* ---- attention half in float64; x becomes the residual */
  ref_rmsnorm(T, H, x, norm1, rms_eps, h);
  ref_linear(T, QW, H, h, wq, 0.0, q);
  ref_linear(T, KW, H, h, wk, 0.0, k);
  ref_linear(T, KW, H, h, wv, 0.0, v);
  ref_rope(T, d.q_heads, D, q, positions, rope_theta, D, GLLMK_ROPE_NEOX, q_rot);
  ref_rope(T, d.kv_heads, D, k, positions, rope_theta, D, GLLMK_ROPE_NEOX, k_rot);
  ref_attention_problem ap = {.batch = 1, .sq = T, .skv = T, .hq = d.q_heads,
                              .hkv = d.kv_heads, .d = D, .scale = scale, .causal = 1};
  ref_attention(&ap, q_rot, k_rot, v, NULL, attn, NULL, NULL, NULL);
  ref_linear(T, H, QW, attn, wo, 1.0, x);
  expect_residual(&run, &residual, x, T * H, "after attention");

  /* ---- feed-forward half: gate and up are column slices of one product */
  gllmk_tensor gu_t = poisoned(&run, 2, (int64_t[]){T, 2 * F});
  gllmk_tensor act_t = poisoned(&run, 2, (int64_t[]){T, F});
  gllmk_tensor gate_t, up_t;
  matmul(&run, &gu_t, &h2_t, &wgu_t, 0.0f);
  must(gllmk_tensor_slice(&gu_t, 1, 0, F, 1, &gate_t), "gllmk_tensor_slice");
  must(gllmk_tensor_slice(&gu_t, 1, F, F, 1, &up_t), "gllmk_tensor_slice");
  must(gllmk_swiglu(ctx, &(gllmk_swiglu_args){.out = &act_t, .gate = &gate_t, .up = &up_t}),
       "gllmk_swiglu");
  matmul(&run, &residual, &act_t, &wd_t, 1.0f);

  ref_rmsnorm(T, H, x, norm2, rms_eps, h);
  ref_linear(T, 2 * F, H, h, wgu, 0.0, gu);
  for (int64_t t = 0; t < T; t++)
    for (int64_t j = 0; j < F; j++)
      act[t * F + j] = ref_silu(gu[t * 2 * F + j]) * gu[t * 2 * F + F + j];
  ref_linear(T, H, F, act, wd, 1.0, x);
  expect_residual(&run, &residual, x, T * H, "after the feed-forward");

  free_run(&run);
}
