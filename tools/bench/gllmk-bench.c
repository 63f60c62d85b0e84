/*
 * gllmk-bench - times every gllmk op at Llama-3-8B shapes on one backend,
 * checks each result, and compares it with a ceiling measured in the same
 * run: a large buffer copy for bandwidth-bound ops, OpenBLAS for matmul on
 * the cpu backend. Uses only the public API.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "trace.h"

/* The copy ceiling: far larger than any cache. */
#define COPY_CEILING_BYTES (256u * 1024u * 1024u)

typedef struct options {
  const char *backend;
  const char *plugin_dir; /* --plugin-dir: e.g. a test variant's directory */
  uint32_t device;
  uint32_t threads;
  int quick, json, list;
  int max_reps; /* 0 = the mode's default */
  const char *filter;
  const char *trace; /* --trace FILE */
  int all_levels;         /* --all-levels */
  const char *variants;   /* --variants DIR (the cpu plugin's test variants) */
} options;

static void usage(FILE *out) {
  fprintf(out,
          "Usage: gllmk-bench [OPTION]...\n"
          "Time gllmk's ops at Llama-3-8B shapes, check every result and compare\n"
          "each row with a ceiling measured in the same run.\n"
          "\n"
          "  --backend NAME   run on this backend (cuda, hsa, vulkan, cpu, ...);\n"
          "                   default: the one gllmk picks\n"
          "  --plugin-dir DIR load plugins from DIR instead of the installed ones\n"
          "                   (the cpu plugin's SIMD levels: --plugin-dir\n"
          "                   build/tests/cpu-avx2 --backend cpu-avx2)\n"
          "  --device N       device index within the backend (default 0)\n"
          "  --all-levels     every row on each SIMD level of the cpu plugin, one\n"
          "                   column per level (the plugin's best and its test\n"
          "                   variants cpu-avx512, cpu-avx2, cpu-portable), one copy\n"
          "                   ceiling and one OpenBLAS time for all; a level above\n"
          "                   the machine's is marked with the level it really runs\n"
          "  --variants DIR   where --all-levels finds the variants (DIR/cpu-avx2/...;\n"
          "                   default: the build tree's tests/ next to bin/, where\n"
          "                   `make check` builds them)\n"
          "  --threads N      threads of the cpu backend and of OpenBLAS\n"
          "                   (default: one per core)\n"
          "  --quick          a short set of rows (under a minute on a 2-core CPU)\n"
          "  --filter SUBSTR  only rows whose \"op dtype shape\" (as --list prints\n"
          "                   them; runs of spaces count as one) contains SUBSTR\n"
          "                   (e.g. matmul, bf16, \"gemv f32\"); the copy ceiling\n"
          "                   is always measured\n"
          "  --reps N         at most N timed repetitions per row (default 20, quick 10)\n"
          "  --json           print a JSON array instead of the table\n"
          "  --list           list the rows and exit\n"
          "  --trace FILE     write a Chrome trace (Perfetto, chrome://tracing) of\n"
          "                   every op run, with device times, one phase per row\n"
          "  --help           show this help\n"
          "\n"
          "Each row's result is checked: against the cpu backend, or on the cpu\n"
          "backend against a float64 reference on sampled rows. Device rows (--list\n"
          "marks them), too heavy for a cpu, are skipped on the cpu backend and\n"
          "checked against the float64 reference on the others. Exit status: 0 if\n"
          "every row is ok, unchecked, unsupported or skipped; 1 on a MISMATCH or an\n"
          "error; 2 on bad usage; 3 if no context could be created.\n");
}

/* A non-negative integer that fits in `max`; -1 if the text is not one. */
static long parse_count(const char *text, long max) {
  char *end;
  long value = strtol(text, &end, 10);
  return *text && !*end && value >= 0 && value <= max ? value : -1;
}

/* 0 to run, 1 to exit successfully (--help), 2 on bad usage. */
/* Every run of spaces in `text` as one, in place: the rows' keys have
 * single spaces, and so a line copied from --list's aligned columns, used
 * as --filter, selects its row. */
static char *collapse_spaces(char *text) {
  char *out = text;
  for (const char *p = text; *p; p++)
    if (*p != ' ' || (out > text && out[-1] != ' ')) *out++ = *p;
  *out = '\0';
  return text;
}

static int parse_options(int argc, char **argv, options *o) {
  enum { OPT_BACKEND = 256, OPT_DEVICE, OPT_THREADS, OPT_QUICK, OPT_FILTER, OPT_REPS, OPT_JSON,
         OPT_LIST, OPT_HELP, OPT_TRACE, OPT_PLUGIN_DIR, OPT_ALL_LEVELS, OPT_VARIANTS };
  static const struct option long_options[] = {
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"plugin-dir", required_argument, NULL, OPT_PLUGIN_DIR},
      {"device", required_argument, NULL, OPT_DEVICE},
      {"threads", required_argument, NULL, OPT_THREADS},
      {"quick", no_argument, NULL, OPT_QUICK},
      {"filter", required_argument, NULL, OPT_FILTER},
      {"reps", required_argument, NULL, OPT_REPS},
      {"json", no_argument, NULL, OPT_JSON},
      {"list", no_argument, NULL, OPT_LIST},
      {"trace", required_argument, NULL, OPT_TRACE},
      {"all-levels", no_argument, NULL, OPT_ALL_LEVELS},
      {"variants", required_argument, NULL, OPT_VARIANTS},
      {"help", no_argument, NULL, OPT_HELP},
      {NULL, 0, NULL, 0},
  };
  int opt;
  while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
    long value = 0;
    switch (opt) {
    case OPT_BACKEND: o->backend = optarg; break;
    case OPT_PLUGIN_DIR: o->plugin_dir = optarg; break;
    case OPT_DEVICE: value = parse_count(optarg, UINT32_MAX); o->device = (uint32_t)value; break;
    case OPT_THREADS: value = parse_count(optarg, 4096); o->threads = (uint32_t)value; break;
    case OPT_REPS: value = parse_count(optarg, BENCH_MAX_REPS); o->max_reps = (int)value; break;
    case OPT_QUICK: o->quick = 1; break;
    case OPT_FILTER: o->filter = collapse_spaces(optarg); break;
    case OPT_JSON: o->json = 1; break;
    case OPT_LIST: o->list = 1; break;
    case OPT_TRACE: o->trace = optarg; break;
    case OPT_ALL_LEVELS: o->all_levels = 1; break;
    case OPT_VARIANTS: o->variants = optarg; break;
    case OPT_HELP: usage(stdout); return 1;
    default: usage(stderr); return 2;
    }
    if (value < 0 || (opt == OPT_REPS && value == 0)) {
      fprintf(stderr, "gllmk-bench: invalid value '%s'\n", optarg);
      return 2;
    }
  }
  if (o->all_levels && (o->trace || (o->backend && strncmp(o->backend, "cpu", 3) != 0))) {
    fprintf(stderr, "gllmk-bench: --all-levels runs the cpu plugin's levels (no --trace, "
                    "no other --backend)\n");
    return 2;
  }
  if (optind < argc) {
    fprintf(stderr, "gllmk-bench: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  return 0;
}

/* The op's shape text where it can write one without building the row,
 * else the case's sizes. */
static void case_shape_text(const bench_case *c, char *text, size_t size) {
  if (c->op->describe) {
    c->op->describe(c, text, size);
    return;
  }
  int used = snprintf(text, size, "m=%lld", (long long)c->m);
  if (c->n && used >= 0 && (size_t)used < size)
    used += snprintf(text + used, size - (size_t)used, " n=%lld", (long long)c->n);
  if (c->k && used >= 0 && (size_t)used < size)
    snprintf(text + used, size - (size_t)used, " k=%lld", (long long)c->k);
}

static int case_selected(const options *o, const bench_case *c) {
  char key[160], dtype[24], shape[96];
  if (o->quick && !(c->flags & CASE_QUICK)) return 0;
  case_dtype_text(c, dtype, sizeof dtype);
  case_shape_text(c, shape, sizeof shape);
  snprintf(key, sizeof key, "%s %s %s", c->label, dtype, shape);
  return !o->filter || strstr(key, o->filter) != NULL;
}

static void list_cases(const options *o) {
  for (int i = 0; i < bench_case_count; i++) {
    const bench_case *c = &bench_cases[i];
    char dtype[24];
    if (!case_selected(o, c)) continue;
    char shape[96];
    case_dtype_text(c, dtype, sizeof dtype);
    case_shape_text(c, shape, sizeof shape);
    printf("%-18s %-9s %s", c->label, dtype, shape);
    printf("%s%s\n", c->flags & CASE_QUICK ? "  (quick)" : "",
           c->flags & CASE_DEVICE ? "  (device row: skipped on the cpu backend)" : "");
  }
}

/* ----------------------------------------------------------- progress */

typedef struct progress {
  int enabled, tty, total, done;
} progress;

static void progress_show(progress *p, const char *label, const char *dtype) {
  p->done++;
  if (!p->enabled) return;
  if (p->tty)
    fprintf(stderr, "\r\033[K[%d/%d] %s %s ...", p->done, p->total, label, dtype);
  else
    fprintf(stderr, "gllmk-bench: [%d/%d] %s %s\n", p->done, p->total, label, dtype);
}

static void progress_clear(const progress *p) {
  if (p->enabled && p->tty) fprintf(stderr, "\r\033[K");
}

/* -------------------------------------------------------------- setup */

/* The thread count OpenBLAS gets: the one asked for, else the cpu
 * backend's (one per core), else the online processors. */
static int thread_count(const options *o, const gllmk_device_info *info, int is_cpu) {
  if (o->threads) return (int)o->threads;
  if (is_cpu && info->compute_units) return (int)info->compute_units;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? (int)online : 1;
}

static int wants_openblas(const options *o) {
  for (int i = 0; i < bench_case_count; i++) {
    const bench_case *c = &bench_cases[i];
    if (case_selected(o, c) && c->op->op == GLLMK_OP_matmul && c->dtype == GLLMK_F32) return 1;
  }
  return 0;
}

/* The cpu context that checks another backend. */
static void open_reference(bench_env *env) {
  gllmk_context_options ref_options = {.backend = "cpu"};
  gllmk_status status = gllmk_context_create(&ref_options, &env->ref_ctx);
  if (status) {
    env->ref_ctx = NULL;
    snprintf(env->ref_error, sizeof env->ref_error, "%s: %s", gllmk_status_string(status),
             gllmk_last_error());
  }
}

/* The warm-up: an idle GPU drops its clock (an H200 to 345 MHz between
 * rows). On NVIDIA's Vulkan driver, after the second or so that a row's cpu
 * check leaves the GPU idle, the clock takes about 0.5 s of work to climb
 * back (525 -> 1125 -> 1980 MHz on an H100): a 0.3 s warm-up timed most
 * such rows at half speed. A cpu comes up to speed within 0.3 s. */
static void timing_config(const options *o, int is_cpu, bench_timing_config *config) {
  config->budget_s = o->quick ? 0.2 : 1.0;
  config->warm_up_s = is_cpu ? 0.3 : 1.0;
  config->min_reps = 3;
  config->max_reps = o->max_reps ? o->max_reps : o->quick ? 10 : 20;
}

/* -------------------------------------------------------------- rows */

typedef struct run_state {
  const options *o;
  gllmk_trace *trace; /* --trace, or NULL */
  const char *backend;
  int first_row;
  int counts[ROW_ERROR + 1];
} run_state;

static void emit(run_state *s, const bench_result *r) {
  s->counts[r->status]++;
  if (s->o->json)
    report_json_row(r, s->backend, s->first_row);
  else
    report_table_row(r);
  s->first_row = 0;
}

static void run_rows(bench_env *env, run_state *s, progress *p) {
  bench_result r;
  progress_show(p, "buffer_copy", "ceiling");
  bench_measure_copy(env, COPY_CEILING_BYTES, &r);
  progress_clear(p);
  emit(s, &r);
  for (int i = 0; i < bench_case_count; i++) {
    const bench_case *c = &bench_cases[i];
    if (!case_selected(s->o, c)) continue;
    char dtype[24];
    case_dtype_text(c, dtype, sizeof dtype);
    progress_show(p, c->label, dtype);
    char phase[96];
    snprintf(phase, sizeof phase, "%s %s", c->label, dtype);
    gllmk_trace_phase(s->trace, phase);
    bench_run_case(env, c, (uint64_t)i + 1, &r);
    progress_clear(p);
    emit(s, &r);
  }
}

/* The recordings row runs unless --filter names something else. */
static int recording_selected(const options *o) {
  return o->filter == NULL || strstr("recording bf16", o->filter) != NULL;
}

static int count_selected(const options *o) {
  int total = 1 + recording_selected(o); /* the copy ceiling, the recordings row */
  for (int i = 0; i < bench_case_count; i++) total += case_selected(o, &bench_cases[i]);
  return total;
}

/* The build tree's tests/ directory next to this program's bin/. */
static void default_variants_dir(char *dir, size_t size) {
  char exe[4096];
  ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (length <= 0) {
    snprintf(dir, size, "build/tests");
    return;
  }
  exe[length] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  snprintf(dir, size, "%s/../tests", exe);
}

static int run_all_levels(const options *o, bench_env *env, const gllmk_device_info *info,
                          int threads) {
  int *cases = malloc((size_t)bench_case_count * sizeof *cases);
  if (!cases) return 1;
  int count = 0;
  for (int i = 0; i < bench_case_count; i++)
    if (case_selected(o, &bench_cases[i])) cases[count++] = i;
  char dir[4200];
  if (o->variants)
    snprintf(dir, sizeof dir, "%s", o->variants);
  else
    default_variants_dir(dir, sizeof dir);
  int failed = bench_all_levels(env, info, (uint32_t)threads, cases, count, dir, o->json);
  free(cases);
  return failed;
}

int main(int argc, char **argv) {
  options o = {0};
  int rc = parse_options(argc, argv, &o);
  if (rc) return rc == 1 ? 0 : rc;
  if (o.list) {
    list_cases(&o);
    return 0;
  }

  if (o.all_levels && !o.backend) o.backend = "cpu";
  gllmk_context_options ctx_options = {.backend = o.backend, .device_index = o.device,
                                       .num_threads = o.threads, .plugin_dir = o.plugin_dir};
  bench_env env = {.copy_gbps = NAN};
  gllmk_status status = gllmk_context_create(&ctx_options, &env.ctx);
  if (status) {
    fprintf(stderr, "gllmk-bench: cannot create a context: %s: %s\n",
            gllmk_status_string(status), gllmk_last_error());
    return 3;
  }
  const char *backend = gllmk_context_backend(env.ctx);
  gllmk_device_info info = {0};
  (void)gllmk_context_device_info(env.ctx, &info);
  /* The cpu plugin, or one of its test variants (cpu-avx2, cpu-portable, ...). */
  env.is_cpu = strncmp(backend, "cpu", 3) == 0;
  if (!env.is_cpu) open_reference(&env);
  int threads = thread_count(&o, &info, env.is_cpu);
  if (env.is_cpu && wants_openblas(&o))
    env.blas = openblas_load(threads, env.blas_error, sizeof env.blas_error);
  timing_config(&o, env.is_cpu, &env.timing);
  if (o.all_levels) {
    int failed = 1;
    if (env.is_cpu)
      failed = run_all_levels(&o, &env, &info, threads);
    else
      fprintf(stderr, "gllmk-bench: --all-levels: %s is not the cpu plugin\n", backend);
    openblas_unload(env.blas);
    gllmk_context_destroy(env.ctx);
    return failed;
  }

  progress p = {.enabled = isatty(STDERR_FILENO) || !o.quick, .tty = isatty(STDERR_FILENO),
                .total = count_selected(&o)};
  run_state state = {.o = &o, .backend = backend, .first_row = 1};
  if (o.trace && !(state.trace = gllmk_trace_open(env.ctx, o.trace, "gllmk-bench"))) {
    gllmk_context_destroy(env.ref_ctx); /* gllmk_trace_open said why */
    gllmk_context_destroy(env.ctx);
    return 1;
  }
  /* Host threads matter only to the cpu backend (and its OpenBLAS peer). */
  if (!o.json) report_table_header(backend, &info, env.is_cpu || o.threads ? threads : 0, &env);
  run_rows(&env, &state, &p);
  int recording_failed = 0;
  if (recording_selected(&o)) {
    progress_show(&p, "recording", "bf16");
    gllmk_trace_phase(state.trace, "recording bf16");
    recording_failed = bench_recording(env.ctx, o.json);
    progress_clear(&p);
  }
  if (o.json)
    printf("\n]\n");
  else
    report_table_footer(state.counts);

  int trace_failed = gllmk_trace_close(state.trace) != 0;
  openblas_unload(env.blas);
  gllmk_context_destroy(env.ref_ctx);
  gllmk_context_destroy(env.ctx);
  return state.counts[ROW_MISMATCH] || state.counts[ROW_ERROR] || recording_failed ||
                 trace_failed ? 1 : 0;
}
