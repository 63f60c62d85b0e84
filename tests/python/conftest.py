"""Shared setup of the Python tests: the package from tools/python, the
libraries from $GLLMK_LIBRARY_DIR (default: build/lib of this tree), and a
`ctx` fixture that runs a test on the cpu backend and on vulkan (lavapipe
here), each skipped with gllmk's reason where it cannot be created."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("GLLMK_LIBRARY_DIR", os.path.join(REPO, "build", "lib"))

import gllmk  # noqa: E402

BACKENDS = ("cpu", "vulkan")
_contexts = {}


def context(backend):
    """One context per backend for the whole run (or pytest.skip with why not)."""
    if backend not in _contexts:
        try:
            _contexts[backend] = gllmk.Context(backend)
        except gllmk.Error as e:
            _contexts[backend] = e
    c = _contexts[backend]
    if isinstance(c, Exception):
        pytest.skip("skipped: %s: %s" % (backend, c))
    return c


@pytest.fixture(params=BACKENDS)
def ctx(request):
    return context(request.param)


@pytest.fixture
def cpu():
    return context("cpu")


def pytest_report_header(config):
    return "gllmk libraries: %s" % os.environ["GLLMK_LIBRARY_DIR"]
