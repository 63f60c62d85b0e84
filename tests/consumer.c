/*
 * consumer.c - an application built against an installed gllmk with
 * `pkg-config --cflags --libs gllmk` (tests/install-test.sh).
 *
 * usage: consumer [BACKEND]
 * Creates a context (the automatic choice, or BACKEND), adds two vectors on
 * it and checks the sum, then prints what it found:
 *   backend: <name>
 *   plugin_dir: <directory scanned>
 *   plugin: <name> <state> <path>      (one line per plugin file)
 */
#include <gllmk/gllmk.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, gllmk_status status) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, gllmk_status_string(status), gllmk_last_error());
  return EXIT_FAILURE;
}

/* out = a + b on the context, checked on the host. */
static int add_vectors(gllmk_context *ctx) {
  enum { N = 37 };
  float a[N], b[N], out[N];
  for (int i = 0; i < N; i++) {
    a[i] = (float)i * 0.5f;
    b[i] = 100.0f - (float)i;
  }
  gllmk_buffer *buffer;
  gllmk_status status = gllmk_buffer_alloc(ctx, 3 * sizeof a, &buffer);
  if (status != GLLMK_OK) return fail("gllmk_buffer_alloc", status);
  const int64_t shape[] = {N};
  gllmk_tensor ta, tb, tout;
  if ((status = gllmk_tensor_make(buffer, 0, GLLMK_F32, 1, shape, &ta)) != GLLMK_OK ||
      (status = gllmk_tensor_make(buffer, sizeof a, GLLMK_F32, 1, shape, &tb)) != GLLMK_OK ||
      (status = gllmk_tensor_make(buffer, 2 * sizeof a, GLLMK_F32, 1, shape, &tout)) != GLLMK_OK)
    return fail("gllmk_tensor_make", status);
  if ((status = gllmk_buffer_write(buffer, 0, a, sizeof a)) != GLLMK_OK ||
      (status = gllmk_buffer_write(buffer, sizeof a, b, sizeof b)) != GLLMK_OK)
    return fail("gllmk_buffer_write", status);
  if ((status = gllmk_add(ctx, &(gllmk_add_args){&tout, &ta, &tb})) != GLLMK_OK)
    return fail("gllmk_add", status);
  if ((status = gllmk_buffer_read(buffer, 2 * sizeof a, out, sizeof out)) != GLLMK_OK)
    return fail("gllmk_buffer_read", status);
  gllmk_buffer_free(buffer);
  for (int i = 0; i < N; i++)
    if (out[i] != a[i] + b[i]) {
      fprintf(stderr, "consumer: out[%d] = %g, expected %g\n", i, (double)out[i],
              (double)(a[i] + b[i]));
      return EXIT_FAILURE;
    }
  return EXIT_SUCCESS;
}

static int list_plugins(void) {
  gllmk_discovery *d;
  gllmk_status status = gllmk_discover(NULL, &d);
  if (status != GLLMK_OK) return fail("gllmk_discover", status);
  printf("plugin_dir: %s\n", gllmk_discovery_plugin_dir(d));
  for (uint32_t i = 0; i < gllmk_discovery_plugin_count(d); i++) {
    const gllmk_plugin_record *r = gllmk_discovery_plugin(d, i);
    printf("plugin: %s %s %s\n", r->name[0] ? r->name : "-",
           gllmk_plugin_state_name((gllmk_plugin_state)r->state), r->path);
  }
  gllmk_discovery_free(d);
  return EXIT_SUCCESS;
}

int main(int argc, char **argv) {
  gllmk_context_options options = {.backend = argc > 1 ? argv[1] : NULL};
  gllmk_context *ctx;
  gllmk_status status = gllmk_context_create(&options, &ctx);
  if (status != GLLMK_OK) return fail("gllmk_context_create", status);
  printf("backend: %s\n", gllmk_context_backend(ctx));
  int result = add_vectors(ctx);
  gllmk_context_destroy(ctx);
  if (result == EXIT_SUCCESS) result = list_plugins();
  return result;
}
