/*
 * blobs.S - embeds the committed code objects (blobs/hsa/<target>.co)
 * into the plugin: hsa_blob_<target> .. hsa_blob_<target>_end, hidden,
 * 64-byte aligned. The assembler finds the files through -Wa,-I,blobs/hsa
 * (see plugin.mk).
 */
#define HSA_STR2(x) #x
#define HSA_STR(x) HSA_STR2(x)

#define HSA_TARGET(target)                    \
  .balign 64;                                 \
  .global hsa_blob_##target;                  \
  .hidden hsa_blob_##target;                  \
  hsa_blob_##target:;                         \
  .incbin HSA_STR(target.co);                 \
  .global hsa_blob_##target##_end;            \
  .hidden hsa_blob_##target##_end;            \
  hsa_blob_##target##_end:;

  .section .rodata.gllmk_hsa_code_objects, "a"
#include "targets.def"

  .section .note.GNU-stack, "", @progbits
