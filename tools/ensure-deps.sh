#!/bin/sh
# ensure-deps.sh build|check - makes sure the Debian 12 packages gllmk needs
# are installed. As root it installs what is missing; otherwise it names
# the packages and stops. (On a system without dpkg it only lists them.)
set -eu

# To build every plugin: compiler, make, pkg-config, and the driver headers
# the vulkan and hsa plugins take their types from (no driver is linked).
BUILD_PACKAGES="gcc make pkg-config libc6-dev libvulkan-dev libhsa-runtime-dev"
# To run the tests and the benchmark: Check, the Vulkan loader and lavapipe
# (the vulkan conformance run), PoCL (the hsa kernels on the CPU), OpenBLAS
# (gllmk-bench's reference), valgrind (make check-valgrind).
CHECK_PACKAGES="$BUILD_PACKAGES check libvulkan1 mesa-vulkan-drivers pocl-opencl-icd \
ocl-icd-libopencl1 libopenblas0 valgrind"

case "${1:-build}" in
  build) wanted=$BUILD_PACKAGES" libopenblas0" ;;
  check) wanted=$CHECK_PACKAGES ;;
  *) echo "usage: $0 build|check" >&2; exit 2 ;;
esac

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
