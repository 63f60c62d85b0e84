/*
 * ops.h - the cpu plugin's op entry points, grouped by the family file that
 * defines them. Every backend has the same family files (elementwise, norm,
 * rope, gather, matmul, attention, sample), so an op is found by name.
 *
 * The family files sit above the shared layer (cpu_plugin.c, cpu_pool.c,
 * cpu_tasks.c, cpu_convert*.c, cpu_vec*.c, cpu_gemm*.c and their headers),
 * which never calls into them; the one reference from below is cpu_plugin.c's
 * op table, built from gllmk/gllmk_ops.def, so an op missing here fails to
 * compile.
 */
#ifndef GLLMK_CPU_OPS_H_
#define GLLMK_CPU_OPS_H_

#include "cpu_internal.h"

/* elementwise.c */
gllmk_status cpu_copy(gllmk_plugin_device *device, const gllmk_copy_args *args);
gllmk_status cpu_fill(gllmk_plugin_device *device, const gllmk_fill_args *args);
gllmk_status cpu_add(gllmk_plugin_device *device, const gllmk_add_args *args);
gllmk_status cpu_mul(gllmk_plugin_device *device, const gllmk_mul_args *args);
gllmk_status cpu_mul_add(gllmk_plugin_device *device, const gllmk_mul_add_args *args);
gllmk_status cpu_silu(gllmk_plugin_device *device, const gllmk_silu_args *args);
gllmk_status cpu_gelu(gllmk_plugin_device *device, const gllmk_gelu_args *args);
gllmk_status cpu_add_gelu(gllmk_plugin_device *device, const gllmk_add_gelu_args *args);
gllmk_status cpu_swiglu(gllmk_plugin_device *device, const gllmk_swiglu_args *args);

/* norm.c */
gllmk_status cpu_rmsnorm(gllmk_plugin_device *device, const gllmk_rmsnorm_args *args);
gllmk_status cpu_add_rmsnorm(gllmk_plugin_device *device, const gllmk_add_rmsnorm_args *args);
gllmk_status cpu_layernorm(gllmk_plugin_device *device, const gllmk_layernorm_args *args);
gllmk_status cpu_softmax(gllmk_plugin_device *device, const gllmk_softmax_args *args);

/* rope.c */
gllmk_status cpu_rope(gllmk_plugin_device *device, const gllmk_rope_args *args);

/* gather.c */
gllmk_status cpu_embedding(gllmk_plugin_device *device, const gllmk_embedding_args *args);
gllmk_status cpu_kv_append(gllmk_plugin_device *device, const gllmk_kv_append_args *args);

/* matmul.c */
gllmk_status cpu_matmul(gllmk_plugin_device *device, const gllmk_matmul_args *args);

/* attention.c */
gllmk_status cpu_attention(gllmk_plugin_device *device, const gllmk_attention_args *args);
gllmk_status cpu_paged_attention(gllmk_plugin_device *device,
                                 const gllmk_paged_attention_args *args);

/* sample.c */
gllmk_status cpu_argmax(gllmk_plugin_device *device, const gllmk_argmax_args *args);
gllmk_status cpu_sample(gllmk_plugin_device *device, const gllmk_sample_args *args);

/* collective.c: the loopback communicator (plugin ABI 2.3) */
gllmk_status cpu_comm_create(gllmk_plugin_device *const *devices, uint32_t count,
                             gllmk_plugin_comm **out_comm);
void cpu_comm_free(gllmk_plugin_comm *comm);
gllmk_status cpu_all_reduce(gllmk_plugin_comm *comm, const gllmk_tensor *outs,
                            const gllmk_tensor *ins);
gllmk_status cpu_all_gather(gllmk_plugin_comm *comm, const gllmk_tensor *outs,
                            const gllmk_tensor *ins);

#endif /* GLLMK_CPU_OPS_H_ */
