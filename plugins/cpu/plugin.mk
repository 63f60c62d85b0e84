# cpu plugin: portable C plus SIMD files chosen at run time by CPU features.
# The family files (elementwise, norm, rope, gather, matmul, attention,
# sample .c: one per op family, the same names on every backend) sit on the
# shared cpu_*.c layer (plugin entry, thread pool, tasks, conversions, vector
# and GEMM kernels), which never calls into them.
# Files named *_avx2.c / *_avx512.c / *_avx512bf16.c (x86_64) and *_neon.c /
# *_neon_bf16.c (aarch64) are compiled for those instruction sets and only
# called after cpu_features says the CPU has them; on the other architecture
# they compile to nothing (#if defined(__x86_64__) / __aarch64__), without
# these flags, which its compiler would not take.
cpu_SRCS   := $(wildcard plugins/cpu/*.c)
cpu_LDLIBS := -lpthread -lm
ifeq ($(TARGET_CPU),x86_64)
$(B)/obj/plugins/cpu/%_avx2.o: ALL_CFLAGS += -mavx2 -mfma -mf16c
$(B)/obj/plugins/cpu/%_avx512.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
$(B)/obj/plugins/cpu/%_avx512bf16.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512bf16 \
                                              -mavx2 -mfma -mf16c
endif
# ASIMD is part of every AArch64 CPU (armv8-a); FEAT_BF16 came with
# armv8.6-a and exists on some armv8.2-a cores, hence +bf16 on armv8.2-a.
ifeq ($(TARGET_CPU),aarch64)
$(B)/obj/plugins/cpu/%_neon.o: ALL_CFLAGS += -march=armv8-a
$(B)/obj/plugins/cpu/%_neon_bf16.o: ALL_CFLAGS += -march=armv8.2-a+bf16
endif
