#!/bin/sh
# install-test.sh - `make install` into a fresh staging tree, build
# tests/consumer.c against it with pkg-config alone, run it, check that it
# uses the staged library and finds the staged cpu plugin, then
# `make uninstall` and check that no file is left.
#
# Environment (set by `make check`): MAKE, CC, SANITIZE, SAN_FLAGS, and
# TEST_WRAPPER (e.g. ASAN_OPTIONS=...) for running the consumer.
set -eu

MAKE=${MAKE:-make}
CC=${CC:-cc}
SANITIZE=${SANITIZE:-0}
SAN_FLAGS=${SAN_FLAGS:-}
TEST_WRAPPER=${TEST_WRAPPER:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/gllmk-install-test-XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
libdir=$stage/usr/lib

fail() {
  echo "install-test: FAIL: $*" >&2
  exit 1
}

echo "install-test: make install DESTDIR=$stage PREFIX=/usr"
$MAKE --no-print-directory install DESTDIR="$stage" PREFIX=/usr SANITIZE="$SANITIZE" \
  >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "make install failed"; }

for f in "$libdir/libgllmk.so.0" "$libdir/libgllmk.so" "$libdir/gllmk/gllmk-cpu.so" \
         "$libdir/pkgconfig/gllmk.pc" "$stage/usr/include/gllmk/gllmk.h" \
         "$stage/usr/include/gllmk/gllmk_plugin.h" "$stage/usr/include/gllmk/gllmk_ops.def" \
         "$libdir/libgllmk-model.so.0" "$libdir/pkgconfig/gllmk-model.pc" \
         "$stage/usr/include/gllmk/gllmk_model.h" "$stage/usr/bin/gllmk-generate"; do
  [ -e "$f" ] || fail "${f#"$stage"} was not installed"
done

# Only the staged tree: no system .pc files, paths prefixed with the stage.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export PKG_CONFIG_LIBDIR="$libdir/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$stage"
flags=$(pkg-config --cflags --libs gllmk) || fail "pkg-config --cflags --libs gllmk failed"
plugindir=$(pkg-config --variable=plugindir gllmk) || fail "pkg-config --variable=plugindir failed"
case $plugindir in
  /usr/lib/gllmk | "$stage/usr/lib/gllmk") ;;
  *) fail "pkg-config --variable=plugindir gllmk is '$plugindir', expected /usr/lib/gllmk" ;;
esac

# shellcheck disable=SC2086 # flag lists
$CC -std=c11 -Wall -Wextra -Werror $SAN_FLAGS tests/consumer.c $flags -o "$work/consumer" \
  || fail "tests/consumer.c does not build with: $flags"

# LD_LIBRARY_PATH only tells the dynamic linker where the staged library
# is; gllmk itself must find its plugins next to that library.
run_consumer() {
  # shellcheck disable=SC2086 # wrapper is a word list
  LD_LIBRARY_PATH="$libdir" $TEST_WRAPPER "$work/consumer" "$@" >"$work/out.txt" 2>&1 \
    || { cat "$work/out.txt" >&2; fail "the consumer failed ($*)"; }
}

staged_plugins=$(cd "$libdir/gllmk" && pwd -P)
for backend in "" cpu; do
  # shellcheck disable=SC2086 # empty = the automatic choice
  run_consumer $backend
  scanned=$(sed -n 's/^plugin_dir: //p' "$work/out.txt")
  [ -d "$scanned" ] || fail "the consumer scanned '$scanned', not a directory"
  [ "$(cd "$scanned" && pwd -P)" = "$staged_plugins" ] \
    || fail "the consumer scanned $scanned instead of the staged $libdir/gllmk"
  grep -Eq "^plugin: cpu (selected|available) $scanned/gllmk-cpu.so\$" "$work/out.txt" \
    || { cat "$work/out.txt" >&2; fail "the staged cpu plugin was not found or not usable"; }
  echo "install-test: consumer: $(grep '^backend:' "$work/out.txt")"
done
grep -q '^backend: cpu$' "$work/out.txt" || fail "a forced cpu context is not on cpu"

# The generator: gllmk-model.pc pulls in gllmk.pc (Requires: gllmk).
model_flags=$(pkg-config --cflags --libs gllmk-model) || fail "pkg-config gllmk-model failed"
case $model_flags in *-lgllmk-model*-lgllmk*) ;; *) fail "gllmk-model flags lack a library: $model_flags" ;; esac
# shellcheck disable=SC2086 # flag lists
$CC -std=c11 -Wall -Wextra -Werror $SAN_FLAGS tests/model_consumer.c $model_flags \
  -o "$work/model_consumer" || fail "tests/model_consumer.c does not build with: $model_flags"
# shellcheck disable=SC2086 # wrapper is a word list
LD_LIBRARY_PATH="$libdir" $TEST_WRAPPER "$work/model_consumer" >"$work/model.txt" 2>&1 \
  || { cat "$work/model.txt" >&2; fail "the model consumer failed"; }
echo "install-test: model consumer: $(cat "$work/model.txt")"

$MAKE --no-print-directory uninstall DESTDIR="$stage" PREFIX=/usr SANITIZE="$SANITIZE" \
  >"$work/uninstall.log" 2>&1 || { cat "$work/uninstall.log" >&2; fail "make uninstall failed"; }
left=$(find "$stage" ! -type d)
[ -z "$left" ] || fail "make uninstall left files behind: $left"
echo "install-test: PASS"
