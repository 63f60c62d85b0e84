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

if [ "$(id -u)" -ne 0 ]; then
  echo "ensure-deps: missing Debian packages:$missing" >&2
  echo "ensure-deps: install them with: sudo apt-get install$missing" >&2
  exit 1
fi
echo "ensure-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
