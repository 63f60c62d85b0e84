/*
 * cpu_vec_neon_bf16.c - the NEON math kernels again, for CPUs with FEAT_BF16
 * (HWCAP2_BF16): F32 -> BF16 stores take one bfcvtn instead of the nine
 * integer instructions of the rounding, most of the cost of a BF16
 * activation's store.
 */
#include "cpu_vec_neon.c"
