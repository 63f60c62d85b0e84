/*
 * module.cu - the one translation unit that `make blobs` compiles into
 * blobs/cuda/gllmk-kernels.fatbin (a fatbin holds one module per
 * architecture, so every kernel file is part of this unit). One kernel file
 * per op family, named as its host launcher plugins/cuda/<family>.c.
 */
#include "elementwise.cu"
#include "norm.cu"
#include "rope.cu"
#include "gather.cu"
#include "matmul.cu"
#include "attention.cu"
#include "sample.cu"
#include "collective.cu"
