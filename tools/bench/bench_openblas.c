/*
 * bench_openblas.c - OpenBLAS, the peer of the cpu backend's matmul.
 *
 * Loaded with dlopen so that gllmk-bench builds and runs without it (Debian:
 * libopenblas0). The CBLAS prototypes are declared here rather than taken
 * from cblas.h for the same reason; enums pass as int, and blasint is int
 * in the LP64 library that "libopenblas.so.0" names.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
typedef void (*sgemv_fn)(int order, int trans, int m, int n, float alpha, const float *a,
                         int lda, const float *x, int incx, float beta, float *y, int incy);
typedef void (*set_threads_fn)(int threads);
typedef char *(*get_config_fn)(void);

struct openblas {
  void *handle;
  sgemm_fn sgemm;
  sgemv_fn sgemv;
  set_threads_fn set_threads;
  get_config_fn get_config;
};

/* dlsym into a function pointer without a data-to-function cast. */
static int find_symbol(void *handle, const char *name, void *fn, size_t fn_size) {
  void *symbol = dlsym(handle, name);
  if (!symbol) return -1;
  memcpy(fn, &symbol, fn_size);
  return 0;
}

openblas *openblas_load(int threads, char *error, size_t error_size) {
  openblas *blas = calloc(1, sizeof *blas);
  if (!blas) {
    snprintf(error, error_size, "out of host memory");
    return NULL;
  }
  blas->handle = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!blas->handle ||
      find_symbol(blas->handle, "cblas_sgemm", &blas->sgemm, sizeof blas->sgemm) ||
      find_symbol(blas->handle, "cblas_sgemv", &blas->sgemv, sizeof blas->sgemv) ||
      find_symbol(blas->handle, "openblas_set_num_threads", &blas->set_threads,
                  sizeof blas->set_threads)) {
    const char *reason = dlerror();
    snprintf(error, error_size, "%s", reason ? reason : "libopenblas.so.0: unknown error");
    openblas_unload(blas);
    return NULL;
  }
  /* Optional: only used to name the build in the header. */
  (void)find_symbol(blas->handle, "openblas_get_config", &blas->get_config,
                    sizeof blas->get_config);
  blas->set_threads(threads);
  return blas;
}

void openblas_unload(openblas *blas) {
  if (!blas) return;
  if (blas->handle) dlclose(blas->handle);
  free(blas);
}

const char *openblas_config(const openblas *blas) {
  return blas->get_config ? blas->get_config() : "OpenBLAS";
}

/* ------------------------------------------------------------ timing */

typedef struct blas_matmul {
  openblas *blas;
  int m, n, k;
  float **a, **b, **out; /* one of each per input set */
} blas_matmul;

static int blas_call(void *self, int set) {
  blas_matmul *mm = self;
  if (mm->m == 1) /* out[N] = b[N, K] . a[K], as a decode step would call it */
    mm->blas->sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, mm->n, mm->k, 1.0f, mm->b[set], mm->k,
                    mm->a[set], 1, 0.0f, mm->out[set], 1);
  else /* out[M, N] = a[M, K] . b[N, K]^T */
    mm->blas->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, mm->m, mm->n, mm->k, 1.0f,
                    mm->a[set], mm->k, mm->b[set], mm->k, 0.0f, mm->out[set], mm->n);
  return 0;
}

static int blas_wait(void *self) {
  (void)self; /* OpenBLAS calls return when done */
  return 0;
}

/* Host copies of the matmul's f32 inputs and a zeroed (so: mapped) output. */
static float *host_copy(const bench_tensor *t) {
  float *copy = malloc((size_t)t->bytes);
  if (copy && t->host)
    memcpy(copy, t->host, (size_t)t->bytes);
  else if (copy)
    memset(copy, 0, (size_t)t->bytes);
  return copy;
}

static void free_sets(blas_matmul *mm, int sets) {
  for (int s = 0; s < sets; s++) {
    if (mm->a) free(mm->a[s]);
    if (mm->b) free(mm->b[s]);
    if (mm->out) free(mm->out[s]);
  }
  free(mm->a);
  free(mm->b);
  free(mm->out);
}

int openblas_time_matmul(openblas *blas, const workload *w, int sets,
                         const bench_timing_config *config, timing *out) {
  const bench_tensor *a = &w->tensors[MATMUL_A], *b = &w->tensors[MATMUL_B];
  blas_matmul mm = {blas, (int)a->shape[0], (int)b->shape[0], (int)a->shape[1], NULL, NULL, NULL};
  mm.a = calloc((size_t)sets, sizeof *mm.a);
  mm.b = calloc((size_t)sets, sizeof *mm.b);
  mm.out = calloc((size_t)sets, sizeof *mm.out);
  int ok = mm.a && mm.b && mm.out;
  for (int s = 0; ok && s < sets; s++) {
    mm.a[s] = host_copy(a);
    mm.b[s] = host_copy(b);
    mm.out[s] = host_copy(&w->tensors[MATMUL_OUT]);
    ok = mm.a[s] && mm.b[s] && mm.out[s];
  }
  timer_target target = {blas_call, blas_wait, &mm, sets};
  int rc = ok ? time_target(&target, config, out) : -1;
  free_sets(&mm, sets);
  return rc;
}
