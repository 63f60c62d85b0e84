# plugins/cpu/tests.mk - tests of the cpu plugin, for tests/tests.mk to
# include. The plugin picks its kernels by CPU feature, so a machine runs
# only its best level. These TEST-ONLY builds run the others too: the same
# objects, with cpu_plugin.c built again so that it uses no instruction set
# above GLLMK_CPU_TEST_ISA, each alone in its own directory under another
# name, for the conformance suite (--plugin-dir, --backend). Never installed.
#
#   cpu-avx512    AVX-512 F/BW/VL without BF16 (GLLMK_CPU_TEST_ISA=2)
#   cpu-avx2      AVX2, FMA, F16C (1)
#   cpu-portable  no SIMD extensions assumed (0)
#
# A level above what the machine has runs the machine's best instead.

CPU_TEST_LEVELS  := avx512:2 avx2:1 portable:0
CPU_TEST_OBJS    := $(filter-out $(B)/obj/plugins/cpu/cpu_plugin.o,$(cpu_SRCS:%.c=$(B)/obj/%.o))
CPU_TEST_PLUGINS :=
CPU_CONFORMANCE  :=

define cpu_test_level
CPU_TEST_PLUGINS += $(B)/tests/cpu-$(1)/gllmk-cpu-$(1).so
CPU_CONFORMANCE  += '$(B)/tests/conformance --plugin-dir $(B)/tests/cpu-$(1) --backend cpu-$(1)'

$(B)/obj/plugins/cpu/cpu_plugin_$(1)_test.o: plugins/cpu/cpu_plugin.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) -DGLLMK_CPU_TEST_ISA=$(2) -DGLLMK_CPU_TEST_NAME='"cpu-$(1)"' \
	  -MMD -MP -c $$< -o $$@

$(B)/tests/cpu-$(1)/gllmk-cpu-$(1).so: $(CPU_TEST_OBJS) $(B)/obj/plugins/cpu/cpu_plugin_$(1)_test.o
	@mkdir -p $$(dir $$@)
	$$(CC) -shared $$(ALL_LDFLAGS) -o $$@ $$^ $$(cpu_LDLIBS)
endef
$(foreach l,$(CPU_TEST_LEVELS),$(eval $(call cpu_test_level,$(word 1,$(subst :, ,$(l))),$(word 2,$(subst :, ,$(l))))))
