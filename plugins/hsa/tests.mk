# plugins/hsa/tests.mk - tests of the hsa plugin, for tests/tests.mk to
# include. No AMD GPU is needed:
#
#   HSA_TEST_BIN      tests/hsa_codeobj.c: parses every embedded code object
#                     (ELF, AMDGPU metadata note) and checks each kernel the
#                     host dispatches against the host's argument layout.
#   HSA_POCL_PLUGIN   gllmk-hsa-pocl.so, TEST ONLY, alone in HSA_POCL_DIR: the
#                     same kernels and op code run through OpenCL on PoCL, for
#                     the conformance suite (plugin_dir = HSA_POCL_DIR,
#                     backend "hsa-pocl"). Never installed.
#   check-hsa         runs the code-object test, then the conformance suite
#                     on hsa-pocl (tests/conformance.c with --plugin-dir).

HSA_TEST_BIN    := $(B)/tests/hsa_codeobj
HSA_POCL_DIR    := $(B)/tests/hsa-pocl
HSA_POCL_PLUGIN := $(HSA_POCL_DIR)/gllmk-hsa-pocl.so

# The code-object test links the plugin's own embedded blobs and tables
# (and tests/testlib.c, for the common command line and Check runner).
HSA_TEST_OBJS := $(B)/obj/tests/hsa_codeobj.o $(B)/obj/tests/testlib.o \
                 $(B)/obj/plugins/hsa/blobs.o $(B)/obj/plugins/hsa/code_objects.o \
                 $(B)/obj/plugins/hsa/kernels.o

$(B)/obj/tests/hsa_codeobj.o: ALL_CFLAGS += -Iplugins/hsa
$(B)/obj/tests/hsa_codeobj.o: | deps-check

$(HSA_TEST_BIN): $(HSA_TEST_OBJS) $(B)/lib/libgllmk.so
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -Wl,-rpath,$(abspath $(B)/lib) -o $@ $(HSA_TEST_OBJS) \
	  -L$(B)/lib -lgllmk $(CHECK_LIBS) -lm

# PoCL builds the kernels from source: gk_all.cl with its includes resolved
# by the C preprocessor (-undef: no host macros; GK_OPENCL_SOURCE selects the
# OpenCL C types of gk_params.h), embedded by pocl/pocl_source.S.
HSA_POCL_SOURCE := $(B)/obj/plugins/hsa/pocl/gk_pocl.cl
# The op code is the hsa plugin's own (HSA_OP_SRCS, plugin.mk).
HSA_POCL_OBJS   := $(B)/obj/plugins/hsa/pocl/pocl_plugin.o $(B)/obj/plugins/hsa/pocl/pocl_source.o \
                   $(HSA_OP_SRCS:%.c=$(B)/obj/%.o)

$(HSA_POCL_SOURCE): $(HSA_KERNEL_SOURCES)
	@mkdir -p $(dir $@)
	$(CC) -E -P -undef -nostdinc -x c -DGK_OPENCL_SOURCE -Iplugins/hsa/kernels \
	  plugins/hsa/kernels/gk_all.cl -o $@

$(B)/obj/plugins/hsa/pocl/pocl_source.o: plugins/hsa/pocl/pocl_source.S $(HSA_POCL_SOURCE)
	@mkdir -p $(dir $@)
	$(CC) -c -Wa,-I,$(dir $(HSA_POCL_SOURCE)) $(SAN_FLAGS) -o $@ $<

$(B)/obj/plugins/hsa/pocl/pocl_plugin.o: | deps-check

# -z nodelete: PoCL keeps allocations reachable only from its own globals;
# unloading it with the test plugin would show them to LeakSanitizer as
# leaks of an unknown module. Staying loaded keeps gllmk's own leaks visible.
$(HSA_POCL_PLUGIN): $(HSA_POCL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared $(ALL_LDFLAGS) -Wl,-z,nodelete -o $@ $(HSA_POCL_OBJS) -l:libOpenCL.so.1 -lm

# The conformance suite on the PoCL plugin only (HSA_TEST_ARGS: e.g. --quick).
# Under SANITIZE=1 without the test wrapper's LD_PRELOAD of libasan (kept for
# lavapipe, tests/tests.mk): PoCL runs /usr/bin/ld to link each kernel it
# builds, and an ld with ASan preloaded fails every link on its own leaks.
# The test program itself still loads ASan first and is leak-checked, with
# tests/lsan.supp naming PoCL's kernel compiler (only these runs: lavapipe's
# LLVM stays checked). Both showed with an empty PoCL kernel cache, as on a
# fresh machine.
HSA_POCL_SANITIZE    = env -u LD_PRELOAD LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp)
HSA_POCL_CONFORMANCE = $(if $(filter 1,$(SANITIZE)),$(HSA_POCL_SANITIZE) )$(B)/tests/conformance \
                       --plugin-dir $(HSA_POCL_DIR) --backend hsa-pocl

.PHONY: check-hsa
check-hsa: $(HSA_TEST_BIN) $(HSA_POCL_PLUGIN) $(B)/tests/conformance all
	$(HSA_TEST_BIN) $(HSA_TEST_ARGS)
	$(HSA_POCL_CONFORMANCE) $(HSA_TEST_ARGS)
