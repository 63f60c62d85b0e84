/*
 * cpu_pool.c - the cpu device's persistent worker threads.
 *
 * A job is a range [0, n) cut into chunks that threads claim one at a time
 * from an atomic counter, so a thread slowed down by other processes simply
 * takes fewer chunks. The calling thread works on the job too. Between jobs
 * the workers sleep on a condition variable: an idle pool uses no CPU.
 */
#include "cpu_pool.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include "cpu_internal.h"

/* Chunks per thread: a few, so that uneven progress evens out. */
enum { CHUNKS_PER_THREAD = 4 };

struct cpu_pool {
  pthread_mutex_t mutex;
  pthread_cond_t job_posted;   /* workers wait here for the next job */
  pthread_cond_t job_finished; /* the caller waits here for its helpers */
  pthread_t *workers;
  int num_workers;
  int shutting_down;

  /* The current job; written by the caller under the mutex. */
  uint64_t generation;
  cpu_range_fn fn;
  void *ctx;
  int64_t n, chunk_size, num_chunks;
  int64_t next_chunk;  /* atomic: the next chunk to claim */
  int seats_left;      /* workers that may still join the job */
  int helpers_running; /* workers that joined and have not finished */
};

/* Claims and runs chunks of the current job until none is left. */
static void run_chunks(cpu_pool *pool, cpu_range_fn fn, void *ctx, int64_t n, int64_t chunk_size,
                       int64_t num_chunks) {
  for (;;) {
    int64_t chunk = __atomic_fetch_add(&pool->next_chunk, 1, __ATOMIC_RELAXED);
    if (chunk >= num_chunks) return;
    int64_t begin = chunk * chunk_size;
    int64_t end = begin + chunk_size < n ? begin + chunk_size : n;
    fn(ctx, begin, end);
  }
}

static void *worker_main(void *arg) {
  cpu_pool *pool = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&pool->mutex);
  for (;;) {
    while (!pool->shutting_down && pool->generation == seen)
      pthread_cond_wait(&pool->job_posted, &pool->mutex);
    if (pool->shutting_down) break;
    seen = pool->generation;
    if (pool->seats_left == 0) continue; /* enough helpers already */
    pool->seats_left--;
    pool->helpers_running++;
    cpu_range_fn fn = pool->fn;
    void *ctx = pool->ctx;
    int64_t n = pool->n, chunk_size = pool->chunk_size, num_chunks = pool->num_chunks;
    pthread_mutex_unlock(&pool->mutex);

    run_chunks(pool, fn, ctx, n, chunk_size, num_chunks);

    pthread_mutex_lock(&pool->mutex);
    if (--pool->helpers_running == 0) pthread_cond_signal(&pool->job_finished);
  }
  pthread_mutex_unlock(&pool->mutex);
  return NULL;
}

gllmk_status cpu_pool_create(int num_threads, cpu_pool **out_pool) {
  *out_pool = NULL;
  cpu_pool *pool = calloc(1, sizeof *pool);
  if (!pool) return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: out of host memory");
  pool->num_workers = num_threads > 1 ? num_threads - 1 : 0;
  if (pool->num_workers > 0) {
    pool->workers = calloc((size_t)pool->num_workers, sizeof *pool->workers);
    if (!pool->workers) {
      free(pool);
      return cpu_host->fail(GLLMK_ERR_OUT_OF_MEMORY, "cpu: out of host memory");
    }
  }
  pthread_mutex_init(&pool->mutex, NULL);
  pthread_cond_init(&pool->job_posted, NULL);
  pthread_cond_init(&pool->job_finished, NULL);

  /* Workers start with every signal blocked, so that the application's
   * signal handlers keep running on its own threads. */
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  int started = 0, error = 0;
  while (started < pool->num_workers) {
    error = pthread_create(&pool->workers[started], NULL, worker_main, pool);
    if (error) break;
    started++;
  }
  pthread_sigmask(SIG_SETMASK, &previous, NULL);

  if (error) {
    pool->num_workers = started;
    cpu_pool_destroy(pool);
    return cpu_host->fail(error == EAGAIN ? GLLMK_ERR_OUT_OF_MEMORY : GLLMK_ERR_BACKEND,
                          "cpu: cannot start worker thread %d of %d (error %d)", started + 1,
                          num_threads, error);
  }
  *out_pool = pool;
  return GLLMK_OK;
}

void cpu_pool_destroy(cpu_pool *pool) {
  if (!pool) return;
  pthread_mutex_lock(&pool->mutex);
  pool->shutting_down = 1;
  pthread_cond_broadcast(&pool->job_posted);
  pthread_mutex_unlock(&pool->mutex);
  for (int i = 0; i < pool->num_workers; i++) pthread_join(pool->workers[i], NULL);
  pthread_cond_destroy(&pool->job_finished);
  pthread_cond_destroy(&pool->job_posted);
  pthread_mutex_destroy(&pool->mutex);
  free(pool->workers);
  free(pool);
}

void cpu_parallel_for(gllmk_plugin_device *device, int64_t n, int64_t grain, cpu_range_fn fn,
                      void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  cpu_pool *pool = device->pool;
  int threads = pool ? pool->num_workers + 1 : 1;
  if (threads == 1 || n < 2 * grain) {
    fn(ctx, 0, n);
    return;
  }
  /* Chunks of at least `grain`, a few per thread. */
  int64_t max_chunks = (int64_t)threads * CHUNKS_PER_THREAD;
  int64_t chunk_size = (n + max_chunks - 1) / max_chunks;
  if (chunk_size < grain) chunk_size = grain;
  int64_t num_chunks = (n + chunk_size - 1) / chunk_size;

  pthread_mutex_lock(&pool->mutex);
  pool->fn = fn;
  pool->ctx = ctx;
  pool->n = n;
  pool->chunk_size = chunk_size;
  pool->num_chunks = num_chunks;
  __atomic_store_n(&pool->next_chunk, 0, __ATOMIC_RELAXED);
  pool->seats_left = num_chunks - 1 < pool->num_workers ? (int)(num_chunks - 1) : pool->num_workers;
  pool->generation++;
  pthread_cond_broadcast(&pool->job_posted);
  pthread_mutex_unlock(&pool->mutex);

  run_chunks(pool, fn, ctx, n, chunk_size, num_chunks);

  /* Wait until every helper that joined has left the job, so none touches
   * `ctx` after we return. Workers that wake up later find no seat. */
  pthread_mutex_lock(&pool->mutex);
  pool->seats_left = 0;
  while (pool->helpers_running > 0) pthread_cond_wait(&pool->job_finished, &pool->mutex);
  pthread_mutex_unlock(&pool->mutex);
}
