/*
 * gllmk_dlpack.h - DLPack import and export of gllmk tensors, so that
 * PyTorch, NumPy or any DLPack user and gllmk work on each other's memory
 * without a copy. Needs <dlpack/dlpack.h> (Debian: libdlpack-dev).
 */
#ifndef GLLMK_GLLMK_DLPACK_H_
#define GLLMK_GLLMK_DLPACK_H_

#include <dlpack/dlpack.h>

#include "gllmk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Takes ownership of `managed` and wraps its memory as a new buffer of
 * `context` (no copy), with *out_tensor viewing its elements (shape, strides
 * and byte offset as DLPack gives them). The DLPack deleter runs when the
 * buffer is freed (or the context destroyed). On failure nothing is taken:
 * the caller still owns `managed`.
 * Accepted: kDLCPU memory on the cpu backend, kDLCUDA memory of the
 * context's device on cuda; float32, float16, bfloat16 and int32, one lane,
 * 1 to GLLMK_MAX_DIMS dims (0-d becomes [1]), every dim >= 1, strides >= 0. */
GLLMK_API gllmk_status gllmk_dlpack_import(gllmk_context *context, DLManagedTensor *managed,
                                           gllmk_buffer **out_buffer, gllmk_tensor *out_tensor);

/* A DLPack view of `tensor` (no copy). gllmk keeps owning the memory: the
 * buffer must outlive the view. The view's deleter frees only the view. */
GLLMK_API gllmk_status gllmk_dlpack_export(const gllmk_tensor *tensor,
                                           DLManagedTensor **out_managed);

#ifdef __cplusplus
}
#endif

#endif /* GLLMK_GLLMK_DLPACK_H_ */
