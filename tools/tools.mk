# Command-line tools; each is linked against libgllmk by the top Makefile.
TOOLS += gllmk-demo
gllmk-info_SRCS := tools/gllmk-info.c
gllmk-demo_SRCS := tools/gllmk-demo.c
gllmk-demo_LDLIBS := -lm
-include tools/bench/bench.mk
# gllmk-generate runs a whole model through libgllmk-model.
TOOLS += gllmk-generate
gllmk-generate_SRCS   := tools/gllmk-generate.c tools/bench/trace.c
gllmk-generate_LDLIBS := -lgllmk-model -ljansson -lm
gllmk-generate_DEPS   := $(B)/lib/libgllmk-model.so
$(B)/obj/tools/gllmk-generate.o: ALL_CFLAGS += -Icore/model/include
