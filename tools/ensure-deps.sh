#!/bin/sh
# ensure-deps.sh [list] build|check - makes sure the Debian 12 packages gllmk
# needs are installed. As root it installs what is missing; otherwise it
# names the packages and stops. (On a system without dpkg it only lists
# them.) With "list" it prints the package names, one per line, and does
# nothing else: tools/check-header-packages.sh takes them from here, so
# this file stays the one list.
set -eu

# To build every plugin: compiler, make, pkg-config, the driver headers the
# vulkan and hsa plugins take their types from (no driver is linked), and
# DLPack's header (<dlpack/dlpack.h>, the core's tensor exchange types).
BUILD_PACKAGES="gcc make pkg-config libc6-dev libvulkan-dev libhsa-runtime-dev libdlpack-dev \
  libjansson-dev"
# To run the tests and the benchmark: Check, the Vulkan loader and lavapipe
# (the vulkan conformance run), PoCL and the OpenCL headers (<CL/cl.h>: the
# test-only plugin that runs the hsa kernels on the CPU, plugins/hsa/pocl),
# OpenBLAS (gllmk-bench's reference), valgrind (make check-valgrind), clang
# and its runtime libraries (a libFuzzer target and a ThreadSanitizer build),
# NumPy and pytest for Debian's python3 (the Python package's tests).
CHECK_PACKAGES="$BUILD_PACKAGES check libvulkan1 mesa-vulkan-drivers pocl-opencl-icd \
ocl-icd-libopencl1 opencl-c-headers libopenblas0 valgrind clang libclang-rt-14-dev \
python3-numpy python3-pytest"
# On x86_64, `make check` also cross-builds for aarch64 and runs that build
# under qemu-user (docs/testing.md): the cross compiler and C library, QEMU's
# user-mode emulator, and the arm64 builds of the C library (its dynamic
# loader runs the programs) and of the libraries they link, Check and
# jansson: Debian multiarch packages, for which dpkg needs the arm64
# architecture (added below).
if [ "$(uname -m)" = x86_64 ]; then
  CHECK_PACKAGES="$CHECK_PACKAGES gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user \
libc6:arm64 check:arm64 libjansson-dev:arm64"
fi

list=false
if [ "${1:-}" = list ]; then
  list=true
  shift
fi
case "${1:-build}" in
  build) wanted=$BUILD_PACKAGES" libopenblas0" ;;
  check) wanted=$CHECK_PACKAGES ;;
  *) echo "usage: $0 [list] build|check" >&2; exit 2 ;;
esac

if $list; then
  # shellcheck disable=SC2086 # one name per word
  printf '%s\n' $wanted
  exit 0
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "ensure-deps: not a Debian system; make sure these (Debian names) are installed: $wanted"
  exit 0
fi

missing=""
for package in $wanted; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  case "$status" in
    *" installed") ;;
    *) missing="$missing $package" ;;
  esac
done
[ -z "$missing" ] && exit 0

# The foreign architectures (the ARCH of NAME:ARCH) dpkg does not know yet.
new_arches=""
for arch in $(printf '%s\n' $missing | sed -n 's/^[^:]*:\(.*\)$/\1/p' | sort -u); do
  dpkg --print-foreign-architectures | grep -qx "$arch" || new_arches="$new_arches $arch"
done

if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-deps: missing Debian packages:$missing" >&2
  for arch in $new_arches; do
    echo "ensure-deps: first add their architecture: sudo dpkg --add-architecture $arch" >&2
  done
  echo "ensure-deps: install them with: sudo apt-get update && sudo apt-get install$missing" >&2
  exit 1
fi
echo "ensure-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
for arch in $new_arches; do
  echo "ensure-deps: adding the $arch architecture to dpkg (multiarch)"
  dpkg --add-architecture "$arch"
done
if ! apt-get update -qq; then
  echo "ensure-deps: apt-get update failed" >&2
  exit 1
fi
# shellcheck disable=SC2086
if ! apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
  echo "ensure-deps: apt-get could not install:$missing" >&2
  if [ -n "$(dpkg --print-foreign-architectures)" ]; then
    echo "ensure-deps: packages named NAME:ARCH come from the apt sources' ARCH indexes;" \
         "see whether they have it: apt-cache policy$missing" >&2
  fi
  exit 1
fi
