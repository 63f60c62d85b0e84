# plugins/cpu/tests.mk - tests of the cpu plugin, for tests/tests.mk to
# include. The plugin picks its kernels by CPU feature, so a machine runs
# only its best level. These test-only variants (plugin_test_variant) run
# the others too: cpu_plugin.c built again so that it uses no instruction set
# above GLLMK_CPU_TEST_ISA, under another name.
#
#   x86_64:  cpu-avx512    AVX-512 F/BW/VL without BF16 (GLLMK_CPU_TEST_ISA=2)
#            cpu-avx2      AVX2, FMA, F16C (1)
#            cpu-portable  no SIMD extensions assumed (0)
#   aarch64: cpu-neon      ASIMD without FEAT_BF16 (1)
#            cpu-portable  no SIMD kernels of ours (0)
#   both:    cpu-stream    the machine's best level (3), every output written
#                          the way outputs larger than the last-level cache
#                          are (streaming stores, L1 blocks): the suite's
#                          sizes alone never take those paths
#
# A level above what the machine has runs the machine's best instead.

cpu_test_flags = -DGLLMK_CPU_TEST_ISA=$(1) -DGLLMK_CPU_TEST_NAME='"cpu-$(2)"'
ifeq ($(TARGET_CPU),aarch64)
$(eval $(call plugin_test_variant,cpu-neon,cpu,cpu_plugin,$(call cpu_test_flags,1,neon)))
else
$(eval $(call plugin_test_variant,cpu-avx512,cpu,cpu_plugin,$(call cpu_test_flags,2,avx512)))
$(eval $(call plugin_test_variant,cpu-avx2,cpu,cpu_plugin,$(call cpu_test_flags,1,avx2)))
endif
$(eval $(call plugin_test_variant,cpu-portable,cpu,cpu_plugin,$(call cpu_test_flags,0,portable)))
$(eval $(call plugin_test_variant,cpu-stream,cpu,cpu_plugin,$(call cpu_test_flags,3,stream) -DGLLMK_CPU_TEST_STREAM_ALL))
