/*
 * cpu_convert_neon_bf16.c - the NEON row conversions again, for CPUs with
 * FEAT_BF16: F32 -> BF16 with bfcvtn (cpu_neon.h).
 */
#include "cpu_convert_neon.c"
