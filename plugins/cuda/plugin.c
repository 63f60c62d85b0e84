/*
 * plugin.c - the cuda backend's descriptor, what gllmk_plugin_entry
 * returns: driver loading, probe and device info (driver.c), contexts and
 * synchronize (device.c), memory (memory.c), recordings, timestamps and
 * caller-owned memory (graph.c), collectives through NCCL (nccl.c), and one
 * entry per op from the family files
 * (ops.h: elementwise.c, norm.c, rope.c, gather.c, matmul.c, attention.c,
 * sample.c). The embedded fatbin's description is in fatbin.c.
 */
#include "internal.h"
#include "ops.h"

/* Only matmul (a_norm, rope, kv or glu beyond one row of a, by shapes),
 * rope (16-bit rotary_dim past what shared memory holds) and attention (a
 * head dim or grid past the device's limits) can refuse a valid call; the
 * last two run their host code as for a launch, launching nothing, and answer.
 * sample's planning grows the scratch its top_k path needs, so that it
 * exists before a recording of the call becomes a CUDA graph. */
static gllmk_status cuda_supports(gllmk_plugin_device *dev, gllmk_op op, const void *args) {
  if (op == GLLMK_OP_matmul) return cuda_matmul_supports(dev, args);
  if (op == GLLMK_OP_rope) return cuda_rope_supports(dev, args);
  if (op == GLLMK_OP_argmax) return cuda_argmax_supports(dev, args);
  if (op == GLLMK_OP_sample) return cuda_sample_supports(dev, args);
  if (op == GLLMK_OP_attention) return cuda_attention_supports(dev, args);
  if (op == GLLMK_OP_paged_attention) return cuda_paged_attention_supports(dev, args);
  return GLLMK_OK;
}

/* ---------------------------------------------------------- descriptor */

static const gllmk_plugin_ops cuda_ops = {
#define GLLMK_OP(name) .name = cuda_##name,
#include "gllmk/gllmk_ops.def"
};

static const gllmk_plugin cuda_plugin = {
    .struct_size = sizeof(gllmk_plugin),
    .abi_version = GLLMK_PLUGIN_ABI_VERSION,
    .name = "cuda",
    .kind = GLLMK_BACKEND_CUDA,
    .version = "0.1.0",
    .probe = cuda_probe,
    .device_info = cuda_device_info,
    .describe = cuda_describe,
    .open = cuda_open,
    .close = cuda_close,
    .synchronize = cuda_synchronize,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_write = cuda_mem_write,
    .mem_read = cuda_mem_read,
    .mem_copy = cuda_mem_copy,
    .mem_fill = cuda_mem_fill,
    .supports = cuda_supports,
    .mem_import = cuda_mem_import,
    .mem_address = cuda_mem_address,
    .record_begin = cuda_record_begin,
    .record_end = cuda_record_end,
    .record_replay = cuda_record_replay,
    .record_free = cuda_record_free,
    .mark = cuda_mark,
    .marks_read = cuda_marks_read,
    .comm_create = cuda_comm_create,
    .comm_free = cuda_comm_free,
    .all_reduce = cuda_all_reduce,
    .all_gather = cuda_all_gather,
    .ops = &cuda_ops,
    .ops_size = sizeof cuda_ops,
};

GLLMK_PLUGIN_EXPORT const gllmk_plugin *gllmk_plugin_entry(void) { return &cuda_plugin; }
