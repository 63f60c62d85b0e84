/*
 * abi_v2.c - the ABI v2 contract through the public API: plugins of other
 * ABI versions rejected with both versions named, argument structs of an
 * older (smaller) or newer (larger) header, capability queries, recordings
 * (core replay and a plugin's native form), per-op timing, external memory,
 * DLPack, and handles that stay safe after free.
 *
 * Runs on the cpu plugin and on the fake plugins of tests/fake_plugin.c,
 * each copied into a temporary plugin directory of its own.
 */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gllmk/gllmk_dlpack.h"
#include "testlib.h"

static char plugin_dir[PATH_MAX];

static void setup(void) { test_temp_dir(plugin_dir, sizeof plugin_dir, "gllmk-abi"); }

static void teardown(void) { test_remove_dir(plugin_dir); }

/* Copies a built plugin into the test's plugin directory as `name`. */
static void add_plugin(const char *src, const char *name) {
  test_copy_file(src, plugin_dir, name, 0644);
}

static void add_fake(const char *variant, const char *name) {
  char src[PATH_MAX];
  snprintf(src, sizeof src, "%s/%s.so", TEST_FAKE_DIR, variant);
  add_plugin(src, name);
}

static gllmk_context *context_on(const char *backend) {
  gllmk_context_options options = {.backend = backend, .plugin_dir = plugin_dir};
  gllmk_context *ctx = NULL;
  gllmk_status status = gllmk_context_create(&options, &ctx);
  ck_assert_msg(status == GLLMK_OK, "context on %s: %s", backend, gllmk_last_error());
  return ctx;
}

static gllmk_context *cpu_context(void) {
  add_plugin(TEST_CPU_PLUGIN, "gllmk-cpu.so");
  return context_on("cpu");
}

/* A 1-D tensor of `n` 4-byte elements (f32 or i32) at the start of a new
 * buffer holding `values` (or not written: NULL). */
static gllmk_tensor tensor_1d(gllmk_context *ctx, gllmk_dtype dtype, int64_t n,
                              const void *values) {
  gllmk_buffer *buffer;
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, (uint64_t)n * 4, &buffer), GLLMK_OK);
  if (values) ck_assert_int_eq(gllmk_buffer_write(buffer, 0, values, (uint64_t)n * 4), GLLMK_OK);
  gllmk_tensor t;
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, dtype, 1, &n, &t), GLLMK_OK);
  return t;
}

static gllmk_tensor f32_tensor(gllmk_context *ctx, int64_t n, const float *values) {
  return tensor_1d(ctx, GLLMK_F32, n, values);
}

static void read_f32(const gllmk_tensor *t, float *out, int64_t n) {
  ck_assert_int_eq(gllmk_buffer_read(t->buffer, t->offset, out, (uint64_t)n * 4), GLLMK_OK);
}

/* ------------------------------------------------------- plugin versions */

static const gllmk_plugin_record *only_record(gllmk_discovery **out) {
  gllmk_context_options options = {.plugin_dir = plugin_dir};
  ck_assert_int_eq(gllmk_discover(&options, out), GLLMK_OK);
  ck_assert_uint_eq(gllmk_discovery_plugin_count(*out), 1);
  return gllmk_discovery_plugin(*out, 0);
}

START_TEST(v1_plugin_is_rejected_naming_both_versions) {
  add_fake("abiv1", "gllmk-fakev1.so");
  gllmk_discovery *d;
  const gllmk_plugin_record *r = only_record(&d);
  ck_assert_uint_eq(r->state, GLLMK_PLUGIN_REJECTED);
  ck_assert_msg(test_contains(r->reason, "plugin ABI 1.0") && test_contains(r->reason, "needs 2.x"),
                "reason: %s", r->reason);
  gllmk_discovery_free(d);
}
END_TEST

START_TEST(newer_minor_plugin_is_rejected) {
  add_fake("newerminor", "gllmk-fakenewer.so");
  gllmk_discovery *d;
  const gllmk_plugin_record *r = only_record(&d);
  ck_assert_uint_eq(r->state, GLLMK_PLUGIN_REJECTED);
  ck_assert_msg(test_contains(r->reason, "newer than this libgllmk's 2."), "reason: %s", r->reason);
  gllmk_discovery_free(d);
}
END_TEST

/* ---------------------------------------------------- growable structs */

/* gllmk_matmul_args as a program built against ABI 2.0 saw it (no flags). */
typedef struct matmul_args_v2_0 {
  const gllmk_tensor *out, *a, *b, *bias;
  float alpha, beta;
  int32_t b_layout;
} matmul_args_v2_0;

/* A newer program's struct: one more field this library does not know. */
typedef struct matmul_args_future {
  gllmk_matmul_args known;
  uint64_t future_field;
} matmul_args_future;

/* out [1, 2] = a [1, 2] . b [2, 2]^T */
typedef struct small_matmul {
  gllmk_tensor a, b, out;
} small_matmul;

static small_matmul small_matmul_on(gllmk_context *ctx) {
  small_matmul m;
  m.a = f32_tensor(ctx, 2, (const float[]){1, 2});
  m.b = f32_tensor(ctx, 4, (const float[]){3, 4, 5, 6});
  m.out = f32_tensor(ctx, 2, (const float[]){-7, -7});
  ck_assert_int_eq(gllmk_tensor_reshape(&m.a, 2, (const int64_t[]){1, 2}, &m.a), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_reshape(&m.b, 2, (const int64_t[]){2, 2}, &m.b), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_reshape(&m.out, 2, (const int64_t[]){1, 2}, &m.out), GLLMK_OK);
  return m;
}

static void expect_out(const small_matmul *m, float first, float second) {
  float got[2];
  read_f32(&m->out, got, 2);
  ck_assert_msg(got[0] == first && got[1] == second, "out = [%g, %g], expected [%g, %g]",
                (double)got[0], (double)got[1], (double)first, (double)second);
}

START_TEST(a_caller_built_against_a_smaller_struct_still_works) {
  gllmk_context *ctx = cpu_context();
  small_matmul m = small_matmul_on(ctx);
  matmul_args_v2_0 old = {.out = &m.out, .a = &m.a, .b = &m.b, .alpha = 1.0f};
  ck_assert_int_eq(gllmk_op_run(ctx, GLLMK_OP_matmul, &old, sizeof old), GLLMK_OK);
  expect_out(&m, 11, 17);
  gllmk_context_destroy(ctx);
}
END_TEST

START_TEST(struct_sizes_outside_what_the_library_knows) {
  gllmk_context *ctx = cpu_context();
  small_matmul m = small_matmul_on(ctx);
  matmul_args_future future = {.known = {.out = &m.out, .a = &m.a, .b = &m.b, .alpha = 1.0f}};
  /* A newer caller that leaves its new field at zero asks nothing new. */
  ck_assert_int_eq(gllmk_op_run(ctx, GLLMK_OP_matmul, &future, sizeof future), GLLMK_OK);
  expect_out(&m, 11, 17);
  /* Asking for what this library cannot know of: refused, nothing written. */
  future.future_field = 1;
  future.known.alpha = 2.0f;
  ck_assert_int_eq(gllmk_op_run(ctx, GLLMK_OP_matmul, &future, sizeof future), GLLMK_ERR_UNSUPPORTED);
  ck_assert(test_contains(gllmk_last_error(), "newer"));
  expect_out(&m, 11, 17);
  /* Smaller than any ABI 2 struct. */
  ck_assert_int_eq(gllmk_op_run(ctx, GLLMK_OP_matmul, &future, offsetof(gllmk_matmul_args, beta)),
                   GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert(test_contains(gllmk_last_error(), "args_size"));
  /* A size that ends inside a field (half of rope's inv_freq pointer, which
   * the fuzzer found read as an address): no struct version has it. */
  gllmk_rope_args rope = {.inv_freq = (const gllmk_tensor *)(uintptr_t)0x1234567812345678u};
  ck_assert_int_eq(gllmk_op_run(ctx, GLLMK_OP_rope, &rope, offsetof(gllmk_rope_args, inv_freq) + 4),
                   GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert(test_contains(gllmk_last_error(), "ends inside a field"));
  ck_assert_int_eq(gllmk_op_run(ctx, (gllmk_op)GLLMK_OP_COUNT, &future, sizeof future),
                   GLLMK_ERR_INVALID_ARGUMENT);
  /* The same for context options. */
  gllmk_context *other = NULL;
  ck_assert_int_eq(gllmk_context_create_ex(&(gllmk_context_options){0}, 4, &other),
                   GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(other);
  gllmk_context_destroy(ctx);
}
END_TEST

START_TEST(unknown_matmul_flags_are_refused) {
  gllmk_context *ctx = cpu_context();
  small_matmul m = small_matmul_on(ctx);
  gllmk_matmul_args args = {.out = &m.out, .a = &m.a, .b = &m.b, .alpha = 1.0f, .flags = 1u << 7};
  ck_assert_int_eq(gllmk_matmul(ctx, &args), GLLMK_ERR_INVALID_ARGUMENT);
  args.flags = GLLMK_MATMUL_ALLOW_TF32; /* an allowance: exact F32 is still a right answer */
  ck_assert_int_eq(gllmk_matmul(ctx, &args), GLLMK_OK);
  expect_out(&m, 11, 17);
  gllmk_context_destroy(ctx);
}
END_TEST

/* ----------------------------------------- fields a plugin must know */

/* gllmk_rope_args as a program built against ABI 2.1 saw it (no inv_freq). */
#define ROPE_ARGS_V2_1 offsetof(gllmk_rope_args, inv_freq)

/* rope of one pair: x [tokens <= 2, 1, 2] at `positions` into out (holding
 * -7), by theta 10000 (NeoX) or by inv_freq = 0.5 radians per position;
 * args point into the struct. */
typedef struct small_rope {
  gllmk_tensor x, out, positions, inv_freq;
  gllmk_rope_args args;
} small_rope;

static const float poison4[4] = {-7, -7, -7, -7};

static void small_rope_on(gllmk_context *ctx, int64_t tokens, const float *x,
                          const int32_t *positions, small_rope *r) {
  const int64_t shape[] = {tokens, 1, 2};
  r->x = f32_tensor(ctx, 2 * tokens, x);
  r->out = f32_tensor(ctx, 2 * tokens, poison4);
  ck_assert_int_eq(gllmk_tensor_reshape(&r->x, 3, shape, &r->x), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_reshape(&r->out, 3, shape, &r->out), GLLMK_OK);
  r->positions = tensor_1d(ctx, GLLMK_I32, tokens, positions);
  r->inv_freq = f32_tensor(ctx, 1, (const float[]){0.5f});
  r->args = (gllmk_rope_args){.out = &r->out, .x = &r->x, .positions = &r->positions,
                              .theta = 10000.0f, .rotary_dim = 2, .style = GLLMK_ROPE_NEOX,
                              .inv_freq = &r->inv_freq};
}

static void expect_near(const gllmk_tensor *t, const float *want, int64_t n) {
  float got[4];
  read_f32(t, got, n);
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(fabsf(got[i] - want[i]) < 1e-6f, "[%d] = %g, expected %g", (int)i,
                  (double)got[i], (double)want[i]);
}

/* rope's inv_freq (ABI 2.2) changes what rope computes, so a plugin of ABI
 * 2.1, which would run the call without it and return OK, gets no such
 * call: the core refuses it, naming both versions, and runs nothing. The
 * same plugin still runs rope without inv_freq, and so does a caller whose
 * struct predates the field. */
START_TEST(a_needed_field_newer_than_the_plugin_is_refused) {
  add_fake("software", "gllmk-fakesw.so"); /* ABI 2.1 */
  gllmk_context *ctx = context_on("fakesw");
  small_rope r; /* (1, 0) at position 0, (0, 1) at position 1 */
  small_rope_on(ctx, 2, (const float[]){1, 0, 0, 1}, (const int32_t[]){0, 1}, &r);
  const char *expected = "gllmk_rope: inv_freq needs plugin ABI 2.2, the fakesw plugin has 2.1";
  ck_assert_int_eq(gllmk_rope(ctx, &r.args), GLLMK_ERR_UNSUPPORTED);
  ck_assert_msg(test_contains(gllmk_last_error(), expected), "%s", gllmk_last_error());
  ck_assert_int_eq(gllmk_op_supported(ctx, GLLMK_OP_rope, &r.args, sizeof r.args),
                   GLLMK_ERR_UNSUPPORTED);
  ck_assert_msg(test_contains(gllmk_last_error(), expected), "%s", gllmk_last_error());
  ck_assert_int_eq(gllmk_recording_begin(ctx), GLLMK_OK);
  ck_assert_int_eq(gllmk_rope(ctx, &r.args), GLLMK_ERR_UNSUPPORTED); /* not recorded either */
  gllmk_recording *recording;
  ck_assert_int_eq(gllmk_recording_end(ctx, &recording), GLLMK_OK);
  ck_assert_int_eq(gllmk_recording_replay(recording), GLLMK_OK);
  gllmk_recording_free(recording);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  expect_near(&r.out, poison4, 4); /* nothing ran */
  /* Without inv_freq it runs: (1, 0) stays, (0, 1) turns by 1 radian. */
  const float want[4] = {1, 0, -sinf(1.0f), cosf(1.0f)};
  r.args.inv_freq = NULL;
  ck_assert_int_eq(gllmk_rope(ctx, &r.args), GLLMK_OK);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  expect_near(&r.out, want, 4);
  /* A caller built against ABI 2.1 passes the smaller struct: whatever lies
   * past it is not read. */
  ck_assert_int_eq(gllmk_buffer_write(r.out.buffer, 0, poison4, sizeof poison4), GLLMK_OK);
  r.args.inv_freq = &r.inv_freq;
  ck_assert_int_eq(gllmk_op_run(ctx, GLLMK_OP_rope, &r.args, ROPE_ARGS_V2_1), GLLMK_OK);
  expect_near(&r.out, want, 4);
  gllmk_context_destroy(ctx);
}
END_TEST

/* The same call on a plugin of this ABI uses inv_freq (the cpu plugin). */
START_TEST(a_needed_field_is_used_by_a_plugin_that_knows_it) {
  gllmk_context *ctx = cpu_context();
  small_rope r; /* (0, 1) at position 3, GPT-J, theta 0 (ignored) */
  small_rope_on(ctx, 1, (const float[]){0, 1}, (const int32_t[]){3}, &r);
  r.args.theta = 0.0f;
  r.args.style = GLLMK_ROPE_GPTJ;
  ck_assert_int_eq(gllmk_rope(ctx, &r.args), GLLMK_OK);
  expect_near(&r.out, (const float[]){-sinf(1.5f), cosf(1.5f)}, 2); /* 3 * 0.5 radians */
  gllmk_context_destroy(ctx);
}
END_TEST

/* ---------------------------------------------------- capability query */

START_TEST(supported_answers_before_anything_runs) {
  add_fake("vulkan", "gllmk-fakevk.so");
  gllmk_context *ctx = context_on("fakevk");
  gllmk_buffer *buffer;
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, 64, &buffer), GLLMK_OK);
  ck_assert_int_eq(gllmk_buffer_fill(buffer, 0, 64, 0xAB), GLLMK_OK);
  gllmk_tensor f32, f16;
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, GLLMK_F32, 1, (const int64_t[]){4}, &f32), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, GLLMK_F16, 1, (const int64_t[]){4}, &f16), GLLMK_OK);
  gllmk_fill_args fill = {.out = &f32, .value = 1.0f};
  ck_assert_int_eq(gllmk_op_supported(ctx, GLLMK_OP_fill, &fill, sizeof fill), GLLMK_OK);
  fill.out = &f16;
  /* Declared by the plugin's supports(), with its reason. */
  ck_assert_int_eq(gllmk_op_supported(ctx, GLLMK_OP_fill, &fill, sizeof fill), GLLMK_ERR_UNSUPPORTED);
  ck_assert_msg(test_contains(gllmk_last_error(), "fills f32 and i32 only"), "%s", gllmk_last_error());
  ck_assert_int_eq(gllmk_fill(ctx, &fill), GLLMK_ERR_UNSUPPORTED);
  unsigned char bytes[64];
  ck_assert_int_eq(gllmk_buffer_read(buffer, 0, bytes, 64), GLLMK_OK);
  for (int i = 0; i < 64; i++) ck_assert_uint_eq(bytes[i], 0xAB);
  /* A NULL op slot. */
  gllmk_add_args add = {.out = &f32, .a = &f32, .b = &f32};
  ck_assert_int_eq(gllmk_op_supported(ctx, GLLMK_OP_add, &add, sizeof add), GLLMK_ERR_UNSUPPORTED);
  ck_assert(test_contains(gllmk_last_error(), "does not implement"));
  /* Invalid arguments are answered as the call would answer them. */
  fill.out = NULL;
  ck_assert_int_eq(gllmk_op_supported(ctx, GLLMK_OP_fill, &fill, sizeof fill),
                   GLLMK_ERR_INVALID_ARGUMENT);
  gllmk_context_destroy(ctx);
}
END_TEST

/* ------------------------------------------------------------ recordings */

/* Records fill(a, 1) then fill(b, 2) on `backend`; checks the form, replays. */
static void record_two_fills(const char *backend, int expect_native) {
  gllmk_context *ctx = context_on(backend);
  gllmk_tensor a = f32_tensor(ctx, 3, (const float[]){0, 0, 0});
  gllmk_tensor b = f32_tensor(ctx, 3, (const float[]){0, 0, 0});
  ck_assert_int_eq(gllmk_recording_begin(ctx), GLLMK_OK);
  ck_assert_int_eq(gllmk_recording_begin(ctx), GLLMK_ERR_INVALID_ARGUMENT); /* not nested */
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&a, 1.0f}), GLLMK_OK);
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&b, 2.0f}), GLLMK_OK);
  gllmk_recording *recording;
  ck_assert_int_eq(gllmk_recording_end(ctx, &recording), GLLMK_OK);
  ck_assert_int_eq(gllmk_recording_is_native(recording), expect_native);
  float got[3];
  read_f32(&a, got, 3);
  ck_assert(got[0] == 0 && got[2] == 0); /* recorded, not run */
  ck_assert_int_eq(gllmk_recording_replay(recording), GLLMK_OK);
  read_f32(&a, got, 3);
  ck_assert(got[0] == 1 && got[2] == 1);
  read_f32(&b, got, 3);
  ck_assert(got[0] == 2 && got[2] == 2);
  /* A freed buffer: replay refused, nothing run. */
  ck_assert_int_eq(gllmk_buffer_write(a.buffer, 0, (const float[]){5, 5, 5}, 12), GLLMK_OK);
  gllmk_buffer_free(b.buffer);
  ck_assert_int_eq(gllmk_recording_replay(recording), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert(test_contains(gllmk_last_error(), "freed"));
  read_f32(&a, got, 3);
  ck_assert(got[0] == 5);
  gllmk_recording_free(recording);
  gllmk_recording_free(recording); /* a stale handle is ignored */
  ck_assert_int_eq(gllmk_recording_replay(recording), GLLMK_ERR_INVALID_ARGUMENT);
  /* A recording left open is freed with its context. */
  ck_assert_int_eq(gllmk_recording_begin(ctx), GLLMK_OK);
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&a, 1.0f}), GLLMK_OK);
  gllmk_context_destroy(ctx);
}

START_TEST(recordings_compiled_by_a_plugin) {
  add_fake("vulkan", "gllmk-fakevk.so");
  record_two_fills("fakevk", 1);
}
END_TEST

START_TEST(recordings_replayed_by_the_core) {
  add_plugin(TEST_CPU_PLUGIN, "gllmk-cpu.so");
  record_two_fills("cpu", 0);
}
END_TEST

/* --------------------------------------------------------------- timing */

typedef struct timings {
  int count;
  gllmk_op ops[8];
  int host_timed, ordered;
  uint64_t last_end;
} timings;

static void on_timing(void *data, const gllmk_op_timing *t) {
  timings *seen = data;
  if (seen->count < 8) seen->ops[seen->count] = t->op;
  seen->count++;
  seen->host_timed += (int)t->host_timed;
  if (t->end_ns < t->start_ns || t->start_ns < seen->last_end) seen->ordered = 0;
  seen->last_end = t->end_ns;
  if (t->op == GLLMK_OP_fill) { /* the arguments as called */
    const gllmk_fill_args *args = t->args;
    if (t->args_size != sizeof *args || args->value != 3.0f) seen->ordered = 0;
  }
}

static void expect_timings(const char *backend, int host_timed) {
  gllmk_context *ctx = context_on(backend);
  gllmk_tensor a = f32_tensor(ctx, 3, NULL);
  timings seen = {.ordered = 1};
  ck_assert_int_eq(gllmk_context_set_timing(ctx, on_timing, &seen), GLLMK_OK);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&a, 3.0f}), GLLMK_OK);
  ck_assert_int_eq(seen.count, 0); /* delivered at synchronize */
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  ck_assert_int_eq(seen.count, 3);
  ck_assert_int_eq(seen.host_timed, host_timed ? 3 : 0);
  ck_assert_msg(seen.ordered, "timing records out of order or with wrong arguments");
  ck_assert_int_eq(seen.ops[0], GLLMK_OP_fill);
  ck_assert_int_eq(gllmk_context_set_timing(ctx, NULL, NULL), GLLMK_OK);
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&a, 3.0f}), GLLMK_OK);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  ck_assert_int_eq(seen.count, 3);
  gllmk_context_destroy(ctx);
}

START_TEST(timing_on_device_marks) {
  add_plugin(TEST_CPU_PLUGIN, "gllmk-cpu.so");
  expect_timings("cpu", 0);
}
END_TEST

START_TEST(timing_on_the_host_without_marks) {
  add_fake("vulkan", "gllmk-fakevk.so");
  expect_timings("fakevk", 1);
}
END_TEST

/* ------------------------------------------------------ external memory */

static void count_release(void *data) { ++*(int *)data; }

START_TEST(wrapped_host_memory_is_used_in_place) {
  gllmk_context *ctx = cpu_context();
  float host[4] = {1, 2, 3, 4};
  int released = 0;
  gllmk_external_memory memory = {.kind = GLLMK_MEMORY_HOST, .address = (uint64_t)(uintptr_t)host,
                                  .size = sizeof host, .release = count_release,
                                  .release_data = &released};
  gllmk_buffer *buffer;
  ck_assert_int_eq(gllmk_buffer_wrap(ctx, &memory, &buffer), GLLMK_OK);
  gllmk_tensor t;
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, GLLMK_F32, 1, (const int64_t[]){4}, &t), GLLMK_OK);
  ck_assert_int_eq(gllmk_add(ctx, &(gllmk_add_args){&t, &t, &t}), GLLMK_OK);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  ck_assert(host[0] == 2 && host[3] == 8); /* no copy: the caller's memory changed */
  uint32_t kind;
  uint64_t address;
  ck_assert_int_eq(gllmk_buffer_address(buffer, &kind, &address), GLLMK_OK);
  ck_assert_uint_eq(kind, GLLMK_MEMORY_HOST);
  ck_assert(address == (uint64_t)(uintptr_t)host);
  memory.kind = GLLMK_MEMORY_CUDA_DEVICE;
  gllmk_buffer *other = NULL;
  ck_assert_int_eq(gllmk_buffer_wrap(ctx, &memory, &other), GLLMK_ERR_UNSUPPORTED);
  ck_assert_ptr_null(other);
  ck_assert_int_eq(released, 0);
  gllmk_buffer_free(buffer);
  ck_assert_int_eq(released, 1);
  ck_assert(host[0] == 2); /* still the caller's, not freed */
  gllmk_context_destroy(ctx);
}
END_TEST

START_TEST(wrapping_needs_a_backend_that_can) {
  add_fake("vulkan", "gllmk-fakevk.so");
  gllmk_context *ctx = context_on("fakevk");
  float host[4];
  gllmk_buffer *buffer = NULL;
  gllmk_external_memory memory = {.kind = GLLMK_MEMORY_HOST, .address = (uint64_t)(uintptr_t)host,
                                  .size = sizeof host};
  ck_assert_int_eq(gllmk_buffer_wrap(ctx, &memory, &buffer), GLLMK_ERR_UNSUPPORTED);
  ck_assert_msg(test_contains(gllmk_last_error(), "cannot use external memory"), "%s",
                gllmk_last_error());
  ck_assert_ptr_null(buffer);
  gllmk_context_destroy(ctx);
}
END_TEST

/* --------------------------------------------------------------- DLPack */

typedef struct owned_dl {
  DLManagedTensor managed;
  int64_t shape[2], strides[2];
  float data[8];
  int *deleted;
} owned_dl;

static void delete_owned(DLManagedTensor *managed) { ++*((owned_dl *)managed->manager_ctx)->deleted; }

START_TEST(dlpack_import_and_export) {
  gllmk_context *ctx = cpu_context();
  int deleted = 0;
  /* A [2, 3] view with row stride 4 (a padded matrix), offset one element. */
  owned_dl dl = {.shape = {2, 3}, .strides = {4, 1}, .data = {9, 1, 2, 3, 9, 4, 5, 6},
                 .deleted = &deleted};
  dl.managed = (DLManagedTensor){
      .dl_tensor = {.data = dl.data, .device = {kDLCPU, 0}, .ndim = 2,
                    .dtype = {kDLFloat, 32, 1}, .shape = dl.shape, .strides = dl.strides,
                    .byte_offset = 4},
      .manager_ctx = &dl, .deleter = delete_owned};
  gllmk_buffer *buffer;
  gllmk_tensor t;
  ck_assert_int_eq(gllmk_dlpack_import(ctx, &dl.managed, &buffer, &t), GLLMK_OK);
  ck_assert_int_eq(t.ndim, 2);
  ck_assert_int_eq(t.strides[0], 4);
  ck_assert_uint_eq(t.offset, 4);
  ck_assert_int_eq(gllmk_silu(ctx, &(gllmk_silu_args){&t, &t}), GLLMK_OK);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  ck_assert(dl.data[0] == 9 && dl.data[4] == 9); /* padding untouched */
  ck_assert(fabsf(dl.data[1] - 1.0f / (1.0f + expf(-1.0f))) < 1e-6f);
  DLManagedTensor *out;
  ck_assert_int_eq(gllmk_dlpack_export(&t, &out), GLLMK_OK);
  ck_assert_ptr_eq(out->dl_tensor.data, dl.data);
  ck_assert_int_eq(out->dl_tensor.device.device_type, kDLCPU);
  ck_assert_uint_eq(out->dl_tensor.byte_offset, 4);
  ck_assert_int_eq(out->dl_tensor.shape[1], 3);
  ck_assert_int_eq(out->dl_tensor.strides[0], 4);
  ck_assert_uint_eq(out->dl_tensor.dtype.code, kDLFloat);
  out->deleter(out);
  /* Refusals take nothing: the caller still owns the tensor. */
  gllmk_buffer *none = NULL;
  gllmk_tensor unused;
  dl.managed.dl_tensor.dtype = (DLDataType){kDLFloat, 64, 1};
  ck_assert_int_eq(gllmk_dlpack_import(ctx, &dl.managed, &none, &unused), GLLMK_ERR_UNSUPPORTED);
  dl.managed.dl_tensor.dtype = (DLDataType){kDLFloat, 32, 1};
  dl.managed.dl_tensor.device.device_type = kDLCUDA;
  ck_assert_int_eq(gllmk_dlpack_import(ctx, &dl.managed, &none, &unused), GLLMK_ERR_UNSUPPORTED);
  ck_assert_ptr_null(none);
  ck_assert_int_eq(deleted, 0);
  gllmk_buffer_free(buffer);
  ck_assert_int_eq(deleted, 1);
  gllmk_context_destroy(ctx);
}
END_TEST

/* ---------------------------------------------------- handles after free */

START_TEST(a_freed_buffer_is_refused_not_used) {
  gllmk_context *ctx = cpu_context();
  gllmk_tensor t = f32_tensor(ctx, 16, NULL);
  gllmk_buffer *freed = t.buffer;
  gllmk_buffer_free(freed);
  ck_assert_uint_eq(gllmk_buffer_size(freed), 0);
  ck_assert_ptr_null(gllmk_buffer_context(freed));
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&t, 1.0f}), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_msg(test_contains(gllmk_last_error(), "not a live gllmk buffer"), "%s", gllmk_last_error());
  float value = 1;
  ck_assert_int_eq(gllmk_buffer_write(freed, 0, &value, 4), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(gllmk_buffer_read(freed, 0, &value, 4), GLLMK_ERR_INVALID_ARGUMENT);
  gllmk_buffer_free(freed); /* twice: ignored */
  /* A new buffer may reuse the memory, never the handle. */
  gllmk_tensor fresh = f32_tensor(ctx, 16, NULL);
  ck_assert_ptr_ne(fresh.buffer, freed);
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&t, 1.0f}), GLLMK_ERR_INVALID_ARGUMENT);
  gllmk_context_destroy(ctx);
}
END_TEST

START_TEST(a_destroyed_context_and_its_buffers_are_refused) {
  gllmk_context *ctx = cpu_context();
  gllmk_tensor t = f32_tensor(ctx, 16, NULL);
  gllmk_context_destroy(ctx);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_msg(test_contains(gllmk_last_error(), "not a live gllmk context"), "%s", gllmk_last_error());
  ck_assert_int_eq(gllmk_fill(ctx, &(gllmk_fill_args){&t, 1.0f}), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(gllmk_context_backend(ctx));
  ck_assert_uint_eq(gllmk_buffer_size(t.buffer), 0);
  gllmk_buffer *b = NULL;
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, 16, &b), GLLMK_ERR_INVALID_ARGUMENT);
  ck_assert_ptr_null(b);
  ck_assert_int_eq(gllmk_recording_begin(ctx), GLLMK_ERR_INVALID_ARGUMENT);
  gllmk_context_destroy(ctx); /* twice: ignored */
  gllmk_buffer_free(t.buffer);
  /* A handle that was never issued. */
  ck_assert_int_eq(gllmk_synchronize((gllmk_context *)(uintptr_t)0x1234), GLLMK_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A free waits for the queue; a device error met there is the next
 * synchronize's, not lost. */
START_TEST(a_free_keeps_a_device_error_for_synchronize) {
  gllmk_context *ctx = cpu_context();
  gllmk_tensor table = f32_tensor(ctx, 8, NULL), out = f32_tensor(ctx, 4, NULL);
  ck_assert_int_eq(gllmk_tensor_reshape(&table, 2, (const int64_t[]){2, 4}, &table), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_reshape(&out, 2, (const int64_t[]){1, 4}, &out), GLLMK_OK);
  gllmk_buffer *ids_buffer;
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, 4, &ids_buffer), GLLMK_OK);
  int32_t bad = 7;
  ck_assert_int_eq(gllmk_buffer_write(ids_buffer, 0, &bad, 4), GLLMK_OK);
  gllmk_tensor ids;
  ck_assert_int_eq(gllmk_tensor_make(ids_buffer, 0, GLLMK_I32, 1, (const int64_t[]){1}, &ids), GLLMK_OK);
  ck_assert_int_eq(gllmk_embedding(ctx, &(gllmk_embedding_args){&out, &table, &ids}), GLLMK_OK);
  gllmk_buffer_free(ids_buffer);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_ERR_OUT_OF_RANGE);
  ck_assert_int_eq(gllmk_synchronize(ctx), GLLMK_OK);
  gllmk_context_destroy(ctx);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  Suite *suite = suite_create("abi_v2");
  TCase *tc = test_tcase("abi_v2");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, v1_plugin_is_rejected_naming_both_versions);
  tcase_add_test(tc, newer_minor_plugin_is_rejected);
  tcase_add_test(tc, a_caller_built_against_a_smaller_struct_still_works);
  tcase_add_test(tc, struct_sizes_outside_what_the_library_knows);
  tcase_add_test(tc, unknown_matmul_flags_are_refused);
  tcase_add_test(tc, a_needed_field_newer_than_the_plugin_is_refused);
  tcase_add_test(tc, a_needed_field_is_used_by_a_plugin_that_knows_it);
  tcase_add_test(tc, supported_answers_before_anything_runs);
  tcase_add_test(tc, recordings_compiled_by_a_plugin);
  tcase_add_test(tc, recordings_replayed_by_the_core);
  tcase_add_test(tc, timing_on_device_marks);
  tcase_add_test(tc, timing_on_the_host_without_marks);
  tcase_add_test(tc, wrapped_host_memory_is_used_in_place);
  tcase_add_test(tc, wrapping_needs_a_backend_that_can);
  tcase_add_test(tc, dlpack_import_and_export);
  tcase_add_test(tc, a_freed_buffer_is_refused_not_used);
  tcase_add_test(tc, a_destroyed_context_and_its_buffers_are_refused);
  tcase_add_test(tc, a_free_keeps_a_device_error_for_synchronize);
  suite_add_tcase(suite, tc);
  return test_run_suite(suite);
}
