/*
 * tensor.c - tensor descriptors: construction, views, and the checks every
 * op applies to each tensor argument.
 */
#include <string.h>

#include "internal.h"

static bool mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static bool add_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  return __builtin_add_overflow(a, b, out);
}

gllmk_status core_tensor_check(const char *fn, const char *arg, const gllmk_tensor *t,
                               core_tensor_span *out_span) {
  if (t == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, arg);
  core_buffer *buffer = core_buffer_get(t->buffer);
  if (buffer == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.buffer is %s", fn, arg,
                     t->buffer ? "not a live gllmk buffer (freed, or of a destroyed context)"
                               : "NULL");
  if (gllmk_dtype_size((gllmk_dtype)t->dtype) == 0)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.dtype=%d is not a gllmk_dtype", fn,
                     arg, t->dtype);
  if (t->ndim < 1 || t->ndim > GLLMK_MAX_DIMS)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.ndim=%d is outside [1, %d]", fn, arg,
                     t->ndim, GLLMK_MAX_DIMS);
  uint64_t numel = 1, last = 0; /* `last` = element index of the last element */
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 1)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.shape[%d]=%lld must be >= 1", fn,
                       arg, i, (long long)t->shape[i]);
    if (t->strides[i] < 0)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s.strides[%d]=%lld is negative", fn,
                       arg, i, (long long)t->strides[i]);
    uint64_t step;
    if (mul_overflows(numel, (uint64_t)t->shape[i], &numel) ||
        mul_overflows((uint64_t)(t->shape[i] - 1), (uint64_t)t->strides[i], &step) ||
        add_overflows(last, step, &last))
      return core_fail(GLLMK_ERR_OVERFLOW, "%s: %s's shape and strides overflow 64 bits", fn,
                       arg);
  }
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)t->dtype), end;
  if (numel > (uint64_t)INT64_MAX || last > (uint64_t)INT64_MAX / elem ||
      add_overflows(last + 1, 0, &end) || mul_overflows(end, elem, &end) ||
      add_overflows(end, t->offset, &end))
    return core_fail(GLLMK_ERR_OVERFLOW, "%s: %s's extent overflows 64 bits", fn, arg);
  if (t->offset % elem != 0)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: %s.offset=%llu is not a multiple of the element size %llu", fn, arg,
                     (unsigned long long)t->offset, (unsigned long long)elem);
  if (end > buffer->base.size)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: %s ends at byte %llu, past the end of its %llu-byte buffer", fn, arg,
                     (unsigned long long)end, (unsigned long long)buffer->base.size);
  if (out_span) {
    out_span->begin = t->offset;
    out_span->end = end;
    out_span->numel = numel;
    out_span->buffer = buffer;
  }
  return GLLMK_OK;
}

/* ------------------------------------------------------------ public */

static void set_dense_strides(gllmk_tensor *t) {
  int64_t stride = 1;
  for (int32_t i = t->ndim - 1; i >= 0; i--) {
    t->strides[i] = stride;
    stride *= t->shape[i];
  }
}

/* A dense tensor over `shape`, checked to fit its buffer; errors name `fn`. */
static gllmk_status make_dense(const char *fn, gllmk_buffer *buffer, uint64_t offset,
                               gllmk_dtype dtype, int32_t ndim, const int64_t *shape,
                               gllmk_tensor *out_tensor) {
  if (out_tensor == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_tensor is NULL", fn);
  if (shape == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: shape is NULL", fn);
  if (ndim < 1 || ndim > GLLMK_MAX_DIMS)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: ndim=%d is outside [1, %d]", fn, ndim,
                     GLLMK_MAX_DIMS);
  gllmk_tensor t = {.buffer = buffer, .offset = offset, .dtype = (int32_t)dtype, .ndim = ndim};
  uint64_t numel = 1;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 1)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: shape[%d]=%lld must be >= 1", fn, i,
                       (long long)shape[i]);
    if (mul_overflows(numel, (uint64_t)shape[i], &numel) || numel > (uint64_t)INT64_MAX)
      return core_fail(GLLMK_ERR_OVERFLOW, "%s: the shape's element count overflows", fn);
    t.shape[i] = shape[i];
  }
  set_dense_strides(&t);
  gllmk_status status = core_tensor_check(fn, "tensor", &t, NULL);
  if (status != GLLMK_OK) return status;
  *out_tensor = t;
  return GLLMK_OK;
}

gllmk_status gllmk_tensor_make(gllmk_buffer *buffer, uint64_t offset, gllmk_dtype dtype,
                               int32_t ndim, const int64_t *shape, gllmk_tensor *out_tensor) {
  core_clear_error();
  return make_dense("gllmk_tensor_make", buffer, offset, dtype, ndim, shape, out_tensor);
}

gllmk_status gllmk_tensor_slice(const gllmk_tensor *tensor, int32_t dim, int64_t start,
                                int64_t length, int64_t step, gllmk_tensor *out_tensor) {
  static const char fn[] = "gllmk_tensor_slice";
  core_clear_error();
  if (out_tensor == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_tensor is NULL", fn);
  gllmk_status status = core_tensor_check(fn, "tensor", tensor, NULL);
  if (status != GLLMK_OK) return status;
  if (dim < 0 || dim >= tensor->ndim)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: dim=%d is outside [0, %d)", fn, dim,
                     tensor->ndim);
  if (step < 1) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: step=%lld must be >= 1", fn, (long long)step);
  if (length < 1) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: length=%lld must be >= 1", fn, (long long)length);
  int64_t size = tensor->shape[dim];
  /* last index = start + (length - 1) * step must be < size, without overflow */
  if (start < 0 || start >= size || (length - 1) > (size - 1 - start) / step)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                     "%s: elements %lld + %lld*%lld of dim %d lie outside its size %lld", fn,
                     (long long)start, (long long)(length - 1), (long long)step, dim,
                     (long long)size);
  /* The view's stride is strides[dim] * step. With length >= 2 it is at most
   * the dimension's extent, but with length 1 any step passes the check
   * above, so the product is checked too (an overflow would be a negative
   * stride: undefined behaviour, then a view the ops refuse). */
  int64_t stride;
  if (__builtin_mul_overflow(tensor->strides[dim], step, &stride))
    return core_fail(GLLMK_ERR_OVERFLOW, "%s: strides[%d]=%lld times step=%lld overflows 64 bits",
                     fn, dim, (long long)tensor->strides[dim], (long long)step);
  gllmk_tensor t = *tensor;
  uint64_t elem = gllmk_dtype_size((gllmk_dtype)t.dtype);
  t.offset += (uint64_t)start * (uint64_t)t.strides[dim] * elem; /* inside: checked above */
  t.shape[dim] = length;
  t.strides[dim] = stride;
  /* The result is a view inside the original one; checked all the same, so
   * no helper can return a tensor the ops would refuse as malformed. */
  CORE_TRY(core_tensor_check(fn, "the resulting view", &t, NULL));
  *out_tensor = t;
  return GLLMK_OK;
}

gllmk_status gllmk_tensor_permute(const gllmk_tensor *tensor, const int32_t *order,
                                  gllmk_tensor *out_tensor) {
  static const char fn[] = "gllmk_tensor_permute";
  core_clear_error();
  if (out_tensor == NULL || order == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                     out_tensor ? "order" : "out_tensor");
  gllmk_status status = core_tensor_check(fn, "tensor", tensor, NULL);
  if (status != GLLMK_OK) return status;
  gllmk_tensor t = *tensor;
  bool seen[GLLMK_MAX_DIMS] = {false};
  for (int32_t i = 0; i < t.ndim; i++) {
    int32_t from = order[i];
    if (from < 0 || from >= t.ndim || seen[from])
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                       "%s: order[%d]=%d is not a permutation of [0, %d)", fn, i, from, t.ndim);
    seen[from] = true;
    t.shape[i] = tensor->shape[from];
    t.strides[i] = tensor->strides[from];
  }
  *out_tensor = t;
  return GLLMK_OK;
}

gllmk_status gllmk_tensor_reshape(const gllmk_tensor *tensor, int32_t ndim, const int64_t *shape,
                                  gllmk_tensor *out_tensor) {
  static const char fn[] = "gllmk_tensor_reshape";
  core_clear_error();
  CORE_TRY(core_tensor_check(fn, "tensor", tensor, NULL));
  if (!gllmk_tensor_is_contiguous(tensor))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: tensor is not contiguous", fn);
  if (out_tensor == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_tensor is NULL", fn);
  gllmk_tensor t;
  CORE_TRY(make_dense(fn, tensor->buffer, tensor->offset, (gllmk_dtype)tensor->dtype, ndim,
                        shape, &t));
  if (gllmk_tensor_numel(&t) != gllmk_tensor_numel(tensor))
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %lld elements cannot be viewed as %lld",
                     fn, (long long)gllmk_tensor_numel(tensor), (long long)gllmk_tensor_numel(&t));
  *out_tensor = t;
  return GLLMK_OK;
}

int64_t gllmk_tensor_numel(const gllmk_tensor *tensor) {
  core_tensor_span span;
  if (core_tensor_check("gllmk_tensor_numel", "tensor", tensor, &span) != GLLMK_OK) return 0;
  return (int64_t)span.numel;
}

int gllmk_tensor_is_contiguous(const gllmk_tensor *tensor) {
  if (core_tensor_check("gllmk_tensor_is_contiguous", "tensor", tensor, NULL) != GLLMK_OK)
    return 0;
  int64_t expected = 1;
  for (int32_t i = tensor->ndim - 1; i >= 0; i--) {
    if (tensor->shape[i] != 1 && tensor->strides[i] != expected) return 0;
    expected *= tensor->shape[i];
  }
  return 1;
}

uint64_t gllmk_tensor_extent_bytes(const gllmk_tensor *tensor) {
  core_tensor_span span;
  if (core_tensor_check("gllmk_tensor_extent_bytes", "tensor", tensor, &span) != GLLMK_OK)
    return 0;
  return span.end - span.begin;
}
