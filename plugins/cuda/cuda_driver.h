/*
 * cuda_driver.h - the few CUDA driver API types, constants and prototypes the
 * cuda plugin uses, declared here so that the plugin builds on a machine with
 * no CUDA toolkit. Values and signatures follow the driver's public ABI as of
 * CUDA 12.0 (the version the plugin asks cuGetProcAddress for).
 */
#ifndef GLLMK_CUDA_DRIVER_H_
#define GLLMK_CUDA_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

typedef struct CUuuid {
  unsigned char bytes[16];
} CUuuid;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
};

/* cuDeviceGetAttribute */
enum {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

/* cuFuncSetAttribute */
enum {
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9,
};

/* cuLaunchKernelEx: a kernel may start while the one ahead of it in the
 * stream finishes (it waits with griddepcontrol.wait before touching
 * memory). The attribute value is a 64-byte union; this one is an int. */
enum {
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
};
typedef struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization;
  } value;
} CUlaunchAttribute;
typedef struct CUlaunchConfig {
  unsigned int grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  CUlaunchAttribute *attributes;
  unsigned int attribute_count;
} CUlaunchConfig;

/* cuStreamBeginCapture: other threads' unsafe calls do not invalidate it. */
enum {
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
};

/* cuPointerGetAttribute */
enum {
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
  CU_MEMORYTYPE_DEVICE = 2,
};

enum {
  CU_STREAM_NON_BLOCKING = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
};

/* cuTensorMapEncodeTiled */
enum {
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9,
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_128B = 3,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0, /* out-of-bounds elements read as zeros */
};

/* cuGetProcAddress_v2 */
typedef enum CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
} CUdriverProcAddressQueryResult;

typedef CUresult (*cu_get_proc_address_v2_fn)(const char *symbol, void **pfn, int cuda_version,
                                              uint64_t flags,
                                              CUdriverProcAddressQueryResult *status);

/* The driver ABI version the prototypes in cuda_symbols.def belong to. */
#define GLLMK_CUDA_ABI_VERSION 12000

#endif /* GLLMK_CUDA_DRIVER_H_ */
