/*
 * rope.c - the rope family: rope (rotary position embedding, NeoX and GPT-J
 * pairs, theta's frequencies or the caller's inv_freq). It fills a
 * cuda_rope_params (kernels/cuda_params.h), picks the kernel from
 * kernels/rope.cu (f32 rows: barrier-free; 16-bit rows: angles shared in
 * shared memory) and a launch shape, and enqueues it on the context's
 * stream; it also answers cuda_rope_supports (16-bit rotary_dim past what
 * shared memory holds). From below it uses launch.h's helpers and
 * cuda_launch (device.c).
 */
#include <math.h>
#include <string.h>

#include "launch.h"

/* The kernel is picked as CK_rope_f32 + variant(dtype). */
_Static_assert(CUDA_DTYPE_VARIANTS(rope), "kernels.def: f32, f16, bf16 variants in gllmk_dtype order");

static gllmk_status run_rope(gllmk_plugin_device *dev, const gllmk_rope_args *args) {
  const gllmk_tensor *x = args->x, *out = args->out;
  cuda_rope_params p;
  memset(&p, 0, sizeof p);
  p.out = cuda_tensor_address(out);
  p.x = cuda_tensor_address(x);
  p.positions = cuda_tensor_address(args->positions);
  p.inv_freq = args->inv_freq ? cuda_tensor_address(args->inv_freq) : 0; /* 0: theta's */
  /* [tokens, heads, head_dim] with any strides on the leading dims (a head
   * slice of a fused q/k/v tensor, permuted dims, padded rows). */
  p.tokens = x->shape[0];
  p.heads = x->shape[1];
  p.head_dim = x->shape[2];
  p.x_token_stride = dim_stride(x, 0);
  p.x_stride = dim_stride(x, 1);
  p.out_token_stride = dim_stride(out, 0);
  p.out_stride = dim_stride(out, 1);
  p.frequency_ratio = pow((double)args->theta, -2.0 / args->rotary_dim);
  p.theta = args->theta;
  p.rotary_dim = args->rotary_dim;
  p.style = args->style;
  p.vec = p.head_dim % 8 == 0 && p.rotary_dim % 16 == 0 &&
          strides_aligned16(x, (const int64_t[]){p.x_token_stride, p.x_stride}, 2) &&
          strides_aligned16(out, (const int64_t[]){p.out_token_stride, p.out_stride}, 2);
  const enum cuda_kernel_id kernel = CK_rope_f32 + variant(out->dtype);
  /* Enough blocks to fill the device; each walks several tokens. */
  const uint32_t blocks = clamp_u32(p.tokens, 16u * (uint32_t)dev->multiprocessors);
  if (out->dtype != GLLMK_F32) {
    const uint32_t smem = (uint32_t)(p.rotary_dim / 2) * 16u; /* frequencies and (cos, sin) */
    if (smem > 48 * 1024)
      return cuda_host->fail(GLLMK_ERR_UNSUPPORTED, "gllmk_rope: the cuda backend supports 16-bit rotary_dim up to 6144");
    const int64_t units = p.heads * (p.vec ? p.rotary_dim / 16 : p.rotary_dim / 2);
    return cuda_launch(dev, kernel, blocks, 1, 1, block_for(units, 256), smem, &p);
  }
  /* f32: pairs a thread turns at once and such units per head (as the
   * kernel counts them); a block of whole heads' units lets each thread keep
   * one pair group, so each angle it computes serves two heads of a token. */
  const int64_t pairs = !p.vec ? 1 : p.style == GLLMK_ROPE_NEOX ? 4 : 2;
  const int64_t per_head = p.rotary_dim / 2 / pairs;
  const uint32_t threads =
      per_head <= 256 ? (uint32_t)per_head * clamp_u32(ceil_div(p.heads, 2), (uint32_t)(256 / per_head)) : 256u;
  return cuda_launch(dev, kernel, blocks, 1, 1, threads, 0, &p);
}

CUDA_OP_ENTRY(rope)
CUDA_OP_SUPPORTS(rope)
