/*
 * collectives.c - communicators, all-reduce and all-gather (gllmk.h,
 * "collectives") on every backend that has them.
 *
 * usage: collectives [--quick] [--seed N] [--backend NAME] [--plugin-dir DIR]
 *
 * For 1, 2 and 3 ranks (as many as the backend can place: the cpu loopback
 * any number, cuda one GPU per rank): all_reduce in place and out of place
 * and all_gather in every dtype, with odd sizes, at an offset inside a
 * larger buffer, outputs poisoned first and everything beyond the output
 * checked untouched; sums checked against float64 with the dtype's
 * rounding, and every rank's result the same bits. Many aligned sums in a
 * row of sizes on both sides of 1 MiB (cuda's peer-memory path and NCCL).
 * Then bad input: a clear error and nothing written; a recording
 * that holds a collective (refused where recordings are replayed call by
 * call; on a backend with native recordings, replayed and checked); a
 * communicator freed with its context. A backend without collectives is
 * reported as "skipped: <reason>".
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

static test_backend backends[TEST_MAX_BACKENDS];
static int backend_count;

#define MAX_RANKS 3
#define POISON 0x5a

static void must(gllmk_status status, const char *what) {
  ck_assert_msg(status == GLLMK_OK, "%s: %s: %s", what, gllmk_status_string(status),
                gllmk_last_error());
}

/* `ranks` contexts of a backend, one device each where it has several;
 * false (and the reason) when it cannot make a communicator of them. */
typedef struct group {
  uint32_t ranks;
  gllmk_context *ctx[MAX_RANKS];
  gllmk_communicator *comm;
} group;

/* The group, or false after a "skipped: <reason>" line naming `what`. */
static bool group_open_or_skip(int backend, uint32_t ranks, const char *what, group *g) {
  char why[512];
  memset(g, 0, sizeof *g);
  g->ranks = ranks;
  if (test_open_ranks(backends[backend].name, ranks, g->ctx, &g->comm, why, sizeof why))
    return true;
  printf("collectives: %s, %u ranks, %s: skipped: %s\n", backends[backend].name, ranks, what, why);
  return false;
}

static void group_close(group *g) {
  gllmk_communicator_free(g->comm);
  for (uint32_t r = 0; r < g->ranks; r++) gllmk_context_destroy(g->ctx[r]);
}

/* Rank buffers: an input and an output tensor, each at an odd element
 * offset inside a buffer with room behind it. */
typedef struct rank_data {
  gllmk_buffer *in_buf, *out_buf;
  gllmk_tensor in, out;
  uint64_t in_size, out_size;
  int64_t pad;
} rank_data;

/* Elements before and after each tensor: an odd count puts it at an
 * unaligned offset, ALIGNED_PAD on 64 bytes (cuda's vector paths). */
#define PAD 37
#define ALIGNED_PAD 32

static void rank_alloc_at(gllmk_context *ctx, gllmk_dtype dt, int64_t n, int64_t out_n, int64_t pad,
                          rank_data *d) {
  size_t elem = gllmk_dtype_size(dt);
  d->pad = pad;
  d->in_size = (uint64_t)(n + 2 * pad) * elem;
  d->out_size = (uint64_t)(out_n + 2 * pad) * elem;
  must(gllmk_buffer_alloc(ctx, d->in_size, &d->in_buf), "alloc in");
  must(gllmk_buffer_alloc(ctx, d->out_size, &d->out_buf), "alloc out");
  must(gllmk_tensor_make(d->in_buf, (uint64_t)pad * elem, dt, 1, &n, &d->in), "in tensor");
  must(gllmk_tensor_make(d->out_buf, (uint64_t)pad * elem, dt, 1, &out_n, &d->out), "out tensor");
  must(gllmk_buffer_fill(d->out_buf, 0, d->out_size, POISON), "poison");
}

static void rank_alloc(gllmk_context *ctx, gllmk_dtype dt, int64_t n, int64_t out_n, rank_data *d) {
  rank_alloc_at(ctx, dt, n, out_n, PAD, d);
}

static void rank_free(rank_data *d) {
  gllmk_buffer_free(d->in_buf);
  gllmk_buffer_free(d->out_buf);
}

/* Random values of rank r written into its input; the float64 values kept. */
static void fill_input(gllmk_dtype dt, int64_t n, uint32_t r, rank_data *d, double *values) {
  size_t elem = gllmk_dtype_size(dt);
  unsigned char *raw = malloc((size_t)n * elem);
  ck_assert_ptr_nonnull(raw);
  test_rng rng = test_rng_for(test_opts.seed * 131 + r);
  for (int64_t i = 0; i < n; i++) {
    double v = dt == GLLMK_I32 ? (double)test_rng_int(&rng, -1000, 1000)
                               : test_round(dt, test_rng_uniform(&rng, -4, 4));
    values[i] = v;
    test_store(dt, raw, i, v);
  }
  must(gllmk_buffer_write(d->in_buf, d->in.offset, raw, (uint64_t)n * elem), "write input");
  free(raw);
}

/* The whole output buffer: the tensor's values, and the poison around it. */
static void read_output(const rank_data *d, gllmk_dtype dt, int64_t out_n, double *values) {
  size_t elem = gllmk_dtype_size(dt);
  unsigned char *raw = malloc(d->out_size);
  ck_assert_ptr_nonnull(raw);
  must(gllmk_buffer_read(d->out_buf, 0, raw, d->out_size), "read output");
  const uint64_t pad_bytes = (uint64_t)d->pad * elem;
  for (uint64_t i = 0; i < pad_bytes; i++) {
    ck_assert_msg(raw[i] == POISON, "byte %llu before the output was written", (unsigned long long)i);
    ck_assert_msg(raw[d->out_size - 1 - i] == POISON, "a byte after the output was written");
  }
  for (int64_t i = 0; i < out_n; i++) values[i] = test_load(dt, raw + pad_bytes, i);
  free(raw);
}

static const gllmk_dtype float_types[] = {GLLMK_F32, GLLMK_F16, GLLMK_BF16};

static void check_sum(gllmk_dtype dt, const double *got, double *const *inputs, uint32_t ranks,
                      int64_t n, uint32_t r) {
  for (int64_t i = 0; i < n; i++) {
    double want = 0, bound = 0;
    for (uint32_t k = 0; k < ranks; k++) {
      want += inputs[k][i];
      bound += fabs(inputs[k][i]);
    }
    /* One rounding to dt per partial sum at most (NCCL rounds each step). */
    double eps = dt == GLLMK_F32 ? 1e-6 : dt == GLLMK_F16 ? 1e-3 : 8e-3;
    ck_assert_msg(fabs(got[i] - want) <= eps * bound * ranks + 1e-30,
                  "rank %u element %lld: %.8g, want %.8g (%s)", r, (long long)i, got[i], want,
                  gllmk_dtype_name(dt));
  }
}

/* all_reduce of n elements over the group, in place or not, with `pad`
 * elements around each tensor: every rank must get the sum, and the same
 * bits as rank 0 (ranks that disagree would drift apart in a model). */
static void reduce_case_at(group *g, gllmk_dtype dt, int64_t n, bool in_place, int64_t pad) {
  rank_data d[MAX_RANKS];
  double *inputs[MAX_RANKS], *got = malloc(sizeof(double) * (size_t)n);
  double *rank0 = malloc(sizeof(double) * (size_t)n);
  gllmk_tensor outs[MAX_RANKS], ins[MAX_RANKS];
  for (uint32_t r = 0; r < g->ranks; r++) {
    rank_alloc_at(g->ctx[r], dt, n, n, pad, &d[r]);
    inputs[r] = malloc(sizeof(double) * (size_t)n);
    fill_input(dt, n, r, &d[r], inputs[r]);
    ins[r] = d[r].in;
    outs[r] = in_place ? d[r].in : d[r].out;
  }
  must(gllmk_all_reduce(g->comm, outs, ins), "gllmk_all_reduce");
  for (uint32_t r = 0; r < g->ranks; r++) {
    if (in_place) /* the result, copied next to its poison to be read the same way */
      must(gllmk_buffer_copy(d[r].out_buf, d[r].out.offset, d[r].in_buf, d[r].in.offset,
                             (uint64_t)n * gllmk_dtype_size(dt)), "copy");
    read_output(&d[r], dt, n, got);
    check_sum(dt, got, inputs, g->ranks, n, r);
    if (r == 0) memcpy(rank0, got, sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n && r > 0; i++)
      ck_assert_msg(got[i] == rank0[i], "rank %u element %lld: %.8g, rank 0 has %.8g (%s, %lld elements)", r,
                    (long long)i, got[i], rank0[i], gllmk_dtype_name(dt), (long long)n);
  }
  for (uint32_t r = 0; r < g->ranks; r++) {
    rank_free(&d[r]);
    free(inputs[r]);
  }
  free(got);
  free(rank0);
}

static void reduce_case(group *g, gllmk_dtype dt, int64_t n, bool in_place) {
  reduce_case_at(g, dt, n, in_place, PAD);
}

static void gather_case(group *g, gllmk_dtype dt, int64_t n) {
  rank_data d[MAX_RANKS];
  double *inputs[MAX_RANKS], *got = malloc(sizeof(double) * (size_t)n * g->ranks);
  gllmk_tensor outs[MAX_RANKS], ins[MAX_RANKS];
  for (uint32_t r = 0; r < g->ranks; r++) {
    rank_alloc(g->ctx[r], dt, n, n * g->ranks, &d[r]);
    inputs[r] = malloc(sizeof(double) * (size_t)n);
    fill_input(dt, n, r, &d[r], inputs[r]);
    ins[r] = d[r].in;
    outs[r] = d[r].out;
  }
  must(gllmk_all_gather(g->comm, outs, ins), "gllmk_all_gather");
  for (uint32_t r = 0; r < g->ranks; r++) {
    read_output(&d[r], dt, n * g->ranks, got);
    for (uint32_t k = 0; k < g->ranks; k++)
      for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[k * n + i] == inputs[k][i], "rank %u: rank %u's element %lld wrong", r,
                      k, (long long)i);
  }
  for (uint32_t r = 0; r < g->ranks; r++) {
    rank_free(&d[r]);
    free(inputs[r]);
  }
  free(got);
}

/* Loop index = backend * MAX_RANKS + ranks - 1. */
START_TEST(values) {
  int backend = _i / MAX_RANKS;
  uint32_t ranks = (uint32_t)(_i % MAX_RANKS) + 1;
  group g;
  if (!group_open_or_skip(backend, ranks, "values", &g)) return;
  const int64_t sizes[] = {1, 7, 4099, test_opts.quick ? 3001 : 262147};
  for (size_t t = 0; t < 3; t++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      reduce_case(&g, float_types[t], sizes[s], false);
      reduce_case(&g, float_types[t], sizes[s], true);
      gather_case(&g, float_types[t], sizes[s]);
    }
  gather_case(&g, GLLMK_I32, 1001);
  printf("collectives: %s, %u ranks: all_reduce and all_gather in f32, f16, bf16 (i32 gather)\n",
         backends[backend].name, ranks);
  group_close(&g);
}
END_TEST

/* Many sums in a row on aligned tensors, sizes in turn on both sides of
 * 1 MiB (where cuda's all_reduce leaves peer memory for NCCL) and from one
 * decode row of 4096 to 32: the vector path of cuda's peer-memory kernel,
 * which reuses its buffers from call to call. */
START_TEST(sequence) {
  int backend = _i / MAX_RANKS;
  uint32_t ranks = (uint32_t)(_i % MAX_RANKS) + 1;
  group g;
  if (!group_open_or_skip(backend, ranks, "sequence", &g)) return;
  static const struct {
    gllmk_dtype dt;
    int64_t n;
  } sums[] = {{GLLMK_BF16, 4096},  {GLLMK_BF16, 32 * 4096}, {GLLMK_F32, 262144},
              {GLLMK_F32, 262148}, {GLLMK_F16, 3 * 4096 + 8}, {GLLMK_BF16, 8}};
  const int count = (int)(sizeof sums / sizeof sums[0]), rounds = test_opts.quick ? count : 6 * count;
  for (int i = 0; i < rounds; i++) reduce_case_at(&g, sums[i % count].dt, sums[i % count].n, i % 2, ALIGNED_PAD);
  printf("collectives: %s, %u ranks: %d aligned all_reduces in a row\n", backends[backend].name, ranks, rounds);
  group_close(&g);
}
END_TEST

static void expect(gllmk_status status, gllmk_status want, const char *needle) {
  ck_assert_msg(status == want, "got %s (%s), expected %s", gllmk_status_string(status),
                gllmk_last_error(), gllmk_status_string(want));
  ck_assert_msg(test_contains(gllmk_last_error(), needle), "message \"%s\" lacks \"%s\"",
                gllmk_last_error(), needle);
}

/* Bad input: a clear error and no output byte written. */
START_TEST(bad_input) {
  group g;
  if (!group_open_or_skip(_i, 2, "bad input", &g)) return;
  gllmk_communicator *c;
  expect(gllmk_communicator_create(NULL, 2, &c), GLLMK_ERR_INVALID_ARGUMENT, "contexts is NULL");
  expect(gllmk_communicator_create(g.ctx, 0, &c), GLLMK_ERR_INVALID_ARGUMENT, "count is 0");
  gllmk_context *same[2] = {g.ctx[0], g.ctx[0]};
  expect(gllmk_communicator_create(same, 2, &c), GLLMK_ERR_INVALID_ARGUMENT, "are the same");
  expect(gllmk_communicator_create(g.ctx, 2, NULL), GLLMK_ERR_INVALID_ARGUMENT, "out_communicator");
  ck_assert_uint_eq(gllmk_communicator_size(g.comm), 2);

  rank_data d[2];
  gllmk_tensor outs[2], ins[2];
  for (int r = 0; r < 2; r++) {
    rank_alloc(g.ctx[r], GLLMK_F32, 64, 128, &d[r]);
    must(gllmk_buffer_fill(d[r].in_buf, 0, d[r].in_size, 0), "zero inputs");
    ins[r] = d[r].in;
  }
  outs[0] = d[0].out;
  outs[1] = d[1].out;
  expect(gllmk_all_reduce(g.comm, outs, ins), GLLMK_ERR_INVALID_ARGUMENT, "must hold 64");
  expect(gllmk_all_reduce(g.comm, NULL, ins), GLLMK_ERR_INVALID_ARGUMENT, "required");
  expect(gllmk_all_reduce(NULL, outs, ins), GLLMK_ERR_INVALID_ARGUMENT, "NULL");
  /* rank 1's output on rank 0's context */
  gllmk_tensor swapped[2] = {ins[0], ins[0]};
  expect(gllmk_all_reduce(g.comm, swapped, ins), GLLMK_ERR_INVALID_ARGUMENT, "not on contexts[1]");
  /* a strided input */
  gllmk_tensor strided[2];
  for (int r = 0; r < 2; r++) must(gllmk_tensor_slice(&d[r].out, 0, 0, 64, 2, &strided[r]), "slice");
  expect(gllmk_all_reduce(g.comm, strided, ins), GLLMK_ERR_INVALID_ARGUMENT, "not contiguous");
  /* an output overlapping its input without being it */
  gllmk_tensor shifted[2];
  for (int r = 0; r < 2; r++) {
    shifted[r] = ins[r];
    shifted[r].offset += 4;
  }
  expect(gllmk_all_reduce(g.comm, shifted, ins), GLLMK_ERR_INVALID_ARGUMENT, "overlaps");
  /* i32 sums are not offered */
  gllmk_tensor ints[2];
  for (int r = 0; r < 2; r++) {
    ints[r] = ins[r];
    ints[r].dtype = GLLMK_I32;
  }
  expect(gllmk_all_reduce(g.comm, ints, ints), GLLMK_ERR_INVALID_ARGUMENT, "dtype=i32");
  /* ranks giving different sizes */
  gllmk_tensor short_in[2] = {ins[0], ins[1]};
  short_in[1].shape[0] = 63;
  expect(gllmk_all_gather(g.comm, outs, short_in), GLLMK_ERR_INVALID_ARGUMENT, "the same");
  for (int r = 0; r < 2; r++) {
    unsigned char raw[128 * 4 + 2 * PAD * 4];
    must(gllmk_buffer_read(d[r].out_buf, 0, raw, sizeof raw), "read");
    for (size_t i = 0; i < sizeof raw; i++) ck_assert_msg(raw[i] == POISON, "an output byte was written");
  }
  for (int r = 0; r < 2; r++) rank_free(&d[r]);
  /* destroying a context frees the communicators it belongs to */
  gllmk_communicator *doomed;
  must(gllmk_communicator_create(g.ctx, 2, &doomed), "second communicator");
  gllmk_context_destroy(g.ctx[1]);
  g.ctx[1] = NULL;
  ck_assert_uint_eq(gllmk_communicator_size(doomed), 0);
  expect(gllmk_all_reduce(doomed, ins, ins), GLLMK_ERR_INVALID_ARGUMENT, "not a live communicator");
  gllmk_communicator_free(doomed); /* a stale handle is ignored */
  g.ranks = 1;
  group_close(&g);
}
END_TEST

/* A collective inside recordings: refused where recordings are replayed
 * call by call; where they are native, every rank's replay repeats it. */
START_TEST(recorded) {
  group g;
  if (!group_open_or_skip(_i, 2, "recorded", &g)) return;
  const int64_t n = 1000;
  rank_data d[2];
  double *inputs[2], got[1000];
  gllmk_tensor outs[2], ins[2];
  for (int r = 0; r < 2; r++) {
    rank_alloc(g.ctx[r], GLLMK_F32, n, n, &d[r]);
    inputs[r] = malloc(sizeof(double) * n);
    ins[r] = d[r].in;
    outs[r] = d[r].out;
  }
  must(gllmk_recording_begin(g.ctx[0]), "begin 0");
  expect(gllmk_all_reduce(g.comm, outs, ins), GLLMK_ERR_INVALID_ARGUMENT, "all of them or none");
  must(gllmk_recording_begin(g.ctx[1]), "begin 1");
  gllmk_status status = gllmk_all_reduce(g.comm, outs, ins);
  if (status != GLLMK_OK) {
    expect(status, GLLMK_ERR_UNSUPPORTED, "native recordings");
    printf("collectives: %s: a recorded collective is refused: %s\n", backends[_i].name,
           gllmk_last_error());
  }
  gllmk_recording *rec[2];
  must(gllmk_recording_end(g.ctx[0], &rec[0]), "end 0");
  must(gllmk_recording_end(g.ctx[1], &rec[1]), "end 1");
  if (status == GLLMK_OK) {
    ck_assert(gllmk_recording_is_native(rec[0]) && gllmk_recording_is_native(rec[1]));
    for (int round = 0; round < 2; round++) { /* new inputs each time */
      for (int r = 0; r < 2; r++) fill_input(GLLMK_F32, n, (uint32_t)(r + 7 * round), &d[r], inputs[r]);
      must(gllmk_recording_replay(rec[0]), "replay 0");
      must(gllmk_recording_replay(rec[1]), "replay 1");
      for (int r = 0; r < 2; r++) {
        read_output(&d[r], GLLMK_F32, n, got);
        check_sum(GLLMK_F32, got, inputs, 2, n, (uint32_t)r);
      }
      /* a direct call between replays: one decode row, as the generator's */
      reduce_case_at(&g, GLLMK_BF16, 4096, round, ALIGNED_PAD);
    }
    printf("collectives: %s: recorded all_reduce replayed natively on both ranks\n",
           backends[_i].name);
  }
  gllmk_recording_free(rec[0]);
  gllmk_recording_free(rec[1]);
  for (int r = 0; r < 2; r++) {
    rank_free(&d[r]);
    free(inputs[r]);
  }
  group_close(&g);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  backend_count = test_find_backends("collectives", backends, TEST_MAX_BACKENDS);
  if (backend_count == 0) {
    fprintf(stderr, "collectives: no backend has a device; nothing was tested\n");
    return EXIT_FAILURE;
  }
  Suite *suite = suite_create("collectives");
  for (int b = 0; b < backend_count; b++) {
    TCase *tc = test_tcase(backends[b].name);
    tcase_add_loop_test(tc, values, b * MAX_RANKS, (b + 1) * MAX_RANKS);
    tcase_add_loop_test(tc, sequence, b * MAX_RANKS, (b + 1) * MAX_RANKS);
    tcase_add_loop_test(tc, bad_input, b, b + 1);
    tcase_add_loop_test(tc, recorded, b, b + 1);
    suite_add_tcase(suite, tc);
  }
  return test_run_suite(suite);
}
