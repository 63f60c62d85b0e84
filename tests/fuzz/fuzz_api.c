/*
 * fuzz_api.c - a coverage-guided fuzz target (clang libFuzzer) over the
 * public API's descriptors (issue 20). docs/testing.md says how to run it.
 *
 * The input bytes are decoded into a short program of public calls on two
 * contexts of the cpu plugin and four small buffers (three on the first
 * context, one on the second):
 *   - tensor helpers: gllmk_tensor_make / slice / permute / reshape with
 *     arbitrary int64 values, and the queries on arbitrary descriptors;
 *   - ops (every op of gllmk_ops.def): tensors laid out from the op's usual
 *     shapes at chosen places in the buffers (packed, anywhere, unaligned,
 *     aliasing), then broken in a few random ways (a shape, a stride, the
 *     offset, dtype, ndim, another or a freed buffer, the same view as
 *     another argument, NULL), with scalars from a table of edge values;
 *     the struct size passed varies too;
 *   - buffer writes, fills, copies and small integers for the index
 *     tensors; freeing and reallocating a buffer (stale handles);
 *   - collectives (gllmk_all_reduce / gllmk_all_gather) over a communicator
 *     of both contexts (or NULL, or a freed one), with each rank's tensors
 *     placed in any buffer, of any dtype and size, sometimes strided.
 * After every call it checks, against a host copy of every buffer:
 *   - a call that fails writes nothing, and gllmk_last_error() names it;
 *   - a call that succeeds writes only the bytes of its output views (every
 *     element, through the strides), and clears gllmk_last_error();
 *   - gllmk_op_supported agrees with the call;
 *   - a helper that succeeds returns a valid view inside its source, and
 *     one that fails leaves its output untouched;
 * and ASan/UBSan watch every access and every integer operation. Any
 * violation aborts, which libFuzzer reports with the input that did it.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gllmk/gllmk.h"

#ifndef FUZZ_PLUGIN_DIR
#error "tests/tests.mk defines FUZZ_PLUGIN_DIR (the cpu plugin built for fuzzing)"
#endif

#define NBUF 4            /* buffers 0..2 on context A, 3 on context B */
#define MAX_BUF 8192      /* bytes per buffer (a multiple of 64) */
#define POOL 16           /* tensors made by the helpers */
#define MAX_STEPS 32      /* calls per input */
#define WORK_LIMIT (1 << 20) /* valid op calls bigger than this are skipped */

/* ------------------------------------------------------------ failures */

static void fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "fuzz_api: ");
  vfprintf(stderr, format, args);
  fprintf(stderr, "\n");
  va_end(args);
  abort();
}

/* ------------------------------------------------------------ input */

typedef struct input {
  const uint8_t *p;
  size_t n;
} input;

static uint8_t u8(input *in) {
  if (in->n == 0) return 0;
  in->n--;
  return *in->p++;
}

static uint64_t bytes(input *in, int count) {
  uint64_t v = 0;
  for (int i = 0; i < count; i++) v |= (uint64_t)u8(in) << (8 * i);
  return v;
}

/* Half small sizes (1..8), a third edge values, the rest anything. */
static int64_t some_i64(input *in) {
  static const int64_t edges[] = {0,
                                  -1,
                                  -2,
                                  8,
                                  16,
                                  64,
                                  4096,
                                  INT32_MAX,
                                  INT32_MIN,
                                  (int64_t)1 << 31,
                                  (int64_t)1 << 32,
                                  (int64_t)1 << 62,
                                  -((int64_t)1 << 62),
                                  INT64_MAX,
                                  INT64_MAX - 1,
                                  INT64_MAX / 2,
                                  INT64_MAX / 3,
                                  INT64_MAX / 8,
                                  INT64_MIN,
                                  INT64_MIN + 1};
  enum { EDGES = sizeof edges / sizeof edges[0] };
  uint8_t k = u8(in);
  if (k < 128) return 1 + k % 8;
  if (k < 128 + 4 * EDGES) return edges[(k - 128) / 4];
  return (int64_t)bytes(in, 8);
}

static int32_t some_i32(input *in) {
  static const int32_t edges[] = {0, 1, 2, 3, -1, -2, 7, 8, 16, 24, 32, 48, 64, 255,
                                  INT32_MAX, INT32_MIN};
  uint8_t k = u8(in);
  if (k < 224) return edges[k % (sizeof edges / sizeof edges[0])];
  return (int32_t)bytes(in, 4);
}

static float some_f32(input *in) {
  static const float edges[] = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-5f, 1e-6f, 0.125f, 0.9f,
                                10000.0f, 1.5f, -0.5f, 1e30f, -0.0f, NAN, INFINITY, -INFINITY,
                                0.35f, 500000.0f, 1.0000001f};
  uint8_t k = u8(in);
  if (k < 240) return edges[k % (sizeof edges / sizeof edges[0])];
  uint32_t bits = (uint32_t)bytes(in, 4);
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* ------------------------------------------------------------ state */

static gllmk_context *ctx_a, *ctx_b;
static gllmk_communicator *comm_ab, *comm_stale; /* over ctx_a, ctx_b; a freed one */

/* What the calls did, printed at exit with FUZZ_API_STATS=1 in the
 * environment (docs/testing.md): per op, calls that succeeded, failed, or
 * were valid but too big to run. */
static struct {
  unsigned long ok, failed, skipped;
} op_stats[GLLMK_OP_COUNT], helper_stats[4];

typedef struct state {
  gllmk_buffer *buf[NBUF];
  gllmk_buffer *stale; /* a freed buffer's handle, or NULL */
  uint64_t size[NBUF];
  uint64_t cursor[NBUF]; /* packed placement */
  unsigned char shadow[NBUF][MAX_BUF];
  gllmk_tensor pool[POOL];
  int pool_count;
} state;

static gllmk_context *context_of(int b) { return b == NBUF - 1 ? ctx_b : ctx_a; }

static int buffer_index(const state *s, const gllmk_buffer *b) {
  for (int i = 0; i < NBUF; i++)
    if (s->buf[i] != NULL && s->buf[i] == b) return i;
  return -1;
}

static void must(gllmk_status status, const char *what) {
  if (status != GLLMK_OK) fail("%s: %s: %s", what, gllmk_status_string(status), gllmk_last_error());
}

/* Every buffer holds what the shadow says, except bytes in `allowed`
 * (NULL: none); then the shadow takes the buffers' contents. */
static void check_buffers(state *s, unsigned char (*allowed)[MAX_BUF], const char *what) {
  static unsigned char now[MAX_BUF];
  for (int b = 0; b < NBUF; b++) {
    if (s->buf[b] == NULL) continue;
    must(gllmk_buffer_read(s->buf[b], 0, now, s->size[b]), "gllmk_buffer_read");
    for (uint64_t i = 0; i < s->size[b]; i++)
      if (now[i] != s->shadow[b][i] && !(allowed && allowed[b][i]))
        fail("%s changed byte %llu of buffer %d (%02x -> %02x), outside its outputs", what,
             (unsigned long long)i, b, s->shadow[b][i], now[i]);
    memcpy(s->shadow[b], now, s->size[b]);
  }
}

static void fill_buffer(state *s, int b, input *in) {
  uint64_t x = bytes(in, 4) * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t i = 0; i < s->size[b]; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    s->shadow[b][i] = (unsigned char)(x >> 24);
  }
  must(gllmk_buffer_write(s->buf[b], 0, s->shadow[b], s->size[b]), "gllmk_buffer_write");
}

static void alloc_buffer(state *s, int b, input *in) {
  s->size[b] = 1024 + 64 * ((uint64_t)u8(in) % ((MAX_BUF - 1024) / 64 + 1));
  must(gllmk_buffer_alloc(context_of(b), s->size[b], &s->buf[b]), "gllmk_buffer_alloc");
  s->cursor[b] = 0;
  fill_buffer(s, b, in);
}

/* ------------------------------------------------------------ tensors */

static int64_t numel_of(const gllmk_tensor *t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
  return n;
}

/* Marks the bytes of every element of a valid tensor in `allowed`. */
static void mark_elements(const state *s, const gllmk_tensor *t, unsigned char (*allowed)[MAX_BUF]) {
  int b = buffer_index(s, t->buffer);
  if (b < 0) fail("an op succeeded on a tensor whose buffer the harness does not know");
  size_t elem = gllmk_dtype_size((gllmk_dtype)t->dtype);
  int64_t index[GLLMK_MAX_DIMS] = {0}, n = numel_of(t);
  for (int64_t e = 0; e < n; e++) {
    uint64_t at = t->offset;
    for (int32_t d = 0; d < t->ndim; d++) at += (uint64_t)(index[d] * t->strides[d]) * elem;
    if (at + elem > s->size[b]) fail("a valid output's element lies outside its buffer");
    memset(&allowed[b][at], 1, elem);
    for (int32_t d = t->ndim - 1; d >= 0 && ++index[d] == t->shape[d]; d--) index[d] = 0;
  }
}

/* A buffer handle for a descriptor: mostly a live one, sometimes another
 * context's, a freed one, NULL or garbage. */
static gllmk_buffer *some_buffer(state *s, input *in, int *out_index) {
  uint8_t k = u8(in);
  *out_index = -1;
  if (k < 232) {
    *out_index = k % NBUF;
    return s->buf[*out_index];
  }
  if (k < 240) return s->stale;
  if (k < 248) return NULL;
  return (gllmk_buffer *)(uintptr_t)bytes(in, 8);
}

static int32_t some_dtype(input *in) {
  uint8_t k = u8(in);
  return k < 250 ? k % 4 : (int32_t)(k - 252);
}

/* Dense strides; no overflow checks (the library's job). */
static void dense(gllmk_tensor *t) {
  uint64_t stride = 1;
  for (int32_t d = t->ndim - 1; d >= 0 && d < GLLMK_MAX_DIMS; d--) {
    t->strides[d] = (int64_t)stride;
    stride *= (uint64_t)t->shape[d];
  }
}

/* ------------------------------------------------------------ helpers */

static gllmk_tensor untouched(void) {
  gllmk_tensor t;
  memset(&t, 0xAB, sizeof t);
  return t;
}

static void expect_helper_failure(gllmk_status status, const char *fn, const gllmk_tensor *out) {
  gllmk_tensor pristine = untouched();
  if (gllmk_last_error()[0] == '\0' || strstr(gllmk_last_error(), fn) == NULL)
    fail("%s failed (%s) with the message \"%s\"", fn, gllmk_status_string(status),
         gllmk_last_error());
  if (memcmp(out, &pristine, sizeof pristine) != 0) fail("%s failed but wrote its output", fn);
}

/* A view that a helper returned: valid, and its bytes inside [begin, end)
 * of its source. */
static void expect_view(const char *fn, const gllmk_tensor *t, uint64_t begin, uint64_t end) {
  if (gllmk_last_error()[0] != '\0') fail("%s succeeded with a message: %s", fn, gllmk_last_error());
  int64_t n = gllmk_tensor_numel(t);
  uint64_t extent = gllmk_tensor_extent_bytes(t);
  if (n <= 0 || extent == 0)
    fail("%s returned an invalid tensor (%s)", fn, gllmk_last_error());
  for (int32_t d = 0; d < t->ndim; d++)
    if (t->strides[d] < 0) fail("%s returned strides[%d]=%lld", fn, d, (long long)t->strides[d]);
  if (t->offset < begin || t->offset + extent > end)
    fail("%s returned a view [%llu, %llu) outside its source [%llu, %llu)", fn,
         (unsigned long long)t->offset, (unsigned long long)(t->offset + extent),
         (unsigned long long)begin, (unsigned long long)end);
}

static void pool_add(state *s, const gllmk_tensor *t) {
  if (s->pool_count < POOL)
    s->pool[s->pool_count++] = *t;
  else
    s->pool[POOL - 1] = *t;
}

/* A descriptor to hand to a helper: from the pool (maybe broken) or raw. */
static gllmk_tensor some_tensor(state *s, input *in) {
  gllmk_tensor t;
  uint8_t k = u8(in);
  if (s->pool_count > 0 && k < 200) {
    t = s->pool[k % s->pool_count];
  } else {
    int b;
    memset(&t, 0, sizeof t);
    t.buffer = some_buffer(s, in, &b);
    t.offset = (uint64_t)some_i64(in) & ~(uint64_t)3;
    t.dtype = some_dtype(in);
    t.ndim = 1 + u8(in) % 4;
    for (int32_t d = 0; d < t.ndim; d++) t.shape[d] = some_i64(in);
    dense(&t);
  }
  if (u8(in) < 48) { /* break one field */
    int32_t d = u8(in) % GLLMK_MAX_DIMS;
    switch (u8(in) % 5) {
      case 0: t.shape[d] = some_i64(in); break;
      case 1: t.strides[d] = some_i64(in); break;
      case 2: t.offset = (uint64_t)some_i64(in); break;
      case 3: t.ndim = some_i32(in); break;
      default: t.dtype = some_dtype(in); break;
    }
  }
  return t;
}

static void step_make(state *s, input *in) {
  int b;
  gllmk_buffer *buffer = some_buffer(s, in, &b);
  uint64_t offset = u8(in) < 200 ? 4 * (uint64_t)(u8(in) % 64) : (uint64_t)some_i64(in);
  gllmk_dtype dtype = (gllmk_dtype)some_dtype(in);
  int32_t ndim = u8(in) < 240 ? 1 + u8(in) % 4 : some_i32(in);
  int64_t shape[GLLMK_MAX_DIMS + 2];
  for (int i = 0; i < GLLMK_MAX_DIMS + 2; i++) shape[i] = i < 4 ? some_i64(in) : 1;
  gllmk_tensor t = untouched();
  gllmk_status status = gllmk_tensor_make(buffer, offset, dtype, ndim, shape, &t);
  if (status == GLLMK_OK) helper_stats[0].ok++; else helper_stats[0].failed++;
  if (status != GLLMK_OK) {
    expect_helper_failure(status, "gllmk_tensor_make", &t);
    return;
  }
  if (b < 0) fail("gllmk_tensor_make succeeded on a buffer that is not live");
  expect_view("gllmk_tensor_make", &t, 0, s->size[b]);
  if (!gllmk_tensor_is_contiguous(&t)) fail("gllmk_tensor_make returned a non-dense tensor");
  pool_add(s, &t);
}

static void step_slice(state *s, input *in) {
  gllmk_tensor src = some_tensor(s, in);
  int32_t dim = u8(in) < 224 ? u8(in) % 4 : some_i32(in);
  /* start: 0 .. 7 mostly (some_i64 - 1, wrapping), or an edge value */
  int64_t start = (int64_t)((uint64_t)some_i64(in) - 1);
  int64_t length = u8(in) < 96 ? 1 : some_i64(in), step = some_i64(in);
  uint64_t extent = gllmk_tensor_extent_bytes(&src);
  gllmk_tensor t = untouched();
  gllmk_status status = gllmk_tensor_slice(&src, dim, start, length, step, &t);
  if (status == GLLMK_OK) helper_stats[1].ok++; else helper_stats[1].failed++;
  if (status != GLLMK_OK) {
    expect_helper_failure(status, "gllmk_tensor_slice", &t);
    return;
  }
  if (extent == 0) fail("gllmk_tensor_slice succeeded on an invalid tensor");
  expect_view("gllmk_tensor_slice", &t, src.offset, src.offset + extent);
  if (t.shape[dim] != length) fail("gllmk_tensor_slice: shape[%d] is not the length", dim);
  pool_add(s, &t);
}

static void step_permute(state *s, input *in) {
  gllmk_tensor src = some_tensor(s, in);
  int32_t order[GLLMK_MAX_DIMS];
  for (int i = 0; i < GLLMK_MAX_DIMS; i++) order[i] = i;
  uint8_t how = u8(in);
  if (how < 200) { /* a permutation of the first ndim dims (or of 4) */
    int32_t n = src.ndim >= 1 && src.ndim <= GLLMK_MAX_DIMS ? src.ndim : 4;
    for (int32_t i = n - 1; i > 0; i--) {
      int32_t j = u8(in) % (i + 1), tmp = order[i];
      order[i] = order[j];
      order[j] = tmp;
    }
  } else {
    for (int i = 0; i < GLLMK_MAX_DIMS; i++) order[i] = some_i32(in);
  }
  uint64_t extent = gllmk_tensor_extent_bytes(&src);
  gllmk_tensor t = untouched();
  gllmk_status status = gllmk_tensor_permute(&src, order, &t);
  if (status == GLLMK_OK) helper_stats[2].ok++; else helper_stats[2].failed++;
  if (status != GLLMK_OK) {
    expect_helper_failure(status, "gllmk_tensor_permute", &t);
    return;
  }
  expect_view("gllmk_tensor_permute", &t, src.offset, src.offset + extent);
  if (gllmk_tensor_numel(&t) != gllmk_tensor_numel(&src) || gllmk_tensor_extent_bytes(&t) != extent)
    fail("gllmk_tensor_permute changed the element count or extent");
  pool_add(s, &t);
}

static void step_reshape(state *s, input *in) {
  gllmk_tensor src = some_tensor(s, in);
  int32_t ndim = u8(in) < 240 ? 1 + u8(in) % 4 : some_i32(in);
  int64_t shape[GLLMK_MAX_DIMS + 2];
  int64_t n = gllmk_tensor_numel(&src);
  for (int i = 0; i < GLLMK_MAX_DIMS + 2; i++) shape[i] = 1;
  if (u8(in) < 128 && n > 0 && ndim >= 1 && ndim <= 4) { /* a factorization of n */
    int64_t left = n;
    for (int32_t i = 0; i + 1 < ndim; i++) {
      int64_t f = 1 + u8(in) % 4;
      if (left % f == 0) shape[i] = f, left /= f;
    }
    shape[ndim - 1] = left;
  } else {
    for (int i = 0; i < 4; i++) shape[i] = some_i64(in);
  }
  uint64_t extent = gllmk_tensor_extent_bytes(&src);
  gllmk_tensor t = untouched();
  gllmk_status status = gllmk_tensor_reshape(&src, ndim, shape, &t);
  if (status == GLLMK_OK) helper_stats[3].ok++; else helper_stats[3].failed++;
  if (status != GLLMK_OK) {
    expect_helper_failure(status, "gllmk_tensor_reshape", &t);
    return;
  }
  expect_view("gllmk_tensor_reshape", &t, src.offset, src.offset + extent);
  if (gllmk_tensor_numel(&t) != n || !gllmk_tensor_is_contiguous(&t))
    fail("gllmk_tensor_reshape changed the element count or is not dense");
  pool_add(s, &t);
}

/* ------------------------------------------------------------ ops */

enum { MAX_TENSORS = 8 };

/* One op call being built: the args struct (with room past its end, for
 * sizes larger than the struct), the tensors its fields point at. */
typedef struct call {
  gllmk_op op;
  _Alignas(16) unsigned char args[256];
  gllmk_tensor t[MAX_TENSORS];
  int present[MAX_TENSORS];
  int32_t dtype; /* the call's float dtype */
  int64_t d[8];  /* small dims */
  int64_t head;  /* a head_dim: 8 or 16 */
  int64_t group; /* query heads per kv head */
} call;

/* Where an op's tensor fields are, which are written, and its scalars. */
typedef struct op_desc {
  size_t size;
  int count;
  size_t offsets[MAX_TENSORS];
  unsigned outputs;
  void (*layout)(state *, call *, input *);
  void (*scalars)(call *, input *);
} op_desc;

#define ARG(c, type) ((type *)(void *)(c)->args)

/* Places tensor `field` of `ndim` dims (dtype: the call's float dtype, or
 * a fixed one) in some buffer: packed after the previous tensor, anywhere,
 * or unaligned. The descriptor is dense and not checked. */
static void place(state *s, call *c, input *in, int field, int32_t dtype, int32_t ndim,
                  int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  gllmk_tensor *t = &c->t[field];
  memset(t, 0, sizeof *t);
  int b = u8(in) % (NBUF - 1);
  if (u8(in) >= 248) b = NBUF - 1; /* another context's buffer */
  t->buffer = s->buf[b];
  t->dtype = dtype;
  t->ndim = ndim;
  const int64_t dims[4] = {d0, d1, d2, d3};
  for (int32_t i = 0; i < ndim; i++) t->shape[i] = dims[i];
  dense(t);
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)dtype), bytes_needed = elem;
  for (int32_t i = 0; i < ndim; i++) bytes_needed *= (uint64_t)dims[i];
  uint8_t where = u8(in);
  if (where < 200) {
    t->offset = s->cursor[b];
  } else if (where < 250) {
    t->offset = elem * (bytes(in, 2) % (s->size[b] / elem));
  } else {
    t->offset = bytes(in, 2) % s->size[b];
  }
  s->cursor[b] = (t->offset + bytes_needed + 63) & ~(uint64_t)63;
  c->present[field] = 1;
}

#define F(c) ((c)->dtype)
#define PLACE(field, dtype, ndim, ...) place(s, c, in, field, dtype, ndim, __VA_ARGS__)

static int32_t any_float(input *in) { return (int32_t)(u8(in) % 3); }

static void layout_rows(state *s, call *c, input *in, int tensors, int broadcast_from) {
  for (int i = 0; i < tensors; i++) {
    if (i >= broadcast_from && u8(in) < 128)
      PLACE(i, F(c), 1, c->d[1], 0, 0, 0);
    else
      PLACE(i, F(c), 2, c->d[0], c->d[1], 0, 0);
  }
}

static void layout_copy(state *s, call *c, input *in) {
  PLACE(0, F(c), 2, c->d[0], c->d[1], 0, 0);
  PLACE(1, any_float(in), 2, c->d[0], c->d[1], 0, 0);
  if (u8(in) < 64) { /* a strided source: a column slice */
    c->t[1].shape[1] = c->d[1];
    c->t[1].strides[0] = c->d[1] + c->d[2];
  }
}
static void layout_fill(state *s, call *c, input *in) {
  PLACE(0, (int32_t)(u8(in) % 4), 2, c->d[0], c->d[1], 0, 0);
}
static void layout_binary(state *s, call *c, input *in) { layout_rows(s, c, in, 3, 2); }
static void layout_mul_add(state *s, call *c, input *in) { layout_rows(s, c, in, 4, 2); }
static void layout_unary(state *s, call *c, input *in) { layout_rows(s, c, in, 2, 2); }
static void layout_swiglu(state *s, call *c, input *in) { layout_rows(s, c, in, 3, 3); }
static void layout_bias(state *s, call *c, input *in) {
  layout_rows(s, c, in, 2, 2);
  PLACE(2, F(c), 1, c->d[1], 0, 0, 0);
}
static void layout_add_rmsnorm(state *s, call *c, input *in) {
  layout_rows(s, c, in, 3, 3);
  PLACE(3, F(c), 1, c->d[1], 0, 0, 0);
}
static void layout_layernorm(state *s, call *c, input *in) {
  layout_rows(s, c, in, 2, 2);
  PLACE(2, F(c), 1, c->d[1], 0, 0, 0);
  PLACE(3, F(c), 1, c->d[1], 0, 0, 0);
}
static void layout_rope(state *s, call *c, input *in) {
  PLACE(0, F(c), 3, c->d[0], c->d[1], c->head, 0);
  PLACE(1, F(c), 3, c->d[0], c->d[1], c->head, 0);
  PLACE(2, GLLMK_I32, 1, c->d[0], 0, 0, 0);
  if (u8(in) < 64) { /* inv_freq (ABI 2.2), mostly of the length rotary_dim needs */
    PLACE(3, GLLMK_F32, 1, c->head / 2, 0, 0, 0);
    if (u8(in) < 200) ARG(c, gllmk_rope_args)->rotary_dim = (int32_t)c->head;
  }
}
static void layout_embedding(state *s, call *c, input *in) {
  PLACE(0, F(c), 3, c->d[0], c->d[1], c->d[2], 0);
  PLACE(1, F(c), 2, c->d[3], c->d[2], 0, 0);
  PLACE(2, GLLMK_I32, 2, c->d[0], c->d[1], 0, 0);
}
static void layout_matmul(state *s, call *c, input *in) {
  int kn = ARG(c, gllmk_matmul_args)->b_layout == GLLMK_B_KN;
  PLACE(0, F(c), 2, c->d[0], c->d[1], 0, 0);
  PLACE(1, F(c), 2, c->d[0], c->d[2], 0, 0);
  if (kn)
    PLACE(2, F(c), 2, c->d[2], c->d[1], 0, 0);
  else
    PLACE(2, F(c), 2, c->d[1], c->d[2], 0, 0);
  if (u8(in) < 128) PLACE(3, F(c), 1, c->d[1], 0, 0, 0);
}
static void layout_attention(state *s, call *c, input *in) {
  int64_t b = c->d[0], sq = c->d[1], hkv = c->d[2], skv = c->d[3], hq = hkv * c->group;
  PLACE(0, F(c), 4, b, sq, hq, c->head);
  PLACE(1, F(c), 4, b, sq, hq, c->head);
  PLACE(2, F(c), 4, b, skv, hkv, c->head);
  PLACE(3, F(c), 4, b, skv, hkv, c->head);
  if (u8(in) < 128) PLACE(4, GLLMK_I32, 1, b, 0, 0, 0);
  if (u8(in) < 128) PLACE(5, GLLMK_F32, 3, b, hq, sq, 0);
}
static void layout_kv_append(state *s, call *c, input *in) {
  int64_t blocks = c->d[0], block_size = c->d[1], hkv = c->d[2], tokens = c->d[3];
  PLACE(0, F(c), 4, blocks, block_size, hkv, c->head);
  PLACE(1, F(c), 4, blocks, block_size, hkv, c->head);
  PLACE(2, F(c), 3, tokens, hkv, c->head, 0);
  PLACE(3, F(c), 3, tokens, hkv, c->head, 0);
  PLACE(4, GLLMK_I32, 1, tokens, 0, 0, 0);
}
static void layout_paged(state *s, call *c, input *in) {
  int64_t blocks = c->d[0], block_size = c->d[1], hkv = c->d[2], tokens = c->d[3];
  int64_t seqs = c->d[4], max_blocks = c->d[5], hq = hkv * c->group;
  PLACE(0, F(c), 3, tokens, hq, c->head, 0);
  PLACE(1, F(c), 3, tokens, hq, c->head, 0);
  PLACE(2, F(c), 4, blocks, block_size, hkv, c->head);
  PLACE(3, F(c), 4, blocks, block_size, hkv, c->head);
  PLACE(4, GLLMK_I32, 2, seqs, max_blocks, 0, 0);
  PLACE(5, GLLMK_I32, 1, seqs + 1, 0, 0, 0);
  PLACE(6, GLLMK_I32, 1, seqs, 0, 0, 0);
}
static void layout_tokens(state *s, call *c, input *in) {
  PLACE(0, GLLMK_I32, 1, c->d[0], 0, 0, 0);
  PLACE(1, any_float(in), 2, c->d[0], c->d[1] * c->d[2], 0, 0);
}

static void scalars_none(call *c, input *in) { (void)c, (void)in; }
static void scalars_fill(call *c, input *in) { ARG(c, gllmk_fill_args)->value = some_f32(in); }
static void scalars_gelu(call *c, input *in) {
  ARG(c, gllmk_gelu_args)->kind = u8(in) < 240 ? u8(in) % 2 : some_i32(in);
}
static void scalars_add_gelu(call *c, input *in) { ARG(c, gllmk_add_gelu_args)->kind = some_i32(in); }
static void scalars_rmsnorm(call *c, input *in) { ARG(c, gllmk_rmsnorm_args)->eps = some_f32(in); }
static void scalars_add_rmsnorm(call *c, input *in) { ARG(c, gllmk_add_rmsnorm_args)->eps = some_f32(in); }
static void scalars_layernorm(call *c, input *in) { ARG(c, gllmk_layernorm_args)->eps = some_f32(in); }
static void scalars_softmax(call *c, input *in) { ARG(c, gllmk_softmax_args)->scale = some_f32(in); }
static void scalars_rope(call *c, input *in) {
  gllmk_rope_args *a = ARG(c, gllmk_rope_args);
  a->theta = some_f32(in);
  a->rotary_dim = u8(in) < 200 ? 2 * (1 + u8(in) % (int)(c->head / 2)) : some_i32(in);
  a->style = u8(in) < 240 ? u8(in) % 2 : some_i32(in);
}
static void scalars_matmul(call *c, input *in) {
  gllmk_matmul_args *a = ARG(c, gllmk_matmul_args);
  a->alpha = some_f32(in);
  a->beta = u8(in) < 128 ? 0.0f : some_f32(in);
  a->b_layout = u8(in) < 240 ? u8(in) % 2 : some_i32(in);
  a->flags = u8(in) < 240 ? 0u : (uint32_t)some_i32(in);
}
static void scalars_attention(call *c, input *in) {
  gllmk_attention_args *a = ARG(c, gllmk_attention_args);
  a->scale = some_f32(in);
  a->causal = u8(in) < 240 ? u8(in) % 2 : some_i32(in);
}
static void scalars_paged(call *c, input *in) { ARG(c, gllmk_paged_attention_args)->scale = some_f32(in); }
static void scalars_sample(call *c, input *in) {
  gllmk_sample_args *a = ARG(c, gllmk_sample_args);
  a->temperature = some_f32(in);
  a->top_p = u8(in) < 128 ? 1.0f : some_f32(in);
  a->min_p = u8(in) < 128 ? 0.0f : some_f32(in);
  a->top_k = u8(in) < 128 ? 0 : some_i32(in);
  a->seed = bytes(in, 8);
  a->offset = bytes(in, 2);
}

#define AT(op, field) offsetof(gllmk_##op##_args, field)
#define OP(op, outputs_, layout_, scalars_, ...)                                    \
  [GLLMK_OP_##op] = {sizeof(gllmk_##op##_args),                                      \
                     (int)(sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t)),       \
                     {__VA_ARGS__}, outputs_, layout_, scalars_}

/* Every op of gllmk_ops.def (init checks that none is missing). */
static const op_desc ops[GLLMK_OP_COUNT] = {
    OP(copy, 1, layout_copy, scalars_none, AT(copy, out), AT(copy, src)),
    OP(fill, 1, layout_fill, scalars_fill, AT(fill, out)),
    OP(add, 1, layout_binary, scalars_none, AT(add, out), AT(add, a), AT(add, b)),
    OP(mul, 1, layout_binary, scalars_none, AT(mul, out), AT(mul, a), AT(mul, b)),
    OP(mul_add, 1, layout_mul_add, scalars_none, AT(mul_add, out), AT(mul_add, a), AT(mul_add, b),
       AT(mul_add, c)),
    OP(silu, 1, layout_unary, scalars_none, AT(silu, out), AT(silu, x)),
    OP(gelu, 1, layout_unary, scalars_gelu, AT(gelu, out), AT(gelu, x)),
    OP(add_gelu, 1, layout_bias, scalars_add_gelu, AT(add_gelu, out), AT(add_gelu, x),
       AT(add_gelu, bias)),
    OP(swiglu, 1, layout_swiglu, scalars_none, AT(swiglu, out), AT(swiglu, gate), AT(swiglu, up)),
    OP(rmsnorm, 1, layout_bias, scalars_rmsnorm, AT(rmsnorm, out), AT(rmsnorm, x),
       AT(rmsnorm, weight)),
    OP(add_rmsnorm, 3, layout_add_rmsnorm, scalars_add_rmsnorm, AT(add_rmsnorm, out),
       AT(add_rmsnorm, residual), AT(add_rmsnorm, x), AT(add_rmsnorm, weight)),
    OP(layernorm, 1, layout_layernorm, scalars_layernorm, AT(layernorm, out), AT(layernorm, x),
       AT(layernorm, weight), AT(layernorm, bias)),
    OP(softmax, 1, layout_unary, scalars_softmax, AT(softmax, out), AT(softmax, x)),
    OP(rope, 1, layout_rope, scalars_rope, AT(rope, out), AT(rope, x), AT(rope, positions),
       AT(rope, inv_freq)),
    OP(embedding, 1, layout_embedding, scalars_none, AT(embedding, out), AT(embedding, table),
       AT(embedding, ids)),
    OP(matmul, 1, layout_matmul, scalars_matmul, AT(matmul, out), AT(matmul, a), AT(matmul, b),
       AT(matmul, bias)),
    OP(attention, 1 | 32, layout_attention, scalars_attention, AT(attention, out),
       AT(attention, q), AT(attention, k), AT(attention, v), AT(attention, kv_lens),
       AT(attention, lse)),
    OP(kv_append, 3, layout_kv_append, scalars_none, AT(kv_append, k_cache),
       AT(kv_append, v_cache), AT(kv_append, k), AT(kv_append, v), AT(kv_append, slots)),
    OP(paged_attention, 1, layout_paged, scalars_paged, AT(paged_attention, out),
       AT(paged_attention, q), AT(paged_attention, k_cache), AT(paged_attention, v_cache),
       AT(paged_attention, block_table), AT(paged_attention, q_starts),
       AT(paged_attention, seq_lens)),
    OP(argmax, 1, layout_tokens, scalars_none, AT(argmax, out), AT(argmax, logits)),
    OP(sample, 1, layout_tokens, scalars_sample, AT(sample, out), AT(sample, logits)),
};

/* Breaks one thing of the call. */
static void mutate(state *s, call *c, input *in, int count) {
  int f = u8(in) % count;
  gllmk_tensor *t = &c->t[f];
  int32_t d = u8(in) % 4;
  switch (u8(in) % 12) {
    case 0: t->shape[d] = some_i64(in); break;
    case 1: t->strides[d] = some_i64(in); break;
    case 2: t->offset = (uint64_t)some_i64(in); break;
    case 3: t->offset += (uint64_t)(int64_t)(int8_t)u8(in); break;
    case 4: t->dtype = some_dtype(in); break;
    case 5: /* one more or one less, wrapping */
      t->ndim = u8(in) < 200 ? (int32_t)((uint32_t)t->ndim + (u8(in) & 1 ? 1u : UINT32_MAX))
                             : some_i32(in);
      break;
    case 6: {
      int b;
      t->buffer = some_buffer(s, in, &b);
      break;
    }
    case 7: { /* the same view as another argument */
      int g = u8(in) % count;
      *t = c->t[g];
      c->present[f] = c->present[g];
      break;
    }
    case 8: { /* another argument's place, shifted */
      int g = u8(in) % count;
      t->buffer = c->t[g].buffer;
      t->offset = c->t[g].offset + 2 * (uint64_t)(u8(in) % 8);
      break;
    }
    case 9: c->present[f] = 0; break; /* NULL */
    case 10: /* a pool tensor */
      if (s->pool_count > 0) {
        *t = s->pool[u8(in) % s->pool_count];
        c->present[f] = 1;
      }
      break;
    default: /* a broadcast (stride 0) leading dim */
      t->strides[0] = 0;
      break;
  }
}

/* Rough work of a valid call, to skip the slow ones (a broadcast key
 * dimension lets attention loop over 2^60 keys). */
static double work_of(const call *c, const gllmk_tensor *const *p) {
  double total = 0;
  for (int i = 0; i < ops[c->op].count; i++)
    if (p[i]) total += (double)numel_of(p[i]);
  switch (c->op) {
    case GLLMK_OP_matmul: return (double)numel_of(p[0]) * (double)p[1]->shape[p[1]->ndim - 1];
    case GLLMK_OP_attention: return (double)numel_of(p[1]) * (double)p[2]->shape[1];
    case GLLMK_OP_paged_attention:
      return (double)numel_of(p[1]) * (double)p[2]->shape[0] * (double)p[2]->shape[1];
    default: return total;
  }
}

static void step_op(state *s, input *in) {
  static call c;
  memset(&c, 0, sizeof c);
  c.op = (gllmk_op)(u8(in) % GLLMK_OP_COUNT);
  const op_desc *desc = &ops[c.op];
  const char *name = gllmk_op_name(c.op);
  char fn[64];
  snprintf(fn, sizeof fn, "gllmk_%s", name);
  c.dtype = any_float(in);
  for (int i = 0; i < 8; i++) c.d[i] = 1 + u8(in) % 4;
  c.head = 8 * (1 + u8(in) % 2);
  c.group = 1 + u8(in) % 2;
  desc->scalars(&c, in);
  desc->layout(s, &c, in);
  for (int m = u8(in) % 4; m > 0; m--) mutate(s, &c, in, desc->count);
  const gllmk_tensor *p[MAX_TENSORS] = {0};
  for (int i = 0; i < desc->count; i++) {
    const gllmk_tensor *field = c.present[i] ? &c.t[i] : NULL;
    memcpy(c.args + desc->offsets[i], &field, sizeof field);
  }
  size_t size = desc->size;
  uint8_t how = u8(in);
  if (how >= 240) size = how & 1 ? desc->size + 8 : (size_t)u8(in) % (desc->size + 1);
  /* The tensors the library sees: those whose pointer lies within `size`. */
  for (int i = 0; i < desc->count; i++)
    if (c.present[i] && desc->offsets[i] + sizeof(void *) <= size) p[i] = &c.t[i];
  gllmk_context *ctx = u8(in) < 248 ? ctx_a : u8(in) & 1 ? ctx_b : NULL;
  const void *args = u8(in) < 252 ? (const void *)c.args : NULL;

  gllmk_status supported = gllmk_op_supported(ctx, c.op, args, size);
  if (supported == GLLMK_OK && work_of(&c, p) > WORK_LIMIT) {
    op_stats[c.op].skipped++;
    return;
  }
  gllmk_status status = gllmk_op_run(ctx, c.op, args, size);
  if (status == GLLMK_OK)
    op_stats[c.op].ok++;
  else
    op_stats[c.op].failed++;
  if (status != GLLMK_OK) {
    if (gllmk_last_error()[0] == '\0' || strstr(gllmk_last_error(), fn) == NULL)
      fail("%s failed (%s) with the message \"%s\"", fn, gllmk_status_string(status),
           gllmk_last_error());
    if (supported == GLLMK_OK && status != GLLMK_ERR_OUT_OF_MEMORY)
      fail("%s: gllmk_op_supported said OK, the call returned %s (%s)", fn,
           gllmk_status_string(status), gllmk_last_error());
    if (supported != GLLMK_OK && supported != status)
      fail("%s: gllmk_op_supported said %s, the call returned %s (%s)", fn,
           gllmk_status_string(supported), gllmk_status_string(status), gllmk_last_error());
    char what[96];
    snprintf(what, sizeof what, "%s (failed: %s)", fn, gllmk_status_string(status));
    check_buffers(s, NULL, what);
    return;
  }
  if (supported != GLLMK_OK)
    fail("%s: gllmk_op_supported said %s, the call succeeded", fn, gllmk_status_string(supported));
  if (gllmk_last_error()[0] != '\0') fail("%s succeeded with a message: %s", fn, gllmk_last_error());
  gllmk_status synced = gllmk_synchronize(ctx);
  if (synced != GLLMK_OK &&
      (synced != GLLMK_ERR_OUT_OF_RANGE || strstr(gllmk_last_error(), fn) == NULL))
    fail("%s: gllmk_synchronize returned %s (%s)", fn, gllmk_status_string(synced),
         gllmk_last_error());
  static unsigned char allowed[NBUF][MAX_BUF];
  memset(allowed, 0, sizeof allowed);
  for (int i = 0; i < desc->count; i++)
    if ((desc->outputs >> i & 1) && p[i])
      mark_elements(s, p[i], allowed);
  check_buffers(s, allowed, fn);
}

/* A failed call: its message names it, and no buffer changed. */
static void expect_clean_failure(state *s, gllmk_status status, const char *fn) {
  if (strstr(gllmk_last_error(), fn) == NULL)
    fail("%s failed (%s) with the message \"%s\"", fn, gllmk_status_string(status),
         gllmk_last_error());
  check_buffers(s, NULL, fn);
}

/* ------------------------------------------------------------ collectives */

/* A small tensor for rank r: mostly dense on its context's buffer, at an
 * element-aligned offset; sometimes anywhere, strided or of another size. */
static gllmk_tensor collective_tensor(state *s, input *in, int rank, int32_t dtype, int64_t n) {
  gllmk_tensor t;
  memset(&t, 0, sizeof t);
  int b = rank == 0 ? u8(in) % (NBUF - 1) : NBUF - 1;
  t.buffer = u8(in) < 240 ? s->buf[b] : some_buffer(s, in, &b);
  t.dtype = u8(in) < 240 ? dtype : some_dtype(in);
  t.ndim = 1;
  t.shape[0] = u8(in) < 240 ? n : some_i64(in);
  t.strides[0] = u8(in) < 240 ? 1 : some_i64(in);
  t.offset = 4 * (bytes(in, 2) % (MAX_BUF / 4));
  return t;
}

static void step_collective(state *s, input *in) {
  int gather = u8(in) & 1;
  const char *fn = gather ? "gllmk_all_gather" : "gllmk_all_reduce";
  int32_t dtype = (int32_t)(u8(in) % 4);
  int64_t n = 1 + u8(in) % 64;
  gllmk_tensor ins[2], outs[2];
  for (int r = 0; r < 2; r++) ins[r] = collective_tensor(s, in, r, dtype, n);
  for (int r = 0; r < 2; r++) {
    outs[r] = collective_tensor(s, in, r, dtype, gather ? 2 * n : n);
    if (!gather && u8(in) < 64) outs[r] = ins[r]; /* in place */
  }
  uint8_t k = u8(in);
  gllmk_communicator *comm = k < 240 ? comm_ab : k < 248 ? comm_stale : NULL;
  gllmk_status status = gather ? gllmk_all_gather(comm, outs, ins) : gllmk_all_reduce(comm, outs, ins);
  if (status != GLLMK_OK) {
    expect_clean_failure(s, status, fn);
    return;
  }
  static unsigned char allowed[NBUF][MAX_BUF];
  memset(allowed, 0, sizeof allowed);
  for (int r = 0; r < 2; r++) mark_elements(s, &outs[r], allowed);
  check_buffers(s, allowed, fn);
}

/* ------------------------------------------------------------ buffers */

static void step_buffer(state *s, input *in) {
  int b = u8(in) % NBUF;
  uint64_t offset = u8(in) < 200 ? bytes(in, 2) % (s->size[b] + 8) : (uint64_t)some_i64(in);
  uint64_t size = u8(in) < 200 ? bytes(in, 2) % (s->size[b] + 8) : (uint64_t)some_i64(in);
  static unsigned char data[MAX_BUF];
  static unsigned char (*allowed)[MAX_BUF];
  static unsigned char allowed_bytes[NBUF][MAX_BUF];
  allowed = allowed_bytes;
  memset(allowed_bytes, 0, sizeof allowed_bytes);
  gllmk_status status;
  const char *fn;
  switch (u8(in) % 4) {
    case 0: { /* small integers (ids, slots, tables) */
      fn = "gllmk_buffer_write";
      uint64_t count = 1 + u8(in) % 16, bound = 1 + u8(in) % 16;
      for (uint64_t i = 0; i < count; i++) {
        int32_t v = (int32_t)(u8(in) % bound) - (u8(in) < 16 ? 1 : 0);
        memcpy(data + 4 * i, &v, 4);
      }
      offset &= ~(uint64_t)3;
      size = 4 * count;
      status = gllmk_buffer_write(s->buf[b], offset, data, size);
      break;
    }
    case 1:
      fn = "gllmk_buffer_fill";
      status = gllmk_buffer_fill(s->buf[b], offset, size, u8(in));
      break;
    case 2: {
      fn = "gllmk_buffer_copy";
      int src = u8(in) % NBUF;
      uint64_t src_offset = bytes(in, 2) % (s->size[src] + 8);
      status = gllmk_buffer_copy(s->buf[b], offset, s->buf[src], src_offset, size);
      break;
    }
    default: { /* free and reallocate: the old handle goes stale */
      fn = "gllmk_buffer_free";
      gllmk_buffer *old = s->buf[b];
      gllmk_buffer_free(old);
      s->stale = old;
      s->buf[b] = NULL;
      alloc_buffer(s, b, in);
      if (gllmk_buffer_size(old) != 0 || gllmk_buffer_context(old) != NULL)
        fail("a freed buffer still answers gllmk_buffer_size/context");
      if (gllmk_buffer_write(old, 0, data, 1) != GLLMK_ERR_INVALID_ARGUMENT)
        fail("gllmk_buffer_write on a freed buffer did not fail with INVALID_ARGUMENT");
      return;
    }
  }
  if (status != GLLMK_OK) {
    expect_clean_failure(s, status, fn);
    return;
  }
  if (offset + size > s->size[b] || size == 0) fail("%s succeeded outside its buffer", fn);
  memset(&allowed[b][offset], 1, size);
  check_buffers(s, allowed, fn);
}

/* ------------------------------------------------------------ libFuzzer */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* At exit, before LeakSanitizer looks. */
static void destroy_contexts(void) {
  gllmk_communicator_free(comm_ab);
  gllmk_context_destroy(ctx_a);
  gllmk_context_destroy(ctx_b);
  if (getenv("FUZZ_API_STATS") == NULL) return;
  static const char *const helpers[4] = {"tensor_make", "tensor_slice", "tensor_permute",
                                         "tensor_reshape"};
  fprintf(stderr, "%-16s %10s %10s %10s\n", "call", "ok", "failed", "too big");
  for (int i = 0; i < 4; i++)
    fprintf(stderr, "%-16s %10lu %10lu\n", helpers[i], helper_stats[i].ok, helper_stats[i].failed);
  for (int op = 0; op < GLLMK_OP_COUNT; op++)
    fprintf(stderr, "%-16s %10lu %10lu %10lu\n", gllmk_op_name((gllmk_op)op), op_stats[op].ok,
            op_stats[op].failed, op_stats[op].skipped);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  for (int op = 0; op < GLLMK_OP_COUNT; op++)
    if (ops[op].size == 0)
      fail("op %s has no entry in tests/fuzz/fuzz_api.c's table", gllmk_op_name((gllmk_op)op));
  gllmk_context_options options = {.backend = "cpu", .num_threads = 1,
                                   .plugin_dir = FUZZ_PLUGIN_DIR};
  must(gllmk_context_create(&options, &ctx_a), "gllmk_context_create");
  must(gllmk_context_create(&options, &ctx_b), "gllmk_context_create");
  gllmk_context *both[2] = {ctx_a, ctx_b};
  must(gllmk_communicator_create(both, 2, &comm_stale), "gllmk_communicator_create");
  gllmk_communicator_free(comm_stale);
  must(gllmk_communicator_create(both, 2, &comm_ab), "gllmk_communicator_create");
  atexit(destroy_contexts);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static state s;
  input in = {data, size};
  memset(&s, 0, sizeof s);
  for (int b = 0; b < NBUF; b++) alloc_buffer(&s, b, &in);
  /* A few valid tensors to start from (the helpers' sources). */
  static const int64_t shapes[3][3] = {{8, 16}, {2, 3, 4}, {16}};
  static const int32_t ndims[3] = {2, 3, 1};
  static const gllmk_dtype dtypes[3] = {GLLMK_F32, GLLMK_BF16, GLLMK_I32};
  for (int i = 0; i < 3; i++)
    must(gllmk_tensor_make(s.buf[i], 64 * (uint64_t)i, dtypes[i], ndims[i], shapes[i],
                           &s.pool[s.pool_count++]),
         "gllmk_tensor_make");
  for (int steps = 0; steps < MAX_STEPS && in.n > 0; steps++) {
    uint8_t what = u8(&in);
    if (what < 24)
      step_make(&s, &in);
    else if (what < 64)
      step_slice(&s, &in);
    else if (what < 76)
      step_permute(&s, &in);
    else if (what < 92)
      step_reshape(&s, &in);
    else if (what < 112)
      step_buffer(&s, &in);
    else if (what < 124)
      step_collective(&s, &in);
    else
      step_op(&s, &in);
  }
  for (int b = 0; b < NBUF; b++) gllmk_buffer_free(s.buf[b]);
  return 0;
}
