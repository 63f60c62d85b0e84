# tests/tests.mk - the test suite, included by the top-level Makefile.
#
#   make check             build everything, run the install test and every
#                          Check program (SANITIZE=1: under ASan + UBSan)
#   make check-valgrind    the Check programs under valgrind, one process
#                          each (CK_FORK=no), with --quick problem sizes
#
# Each program takes --quick (smaller sizes) and --seed N (repeat a run:
# the conformance seed is printed at the start and with every failure).

# Evaluated when used, so that `check` can install the Check package first.
CHECK_CFLAGS = $(shell pkg-config --cflags check)
CHECK_LIBS   = $(shell pkg-config --libs check)

TEST_PROGRAMS := tensor_helpers conformance bad_input discovery
TEST_BINS     := $(TEST_PROGRAMS:%=$(B)/tests/%)
TEST_COMMON   := tests/testlib.c
conformance_TEST_SRCS := tests/reference.c
discovery_TEST_LIBS   := -ldl

# Fake plugins for the discovery tests: tests/fake_plugin.c once per variant.
TEST_FAKES    := vulkan software nodevice wrongabi noentry smallstruct
TEST_FAKE_SOS := $(TEST_FAKES:%=$(B)/tests/fake/%.so)

TEST_RPATH    = -Wl,-rpath,$(abspath $(B)/lib)
TEST_OBJS     := $(patsubst %.c,$(B)/obj/%.o,$(TEST_COMMON) $(conformance_TEST_SRCS) \
                   $(TEST_PROGRAMS:%=tests/%.c))

$(B)/obj/tests/%.o: ALL_CFLAGS += $(CHECK_CFLAGS)
$(B)/obj/tests/discovery.o: ALL_CFLAGS += \
  -DTEST_FAKE_DIR=\"$(abspath $(B)/tests/fake)\" \
  -DTEST_CPU_PLUGIN=\"$(abspath $(B)/lib/gllmk/gllmk-cpu.so)\" \
  -DTEST_LIB_DIR=\"$(abspath $(B)/lib)\"
# The Check headers must be installed before any test compiles.
$(TEST_OBJS): | deps-check

define test_program_template
$$(B)/tests/$(1): $$(patsubst %.c,$$(B)/obj/%.o,tests/$(1).c $$($(1)_TEST_SRCS) $$(TEST_COMMON)) \
                  $$(B)/lib/$$(CORE_SONAME)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_LDFLAGS) $$(TEST_RPATH) -o $$@ $$(filter %.o,$$^) -L$$(B)/lib -lgllmk \
	  $$(CHECK_LIBS) $$($(1)_TEST_LIBS) -lm
endef
$(foreach t,$(TEST_PROGRAMS),$(eval $(call test_program_template,$(t))))

$(B)/tests/discovery: | $(TEST_FAKE_SOS)

$(B)/obj/tests/fake/%.o: tests/fake_plugin.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DFAKE_VARIANT_$(shell echo '$*' | tr a-z A-Z) -MMD -MP -c $< -o $@

.SECONDARY: $(TEST_FAKES:%=$(B)/obj/tests/fake/%.o)
$(B)/tests/fake/%.so: $(B)/obj/tests/fake/%.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(ALL_LDFLAGS) -o $@ $<

.PHONY: check check-valgrind test-programs
test-programs: $(TEST_BINS) $(TEST_FAKE_SOS)

# Under ASan the leak checker is on; UBSan already stops at the first error.
ifeq ($(SANITIZE),1)
TEST_WRAPPER := env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
else
TEST_WRAPPER :=
endif

check: all test-programs | deps-check
	@status=0; \
	MAKE='$(MAKE)' SANITIZE='$(SANITIZE)' CC='$(CC)' SAN_FLAGS='$(SAN_FLAGS)' \
	  TEST_WRAPPER='$(TEST_WRAPPER)' sh tests/install-test.sh || status=1; \
	sh tests/run-checks.sh -w '$(TEST_WRAPPER)' $(B)/tests $(TEST_PROGRAMS) || status=1; \
	exit $$status

VALGRIND := valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
            --show-leak-kinds=definite --suppressions=tests/valgrind.supp --quiet

# Emulated devices (lavapipe's JIT) are left out: under valgrind they take
# an hour, and their leaks are Mesa's.
check-valgrind: all test-programs | deps-check
	@if [ '$(SANITIZE)' = 1 ]; then echo "check-valgrind: build without SANITIZE=1" >&2; exit 1; fi
	@sh tests/run-checks.sh -w 'env CK_FORK=no $(VALGRIND)' -a '--quick --skip-software' \
	  $(B)/tests $(TEST_PROGRAMS)
