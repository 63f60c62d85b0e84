"""The ctypes declarations mirror the C headers: sizeof and offsetof of every
struct (op arguments, options, infos, DLPack) as a C compiler sees them, and
the op list as the library names it."""
import ctypes as C
import os
import shutil
import subprocess

import pytest

import gllmk
from gllmk import _capi
from conftest import REPO


def c_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <gllmk/gllmk.h>",
             "#include <gllmk/gllmk_dlpack.h>", "#include <gllmk/gllmk_model.h>",
             "int main(void) {"]
    for name, cls in sorted(_capi.STRUCTS.items()):
        lines.append('  printf("%s %%zu\\n", sizeof(%s));' % (name, name))
        for field, _ in cls._fields_:
            lines.append('  printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, field, name, field))
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


def python_layout():
    layout = {}
    for name, cls in _capi.STRUCTS.items():
        layout[name] = C.sizeof(cls)
        for field, _ in cls._fields_:
            layout["%s.%s" % (name, field)] = getattr(cls, field).offset
    return layout


def test_struct_layouts_match_c(tmp_path):
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("skipped: no C compiler (%s) to compare with" % cc)
    source = tmp_path / "layout.c"
    source.write_text(c_program())
    exe = tmp_path / "layout"
    compiled = subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "core", "include"),
                               "-I", os.path.join(REPO, "core", "model", "include")]
                              + os.environ.get("CFLAGS", "").split() + [str(source), "-o", str(exe)],
                              capture_output=True, text=True)
    if compiled.returncode and "No such file" in compiled.stderr:  # e.g. no <dlpack/dlpack.h>
        pytest.skip("skipped: cannot compile the layout program: %s" % compiled.stderr.strip())
    assert compiled.returncode == 0, compiled.stderr
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    c_layout = {key: int(value) for key, value in (line.split() for line in out.splitlines())}
    py_layout = python_layout()
    assert len(c_layout) == len(py_layout) > 100
    wrong = {k: (py_layout[k], c_layout[k]) for k in c_layout if py_layout[k] != c_layout[k]}
    assert not wrong, "ctypes vs C (python, c): %s" % wrong


def test_every_op_is_bound():
    lib = gllmk.load()
    assert [lib.gllmk_op_name(i).decode() for i in range(len(_capi.OPS))] == list(_capi.OPS)
    assert lib.gllmk_op_name(len(_capi.OPS)) is None  # no op the bindings do not know
    for name in _capi.OPS:
        assert callable(getattr(gllmk, name)) and callable(getattr(gllmk.Context, name))


def test_known_sizes():
    # x86-64 / aarch64 values, as a second opinion where no compiler is present
    assert C.sizeof(_capi.Tensor) == 152
    assert C.sizeof(_capi.ARGS["matmul"]) == 120
    assert C.sizeof(_capi.ARGS["rope"]) == 48
    assert C.sizeof(_capi.ARGS["sample"]) == 48
    assert C.sizeof(_capi.ContextOptions) == 48
