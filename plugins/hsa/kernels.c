/*
 * kernels.c - what the host knows of kernels/, below the family files: the
 * kernel table (kernels/gk_kernels.def: symbol names and argument layout),
 * for the backends and the code-object test; checks of the params layouts
 * and dtype codes; and the messages for the error word the kernels raise.
 */
#include <stdio.h>

#include "backend.h"

/* By kernel id: the row order of gk_kernels.def does not matter here. */
const gk_kernel_info gk_kernels[GK_KERNEL_COUNT] = {
#define GK_KERNEL(name, buffers, params, wg, lds) \
  [GK_KERNEL_##name] = {"gk_" #name, buffers, sizeof(params), wg},
#include "kernels/gk_kernels.def"
};

/* The parameter blocks must have one layout in C and in OpenCL C: only
 * 8- and 4-byte fields, 8-byte fields first, size a multiple of 8. */
#define GK_CHECK_PARAMS(type) \
  _Static_assert(sizeof(type) % 8 == 0 && _Alignof(type) == 8, #type " is not 8-byte padded")
GK_CHECK_PARAMS(gk_bytes_params);
GK_CHECK_PARAMS(gk_copy_params);
GK_CHECK_PARAMS(gk_fill_params);
GK_CHECK_PARAMS(gk_eltwise_params);
GK_CHECK_PARAMS(gk_norm_params);
GK_CHECK_PARAMS(gk_rope_params);
GK_CHECK_PARAMS(gk_embedding_params);
GK_CHECK_PARAMS(gk_kv_append_params);
GK_CHECK_PARAMS(gk_matmul_params);
GK_CHECK_PARAMS(gk_attention_params);
GK_CHECK_PARAMS(gk_paged_params);
GK_CHECK_PARAMS(gk_token_params);

/* The kernels compare dtypes with GK_F32 ... (the copy kernel gets the
 * tensors' gllmk_dtype): the codes must be equal. */
_Static_assert(GK_F32 == GLLMK_F32 && GK_F16 == GLLMK_F16 && GK_BF16 == GLLMK_BF16 &&
                   GK_I32 == GLLMK_I32,
               "gk_params.h dtype codes differ from gllmk_dtype");

/* ---------------------------------------------------------- errors */

static int64_t word_pair(const uint32_t *words, int first) {
  return (int64_t)((uint64_t)words[first] | (uint64_t)words[first + 1] << 32);
}

void gk_describe_error(const uint32_t words[GK_ERROR_WORDS], char *text, size_t text_size) {
  long long index = word_pair(words, 1), value = word_pair(words, 3), limit = word_pair(words, 5);
  switch (words[0]) {
    case GK_ERROR_EMBEDDING_ID:
      snprintf(text, text_size, "gllmk_embedding: ids[%lld]=%lld is outside [0, %lld)", index,
               value, limit);
      break;
    case GK_ERROR_KV_SLOT:
      snprintf(text, text_size,
               "gllmk_kv_append: slots[%lld]=%lld is outside the cache's %lld slots", index, value,
               limit);
      break;
    case GK_ERROR_PAGED_TABLE:
      snprintf(text, text_size,
               "gllmk_paged_attention: block_table entry %lld = %lld is outside [0, %lld)", index,
               value, limit);
      break;
    case GK_ERROR_PAGED_SEQUENCE:
      snprintf(text, text_size,
               "gllmk_paged_attention: sequence %lld: q_starts and seq_lens[%lld]=%lld do not fit "
               "(at most %lld positions in its block table)",
               index, index, value, limit);
      break;
    case GK_ERROR_KV_LENS:
      snprintf(text, text_size, "gllmk_attention: kv_lens[%lld]=%lld is outside [0, %lld]", index,
               value, limit);
      break;
    default:
      snprintf(text, text_size, "a kernel raised unknown error code %u", words[0]);
      break;
  }
}
