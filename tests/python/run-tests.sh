#!/bin/sh
# run-tests.sh [BUILD_DIR] - the Python tests (tests/python, pytest) against
# BUILD_DIR/lib (default build/lib), as `make check` runs them: on the cpu
# backend and on vulkan (lavapipe here); test_torch.py skips itself without
# PyTorch and a CUDA device.
#
# Debian's interpreter (/usr/bin/python3, with python3-numpy and
# python3-pytest from tools/ensure-deps.sh) even when another python3 comes
# first on PATH; nothing is written into the tree (no .pyc, no pytest cache).
set -u
cd "$(dirname "$0")/../.."
build=${1:-build}
python=/usr/bin/python3
[ -x "$python" ] || python=python3
if ! "$python" -c 'import numpy, pytest' 2>/dev/null; then
  echo "tests/python: $python lacks numpy or pytest (apt-get install python3-numpy python3-pytest)" >&2
  exit 1
fi
exec env GLLMK_LIBRARY_DIR="$(cd "$build/lib" && pwd)" PYTHONPATH=tools/python \
  PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -rs -p no:cacheprovider tests/python
