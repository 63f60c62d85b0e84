/*
 * cpu_vec.c - the portable build of the math kernels (16-byte vectors, which
 * every compiler target lowers to its own SIMD or to scalar code).
 */
#define VEC_BYTES 16
#define VEC_HAS_FMA 0
#define VEC_FMA(a, b, c) ((a) * (b) + (c))
#define VEC_FMA64(a, b, c) ((a) * (b) + (c))
#define VEC_TABLE cpu_vec_portable
#define VEC_NAME "portable"
#include "cpu_vec.inc"
