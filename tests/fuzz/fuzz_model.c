/*
 * fuzz_model.c - a libFuzzer target over libgllmk-model's file parsers
 * (issue 21): config.json (model_config_parse) and safetensors headers
 * (st_parse), fed from memory.
 *
 * The first byte picks the parser; the rest is the file. After a parse that
 * succeeds it checks what the loader relies on:
 *   - config: every size is positive, heads divide, head_dim fits the ops,
 *     the rotary dimension is even and at most head_dim, the per-pair
 *     frequencies are finite and positive;
 *   - safetensors: every tensor lies inside the file's data, its byte count
 *     is its shape times its dtype size, and no two tensors overlap;
 * and a parse that fails leaves a message naming the input. ASan/UBSan
 * watch every access; LeakSanitizer every allocation (jansson's included).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/model/model_internal.h"

static void check(int ok) {
  if (!ok) abort();
}

static void fuzz_config(const uint8_t *data, size_t size) {
  model_config c;
  if (model_config_parse((const char *)data, size, "fuzz/config.json", &c) != GLLMK_OK) {
    check(strstr(gllmk_last_error(), "fuzz/config.json") != NULL);
    return;
  }
  check(c.hidden > 0 && c.intermediate > 0 && c.layers > 0 && c.vocab > 0);
  check(c.heads > 0 && c.kv_heads > 0 && c.heads % c.kv_heads == 0);
  check(c.head_dim % 8 == 0 && c.head_dim > 0 && c.head_dim <= 256);
  check(c.rotary_dim >= 2 && c.rotary_dim % 2 == 0 && c.rotary_dim <= c.head_dim);
  check(c.max_position > 0 && c.rms_eps > 0);
  float inv_freq[128];
  model_config_inv_freq(&c, inv_freq);
  for (uint32_t j = 0; j < c.rotary_dim / 2; j++) check(isfinite(inv_freq[j]) && inv_freq[j] > 0);
}

static void fuzz_safetensors(const uint8_t *data, size_t size) {
  st_file f;
  if (st_parse(data, size, "fuzz/model.safetensors", &f) != GLLMK_OK) {
    check(strstr(gllmk_last_error(), "fuzz/model.safetensors") != NULL);
    return;
  }
  for (uint32_t i = 0; i < f.count; i++) {
    const st_tensor *t = &f.tensors[i];
    uint64_t bytes = gllmk_dtype_size((gllmk_dtype)t->dtype);
    for (int32_t d = 0; d < t->ndim; d++) bytes *= (uint64_t)t->shape[d];
    check(bytes == t->bytes);
    check(t->data >= data + 8 && t->data + t->bytes <= data + size);
    for (uint32_t j = 0; j < i; j++) {
      const st_tensor *u = &f.tensors[j];
      check(t->bytes == 0 || u->bytes == 0 || t->data + t->bytes <= u->data ||
            u->data + u->bytes <= t->data);
    }
  }
  st_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  /* A copy of exactly `size` bytes, so that ASan sees any read past the end. */
  uint8_t *copy = malloc(size - 1 ? size - 1 : 1);
  if (copy == NULL) return 0;
  memcpy(copy, data + 1, size - 1);
  if (data[0] & 1)
    fuzz_safetensors(copy, size - 1);
  else
    fuzz_config(copy, size - 1);
  free(copy);
  return 0;
}
