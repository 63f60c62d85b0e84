/*
 * pocl_source.S - embeds the kernel source for the test-only PoCL plugin:
 * gk_all.cl with its includes flattened by the C preprocessor (tests.mk),
 * NUL-terminated. The assembler finds gk_pocl.cl through -Wa,-I (tests.mk).
 */
  .section .rodata.gllmk_hsa_pocl_source, "a"
  .global gk_pocl_source
  .hidden gk_pocl_source
gk_pocl_source:
  .incbin "gk_pocl.cl"
  .byte 0

  .section .note.GNU-stack, "", @progbits
