/*
 * bench_timer.c - warm-up, calibration and the median of timed repetitions.
 */
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

/* A repetition shorter than this is batched so that the synchronize at its
 * end and the clock read are small against the work measured. */
#define MIN_REP_SECONDS 1e-3
#define MAX_BATCH 256
#define LONG_CALL_SECONDS 0.25
#define MAX_WARM_UP_CALLS 200000

double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* `count` calls on successive input sets from *next_set, then a wait;
 * the seconds it all took, or -1 on failure. */
static double timed_calls(const timer_target *target, int count, int *next_set) {
  double start = now_seconds();
  for (int i = 0; i < count; i++) {
    if (target->call(target->self, *next_set)) return -1;
    *next_set = (*next_set + 1) % target->sets;
  }
  if (target->wait(target->self)) return -1;
  return now_seconds() - start;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *values, int count) {
  qsort(values, (size_t)count, sizeof *values, compare_doubles);
  return count % 2 ? values[count / 2] : 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

static int clamp_int(double value, int lo, int hi) {
  if (!(value > lo)) return lo;
  return value < hi ? (int)value : hi;
}

int time_target(const timer_target *target, const bench_timing_config *config, timing *out) {
  int next_set = 0;
  /* Warm-up: one call, then one more timed alone to size the repetitions
   * (a call long enough that warming up cannot matter sizes them itself),
   * then config->warm_up_s of calls. */
  double single = timed_calls(target, 1, &next_set);
  if (single >= 0 && single < LONG_CALL_SECONDS) single = timed_calls(target, 1, &next_set);
  if (single < 0) return -1;
  if (single < config->warm_up_s &&
      timed_calls(target, clamp_int(config->warm_up_s / single, 1, MAX_WARM_UP_CALLS), &next_set) < 0)
    return -1;
  int batch = single >= MIN_REP_SECONDS
                  ? 1
                  : clamp_int(ceil(MIN_REP_SECONDS / single), 1, MAX_BATCH);
  int max_reps = config->max_reps < BENCH_MAX_REPS ? config->max_reps : BENCH_MAX_REPS;
  int min_reps = config->min_reps < max_reps ? config->min_reps : max_reps;
  int reps = clamp_int(config->budget_s / (single * batch), min_reps, max_reps);
  double samples[BENCH_MAX_REPS];
  for (int r = 0; r < reps; r++) {
    double seconds = timed_calls(target, batch, &next_set);
    if (seconds < 0) return -1;
    samples[r] = seconds / batch;
  }
  out->median_s = median(samples, reps);
  out->reps = reps;
  out->batch = batch;
  return 0;
}
