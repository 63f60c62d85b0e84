/*
 * bench_levels.c - gllmk-bench --all-levels: every row on each SIMD level of
 * the cpu plugin, side by side, against one copy ceiling and one OpenBLAS
 * time measured in the same run.
 *
 * The levels are the cpu plugin itself (the machine's best) and its test
 * variants (plugins/cpu/tests.mk: cpu-avx512, cpu-avx2, cpu-portable), each
 * loaded from its own directory, <variants>/<name>/. The copy ceiling is
 * measured again before each row (on a shared machine it moves by 2x within
 * a minute) and divides every column of that row. A variant above what
 * the machine has runs the machine's best kernels instead: the device's
 * architecture string (the features the plugin allows itself) tells, and the
 * column says so rather than printing that figure as the level's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *const variant_names[] = {"cpu-avx512", "cpu-avx2", "cpu-portable"};
enum { VARIANTS = (int)(sizeof variant_names / sizeof variant_names[0]), LEVELS = VARIANTS + 1 };

typedef struct level {
  char name[32];   /* backend name: "cpu", "cpu-avx2", ... */
  char runs[16];   /* the SIMD level its kernels use: "avx512", "avx2", "portable" */
  char header[48]; /* column header */
  int usable;
  char why[320];   /* why not usable */
  bench_env env;
} level;

/* The SIMD level a cpu device's architecture string allows (x86-64; other
 * architectures print their string as it is). */
static void level_of_arch(const char *arch, char *text, size_t size) {
  if (strncmp(arch, "x86_64", 6) != 0)
    snprintf(text, size, "%s", arch);
  else if (strstr(arch, "avx512bf16"))
    snprintf(text, size, "avx512bf16");
  else if (strstr(arch, "avx512"))
    snprintf(text, size, "avx512");
  else if (strstr(arch, "avx2"))
    snprintf(text, size, "avx2");
  else
    snprintf(text, size, "portable");
}

/* Opens a variant's context; its level stays unusable with the reason if
 * that fails. */
static void open_variant(level *l, const char *dir, const bench_env *best, uint32_t threads) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, l->name);
  gllmk_context_options options = {.backend = l->name, .plugin_dir = path,
                                   .num_threads = threads};
  gllmk_status status = gllmk_context_create(&options, &l->env.ctx);
  if (status) {
    l->env.ctx = NULL;
    snprintf(l->why, sizeof l->why, "%s: %s: %s", l->name, gllmk_status_string(status),
             gllmk_last_error());
    snprintf(l->header, sizeof l->header, "%s (none)", l->name);
    return;
  }
  gllmk_device_info info = {0};
  (void)gllmk_context_device_info(l->env.ctx, &info);
  level_of_arch(info.arch, l->runs, sizeof l->runs);
  l->env.is_cpu = 1;
  l->env.copy_gbps = best->copy_gbps;
  l->env.timing = best->timing;
  l->usable = 1;
  /* "cpu-avx512" asks for avx512: it says so when it runs something else. */
  const char *asked = l->name + 4;
  if (strncmp(l->runs, asked, strlen(asked)) == 0)
    snprintf(l->header, sizeof l->header, "%s", l->name);
  else
    snprintf(l->header, sizeof l->header, "%s=%s*", l->name, l->runs);
}

/* "12.3 ms  85%c" into text. */
static void format_cell(const bench_result *r, char *text, size_t size) {
  if (r->status == ROW_UNSUPPORTED || r->status == ROW_SKIPPED) {
    snprintf(text, size, "%s", r->status == ROW_SKIPPED ? "skipped" : "unsupported");
    return;
  }
  if (r->status == ROW_ERROR || r->status == ROW_MISMATCH || !isfinite(r->time_s)) {
    snprintf(text, size, "%s", r->status == ROW_MISMATCH ? "MISMATCH" : "ERROR");
    return;
  }
  double t = r->time_s;
  char time[24];
  if (t < 1e-3)
    snprintf(time, sizeof time, "%.*f us", t * 1e6 < 10 ? 2 : t * 1e6 < 100 ? 1 : 0, t * 1e6);
  else if (t < 1.0)
    snprintf(time, sizeof time, "%.*f ms", t * 1e3 < 10 ? 2 : t * 1e3 < 100 ? 1 : 0, t * 1e3);
  else
    snprintf(time, sizeof time, "%.2f s", t);
  if (isfinite(r->fraction) && r->ceiling && strcmp(r->ceiling, "copy") == 0)
    snprintf(text, size, "%s %4.0f%%", time, 100.0 * r->fraction);
  else if (isfinite(r->fraction))
    snprintf(text, size, "%s %4.2fx", time, r->fraction);
  else
    snprintf(text, size, "%s", time);
}

#define CELL_FORMAT " %24s"
#define COPY_BYTES (256u * 1024u * 1024u)

int bench_all_levels(bench_env *best, const gllmk_device_info *best_info, uint32_t threads,
                     const int *cases, int case_count, const char *variants_dir, int json) {
  level levels[LEVELS];
  memset(levels, 0, sizeof levels);
  int failed = 0;

  /* The copy ceiling on the best level, again before each row: every
   * column of a row divides by the same one. */
  bench_result copy;
  bench_measure_copy(best, COPY_BYTES, &copy);
  double first_copy = best->copy_gbps;

  snprintf(levels[0].name, sizeof levels[0].name, "%s", gllmk_context_backend(best->ctx));
  level_of_arch(best_info->arch, levels[0].runs, sizeof levels[0].runs);
  snprintf(levels[0].header, sizeof levels[0].header, "%s=%s", levels[0].name, levels[0].runs);
  levels[0].usable = 1;
  levels[0].env = *best;
  for (int v = 0; v < VARIANTS; v++) {
    snprintf(levels[v + 1].name, sizeof levels[v + 1].name, "%s", variant_names[v]);
    open_variant(&levels[v + 1], variants_dir, best, threads);
  }

  if (!json) {
    printf("gllmk-bench --all-levels: device %s (%s), %u threads\n", best_info->name,
           best_info->arch, threads);
    printf("copy ceiling: a 256 MiB gllmk_buffer_copy on %s before each row (first %.1f GB/s), "
           "the same for every column of the row; ", levels[0].name, best->copy_gbps);
    if (best->blas)
      printf("peer: %s\n", openblas_config(best->blas));
    else
      printf("openblas: skipped: %s\n", best->blas_error[0] ? best->blas_error : "not wanted");
    printf("each cell: median time and %% of copy (bandwidth rows) or speed vs OpenBLAS (x);\n"
           "variants from %s/<name>/\n", variants_dir);
    for (int l = 1; l < LEVELS; l++) {
      if (!levels[l].usable)
        printf("  %s: not available: %s\n", levels[l].name, levels[l].why);
      else if (strchr(levels[l].header, '*'))
        printf("  * %s: this machine lacks %s, so the variant runs the machine's best level "
               "(%s): its column repeats that level, it does not measure %s\n",
               levels[l].name, levels[l].name + 4, levels[l].runs, levels[l].name + 4);
    }
    printf("\n%-18s %-9s %-34s", "op", "dtype", "shape");
    for (int l = 0; l < LEVELS; l++) printf(CELL_FORMAT, levels[l].header);
    printf("  copy GB/s\n");
    fflush(stdout);
  }

  int first_json = 1;
  for (int i = 0; i < case_count; i++) {
    const bench_case *c = &bench_cases[cases[i]];
    bench_result r[LEVELS];
    if (i > 0) bench_measure_copy(best, COPY_BYTES, &copy);
    for (int l = 0; l < LEVELS; l++) {
      levels[l].env.copy_gbps = best->copy_gbps;
      if (!levels[l].usable) continue;
      fprintf(stderr, "gllmk-bench: [%d/%d] %s on %s\n", i + 1, case_count, c->label,
              levels[l].name);
      bench_env *env = &levels[l].env;
      /* OpenBLAS only once, with the best level; the others reuse its time. */
      openblas *blas = env->blas;
      if (l > 0) env->blas = NULL;
      env->skip_peer = l > 0;
      bench_run_case(env, c, (uint64_t)cases[i] + 1, &r[l]);
      env->blas = blas;
      if (l > 0) bench_reuse_peer(&r[l], &r[0]);
      if (r[l].status == ROW_MISMATCH || r[l].status == ROW_ERROR) failed = 1;
      if (json) {
        report_json_row(&r[l], levels[l].name, first_json);
        first_json = 0;
      }
    }
    if (json) continue;
    printf("%-18s %-9s %-34.34s", c->label, r[0].dtype, r[0].shape);
    for (int l = 0; l < LEVELS; l++) {
      char cell[48];
      if (levels[l].usable)
        format_cell(&r[l], cell, sizeof cell);
      else
        snprintf(cell, sizeof cell, "-");
      printf(CELL_FORMAT, cell);
    }
    printf("  %9.1f\n", best->copy_gbps);
    /* A skipped row is skipped alike on every level: its reason once. */
    for (int l = 0; l < LEVELS; l++)
      if (levels[l].usable && r[l].message[0] && r[l].status != ROW_OK &&
          (r[l].status != ROW_SKIPPED || l == 0))
        printf("    %s: %s\n", levels[l].name, r[l].message);
    fflush(stdout);
  }
  if (json) printf("%s]\n", first_json ? "[\n" : "\n");

  /* The ceiling again at the end, to show how much the machine moved. */
  if (!json) {
    bench_measure_copy(best, COPY_BYTES, &copy);
    printf("\ncopy ceiling at the end: %.1f GB/s (at the start %.1f)\n", best->copy_gbps,
           first_copy);
  }
  for (int l = 1; l < LEVELS; l++) gllmk_context_destroy(levels[l].env.ctx);
  return failed;
}
