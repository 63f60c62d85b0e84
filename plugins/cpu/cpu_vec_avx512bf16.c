/*
 * cpu_vec_avx512bf16.c - the AVX-512 math kernels again, for CPUs with
 * AVX512_BF16: F32 -> BF16 stores take one vcvtneps2bf16 instead of seven
 * instructions, which is most of the cost of a BF16 activation's store.
 */
#include "cpu_vec_avx512.c"
