/*
 * trace.h - `--trace FILE` of gllmk-bench and gllmk-generate: a Chrome
 * trace (Trace Event Format JSON, for Perfetto or chrome://tracing) of every
 * op a context runs, from gllmk_context_set_timing's device timestamps.
 *
 *   gllmk_trace *t = gllmk_trace_open(ctx, "trace.json", "gllmk-generate");
 *   gllmk_trace_phase(t, "decode step 3");   ops delivered from now on belong to it
 *   ...
 *   gllmk_trace_close(t);                     synchronizes, writes the file
 *
 * Each op is one complete event (ph "X"): name = the op, ts and dur in
 * microseconds, pid 1, tid 1 (the context's track); args: shapes of the
 * tensors, dtype, bytes, flops (the cost model of tools/python/gllmk/trace.py),
 * host_timed (1 where the backend has no device timestamps) and the phase.
 * Each phase also gets one event spanning its ops on track 2. Times count from
 * the first op; a device clock that is not CLOCK_MONOTONIC is shifted so that
 * no op ends after the host received its record. Written with libjansson.
 */
#ifndef GLLMK_TOOLS_TRACE_H_
#define GLLMK_TOOLS_TRACE_H_

#include "gllmk/gllmk.h"

typedef struct gllmk_trace gllmk_trace;

/* Starts tracing every op of `ctx` into `path` (NULL with a message on
 * stderr if it cannot). `process` names the trace's process. */
gllmk_trace *gllmk_trace_open(gllmk_context *ctx, const char *path, const char *process);
/* Ops delivered from now on belong to the phase `name`. */
void gllmk_trace_phase(gllmk_trace *t, const char *name);
/* Synchronizes, writes the file and frees the trace; 0 on success. */
int gllmk_trace_close(gllmk_trace *t);

#endif /* GLLMK_TOOLS_TRACE_H_ */
