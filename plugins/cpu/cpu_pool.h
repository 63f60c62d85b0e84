/*
 * cpu_pool.h - the worker pool behind cpu_parallel_for (cpu_internal.h).
 */
#ifndef GLLMK_CPU_POOL_H_
#define GLLMK_CPU_POOL_H_

#include "cpu_internal.h"

/* Starts num_threads - 1 workers (the caller of cpu_parallel_for is the
 * last thread). Fails through cpu_host->fail. */
gllmk_status cpu_pool_create(int num_threads, cpu_pool **out_pool);
/* Stops and joins the workers; NULL is ignored. No job may be running. */
void cpu_pool_destroy(cpu_pool *pool);

#endif /* GLLMK_CPU_POOL_H_ */
