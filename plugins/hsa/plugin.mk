# hsa plugin (ROCm): host C that loads libhsa-runtime64.so.1 with dlopen
# (types from the libhsa-runtime-dev headers), plus one committed code
# object per GPU target (blobs/hsa/<target>.co) embedded by blobs.S.
# `make blobs` rebuilds the code objects with clang-16; a normal build needs
# no GPU compiler. pocl/ and tests.mk hold the test-only PoCL plugin.

hsa_SRCS   := $(wildcard plugins/hsa/*.c)
# The op code, behind backend.h and shared with the test-only PoCL plugin
# (tests.mk): one file per op family, the memory layer's kernel launches
# (memory.c) and the host's kernel table (kernels.c). The other .c files
# are the HSA runtime backend and the descriptor (plugin.c).
HSA_FAMILIES := elementwise norm rope gather matmul attention sample
HSA_OP_SRCS  := $(HSA_FAMILIES:%=plugins/hsa/%.c) plugins/hsa/memory.c plugins/hsa/kernels.c
hsa_LDLIBS := -ldl -lm
hsa_OBJS_EXTRA := $(B)/obj/plugins/hsa/blobs.o

HSA_TARGETS := $(shell sed -n 's/^HSA_TARGET(\([a-z0-9]*\))$$/\1/p' plugins/hsa/targets.def)
HSA_BLOBS   := $(HSA_TARGETS:%=blobs/hsa/%.co)
# Everything the code objects are built from (all listed in the MANIFEST).
HSA_KERNEL_SOURCES := $(sort $(wildcard plugins/hsa/kernels/*))

$(B)/obj/plugins/hsa/blobs.o: plugins/hsa/blobs.S plugins/hsa/targets.def $(HSA_BLOBS)
	@mkdir -p $(dir $@)
	$(CC) -c -Iplugins/hsa -Wa,-I,blobs/hsa $(SAN_FLAGS) -o $@ $<

# ----------------------------------------------------------------- blobs
# Rebuilt only by `make blobs` (needs clang-16 with the AMDGPU target); the
# results are committed. OpenCL C without any device library (-nogpulib):
# Debian 12 ships no ROCm device libraries for gfx11, and the kernels use
# clang builtins only. Code object v4, loadable by ROCm 5.x and 6.x.

HSA_CLANG    ?= clang-16
HSA_CLFLAGS   = -target amdgcn-amd-amdhsa -x cl -cl-std=CL2.0 -nogpulib -O3 \
                -mcode-object-version=4 -Iplugins/hsa/kernels

.PHONY: blobs-hsa
blobs:: blobs-hsa
blobs-hsa:
	@command -v $(HSA_CLANG) >/dev/null || { echo "blobs-hsa: $(HSA_CLANG) not found (apt-get install clang-16 lld-16)"; exit 1; }
	@set -e; for t in $(HSA_TARGETS); do \
	  echo "  CLANG  blobs/hsa/$$t.co"; \
	  $(HSA_CLANG) $(HSA_CLFLAGS) -mcpu=$$t plugins/hsa/kernels/gk_all.cl -o blobs/hsa/$$t.co; \
	done
	sha256sum $(HSA_KERNEL_SOURCES) > blobs/hsa/MANIFEST
