/*
 * nccl.h - the few NCCL types, constants and calls the cuda plugin's
 * collectives (nccl.c) use, declared here so that the plugin builds with no
 * NCCL header and loads libnccl.so.2 only when a communicator is created.
 * Values and signatures follow NCCL 2's public ABI (nccl.h); ncclBfloat16
 * needs NCCL 2.10 or newer, which nccl.c checks.
 */
#ifndef GLLMK_CUDA_NCCL_H_
#define GLLMK_CUDA_NCCL_H_

#include <stddef.h>

#include "cuda_driver.h"

/* NCCL's enums are int-sized (nccl.h keeps them so for its ABI). */
typedef struct ncclComm *ncclComm_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;

enum { ncclSuccess = 0 };

/* ncclDataType_t */
enum {
  ncclInt32 = 2,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclBfloat16 = 9,
};

/* ncclRedOp_t */
enum { ncclSum = 0 };

/* NCCL_VERSION(2, 10, 0): the first release with ncclBfloat16. */
#define GLLMK_NCCL_MIN_VERSION 21000

/* NCCL_SYMBOL(return type, name, parameters): every NCCL function the
 * plugin calls, all required. A cudaStream_t is a CUstream. */
#define NCCL_SYMBOLS(NCCL_SYMBOL)                                                                            \
  NCCL_SYMBOL(ncclResult_t, ncclGetVersion, (int *version))                                                  \
  NCCL_SYMBOL(const char *, ncclGetErrorString, (ncclResult_t result))                                       \
  NCCL_SYMBOL(ncclResult_t, ncclCommInitAll, (ncclComm_t *comms, int count, const int *cuda_ordinals))       \
  NCCL_SYMBOL(ncclResult_t, ncclCommDestroy, (ncclComm_t comm))                                              \
  NCCL_SYMBOL(ncclResult_t, ncclGroupStart, (void))                                                          \
  NCCL_SYMBOL(ncclResult_t, ncclGroupEnd, (void))                                                            \
  NCCL_SYMBOL(ncclResult_t, ncclAllReduce,                                                                   \
              (const void *send, void *receive, size_t count, ncclDataType_t type, ncclRedOp_t op,          \
               ncclComm_t comm, CUstream stream))                                                            \
  NCCL_SYMBOL(ncclResult_t, ncclAllGather,                                                                   \
              (const void *send, void *receive, size_t send_count, ncclDataType_t type, ncclComm_t comm,     \
               CUstream stream))

#endif /* GLLMK_CUDA_NCCL_H_ */
