/*
 * testlib.c - see testlib.h.
 */
#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

test_options test_opts;

void test_parse_args(int argc, char **argv) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  test_opts.seed = (uint64_t)now.tv_sec * 1000003u ^ (uint64_t)now.tv_nsec ^
                   ((uint64_t)getpid() << 32);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      test_opts.quick = 1;
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      test_opts.seed = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      test_opts.backend = argv[++i];
    } else if (strcmp(argv[i], "--skip-software") == 0) {
      test_opts.skip_software = 1;
    } else if (strcmp(argv[i], "--plugin-dir") == 0 && i + 1 < argc) {
      test_opts.plugin_dir = argv[++i];
    } else if (strcmp(argv[i], "--record") == 0) {
      test_opts.record = 1;
    } else if (strcmp(argv[i], "--exec-via") == 0 && i + 1 < argc) {
      test_opts.exec_via = argv[++i];
    } else {
      fprintf(stderr,
              "usage: %s [--quick] [--seed N] [--backend NAME] [--skip-software] "
              "[--plugin-dir DIR] [--record] [--exec-via PROGRAM]\n", argv[0]);
      exit(2);
    }
  }
}

int test_run_suite(Suite *suite) {
  SRunner *runner = srunner_create(suite);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

TCase *test_tcase(const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 600);
  return tc;
}

/* ------------------------------------------------------------ random */

/* splitmix64: tiny, fast, and good enough for test data. */
uint64_t test_rng_next(test_rng *rng) {
  uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

test_rng test_rng_for(uint64_t stream) {
  test_rng rng = {test_opts.seed ^ (stream * 0xD1B54A32D192ED03ull)};
  test_rng_next(&rng);
  return rng;
}

double test_rng_uniform(test_rng *rng, double lo, double hi) {
  double unit = (double)(test_rng_next(rng) >> 11) * 0x1.0p-53;
  return lo + (hi - lo) * unit;
}

int64_t test_rng_int(test_rng *rng, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  return lo + (int64_t)(test_rng_next(rng) % span);
}

void test_rng_permutation(test_rng *rng, int32_t *out, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = (int32_t)i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = test_rng_int(rng, 0, i);
    int32_t t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}

/* ------------------------------------------------------------- dtypes */

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t test_f32_to_f16(float f) {
  uint32_t x = float_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t mag = x & 0x7fffffffu;
  if (mag > 0x7f800000u) return sign | 0x7e00u;   /* NaN */
  if (mag >= 0x477ff000u) return sign | 0x7c00u;  /* >= 65520 rounds to inf */
  if (mag < 0x38800000u) {                        /* below 2^-14: subnormal */
    /* Units of 2^-24; the scaling is exact and rintf rounds to even. */
    return sign | (uint16_t)rintf(bits_float(mag) * 16777216.0f);
  }
  uint32_t h = ((mag >> 23) - 112u) << 10 | ((mag >> 13) & 0x3ffu);
  uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* carries into the exponent */
  return sign | (uint16_t)h;
}

float test_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = (float)mant * 0x1.0p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t test_f32_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float test_bf16_to_f32(uint16_t h) { return bits_float((uint32_t)h << 16); }

double test_load(gllmk_dtype dtype, const void *data, int64_t index) {
  switch (dtype) {
    case GLLMK_F32: return ((const float *)data)[index];
    case GLLMK_F16: return test_f16_to_f32(((const uint16_t *)data)[index]);
    case GLLMK_BF16: return test_bf16_to_f32(((const uint16_t *)data)[index]);
    case GLLMK_I32: return ((const int32_t *)data)[index];
  }
  return NAN;
}

void test_store(gllmk_dtype dtype, void *data, int64_t index, double value) {
  switch (dtype) {
    case GLLMK_F32: ((float *)data)[index] = (float)value; break;
    case GLLMK_F16: ((uint16_t *)data)[index] = test_f32_to_f16((float)value); break;
    case GLLMK_BF16: ((uint16_t *)data)[index] = test_f32_to_bf16((float)value); break;
    case GLLMK_I32: ((int32_t *)data)[index] = (int32_t)value; break;
  }
}

double test_round(gllmk_dtype dtype, double value) {
  unsigned char scratch[4];
  test_store(dtype, scratch, 0, value);
  return test_load(dtype, scratch, 0);
}

int test_contains(const char *text, const char *needle) {
  return text != NULL && needle != NULL && strstr(text, needle) != NULL;
}

/* ---------------------------------------------------------- temp dirs */

void test_temp_dir(char *dir, size_t size, const char *prefix) {
  snprintf(dir, size, "%s/%s-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", prefix);
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

void test_remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

void test_copy_file(const char *src, const char *dir, const char *name, unsigned mode) {
  char dst[PATH_MAX + 256];
  snprintf(dst, sizeof dst, "%s/%s", dir, name);
  FILE *in = fopen(src, "rb");
  ck_assert_msg(in != NULL, "cannot open %s: %s", src, strerror(errno));
  FILE *out = fopen(dst, "wb");
  ck_assert_msg(out != NULL, "cannot create %s: %s", dst, strerror(errno));
  char chunk[65536];
  for (size_t n; (n = fread(chunk, 1, sizeof chunk, in)) > 0;)
    ck_assert_uint_eq(fwrite(chunk, 1, n, out), n);
  fclose(in);
  ck_assert_int_eq(fclose(out), 0);
  ck_assert_int_eq(chmod(dst, (mode_t)mode), 0);
}

/* ------------------------------------------------------------ backends */

static int device_is_software(const gllmk_discovery *discovery, uint32_t index, char *name,
                              size_t name_size) {
  gllmk_device_info info;
  if (gllmk_discovery_device(discovery, index, 0, &info) != GLLMK_OK) return 0;
  snprintf(name, name_size, "%s", info.name);
  return (info.flags & GLLMK_DEVICE_SOFTWARE) != 0;
}

/* Prints why each unusable plugin is skipped and writes "<name> <software>"
 * lines for the others to `out`. */
static int list_backends(const char *program, FILE *out) {
  gllmk_discovery *discovery;
  gllmk_context_options options = {.plugin_dir = test_opts.plugin_dir};
  if (gllmk_discover(&options, &discovery) != GLLMK_OK) {
    fprintf(stderr, "%s: gllmk_discover: %s\n", program, gllmk_last_error());
    return EXIT_FAILURE;
  }
  for (uint32_t i = 0; i < gllmk_discovery_plugin_count(discovery); i++) {
    const gllmk_plugin_record *r = gllmk_discovery_plugin(discovery, i);
    int usable = r->state == GLLMK_PLUGIN_SELECTED || r->state == GLLMK_PLUGIN_AVAILABLE;
    char device[128] = "";
    int software = usable && device_is_software(discovery, i, device, sizeof device);
    if (test_opts.backend && strcmp(r->name, test_opts.backend) != 0) {
      printf("skipped: %s: not the --backend asked for\n", r->name[0] ? r->name : r->path);
    } else if (!usable) {
      printf("skipped: %s: %s: %s\n", r->name[0] ? r->name : r->path,
             gllmk_plugin_state_name((gllmk_plugin_state)r->state), r->reason);
    } else if (software && test_opts.skip_software) {
      printf("skipped: %s: software device (%s), --skip-software\n", r->name, device);
    } else {
      if (software && !test_opts.quick)
        printf("%s: %s runs on a software device (%s): quick sizes\n", program, r->name, device);
      fprintf(out, "%s %d\n", r->name, software);
    }
  }
  gllmk_discovery_free(discovery);
  return EXIT_SUCCESS;
}

int test_find_backends(const char *program, test_backend *out, int max) {
  int fds[2];
  fflush(stdout);
  pid_t pid = pipe(fds) == 0 ? fork() : -1;
  if (pid < 0) {
    perror("pipe/fork");
    exit(EXIT_FAILURE);
  }
  if (pid == 0) {
    close(fds[0]);
    FILE *pipe_out = fdopen(fds[1], "w");
    int result = pipe_out ? list_backends(program, pipe_out) : EXIT_FAILURE;
    if (pipe_out) fclose(pipe_out);
    fflush(stdout);
    _exit(result);
  }
  close(fds[1]);
  FILE *in = fdopen(fds[0], "r");
  int count = 0, software;
  char name[64];
  while (in && count < max && fscanf(in, "%63s %d", name, &software) == 2) {
    out[count].software = software;
    snprintf(out[count++].name, sizeof out[0].name, "%s", name);
  }
  if (in) fclose(in);
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "%s: listing the backends failed\n", program);
    exit(EXIT_FAILURE);
  }
  return count;
}

bool test_open_ranks(const char *backend, uint32_t count, gllmk_context **ctx,
                     gllmk_communicator **out_comm, char *why, size_t why_size) {
  for (uint32_t r = 0; r < count; r++) {
    gllmk_context_options o = {.backend = backend, .device_index = r,
                               .plugin_dir = test_opts.plugin_dir};
    if (gllmk_context_create(&o, &ctx[r]) != GLLMK_OK) {
      o.device_index = 0;
      ck_assert_msg(gllmk_context_create(&o, &ctx[r]) == GLLMK_OK, "gllmk_context_create: %s",
                    gllmk_last_error());
    }
  }
  gllmk_status status = gllmk_communicator_create(ctx, count, out_comm);
  if (status == GLLMK_OK) return true;
  ck_assert_int_eq(status, GLLMK_ERR_UNSUPPORTED);
  snprintf(why, why_size, "%s", gllmk_last_error());
  for (uint32_t r = 0; r < count; r++) gllmk_context_destroy(ctx[r]);
  return false;
}
