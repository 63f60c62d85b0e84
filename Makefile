# gllmk - GNU make build. `make` builds everything, `make check` runs the
# tests, `make run` is the main job (gllmk-info, a demo, gllmk-generate on a
# tiny synthetic model, gllmk-bench --quick).
#
# The build tree mirrors an installed tree: build/lib/libgllmk.so.0 with its
# plugins in build/lib/gllmk/, tools in build/bin/.

# No built-in rules: they would try to "remake" the included .d files.
MAKEFLAGS    += --no-builtin-rules
.SUFFIXES:

VERSION      := 0.2.0
SOVERSION    := 0

PREFIX       ?= /usr/local
EXEC_PREFIX  ?= $(PREFIX)
LIBDIR       ?= $(EXEC_PREFIX)/lib
BINDIR       ?= $(EXEC_PREFIX)/bin
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PLUGINDIR    := $(LIBDIR)/gllmk
DOCDIR       ?= $(PREFIX)/share/doc/gllmk
# The Python package (tools/python/gllmk): Debian's path for modules of
# every python3 version.
PYTHONDIR    ?= $(PREFIX)/lib/python3/dist-packages
DESTDIR      ?=

# SANITIZE=1: AddressSanitizer + UBSan; SANITIZE=thread: ThreadSanitizer
# (docs/testing.md). Each has its own build tree.
SANITIZE     ?= 0
ifeq ($(SANITIZE),1)
B            := build/sanitize
SAN_FLAGS    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SANITIZE),thread)
B            := build/tsan
SAN_FLAGS    := -fsanitize=thread -fno-omit-frame-pointer
else
B            := build
SAN_FLAGS    :=
endif

CC           ?= cc

# ARCH=aarch64 on an x86_64 machine: a cross build (docs/testing.md) with
# Debian's aarch64-linux-gnu-gcc and the arm64 multiarch libraries
# (tools/ensure-deps.sh installs both) into build/aarch64: the core, the
# generator library, the cpu plugin, the tools and the tests, which
# `make check-aarch64` (and `make check`) run under qemu-user. Without
# ARCH the build is for this machine.
HOST_ARCH    := $(shell uname -m)
ARCH         ?= $(HOST_ARCH)
ifneq ($(ARCH),$(HOST_ARCH))
ifneq ($(SANITIZE),0)
$(error SANITIZE=$(SANITIZE) is for builds for this machine, not for ARCH=$(ARCH))
endif
CROSS        := 1
B            := build/$(ARCH)
CC           := $(ARCH)-linux-gnu-gcc
# pkg-config answers for the target's libraries (Check).
PKG_CONFIG   := PKG_CONFIG_LIBDIR=/usr/lib/$(ARCH)-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
else
PKG_CONFIG   := pkg-config
endif
# The instruction set the compiler emits (x86_64, aarch64, ...): it picks
# the cpu plugin's SIMD flags (plugins/cpu/plugin.mk) and test variants.
TARGET_CPU   := $(firstword $(subst -, ,$(shell $(CC) -dumpmachine)))

OPT          ?= -O2
WARN         := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CFLAGS_BASE  := -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC -fvisibility=hidden $(WARN) $(SAN_FLAGS) -Icore/include
LDFLAGS_BASE := $(SAN_FLAGS) -Wl,--no-undefined -Wl,-z,relro -Wl,-z,now
# Keep user CFLAGS/LDFLAGS last so packagers can add hardening flags.
ALL_CFLAGS    = $(CFLAGS_BASE) $(CFLAGS)
ALL_LDFLAGS   = $(LDFLAGS_BASE) $(LDFLAGS)

CORE_SRCS    := $(wildcard core/*.c)
CORE_OBJS    := $(CORE_SRCS:%.c=$(B)/obj/%.o)
CORE_LIB     := $(B)/lib/libgllmk.so.$(VERSION)
CORE_SONAME  := libgllmk.so.$(SOVERSION)
HEADERS      := $(wildcard core/include/gllmk/*.h) core/include/gllmk/gllmk_ops.def

.PHONY: all run check install uninstall clean blobs install-core install-dev \
        install-model install-model-dev install-tools deps-build deps-check
.DEFAULT_GOAL := all

all:: core model plugins tools

# ------------------------------------------------------------------ core

.PHONY: core
core: $(B)/lib/$(CORE_SONAME) $(B)/lib/libgllmk.so $(B)/gllmk.pc

# -MD, not -MMD: the .d files list system headers too, which
# tools/check-header-packages.sh maps to the Debian packages they come from.
$(B)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MD -MP -c $< -o $@

$(CORE_OBJS): ALL_CFLAGS += -DGLLMK_BUILDING_CORE

$(CORE_LIB): $(CORE_OBJS) core/libgllmk.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(CORE_SONAME) -Wl,--version-script=core/libgllmk.map \
	  $(ALL_LDFLAGS) -o $@ $(CORE_OBJS) -ldl -lpthread

$(B)/lib/$(CORE_SONAME): $(CORE_LIB)
	ln -sf $(notdir $<) $@
$(B)/lib/libgllmk.so: $(B)/lib/$(CORE_SONAME)
	ln -sf $(notdir $<) $@

# gllmk.pc for the paths given now: `make install PREFIX=/usr` after a plain
# `make` must not install the /usr/local paths of the earlier build.
GEN_PC = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@PLUGINDIR@|$(PLUGINDIR)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' $(1)

$(B)/gllmk.pc: gllmk.pc.in Makefile
	@mkdir -p $(dir $@)
	$(call GEN_PC,gllmk.pc.in) > $@

# ---------------------------------------------------------------- model
#
# libgllmk-model (core/model/): the generator, built only on libgllmk's
# public API; its own library, header and pkg-config file (docs/packaging.md).

MODEL_SRCS    := $(wildcard core/model/*.c)
MODEL_OBJS    := $(MODEL_SRCS:%.c=$(B)/obj/%.o)
MODEL_HEADERS := core/model/include/gllmk/gllmk_model.h
MODEL_LIB     := $(B)/lib/libgllmk-model.so.$(VERSION)
MODEL_SONAME  := libgllmk-model.so.$(SOVERSION)

.PHONY: model
model: $(B)/lib/$(MODEL_SONAME) $(B)/lib/libgllmk-model.so $(B)/gllmk-model.pc

$(MODEL_OBJS): ALL_CFLAGS += -DGLLMK_BUILDING_MODEL -Icore/model/include
$(MODEL_OBJS): $(MODEL_HEADERS) core/model/model_internal.h

# It links the core's handle table (handles.c) as a table of its own for
# its models and sessions; nothing of it is exported.
$(MODEL_LIB): $(MODEL_OBJS) $(B)/obj/core/handles.o core/model/libgllmk-model.map $(B)/lib/libgllmk.so
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(MODEL_SONAME) -Wl,--version-script=core/model/libgllmk-model.map \
	  $(ALL_LDFLAGS) -o $@ $(MODEL_OBJS) $(B)/obj/core/handles.o -L$(B)/lib -lgllmk -ljansson -lm -lpthread

$(B)/lib/$(MODEL_SONAME): $(MODEL_LIB)
	ln -sf $(notdir $<) $@
$(B)/lib/libgllmk-model.so: $(B)/lib/$(MODEL_SONAME)
	ln -sf $(notdir $<) $@

$(B)/gllmk-model.pc: gllmk-model.pc.in Makefile
	@mkdir -p $(dir $@)
	$(call GEN_PC,gllmk-model.pc.in) > $@

# --------------------------------------------------------------- plugins
#
# Each plugins/<name>/plugin.mk sets <name>_SRCS (C sources), and may set
# <name>_CFLAGS, <name>_LDLIBS, <name>_OBJS_EXTRA (objects with their own
# rules, e.g. embedded blobs). A plugin never links libgllmk.

PLUGINS := $(sort $(patsubst plugins/%/plugin.mk,%,$(wildcard plugins/*/plugin.mk)))
include $(wildcard plugins/*/plugin.mk)
# A cross build has only the cpu plugin: the others' devices are not there
# to test under qemu-user.
ifdef CROSS
PLUGINS := cpu
endif

define plugin_template
$(1)_OBJS := $$($(1)_SRCS:%.c=$$(B)/obj/%.o) $$($(1)_OBJS_EXTRA)
$$($(1)_SRCS:%.c=$$(B)/obj/%.o): ALL_CFLAGS += $$($(1)_CFLAGS)
$$(B)/lib/gllmk/gllmk-$(1).so: $$($(1)_OBJS)
	@mkdir -p $$(dir $$@)
	$$(CC) -shared $$(ALL_LDFLAGS) -o $$@ $$($(1)_OBJS) $$($(1)_LDLIBS)
.PHONY: plugin-$(1) install-plugin-$(1)
plugin-$(1): $$(B)/lib/gllmk/gllmk-$(1).so
install-plugin-$(1): $$(B)/lib/gllmk/gllmk-$(1).so
	install -d $$(DESTDIR)$$(PLUGINDIR)
	install -m 0644 $$< $$(DESTDIR)$$(PLUGINDIR)/gllmk-$(1).so
endef
$(foreach p,$(PLUGINS),$(eval $(call plugin_template,$(p))))

.PHONY: plugins
plugins: $(PLUGINS:%=plugin-%)

# ----------------------------------------------------------------- tools

TOOL_CFLAGS  := -Wl,-rpath,'$$ORIGIN/../lib'
TOOLS        := gllmk-info
-include tools/tools.mk

# -lgllmk links through the libgllmk.so symlink: depend on it, not only on
# the SONAME link (make -j16 once linked before the symlink existed).
# A tool may name more libraries of this tree in <tool>_DEPS (built first).
define tool_template
$$(B)/bin/$(1): $$($(1)_SRCS:%.c=$$(B)/obj/%.o) $$(B)/lib/libgllmk.so $$($(1)_DEPS)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_LDFLAGS) $$(TOOL_CFLAGS) -o $$@ $$($(1)_SRCS:%.c=$$(B)/obj/%.o) \
	  -L$$(B)/lib $$($(1)_LDLIBS) -lgllmk
endef
$(foreach t,$(TOOLS),$(eval $(call tool_template,$(t))))

.PHONY: tools
tools: $(TOOLS:%=$(B)/bin/%)

# ----------------------------------------------------------------- tests

-include tests/tests.mk

# ------------------------------------------------------------ main job

# Dependencies first, then a sub-make, so `make -j run` cannot race them.
run:
	@sh tools/ensure-deps.sh build
	@$(MAKE) --no-print-directory all
	$(B)/bin/gllmk-info
	$(B)/bin/gllmk-demo
	$(B)/bin/gllmk-generate --synthetic tiny --quiet
	$(B)/bin/gllmk-bench --quick

# Installs missing build/test packages when run as root (Debian 12),
# otherwise names them and stops.
deps-build:
	@sh tools/ensure-deps.sh build
deps-check:
	@sh tools/ensure-deps.sh check

# --------------------------------------------------------------- install

install: install-core install-dev install-model install-model-dev install-tools \
         $(PLUGINS:%=install-plugin-%)

install-core: $(B)/lib/$(CORE_SONAME)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PLUGINDIR)
	install -m 0755 $(CORE_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libgllmk.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(CORE_SONAME)

install-dev: $(B)/lib/libgllmk.so
	install -d $(DESTDIR)$(INCLUDEDIR)/gllmk $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(LIBDIR)
	install -m 0644 $(HEADERS) $(DESTDIR)$(INCLUDEDIR)/gllmk/
	$(call GEN_PC,gllmk.pc.in) > $(DESTDIR)$(PKGCONFIGDIR)/gllmk.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/gllmk.pc
	ln -sf $(CORE_SONAME) $(DESTDIR)$(LIBDIR)/libgllmk.so

install-model: $(B)/lib/$(MODEL_SONAME)
	install -d $(DESTDIR)$(LIBDIR)
	install -m 0755 $(MODEL_LIB) $(DESTDIR)$(LIBDIR)/
	ln -sf libgllmk-model.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(MODEL_SONAME)

install-model-dev: $(B)/lib/libgllmk-model.so
	install -d $(DESTDIR)$(INCLUDEDIR)/gllmk $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(LIBDIR)
	install -m 0644 $(MODEL_HEADERS) $(DESTDIR)$(INCLUDEDIR)/gllmk/
	$(call GEN_PC,gllmk-model.pc.in) > $(DESTDIR)$(PKGCONFIGDIR)/gllmk-model.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/gllmk-model.pc
	ln -sf $(MODEL_SONAME) $(DESTDIR)$(LIBDIR)/libgllmk-model.so

install-tools: tools
	install -d $(DESTDIR)$(BINDIR)
	install -m 0755 $(TOOLS:%=$(B)/bin/%) $(DESTDIR)$(BINDIR)/

# Pure Python (ctypes), nothing to build; _paths.py tells it where LIBDIR is.
.PHONY: install-python
install-python:
	install -d $(DESTDIR)$(PYTHONDIR)/gllmk
	install -m 0644 tools/python/gllmk/*.py $(DESTDIR)$(PYTHONDIR)/gllmk/
	printf 'LIBDIR = "%s"\n' '$(LIBDIR)' > $(DESTDIR)$(PYTHONDIR)/gllmk/_paths.py
	chmod 0644 $(DESTDIR)$(PYTHONDIR)/gllmk/_paths.py

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libgllmk.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(CORE_SONAME) \
	      $(DESTDIR)$(LIBDIR)/libgllmk.so $(DESTDIR)$(PKGCONFIGDIR)/gllmk.pc
	rm -f $(DESTDIR)$(LIBDIR)/libgllmk-model.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(MODEL_SONAME) \
	      $(DESTDIR)$(LIBDIR)/libgllmk-model.so $(DESTDIR)$(PKGCONFIGDIR)/gllmk-model.pc
	rm -f $(PLUGINS:%=$(DESTDIR)$(PLUGINDIR)/gllmk-%.so)
	rm -f $(TOOLS:%=$(DESTDIR)$(BINDIR)/%)
	rm -rf $(DESTDIR)$(INCLUDEDIR)/gllmk
	rm -rf $(DESTDIR)$(PYTHONDIR)/gllmk
	-rmdir $(DESTDIR)$(PLUGINDIR) 2>/dev/null

clean:
	rm -rf build

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
