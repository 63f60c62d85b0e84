/*
 * gllmk-demo - a short demonstration on the backend a default context
 * selects: one feed-forward step of a small transformer layer
 *   h = rmsnorm(x) ; y = W_down · swiglu(W_gate·h, W_up·h) ; next = argmax(y · E^T)
 * computed with gllmk and checked against the same math in double on the host.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gllmk/gllmk.h"

enum { TOKENS = 4, HIDDEN = 256, FFN = 688, VOCAB = 1000 };

#define CHECK(call)                                                               \
  do {                                                                            \
    gllmk_status status_ = (call);                                                \
    if (status_ != GLLMK_OK) {                                                    \
      fprintf(stderr, "gllmk-demo: %s: %s\n", gllmk_status_string(status_),       \
              gllmk_last_error());                                                \
      goto done;                                                                  \
    }                                                                             \
  } while (0)

static float *random_floats(size_t n, float scale, unsigned *seed) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; v && i < n; i++) v[i] = scale * ((float)rand_r(seed) / (float)RAND_MAX - 0.5f);
  return v;
}

/* A dense f32 tensor in a fresh buffer, filled from `host` if not NULL. */
static gllmk_status upload(gllmk_context *ctx, int32_t ndim, const int64_t *shape,
                           const float *host, gllmk_tensor *out) {
  size_t n = 1;
  for (int32_t i = 0; i < ndim; i++) n *= (size_t)shape[i];
  gllmk_buffer *buffer;
  gllmk_status status = gllmk_buffer_alloc(ctx, n * sizeof(float), &buffer);
  if (status == GLLMK_OK) status = gllmk_tensor_make(buffer, 0, GLLMK_F32, ndim, shape, out);
  if (status == GLLMK_OK && host) status = gllmk_buffer_write(buffer, 0, host, n * sizeof(float));
  return status;
}

/* out[r][n] = sum_k a[r][k] * w[n][k], in double. */
static void host_linear(const double *a, const float *w, int rows, int k, int n, double *out) {
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < n; j++) {
      double acc = 0;
      for (int i = 0; i < k; i++) acc += a[r * k + i] * w[(size_t)j * k + i];
      out[r * n + j] = acc;
    }
}

/* The reference next tokens and logits, computed in double. */
static void host_reference(const float *x, const float *norm_w, const float *w_gate,
                           const float *w_up, const float *w_down, const float *embed,
                           int *out_tokens, double *logits) {
  double *h = malloc(sizeof(double) * TOKENS * HIDDEN), *g = malloc(sizeof(double) * TOKENS * FFN),
         *u = malloc(sizeof(double) * TOKENS * FFN), *y = malloc(sizeof(double) * TOKENS * HIDDEN);
  for (int t = 0; t < TOKENS; t++) {
    double ss = 0;
    for (int i = 0; i < HIDDEN; i++) ss += (double)x[t * HIDDEN + i] * x[t * HIDDEN + i];
    double inv = 1.0 / sqrt(ss / HIDDEN + 1e-5);
    for (int i = 0; i < HIDDEN; i++) h[t * HIDDEN + i] = x[t * HIDDEN + i] * inv * norm_w[i];
  }
  host_linear(h, w_gate, TOKENS, HIDDEN, FFN, g);
  host_linear(h, w_up, TOKENS, HIDDEN, FFN, u);
  for (int i = 0; i < TOKENS * FFN; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
  host_linear(g, w_down, TOKENS, FFN, HIDDEN, y);
  host_linear(y, embed, TOKENS, HIDDEN, VOCAB, logits);
  for (int t = 0; t < TOKENS; t++) {
    int best = 0;
    for (int v = 1; v < VOCAB; v++)
      if (logits[t * VOCAB + v] > logits[t * VOCAB + best]) best = v;
    out_tokens[t] = best;
  }
  free(h); free(g); free(u); free(y);
}

int main(void) {
  int result = 1;
  unsigned seed = (unsigned)time(NULL);
  float *x = random_floats(TOKENS * HIDDEN, 4.0f, &seed),
        *norm_w = random_floats(HIDDEN, 2.0f, &seed),
        *w_gate = random_floats((size_t)FFN * HIDDEN, 0.2f, &seed),
        *w_up = random_floats((size_t)FFN * HIDDEN, 0.2f, &seed),
        *w_down = random_floats((size_t)HIDDEN * FFN, 0.2f, &seed),
        *embed = random_floats((size_t)VOCAB * HIDDEN, 0.2f, &seed);
  gllmk_context *ctx = NULL;
  CHECK(gllmk_context_create(NULL, &ctx));
  gllmk_device_info info;
  CHECK(gllmk_context_device_info(ctx, &info));
  printf("gllmk-demo: backend %s, device %s (%s)\n", gllmk_context_backend(ctx), info.name, info.arch);

  gllmk_tensor tx, tnw, th, twg, twu, twd, te, tg, tu, ty, tl, ttok;
  CHECK(upload(ctx, 2, (int64_t[]){TOKENS, HIDDEN}, x, &tx));
  CHECK(upload(ctx, 1, (int64_t[]){HIDDEN}, norm_w, &tnw));
  CHECK(upload(ctx, 2, (int64_t[]){TOKENS, HIDDEN}, NULL, &th));
  CHECK(upload(ctx, 2, (int64_t[]){FFN, HIDDEN}, w_gate, &twg));
  CHECK(upload(ctx, 2, (int64_t[]){FFN, HIDDEN}, w_up, &twu));
  CHECK(upload(ctx, 2, (int64_t[]){HIDDEN, FFN}, w_down, &twd));
  CHECK(upload(ctx, 2, (int64_t[]){VOCAB, HIDDEN}, embed, &te));
  CHECK(upload(ctx, 2, (int64_t[]){TOKENS, FFN}, NULL, &tg));
  CHECK(upload(ctx, 2, (int64_t[]){TOKENS, FFN}, NULL, &tu));
  CHECK(upload(ctx, 2, (int64_t[]){TOKENS, HIDDEN}, NULL, &ty));
  CHECK(upload(ctx, 2, (int64_t[]){TOKENS, VOCAB}, NULL, &tl));
  gllmk_buffer *tokens_buffer;
  CHECK(gllmk_buffer_alloc(ctx, TOKENS * sizeof(int32_t), &tokens_buffer));
  CHECK(gllmk_tensor_make(tokens_buffer, 0, GLLMK_I32, 1, (int64_t[]){TOKENS}, &ttok));

  CHECK(gllmk_rmsnorm(ctx, &(gllmk_rmsnorm_args){.out = &th, .x = &tx, .weight = &tnw, .eps = 1e-5f}));
  CHECK(gllmk_matmul(ctx, &(gllmk_matmul_args){.out = &tg, .a = &th, .b = &twg, .alpha = 1}));
  CHECK(gllmk_matmul(ctx, &(gllmk_matmul_args){.out = &tu, .a = &th, .b = &twu, .alpha = 1}));
  CHECK(gllmk_swiglu(ctx, &(gllmk_swiglu_args){.out = &tg, .gate = &tg, .up = &tu}));
  CHECK(gllmk_matmul(ctx, &(gllmk_matmul_args){.out = &ty, .a = &tg, .b = &twd, .alpha = 1}));
  CHECK(gllmk_matmul(ctx, &(gllmk_matmul_args){.out = &tl, .a = &ty, .b = &te, .alpha = 1}));
  CHECK(gllmk_argmax(ctx, &(gllmk_argmax_args){.out = &ttok, .logits = &tl}));
  int32_t tokens[TOKENS];
  CHECK(gllmk_buffer_read(tokens_buffer, 0, tokens, sizeof tokens));

  int expected[TOKENS];
  static double logits[TOKENS * VOCAB];
  host_reference(x, norm_w, w_gate, w_up, w_down, embed, expected, logits);
  int agree = 0;
  for (int t = 0; t < TOKENS; t++) {
    printf("  token %d: next = %4d   host float64 reference = %4d\n", t, tokens[t], expected[t]);
    /* A different token counts only if its logit ties the best within f32
     * rounding of the whole computation (a near-tie the demo cannot decide). */
    const double *row = logits + t * VOCAB, best = row[expected[t]];
    int in_range = tokens[t] >= 0 && tokens[t] < VOCAB;
    agree += tokens[t] == expected[t] || (in_range && best - row[tokens[t]] <= 1e-4 * fabs(best));
  }
  printf("gllmk-demo: %d of %d next tokens agree with the float64 reference\n", agree, TOKENS);
  result = agree == TOKENS ? 0 : 1;
done:
  gllmk_context_destroy(ctx); /* frees the buffers too */
  free(x); free(norm_w); free(w_gate); free(w_up); free(w_down); free(embed);
  return result;
}
