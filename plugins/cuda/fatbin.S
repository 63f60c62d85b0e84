/* The kernel fatbin, embedded read-only; `make blobs` rebuilds the file. */
	.section .rodata.gllmk_cuda_fatbin, "a"
	.balign 64
	.globl gllmk_cuda_fatbin
	.hidden gllmk_cuda_fatbin
	.type gllmk_cuda_fatbin, @object
gllmk_cuda_fatbin:
	.incbin "blobs/cuda/gllmk-kernels.fatbin"
	.globl gllmk_cuda_fatbin_end
	.hidden gllmk_cuda_fatbin_end
gllmk_cuda_fatbin_end:
	.size gllmk_cuda_fatbin, gllmk_cuda_fatbin_end - gllmk_cuda_fatbin
	.section .note.GNU-stack, "", @progbits
