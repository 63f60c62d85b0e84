/*
 * bench_report.c - the table and the JSON array on stdout.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

static const char *status_text(row_status status) {
  switch (status) {
  case ROW_OK: return "ok";
  case ROW_MISMATCH: return "MISMATCH";
  case ROW_UNCHECKED: return "unchecked";
  case ROW_UNSUPPORTED: return "unsupported";
  case ROW_SKIPPED: return "skipped";
  case ROW_ERROR: return "ERROR";
  }
  return "?";
}

/* Three significant digits in us, ms or s. */
static void format_time(double seconds, char *text, size_t size) {
  static const struct { double scale; const char *unit; } units[] = {
      {1e6, "us"}, {1e3, "ms"}, {1.0, "s"}};
  if (!isfinite(seconds)) {
    snprintf(text, size, "-");
    return;
  }
  int u = seconds < 1e-3 ? 0 : seconds < 1.0 ? 1 : 2;
  double value = seconds * units[u].scale;
  int decimals = value < 10 ? 2 : value < 100 ? 1 : 0;
  snprintf(text, size, "%.*f %s", decimals, value, units[u].unit);
}

static void format_flops(double flops, double seconds, char *text, size_t size) {
  double rate = flops / seconds;
  if (!(flops > 0) || !isfinite(rate))
    snprintf(text, size, "-");
  else if (rate >= 1e12)
    snprintf(text, size, "%.2f TFLOP/s", rate / 1e12);
  else
    snprintf(text, size, "%.1f GFLOP/s", rate / 1e9);
}

static void format_bandwidth(double bytes, double seconds, char *text, size_t size) {
  double rate = bytes / seconds / 1e9;
  if (isfinite(rate))
    snprintf(text, size, "%.1f", rate);
  else
    snprintf(text, size, "-");
}

static void format_fraction(const bench_result *r, char *text, size_t size) {
  if (isfinite(r->fraction))
    snprintf(text, size, "%.*f%% %s", r->fraction < 0.1 ? 1 : 0, 100.0 * r->fraction,
             r->ceiling);
  else
    snprintf(text, size, "-");
}

/* OpenBLAS side by side: its time, its rate and our speed relative to it. */
static void format_peer(const bench_result *r, char *text, size_t size) {
  if (r->peer_note[0]) {
    snprintf(text, size, "%s", r->peer_note);
  } else if (isfinite(r->peer_time_s)) {
    char time[24], rate[32];
    format_time(r->peer_time_s, time, sizeof time);
    format_flops(r->flops, r->peer_time_s, rate, sizeof rate);
    snprintf(text, size, "openblas %s %s %s, ours/openblas %.2fx", r->peer_name, time, rate,
             r->peer_time_s / r->time_s);
  } else {
    text[0] = '\0';
  }
}

#define ROW_FORMAT "%-18s %-9s %-34s %10s %7s %14s %14s  %-11s %s"

void report_table_header(const char *backend, const gllmk_device_info *info, int threads,
                         const bench_env *env) {
  printf("gllmk-bench: backend %s, device %s (%s)", backend, info->name, info->arch);
  if (threads) printf(", %d threads", threads);
  printf("\n");
  if (env->is_cpu)
    printf("checks: float64 reference on sampled rows; ");
  else if (env->ref_ctx)
    printf("checks: against the cpu backend (device rows: float64 reference); ");
  else
    printf("checks: device rows only, float64 reference (no cpu backend: %s); ",
           env->ref_error);
  if (env->blas)
    printf("peer: %s\n", openblas_config(env->blas));
  else if (env->blas_error[0])
    printf("openblas: skipped: %s\n", env->blas_error);
  else
    printf("peer: none\n");
  printf("GB/s counts each input read once and each output written once.\n\n");
  printf(ROW_FORMAT "\n", "op", "dtype", "shape", "time", "GB/s", "compute", "of ceiling",
         "check", "notes");
}

void report_table_row(const bench_result *r) {
  char time[24], bandwidth[24], compute[32], fraction[32], peer[400];
  format_time(r->time_s, time, sizeof time);
  format_bandwidth(r->bytes, r->time_s, bandwidth, sizeof bandwidth);
  format_flops(r->flops, r->time_s, compute, sizeof compute);
  format_fraction(r, fraction, sizeof fraction);
  format_peer(r, peer, sizeof peer);
  const char *check = strcmp(r->label, "buffer_copy") == 0 && r->status == ROW_OK
                          ? "-"
                          : status_text(r->status);
  char line[640];
  size_t length = (size_t)snprintf(line, sizeof line, ROW_FORMAT, r->label, r->dtype, r->shape,
                                   time, bandwidth, compute, fraction, check, peer);
  if (length >= sizeof line) length = sizeof line - 1;
  while (length > 0 && (line[length - 1] == ' ' || line[length - 1] == '\n')) length--;
  printf("%.*s\n", (int)length, line);
  if (r->message[0]) printf("    %s: %s\n", status_text(r->status), r->message);
  fflush(stdout);
}

void report_table_footer(const int counts[ROW_ERROR + 1]) {
  printf("\n%d ok, %d MISMATCH, %d unchecked, %d unsupported, %d skipped, %d ERROR\n",
         counts[ROW_OK], counts[ROW_MISMATCH], counts[ROW_UNCHECKED], counts[ROW_UNSUPPORTED],
         counts[ROW_SKIPPED], counts[ROW_ERROR]);
}

/* ---------------------------------------------------------------- JSON */

static void json_string(const char *key, const char *value) {
  printf("\"%s\": ", key);
  if (!value) {
    printf("null");
    return;
  }
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
    if (*c == '"' || *c == '\\')
      printf("\\%c", *c);
    else if (*c < 0x20)
      printf("\\u%04x", *c);
    else
      putchar(*c);
  }
  putchar('"');
}

static void json_number(const char *key, double value) {
  if (isfinite(value))
    printf(", \"%s\": %.6g", key, value);
  else
    printf(", \"%s\": null", key);
}

static void json_rate(const char *key, double amount, double seconds, double unit) {
  json_number(key, amount > 0 ? amount / seconds / unit : NAN);
}

void report_json_row(const bench_result *r, const char *backend, int first) {
  printf("%s  {", first ? "[\n" : ",\n");
  json_string("name", r->label);
  printf(", ");
  json_string("dtype", r->dtype);
  printf(", ");
  json_string("shape", r->shape);
  printf(", ");
  json_string("backend", backend);
  printf(", ");
  json_string("status", status_text(r->status));
  printf(", ");
  json_string("message", r->message);
  json_number("time_s", r->time_s);
  printf(", \"reps\": %d, \"batch\": %d, \"sets\": %d", r->reps, r->batch, r->sets);
  json_number("bytes", r->bytes);
  json_rate("gb_per_s", r->bytes, r->time_s, 1e9);
  json_number("flops", r->flops > 0 ? r->flops : NAN);
  json_rate("gflop_per_s", r->flops, r->time_s, 1e9);
  printf(", ");
  json_string("ceiling", r->ceiling);
  json_number("fraction", r->fraction);
  json_number("check_error", r->check_error);
  json_number("tolerance", r->tolerance);
  printf(", ");
  json_string("openblas", r->peer_name);
  json_number("openblas_time_s", r->peer_time_s);
  printf(", ");
  json_string("openblas_note", r->peer_note[0] ? r->peer_note : NULL);
  printf("}");
  fflush(stdout);
}
