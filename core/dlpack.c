/*
 * dlpack.c - DLPack import (a DLManagedTensor's memory wrapped as a buffer)
 * and export (a DLManagedTensor viewing a gllmk tensor), both without copies.
 */
#include <stdlib.h>
#include <string.h>

#include "gllmk/gllmk_dlpack.h"
#include "internal.h"

/* gllmk dtype <-> DLPack type (code, bits, one lane). */
static const struct {
  gllmk_dtype dtype;
  uint8_t code, bits;
} dtype_map[] = {
    {GLLMK_F32, kDLFloat, 32},
    {GLLMK_F16, kDLFloat, 16},
    {GLLMK_BF16, kDLBfloat, 16},
    {GLLMK_I32, kDLInt, 32},
};
#define DTYPE_MAP_COUNT (sizeof dtype_map / sizeof dtype_map[0])

static bool dtype_from_dl(DLDataType type, gllmk_dtype *out) {
  for (size_t i = 0; i < DTYPE_MAP_COUNT; i++)
    if (type.lanes == 1 && type.code == dtype_map[i].code && type.bits == dtype_map[i].bits) {
      *out = dtype_map[i].dtype;
      return true;
    }
  return false;
}

static void release_managed(void *data) {
  DLManagedTensor *managed = data;
  if (managed->deleter) managed->deleter(managed);
}

/* The tensor a DLTensor describes, before it has a buffer; its extent in
 * bytes from the data pointer. */
static gllmk_status describe(const char *fn, const DLTensor *dl, gllmk_tensor *out,
                             uint64_t *out_bytes) {
  gllmk_dtype dtype;
  if (!dtype_from_dl(dl->dtype, &dtype))
    return core_fail(GLLMK_ERR_UNSUPPORTED,
                     "%s: DLPack dtype (code %u, %u bits, %u lanes) is not f32, f16, bf16 or i32",
                     fn, dl->dtype.code, dl->dtype.bits, dl->dtype.lanes);
  if (dl->ndim < 0 || dl->ndim > GLLMK_MAX_DIMS)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: ndim=%d is outside [0, %d]", fn, dl->ndim,
                     GLLMK_MAX_DIMS);
  if (dl->data == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
  memset(out, 0, sizeof *out);
  out->dtype = (int32_t)dtype;
  out->ndim = dl->ndim ? dl->ndim : 1;
  out->offset = dl->byte_offset;
  out->shape[0] = 1;
  out->strides[0] = 1;
  int64_t stride = 1;
  for (int32_t i = dl->ndim - 1; i >= 0; i--) { /* strides NULL = compact row-major */
    out->shape[i] = dl->shape[i];
    out->strides[i] = dl->strides ? dl->strides[i] : stride;
    if (out->shape[i] < 1 || out->strides[i] < 0)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                       "%s: dim %d has shape %lld and stride %lld (gllmk needs >= 1 and >= 0)",
                       fn, i, (long long)out->shape[i], (long long)out->strides[i]);
    if (__builtin_mul_overflow(stride, out->shape[i], &stride))
      return core_fail(GLLMK_ERR_OVERFLOW, "%s: the shape overflows", fn);
  }
  uint64_t last = 0, step;
  for (int32_t i = 0; i < out->ndim; i++)
    if (__builtin_mul_overflow((uint64_t)(out->shape[i] - 1), (uint64_t)out->strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      return core_fail(GLLMK_ERR_OVERFLOW, "%s: shape and strides overflow", fn);
  uint64_t bytes = 0;
  if (__builtin_add_overflow(last, 1, &bytes) ||
      __builtin_mul_overflow(bytes, (uint64_t)gllmk_dtype_size(dtype), &bytes) ||
      __builtin_add_overflow(bytes, dl->byte_offset, &bytes))
    return core_fail(GLLMK_ERR_OVERFLOW, "%s: the extent overflows", fn);
  *out_bytes = bytes;
  return GLLMK_OK;
}

gllmk_status gllmk_dlpack_import(gllmk_context *context, DLManagedTensor *managed,
                                 gllmk_buffer **out_buffer, gllmk_tensor *out_tensor) {
  static const char fn[] = "gllmk_dlpack_import";
  core_clear_error();
  if (managed == NULL || out_buffer == NULL || out_tensor == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                     managed == NULL ? "managed" : out_buffer == NULL ? "out_buffer" : "out_tensor");
  core_context *c = core_context_get(context);
  if (c == NULL)
    return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: context is not a live gllmk context", fn);
  const DLTensor *dl = &managed->dl_tensor;
  uint32_t kind;
  if (dl->device.device_type == kDLCPU) {
    kind = GLLMK_MEMORY_HOST;
  } else if (dl->device.device_type == kDLCUDA) {
    kind = GLLMK_MEMORY_CUDA_DEVICE;
    if ((uint32_t)dl->device.device_id != c->device_index)
      return core_fail(GLLMK_ERR_INVALID_ARGUMENT,
                       "%s: the tensor is on CUDA device %d, the context on device %u", fn,
                       dl->device.device_id, c->device_index);
  } else {
    return core_fail(GLLMK_ERR_UNSUPPORTED, "%s: DLPack device type %d is not CPU or CUDA", fn,
                     (int)dl->device.device_type);
  }
  gllmk_tensor tensor;
  uint64_t bytes = 0;
  CORE_TRY(describe(fn, dl, &tensor, &bytes));
  gllmk_external_memory memory = {.kind = kind, .address = (uint64_t)(uintptr_t)dl->data,
                                  .size = bytes, .release = release_managed,
                                  .release_data = managed};
  gllmk_buffer *buffer;
  CORE_TRY(gllmk_buffer_wrap(context, &memory, &buffer));
  tensor.buffer = buffer;
  *out_buffer = buffer;
  *out_tensor = tensor;
  return GLLMK_OK;
}

/* One allocation holds the view, its shape and its strides. */
typedef struct exported {
  DLManagedTensor managed;
  int64_t shape[GLLMK_MAX_DIMS], strides[GLLMK_MAX_DIMS];
} exported;

static void free_exported(DLManagedTensor *managed) { free(managed->manager_ctx); }

gllmk_status gllmk_dlpack_export(const gllmk_tensor *tensor, DLManagedTensor **out_managed) {
  static const char fn[] = "gllmk_dlpack_export";
  core_clear_error();
  if (out_managed == NULL) return core_fail(GLLMK_ERR_INVALID_ARGUMENT, "%s: out_managed is NULL", fn);
  core_tensor_span span;
  CORE_TRY(core_tensor_check(fn, "tensor", tensor, &span));
  uint32_t kind;
  uint64_t address;
  CORE_TRY(gllmk_buffer_address(tensor->buffer, &kind, &address));
  exported *e = calloc(1, sizeof *e);
  if (e == NULL) return core_fail(GLLMK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
  DLTensor *dl = &e->managed.dl_tensor;
  dl->data = (void *)(uintptr_t)address;
  dl->device.device_type = kind == GLLMK_MEMORY_CUDA_DEVICE ? kDLCUDA : kDLCPU;
  dl->device.device_id = kind == GLLMK_MEMORY_CUDA_DEVICE ? (int)span.buffer->context->device_index : 0;
  dl->ndim = tensor->ndim;
  for (size_t i = 0; i < DTYPE_MAP_COUNT; i++)
    if (dtype_map[i].dtype == (gllmk_dtype)tensor->dtype)
      dl->dtype = (DLDataType){dtype_map[i].code, dtype_map[i].bits, 1};
  memcpy(e->shape, tensor->shape, sizeof e->shape);
  memcpy(e->strides, tensor->strides, sizeof e->strides);
  dl->shape = e->shape;
  dl->strides = e->strides;
  dl->byte_offset = tensor->offset;
  e->managed.manager_ctx = e;
  e->managed.deleter = free_exported;
  *out_managed = &e->managed;
  return GLLMK_OK;
}
