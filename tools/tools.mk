# Command-line tools; each is linked against libgllmk by the top Makefile.
TOOLS += gllmk-demo
gllmk-info_SRCS := tools/gllmk-info.c
gllmk-demo_SRCS := tools/gllmk-demo.c
gllmk-demo_LDLIBS := -lm
-include tools/bench/bench.mk
