/*
 * bench_cases.c - the rows gllmk-bench runs, in table order.
 *
 * Shapes are Llama-3-8B's: hidden 4096, intermediate 14336, 32 query and 8
 * kv heads of 128, vocab 128256. Row-wise ops run a prefill of at least
 * 4096 tokens, grown until each streamed tensor exceeds the cache (bench.h).
 * Columns: label, op, dtype, dtype2 (copy's destination), m, n, k, flags
 * (QUICK: part of --quick; DEVICE: a device row, too heavy for a cpu).
 */
#include "bench.h"

#define F32 GLLMK_F32
#define BF16 GLLMK_BF16
#define F16 GLLMK_F16
#define TOKENS 4096 /* minimum rows of a prefill */
#define HIDDEN MODEL_HIDDEN
#define INTER MODEL_INTERMEDIATE
#define VOCAB MODEL_VOCAB
#define QKV ((MODEL_HEADS + 2 * MODEL_KV_HEADS) * MODEL_HEAD_DIM)
#define QUICK CASE_QUICK
#define DEVICE CASE_DEVICE /* skipped on the cpu backend */

const bench_case bench_cases[] = {
    {"copy", &op_copy, F32, F32, TOKENS, HIDDEN, 0, QUICK},
    {"cast", &op_copy, F32, BF16, TOKENS, HIDDEN, 0, 0},
    {"cast", &op_copy, F32, F16, TOKENS, HIDDEN, 0, 0},
    {"copy", &op_copy, BF16, BF16, TOKENS, HIDDEN, 0, 0},
    {"add", &op_add, F32, F32, TOKENS, HIDDEN, 0, 0},
    {"add", &op_add, BF16, BF16, TOKENS, HIDDEN, 0, QUICK},
    {"mul_add", &op_mul_add, F32, F32, TOKENS, HIDDEN, 0, 0},
    {"mul_add", &op_mul_add, BF16, BF16, TOKENS, HIDDEN, 0, 0},
    {"rmsnorm", &op_rmsnorm, F32, F32, TOKENS, HIDDEN, 0, 0},
    {"rmsnorm", &op_rmsnorm, BF16, BF16, TOKENS, HIDDEN, 0, QUICK},
    {"add_rmsnorm", &op_add_rmsnorm, F32, F32, TOKENS, HIDDEN, 0, 0},
    {"add_rmsnorm", &op_add_rmsnorm, BF16, BF16, TOKENS, HIDDEN, 0, 0},
    {"layernorm", &op_layernorm, F32, F32, TOKENS, HIDDEN, 0, 0},
    {"layernorm", &op_layernorm, BF16, BF16, TOKENS, HIDDEN, 0, 0},
    /* One logits row per sequence: 131 (f32) or 262 (bf16) rows of the vocab. */
    {"softmax", &op_softmax, F32, F32, 1, VOCAB, 0, QUICK},
    {"softmax", &op_softmax, BF16, BF16, 1, VOCAB, 0, 0},
    {"silu", &op_silu, F32, F32, TOKENS, INTER, 0, 0},
    {"silu", &op_silu, BF16, BF16, TOKENS, INTER, 0, 0},
    {"gelu", &op_gelu, F32, F32, TOKENS, INTER, 0, 0},
    {"gelu", &op_gelu, BF16, BF16, TOKENS, INTER, 0, 0},
    {"add_gelu", &op_add_gelu, F32, F32, TOKENS, INTER, 0, 0},
    {"add_gelu", &op_add_gelu, BF16, BF16, TOKENS, INTER, 0, 0},
    {"swiglu", &op_swiglu, F32, F32, TOKENS, INTER, 0, 0},
    {"swiglu", &op_swiglu, BF16, BF16, TOKENS, INTER, 0, QUICK},
    {"rope", &op_rope, F32, F32, TOKENS, 0, 0, 0},
    {"rope", &op_rope, BF16, BF16, TOKENS, 0, 0, QUICK},
    {"embedding", &op_embedding, F32, F32, TOKENS, HIDDEN, VOCAB, 0},
    {"embedding", &op_embedding, BF16, BF16, TOKENS, HIDDEN, VOCAB, 0},
    {"kv_append", &op_kv_append, F32, F32, TOKENS, 0, 0, 0},
    {"kv_append", &op_kv_append, BF16, BF16, TOKENS, 0, 0, 0},
    {"matmul", &op_matmul, F32, F32, 1024, 1024, 1024, QUICK},
    {"matmul", &op_matmul, F32, F32, 2048, 2048, 2048, 0},
    {"matmul", &op_matmul, BF16, BF16, 1024, 1024, 1024, 0},
    {"matmul", &op_matmul, BF16, BF16, 2048, 2048, 2048, 0},
    /* Decode: one token through the gate/up projection, weight streamed once. */
    {"gemv", &op_matmul, F32, F32, 1, INTER, HIDDEN, QUICK},
    {"gemv", &op_matmul, BF16, BF16, 1, INTER, HIDDEN, QUICK},
    /* Decode of 1 and 32 sequences through each Llama-3-8B weight: q/k/v fused,
     * o, gate/up fused, down, lm_head; bound by streaming the weight once. */
    {"matmul/decode", &op_matmul, BF16, BF16, 1, QKV, HIDDEN, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 1, HIDDEN, HIDDEN, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 1, 2 * INTER, HIDDEN, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 1, HIDDEN, INTER, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 1, VOCAB, HIDDEN, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 32, QKV, HIDDEN, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 32, HIDDEN, HIDDEN, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 32, 2 * INTER, HIDDEN, QUICK},
    {"matmul/decode", &op_matmul, BF16, BF16, 32, HIDDEN, INTER, 0},
    {"matmul/decode", &op_matmul, BF16, BF16, 32, VOCAB, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, F32, F32, 512, INTER, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 512, INTER, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, F32, F32, 4096, INTER, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 4096, INTER, HIDDEN, 0},
    /* Every Llama-3-8B weight at prefill batches of 512 and 4096 tokens:
     * q/k/v fused, o, gate/up fused, down, lm_head. */
    {"matmul/prefill", &op_matmul, BF16, BF16, 512, QKV, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 512, HIDDEN, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 512, 2 * INTER, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 512, HIDDEN, INTER, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 512, VOCAB, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 4096, QKV, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 4096, HIDDEN, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 4096, 2 * INTER, HIDDEN, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 4096, HIDDEN, INTER, 0},
    {"matmul/prefill", &op_matmul, BF16, BF16, 4096, VOCAB, HIDDEN, 0},
    {"attention/prefill", &op_attention, BF16, BF16, 512, 0, 0, QUICK},
    {"attention/prefill", &op_attention, F32, F32, 512, 0, 0, 0},
    {"attention/prefill", &op_attention, BF16, BF16, 4096, 0, 0, 0},
    /* Light rows of the other head dims, batches and the unmasked op, which
     * keep the float64 reference of the device rows below checked on a cpu. */
    {"attention/prefill", &op_attention_full, BF16, BF16, 512, 64, 2, 0},
    {"attention/prefill", &op_attention, BF16, BF16, 512, 256, 2, 0},
    /* Issue 27's prefill shapes: S = 4096 at batch 1 and 4, S = 16384 at
     * batch 1, head dims 64, 128 and 256, causal and not; f16 at D = 128. */
    {"attention/prefill", &op_attention, BF16, BF16, 4096, 64, 1, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 4096, 64, 1, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 4096, 64, 4, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 4096, 64, 4, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 16384, 64, 1, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 16384, 64, 1, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 4096, 128, 1, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 4096, 128, 4, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 4096, 128, 4, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 16384, 128, 1, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 16384, 128, 1, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 4096, 256, 1, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 4096, 256, 1, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 4096, 256, 4, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 4096, 256, 4, DEVICE},
    {"attention/prefill", &op_attention, BF16, BF16, 16384, 256, 1, DEVICE},
    {"attention/prefill", &op_attention_full, BF16, BF16, 16384, 256, 1, DEVICE},
    {"attention/prefill", &op_attention, F16, F16, 4096, 128, 1, DEVICE},
    {"attention/prefill", &op_attention_full, F16, F16, 4096, 128, 1, DEVICE},
    /* Decode batches B x contexts L (4 KiB of cache a key; small caches
     * rotate through input sets like every row, so they come from DRAM). */
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 1, 1024, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 1, 4096, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 1, 32768, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 16, 1024, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 16, 4096, 0, QUICK},
    {"paged_attn/decode", &op_paged_attention, F32, F32, 16, 4096, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 32, 1024, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 32, 4096, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 64, 1024, 0, 0},
    {"paged_attn/decode", &op_paged_attention, BF16, BF16, 64, 4096, 0, 0},
    {"argmax", &op_argmax, F32, F32, 1, VOCAB, 0, QUICK},
    {"argmax", &op_argmax, F32, F32, 128, VOCAB, 0, 0},
    {"argmax", &op_argmax, BF16, BF16, 1, VOCAB, 0, 0},
    {"argmax", &op_argmax, BF16, BF16, 128, VOCAB, 0, 0},
    {"sample", &op_sample, F32, F32, 1, VOCAB, 0, QUICK},
    {"sample", &op_sample, F32, F32, 128, VOCAB, 0, 0},
};

const int bench_case_count = (int)(sizeof bench_cases / sizeof bench_cases[0]);
