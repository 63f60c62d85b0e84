/*
 * model_consumer.c - an application built against an installed
 * libgllmk-model with `pkg-config --cflags --libs gllmk-model`
 * (tests/install-test.sh): it runs a tiny synthetic model on the cpu
 * backend for a few greedy steps and prints "tokens: <ids>".
 */
#include <gllmk/gllmk_model.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, gllmk_status status) {
  fprintf(stderr, "model_consumer: %s: %s: %s\n", what, gllmk_status_string(status),
          gllmk_last_error());
  return EXIT_FAILURE;
}

static int generate(gllmk_model *model) {
  gllmk_session_options so = {.struct_size = sizeof so, .cache_tokens = 64};
  gllmk_session *session;
  gllmk_status status = gllmk_session_create(model, &so, &session);
  if (status != GLLMK_OK) return fail("gllmk_session_create", status);
  uint32_t seq;
  int32_t prompt[4] = {1, 2, 3, 4}, token;
  status = gllmk_session_seq_add(session, &seq);
  gllmk_seq_input in = {seq, 4, prompt};
  printf("tokens:");
  for (int step = 0; status == GLLMK_OK && step < 4; step++) {
    status = gllmk_session_forward(session, &in, 1, NULL, NULL, &token);
    printf(" %d", token);
    in = (gllmk_seq_input){seq, 1, &token};
  }
  printf("\n");
  gllmk_session_destroy(session);
  return status == GLLMK_OK ? EXIT_SUCCESS : fail("gllmk_session_forward", status);
}

int main(void) {
  gllmk_context_options options = {.backend = "cpu"};
  gllmk_context *ctx;
  gllmk_status status = gllmk_context_create(&options, &ctx);
  if (status != GLLMK_OK) return fail("gllmk_context_create", status);
  gllmk_model_load_options lo = {.struct_size = sizeof lo, .synthetic = "tiny", .dtype = -1};
  gllmk_model *model;
  status = gllmk_model_load(ctx, &lo, &model);
  int result = status == GLLMK_OK ? generate(model) : fail("gllmk_model_load", status);
  if (status == GLLMK_OK) gllmk_model_free(model);
  gllmk_context_destroy(ctx);
  return result;
}
