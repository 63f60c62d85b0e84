"""`make install-python` into a temporary prefix: the installed package finds
the installed libraries by itself (the LIBDIR it was installed with), with
no environment variable and no library path."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


def test_install_python(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("skipped: no make")
    libdir = os.environ["GLLMK_LIBRARY_DIR"]
    build = os.path.dirname(os.path.realpath(libdir))
    prefix = tmp_path / "prefix"
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    subprocess.run(["make", "--no-print-directory", "-C", REPO, "B=" + build, "PREFIX=" + str(prefix),
                    "install-python"], check=True, capture_output=True, env=plain)
    package = prefix / "lib" / "python3" / "dist-packages" / "gllmk"
    assert (package / "__init__.py").exists() and (package / "_paths.py").exists()
    # the libraries as install-core, install-model and install-plugin-cpu lay them out
    (prefix / "lib" / "gllmk").mkdir(parents=True)
    for name in ("libgllmk.so.0", "libgllmk-model.so.0", "gllmk/gllmk-cpu.so"):
        shutil.copy(os.path.join(libdir, name), prefix / "lib" / name)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "PYTHONPATH": str(prefix / "lib" / "python3" / "dist-packages"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    script = ("import numpy as np, gllmk\n"
              "y = gllmk.silu(np.zeros(4, np.float32))\n"
              "m = gllmk.Model('tiny', dtype='f32')\n"
              "maps = open('/proc/self/maps').read()\n"
              "print(gllmk.__file__, y.tolist(), m.context.backend, '%s/libgllmk.so.0' in maps)\n"
              % (prefix / "lib"))
    out = subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True,
                         text=True).stdout.split()
    assert out[0].startswith(str(package)) and out[-1] == "True", out
    subprocess.run(["make", "--no-print-directory", "-C", REPO, "B=" + build, "PREFIX=" + str(prefix),
                    "uninstall"], check=True, capture_output=True, env=plain)
    assert not package.exists()
