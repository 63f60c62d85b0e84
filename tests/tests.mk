# tests/tests.mk - the test suite, included by the top-level Makefile.
#
#   make check             build everything, run the install test, the
#                          script checks and every Check program, ending with
#                          their summary lines (SANITIZE=1: under ASan+UBSan)
#   make check-aarch64     the aarch64 part of `make check` alone: build
#                          build/aarch64 and run its cpu-only programs under
#                          qemu-user (see AARCH64_RUNS below)
#   make check-valgrind    the Check programs under valgrind's memcheck,
#                          one process each (CK_FORK=no), --quick sizes,
#                          emulated devices left out (here: cpu only)
#   make check SANITIZE=thread
#                          a ThreadSanitizer build (build/tsan): threads.c
#                          and the other cpu-only programs, the first data
#                          race fails the run (docs/testing.md)
#   make fuzz              the libFuzzer target tests/fuzz/fuzz_api.c until
#                          stopped (FUZZ_SECONDS=N: for N seconds); `make
#                          check` runs it for FUZZ_SECONDS=60
#
# Each Check program takes --quick (smaller sizes) and --seed N (repeat a
# run: the conformance seed is printed at the start and with every
# failure); conformance also takes --backend NAME, --plugin-dir DIR and
# --skip-software (see tests/conformance.c).

# Evaluated when used, so that `check` can install the Check package first.
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check)
CHECK_LIBS   = $(shell $(PKG_CONFIG) --libs check)

TEST_PROGRAMS := tensor_helpers conformance bad_input discovery abi_v2 threads model collectives
TEST_BINS     := $(TEST_PROGRAMS:%=$(B)/tests/%)
TEST_COMMON   := tests/testlib.c
conformance_TEST_SRCS := tests/reference.c tests/decoder_block.c tests/conformance_views.c
discovery_TEST_LIBS   := -ldl
threads_TEST_LIBS     := -lpthread
# The generator (libgllmk-model) against tests/model_ref.c's float64 forward.
model_TEST_SRCS       := tests/model_ref.c
model_TEST_LIBS       := -lgllmk-model -ljansson -lpthread
model_TEST_DEPS       := $(B)/lib/libgllmk-model.so
$(B)/obj/tests/model.o: ALL_CFLAGS += -Icore/model/include

# Fake plugins for the discovery tests: tests/fake_plugin.c once per variant.
TEST_FAKES    := vulkan software nodevice wrongabi noentry smallstruct abiv1 newerminor
TEST_FAKE_SOS := $(TEST_FAKES:%=$(B)/tests/fake/%.so)

TEST_RPATH    = -Wl,-rpath,$(abspath $(B)/lib)
TEST_OBJS     := $(patsubst %.c,$(B)/obj/%.o,$(TEST_COMMON) $(conformance_TEST_SRCS) $(model_TEST_SRCS) \
                   $(TEST_PROGRAMS:%=tests/%.c))

$(B)/obj/tests/%.o: ALL_CFLAGS += $(CHECK_CFLAGS)
$(B)/obj/tests/discovery.o $(B)/obj/tests/abi_v2.o: ALL_CFLAGS += \
  -DTEST_FAKE_DIR=\"$(abspath $(B)/tests/fake)\" \
  -DTEST_CPU_PLUGIN=\"$(abspath $(B)/lib/gllmk/gllmk-cpu.so)\" \
  -DTEST_LIB_DIR=\"$(abspath $(B)/lib)\"
# The Check headers must be installed before any test compiles.
$(TEST_OBJS): | deps-check

define test_program_template
$$(B)/tests/$(1): $$(patsubst %.c,$$(B)/obj/%.o,tests/$(1).c $$($(1)_TEST_SRCS) $$(TEST_COMMON)) \
                  $$(B)/lib/libgllmk.so $$($(1)_TEST_DEPS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_LDFLAGS) $$(TEST_RPATH) -o $$@ $$(filter %.o,$$^) -L$$(B)/lib $$($(1)_TEST_LIBS) \
	  -lgllmk $$(CHECK_LIBS) -lm
endef
$(foreach t,$(TEST_PROGRAMS),$(eval $(call test_program_template,$(t))))

$(B)/tests/discovery $(B)/tests/abi_v2: | $(TEST_FAKE_SOS)

$(B)/obj/tests/fake/%.o: tests/fake_plugin.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DFAKE_VARIANT_$(shell echo '$*' | tr a-z A-Z) -MD -MP -c $< -o $@

.SECONDARY: $(TEST_FAKES:%=$(B)/obj/tests/fake/%.o)
$(B)/tests/fake/%.so: $(B)/obj/tests/fake/%.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(ALL_LDFLAGS) -o $@ $<

# A test-only variant of a plugin, for code paths this machine would not
# take: $(call plugin_test_variant,NAME,PLUGIN,SOURCE,FLAGS) builds the
# plugin's objects with plugins/PLUGIN/SOURCE.c compiled again with FLAGS
# (which make it call itself NAME) into $(B)/tests/NAME/gllmk-NAME.so, alone
# in its directory, and adds a conformance run of it to `make check` (not to
# check-valgrind: valgrind runs the plugins as this machine uses them).
# Never installed.
TEST_VARIANT_PLUGINS :=
TEST_VARIANT_RUNS    :=
define plugin_test_variant
TEST_VARIANT_PLUGINS += $$(B)/tests/$(1)/gllmk-$(1).so
TEST_VARIANT_RUNS    += '$$(B)/tests/conformance --plugin-dir $$(B)/tests/$(1) --backend $(1)'

$$(B)/obj/plugins/$(2)/$(3)_$(1)_test.o: plugins/$(2)/$(3).c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $$($(2)_CFLAGS) $(4) -MD -MP -c $$< -o $$@

$$(B)/tests/$(1)/gllmk-$(1).so: $$(filter-out $$(B)/obj/plugins/$(2)/$(3).o,$$($(2)_OBJS)) \
                                $$(B)/obj/plugins/$(2)/$(3)_$(1)_test.o
	@mkdir -p $$(dir $$@)
	$$(CC) -shared $$(ALL_LDFLAGS) -o $$@ $$^ $$($(2)_LDLIBS)
endef

# A plugin's own tests (plugins/<name>/tests.mk), e.g. check-hsa; of the
# plugins this build has (a cross build: cpu).
-include $(wildcard $(PLUGINS:%=plugins/%/tests.mk))

# What `make check` runs, one quoted command each, and what that needs built.
CHECK_RUNS     := $(TEST_BINS:%='%')
VALGRIND_RUNS  := $(TEST_BINS:%='%')
CHECK_PREREQS  := $(TEST_BINS) $(TEST_FAKE_SOS)
# The generator's tests on the hsa kernels through PoCL. Under ASan without
# the leak checker: LeakSanitizer's tracer crashes at exit now and then
# while PoCL's worker threads run (signal 11 in 1 of 2 runs of this program,
# docs/testing.md); the model code's leaks are checked on cpu and lavapipe.
HSA_POCL_MODEL  = $(if $(filter 1,$(SANITIZE)),env ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 )$(B)/tests/model \
                  --plugin-dir $(HSA_POCL_DIR) --backend hsa-pocl
# The hsa plugin's tests (plugins/hsa/tests.mk): its code objects, and the
# conformance suite on its kernels through PoCL (an emulated device, so not
# under valgrind).
ifdef HSA_TEST_BIN
CHECK_RUNS     += '$(HSA_TEST_BIN)' '$(HSA_POCL_CONFORMANCE)' '$(HSA_POCL_MODEL)'
VALGRIND_RUNS  += '$(HSA_TEST_BIN)'
CHECK_PREREQS  += $(HSA_TEST_BIN) $(HSA_POCL_PLUGIN)
endif
# Plugin variants (plugin_test_variant above): the cpu plugin's lower SIMD
# levels and its streaming writes, the vulkan plugin's portable shader form.
CHECK_RUNS     += $(TEST_VARIANT_RUNS)
# The conformance suite again with every op run by replaying a recording of
# it (the backend's native form where it compiles one): on cpu and lavapipe,
# and on the hsa kernels through PoCL.
CHECK_RUNS     += '$(B)/tests/conformance --record' \
                  $(if $(HSA_TEST_BIN),'$(HSA_POCL_CONFORMANCE) --record')
CHECK_PREREQS  += $(TEST_VARIANT_PLUGINS)

.PHONY: check check-valgrind test-programs
test-programs: $(CHECK_PREREQS)

# Under ASan the leak checker is on; UBSan already stops at the first error.
# Mesa's lavapipe keeps one 128-byte allocation reachable only from its own
# globals; when the Vulkan loader unloads it at vkDestroyInstance, LeakSanitizer
# reports it from an unknown module, which no suppression can name. Keeping
# that driver loaded for the whole process hides exactly that allocation, so
# leaks in gllmk itself still fail the run.
ifeq ($(SANITIZE),1)
LAVAPIPE_ICD := $(wildcard /usr/lib/*/libvulkan_lvp.so)
KEEP_LAVAPIPE = $(if $(LAVAPIPE_ICD),LD_PRELOAD=$(shell $(CC) -print-file-name=libasan.so):$(firstword $(LAVAPIPE_ICD)))
TEST_WRAPPER = env ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
               UBSAN_OPTIONS=print_stacktrace=1 $(KEEP_LAVAPIPE)
else ifeq ($(SANITIZE),thread)
# ThreadSanitizer (docs/testing.md): the first data race ends the program.
TEST_WRAPPER = env TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1
else
TEST_WRAPPER :=
endif

# SANITIZE=thread runs the programs that create contexts and run ops on
# the cpu backend, threads.c (8 threads at once) first, and the generator's
# tests on cpu (models on 4 threads at once among them); the conformance
# suite and the plugin variants stay with the other builds (lavapipe and
# PoCL are not built with TSan, and run for hours under it).
ifeq ($(SANITIZE),thread)
CHECK_RUNS := $(patsubst %,'$(B)/tests/%',threads tensor_helpers discovery bad_input collectives) \
              '$(B)/tests/model --backend cpu'
endif

# aarch64 under qemu-user: on x86_64, `make check` (without SANITIZE) also
# builds build/aarch64 (`make ARCH=aarch64`, see the Makefile) and runs the
# programs that need only the cpu plugin there, under qemu-aarch64, at each
# aarch64 level of the cpu plugin (docs/testing.md):
#   -cpu max         ASIMD + FEAT_BF16 (neon-bf16, the plugin's own choice):
#                    conformance at full sizes, and --record; and the
#                    cpu-portable and cpu-stream variants
#   -cpu cortex-a53  plain ASIMD (neon), which the plugin finds by itself
# Every conformance run is the whole suite; all but the first take its
# --quick sizes (emulated, the full sizes take about 8 minutes on 2 cores).
# A copy of a program is started through qemu-aarch64 (--exec-via): without
# binfmt_misc the kernel cannot exec an aarch64 program itself.
# `make check-aarch64` runs only this part.
AARCH64_B    := build/aarch64
AARCH64_MAX  := qemu-aarch64 -cpu max
AARCH64_CONF := $(AARCH64_B)/tests/conformance --exec-via qemu-aarch64
AARCH64_RUNS := '$(AARCH64_MAX) $(AARCH64_CONF)' \
                '$(AARCH64_MAX) $(AARCH64_CONF) --quick --record' \
                '$(AARCH64_MAX) $(AARCH64_CONF) --quick --plugin-dir $(AARCH64_B)/tests/cpu-portable --backend cpu-portable' \
                '$(AARCH64_MAX) $(AARCH64_CONF) --quick --plugin-dir $(AARCH64_B)/tests/cpu-stream --backend cpu-stream' \
                'qemu-aarch64 -cpu cortex-a53 $(AARCH64_CONF) --quick' \
                $(patsubst %,'$(AARCH64_MAX) $(AARCH64_B)/tests/%',tensor_helpers bad_input discovery abi_v2 collectives) \
                '$(AARCH64_MAX) $(AARCH64_B)/tests/threads --quick' \
                '$(AARCH64_MAX) $(AARCH64_B)/tests/model --quick --backend cpu'
ifeq ($(HOST_ARCH)$(CROSS)$(SANITIZE),x86_640)
CHECK_RUNS   += $(AARCH64_RUNS)
AARCH64_BUILD := aarch64-build
endif

.PHONY: aarch64-build check-aarch64
aarch64-build:
	@$(MAKE) --no-print-directory ARCH=aarch64 all test-programs
check-aarch64:
	@sh tools/ensure-deps.sh check
	@$(MAKE) --no-print-directory aarch64-build
	@sh tests/run-checks.sh $(AARCH64_B)/tests/logs $(AARCH64_RUNS)

# The .d files of what `make run` builds (core, plugins, tools): the
# headers they list must come from `ensure-deps.sh build`'s packages, the
# rest from `ensure-deps.sh check`'s (tools/check-header-packages.sh).
RUN_DEPFILES := $(patsubst %.o,%.d,$(filter $(B)/obj/%.o,$(CORE_OBJS) \
                  $(foreach p,$(PLUGINS),$($(p)_OBJS)) \
                  $(foreach t,$(TOOLS),$($(t)_SRCS:%.c=$(B)/obj/%.o))))

# Checks without Check: every committed blob was built from the kernel
# sources as they are now; every system header the build included comes
# from a package tools/ensure-deps.sh installs; the cuda plugin's embedded
# fatbin holds every architecture (no GPU needed).
CHECK_SCRIPTS := 'sh tools/check-blob-manifests.sh' \
                 'sh tools/check-header-packages.sh $(B) $(RUN_DEPFILES)' \
                 $(if $(filter cuda,$(PLUGINS)),'sh tests/cuda-fatbin-test.sh $(B)/bin')
# The Python package (tools/python/gllmk) with pytest: every op against NumPy
# on cpu and vulkan, errors, leaks, the generator, traces (tests/python). Not
# in sanitizer builds: Python cannot load their libraries.
CHECK_SCRIPTS += $(if $(filter 1 thread,$(SANITIZE)),,'sh tests/python/run-tests.sh $(B)')

# Dependencies first, then a sub-make: on a fresh machine the build itself
# needs packages (Check, the Vulkan and HSA headers) that ensure-deps installs.
# A cross build's programs run only under qemu: there `check` is check-aarch64.
ifdef CROSS
check: check-aarch64
else
check:
	@sh tools/ensure-deps.sh check
	@$(MAKE) --no-print-directory check-now
endif

.PHONY: check-now check-valgrind-now
check-now: all test-programs $(if $(filter 1 thread,$(SANITIZE)),,fuzz-build) $(AARCH64_BUILD)
	@status=0; \
	MAKE='$(MAKE)' SANITIZE='$(SANITIZE)' CC='$(CC)' SAN_FLAGS='$(SAN_FLAGS)' \
	  TEST_WRAPPER='$(TEST_WRAPPER)' sh tests/install-test.sh || status=1; \
	for script in $(CHECK_SCRIPTS); do ASAN_OPTIONS=detect_leaks=0 $$script || status=1; done; \
	$(if $(filter 1 thread,$(SANITIZE)),,{ $(call FUZZ_RUNS,$(FUZZ_SECONDS),$(FUZZ_MODEL_SECONDS)); } || status=1;) \
	sh tests/run-checks.sh -w '$(TEST_WRAPPER)' $(B)/tests/logs $(CHECK_RUNS) || status=1; \
	exit $$status

# Memcheck: an invalid access, a use of an uninitialised value, or a block
# definitely or indirectly lost fails the program. Possibly lost blocks are
# not errors: Mesa's Vulkan layer and lavapipe keep some after the vulkan
# plugin's probe. One suppression (tests/valgrind.supp): ld.so's own
# strncmp reading whole words of a RUNPATH; on Debian 12 (valgrind 3.19)
# nothing else is reported.
VALGRIND := valgrind --error-exitcode=1 --leak-check=full --quiet \
            --suppressions=tests/valgrind.supp \
            --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect

# Emulated devices (lavapipe's JIT) are left out: under valgrind they take
# an hour, and their leaks are Mesa's. 17 to 20 minutes on 2 cores, 14 of
# them conformance (docs/testing.md).
check-valgrind:
	@sh tools/ensure-deps.sh check
	@$(MAKE) --no-print-directory check-valgrind-now

check-valgrind-now: all test-programs
	@if [ '$(SANITIZE)' = 1 ] || [ '$(SANITIZE)' = thread ]; then \
	  echo "check-valgrind: build without SANITIZE=$(SANITIZE)" >&2; exit 1; fi
	@sh tests/run-checks.sh -w 'env CK_FORK=no $(VALGRIND)' -a '--quick --skip-software' \
	  $(B)/tests/logs-valgrind $(VALGRIND_RUNS)

# ------------------------------------------------------------------ fuzzing
#
# tests/fuzz/fuzz_api.c, a libFuzzer target over the public API (issue 20;
# docs/testing.md). It links the core's objects and loads the cpu plugin,
# both built again by clang with AddressSanitizer, UBSan and coverage in
# their own tree, $(FUZZ_B), through a sub-make (so the normal rules, and
# the cpu plugin's per-file instruction sets, apply). `make check` runs it
# for FUZZ_SECONDS over the committed corpus (tests/fuzz/corpus, read only;
# what it finds goes to $(FUZZ_B)/corpus); `make fuzz` runs it until
# stopped (FUZZ_SECONDS=0) or for FUZZ_SECONDS.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_MODEL_SECONDS ?= 30
FUZZ_B       := $(B)/fuzz
FUZZ_BIN     := $(FUZZ_B)/bin/fuzz_api
FUZZ_MODEL_BIN := $(FUZZ_B)/bin/fuzz_model
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
# Both targets, each with its committed corpus and its time in `make check`.
FUZZ_RUNS    = sh tests/fuzz/run-fuzz.sh $(FUZZ_BIN) tests/fuzz/corpus $(FUZZ_B)/api $(1) && \
               sh tests/fuzz/run-fuzz.sh $(FUZZ_MODEL_BIN) tests/fuzz/corpus-model $(FUZZ_B)/model $(2)

ifdef FUZZ_NESTED
# Inside the sub-make: $(B) is $(FUZZ_B) of the outer make.
$(B)/obj/tests/fuzz/fuzz_api.o: tests/fuzz/fuzz_api.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -fsanitize=fuzzer -DFUZZ_PLUGIN_DIR=\"$(abspath $(B)/lib/gllmk)\" \
	  -MD -MP -c $< -o $@
# -rdynamic: the plugin's coverage and sanitizer hooks resolve to the
# program's (a plugin never links libgllmk; here it does not link them either).
$(B)/bin/fuzz_api: $(B)/obj/tests/fuzz/fuzz_api.o $(CORE_OBJS) | $(B)/lib/gllmk/gllmk-cpu.so
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -fsanitize=fuzzer -rdynamic -o $@ $^ -ldl -lpthread -lm
# The model library's parsers, linked with the core objects they call.
$(B)/obj/tests/fuzz/fuzz_model.o: tests/fuzz/fuzz_model.c $(HEADERS) $(MODEL_HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) -Icore/model/include -fsanitize=fuzzer -MD -MP -c $< -o $@
$(B)/bin/fuzz_model: $(B)/obj/tests/fuzz/fuzz_model.o $(B)/obj/core/model/config.o \
                     $(B)/obj/core/model/safetensors.o $(CORE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -fsanitize=fuzzer -o $@ $^ -ljansson -ldl -lpthread -lm
endif

.PHONY: fuzz fuzz-build
fuzz-build:
	@$(MAKE) --no-print-directory B=$(FUZZ_B) CC=$(FUZZ_CC) OPT=-O1 FUZZ_NESTED=1 \
	  SAN_FLAGS='$(FUZZ_SAN) -fsanitize=fuzzer-no-link' LDFLAGS_BASE='$(FUZZ_SAN)' \
	  $(FUZZ_B)/lib/gllmk/gllmk-cpu.so $(FUZZ_BIN) $(FUZZ_MODEL_BIN)

fuzz: fuzz-build
	$(call FUZZ_RUNS,$(FUZZ_SECONDS),$(FUZZ_SECONDS))
