/*
 * testlib.h - helpers shared by the Check test programs: command line,
 * random numbers, dtype encoding done independently of any backend, and
 * running a suite.
 */
#ifndef GLLMK_TESTS_TESTLIB_H_
#define GLLMK_TESTS_TESTLIB_H_

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gllmk/gllmk.h"

/* ------------------------------------------------------------ options */

typedef struct test_options {
  int quick;           /* --quick: smaller problem sizes (valgrind runs) */
  uint64_t seed;       /* --seed N: reproduce a run; otherwise from the clock */
  const char *backend; /* --backend NAME: test only this plugin (conformance) */
  int skip_software;   /* --skip-software: leave emulated devices out (conformance) */
  const char *plugin_dir; /* --plugin-dir DIR: plugins from DIR (conformance) */
  int record;          /* --record: run each op by replaying a recording of it */
  /* --exec-via PROGRAM: start copies of this program through PROGRAM, an
   * emulator (conformance): under qemu-user without binfmt_misc the kernel
   * cannot exec an aarch64 program, but can exec qemu-aarch64 with it. */
  const char *exec_via;
} test_options;

extern test_options test_opts;

/* Parses --quick, --seed N, --backend NAME, --skip-software, --plugin-dir
 * DIR, --record and --exec-via PROGRAM; exits with a usage message on
 * anything else. */
void test_parse_args(int argc, char **argv);

/* Runs the suite (Check prints its summary line); returns the exit status. */
int test_run_suite(Suite *suite);

/* A test case whose tests may take up to 10 minutes each (a hung backend
 * fails instead of blocking the run; valgrind runs, CK_FORK=no, have no
 * time limit). */
TCase *test_tcase(const char *name);

/* ------------------------------------------------------------ backends */

#define TEST_MAX_BACKENDS 16

typedef struct test_backend {
  char name[64];
  int software; /* an emulated device (lavapipe, PoCL): tested at --quick sizes */
} test_backend;

/* The plugins with a usable device (honouring --backend, --plugin-dir and
 * --skip-software); prints "skipped: <plugin>: <reason>" for the others.
 * Discovery runs in a child process: loading a plugin may initialise its
 * driver (cuInit), and a driver initialised before Check forks the tests
 * cannot be used in them. Exits the program if listing fails. */
int test_find_backends(const char *program, test_backend *out, int max);

/* `count` contexts of `backend` (plugins from --plugin-dir), rank r on
 * device r where the backend has one, else on device 0 beside the others,
 * joined by a communicator (*out_comm). False, with every context destroyed
 * and the backend's reason in `why`, where it cannot join them (no
 * collectives; NCCL with two ranks on one GPU). */
bool test_open_ranks(const char *backend, uint32_t count, gllmk_context **ctx,
                     gllmk_communicator **out_comm, char *why, size_t why_size);

/* ------------------------------------------------------------ random */

typedef struct test_rng {
  uint64_t state;
} test_rng;

/* A generator for one test: the run's seed mixed with the test's `stream`,
 * so a test draws the same numbers whichever tests ran before it. */
test_rng test_rng_for(uint64_t stream);
uint64_t test_rng_next(test_rng *rng);
/* Uniform in [lo, hi). */
double test_rng_uniform(test_rng *rng, double lo, double hi);
/* Uniform integer in [lo, hi]. */
int64_t test_rng_int(test_rng *rng, int64_t lo, int64_t hi);
/* Random permutation of 0..n-1. */
void test_rng_permutation(test_rng *rng, int32_t *out, int64_t n);

/* ------------------------------------------------------------- dtypes */

uint16_t test_f32_to_f16(float f); /* round to nearest even */
float test_f16_to_f32(uint16_t h);
uint16_t test_f32_to_bf16(float f); /* round to nearest even */
float test_bf16_to_f32(uint16_t h);

/* `value` rounded to what `dtype` can hold (I32: truncated). */
double test_round(gllmk_dtype dtype, double value);
/* Element `index` of a dtype array in host memory. */
double test_load(gllmk_dtype dtype, const void *data, int64_t index);
void test_store(gllmk_dtype dtype, void *data, int64_t index, double value);

/* ---------------------------------------------------------- temp dirs */

/* A new empty directory $TMPDIR/<prefix>-XXXXXX, its path in `dir`
 * (a test's own plugin directory). */
void test_temp_dir(char *dir, size_t size, const char *prefix);
/* Removes `dir` and the files in it. */
void test_remove_dir(const char *dir);
/* Copies the file `src` into `dir` as `name`, with `mode`. */
void test_copy_file(const char *src, const char *dir, const char *name, unsigned mode);

/* Whether `text` contains `needle` (both non-NULL). */
int test_contains(const char *text, const char *needle);

#endif /* GLLMK_TESTS_TESTLIB_H_ */
