# gllmk-bench: included by tools/tools.mk; linked against libgllmk by the
# top Makefile. OpenBLAS is loaded at run time (dlopen), never linked.
TOOLS += gllmk-bench
gllmk-bench_SRCS := $(wildcard tools/bench/*.c)
gllmk-bench_LDLIBS := -ldl -lm -lpthread -ljansson
