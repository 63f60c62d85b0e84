/*
 * abandoned_all_reduce.c - on a machine with 2 GPUs that map each other's
 * memory (tools/device-check.sh tp): a recorded all_reduce small enough
 * for cuda's peer-memory path, replayed on both ranks, then on rank 0
 * alone. The lone rank must give up after its 20 s timeout and report it
 * from gllmk_synchronize (GLLMK_ERR_BACKEND), not hang; everything is then
 * freed. Exit status 0 when it behaves so.
 *
 * build: cc -std=c11 -D_GNU_SOURCE -Icore/include tests/device/abandoned_all_reduce.c \
 *          -Lbuild/lib -lgllmk -o build/tests/abandoned_all_reduce
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <gllmk/gllmk.h>

#define RANKS 2

static int failed(const char *what) {
  printf("abandoned_all_reduce: %s: %s\n", what, gllmk_last_error());
  return 1;
}

static double seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Both ranks' recordings of one all_reduce of a decode row (8 KiB). */
static int record(gllmk_context **ctx, gllmk_communicator *comm, const gllmk_tensor *rows,
                  gllmk_recording **rec) {
  for (int r = 0; r < RANKS; r++)
    if (gllmk_recording_begin(ctx[r]) != GLLMK_OK) return failed("gllmk_recording_begin");
  if (gllmk_all_reduce(comm, rows, rows) != GLLMK_OK) return failed("gllmk_all_reduce");
  for (int r = 0; r < RANKS; r++)
    if (gllmk_recording_end(ctx[r], &rec[r]) != GLLMK_OK) return failed("gllmk_recording_end");
  return 0;
}

static int run(gllmk_context **ctx, gllmk_communicator *comm, const gllmk_tensor *rows) {
  gllmk_recording *rec[RANKS] = {NULL};
  int status = record(ctx, comm, rows, rec);
  for (int r = 0; r < RANKS && status == 0; r++)
    if (gllmk_recording_replay(rec[r]) != GLLMK_OK) status = failed("gllmk_recording_replay");
  for (int r = 0; r < RANKS && status == 0; r++)
    if (gllmk_synchronize(ctx[r]) != GLLMK_OK) status = failed("both ranks replayed");
  if (status == 0) {
    const double start = seconds();
    if (gllmk_recording_replay(rec[0]) != GLLMK_OK) return failed("gllmk_recording_replay");
    const gllmk_status alone = gllmk_synchronize(ctx[0]);
    printf("abandoned_all_reduce: rank 0 replayed alone: %s after %.1f s: %s\n", gllmk_status_string(alone),
           seconds() - start, gllmk_last_error());
    if (alone != GLLMK_ERR_BACKEND || !strstr(gllmk_last_error(), "gave up")) status = 1;
  }
  for (int r = 0; r < RANKS; r++) gllmk_recording_free(rec[r]);
  return status;
}

int main(void) {
  gllmk_context *ctx[RANKS] = {NULL};
  gllmk_buffer *buffers[RANKS] = {NULL};
  gllmk_tensor rows[RANKS];
  gllmk_communicator *comm = NULL;
  const int64_t n = 4096;
  int status = 0;
  for (int r = 0; r < RANKS && status == 0; r++) {
    const gllmk_context_options o = {.backend = "cuda", .device_index = (uint32_t)r};
    if (gllmk_context_create(&o, &ctx[r]) != GLLMK_OK || gllmk_buffer_alloc(ctx[r], n * 2, &buffers[r]) != GLLMK_OK ||
        gllmk_buffer_fill(buffers[r], 0, n * 2, 0) != GLLMK_OK ||
        gllmk_tensor_make(buffers[r], 0, GLLMK_BF16, 1, &n, &rows[r]) != GLLMK_OK)
      status = failed("a rank's context and buffer");
  }
  if (status == 0 && gllmk_communicator_create(ctx, RANKS, &comm) != GLLMK_OK)
    status = failed("gllmk_communicator_create");
  if (status == 0) status = run(ctx, comm, rows);
  gllmk_communicator_free(comm);
  for (int r = 0; r < RANKS; r++) {
    gllmk_buffer_free(buffers[r]);
    gllmk_context_destroy(ctx[r]);
  }
  printf("abandoned_all_reduce: %s\n", status == 0 ? "ok" : "FAILED");
  return status;
}
