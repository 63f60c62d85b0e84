/*
 * bad_input.c - every op and the buffer and context calls with bad
 * arguments: each must fail with the documented status, leave a message
 * naming the call in gllmk_last_error(), and write no byte anywhere.
 *
 * For each op a builder makes one valid call (checked to succeed first),
 * with every tensor in a buffer of its own, and a twin buffer of the same
 * size in a second context. The harness then breaks one thing at a time:
 * each tensor in turn (NULL, NULL buffer, dtype, ndim, shape, strides,
 * offset, overflow, other context, overlap with an output) plus the op's
 * own scalar and shape rules, and checks the outcome.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

#define BUFFER_BYTES 4096 /* every tensor, mutated or not, fits with room */
#define MAX_SLOTS 8
#define MAX_EXTRAS 12

#define EXPECT_INVALID (1u << GLLMK_ERR_INVALID_ARGUMENT)
#define EXPECT_OVERFLOW (EXPECT_INVALID | (1u << GLLMK_ERR_OVERFLOW))
/* The dtype of every float tensor of a valid call. */
#define CALL_DTYPE GLLMK_F16

/* ------------------------------------------------------------ a case */

typedef enum slot_kind {
  KIND_FLOAT,     /* the call's float dtype */
  KIND_I32,       /* ids, positions, slots, tables, tokens */
  KIND_F32,       /* always f32 (attention's lse) */
  KIND_ANY_FLOAT, /* any float dtype (copy; logits, the only float tensor) */
  KIND_ANY,       /* any dtype (fill) */
} slot_kind;

enum slot_flags {
  SLOT_OUTPUT = 1 << 0,     /* written by the op */
  SLOT_OPTIONAL = 1 << 1,   /* may be NULL */
  SLOT_FREE_LAST = 1 << 2,  /* another last dim keeps the call valid */
  SLOT_ROWS = 1 << 3,       /* leading dims must flatten into rows */
  SLOT_CONTIGUOUS = 1 << 4, /* must be dense */
  SLOT_ANY_STRIDES = 1 << 5, /* even the last dim may be strided (copy's src) */
  SLOT_ANY_SHAPE = 1 << 6    /* any shape keeps the call valid (fill's out) */
};

typedef struct slot {
  const char *name;
  const gllmk_tensor **field; /* the pointer inside the args struct */
  gllmk_tensor valid;
  slot_kind kind;
  unsigned flags;
  gllmk_buffer *buffer, *twin; /* twin: same size, the other context */
} slot;

typedef enum extra_type { EXTRA_I32, EXTRA_F32, EXTRA_SHAPE, EXTRA_ALIAS } extra_type;

/* A rule of one op: a scalar set to a bad value, a dimension of some
 * tensors changed (dense strides recomputed), or `second` made the very
 * same view as `first` where the op does not allow it. */
typedef struct extra {
  const char *what;
  char text[96]; /* `what` of an EXTRA_ALIAS */
  extra_type type;
  size_t offset; /* of the scalar in the args struct */
  double value;
  int without; /* 1 + the optional slot left NULL for the rule (0: none) */
  int slots[4], dims[4], count; /* EXTRA_SHAPE: dims[i] of slots[i] ... */
  int64_t sizes[4];             /* ... becomes sizes[i] */
  int first, second;            /* EXTRA_ALIAS */
} extra;

typedef struct bad_case {
  gllmk_op op;
  char fn[64]; /* "gllmk_<op>": every message must name it */
  union {
#define GLLMK_OP(name) gllmk_##name##_args name;
#include "gllmk/gllmk_ops.def"
  } args;
  slot slots[MAX_SLOTS];
  int slot_count;
  extra extras[MAX_EXTRAS];
  int extra_count;
} bad_case;

/* The running test. */
static struct {
  gllmk_context *ctx, *other;
  bad_case c;
  gllmk_tensor work[MAX_SLOTS]; /* what the args point at during a call */
  int failures;
} T;

static void must(gllmk_status status, const char *what) {
  if (status != GLLMK_OK)
    ck_abort_msg("%s: %s failed: %s: %s", T.c.fn, what, gllmk_status_string(status),
                 gllmk_last_error());
}

static void report(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "FAIL %s: ", T.c.fn);
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  va_end(args);
  T.failures++;
}

/* ----------------------------------------------------------- building */

/* Adds a tensor of `shape` in a fresh buffer (and its twin in the other
 * context), holding zeros or `ints`, and points the args field at it. */
static void add_slot(const gllmk_tensor **field, const char *name, slot_kind kind,
                     unsigned flags, int32_t ndim, const int64_t *shape, const int32_t *ints) {
  bad_case *c = &T.c;
  ck_assert_int_lt(c->slot_count, MAX_SLOTS);
  slot *s = &c->slots[c->slot_count++];
  s->name = name;
  s->field = field;
  s->kind = kind;
  s->flags = flags;
  gllmk_dtype dtype = kind == KIND_I32 ? GLLMK_I32 : kind == KIND_F32 ? GLLMK_F32 : CALL_DTYPE;
  must(gllmk_buffer_alloc(T.ctx, BUFFER_BYTES, &s->buffer), "gllmk_buffer_alloc");
  must(gllmk_buffer_alloc(T.other, BUFFER_BYTES, &s->twin), "gllmk_buffer_alloc");
  unsigned char content[BUFFER_BYTES];
  memset(content, (flags & SLOT_OUTPUT) ? 0xA5 : 0, sizeof content);
  must(gllmk_tensor_make(s->buffer, 0, dtype, ndim, shape, &s->valid), "gllmk_tensor_make");
  if (ints) memcpy(content, ints, (size_t)gllmk_tensor_numel(&s->valid) * sizeof *ints);
  must(gllmk_buffer_write(s->buffer, 0, content, sizeof content), "gllmk_buffer_write");
  must(gllmk_buffer_write(s->twin, 0, content, sizeof content), "gllmk_buffer_write");
  *field = &s->valid;
}
/* `field` is written a->name; its name is what follows "a->". */
#define SLOT(field, kind, flags, ints, ...)                                                 \
  add_slot(&(field), &#field[3], kind, flags,                                                 \
           (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                   \
           (const int64_t[]){__VA_ARGS__}, ints)

static int slot_index(const gllmk_tensor **field) {
  for (int i = 0; i < T.c.slot_count; i++)
    if (T.c.slots[i].field == field) return i;
  ck_abort_msg("%s: no such slot", T.c.fn);
  return -1;
}

static extra *add_extra(const char *what, extra_type type) {
  ck_assert_int_lt(T.c.extra_count, MAX_EXTRAS);
  extra *e = &T.c.extras[T.c.extra_count++];
  memset(e, 0, sizeof *e);
  e->what = what;
  e->type = type;
  return e;
}

static void bad_scalar(const char *what, extra_type type, size_t offset, double value) {
  extra *e = add_extra(what, type);
  e->offset = offset;
  e->value = value;
}
#define BAD_I32(op, member, v) \
  bad_scalar(#member "=" #v, EXTRA_I32, offsetof(gllmk_##op##_args, member), v)
#define BAD_F32(op, member, v) \
  bad_scalar(#member "=" #v, EXTRA_F32, offsetof(gllmk_##op##_args, member), v)

/* An F32 scalar that is bad while the optional tensor `field` is NULL (the
 * rule leaves it NULL). */
static void bad_scalar_without(const char *what, size_t offset, double value,
                               const gllmk_tensor **field) {
  bad_scalar(what, EXTRA_F32, offset, value);
  T.c.extras[T.c.extra_count - 1].without = slot_index(field) + 1;
}
#define BAD_F32_WITHOUT(op, member, v, field)                                            \
  bad_scalar_without(#member "=" #v " without " #field, offsetof(gllmk_##op##_args, member), \
                     v, &(field))

/* Sets dim `dims[i]` of tensor `slots[i]` to `sizes[i]` for i < count. */
static void bad_shape(const char *what, int count, const gllmk_tensor **const *fields,
                      const int *dims, const int64_t *sizes) {
  extra *e = add_extra(what, EXTRA_SHAPE);
  e->count = count;
  for (int i = 0; i < count; i++) {
    e->slots[i] = slot_index(fields[i]);
    e->dims[i] = dims[i];
    e->sizes[i] = sizes[i];
  }
}

static void bad_alias(const gllmk_tensor **output, const gllmk_tensor **input) {
  extra *e = add_extra("", EXTRA_ALIAS);
  e->first = slot_index(output);
  e->second = slot_index(input);
  snprintf(e->text, sizeof e->text, "%s is the same view as %s", T.c.slots[e->second].name,
           T.c.slots[e->first].name);
  e->what = e->text;
}

/* ----------------------------------------------------------- builders */

#define ROWS_OUT (SLOT_OUTPUT | SLOT_ROWS)

static void build_copy(gllmk_copy_args *a) {
  SLOT(a->out, KIND_ANY_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->src, KIND_ANY_FLOAT, SLOT_ANY_STRIDES, NULL, 2, 3, 8);
  bad_alias(&a->out, &a->src);
}

static void build_fill(gllmk_fill_args *a) {
  a->value = 1.5f;
  SLOT(a->out, KIND_ANY, ROWS_OUT | SLOT_ANY_SHAPE, NULL, 2, 3, 8);
}

static void build_binary(gllmk_binary_args *a) {
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->a, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->b, KIND_FLOAT, SLOT_ROWS, NULL, 8);
}
static void build_add(gllmk_add_args *a) { build_binary(a); }
static void build_mul(gllmk_mul_args *a) { build_binary(a); }

static void build_mul_add(gllmk_mul_add_args *a) {
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->a, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->b, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->c, KIND_FLOAT, SLOT_ROWS, NULL, 8);
}

static void build_silu(gllmk_silu_args *a) {
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
}

static void build_gelu(gllmk_gelu_args *a) {
  a->kind = GLLMK_GELU_TANH;
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  BAD_I32(gelu, kind, 2);
  BAD_I32(gelu, kind, -1);
}

static void build_add_gelu(gllmk_add_gelu_args *a) {
  a->kind = GLLMK_GELU_ERF;
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->bias, KIND_FLOAT, SLOT_ROWS, NULL, 8);
  BAD_I32(add_gelu, kind, 7);
}

static void build_swiglu(gllmk_swiglu_args *a) {
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->gate, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->up, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  /* In place allowed (out = gate or out = up): no aliasing case. */
}

static void build_rmsnorm(gllmk_rmsnorm_args *a) {
  a->eps = 1e-5f;
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->weight, KIND_FLOAT, SLOT_ROWS, NULL, 8);
}

static void build_add_rmsnorm(gllmk_add_rmsnorm_args *a) {
  a->eps = 1e-5f;
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->residual, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->weight, KIND_FLOAT, SLOT_ROWS, NULL, 8);
  bad_alias(&a->out, &a->residual);
  bad_alias(&a->residual, &a->x);
  /* Not in place (gllmk.h, docs/api.md): out is written from residual, which
   * is updated from x, and no backend promises that order per element. */
  bad_alias(&a->out, &a->x);
}

static void build_layernorm(gllmk_layernorm_args *a) {
  a->eps = 1e-5f;
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
  SLOT(a->weight, KIND_FLOAT, SLOT_ROWS, NULL, 8);
  SLOT(a->bias, KIND_FLOAT, SLOT_ROWS | SLOT_OPTIONAL, NULL, 8);
}

static void build_softmax(gllmk_softmax_args *a) {
  a->scale = 1.0f;
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, SLOT_ROWS, NULL, 2, 3, 8);
}

static void build_rope(gllmk_rope_args *a) {
  static const int32_t positions[] = {0, 7};
  a->theta = 10000.0f;
  a->rotary_dim = 8;
  a->style = GLLMK_ROPE_NEOX;
  SLOT(a->out, KIND_FLOAT, SLOT_OUTPUT, NULL, 2, 3, 8);
  SLOT(a->x, KIND_FLOAT, 0, NULL, 2, 3, 8);
  SLOT(a->positions, KIND_I32, 0, positions, 2);
  /* ABI 2.2: the caller's frequencies, F32 [rotary_dim / 2] and dense. */
  SLOT(a->inv_freq, KIND_F32, SLOT_OPTIONAL | SLOT_CONTIGUOUS, NULL, 4);
  BAD_I32(rope, rotary_dim, 3);
  BAD_I32(rope, rotary_dim, 10);
  BAD_I32(rope, rotary_dim, -2);
  BAD_I32(rope, rotary_dim, 4); /* inv_freq has 4 entries, rotary_dim 4 takes 2 */
  BAD_I32(rope, style, 2);
  /* theta matters only without inv_freq (with it, 0 is valid). */
  BAD_F32_WITHOUT(rope, theta, 0.0, a->inv_freq);
  BAD_F32_WITHOUT(rope, theta, 1.0, a->inv_freq);
  BAD_F32_WITHOUT(rope, theta, NAN, a->inv_freq);
}

static void build_embedding(gllmk_embedding_args *a) {
  static const int32_t ids[] = {0, 4, 2, 1};
  SLOT(a->out, KIND_FLOAT, ROWS_OUT, NULL, 2, 2, 8);
  SLOT(a->table, KIND_FLOAT, SLOT_ROWS, NULL, 5, 8);
  SLOT(a->ids, KIND_I32, SLOT_CONTIGUOUS, ids, 2, 2);
}

static void build_matmul(gllmk_matmul_args *a) {
  a->alpha = 1.0f;
  a->beta = 0.5f;
  a->b_layout = GLLMK_B_NK;
  /* M = N = K so that out = a is the very same view. */
  SLOT(a->out, KIND_FLOAT, SLOT_OUTPUT, NULL, 2, 8, 8);
  SLOT(a->a, KIND_FLOAT, 0, NULL, 2, 8, 8);
  SLOT(a->b, KIND_FLOAT, 0, NULL, 2, 8, 8); /* batched b */
  SLOT(a->bias, KIND_FLOAT, SLOT_OPTIONAL, NULL, 8);
  BAD_I32(matmul, b_layout, 2);
  BAD_I32(matmul, a_norm, 2);
  BAD_I32(matmul, a_norm, -1);
  BAD_I32(matmul, rope_dim, 2); /* rope with beta 0.5 and no rope_positions */
  BAD_I32(matmul, rope_dim, -2);
  BAD_I32(matmul, glu, 1); /* glu with beta 0.5 and out [M, N], not [M, N / 2] */
  BAD_I32(matmul, glu, 2);
  BAD_I32(matmul, glu, -1);
  BAD_I32(matmul, kv_first, 4); /* kv_first without kv_k_cache */
  bad_alias(&a->out, &a->a);
  const gllmk_tensor **b[] = {&a->b};
  bad_shape("b with batch 3, a with batch 2", 1, b, (const int[]){0}, (const int64_t[]){3});
}

static void build_attention(gllmk_attention_args *a) {
  static const int32_t kv_lens[] = {5, 3};
  a->scale = 0.35f;
  a->causal = 1;
  SLOT(a->out, KIND_FLOAT, SLOT_OUTPUT, NULL, 2, 3, 4, 8);
  SLOT(a->q, KIND_FLOAT, 0, NULL, 2, 3, 4, 8);
  SLOT(a->k, KIND_FLOAT, 0, NULL, 2, 5, 2, 8);
  SLOT(a->v, KIND_FLOAT, 0, NULL, 2, 5, 2, 8);
  SLOT(a->kv_lens, KIND_I32, SLOT_OPTIONAL | SLOT_CONTIGUOUS, kv_lens, 2);
  SLOT(a->lse, KIND_F32, SLOT_OUTPUT | SLOT_OPTIONAL | SLOT_CONTIGUOUS, NULL, 2, 4, 3);
  const gllmk_tensor **all[] = {&a->out, &a->q, &a->k, &a->v};
  const int dim3[] = {3, 3, 3, 3}, dim2[] = {2, 2}, dim0[] = {0, 0};
  bad_shape("head_dim=12 (not a multiple of 8)", 4, all, dim3, (const int64_t[]){12, 12, 12, 12});
  bad_shape("head_dim=264 (above 256)", 4, all, dim3, (const int64_t[]){264, 264, 264, 264});
  bad_shape("3 kv heads for 4 query heads", 2, all + 2, dim2, (const int64_t[]){3, 3});
  bad_shape("k and v batch 3, q batch 2", 2, all + 2, dim0, (const int64_t[]){3, 3});
  bad_alias(&a->out, &a->q);
}

static void build_kv_append(gllmk_kv_append_args *a) {
  static const int32_t slots[] = {0, 5, 9};
  SLOT(a->k_cache, KIND_FLOAT, SLOT_OUTPUT | SLOT_CONTIGUOUS, NULL, 4, 4, 2, 8);
  SLOT(a->v_cache, KIND_FLOAT, SLOT_OUTPUT | SLOT_CONTIGUOUS, NULL, 4, 4, 2, 8);
  SLOT(a->k, KIND_FLOAT, 0, NULL, 3, 2, 8);
  SLOT(a->v, KIND_FLOAT, 0, NULL, 3, 2, 8);
  SLOT(a->slots, KIND_I32, SLOT_CONTIGUOUS, slots, 3);
  const gllmk_tensor **kv[] = {&a->k, &a->v};
  bad_shape("k and v with 3 heads, caches with 2", 2, kv, (const int[]){1, 1},
            (const int64_t[]){3, 3});
  bad_alias(&a->k_cache, &a->v_cache);
}

static void build_paged_attention(gllmk_paged_attention_args *a) {
  /* Sequence 0: 4 tokens, 1 new; sequence 1: 5 tokens, 2 new; blocks of 4. */
  static const int32_t table[] = {0, 1, 2, 3}, q_starts[] = {0, 1, 3}, seq_lens[] = {4, 5};
  a->scale = 0.35f;
  SLOT(a->out, KIND_FLOAT, SLOT_OUTPUT, NULL, 3, 4, 8);
  SLOT(a->q, KIND_FLOAT, 0, NULL, 3, 4, 8);
  SLOT(a->k_cache, KIND_FLOAT, SLOT_CONTIGUOUS, NULL, 4, 4, 2, 8);
  SLOT(a->v_cache, KIND_FLOAT, SLOT_CONTIGUOUS, NULL, 4, 4, 2, 8);
  SLOT(a->block_table, KIND_I32, SLOT_CONTIGUOUS | SLOT_FREE_LAST, table, 2, 2);
  SLOT(a->q_starts, KIND_I32, SLOT_CONTIGUOUS, q_starts, 3);
  SLOT(a->seq_lens, KIND_I32, SLOT_CONTIGUOUS, seq_lens, 2);
  const gllmk_tensor **all[] = {&a->out, &a->q, &a->k_cache, &a->v_cache};
  bad_shape("3 query heads for 2 kv heads", 2, all, (const int[]){1, 1}, (const int64_t[]){3, 3});
  bad_shape("head_dim=12", 4, all, (const int[]){2, 2, 3, 3},
            (const int64_t[]){12, 12, 12, 12});
  bad_alias(&a->out, &a->q);
}

static void build_argmax(gllmk_argmax_args *a) {
  SLOT(a->out, KIND_I32, SLOT_OUTPUT | SLOT_CONTIGUOUS, NULL, 2, 3);
  SLOT(a->logits, KIND_ANY_FLOAT, SLOT_ROWS | SLOT_FREE_LAST, NULL, 2, 3, 8);
}

static void build_sample(gllmk_sample_args *a) {
  a->temperature = 1.0f;
  a->top_p = 1.0f;
  a->seed = 1;
  SLOT(a->out, KIND_I32, SLOT_OUTPUT | SLOT_CONTIGUOUS, NULL, 2, 3);
  SLOT(a->logits, KIND_ANY_FLOAT, SLOT_ROWS | SLOT_FREE_LAST, NULL, 2, 3, 8);
  BAD_F32(sample, temperature, -1.0);
  BAD_I32(sample, top_k, -1);
  BAD_F32(sample, top_p, 1.5);
  BAD_F32(sample, min_p, -0.5);
  BAD_F32(sample, min_p, 1.5);
}

/* ------------------------------------------------------------ calling */

#define GLLMK_OP(name)                                                              \
  static gllmk_status call_##name(gllmk_context *ctx, const void *args) {           \
    return gllmk_##name(ctx, (const gllmk_##name##_args *)args);                    \
  }                                                                                 \
  static void build_any_##name(void *args) { build_##name((gllmk_##name##_args *)args); }
#include "gllmk/gllmk_ops.def"

/* One entry per op of gllmk_ops.def: an op without a builder here does not
 * compile. */
static gllmk_status (*const callers[GLLMK_OP_COUNT])(gllmk_context *, const void *) = {
#define GLLMK_OP(name) call_##name,
#include "gllmk/gllmk_ops.def"
};
static void (*const builders[GLLMK_OP_COUNT])(void *) = {
#define GLLMK_OP(name) build_any_##name,
#include "gllmk/gllmk_ops.def"
};

/* Points every args field at a fresh copy of its valid tensor. */
static void reset_work(void) {
  for (int i = 0; i < T.c.slot_count; i++) {
    T.work[i] = T.c.slots[i].valid;
    *T.c.slots[i].field = &T.work[i];
  }
}

/* Every buffer of the case, both contexts. */
static void snapshot(unsigned char (*out)[BUFFER_BYTES]) {
  for (int i = 0; i < T.c.slot_count; i++) {
    must(gllmk_buffer_read(T.c.slots[i].buffer, 0, out[2 * i], BUFFER_BYTES), "gllmk_buffer_read");
    must(gllmk_buffer_read(T.c.slots[i].twin, 0, out[2 * i + 1], BUFFER_BYTES), "gllmk_buffer_read");
  }
}

/* Calls the op as the args are now and checks the rejection. */
static void expect_rejected(gllmk_context *ctx, const void *args, const char *what,
                            unsigned expected) {
  static unsigned char before[2 * MAX_SLOTS][BUFFER_BYTES], after[2 * MAX_SLOTS][BUFFER_BYTES];
  snapshot(before);
  gllmk_status status = callers[T.c.op](ctx, args);
  char message[1024];
  snprintf(message, sizeof message, "%s", gllmk_last_error());
  if (status == GLLMK_OK) (void)gllmk_synchronize(T.ctx);
  snapshot(after);
  if (!((1u << status) & expected))
    report("%s: returned %s (%s), expected %s", what, gllmk_status_string(status), message,
           expected == EXPECT_INVALID ? "GLLMK_ERR_INVALID_ARGUMENT"
                                      : "GLLMK_ERR_INVALID_ARGUMENT or GLLMK_ERR_OVERFLOW");
  else if (!test_contains(message, T.c.fn))
    report("%s: the message \"%s\" does not name %s", what, message, T.c.fn);
  for (int i = 0; i < 2 * T.c.slot_count; i++)
    if (memcmp(before[i], after[i], BUFFER_BYTES) != 0) {
      report("%s: the buffer of %s%s changed although the call failed", what,
             T.c.slots[i / 2].name, i % 2 ? " (twin in the other context)" : "");
      break;
    }
}

static void expect_tensor_rejected(int index, const char *change, unsigned expected) {
  char what[160];
  snprintf(what, sizeof what, "%s: %s", T.c.slots[index].name, change);
  expect_rejected(T.ctx, &T.c.args, what, expected);
  reset_work();
}

static void set_dense_strides(gllmk_tensor *t) {
  int64_t stride = 1;
  for (int32_t d = t->ndim - 1; d >= 0; d--) {
    t->strides[d] = stride;
    stride *= t->shape[d];
  }
}

/* Dtypes that must be refused for a tensor of this kind. */
static int wrong_dtypes(slot_kind kind, int32_t *out) {
  int n = 0;
  switch (kind) {
    case KIND_FLOAT: out[n++] = GLLMK_I32; out[n++] = GLLMK_F32; out[n++] = GLLMK_BF16; break;
    case KIND_I32: out[n++] = GLLMK_F32; out[n++] = GLLMK_F16; break;
    case KIND_F32: out[n++] = GLLMK_F16; out[n++] = GLLMK_I32; break;
    case KIND_ANY_FLOAT: out[n++] = GLLMK_I32; break;
    case KIND_ANY: break;
  }
  out[n++] = 99;
  out[n++] = -1;
  return n;
}

/* Every way to break tensor `i` on its own. */
static void break_tensor(int i) {
  const slot *s = &T.c.slots[i];
  gllmk_tensor *t = &T.work[i];
  int32_t last = t->ndim - 1;
  char change[96];

  if (!(s->flags & SLOT_OPTIONAL)) {
    *s->field = NULL;
    expect_tensor_rejected(i, "NULL", EXPECT_INVALID);
  }
  t->buffer = NULL;
  expect_tensor_rejected(i, "NULL buffer", EXPECT_INVALID);

  int32_t dtypes[8];
  int n = wrong_dtypes(s->kind, dtypes);
  for (int d = 0; d < n; d++) {
    t->dtype = dtypes[d];
    snprintf(change, sizeof change, "dtype=%d (%s)", dtypes[d],
             gllmk_dtype_name((gllmk_dtype)dtypes[d]) ? gllmk_dtype_name((gllmk_dtype)dtypes[d])
                                                      : "not a dtype");
    expect_tensor_rejected(i, change, EXPECT_INVALID);
  }

  const int32_t bad_ndims[] = {0, -1, GLLMK_MAX_DIMS + 1};
  for (int k = 0; k < 3; k++) {
    t->ndim = bad_ndims[k];
    snprintf(change, sizeof change, "ndim=%d", bad_ndims[k]);
    expect_tensor_rejected(i, change, EXPECT_INVALID);
  }
  t->shape[0] = 0;
  expect_tensor_rejected(i, "shape[0]=0", EXPECT_INVALID);
  t->shape[0] = -2;
  expect_tensor_rejected(i, "shape[0]=-2", EXPECT_INVALID);
  t->strides[0] = -t->strides[0];
  expect_tensor_rejected(i, "negative strides[0]", EXPECT_INVALID);
  if (!(s->flags & (SLOT_FREE_LAST | SLOT_ANY_SHAPE))) {
    t->shape[last] += 1;
    set_dense_strides(t);
    expect_tensor_rejected(i, "last dim one larger", EXPECT_INVALID);
  }
  if (!(s->flags & SLOT_ANY_SHAPE) && t->ndim < GLLMK_MAX_DIMS) {
    memmove(t->shape + 1, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
    t->shape[0] = 2;
    t->ndim++;
    set_dense_strides(t);
    expect_tensor_rejected(i, "an extra leading dim of 2", EXPECT_INVALID);
  }
  if (!(s->flags & SLOT_ANY_STRIDES)) {
    t->strides[last] = 2;
    expect_tensor_rejected(i, "last-dim stride 2", EXPECT_INVALID);
  }
  if ((s->flags & (SLOT_ROWS | SLOT_CONTIGUOUS)) && t->ndim >= 3) {
    int64_t tmp = t->strides[0];
    t->strides[0] = t->strides[1];
    t->strides[1] = tmp;
    expect_tensor_rejected(i, "leading dims transposed (not one row stride)", EXPECT_INVALID);
  }
  if ((s->flags & SLOT_CONTIGUOUS) && t->ndim == 2) {
    t->strides[0] *= 2;
    expect_tensor_rejected(i, "leading stride doubled (not dense)", EXPECT_INVALID);
  }

  uint64_t extent = gllmk_tensor_extent_bytes(&s->valid);
  t->offset = BUFFER_BYTES - extent + 4;
  expect_tensor_rejected(i, "view ends 4 bytes past its buffer", EXPECT_INVALID);
  t->offset = UINT64_MAX - 3;
  expect_tensor_rejected(i, "offset=UINT64_MAX-3", EXPECT_OVERFLOW);
  t->strides[0] = INT64_MAX / 2;
  expect_tensor_rejected(i, "strides[0]=INT64_MAX/2", EXPECT_OVERFLOW);
  t->shape[0] = INT64_MAX;
  expect_tensor_rejected(i, "shape[0]=INT64_MAX", EXPECT_OVERFLOW);
  t->shape[last] = INT64_MAX / 3;
  t->strides[last] = 1;
  expect_tensor_rejected(i, "last dim INT64_MAX/3", EXPECT_OVERFLOW);

  t->buffer = s->twin;
  expect_tensor_rejected(i, "buffer from another context", EXPECT_INVALID);
}

/* Every other tensor moved 4 bytes into each output's buffer. */
static void break_overlaps(void) {
  for (int o = 0; o < T.c.slot_count; o++) {
    if (!(T.c.slots[o].flags & SLOT_OUTPUT)) continue;
    for (int i = 0; i < T.c.slot_count; i++) {
      if (i == o) continue;
      T.work[i].buffer = T.work[o].buffer;
      T.work[i].offset = T.work[o].offset + 4;
      char change[96];
      snprintf(change, sizeof change, "partly overlaps output %s", T.c.slots[o].name);
      expect_tensor_rejected(i, change, EXPECT_INVALID);
    }
  }
}

static void apply_extra(const extra *e) {
  char *args = (char *)&T.c.args;
  if (e->without) *T.c.slots[e->without - 1].field = NULL;
  switch (e->type) {
    case EXTRA_I32: {
      int32_t v = (int32_t)e->value;
      memcpy(args + e->offset, &v, sizeof v);
      break;
    }
    case EXTRA_F32: {
      float v = (float)e->value;
      memcpy(args + e->offset, &v, sizeof v);
      break;
    }
    case EXTRA_SHAPE:
      for (int k = 0; k < e->count; k++) {
        gllmk_tensor *t = &T.work[e->slots[k]];
        t->shape[e->dims[k]] = e->sizes[k];
        set_dense_strides(t);
      }
      break;
    case EXTRA_ALIAS:
      T.work[e->second] = T.work[e->first];
      break;
  }
}

static void break_extras(void) {
  for (int x = 0; x < T.c.extra_count; x++) {
    const extra *e = &T.c.extras[x];
    size_t size = sizeof T.c.args;
    unsigned char saved[sizeof T.c.args];
    memcpy(saved, &T.c.args, size);
    apply_extra(e);
    expect_rejected(T.ctx, &T.c.args, e->what, EXPECT_INVALID);
    memcpy(&T.c.args, saved, size);
    reset_work();
  }
}

/* The valid call works, also without each optional tensor. A backend that
 * lacks the op still lets the core's checks be tested. */
static bool baseline_works(void) {
  reset_work();
  gllmk_status status = callers[T.c.op](T.ctx, &T.c.args);
  if (status == GLLMK_OK) status = gllmk_synchronize(T.ctx);
  if (status != GLLMK_OK) {
    report("the valid call failed: %s: %s", gllmk_status_string(status), gllmk_last_error());
    return status == GLLMK_ERR_UNSUPPORTED;
  }
  for (int i = 0; i < T.c.slot_count; i++) {
    if (!(T.c.slots[i].flags & SLOT_OPTIONAL)) continue;
    *T.c.slots[i].field = NULL;
    status = callers[T.c.op](T.ctx, &T.c.args);
    if (status == GLLMK_OK) status = gllmk_synchronize(T.ctx);
    if (status != GLLMK_OK)
      report("the valid call without optional %s failed: %s: %s", T.c.slots[i].name,
             gllmk_status_string(status), gllmk_last_error());
    reset_work();
  }
  return true;
}

/* --------------------------------------------------------------- tests */

static void setup(void) {
  memset(&T, 0, sizeof T);
  must(gllmk_context_create(NULL, &T.ctx), "gllmk_context_create");
  must(gllmk_context_create(NULL, &T.other), "gllmk_context_create");
}

static void teardown(void) {
  gllmk_context_destroy(T.ctx);
  gllmk_context_destroy(T.other);
  memset(&T, 0, sizeof T);
}

START_TEST(op_rejects_bad_input) {
  T.c.op = (gllmk_op)_i;
  snprintf(T.c.fn, sizeof T.c.fn, "gllmk_%s", gllmk_op_name(T.c.op));
  builders[_i](&T.c.args);
  if (baseline_works()) {
    expect_rejected(NULL, &T.c.args, "NULL context", EXPECT_INVALID);
    expect_rejected(T.ctx, NULL, "NULL args", EXPECT_INVALID);
    expect_rejected(T.other, &T.c.args, "context other than the buffers'", EXPECT_INVALID);
    for (int i = 0; i < T.c.slot_count; i++) break_tensor(i);
    break_overlaps();
    break_extras();
  }
  ck_assert_msg(T.failures == 0, "%s: %d bad input(s) handled wrongly (listed above)", T.c.fn,
                T.failures);
}
END_TEST

/* -------------------------------------------------------- buffer misuse */

static void expect_status(gllmk_status got, unsigned expected, const char *fn, const char *what) {
  if (!((1u << got) & expected))
    report("%s: %s: returned %s (%s)", fn, what, gllmk_status_string(got), gllmk_last_error());
  else if (!test_contains(gllmk_last_error(), fn))
    report("%s: %s: the message \"%s\" does not name it", fn, what, gllmk_last_error());
}

static void expect_bytes(gllmk_buffer *buffer, const unsigned char *expected, size_t size,
                         const char *what) {
  unsigned char now[256];
  must(gllmk_buffer_read(buffer, 0, now, size), "gllmk_buffer_read");
  if (memcmp(now, expected, size) != 0) report("%s: a failed call changed the buffer", what);
}

/* A buffer the backend cannot allocate: the message wraps the plugin's own
 * ("gllmk_buffer_alloc: N bytes: cpu: cannot allocate N bytes"), and must not
 * be garbled by formatting the message buffer into itself (issue 20). */
static void expect_allocation_failure_message(uint64_t size, gllmk_buffer **unused) {
  const char *fn = "gllmk_buffer_alloc";
  gllmk_status status = gllmk_buffer_alloc(T.ctx, size, unused);
  const char *message = gllmk_last_error();
  char prefix[96];
  snprintf(prefix, sizeof prefix, "%s: %llu bytes: ", fn, (unsigned long long)size);
  bool prefixed = strncmp(message, prefix, strlen(prefix)) == 0;
  const char *rest = prefixed ? message + strlen(prefix) : "";
  if (status == GLLMK_OK) {
    report("%s: %llu bytes succeeded", fn, (unsigned long long)size);
    gllmk_buffer_free(*unused);
    *unused = NULL;
  } else if (!prefixed || rest[0] == '\0' || test_contains(rest, fn)) {
    report("%s: %llu bytes: %s with the message \"%s\" (expected \"%s\" and the backend's "
           "reason)", fn, (unsigned long long)size, gllmk_status_string(status), message, prefix);
  }
}

START_TEST(buffer_misuse) {
  snprintf(T.c.fn, sizeof T.c.fn, "buffer calls");
  gllmk_buffer *a, *b, *elsewhere, *unused = NULL;
  unsigned char pattern[256], scratch[256];
  for (int i = 0; i < 256; i++) pattern[i] = (unsigned char)(i * 7 + 1);
  must(gllmk_buffer_alloc(T.ctx, 256, &a), "gllmk_buffer_alloc");
  must(gllmk_buffer_alloc(T.ctx, 256, &b), "gllmk_buffer_alloc");
  must(gllmk_buffer_alloc(T.other, 256, &elsewhere), "gllmk_buffer_alloc");
  must(gllmk_buffer_write(a, 0, pattern, 256), "gllmk_buffer_write");
  must(gllmk_buffer_write(b, 0, pattern, 256), "gllmk_buffer_write");

  const char *alloc = "gllmk_buffer_alloc";
  expect_status(gllmk_buffer_alloc(NULL, 16, &unused), EXPECT_INVALID, alloc, "NULL context");
  expect_status(gllmk_buffer_alloc(T.ctx, 16, NULL), EXPECT_INVALID, alloc, "NULL out");
  expect_status(gllmk_buffer_alloc(T.ctx, 0, &unused), EXPECT_INVALID, alloc, "size 0");
  expect_allocation_failure_message(1ull << 62, &unused);
  expect_status(gllmk_buffer_alloc(T.ctx, UINT64_MAX, &unused),
                EXPECT_OVERFLOW | (1u << GLLMK_ERR_OUT_OF_MEMORY), alloc, "size UINT64_MAX");
  ck_assert_ptr_null(unused);

  const char *write = "gllmk_buffer_write";
  expect_status(gllmk_buffer_write(NULL, 0, scratch, 1), EXPECT_INVALID, write, "NULL buffer");
  expect_status(gllmk_buffer_write(a, 0, NULL, 1), EXPECT_INVALID, write, "NULL src");
  expect_status(gllmk_buffer_write(a, 0, scratch, 0), EXPECT_INVALID, write, "size 0");
  expect_status(gllmk_buffer_write(a, 200, scratch, 57), EXPECT_INVALID, write, "past the end");
  expect_status(gllmk_buffer_write(a, 256, scratch, 1), EXPECT_INVALID, write, "offset = size");
  expect_status(gllmk_buffer_write(a, UINT64_MAX, scratch, 2), EXPECT_OVERFLOW, write,
                "offset + size overflows");
  expect_bytes(a, pattern, 256, write);

  const char *read = "gllmk_buffer_read";
  expect_status(gllmk_buffer_read(NULL, 0, scratch, 1), EXPECT_INVALID, read, "NULL buffer");
  expect_status(gllmk_buffer_read(a, 0, NULL, 1), EXPECT_INVALID, read, "NULL dst");
  expect_status(gllmk_buffer_read(a, 0, scratch, 0), EXPECT_INVALID, read, "size 0");
  expect_status(gllmk_buffer_read(a, 1, scratch, 256), EXPECT_INVALID, read, "past the end");
  expect_status(gllmk_buffer_read(a, UINT64_MAX - 1, scratch, 4), EXPECT_OVERFLOW, read,
                "offset + size overflows");

  const char *copy = "gllmk_buffer_copy";
  expect_status(gllmk_buffer_copy(NULL, 0, a, 0, 8), EXPECT_INVALID, copy, "NULL dst");
  expect_status(gllmk_buffer_copy(b, 0, NULL, 0, 8), EXPECT_INVALID, copy, "NULL src");
  expect_status(gllmk_buffer_copy(b, 0, a, 0, 0), EXPECT_INVALID, copy, "size 0");
  expect_status(gllmk_buffer_copy(b, 250, a, 0, 8), EXPECT_INVALID, copy, "dst past the end");
  expect_status(gllmk_buffer_copy(b, 0, a, 250, 8), EXPECT_INVALID, copy, "src past the end");
  expect_status(gllmk_buffer_copy(b, UINT64_MAX - 3, a, 0, 8), EXPECT_OVERFLOW, copy,
                "dst offset + size overflows");
  expect_status(gllmk_buffer_copy(b, 0, a, UINT64_MAX - 3, 8), EXPECT_OVERFLOW, copy,
                "src offset + size overflows");
  expect_status(gllmk_buffer_copy(a, 4, a, 0, 8), EXPECT_INVALID, copy, "overlapping ranges");
  expect_status(gllmk_buffer_copy(b, 0, elsewhere, 0, 8), EXPECT_INVALID, copy,
                "buffers of two contexts");
  expect_bytes(a, pattern, 256, copy);
  expect_bytes(b, pattern, 256, copy);

  const char *fill = "gllmk_buffer_fill";
  expect_status(gllmk_buffer_fill(NULL, 0, 8, 1), EXPECT_INVALID, fill, "NULL buffer");
  expect_status(gllmk_buffer_fill(a, 0, 0, 1), EXPECT_INVALID, fill, "size 0");
  expect_status(gllmk_buffer_fill(a, 128, 129, 1), EXPECT_INVALID, fill, "past the end");
  expect_status(gllmk_buffer_fill(a, UINT64_MAX, 2, 1), EXPECT_OVERFLOW, fill,
                "offset + size overflows");
  expect_bytes(a, pattern, 256, fill);

  /* Queries on NULL answer without crashing. */
  ck_assert_uint_eq(gllmk_buffer_size(NULL), 0);
  ck_assert_ptr_null(gllmk_buffer_context(NULL));
  gllmk_buffer_free(NULL);
  ck_assert_uint_eq(gllmk_buffer_size(a), 256);
  ck_assert_ptr_eq(gllmk_buffer_context(a), T.ctx);
  ck_assert_msg(T.failures == 0, "%d buffer misuse(s) handled wrongly (listed above)", T.failures);
}
END_TEST

/* ------------------------------------------------------- context misuse */

START_TEST(context_misuse) {
  snprintf(T.c.fn, sizeof T.c.fn, "context calls");
  const char *create = "gllmk_context_create";
  gllmk_context *ctx = NULL;
  expect_status(gllmk_context_create(NULL, NULL), EXPECT_INVALID, create, "NULL out");

  gllmk_context_options options = {.backend = "no-such-backend"};
  expect_status(gllmk_context_create(&options, &ctx), 1u << GLLMK_ERR_NO_BACKEND, create,
                "unknown forced backend");
  if (!test_contains(gllmk_last_error(), "no-such-backend"))
    report("unknown backend: the message \"%s\" does not name it", gllmk_last_error());
  ck_assert_ptr_null(ctx);

  options = (gllmk_context_options){.backend = "cpu", .device_index = 99};
  expect_status(gllmk_context_create(&options, &ctx),
                EXPECT_INVALID | (1u << GLLMK_ERR_NO_BACKEND), create, "device_index 99");
  ck_assert_ptr_null(ctx);
  options = (gllmk_context_options){.device_index = 99};
  expect_status(gllmk_context_create(&options, &ctx),
                EXPECT_INVALID | (1u << GLLMK_ERR_NO_BACKEND), create,
                "device_index 99, automatic backend");
  ck_assert_ptr_null(ctx);
  options = (gllmk_context_options){.exclude_count = 1};
  expect_status(gllmk_context_create(&options, &ctx), EXPECT_INVALID, create,
                "exclude_count 1 with exclude NULL");
  ck_assert_ptr_null(ctx);
  const char *const everything[] = {"cpu", "cuda", "rocm", "metal", "vulkan", "hsa"};
  options = (gllmk_context_options){.exclude = everything, .exclude_count = 6,
                                    .backend = "cpu"};
  expect_status(gllmk_context_create(&options, &ctx), 1u << GLLMK_ERR_NO_BACKEND, create,
                "forced backend that is also excluded");
  ck_assert_ptr_null(ctx);

  expect_status(gllmk_synchronize(NULL), EXPECT_INVALID, "gllmk_synchronize", "NULL context");
  gllmk_device_info info;
  expect_status(gllmk_context_device_info(NULL, &info), EXPECT_INVALID,
                "gllmk_context_device_info", "NULL context");
  expect_status(gllmk_context_device_info(T.ctx, NULL), EXPECT_INVALID,
                "gllmk_context_device_info", "NULL out");
  ck_assert_ptr_null(gllmk_context_backend(NULL));
  gllmk_context_destroy(NULL);

  gllmk_discovery *d = NULL;
  expect_status(gllmk_discover(NULL, NULL), EXPECT_INVALID, "gllmk_discover", "NULL out");
  must(gllmk_discover(NULL, &d), "gllmk_discover");
  uint32_t count = gllmk_discovery_plugin_count(d);
  ck_assert_ptr_null(gllmk_discovery_plugin(d, count));
  expect_status(gllmk_discovery_device(d, count, 0, &info), EXPECT_INVALID,
                "gllmk_discovery_device", "plugin index out of range");
  expect_status(gllmk_discovery_device(d, 0, 1000, &info), EXPECT_INVALID,
                "gllmk_discovery_device", "device index out of range");
  expect_status(gllmk_discovery_device(d, 0, 0, NULL), EXPECT_INVALID, "gllmk_discovery_device",
                "NULL out");
  ck_assert_int_eq(gllmk_discovery_plugin_supports(d, count, GLLMK_OP_add), 0);
  ck_assert_int_eq(gllmk_discovery_plugin_supports(d, 0, GLLMK_OP_COUNT), 0);
  ck_assert_int_eq(gllmk_discovery_plugin_supports(NULL, 0, GLLMK_OP_add), 0);
  gllmk_discovery_free(d);
  gllmk_discovery_free(NULL);
  ck_assert_uint_eq(gllmk_discovery_plugin_count(NULL), 0);
  ck_assert_msg(T.failures == 0, "%d context misuse(s) handled wrongly (listed above)", T.failures);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  Suite *suite = suite_create("bad_input");
  TCase *ops = test_tcase("ops");
  tcase_add_checked_fixture(ops, setup, teardown);
  tcase_add_loop_test(ops, op_rejects_bad_input, 0, GLLMK_OP_COUNT);
  suite_add_tcase(suite, ops);
  TCase *calls = test_tcase("buffers and contexts");
  tcase_add_checked_fixture(calls, setup, teardown);
  tcase_add_test(calls, buffer_misuse);
  tcase_add_test(calls, context_misuse);
  suite_add_tcase(suite, calls);
  return test_run_suite(suite);
}
