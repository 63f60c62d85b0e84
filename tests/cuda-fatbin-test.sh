#!/bin/sh
# cuda-fatbin-test.sh BINDIR - checks, with no GPU needed, that the fatbin
# embedded in gllmk-cuda.so holds SASS for every architecture DESIGN §6 names
# and PTX for newer GPUs. The plugin parses its own embedded fatbin header
# for gllmk-info's "details" line; this test reads that line.
set -eu
bindir=$1
details=$("$bindir/gllmk-info" | awk '/gllmk-cuda.so$/ {found = 1} found && /details:/ {print; exit}')
if [ -z "$details" ]; then
  echo "cuda-fatbin-test: FAIL: gllmk-cuda.so is not listed with its kernel details" >&2
  exit 1
fi
status=0
for arch in "SASS sm_75" sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a "PTX compute_90"; do
  case "$details" in
    *" $arch"*) ;;
    *) echo "cuda-fatbin-test: FAIL: embedded fatbin lacks $arch ($details)" >&2; status=1 ;;
  esac
done
[ $status -eq 0 ] && echo "cuda-fatbin-test: 1 passed, 0 failed (sm_75 sm_80 sm_86 sm_87 sm_89 sm_90 sm_90a + compute_90 PTX embedded)"
exit $status
