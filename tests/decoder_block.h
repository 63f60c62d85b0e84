/*
 * decoder_block.h - one Llama-style decoder layer built from gllmk ops and
 * checked against float64, run by the conformance suite on every backend.
 */
#ifndef GLLMK_TESTS_DECODER_BLOCK_H_
#define GLLMK_TESTS_DECODER_BLOCK_H_

#include <stdbool.h>
#include <stdint.h>

#include "gllmk/gllmk.h"

/* Runs the layer (prefill of a few dozen tokens; `small` for emulated
 * devices and --quick) in `dtype` on `ctx` with inputs drawn from `seed`,
 * and fails the running Check test on a mismatch. */
void decoder_block_check(gllmk_context *ctx, gllmk_dtype dtype, bool small, uint64_t seed);

#endif /* GLLMK_TESTS_DECODER_BLOCK_H_ */
