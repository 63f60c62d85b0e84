/*
 * dispatch.c - the one entry of every op: the caller's struct copied at its
 * own size, validated, checked against the plugin's capabilities, then run,
 * recorded, or (gllmk_op_supported) only answered.
 *
 * The plugin never sees the caller's handles: core_call_run hands it copies
 * of the tensors whose `buffer` is the core's buffer record (gllmk_plugin.h).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Where each op's tensor pointers sit, and its struct's size in ABI 2.0 (the
 * smallest a caller may pass). Fields appended later are listed in
 * `extensions` with the minor version that added them. */
typedef struct op_layout {
  size_t size_v2_0;
  uint32_t tensor_count;
  size_t tensor_offsets[CORE_MAX_OP_TENSORS];
} op_layout;

#define AT(op, field) offsetof(gllmk_##op##_args, field)
#define LAYOUT(op, count, ...) \
  [GLLMK_OP_##op] = {sizeof(gllmk_##op##_args), count, {__VA_ARGS__}}

static const op_layout layouts[GLLMK_OP_COUNT] = {
    LAYOUT(copy, 2, AT(copy, out), AT(copy, src)),
    LAYOUT(fill, 1, AT(fill, out)),
    LAYOUT(add, 3, AT(add, out), AT(add, a), AT(add, b)),
    LAYOUT(mul, 3, AT(mul, out), AT(mul, a), AT(mul, b)),
    LAYOUT(mul_add, 4, AT(mul_add, out), AT(mul_add, a), AT(mul_add, b), AT(mul_add, c)),
    LAYOUT(silu, 2, AT(silu, out), AT(silu, x)),
    LAYOUT(gelu, 2, AT(gelu, out), AT(gelu, x)),
    LAYOUT(add_gelu, 3, AT(add_gelu, out), AT(add_gelu, x), AT(add_gelu, bias)),
    LAYOUT(swiglu, 3, AT(swiglu, out), AT(swiglu, gate), AT(swiglu, up)),
    LAYOUT(rmsnorm, 3, AT(rmsnorm, out), AT(rmsnorm, x), AT(rmsnorm, weight)),
    LAYOUT(add_rmsnorm, 4, AT(add_rmsnorm, out), AT(add_rmsnorm, residual), AT(add_rmsnorm, x),
           AT(add_rmsnorm, weight)),
    LAYOUT(layernorm, 4, AT(layernorm, out), AT(layernorm, x), AT(layernorm, weight),
           AT(layernorm, bias)),
    LAYOUT(softmax, 2, AT(softmax, out), AT(softmax, x)),
    [GLLMK_OP_rope] = {AT(rope, inv_freq), 4,
                       {AT(rope, out), AT(rope, x), AT(rope, positions), AT(rope, inv_freq)}},
    LAYOUT(embedding, 3, AT(embedding, out), AT(embedding, table), AT(embedding, ids)),
    [GLLMK_OP_matmul] = {AT(matmul, flags), 9,
                         {AT(matmul, out), AT(matmul, a), AT(matmul, b), AT(matmul, bias),
                          AT(matmul, rope_positions), AT(matmul, rope_inv_freq),
                          AT(matmul, kv_k_cache), AT(matmul, kv_v_cache), AT(matmul, kv_slots)}},
    LAYOUT(attention, 6, AT(attention, out), AT(attention, q), AT(attention, k),
           AT(attention, v), AT(attention, kv_lens), AT(attention, lse)),
    LAYOUT(kv_append, 5, AT(kv_append, k_cache), AT(kv_append, v_cache), AT(kv_append, k),
           AT(kv_append, v), AT(kv_append, slots)),
    LAYOUT(paged_attention, 7, AT(paged_attention, out), AT(paged_attention, q),
           AT(paged_attention, k_cache), AT(paged_attention, v_cache),
           AT(paged_attention, block_table), AT(paged_attention, q_starts),
           AT(paged_attention, seq_lens)),
    LAYOUT(argmax, 2, AT(argmax, out), AT(argmax, logits)),
    LAYOUT(sample, 2, AT(sample, out), AT(sample, logits)),
};

static const size_t op_sizes[GLLMK_OP_COUNT] = {
#define GLLMK_OP(name) [GLLMK_OP_##name] = sizeof(gllmk_##name##_args),
#include "gllmk/gllmk_ops.def"
};

/* Fields appended after ABI 2.0: a plugin built before `minor` gets them as
 * zero. A `needed` field changes the result when set, so zero is no safe
 * default for it: a call that sets it fails on such a plugin instead. */
#define EXTENSION(op, field, minor, needed) \
  {GLLMK_OP_##op, AT(op, field), sizeof(((gllmk_##op##_args *)0)->field), minor, needed, #field}
static const struct {
  gllmk_op op;
  size_t offset, size;
  uint32_t minor;
  bool needed;
  const char *name;
} extensions[] = {
    EXTENSION(matmul, flags, 1, false),
    EXTENSION(rope, inv_freq, 2, true),
    EXTENSION(matmul, a_norm, 4, true),
    EXTENSION(matmul, a_norm_eps, 4, false),
    EXTENSION(matmul, rope_dim, 5, true),
    EXTENSION(matmul, rope_head_dim, 5, false),
    EXTENSION(matmul, rope_columns, 5, false),
    EXTENSION(matmul, rope_theta, 5, false),
    EXTENSION(matmul, rope_positions, 5, false),
    EXTENSION(matmul, rope_inv_freq, 5, false),
    EXTENSION(matmul, glu, 6, true),
    EXTENSION(matmul, kv_first, 6, false),
    EXTENSION(matmul, kv_k_cache, 6, true),
    EXTENSION(matmul, kv_v_cache, 6, false),
    EXTENSION(matmul, kv_slots, 6, false),
};

size_t core_args_size(gllmk_op op) { return op_sizes[op]; }

static const char *op_fn(gllmk_op op) {
  static const char *const names[GLLMK_OP_COUNT] = {
#define GLLMK_OP(name) [GLLMK_OP_##name] = "gllmk_" #name,
#include "gllmk/gllmk_ops.def"
  };
  return names[op];
}

static const gllmk_tensor **tensor_field(core_args *args, const op_layout *layout, uint32_t i) {
  return (const gllmk_tensor **)(void *)((char *)args + layout->tensor_offsets[i]);
}

void core_call_args(const core_call *call, const gllmk_tensor *tensors, core_args *out_args) {
  const op_layout *layout = &layouts[call->op];
  *out_args = call->args;
  for (uint32_t i = 0; i < layout->tensor_count; i++)
    *tensor_field(out_args, layout, i) = (call->present >> i & 1u) ? &tensors[i] : NULL;
}

/* A size below this libgllmk's struct must be the struct's size in some
 * ABI minor (2.0, or just before a field a later minor appended): any other
 * would cut a field, e.g. half of a pointer. Larger sizes come from newer
 * headers; their extra bytes are checked to be zero. */
static bool is_version_size(gllmk_op op, size_t args_size) {
  if (args_size >= op_sizes[op] || args_size == layouts[op].size_v2_0) return true;
  for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++)
    if (extensions[i].op == op && extensions[i].offset == args_size) return true;
  return false;
}

/* Copies the caller's struct and its tensors into `call` (zero-filling
 * fields the caller's header did not have), then validates the copy. */
static gllmk_status prepare_call(const char *fn, const core_context *context, gllmk_op op,
                                 const void *args, size_t args_size, core_call *call) {
  const op_layout *layout = &layouts[op];
  if (args == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: args is NULL", fn);
  if (args_size < layout->size_v2_0)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: args_size=%zu is below the %zu bytes of its ABI 2.0 struct", fn,
                     args_size, layout->size_v2_0);
  if (!core_tail_is_zero(args, op_sizes[op], args_size))
    return core_fail(GLLMK_ERR_UNSUPPORTED, "%s: args set a field newer than this libgllmk knows",
                     fn);
  if (!is_version_size(op, args_size))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: args_size=%zu ends inside a field: no version of its struct has that size",
                     fn, args_size);
  memset(call, 0, sizeof *call);
  call->op = op;
  memcpy(&call->args, args, args_size < op_sizes[op] ? args_size : op_sizes[op]);
  for (uint32_t i = 0; i < layout->tensor_count; i++) {
    const gllmk_tensor *t = *tensor_field(&call->args, layout, i);
    if (t == NULL) continue;
    call->tensors[i] = *t;
    call->present |= 1u << i;
  }
  core_args copy;
  core_call_args(call, call->tensors, &copy);
  return core_validate(fn, context, op, &copy);
}

/* The call's tensors with each buffer handle replaced by its live record. */
static gllmk_status resolve_tensors(const char *fn, const core_call *call,
                                    gllmk_tensor *out_tensors) {
  for (uint32_t i = 0; i < layouts[call->op].tensor_count; i++) {
    if (!(call->present >> i & 1u)) continue;
    core_buffer *buffer = core_buffer_get(call->tensors[i].buffer);
    if (buffer == NULL)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s uses a buffer that was freed", fn,
                       op_fn(call->op));
    out_tensors[i] = call->tensors[i];
    out_tensors[i].buffer = (gllmk_buffer *)(void *)buffer;
  }
  return GLLMK_OK;
}

/* The struct as the plugin's ABI minor knows it, or a refusal where the call
 * needs a field that minor lacks. */
static gllmk_status fit_to_plugin(const char *fn, const core_context *context, gllmk_op op,
                                  core_args *args) {
  uint32_t minor = context->plugin->abi_version & 0xffffu;
  for (size_t i = 0; i < sizeof extensions / sizeof extensions[0]; i++) {
    if (extensions[i].op != op || extensions[i].minor <= minor) continue;
    char *field = (char *)args + extensions[i].offset;
    if (extensions[i].needed && !core_tail_is_zero(field, 0, extensions[i].size))
      return core_fail(GLLMK_ERR_UNSUPPORTED,
                       "%s: %s needs plugin ABI %d.%u, the %s plugin has %d.%u", fn,
                       extensions[i].name, GLLMK_PLUGIN_ABI_MAJOR, extensions[i].minor,
                       context->backend, GLLMK_PLUGIN_ABI_MAJOR, minor);
    memset(field, 0, extensions[i].size);
  }
  return GLLMK_OK;
}

typedef gllmk_status (*plugin_op_fn)(gllmk_plugin_device *, const void *);

/* Whether the plugin runs this (resolved) call: its slot, then its answer. */
static gllmk_status plugin_supports(const char *fn, const core_context *context, gllmk_op op,
                                    const core_args *resolved) {
  if (core_plugin_op(context->plugin, op) == NULL)
    return core_fail(GLLMK_ERR_UNSUPPORTED, "%s: the %s backend does not implement it", fn,
                     context->backend);
  gllmk_status (*supports)(gllmk_plugin_device *, gllmk_op, const void *) =
      CORE_PLUGIN_FN(context->plugin, supports);
  if (supports == NULL) return GLLMK_OK;
  gllmk_status status = supports(context->device, op, resolved);
  if (status == GLLMK_OK) return GLLMK_OK;
  char why[512];
  core_format(why, sizeof why, "%s", gllmk_last_error());
  return core_fail(status, "%s: not on the %s backend: %s", fn, context->backend, why);
}

static gllmk_status resolved_args(const char *fn, const core_context *context,
                                  const core_call *call, gllmk_tensor *tensors,
                                  core_args *out_args) {
  CORE_TRY(resolve_tensors(fn, call, tensors));
  core_call_args(call, tensors, out_args);
  return fit_to_plugin(fn, context, call->op, out_args);
}

/* Hands a call whose arguments are already resolved to the plugin. */
static gllmk_status run_resolved(core_context *context, const core_call *call,
                                 const core_args *args) {
  plugin_op_fn impl;
  const void *slot = core_plugin_op(context->plugin, call->op);
  memcpy(&impl, &slot, sizeof impl);
  if (context->timing_callback == NULL) return impl(context->device, args);
  uint32_t timed;
  CORE_TRY(core_timing_begin(context, call, &timed));
  gllmk_status status = impl(context->device, args);
  core_timing_end(context, timed);
  return status;
}

gllmk_status core_call_run(const char *fn, core_context *context, const core_call *call) {
  gllmk_tensor tensors[CORE_MAX_OP_TENSORS];
  core_args args;
  CORE_TRY(resolved_args(fn, context, call, tensors, &args));
  return run_resolved(context, call, &args);
}

/* Appends a validated call to the recording in progress. */
static gllmk_status record_call(const char *fn, core_recording *recording, const core_call *call) {
  if (core_recording_reserve(recording) != GLLMK_OK)
    return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory recording", fn);
  recording->calls[recording->count++] = *call;
  return GLLMK_OK;
}

/* Everything before running: the context, the struct at the caller's size,
 * validation, the arguments as the plugin gets them (`tensors` holds the
 * resolved tensors `resolved` points at), the plugin's capability answer. */
static gllmk_status checked_call(const char *fn, const gllmk_context *handle, gllmk_op op,
                                 const void *args, size_t args_size, core_context **out_context,
                                 core_call *call, gllmk_tensor *tensors, core_args *resolved) {
  CORE_TRY(core_context_arg(fn, handle, out_context));
  if ((unsigned)op >= GLLMK_OP_COUNT)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: op=%d is not a gllmk_op", fn, (int)op);
  fn = op_fn(op);
  CORE_TRY(prepare_call(fn, *out_context, op, args, args_size, call));
  CORE_TRY(resolved_args(fn, *out_context, call, tensors, resolved));
  return plugin_supports(fn, *out_context, op, resolved);
}

gllmk_status gllmk_op_run(gllmk_context *handle, gllmk_op op, const void *args, size_t args_size) {
  core_clear_error();
  core_context *context;
  core_call call;
  gllmk_tensor tensors[CORE_MAX_OP_TENSORS];
  core_args resolved;
  CORE_TRY(checked_call((unsigned)op < GLLMK_OP_COUNT ? op_fn(op) : "gllmk_op_run", handle, op,
                        args, args_size, &context, &call, tensors, &resolved));
  if (context->recording) return record_call(op_fn(op), context->recording, &call);
  return run_resolved(context, &call, &resolved);
}

gllmk_status gllmk_op_supported(gllmk_context *handle, gllmk_op op, const void *args,
                                size_t args_size) {
  core_clear_error();
  core_context *context;
  core_call call;
  gllmk_tensor tensors[CORE_MAX_OP_TENSORS];
  core_args resolved;
  return checked_call("gllmk_op_supported", handle, op, args, args_size, &context, &call, tensors,
                      &resolved);
}
