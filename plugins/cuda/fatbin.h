/*
 * fatbin.h - the embedded kernel fatbin (blobs/cuda/gllmk-kernels.fatbin,
 * placed in the plugin by fatbin.S) and what it holds.
 */
#ifndef GLLMK_CUDA_FATBIN_H_
#define GLLMK_CUDA_FATBIN_H_

#include <stddef.h>

/* The image for cuModuleLoadData. */
const void *cuda_fatbin_data(void);

/* Writes "kernels: SASS sm_75 ..., PTX compute_90" into text; returns the
 * length written (always NUL-terminated when size > 0). */
size_t cuda_fatbin_describe(char *text, size_t size);

/* Writes which code a device of compute capability `sm` (10 * major + minor)
 * runs, by the driver's rules: its own SASS, else SASS of the same major
 * version, else the newest PTX not newer than the device, compiled at load. */
size_t cuda_fatbin_choice(int sm, char *text, size_t size);

#endif /* GLLMK_CUDA_FATBIN_H_ */
