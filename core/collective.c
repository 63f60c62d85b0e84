/*
 * collective.c - communicators and the collectives across their contexts
 * (gllmk.h, "collectives"), and their place in recordings.
 *
 * A collective is one call for every rank. Run at once, it goes straight to
 * the plugin. Recorded, it becomes an entry in every rank's recording, and
 * those recordings form a group: each rank's native form (a CUDA graph) can
 * only be captured while the others capture too, because a rank's part of a
 * collective is captured in the same plugin call as every other rank's. So
 * the group is compiled once its last recording ends, in lockstep: each rank
 * runs its calls up to the next collective, then the collective runs for
 * all. A group without native forms is never replayed call by call (a rank
 * alone would wait for the others), it is refused.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef enum collective_kind { ALL_REDUCE, ALL_GATHER } collective_kind;

typedef struct core_communicator core_communicator;
struct core_communicator {
  uint64_t handle; /* 0 once freed by its owner */
  uint32_t count;
  core_context **contexts; /* rank order */
  const gllmk_plugin *plugin;
  gllmk_plugin_comm *comm;
  uint32_t refs; /* the handle and every recording group */
  core_communicator *next; /* all communicators, for context destruction */
};

/* One recorded collective: its kind and the ranks' tensors (the caller's
 * buffer handles, resolved again for every run). */
typedef struct core_collective {
  collective_kind kind;
  gllmk_tensor *outs, *ins; /* [count] each */
} core_collective;

struct core_record_group {
  core_communicator *comm;
  core_recording **members; /* [count], NULL once freed */
  uint32_t live, ended;
  core_collective *collectives;
  uint32_t collective_count, collective_capacity;
};

/* Guards the list and every reference count: communicators are created and
 * freed by threads that may each own other contexts. */
static pthread_mutex_t communicators_lock = PTHREAD_MUTEX_INITIALIZER;
static core_communicator *communicators;

static const char *kind_fn(collective_kind kind) {
  return kind == ALL_REDUCE ? "gllmk_all_reduce" : "gllmk_all_gather";
}

/* ----------------------------------------------------------- lifetime */

/* Drops a reference (lock held); the last one frees the plugin's side. */
static void communicator_unref_locked(core_communicator *c) {
  if (--c->refs > 0) return;
  core_communicator **link = &communicators;
  while (*link != c) link = &(*link)->next;
  *link = c->next;
  c->plugin->comm_free(c->comm);
  free(c->contexts);
  free(c);
}

static void communicator_release_handle_locked(core_communicator *c) {
  if (c->handle == 0) return;
  core_handle_release(c->handle, CORE_HANDLE_COMMUNICATOR);
  c->handle = 0;
  communicator_unref_locked(c);
}

void gllmk_communicator_free(gllmk_communicator *handle) {
  pthread_mutex_lock(&communicators_lock);
  core_communicator *c = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_COMMUNICATOR);
  if (c) communicator_release_handle_locked(c);
  pthread_mutex_unlock(&communicators_lock);
}

void core_communicators_release_context(const core_context *context) {
  pthread_mutex_lock(&communicators_lock);
  for (core_communicator *c = communicators, *next; c; c = next) {
    next = c->next;
    bool member = false;
    for (uint32_t r = 0; r < c->count; r++) member = member || c->contexts[r] == context;
    if (member) communicator_release_handle_locked(c);
  }
  pthread_mutex_unlock(&communicators_lock);
}

uint32_t gllmk_communicator_size(const gllmk_communicator *handle) {
  core_communicator *c = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_COMMUNICATOR);
  return c ? c->count : 0;
}

static bool has_collectives(const gllmk_plugin *p) {
  return CORE_PLUGIN_FN(p, comm_create) && CORE_PLUGIN_FN(p, comm_free) &&
         CORE_PLUGIN_FN(p, all_reduce) && CORE_PLUGIN_FN(p, all_gather);
}

/* Live, distinct contexts of one plugin. */
static gllmk_status check_contexts(const char *fn, gllmk_context *const *handles, uint32_t count,
                                   core_context **out) {
  if (handles == NULL || count == 0)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: contexts is NULL or count is 0", fn);
  for (uint32_t r = 0; r < count; r++) {
    char arg[32];
    core_format(arg, sizeof arg, "contexts[%u]", r);
    core_context *context = core_context_get(handles[r]);
    if (context == NULL)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is not a live context", fn, arg);
    for (uint32_t i = 0; i < r; i++)
      if (out[i] == context)
        return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: contexts[%u] and %s are the same", fn,
                         i, arg);
    if (r > 0 && context->plugin != out[0]->plugin)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                       "%s: %s is on the %s backend, contexts[0] on %s: one backend only", fn,
                       arg, context->backend, out[0]->backend);
    out[r] = context;
  }
  if (!has_collectives(out[0]->plugin))
    return core_fail(GLLMK_ERR_UNSUPPORTED, "%s: the %s backend has no collectives", fn,
                     out[0]->backend);
  return GLLMK_OK;
}

static gllmk_status make_communicator(const char *fn, core_communicator *c) {
  gllmk_plugin_device **devices = calloc(c->count, sizeof *devices);
  if (devices == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  for (uint32_t r = 0; r < c->count; r++) devices[r] = c->contexts[r]->device;
  gllmk_status status = c->plugin->comm_create(devices, c->count, &c->comm);
  free(devices);
  if (status != GLLMK_OK) {
    char why[512];
    core_format(why, sizeof why, "%s", gllmk_last_error());
    return core_fail(status, "%s: the %s backend: %s", fn, c->contexts[0]->backend, why);
  }
  c->handle = core_handle_new(CORE_HANDLE_COMMUNICATOR, c);
  if (c->handle == 0) {
    c->plugin->comm_free(c->comm);
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: no handle left", fn);
  }
  return GLLMK_OK;
}

gllmk_status gllmk_communicator_create(gllmk_context *const *contexts, uint32_t count,
                                       gllmk_communicator **out_communicator) {
  static const char fn[] = "gllmk_communicator_create";
  core_clear_error();
  if (out_communicator == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_communicator is NULL", fn);
  if (count > 4096) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: count=%u is over 4096", fn, count);
  core_communicator *c = calloc(1, sizeof *c);
  core_context **ranks = calloc(count ? count : 1, sizeof *ranks);
  gllmk_status status = c && ranks ? GLLMK_OK : core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  if (status == GLLMK_OK) status = check_contexts(fn, contexts, count, ranks);
  if (status == GLLMK_OK) {
    *c = (core_communicator){.count = count, .contexts = ranks, .plugin = ranks[0]->plugin, .refs = 1};
    status = make_communicator(fn, c);
  }
  if (status != GLLMK_OK) {
    free(ranks);
    free(c);
    return status;
  }
  pthread_mutex_lock(&communicators_lock);
  c->next = communicators;
  communicators = c;
  pthread_mutex_unlock(&communicators_lock);
  *out_communicator = (gllmk_communicator *)(uintptr_t)c->handle;
  return GLLMK_OK;
}

/* ---------------------------------------------------------- validation */

static bool spans_overlap(const gllmk_tensor *a, const gllmk_tensor *b) {
  if (a->buffer != b->buffer) return false;
  core_tensor_span x, y;
  (void)core_tensor_check("", "", a, &x);
  (void)core_tensor_check("", "", b, &y);
  return x.begin < y.end && y.begin < x.end;
}

static bool same_place(const gllmk_tensor *a, const gllmk_tensor *b) {
  return a->buffer == b->buffer && a->offset == b->offset;
}

/* One tensor of rank r: valid, dense, on the rank's context, of a dtype the
 * collective takes. */
static gllmk_status check_tensor(const char *fn, const core_communicator *c, collective_kind kind,
                                 const char *arg, const gllmk_tensor *t, uint32_t r) {
  core_tensor_span span;
  CORE_TRY(core_tensor_check(fn, arg, t, &span));
  if (span.buffer->context != c->contexts[r])
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.buffer is not on contexts[%u] (rank %u)",
                     fn, arg, r, r);
  if (!gllmk_tensor_is_contiguous(t))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is not contiguous", fn, arg);
  bool float_type = t->dtype == GLLMK_F32 || t->dtype == GLLMK_F16 || t->dtype == GLLMK_BF16;
  if (!float_type && !(kind == ALL_GATHER && t->dtype == GLLMK_I32))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.dtype=%s, expected f32, f16, bf16%s", fn,
                     arg, gllmk_dtype_name((gllmk_dtype)t->dtype),
                     kind == ALL_GATHER ? " or i32" : "");
  return GLLMK_OK;
}

static gllmk_status check_rank(const char *fn, const core_communicator *c, collective_kind kind,
                               const gllmk_tensor *outs, const gllmk_tensor *ins, uint32_t r) {
  char out_arg[32], in_arg[32];
  core_format(out_arg, sizeof out_arg, "outs[%u]", r);
  core_format(in_arg, sizeof in_arg, "ins[%u]", r);
  const gllmk_tensor *in = &ins[r], *out = &outs[r];
  CORE_TRY(check_tensor(fn, c, kind, in_arg, in, r));
  CORE_TRY(check_tensor(fn, c, kind, out_arg, out, r));
  int64_t n = gllmk_tensor_numel(in), want = kind == ALL_GATHER ? n * c->count : n;
  if (in->dtype != ins[0].dtype || n != gllmk_tensor_numel(&ins[0]))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: %s has %lld %s elements, ins[0] %lld %s: every rank gives the same",
                     fn, in_arg, (long long)n, gllmk_dtype_name((gllmk_dtype)in->dtype),
                     (long long)gllmk_tensor_numel(&ins[0]),
                     gllmk_dtype_name((gllmk_dtype)ins[0].dtype));
  if (out->dtype != in->dtype || gllmk_tensor_numel(out) != want)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s must hold %lld %s elements, it holds %lld %s",
                     fn, out_arg, (long long)want, gllmk_dtype_name((gllmk_dtype)in->dtype),
                     (long long)gllmk_tensor_numel(out), gllmk_dtype_name((gllmk_dtype)out->dtype));
  bool in_place = kind == ALL_REDUCE && same_place(out, in);
  if (!in_place && spans_overlap(out, in))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s%s", fn, out_arg, in_arg,
                     kind == ALL_REDUCE ? " (only the same tensor, in place, is allowed)" : "");
  return GLLMK_OK;
}

static gllmk_status check_call(const char *fn, const gllmk_communicator *handle,
                               collective_kind kind, const gllmk_tensor *outs,
                               const gllmk_tensor *ins, core_communicator **out) {
  core_communicator *c = core_handle_get((uint64_t)(uintptr_t)handle, CORE_HANDLE_COMMUNICATOR);
  if (c == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: communicator is %s", fn,
                     handle ? "not a live communicator (freed, or a context of it destroyed)"
                            : "NULL");
  if (outs == NULL || ins == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: outs and ins are required", fn);
  for (uint32_t r = 0; r < c->count; r++) CORE_TRY(check_rank(fn, c, kind, outs, ins, r));
  *out = c;
  return GLLMK_OK;
}

/* ----------------------------------------------------------------- run */

/* The tensors with buffer handles replaced by the core's records. */
static gllmk_status resolve(const char *fn, const core_communicator *c, const gllmk_tensor *from,
                            gllmk_tensor *to) {
  for (uint32_t r = 0; r < c->count; r++) {
    core_buffer *buffer = core_buffer_get(from[r].buffer);
    if (buffer == NULL)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: rank %u's tensor uses a buffer that was freed",
                       fn, r);
    to[r] = from[r];
    to[r].buffer = (gllmk_buffer *)(void *)buffer;
  }
  return GLLMK_OK;
}

static gllmk_status run_collective(const char *fn, const core_communicator *c,
                                   collective_kind kind, const gllmk_tensor *outs,
                                   const gllmk_tensor *ins) {
  gllmk_tensor *resolved = malloc(2 * (size_t)c->count * sizeof *resolved);
  if (resolved == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  gllmk_status status = resolve(fn, c, outs, resolved);
  if (status == GLLMK_OK) status = resolve(fn, c, ins, resolved + c->count);
  if (status == GLLMK_OK)
    status = (kind == ALL_REDUCE ? c->plugin->all_reduce : c->plugin->all_gather)(
        c->comm, resolved, resolved + c->count);
  free(resolved);
  return status;
}

/* ----------------------------------------------------------- recording */

static bool native_capable(const gllmk_plugin *p) {
  return CORE_PLUGIN_FN(p, record_begin) && CORE_PLUGIN_FN(p, record_end) &&
         CORE_PLUGIN_FN(p, record_replay) && CORE_PLUGIN_FN(p, record_free);
}


static gllmk_status new_group(const char *fn, core_communicator *c, core_record_group **out) {
  core_record_group *g = calloc(1, sizeof *g);
  core_recording **members = calloc(c->count, sizeof *members);
  if (g == NULL || members == NULL) {
    free(g);
    free(members);
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory recording", fn);
  }
  g->comm = c;
  g->members = members;
  g->live = c->count;
  for (uint32_t r = 0; r < c->count; r++) {
    members[r] = c->contexts[r]->recording;
    members[r]->group = g;
    members[r]->rank = r;
  }
  pthread_mutex_lock(&communicators_lock);
  c->refs++;
  pthread_mutex_unlock(&communicators_lock);
  *out = g;
  return GLLMK_OK;
}

/* The group the ranks' recordings in progress form for this communicator:
 * new at its first collective, then the same one. */
static gllmk_status recording_group(const char *fn, core_communicator *c, core_record_group **out) {
  core_record_group *g = c->contexts[0]->recording->group;
  for (uint32_t r = 0; r < c->count; r++) {
    const core_context *context = c->contexts[r];
    if (!native_capable(context->plugin))
      return core_fail(GLLMK_ERR_UNSUPPORTED,
                       "%s: the %s backend replays recordings call by call, and a recorded "
                       "collective needs native recordings; call it outside a recording",
                       fn, context->backend);
    if (context->recording->group != g || (g && g->members[r] != context->recording))
      return core_fail(GLLMK_ERR_UNSUPPORTED,
                       "%s: contexts[%u]'s recording holds collectives of another communicator "
                       "(one per recording)", fn, r);
  }
  if (g) {
    *out = g;
    return GLLMK_OK;
  }
  return new_group(fn, c, out);
}

static gllmk_status copy_tensors(const gllmk_tensor *from, uint32_t count, gllmk_tensor **out) {
  *out = malloc((size_t)count * sizeof **out);
  if (*out == NULL) return GLLMK_ERR_OUT_OF_MEMORY;
  memcpy(*out, from, (size_t)count * sizeof **out);
  return GLLMK_OK;
}

static gllmk_status reserve_collective(core_record_group *g) {
  for (uint32_t r = 0; r < g->comm->count; r++) CORE_TRY(core_recording_reserve(g->members[r]));
  return core_reserve_one(&g->collectives, g->collective_count, &g->collective_capacity,
                          sizeof *g->collectives, 64);
}

/* The collective kept by the group, and its entry in every rank's recording
 * (all or none, so that the ranks' recordings stay aligned). */
static gllmk_status record_collective(const char *fn, core_communicator *c, collective_kind kind,
                                      const gllmk_tensor *outs, const gllmk_tensor *ins) {
  core_record_group *g = NULL;
  CORE_TRY(recording_group(fn, c, &g));
  core_collective k = {.kind = kind};
  if (reserve_collective(g) != GLLMK_OK || copy_tensors(outs, c->count, &k.outs) != GLLMK_OK ||
      copy_tensors(ins, c->count, &k.ins) != GLLMK_OK) {
    free(k.outs);
    free(k.ins);
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory recording", fn);
  }
  g->collectives[g->collective_count++] = k;
  for (uint32_t r = 0; r < c->count; r++) {
    core_recording *recording = g->members[r];
    core_call *entry = &recording->calls[recording->count++];
    memset(entry, 0, sizeof *entry);
    entry->collective = g->collective_count;
  }
  return GLLMK_OK;
}

/* How many of the communicator's contexts are recording: all or none is allowed. */
static gllmk_status recording_ranks(const char *fn, const core_communicator *c, bool *out) {
  uint32_t recording = 0;
  for (uint32_t r = 0; r < c->count; r++) recording += c->contexts[r]->recording != NULL;
  if (recording != 0 && recording != c->count)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: %u of the %u contexts are recording: all of them or none", fn,
                     recording, c->count);
  *out = recording != 0;
  return GLLMK_OK;
}

static gllmk_status collective(gllmk_communicator *handle, collective_kind kind,
                               const gllmk_tensor *outs, const gllmk_tensor *ins) {
  const char *fn = kind_fn(kind);
  core_clear_error();
  core_communicator *c = NULL;
  CORE_TRY(check_call(fn, handle, kind, outs, ins, &c));
  bool recording = false;
  CORE_TRY(recording_ranks(fn, c, &recording));
  if (recording) return record_collective(fn, c, kind, outs, ins);
  return run_collective(fn, c, kind, outs, ins);
}

gllmk_status gllmk_all_reduce(gllmk_communicator *communicator, const gllmk_tensor *outs,
                              const gllmk_tensor *ins) {
  return collective(communicator, ALL_REDUCE, outs, ins);
}

gllmk_status gllmk_all_gather(gllmk_communicator *communicator, const gllmk_tensor *outs,
                              const gllmk_tensor *ins) {
  return collective(communicator, ALL_GATHER, outs, ins);
}

/* ------------------------------------------------------ group compile */

/* Rank r's calls from *cursor up to its next collective entry (or its end). */
static gllmk_status run_until_collective(core_recording *recording, uint32_t *cursor) {
  for (; *cursor < recording->count; ++*cursor) {
    const core_call *call = &recording->calls[*cursor];
    if (call->collective) return GLLMK_OK;
    CORE_TRY(core_call_run("gllmk_recording_end", recording->context, call));
  }
  return GLLMK_OK;
}

static gllmk_status run_lockstep(core_record_group *g, uint32_t *cursors) {
  const core_communicator *c = g->comm;
  for (uint32_t k = 0;; k++) {
    for (uint32_t r = 0; r < c->count; r++) CORE_TRY(run_until_collective(g->members[r], &cursors[r]));
    if (k == g->collective_count) return GLLMK_OK;
    for (uint32_t r = 0; r < c->count; r++) cursors[r]++; /* past entry k */
    const core_collective *x = &g->collectives[k];
    CORE_TRY(run_collective("gllmk_recording_end", c, x->kind, x->outs, x->ins));
  }
}

/* Captures every rank at once; keeps the native forms only if all succeed. */
static void compile_group(core_record_group *g) {
  const core_communicator *c = g->comm;
  const gllmk_plugin *p = c->plugin;
  uint32_t *cursors = calloc(c->count, sizeof *cursors);
  gllmk_plugin_recording **natives = calloc(c->count, sizeof *natives);
  if (native_capable(p) && cursors && natives) {
    uint32_t begun = 0;
    while (begun < c->count && p->record_begin(g->members[begun]->context->device) == GLLMK_OK)
      begun++;
    bool ok = begun == c->count && run_lockstep(g, cursors) == GLLMK_OK;
    for (uint32_t r = 0; r < begun; r++)
      ok = p->record_end(g->members[r]->context->device, &natives[r]) == GLLMK_OK && ok;
    for (uint32_t r = 0; r < begun; r++) {
      if (ok) g->members[r]->native = natives[r];
      else if (natives[r]) p->record_free(g->members[r]->context->device, natives[r]);
    }
  }
  free(cursors);
  free(natives);
}

void core_group_recording_ended(core_recording *recording) {
  core_record_group *g = recording->group;
  if (++g->ended < g->comm->count || g->live < g->comm->count) return;
  /* Timing marks would be captured too; native recordings are timed whole. */
  gllmk_timing_callback *saved = calloc(g->comm->count, sizeof *saved);
  if (saved == NULL) return;
  for (uint32_t r = 0; r < g->comm->count; r++) {
    saved[r] = g->members[r]->context->timing_callback;
    g->members[r]->context->timing_callback = NULL;
  }
  compile_group(g);
  for (uint32_t r = 0; r < g->comm->count; r++) g->members[r]->context->timing_callback = saved[r];
  free(saved);
  core_clear_error();
}

gllmk_status core_group_replay_check(const char *fn, const core_recording *recording) {
  const core_record_group *g = recording->group;
  if (g->live < g->comm->count)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: the recording holds collectives and another rank's recording was freed; "
                     "nothing was run", fn);
  for (uint32_t k = 0; k < g->collective_count; k++) {
    const core_collective *x = &g->collectives[k];
    if (core_buffer_get(x->outs[recording->rank].buffer) == NULL ||
        core_buffer_get(x->ins[recording->rank].buffer) == NULL)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                       "%s: collective %u (%s) uses a buffer that was freed; nothing was run", fn,
                       k, kind_fn(x->kind));
  }
  if (recording->native == NULL)
    return core_fail(GLLMK_ERR_UNSUPPORTED,
                     "%s: the recording holds collectives but has no native form (%s); nothing "
                     "was run", fn,
                     g->ended < g->comm->count ? "another rank's recording has not ended"
                                               : "the backend could not compile it");
  return GLLMK_OK;
}

void core_group_recording_gone(core_recording *recording) {
  core_record_group *g = recording->group;
  g->members[recording->rank] = NULL;
  if (--g->live > 0) return;
  for (uint32_t k = 0; k < g->collective_count; k++) {
    free(g->collectives[k].outs);
    free(g->collectives[k].ins);
  }
  free(g->collectives);
  free(g->members);
  pthread_mutex_lock(&communicators_lock);
  communicator_unref_locked(g->comm);
  pthread_mutex_unlock(&communicators_lock);
  free(g);
}
