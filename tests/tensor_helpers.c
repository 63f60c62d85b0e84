/*
 * tensor_helpers.c - tensor descriptors and views, dtype/status/op names,
 * and bad arguments to each helper (a status, a message naming the helper,
 * and the output left untouched).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

static gllmk_context *ctx;
static gllmk_buffer *buffer; /* 4096 bytes */
static gllmk_buffer *other;  /* 4096 bytes, another context */
static gllmk_context *other_ctx;

static void setup(void) {
  ck_assert_int_eq(gllmk_context_create(NULL, &ctx), GLLMK_OK);
  ck_assert_int_eq(gllmk_buffer_alloc(ctx, 4096, &buffer), GLLMK_OK);
  ck_assert_int_eq(gllmk_context_create(NULL, &other_ctx), GLLMK_OK);
  ck_assert_int_eq(gllmk_buffer_alloc(other_ctx, 4096, &other), GLLMK_OK);
}

static void teardown(void) {
  gllmk_context_destroy(ctx);
  gllmk_context_destroy(other_ctx);
}

static gllmk_tensor make(gllmk_dtype dtype, uint64_t offset, int32_t ndim, const int64_t *shape) {
  gllmk_tensor t;
  gllmk_status status = gllmk_tensor_make(buffer, offset, dtype, ndim, shape, &t);
  ck_assert_msg(status == GLLMK_OK, "gllmk_tensor_make: %s", gllmk_last_error());
  return t;
}

/* A garbage-filled tensor: a failed helper must leave it as it is. */
static gllmk_tensor untouched(void) {
  gllmk_tensor t;
  memset(&t, 0xAB, sizeof t);
  return t;
}

/* The failed call's status and message, and its output unchanged. */
static void expect_failure(gllmk_status got, gllmk_status expected, const char *fn,
                           const gllmk_tensor *out, const char *what) {
  gllmk_tensor pristine = untouched();
  ck_assert_msg(got == expected, "%s (%s): returned %s, expected %s (%s)", fn, what,
                gllmk_status_string(got), gllmk_status_string(expected), gllmk_last_error());
  ck_assert_msg(test_contains(gllmk_last_error(), fn), "%s (%s): message \"%s\"", fn, what,
                gllmk_last_error());
  if (out) ck_assert_msg(memcmp(out, &pristine, sizeof pristine) == 0, "%s (%s) wrote its output",
                         fn, what);
}

static void expect_strides(const gllmk_tensor *t, const int64_t *strides) {
  for (int32_t i = 0; i < t->ndim; i++)
    ck_assert_msg(t->strides[i] == strides[i], "strides[%d]=%lld, expected %lld", i,
                  (long long)t->strides[i], (long long)strides[i]);
}

/* ------------------------------------------------------------ names */

START_TEST(dtype_sizes_and_names) {
  ck_assert_uint_eq(gllmk_dtype_size(GLLMK_F32), 4);
  ck_assert_uint_eq(gllmk_dtype_size(GLLMK_F16), 2);
  ck_assert_uint_eq(gllmk_dtype_size(GLLMK_BF16), 2);
  ck_assert_uint_eq(gllmk_dtype_size(GLLMK_I32), 4);
  ck_assert_uint_eq(gllmk_dtype_size((gllmk_dtype)GLLMK_DTYPE_COUNT), 0);
  ck_assert_uint_eq(gllmk_dtype_size((gllmk_dtype)-1), 0);
  ck_assert_str_eq(gllmk_dtype_name(GLLMK_F32), "f32");
  ck_assert_str_eq(gllmk_dtype_name(GLLMK_F16), "f16");
  ck_assert_str_eq(gllmk_dtype_name(GLLMK_BF16), "bf16");
  ck_assert_str_eq(gllmk_dtype_name(GLLMK_I32), "i32");
  ck_assert_ptr_null(gllmk_dtype_name((gllmk_dtype)GLLMK_DTYPE_COUNT));
  ck_assert_ptr_null(gllmk_dtype_name((gllmk_dtype)-1));
}
END_TEST

START_TEST(status_strings) {
  static const struct {
    gllmk_status status;
    const char *name;
  } expected[] = {
      {GLLMK_OK, "GLLMK_OK"},
      {GLLMK_ERR_INVALID_ARGUMENT, "GLLMK_ERR_INVALID_ARGUMENT"},
      {GLLMK_ERR_UNSUPPORTED, "GLLMK_ERR_UNSUPPORTED"},
      {GLLMK_ERR_OUT_OF_MEMORY, "GLLMK_ERR_OUT_OF_MEMORY"},
      {GLLMK_ERR_OUT_OF_RANGE, "GLLMK_ERR_OUT_OF_RANGE"},
      {GLLMK_ERR_NO_BACKEND, "GLLMK_ERR_NO_BACKEND"},
      {GLLMK_ERR_BACKEND, "GLLMK_ERR_BACKEND"},
      {GLLMK_ERR_OVERFLOW, "GLLMK_ERR_OVERFLOW"},
      {GLLMK_ERR_INTERNAL, "GLLMK_ERR_INTERNAL"},
  };
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
    ck_assert_int_eq(expected[i].status, (int)i); /* the values are ABI */
    ck_assert_str_eq(gllmk_status_string(expected[i].status), expected[i].name);
  }
  ck_assert_ptr_nonnull(gllmk_status_string((gllmk_status)1000));
  ck_assert_ptr_nonnull(gllmk_status_string((gllmk_status)-1));
}
END_TEST

START_TEST(op_and_enum_names) {
  static const char *const op_names[] = {
#define GLLMK_OP(name) #name,
#include "gllmk/gllmk_ops.def"
  };
  for (int op = 0; op < GLLMK_OP_COUNT; op++)
    ck_assert_str_eq(gllmk_op_name((gllmk_op)op), op_names[op]);
  ck_assert_ptr_null(gllmk_op_name(GLLMK_OP_COUNT));
  ck_assert_ptr_null(gllmk_op_name((gllmk_op)-1));

  static const char *const kinds[] = {"cuda", "rocm", "metal", "vulkan", "cpu", "other"};
  for (int k = 0; k < GLLMK_BACKEND_KIND_COUNT; k++)
    ck_assert_str_eq(gllmk_backend_kind_name((gllmk_backend_kind)k), kinds[k]);
  static const char *const states[] = {"selected", "available", "no device", "rejected",
                                       "excluded"};
  for (int s = 0; s < 5; s++)
    ck_assert_str_eq(gllmk_plugin_state_name((gllmk_plugin_state)s), states[s]);
  ck_assert_ptr_nonnull(gllmk_backend_kind_name((gllmk_backend_kind)99));
  ck_assert_ptr_nonnull(gllmk_plugin_state_name((gllmk_plugin_state)99));
}
END_TEST

START_TEST(last_error_is_per_call) {
  gllmk_tensor t = untouched();
  ck_assert_int_ne(gllmk_tensor_make(NULL, 0, GLLMK_F32, 1, (const int64_t[]){1}, &t), GLLMK_OK);
  ck_assert_str_ne(gllmk_last_error(), "");
  ck_assert_int_eq(gllmk_tensor_make(buffer, 0, GLLMK_F32, 1, (const int64_t[]){1}, &t), GLLMK_OK);
  ck_assert_str_eq(gllmk_last_error(), "");
}
END_TEST

/* ------------------------------------------------------------ make */

START_TEST(make_dense_tensors) {
  gllmk_tensor t = make(GLLMK_F16, 64, 3, (const int64_t[]){2, 3, 5});
  ck_assert_ptr_eq(t.buffer, buffer);
  ck_assert_uint_eq(t.offset, 64);
  ck_assert_int_eq(t.dtype, GLLMK_F16);
  ck_assert_int_eq(t.ndim, 3);
  expect_strides(&t, (const int64_t[]){15, 5, 1});
  ck_assert_int_eq(gllmk_tensor_numel(&t), 30);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&t), 1);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&t), 60);

  gllmk_tensor one = make(GLLMK_I32, 0, 1, (const int64_t[]){1});
  ck_assert_int_eq(gllmk_tensor_numel(&one), 1);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&one), 4);

  gllmk_tensor eight = make(GLLMK_BF16, 0, 8, (const int64_t[]){1, 2, 1, 3, 1, 2, 1, 5});
  ck_assert_int_eq(gllmk_tensor_numel(&eight), 60);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&eight), 1);

  /* Exactly filling the buffer is fine. */
  gllmk_tensor full = make(GLLMK_F32, 0, 2, (const int64_t[]){32, 32});
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&full), 4096);
  gllmk_tensor tail = make(GLLMK_F32, 4092, 1, (const int64_t[]){1});
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&tail), 4);
}
END_TEST

START_TEST(make_rejects_bad_arguments) {
  const char *fn = "gllmk_tensor_make";
  const int64_t shape[] = {4, 4};
  gllmk_tensor t = untouched();
#define MAKE_FAILS(expected, what, buf, offset, dtype, ndim, shp)                               \
  do {                                                                                         \
    t = untouched();                                                                           \
    expect_failure(gllmk_tensor_make(buf, offset, dtype, ndim, shp, &t), expected, fn, &t, what); \
  } while (0)
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "NULL buffer", NULL, 0, GLLMK_F32, 2, shape);
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "NULL shape", buffer, 0, GLLMK_F32, 2, NULL);
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "dtype 99", buffer, 0, (gllmk_dtype)99, 2, shape);
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "ndim 0", buffer, 0, GLLMK_F32, 0, shape);
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "ndim -1", buffer, 0, GLLMK_F32, -1, shape);
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "ndim 9", buffer, 0, GLLMK_F32, 9,
             ((const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}));
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "shape 0", buffer, 0, GLLMK_F32, 2,
             ((const int64_t[]){4, 0}));
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "shape -3", buffer, 0, GLLMK_F32, 2,
             ((const int64_t[]){-3, 4}));
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "one byte past the end", buffer, 4, GLLMK_F32, 2,
             ((const int64_t[]){32, 32}));
  MAKE_FAILS(GLLMK_ERR_INVALID_ARGUMENT, "offset past the end", buffer, 8192, GLLMK_F32, 1,
             ((const int64_t[]){1}));
  MAKE_FAILS(GLLMK_ERR_OVERFLOW, "element count overflows", buffer, 0, GLLMK_F32, 3,
             ((const int64_t[]){INT64_MAX / 2, 3, 1}));
  MAKE_FAILS(GLLMK_ERR_OVERFLOW, "bytes overflow", buffer, 0, GLLMK_F32, 1,
             ((const int64_t[]){INT64_MAX / 2}));
  MAKE_FAILS(GLLMK_ERR_OVERFLOW, "offset + bytes overflow", buffer, UINT64_MAX - 1, GLLMK_F16, 1,
             ((const int64_t[]){2}));
#undef MAKE_FAILS
  expect_failure(gllmk_tensor_make(buffer, 0, GLLMK_F32, 2, shape, NULL),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, NULL, "NULL out");
}
END_TEST

/* ------------------------------------------------------------ views */

START_TEST(slice_views) {
  gllmk_tensor t = make(GLLMK_F32, 16, 2, (const int64_t[]){6, 10});
  gllmk_tensor s;
  ck_assert_int_eq(gllmk_tensor_slice(&t, 1, 2, 4, 2, &s), GLLMK_OK);
  ck_assert_int_eq(s.shape[0], 6);
  ck_assert_int_eq(s.shape[1], 4);
  expect_strides(&s, (const int64_t[]){10, 2});
  ck_assert_uint_eq(s.offset, 16 + 2 * 4);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&s), 0);
  ck_assert_int_eq(gllmk_tensor_numel(&s), 24);
  /* last element: row 5, column 2 + 3*2 = 8 -> element 58 */
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&s), (58 - 2 + 1) * 4);

  ck_assert_int_eq(gllmk_tensor_slice(&t, 0, 1, 2, 1, &s), GLLMK_OK);
  ck_assert_uint_eq(s.offset, 16 + 40);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&s), 1);

  /* The last element, one at a time, of a slice of a slice. */
  gllmk_tensor col;
  ck_assert_int_eq(gllmk_tensor_slice(&t, 1, 9, 1, 1, &col), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_slice(&col, 0, 5, 1, 3, &s), GLLMK_OK);
  ck_assert_uint_eq(s.offset, 16 + 59 * 4);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&s), 4);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&s), 1);

  /* A column of a matrix is not contiguous; a single row is. */
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&col), 0);
}
END_TEST

START_TEST(slice_rejects_bad_arguments) {
  const char *fn = "gllmk_tensor_slice";
  gllmk_tensor t = make(GLLMK_F32, 0, 2, (const int64_t[]){6, 10}), out;
  static const struct {
    int32_t dim;
    int64_t start, length, step;
    const char *what;
  } bad[] = {
      {2, 0, 1, 1, "dim 2 of 2"},        {-1, 0, 1, 1, "dim -1"},
      {1, 10, 1, 1, "start = size"},     {1, -1, 1, 1, "start -1"},
      {1, 0, 0, 1, "length 0"},          {1, 0, -2, 1, "negative length"},
      {1, 0, 11, 1, "length past size"}, {1, 3, 4, 3, "last element past size"},
      {1, 0, 2, 0, "step 0"},            {1, 0, 2, -1, "negative step"},
      {1, 1, 3, INT64_MAX, "step overflows"}, {1, 1, INT64_MAX, 2, "length overflows"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    out = untouched();
    expect_failure(gllmk_tensor_slice(&t, bad[i].dim, bad[i].start, bad[i].length, bad[i].step,
                                      &out),
                   GLLMK_ERR_INVALID_ARGUMENT, fn, &out, bad[i].what);
  }
  /* One element with a huge step: the view's stride (stride * step) does not
   * fit 64 bits (issue 20: signed overflow, then OK with a negative stride). */
  gllmk_tensor wide = make(GLLMK_F32, 0, 2, (const int64_t[]){8, 16});
  out = untouched();
  expect_failure(gllmk_tensor_slice(&wide, 0, 0, 1, INT64_MAX, &out), GLLMK_ERR_OVERFLOW, fn,
                 &out, "length 1, step INT64_MAX on a dim of stride 16");
  out = untouched();
  expect_failure(gllmk_tensor_slice(&wide, 0, 7, 1, INT64_MAX / 8, &out), GLLMK_ERR_OVERFLOW, fn,
                 &out, "length 1, stride 16 * step INT64_MAX/8");
  /* ... but where the product fits, one element is a valid view. */
  ck_assert_int_eq(gllmk_tensor_slice(&wide, 1, 5, 1, INT64_MAX, &out), GLLMK_OK);
  ck_assert_int_eq(out.strides[1], INT64_MAX);
  ck_assert_uint_eq(out.offset, 20);
  ck_assert_int_eq(gllmk_tensor_numel(&out), 8);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&out), (7 * 16 + 1) * 4);
  out = untouched();
  expect_failure(gllmk_tensor_slice(NULL, 0, 0, 1, 1, &out), GLLMK_ERR_INVALID_ARGUMENT, fn, &out,
                 "NULL tensor");
  expect_failure(gllmk_tensor_slice(&t, 0, 0, 1, 1, NULL), GLLMK_ERR_INVALID_ARGUMENT, fn, NULL,
                 "NULL out");
  gllmk_tensor broken = t;
  broken.offset = 4096;
  out = untouched();
  expect_failure(gllmk_tensor_slice(&broken, 0, 0, 1, 1, &out), GLLMK_ERR_INVALID_ARGUMENT, fn,
                 &out, "tensor past its buffer");
}
END_TEST

START_TEST(permute_views) {
  gllmk_tensor t = make(GLLMK_BF16, 0, 3, (const int64_t[]){2, 3, 4}), p;
  ck_assert_int_eq(gllmk_tensor_permute(&t, (const int32_t[]){2, 0, 1}, &p), GLLMK_OK);
  ck_assert_int_eq(p.shape[0], 4);
  ck_assert_int_eq(p.shape[1], 2);
  ck_assert_int_eq(p.shape[2], 3);
  expect_strides(&p, (const int64_t[]){1, 12, 4});
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&p), 0);
  ck_assert_int_eq(gllmk_tensor_numel(&p), 24);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&p), 48);
  gllmk_tensor back;
  ck_assert_int_eq(gllmk_tensor_permute(&p, (const int32_t[]){1, 2, 0}, &back), GLLMK_OK);
  ck_assert_int_eq(memcmp(back.shape, t.shape, sizeof t.shape), 0);
  expect_strides(&back, t.strides);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&back), 1);

  const char *fn = "gllmk_tensor_permute";
  static const int32_t bad_orders[][3] = {{0, 0, 1}, {0, 1, 3}, {-1, 0, 1}};
  for (int i = 0; i < 3; i++) {
    p = untouched();
    expect_failure(gllmk_tensor_permute(&t, bad_orders[i], &p), GLLMK_ERR_INVALID_ARGUMENT, fn,
                   &p, "not a permutation");
  }
  p = untouched();
  expect_failure(gllmk_tensor_permute(&t, NULL, &p), GLLMK_ERR_INVALID_ARGUMENT, fn, &p,
                 "NULL order");
  expect_failure(gllmk_tensor_permute(&t, (const int32_t[]){0, 1, 2}, NULL),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, NULL, "NULL out");
  p = untouched();
  expect_failure(gllmk_tensor_permute(NULL, (const int32_t[]){0, 1, 2}, &p),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, &p, "NULL tensor");
}
END_TEST

START_TEST(reshape_views) {
  gllmk_tensor t = make(GLLMK_F16, 32, 3, (const int64_t[]){2, 3, 4}), r;
  ck_assert_int_eq(gllmk_tensor_reshape(&t, 2, (const int64_t[]){6, 4}, &r), GLLMK_OK);
  ck_assert_uint_eq(r.offset, 32);
  expect_strides(&r, (const int64_t[]){4, 1});
  ck_assert_int_eq(gllmk_tensor_reshape(&t, 1, (const int64_t[]){24}, &r), GLLMK_OK);
  ck_assert_int_eq(gllmk_tensor_numel(&r), 24);

  const char *fn = "gllmk_tensor_reshape";
  r = untouched();
  expect_failure(gllmk_tensor_reshape(&t, 2, (const int64_t[]){5, 5}, &r),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, &r, "another element count");
  r = untouched();
  expect_failure(gllmk_tensor_reshape(&t, 2, (const int64_t[]){-6, -4}, &r),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, &r, "negative shape");
  r = untouched();
  expect_failure(gllmk_tensor_reshape(&t, 0, (const int64_t[]){24}, &r),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, &r, "ndim 0");
  gllmk_tensor p;
  ck_assert_int_eq(gllmk_tensor_permute(&t, (const int32_t[]){1, 0, 2}, &p), GLLMK_OK);
  r = untouched();
  expect_failure(gllmk_tensor_reshape(&p, 1, (const int64_t[]){24}, &r),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, &r, "not contiguous");
  r = untouched();
  expect_failure(gllmk_tensor_reshape(NULL, 1, (const int64_t[]){24}, &r),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, &r, "NULL tensor");
  r = untouched();
  expect_failure(gllmk_tensor_reshape(&t, 1, NULL, &r), GLLMK_ERR_INVALID_ARGUMENT, fn, &r,
                 "NULL shape");
  expect_failure(gllmk_tensor_reshape(&t, 1, (const int64_t[]){24}, NULL),
                 GLLMK_ERR_INVALID_ARGUMENT, fn, NULL, "NULL out");
}
END_TEST

/* numel, is_contiguous and extent_bytes answer 0 for invalid tensors. */
START_TEST(queries_on_invalid_tensors) {
  gllmk_tensor good = make(GLLMK_F32, 0, 2, (const int64_t[]){4, 4});
  gllmk_tensor bad[8];
  for (int i = 0; i < 8; i++) bad[i] = good;
  bad[0].buffer = NULL;
  bad[1].ndim = 0;
  bad[2].ndim = GLLMK_MAX_DIMS + 1;
  bad[3].shape[1] = 0;
  bad[4].strides[0] = -4;
  bad[5].dtype = 42;
  bad[6].offset = 4096;
  bad[7].strides[0] = INT64_MAX;
  for (int i = 0; i < 8; i++) {
    ck_assert_msg(gllmk_tensor_numel(&bad[i]) == 0, "numel of bad tensor %d", i);
    ck_assert_msg(gllmk_tensor_is_contiguous(&bad[i]) == 0, "is_contiguous of bad tensor %d", i);
    ck_assert_msg(gllmk_tensor_extent_bytes(&bad[i]) == 0, "extent_bytes of bad tensor %d", i);
  }
  ck_assert_int_eq(gllmk_tensor_numel(NULL), 0);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(NULL), 0);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(NULL), 0);
}
END_TEST

/* Zero strides broadcast; a tensor may live in any live buffer. */
START_TEST(broadcast_and_other_buffers) {
  gllmk_tensor t = make(GLLMK_F32, 0, 2, (const int64_t[]){5, 7});
  t.strides[0] = 0;
  ck_assert_int_eq(gllmk_tensor_numel(&t), 35);
  ck_assert_uint_eq(gllmk_tensor_extent_bytes(&t), 28);
  ck_assert_int_eq(gllmk_tensor_is_contiguous(&t), 0);
  gllmk_tensor o;
  ck_assert_int_eq(gllmk_tensor_make(other, 0, GLLMK_I32, 1, (const int64_t[]){1024}, &o),
                   GLLMK_OK);
  ck_assert_ptr_eq(gllmk_buffer_context(o.buffer), other_ctx);
}
END_TEST

int main(int argc, char **argv) {
  test_parse_args(argc, argv);
  Suite *suite = suite_create("tensor_helpers");
  TCase *names = test_tcase("names");
  tcase_add_test(names, dtype_sizes_and_names);
  tcase_add_test(names, status_strings);
  tcase_add_test(names, op_and_enum_names);
  suite_add_tcase(suite, names);
  TCase *tensors = test_tcase("tensors");
  tcase_add_checked_fixture(tensors, setup, teardown);
  tcase_add_test(tensors, last_error_is_per_call);
  tcase_add_test(tensors, make_dense_tensors);
  tcase_add_test(tensors, make_rejects_bad_arguments);
  tcase_add_test(tensors, slice_views);
  tcase_add_test(tensors, slice_rejects_bad_arguments);
  tcase_add_test(tensors, permute_views);
  tcase_add_test(tensors, reshape_views);
  tcase_add_test(tensors, queries_on_invalid_tensors);
  tcase_add_test(tensors, broadcast_and_other_buffers);
  suite_add_tcase(suite, tensors);
  return test_run_suite(suite);
}
