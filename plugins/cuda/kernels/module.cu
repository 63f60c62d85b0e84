/*
 * module.cu - the one translation unit that `make blobs` compiles into
 * blobs/cuda/gllmk-kernels.fatbin (a fatbin holds one module per
 * architecture, so every kernel file is part of this unit).
 */
#include "elementwise.cu"
#include "norms.cu"
#include "rows.cu"
#include "gemm.cu"
#include "attention.cu"
#include "sampling.cu"
