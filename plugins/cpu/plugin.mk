# cpu plugin: portable C plus SIMD files chosen at run time by CPU features.
# The family files (elementwise, norm, rope, gather, matmul, attention,
# sample .c: one per op family, the same names on every backend) sit on the
# shared cpu_*.c layer (plugin entry, thread pool, tasks, conversions, vector
# and GEMM kernels), which never calls into them.
# Files named *_avx2.c / *_avx512.c / *_avx512bf16.c are compiled for those
# instruction sets and only called after cpu_features says the CPU has them.
cpu_SRCS   := $(wildcard plugins/cpu/*.c)
cpu_LDLIBS := -lpthread -lm
$(B)/obj/plugins/cpu/%_avx2.o: ALL_CFLAGS += -mavx2 -mfma -mf16c
$(B)/obj/plugins/cpu/%_avx512.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
$(B)/obj/plugins/cpu/%_avx512bf16.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512bf16 \
                                              -mavx2 -mfma -mf16c
