/*
 * conformance.h - what the conformance programs share: the running test's
 * state, device tensors holding known values, views of them, and the
 * comparisons with the float64 references (tests/conformance.c describes
 * the method and the tolerances).
 *
 * Everything here is static: each file of the suite (conformance.c,
 * conformance_views.c) has its own state S, set up by its own tests.
 */
#ifndef GLLMK_TESTS_CONFORMANCE_H_
#define GLLMK_TESTS_CONFORMANCE_H_

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

/* The running test (reset by the fixture; one test per process by default,
 * all in one process with CK_FORK=no). */
typedef struct conf_state {
  gllmk_context *ctx;
  const char *backend;
  const char *op;
  bool quick; /* smaller sizes: --quick, or a software (emulated) device */
  test_rng rng;
  int failures;
  int skips; /* sub-cases the backend declares unsupported */
  void **allocs;
  size_t alloc_count, alloc_capacity;
} conf_state;
static conf_state S;

static const gllmk_dtype float_dtypes[] = {GLLMK_F32, GLLMK_F16, GLLMK_BF16};
#define FLOAT_DTYPE_COUNT 3

static inline void conf_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));
static inline void conf_fail(const char *format, ...) {
  char message[1536];
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof message, format, args);
  va_end(args);
  fprintf(stderr, "FAIL %s/%s: %s (seed %llu)\n", S.backend, S.op, message,
          (unsigned long long)test_opts.seed);
  S.failures++;
}

/* Setup steps that must work for the test to mean anything. */
static inline void must(gllmk_status status, const char *what) {
  if (status != GLLMK_OK)
    ck_abort_msg("%s/%s: %s failed: %s: %s (seed %llu)", S.backend, S.op, what,
                 gllmk_status_string(status), gllmk_last_error(),
                 (unsigned long long)test_opts.seed);
}

/* Zeroed host memory, freed by the fixture's teardown. */
static inline void *host_alloc(size_t bytes) {
  if (S.alloc_count == S.alloc_capacity) {
    size_t capacity = S.alloc_capacity ? 2 * S.alloc_capacity : 64;
    void **grown = realloc(S.allocs, capacity * sizeof *grown);
    ck_assert_ptr_nonnull(grown);
    S.allocs = grown;
    S.alloc_capacity = capacity;
  }
  void *p = calloc(1, bytes ? bytes : 1);
  ck_assert_ptr_nonnull(p);
  S.allocs[S.alloc_count++] = p;
  return p;
}

/* A case the backend declares unsupported (gllmk_op_supported's answer,
 * with its reason): reported as skipped, never counted as passed. */
static inline void conf_skip(const char *what, const char *reason) {
  printf("skipped: %s/%s: %s: %s\n", S.backend, S.op, what, reason);
  fflush(stdout);
  S.skips++;
}

/* Runs an op under test. The call is first made inside a recording, where
 * it is validated and checked against what the backend declares it
 * supports, and nothing runs: a declared-unsupported case is skipped with
 * the backend's reason. Then it runs: called directly, or with --record by
 * replaying that recording (the backend's native form where it has one).
 * On failure the sub-case is recorded and left. */
#define RUN_OP(call, what)                                                             \
  do {                                                                                 \
    gllmk_recording *run_recording_;                                                   \
    must(gllmk_recording_begin(S.ctx), "gllmk_recording_begin");                       \
    gllmk_status run_declared_ = (call);                                               \
    char run_reason_[512];                                                             \
    snprintf(run_reason_, sizeof run_reason_, "%s", gllmk_last_error());               \
    must(gllmk_recording_end(S.ctx, &run_recording_), "gllmk_recording_end");          \
    gllmk_status run_status_ = run_declared_;                                          \
    if (run_declared_ == GLLMK_OK) {                                                   \
      run_status_ = test_opts.record ? gllmk_recording_replay(run_recording_) : (call); \
      snprintf(run_reason_, sizeof run_reason_, "%s", gllmk_last_error());             \
    }                                                                                  \
    gllmk_recording_free(run_recording_);                                              \
    if (run_declared_ == GLLMK_ERR_UNSUPPORTED) {                                      \
      conf_skip(what, run_reason_);                                                    \
      return;                                                                          \
    }                                                                                  \
    if (run_status_ != GLLMK_OK) {                                                     \
      conf_fail("%s: %s: %s", what, gllmk_status_string(run_status_), run_reason_);    \
      return;                                                                          \
    }                                                                                  \
  } while (0)

/* ------------------------------------------------------------ shapes */

typedef struct shape {
  int32_t ndim;
  int64_t d[GLLMK_MAX_DIMS];
} shape;
#define SHAPE(...) \
  ((shape){(int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

/* Whether row r of a sample drew a token in [0, width); a failure when
 * not. */
static inline bool token_in_row(const char *what, int64_t r, double token, int64_t width) {
  if (token >= 0 && token < (double)width) return true;
  conf_fail("%s: row %lld drew token %g, outside [0, %lld)", what, (long long)r, token, (long long)width);
  return false;
}

/* matmul's a_norm on the host: rows of k values divided by their RMS, in
 * place. */
static inline void rms_normalize_rows(double *a, int64_t rows, int64_t k, double eps) {
  for (int64_t r = 0; r < rows; r++) {
    double squares = 0.0;
    for (int64_t j = 0; j < k; j++) squares += a[r * k + j] * a[r * k + j];
    const double scale = 1.0 / sqrt(squares / (double)k + eps);
    for (int64_t j = 0; j < k; j++) a[r * k + j] *= scale;
  }
}

/* How many of n values are larger than `value`. */
static inline int64_t count_larger(const double *values, int64_t n, double value) {
  int64_t larger = 0;
  for (int64_t i = 0; i < n; i++) larger += values[i] > value;
  return larger;
}

static inline int64_t shape_numel(shape s) {
  int64_t n = 1;
  for (int32_t i = 0; i < s.ndim; i++) n *= s.d[i];
  return n;
}

static inline shape shape_of(const gllmk_tensor *t) {
  shape s = {t->ndim, {0}};
  for (int32_t i = 0; i < t->ndim; i++) s.d[i] = t->shape[i];
  return s;
}

static inline const char *shape_text(shape s) {
  char *text = host_alloc(160);
  size_t used = 0;
  for (int32_t i = 0; i < s.ndim; i++)
    used += (size_t)snprintf(text + used, 160 - used, "%s%lld", i ? "x" : "[", (long long)s.d[i]);
  snprintf(text + used, 160 - used, "]");
  return text;
}

/* The label of a sub-case, kept until the test ends. */
static inline const char *label(const char *format, ...) __attribute__((format(printf, 1, 2)));
static inline const char *label(const char *format, ...) {
  char *text = host_alloc(256);
  va_list args;
  va_start(args, format);
  vsnprintf(text, 256, format, args);
  va_end(args);
  return text;
}

static inline const char *dname(gllmk_dtype dtype) { return gllmk_dtype_name(dtype); }

/* ------------------------------------------------- device tensors */

/* A dense tensor in its own buffer plus the values it holds, as doubles. */
typedef struct dev {
  gllmk_buffer *buffer;
  gllmk_tensor t;
  gllmk_dtype dtype;
  int64_t numel;
  double *host;
} dev;

static inline uint64_t dev_bytes(const dev *d) {
  return (uint64_t)d->numel * gllmk_dtype_size(d->dtype);
}

static inline dev dev_new(gllmk_dtype dtype, shape s) {
  dev d = {.dtype = dtype, .numel = shape_numel(s)};
  must(gllmk_buffer_alloc(S.ctx, dev_bytes(&d), &d.buffer), "gllmk_buffer_alloc");
  must(gllmk_tensor_make(d.buffer, 0, dtype, s.ndim, s.d, &d.t), "gllmk_tensor_make");
  d.host = host_alloc((size_t)d.numel * sizeof *d.host);
  return d;
}

/* Rounds host values to the dtype and writes them to the device. */
static inline void dev_upload(dev *d) {
  void *raw = malloc(dev_bytes(d));
  ck_assert_ptr_nonnull(raw);
  for (int64_t i = 0; i < d->numel; i++) {
    test_store(d->dtype, raw, i, d->host[i]);
    d->host[i] = test_load(d->dtype, raw, i);
  }
  gllmk_status status = gllmk_buffer_write(d->buffer, 0, raw, dev_bytes(d));
  free(raw);
  must(status, "gllmk_buffer_write");
}

static inline dev dev_random(gllmk_dtype dtype, shape s, double lo, double hi) {
  dev d = dev_new(dtype, s);
  for (int64_t i = 0; i < d.numel; i++) d.host[i] = test_rng_uniform(&S.rng, lo, hi);
  dev_upload(&d);
  return d;
}

static inline dev dev_ints(shape s, const int32_t *values) {
  dev d = dev_new(GLLMK_I32, s);
  for (int64_t i = 0; i < d.numel; i++) d.host[i] = values[i];
  dev_upload(&d);
  return d;
}

/* `count` random token ids below `vocab`, the first the last id (the edge). */
static inline int32_t *random_ids(int64_t count, int64_t vocab) {
  int32_t *ids = host_alloc((size_t)count * sizeof *ids);
  for (int64_t i = 0; i < count; i++) ids[i] = (int32_t)test_rng_int(&S.rng, 0, vocab - 1);
  ids[0] = (int32_t)(vocab - 1);
  return ids;
}

/* 0xFF bytes: NaN in f32, f16 and bf16, -1 in i32. */
static inline void dev_poison(const dev *d) {
  must(gllmk_buffer_fill(d->buffer, 0, dev_bytes(d), 0xFF), "gllmk_buffer_fill");
}

static inline dev dev_output(gllmk_dtype dtype, shape s) {
  dev d = dev_new(dtype, s);
  dev_poison(&d);
  return d;
}

static inline void dev_download(dev *d) {
  void *raw = malloc(dev_bytes(d));
  ck_assert_ptr_nonnull(raw);
  gllmk_status status = gllmk_buffer_read(d->buffer, 0, raw, dev_bytes(d));
  for (int64_t i = 0; status == GLLMK_OK && i < d->numel; i++)
    d->host[i] = test_load(d->dtype, raw, i);
  free(raw);
  must(status, "gllmk_buffer_read");
}

static inline double *host_copy(const double *src, int64_t n) {
  double *copy = host_alloc((size_t)n * sizeof *copy);
  memcpy(copy, src, (size_t)n * sizeof *copy);
  return copy;
}

/* The slack (as expect_close_cond takes it) of a rope on a product's first
 * `columns` columns ([m, n], GPT-J pairs): |x| + |y| of each turned pair,
 * what a rounding of the product before the turn (the cpu's way) moves each
 * output by, relative to that rounding. */
static inline double *rope_pair_slack(int64_t m, int64_t n, int64_t columns, int64_t head_dim,
                                      int64_t rotary_dim, const double *product) {
  double *slack = host_alloc((size_t)(m * n) * sizeof *slack);
  for (int64_t r = 0; r < m; r++)
    for (int64_t c = 0; c < columns; c++)
      if (c % head_dim < rotary_dim) slack[r * n + c] = fabs(product[r * n + c]) + fabs(product[r * n + (c ^ 1)]);
  return slack;
}

/* Element positions (indices into base->host) of a view into base's buffer,
 * in the view's row-major order. */
static inline int64_t *view_positions(const dev *base, const gllmk_tensor *view) {
  int64_t n = gllmk_tensor_numel(view);
  int64_t *pos = host_alloc((size_t)n * sizeof *pos);
  int64_t origin = (int64_t)(view->offset / gllmk_dtype_size(base->dtype));
  int64_t idx[GLLMK_MAX_DIMS] = {0};
  for (int64_t i = 0; i < n; i++) {
    pos[i] = origin;
    for (int32_t d = 0; d < view->ndim; d++) pos[i] += idx[d] * view->strides[d];
    for (int32_t d = view->ndim - 1; d >= 0; d--) {
      if (++idx[d] < view->shape[d]) break;
      idx[d] = 0;
    }
  }
  return pos;
}

static inline double *gather(const dev *base, const gllmk_tensor *view) {
  int64_t n = gllmk_tensor_numel(view);
  int64_t *pos = view_positions(base, view);
  double *values = host_alloc((size_t)n * sizeof *values);
  for (int64_t i = 0; i < n; i++) values[i] = base->host[pos[i]];
  return values;
}

static inline gllmk_tensor slice(const gllmk_tensor *t, int32_t dim, int64_t start, int64_t length,
                                 int64_t step) {
  gllmk_tensor out;
  must(gllmk_tensor_slice(t, dim, start, length, step, &out), "gllmk_tensor_slice");
  return out;
}

static inline gllmk_tensor permute(const gllmk_tensor *t, const int32_t *order) {
  gllmk_tensor out;
  must(gllmk_tensor_permute(t, order, &out), "gllmk_tensor_permute");
  return out;
}

static inline gllmk_tensor reshape(const gllmk_tensor *t, shape s) {
  gllmk_tensor out;
  must(gllmk_tensor_reshape(t, s.ndim, s.d, &out), "gllmk_tensor_reshape");
  return out;
}

/* ------------------------------------------------------- comparing */

static inline double dtype_tolerance(gllmk_dtype dtype) {
  switch (dtype) {
    case GLLMK_F16: return 1e-3;
    case GLLMK_BF16: return 1e-2;
    default: return 1e-5;
  }
}

/* The smallest subnormal: the rounding step of results near zero. */
static inline double dtype_tiny(gllmk_dtype dtype) {
  switch (dtype) {
    case GLLMK_F16: return 0x1.0p-24;
    case GLLMK_BF16: return 0x1.0p-133;
    default: return 0x1.0p-149;
  }
}

/* The documented tolerance (see the top of this file), widened per element
 * by cond[i] where the result is a sum whose terms may cancel (NULL: none).
 * Infinite references (the -inf lse of a row without keys) must match
 * exactly. */
static inline void expect_close_cond(const char *what, gllmk_dtype dtype, int64_t n,
                                     const double *out, const double *ref,
                                     const double *cond) {
  double tol = dtype_tolerance(dtype), tiny = dtype_tiny(dtype), ref_sq = 0.0, diff_sq = 0.0,
         cond_sq = 0.0;
  int64_t finite = 0, bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(ref[i])) {
      ref_sq += ref[i] * ref[i];
      finite++;
    }
  double rms = finite ? sqrt(ref_sq / (double)finite) : 0.0;
  for (int64_t i = 0; i < n; i++) {
    bool ok;
    if (isnan(out[i])) {
      ok = false;
    } else if (!isfinite(ref[i])) {
      ok = out[i] == ref[i];
    } else {
      double err = fabs(out[i] - ref[i]), slack = cond ? cond[i] : 0.0;
      diff_sq += err * err;
      cond_sq += slack * slack;
      ok = err <= tol * (fabs(ref[i]) + rms + slack) + tiny;
    }
    if (!ok && bad++ == 0) first = i;
  }
  double norm_limit = tol * (sqrt(ref_sq) + sqrt(cond_sq)) + tiny * sqrt((double)n);
  if (bad || !(sqrt(diff_sq) <= norm_limit))
    conf_fail("%s: %lld of %lld elements fail |out-ref| <= %g*(|ref|+%.3g); first at [%lld]: "
              "out=%.9g ref=%.9g; ||out-ref||/||ref||=%.3g (limit %g)",
              what, (long long)bad, (long long)n, tol, rms, (long long)(first < 0 ? 0 : first),
              first < 0 ? 0.0 : out[first], first < 0 ? 0.0 : ref[first],
              ref_sq > 0.0 ? sqrt(diff_sq / ref_sq) : sqrt(diff_sq), tol);
}

static inline void expect_close(const char *what, gllmk_dtype dtype, int64_t n, const double *out,
                                const double *ref) {
  expect_close_cond(what, dtype, n, out, ref, NULL);
}

static inline void expect_equal(const char *what, int64_t n, const double *out, const double *ref) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (!(out[i] == ref[i]) && bad++ == 0) first = i;
  if (bad)
    conf_fail("%s: %lld of %lld elements differ; first at [%lld]: out=%.9g expected=%.9g", what,
              (long long)bad, (long long)n, (long long)first, out[first], ref[first]);
}

/* ------------------------------------------------------ the views file */

/* Adds the view cases (tests/conformance_views.c: every op that accepts
 * views, run on views) of backend number `backend`, named `name`, to tc. */
void conformance_views_add(TCase *tc, int backend, const char *name, bool software);

#endif /* GLLMK_TESTS_CONFORMANCE_H_ */
