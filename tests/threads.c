/*
 * threads.c - many threads using gllmk at once (issue 20).
 *
 * Different contexts are independent (gllmk.h), so a context's results may
 * not depend on what other threads do. A fixed workload of ops (matmul in
 * f32 and bf16, GEMV, attention, norms, softmax, rope, sampling, a strided
 * cast) is run once on the main thread alone; then THREADS threads run it
 * again and again while they also create and destroy contexts, scan the
 * plugin directory and make calls fail: every run must give the very same
 * bytes, and every thread must read its own error messages. Half of the
 * threads keep one context for all their rounds (a running context while
 * others are created), half create a fresh one each round.
 *
 * Built with SANITIZE=thread (`make check SANITIZE=thread`), this is the
 * ThreadSanitizer test of the library and the plugins; any data race
 * reported fails it. --backend NAME runs on that plugin (default: the
 * automatic choice), --quick does fewer rounds.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#define THREADS 8

/* ------------------------------------------------------------ workload */

enum { IN_BYTES = 1 << 18, OUT_BYTES = 1 << 18 };

/* The single-threaded run's output bytes. */
static unsigned char reference[OUT_BYTES];
static size_t reference_size;

static gllmk_context_options context_options(void) {
  /* The same pool size everywhere: the reference and every thread. */
  return (gllmk_context_options){.backend = test_opts.backend, .num_threads = 2};
}

/* Tensors are placed one after the other in a buffer (64-byte aligned). */
typedef struct arena {
  gllmk_buffer *buffer;
  uint64_t used;
  int inputs; /* inputs made so far: each gets its own random values */
} arena;

static int place(arena *a, gllmk_dtype dtype, int32_t ndim, const int64_t *shape,
                 gllmk_tensor *out, char *why, size_t why_size) {
  a->used = (a->used + 63) & ~(uint64_t)63;
  if (gllmk_tensor_make(a->buffer, a->used, dtype, ndim, shape, out) != GLLMK_OK) {
    snprintf(why, why_size, "gllmk_tensor_make: %s", gllmk_last_error());
    return 0;
  }
  a->used += gllmk_tensor_extent_bytes(out);
  return 1;
}

/* An input: uniform values in [-2, 2) (I32: integers in [0, 12)), the same
 * on every run. */
static int place_input(arena *a, gllmk_dtype dtype, int32_t ndim, const int64_t *shape,
                       gllmk_tensor *out, char *why, size_t why_size) {
  if (!place(a, dtype, ndim, shape, out, why, why_size)) return 0;
  int64_t n = gllmk_tensor_numel(out);
  unsigned char *host = malloc((size_t)n * gllmk_dtype_size(dtype));
  if (host == NULL) {
    snprintf(why, why_size, "out of host memory");
    return 0;
  }
  test_rng rng = test_rng_for(2000 + (uint64_t)a->inputs++);
  for (int64_t i = 0; i < n; i++)
    test_store(dtype, host, i,
               dtype == GLLMK_I32 ? (double)test_rng_int(&rng, 0, 11) : test_rng_uniform(&rng, -2, 2));
  gllmk_status s = gllmk_buffer_write(a->buffer, out->offset, host, (uint64_t)n * gllmk_dtype_size(dtype));
  free(host);
  if (s != GLLMK_OK) snprintf(why, why_size, "gllmk_buffer_write: %s", gllmk_last_error());
  return s == GLLMK_OK;
}

#define SHAPE(...) (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define IN(name, dtype, ...) \
  gllmk_tensor name;         \
  if (!place_input(&in, dtype, SHAPE(__VA_ARGS__), &name, why, why_size)) goto done
#define OUT(name, dtype, ...) \
  gllmk_tensor name;          \
  if (!place(&out, dtype, SHAPE(__VA_ARGS__), &name, why, why_size)) goto done
/* One op call; on failure `why` says which and why. */
#define CALL(op, ...)                                                            \
  do {                                                                           \
    gllmk_status s_ = gllmk_##op(ctx, &(gllmk_##op##_args){__VA_ARGS__});        \
    if (s_ != GLLMK_OK) {                                                        \
      snprintf(why, why_size, "gllmk_" #op ": %s: %s", gllmk_status_string(s_), \
               gllmk_last_error());                                              \
      goto done;                                                                 \
    }                                                                            \
  } while (0)
#define VIEW(expr, what)                                                          \
  do {                                                                            \
    if ((expr) != GLLMK_OK) {                                                     \
      snprintf(why, why_size, "%s: %s", what, gllmk_last_error());                \
      goto done;                                                                  \
    }                                                                             \
  } while (0)

/* Runs the workload on `ctx` and leaves its outputs' bytes in `result`
 * (*result_size of them). Returns 0 with `why` set on a failure. */
static int run_workload(gllmk_context *ctx, unsigned char *result, size_t *result_size, char *why,
                        size_t why_size) {
  int ok = 0;
  arena in = {0}, out = {0};
  if (gllmk_buffer_alloc(ctx, IN_BYTES, &in.buffer) != GLLMK_OK ||
      gllmk_buffer_alloc(ctx, OUT_BYTES, &out.buffer) != GLLMK_OK ||
      gllmk_buffer_fill(out.buffer, 0, OUT_BYTES, 0) != GLLMK_OK) {
    snprintf(why, why_size, "buffers: %s", gllmk_last_error());
    goto done;
  }
  /* matmul (GEMM with bias; GEMV with b as [K, N]) */
  IN(a32, GLLMK_F32, 37, 70);
  IN(b32, GLLMK_F32, 45, 70);
  IN(bias32, GLLMK_F32, 45);
  OUT(m32, GLLMK_F32, 37, 45);
  CALL(matmul, .out = &m32, .a = &a32, .b = &b32, .bias = &bias32, .alpha = 0.75f,
       .b_layout = GLLMK_B_NK);
  IN(a16, GLLMK_BF16, 1, 264);
  IN(b16, GLLMK_BF16, 264, 120);
  OUT(g16, GLLMK_BF16, 1, 120);
  CALL(matmul, .out = &g16, .a = &a16, .b = &b16, .alpha = 1, .b_layout = GLLMK_B_KN);
  /* attention with GQA, causal, lse */
  IN(q, GLLMK_F16, 2, 7, 4, 64);
  IN(k, GLLMK_F16, 2, 11, 2, 64);
  IN(v, GLLMK_F16, 2, 11, 2, 64);
  OUT(att, GLLMK_F16, 2, 7, 4, 64);
  OUT(lse, GLLMK_F32, 2, 4, 7);
  CALL(attention, .out = &att, .q = &q, .k = &k, .v = &v, .lse = &lse, .scale = 0.125f,
       .causal = 1);
  /* norms */
  IN(x, GLLMK_BF16, 5, 200);
  IN(w, GLLMK_BF16, 200);
  OUT(normed, GLLMK_BF16, 5, 200);
  OUT(res, GLLMK_BF16, 5, 200);
  OUT(normed2, GLLMK_BF16, 5, 200);
  CALL(rmsnorm, .out = &normed, .x = &x, .weight = &w, .eps = 1e-5f);
  CALL(copy, .out = &res, .src = &normed);
  CALL(add_rmsnorm, .out = &normed2, .residual = &res, .x = &x, .weight = &w, .eps = 1e-6f);
  OUT(sm, GLLMK_F32, 37, 45);
  CALL(softmax, .out = &sm, .x = &m32, .scale = 0.5f);
  /* rope on the first sequence of att: [7, 4, 64] */
  IN(pos, GLLMK_I32, 7);
  gllmk_tensor first;
  VIEW(gllmk_tensor_reshape(&att, 3, (const int64_t[]){14, 4, 64}, &first), "reshape att");
  VIEW(gllmk_tensor_slice(&first, 0, 0, 7, 1, &first), "slice att");
  OUT(roped, GLLMK_F16, 7, 4, 64);
  CALL(rope, .out = &roped, .x = &first, .positions = &pos, .theta = 10000, .rotary_dim = 48,
       .style = GLLMK_ROPE_NEOX);
  /* sampling */
  IN(logits, GLLMK_F32, 3, 1000);
  OUT(tokens, GLLMK_I32, 3);
  OUT(top, GLLMK_I32, 3);
  CALL(sample, .out = &tokens, .logits = &logits, .temperature = 0.8f, .top_p = 0.9f,
       .top_k = 50, .seed = 1234, .offset = 7);
  CALL(argmax, .out = &top, .logits = &logits);
  /* a strided cast */
  gllmk_tensor every_other;
  VIEW(gllmk_tensor_slice(&a32, 1, 1, 35, 2, &every_other), "slice a32");
  OUT(cast, GLLMK_F16, 37, 35);
  CALL(copy, .out = &cast, .src = &every_other);

  if (gllmk_synchronize(ctx) != GLLMK_OK ||
      gllmk_buffer_read(out.buffer, 0, result, out.used) != GLLMK_OK) {
    snprintf(why, why_size, "reading the results: %s", gllmk_last_error());
    goto done;
  }
  *result_size = out.used;
  ok = 1;
done:
  gllmk_buffer_free(in.buffer);
  gllmk_buffer_free(out.buffer);
  return ok;
}

/* --------------------------------------------------------------- threads */

typedef struct worker {
  int index;
  int rounds;
  int keep_context; /* one context for every round, or a fresh one each */
  int failures;
  char first_failure[1024];
} worker;

static void worker_fail(worker *w, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void worker_fail(worker *w, const char *format, ...) {
  if (w->failures++ > 0) return;
  va_list args;
  va_start(args, format);
  vsnprintf(w->first_failure, sizeof w->first_failure, format, args);
  va_end(args);
}

/* A failing call whose message only this thread can have caused. */
static void check_own_message(worker *w, gllmk_context *ctx, int round) {
  gllmk_buffer *buffer;
  if (gllmk_buffer_alloc(ctx, 64, &buffer) != GLLMK_OK) {
    worker_fail(w, "gllmk_buffer_alloc: %s", gllmk_last_error());
    return;
  }
  gllmk_tensor t, view;
  int32_t dim = 1000 * (w->index + 1) + round;
  if (gllmk_tensor_make(buffer, 0, GLLMK_F32, 1, (const int64_t[]){16}, &t) != GLLMK_OK ||
      gllmk_tensor_slice(&t, dim, 0, 1, 1, &view) != GLLMK_ERR_INVALID_ARGUMENT) {
    worker_fail(w, "the bad slice did not fail: %s", gllmk_last_error());
  } else {
    char expected[64];
    snprintf(expected, sizeof expected, "dim=%d is outside", dim);
    if (!test_contains(gllmk_last_error(), expected))
      worker_fail(w, "another thread's message? \"%s\" lacks \"%s\"", gllmk_last_error(),
                  expected);
  }
  gllmk_buffer_free(buffer);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  static unsigned char results[THREADS][OUT_BYTES];
  unsigned char *result = results[w->index];
  gllmk_context_options options = context_options();
  gllmk_context *kept = NULL;
  char why[1024];
  for (int round = 0; round < w->rounds; round++) {
    gllmk_context *ctx = kept;
    if (ctx == NULL && gllmk_context_create(&options, &ctx) != GLLMK_OK) {
      worker_fail(w, "gllmk_context_create: %s", gllmk_last_error());
      break;
    }
    /* A scan of the plugins, as gllmk-info does, between runs. */
    gllmk_discovery *d = NULL;
    if (gllmk_discover(&options, &d) != GLLMK_OK)
      worker_fail(w, "gllmk_discover: %s", gllmk_last_error());
    gllmk_discovery_free(d);
    size_t size = 0;
    if (!run_workload(ctx, result, &size, why, sizeof why))
      worker_fail(w, "the workload failed: %s", why);
    else if (size != reference_size || memcmp(result, reference, size) != 0)
      worker_fail(w, "round %d: the results differ from the single-threaded run's", round);
    check_own_message(w, ctx, round);
    if (w->keep_context)
      kept = ctx;
    else
      gllmk_context_destroy(ctx);
  }
  gllmk_context_destroy(kept);
  return NULL;
}

START_TEST(contexts_on_many_threads_agree) {
  gllmk_context_options options = context_options();
  gllmk_context *ctx;
  gllmk_status s = gllmk_context_create(&options, &ctx);
  ck_assert_msg(s == GLLMK_OK, "gllmk_context_create: %s", gllmk_last_error());
  char why[1024];
  int ok = run_workload(ctx, reference, &reference_size, why, sizeof why);
  ck_assert_msg(ok, "the single-threaded run failed: %s", why);
  printf("threads: %d threads on %s, %zu output bytes each round\n", THREADS,
         gllmk_context_backend(ctx), reference_size);
  gllmk_context_destroy(ctx);

  static worker workers[THREADS];
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (worker){.index = i, .rounds = test_opts.quick ? 2 : 16, .keep_context = i % 2};
    ck_assert_int_eq(pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
  }
  int failures = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    if (workers[i].failures) {
      fprintf(stderr, "thread %d: %d failure(s), the first: %s\n", i, workers[i].failures,
              workers[i].first_failure);
      failures += workers[i].failures;
    }
  }
  ck_assert_msg(failures == 0, "%d failure(s) on %d threads (listed above)", failures, THREADS);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  Suite *suite = suite_create("threads");
  TCase *tc = test_tcase("threads");
  tcase_add_test(tc, contexts_on_many_threads_agree);
  suite_add_tcase(suite, tc);
  return test_run_suite(suite);
}
