# vulkan plugin: host C that loads libvulkan.so.1 with dlopen, plus the
# committed SPIR-V of kernels/*.comp embedded by blobs.S. `make blobs`
# rebuilds the SPIR-V with glslc; a normal build needs no shader compiler.
#
# The op families are elementwise.c, norm.c, rope.c, gather.c, matmul.c,
# attention.c and sample.c (entry points in ops.h), each with its kernels
# kernels/<family>.comp and kernels/<family>_<variant>.comp; below them
# device.c, memory.c, dispatch.c, pipeline.c, record.c and timing.c
# (internal.h), and plugin.c (descriptor, op table, loader and probe).
#
# kernels.def lists the kernels. Each VK_KERNEL is compiled in two forms
# (see kernels/common.glsl): <name>.spv with 16-bit storage and subgroup
# operations, <name>.portable.spv without; a VK_KERNEL_NATIVE only in the first.

vulkan_SRCS       := $(wildcard plugins/vulkan/*.c)
vulkan_LDLIBS     := -ldl -lm
vulkan_OBJS_EXTRA := $(B)/obj/plugins/vulkan/blobs.o

VULKAN_DEF         := plugins/vulkan/kernels.def
VULKAN_KERNELS     := $(shell sed -n 's/^VK_KERNEL(\([a-z0-9_]*\))$$/\1/p' $(VULKAN_DEF))
VULKAN_NATIVE_ONLY := $(shell sed -n 's/^VK_KERNEL_NATIVE(\([a-z0-9_]*\))$$/\1/p' $(VULKAN_DEF))
VULKAN_BLOBS       := $(VULKAN_KERNELS:%=blobs/vulkan/%.spv) \
                      $(VULKAN_KERNELS:%=blobs/vulkan/%.portable.spv) \
                      $(VULKAN_NATIVE_ONLY:%=blobs/vulkan/%.spv)

$(B)/obj/plugins/vulkan/blobs.o: plugins/vulkan/blobs.S $(VULKAN_DEF) $(VULKAN_BLOBS)
	@mkdir -p $(dir $@)
	$(CC) -c -Iplugins/vulkan -Wa,-I,blobs/vulkan $(SAN_FLAGS) -o $@ $<

# ----------------------------------------------------------------- blobs
# Rebuilt only by `make blobs` (needs glslc); the results are committed.
#
# The committed blobs came from two compilers: Debian 12's glslc (shaderc
# 2023.2, glslang 11.13) for every kernel but VULKAN_KHR_KERNELS, and Debian
# sid's glslc (shaderc 2026.4, glslang 16.4) for those: they use
# GL_KHR_cooperative_matrix with GL_EXT_bfloat16, which glslang 11 does not
# know and trixie's glslang 15.1 knows without bfloat16. GLSLC_KHR names
# the newer compiler; `make blobs-vulkan GLSLC_KHR=/path/to/glslc` keeps the
# other blobs byte-identical.

GLSLC         ?= glslc
GLSLC_KHR     ?= $(GLSLC)
VULKAN_KHR_KERNELS := matmul_khr_f16 matmul_khr_bf16 attention_khr_f16 attention_khr_bf16
VULKAN_GLSLC_FLAGS = --target-env=vulkan1.2 -O -Iplugins/vulkan/kernels
VULKAN_GLSLC   = $(GLSLC) $(VULKAN_GLSLC_FLAGS)
VULKAN_NATIVE  = -DSTORAGE16=1 -DSUBGROUPS=1
VULKAN_PORTABLE = -DSTORAGE16=0 -DSUBGROUPS=0

.PHONY: blobs-vulkan
blobs:: blobs-vulkan
blobs-vulkan:
	@command -v $(GLSLC) >/dev/null || \
	  { echo "blobs-vulkan: $(GLSLC) not found (Debian: apt-get install glslc)"; exit 1; }
	@mkdir -p blobs/vulkan
	@set -e; for k in $(VULKAN_KERNELS); do \
	  src=plugins/vulkan/kernels/$$k.comp; \
	  echo "  GLSLC  blobs/vulkan/$$k.spv blobs/vulkan/$$k.portable.spv"; \
	  $(VULKAN_GLSLC) $(VULKAN_NATIVE) $$src -o blobs/vulkan/$$k.spv; \
	  $(VULKAN_GLSLC) $(VULKAN_PORTABLE) $$src -o blobs/vulkan/$$k.portable.spv; \
	done; \
	for k in $(VULKAN_NATIVE_ONLY); do \
	  glslc="$(GLSLC)"; \
	  case " $(VULKAN_KHR_KERNELS) " in *" $$k "*) glslc="$(GLSLC_KHR)";; esac; \
	  echo "  GLSLC  blobs/vulkan/$$k.spv ($$glslc)"; \
	  $$glslc $(VULKAN_GLSLC_FLAGS) $(VULKAN_NATIVE) plugins/vulkan/kernels/$$k.comp -o blobs/vulkan/$$k.spv; \
	done
	sha256sum plugins/vulkan/kernels/*.comp plugins/vulkan/kernels/*.glsl > blobs/vulkan/MANIFEST
