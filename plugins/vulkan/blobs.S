/*
 * blobs.S - embeds the committed SPIR-V modules (blobs/vulkan/) into the
 * plugin. For each module: vk_spv_<name>_<form> .. vk_spv_<name>_<form>_end,
 * hidden, 4-byte aligned. The assembler finds the files through
 * -Wa,-I,blobs/vulkan (see plugin.mk).
 */
#define VK_STR2(x) #x
#define VK_STR(x) VK_STR2(x)

#define VK_BLOB(symbol, file)                 \
  .balign 4;                                  \
  .global symbol;                             \
  .hidden symbol;                             \
  symbol:;                                    \
  .incbin VK_STR(file);                       \
  .global symbol##_end;                       \
  .hidden symbol##_end;                       \
  symbol##_end:;

#define VK_KERNEL(name)                                 \
  VK_BLOB(vk_spv_##name##_native, name.spv)             \
  VK_BLOB(vk_spv_##name##_portable, name.portable.spv)
#define VK_KERNEL_NATIVE(name) VK_BLOB(vk_spv_##name##_native, name.spv)

  .section .rodata.gllmk_vulkan_spirv, "a"
#include "kernels.def"

  .section .note.GNU-stack, "", @progbits
