/*
 * trace.c - `--trace FILE` of gllmk-bench and gllmk-generate (trace.h).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gllmk/gllmk.h"
#include "trace.h"

typedef struct gllmk_trace_record {
  gllmk_op op;
  uint64_t start_ns, end_ns, delivered_ns;
  uint32_t host_timed;
  int phase;     /* index into phases */
  json_t *args;  /* shapes, dtype, bytes, flops */
} gllmk_trace_record;

struct gllmk_trace {
  gllmk_context *ctx;
  const char *path, *process;
  gllmk_trace_record *records;
  size_t count, capacity;
  char **phases;
  int phase_count, phase;
  int failed; /* out of memory while recording: reported at close */
};

static uint64_t gllmk_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The tensors of one call with their argument names, and the scalars the
 * cost model needs. */
typedef struct gllmk_trace_call {
  const char *names[8];
  const gllmk_tensor *tensors[8];
  int count;
  double beta;
  int causal, rotary_dim;
} gllmk_trace_call;

static void gllmk_trace_add(gllmk_trace_call *c, const char *name, const gllmk_tensor *t) {
  if (t && c->count < 8) {
    c->names[c->count] = name;
    c->tensors[c->count++] = t;
  }
}

static void gllmk_trace_tensors(gllmk_op op, const void *args, gllmk_trace_call *c) {
#define T(field) gllmk_trace_add(c, #field, a->field)
  memset(c, 0, sizeof *c);
  switch (op) {
  case GLLMK_OP_copy: { const gllmk_copy_args *a = args; T(out); T(src); break; }
  case GLLMK_OP_fill: { const gllmk_fill_args *a = args; T(out); break; }
  case GLLMK_OP_add:
  case GLLMK_OP_mul: { const gllmk_binary_args *a = args; T(out); T(a); T(b); break; }
  case GLLMK_OP_mul_add: { const gllmk_mul_add_args *a = args; T(out); T(a); T(b); T(c); break; }
  case GLLMK_OP_silu: { const gllmk_silu_args *a = args; T(out); T(x); break; }
  case GLLMK_OP_gelu: { const gllmk_gelu_args *a = args; T(out); T(x); break; }
  case GLLMK_OP_add_gelu: { const gllmk_add_gelu_args *a = args; T(out); T(x); T(bias); break; }
  case GLLMK_OP_swiglu: { const gllmk_swiglu_args *a = args; T(out); T(gate); T(up); break; }
  case GLLMK_OP_rmsnorm: { const gllmk_rmsnorm_args *a = args; T(out); T(x); T(weight); break; }
  case GLLMK_OP_add_rmsnorm: {
    const gllmk_add_rmsnorm_args *a = args; T(out); T(residual); T(x); T(weight); break; }
  case GLLMK_OP_layernorm: {
    const gllmk_layernorm_args *a = args; T(out); T(x); T(weight); T(bias); break; }
  case GLLMK_OP_softmax: { const gllmk_softmax_args *a = args; T(out); T(x); break; }
  case GLLMK_OP_rope: {
    const gllmk_rope_args *a = args; T(out); T(x); T(positions); T(inv_freq);
    c->rotary_dim = a->rotary_dim; break; }
  case GLLMK_OP_embedding: { const gllmk_embedding_args *a = args; T(out); T(table); T(ids); break; }
  case GLLMK_OP_matmul: {
    const gllmk_matmul_args *a = args; T(out); T(a); T(b); T(bias); c->beta = a->beta; break; }
  case GLLMK_OP_attention: {
    const gllmk_attention_args *a = args; T(out); T(q); T(k); T(v); T(kv_lens); T(lse);
    c->causal = a->causal; break; }
  case GLLMK_OP_kv_append: {
    const gllmk_kv_append_args *a = args; T(k_cache); T(v_cache); T(k); T(v); T(slots); break; }
  case GLLMK_OP_paged_attention: {
    const gllmk_paged_attention_args *a = args; T(out); T(q); T(k_cache); T(v_cache);
    T(block_table); T(q_starts); T(seq_lens); break; }
  case GLLMK_OP_argmax: { const gllmk_argmax_args *a = args; T(out); T(logits); break; }
  case GLLMK_OP_sample: { const gllmk_sample_args *a = args; T(out); T(logits); break; }
  default: break;
  }
#undef T
}

static const gllmk_tensor *gllmk_trace_find(const gllmk_trace_call *c, const char *name) {
  for (int i = 0; i < c->count; i++)
    if (strcmp(c->names[i], name) == 0) return c->tensors[i];
  return NULL;
}

static double gllmk_trace_numel(const gllmk_tensor *t, int first, int last) {
  double n = 1;
  for (int i = first; t && i < last; i++) n *= (double)t->shape[i];
  return n;
}

static double gllmk_trace_bytes(const gllmk_tensor *t) {
  return t ? gllmk_trace_numel(t, 0, t->ndim) * (double)gllmk_dtype_size((gllmk_dtype)t->dtype) : 0;
}

/* Bytes read and written and FLOPs of one call: the model of
 * tools/python/gllmk/trace.py's cost() (see its comment). */
static void gllmk_trace_cost(gllmk_op op, const gllmk_trace_call *c, double *bytes, double *flops) {
  static const int per_element[GLLMK_OP_COUNT] = {
      [GLLMK_OP_add] = 1, [GLLMK_OP_mul] = 1, [GLLMK_OP_mul_add] = 2, [GLLMK_OP_silu] = 6,
      [GLLMK_OP_gelu] = 8, [GLLMK_OP_add_gelu] = 9, [GLLMK_OP_swiglu] = 7,
      [GLLMK_OP_rmsnorm] = 4, [GLLMK_OP_add_rmsnorm] = 5, [GLLMK_OP_layernorm] = 7,
      [GLLMK_OP_softmax] = 7};
  const gllmk_tensor *out = gllmk_trace_find(c, "out");
  double total = 0;
  for (int i = 0; i < c->count; i++) total += gllmk_trace_bytes(c->tensors[i]);
  *flops = 0;
  switch (op) {
  case GLLMK_OP_embedding:
    total = 2 * gllmk_trace_bytes(out) + gllmk_trace_bytes(gllmk_trace_find(c, "ids"));
    break;
  case GLLMK_OP_kv_append:
    total = 2 * (gllmk_trace_bytes(gllmk_trace_find(c, "k")) +
                 gllmk_trace_bytes(gllmk_trace_find(c, "v"))) +
            gllmk_trace_bytes(gllmk_trace_find(c, "slots"));
    break;
  case GLLMK_OP_paged_attention: {
    const gllmk_tensor *kc = gllmk_trace_find(c, "k_cache"), *table = gllmk_trace_find(c, "block_table");
    const gllmk_tensor *q = gllmk_trace_find(c, "q");
    double blocks = (double)kc->shape[0], named = (double)(table->shape[0] * table->shape[1]);
    double keys = (blocks < named ? blocks : named) * (double)kc->shape[1];
    double row = (double)(kc->shape[2] * kc->shape[3]) * (double)gllmk_dtype_size((gllmk_dtype)kc->dtype);
    total += 2 * keys * row - 2 * gllmk_trace_bytes(kc);
    double per_query = (double)(table->shape[1] * kc->shape[1]);
    *flops = 4 * (double)(q->shape[0] * q->shape[1] * kc->shape[3]) * (keys < per_query ? keys : per_query);
    break;
  }
  case GLLMK_OP_matmul: {
    const gllmk_tensor *a = gllmk_trace_find(c, "a");
    *flops = 2 * gllmk_trace_numel(a, 0, a->ndim) * (double)out->shape[out->ndim - 1];
    if (c->beta != 0) total += gllmk_trace_bytes(out);
    break;
  }
  case GLLMK_OP_attention: {
    const gllmk_tensor *q = gllmk_trace_find(c, "q"), *k = gllmk_trace_find(c, "k");
    int64_t sq = q->shape[1], skv = k->shape[1];
    double keys = 0;
    for (int64_t i = 0; i < sq; i++) {
      int64_t seen = c->causal ? i + skv - sq + 1 : skv;
      keys += (double)(seen < 0 ? 0 : seen > skv ? skv : seen);
    }
    *flops = 4 * (double)(q->shape[0] * q->shape[2] * q->shape[3]) * keys;
    break;
  }
  case GLLMK_OP_rope: {
    const gllmk_tensor *x = gllmk_trace_find(c, "x");
    *flops = 6 * (double)(x->shape[0] * x->shape[1]) * (double)(c->rotary_dim / 2);
    break;
  }
  case GLLMK_OP_argmax:
  case GLLMK_OP_sample: {
    const gllmk_tensor *logits = gllmk_trace_find(c, "logits");
    *flops = (op == GLLMK_OP_argmax ? 1 : 5) * gllmk_trace_numel(logits, 0, logits->ndim);
    break;
  }
  default:
    if ((int)op >= 0 && op < GLLMK_OP_COUNT)
      *flops = per_element[op] * gllmk_trace_numel(out, 0, out ? out->ndim : 0);
    break;
  }
  *bytes = total;
}

static json_t *gllmk_trace_args(const gllmk_op_timing *record) {
  gllmk_trace_call call;
  gllmk_trace_tensors(record->op, record->args, &call);
  json_t *args = json_object(), *shapes = json_object();
  const char *dtype = NULL;
  for (int i = 0; shapes && i < call.count; i++) {
    const gllmk_tensor *t = call.tensors[i];
    json_t *shape = json_array();
    for (int d = 0; shape && d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
    json_object_set_new(shapes, call.names[i], shape);
    if (!dtype && t->dtype != GLLMK_I32) dtype = gllmk_dtype_name((gllmk_dtype)t->dtype);
  }
  double bytes, flops;
  gllmk_trace_cost(record->op, &call, &bytes, &flops);
  if (!args) {
    json_decref(shapes);
    return NULL;
  }
  json_object_set_new(args, "shapes", shapes);
  json_object_set_new(args, "dtype", json_string(dtype ? dtype : "i32"));
  json_object_set_new(args, "bytes", json_integer((json_int_t)bytes));
  json_object_set_new(args, "flops", json_integer((json_int_t)flops));
  json_object_set_new(args, "host_timed", json_integer(record->host_timed));
  return args;
}

static void gllmk_trace_on_op(void *data, const gllmk_op_timing *record) {
  gllmk_trace *t = data;
  if (t->count == t->capacity) {
    size_t capacity = t->capacity ? 2 * t->capacity : 1024;
    gllmk_trace_record *grown = realloc(t->records, capacity * sizeof *grown);
    if (!grown) {
      t->failed = 1;
      return;
    }
    t->records = grown;
    t->capacity = capacity;
  }
  json_t *args = gllmk_trace_args(record);
  if (!args) {
    t->failed = 1;
    return;
  }
  t->records[t->count++] = (gllmk_trace_record){
      .op = record->op, .start_ns = record->start_ns, .end_ns = record->end_ns,
      .delivered_ns = gllmk_trace_now_ns(), .host_timed = record->host_timed,
      .phase = t->phase, .args = args};
}

/* Ops delivered from now on belong to a new phase `name` (copied; each
 * phase is one span, also when a name comes again). */
void gllmk_trace_phase(gllmk_trace *t, const char *name) {
  if (!t || (t->phase_count && strcmp(t->phases[t->phase], name) == 0)) return;
  char **grown = realloc(t->phases, (size_t)(t->phase_count + 1) * sizeof *grown);
  char *copy = strdup(name);
  if (!grown || !copy) {
    if (grown) t->phases = grown;
    free(copy);
    t->failed = 1;
    return;
  }
  t->phases = grown;
  t->phases[t->phase_count] = copy;
  t->phase = t->phase_count++;
}

/* Turns timing on for `ctx`; NULL if that fails, with a message on stderr
 * (the file cannot be written, gllmk's error, out of host memory). */
gllmk_trace *gllmk_trace_open(gllmk_context *ctx, const char *path, const char *process) {
  FILE *probe = fopen(path, "w"); /* fail now rather than after the run */
  if (!probe || fclose(probe) != 0) {
    fprintf(stderr, "%s: --trace: cannot write %s\n", process, path);
    return NULL;
  }
  gllmk_trace *t = calloc(1, sizeof *t);
  if (!t) {
    fprintf(stderr, "%s: --trace: out of host memory\n", process);
    return NULL;
  }
  t->ctx = ctx;
  t->path = path;
  t->process = process;
  gllmk_trace_phase(t, "run");
  if (t->failed || gllmk_context_set_timing(ctx, gllmk_trace_on_op, t) != GLLMK_OK) {
    fprintf(stderr, "%s: --trace: %s\n", process, t->failed ? "out of host memory" : gllmk_last_error());
    free(t->phases ? t->phases[0] : NULL);
    free(t->phases);
    free(t);
    return NULL;
  }
  return t;
}

static json_t *gllmk_trace_event(const char *name, const char *ph, int tid, double ts, double dur,
                                 json_t *args) {
  json_t *e = json_pack("{s:s, s:s, s:s, s:i, s:i}", "name", name, "cat", "gllmk", "ph", ph,
                        "pid", 1, "tid", tid);
  if (!e) {
    json_decref(args);
    return NULL;
  }
  if (ts >= 0) {
    json_object_set_new(e, "ts", json_real(ts));
    json_object_set_new(e, "dur", json_real(dur));
  }
  json_object_set_new(e, "args", args ? args : json_object());
  return e;
}

static void gllmk_trace_free(gllmk_trace *t) {
  for (size_t i = 0; i < t->count; i++) json_decref(t->records[i].args);
  for (int i = 0; i < t->phase_count; i++) free(t->phases[i]);
  free(t->records);
  free(t->phases);
  free(t);
}

/* Delivers what is queued, turns timing off, writes the file and frees the
 * trace. 0, or -1 with a message on stderr. NULL is ignored. */
int gllmk_trace_close(gllmk_trace *t) {
  if (!t) return 0;
  gllmk_status status = gllmk_context_set_timing(t->ctx, NULL, NULL);
  if (status != GLLMK_OK)
    fprintf(stderr, "%s: --trace: %s\n", t->process, gllmk_last_error());
  /* The clock: CLOCK_MONOTONIC when every record arrived after its op
   * ended (by less than 10 minutes), else shifted by the smallest gap. */
  int64_t offset = 0, first = INT64_MAX;
  for (size_t i = 0; i < t->count; i++) {
    int64_t gap = (int64_t)(t->records[i].delivered_ns - t->records[i].end_ns);
    if (i == 0 || gap < offset) offset = gap;
  }
  if (offset >= 0 && offset < 600 * (int64_t)1000000000) offset = 0;
  for (size_t i = 0; i < t->count; i++)
    if ((int64_t)t->records[i].start_ns + offset < first) first = (int64_t)t->records[i].start_ns + offset;
  json_t *events = json_array();
  json_t *meta[] = {
      json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "process_name", "ph", "M", "pid", 1,
                "tid", 0, "args", "name", t->process),
      json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", 1,
                "tid", 1, "args", "name", gllmk_context_backend(t->ctx)),
      json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", 1,
                "tid", 2, "args", "name", "phases"),
  };
  int failed = t->failed || !events;
  for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
    failed |= json_array_append_new(events, meta[i]) != 0;
  /* One span per phase: its first op's start to its last op's end. */
  int64_t *span = calloc(2 * (size_t)t->phase_count + 1, sizeof *span);
  failed |= !span;
  for (int p = 0; p < t->phase_count && !failed; p++) {
    span[2 * p] = INT64_MAX;
    span[2 * p + 1] = INT64_MIN;
  }
  for (size_t i = 0; i < t->count && !failed; i++) {
    const gllmk_trace_record *r = &t->records[i];
    if ((int64_t)r->start_ns < span[2 * r->phase]) span[2 * r->phase] = (int64_t)r->start_ns;
    if ((int64_t)r->end_ns > span[2 * r->phase + 1]) span[2 * r->phase + 1] = (int64_t)r->end_ns;
  }
  for (int p = 0; p < t->phase_count && !failed; p++)
    if (span[2 * p] <= span[2 * p + 1])
      failed |= json_array_append_new(
          events, gllmk_trace_event(t->phases[p], "X", 2, (double)(span[2 * p] + offset - first) / 1e3,
                                    (double)(span[2 * p + 1] - span[2 * p]) / 1e3, NULL)) != 0;
  free(span);
  for (size_t i = 0; i < t->count && !failed; i++) {
    gllmk_trace_record *r = &t->records[i];
    json_object_set_new(r->args, "phase", json_string(t->phases[r->phase]));
    failed |= json_array_append_new(
        events, gllmk_trace_event(gllmk_op_name(r->op), "X", 1,
                                  (double)((int64_t)r->start_ns + offset - first) / 1e3,
                                  (double)(r->end_ns - r->start_ns) / 1e3, r->args)) != 0;
    r->args = NULL; /* the event owns it now */
  }
  json_t *root = failed ? NULL : json_object();
  if (root) { /* json_object_set_new takes the value even when it fails */
    failed |= json_object_set_new(root, "traceEvents", events) != 0;
    failed |= json_object_set_new(root, "displayTimeUnit", json_string("ns")) != 0;
    events = NULL;
  }
  json_decref(events);
  int rc = 0;
  if (!root || failed || json_dump_file(root, t->path, JSON_COMPACT) != 0) {
    fprintf(stderr, "%s: --trace: cannot write %s\n", t->process, t->path);
    rc = -1;
  }
  json_decref(root);
  gllmk_trace_free(t);
  return rc || status != GLLMK_OK ? -1 : 0;
}
