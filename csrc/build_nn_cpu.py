"""The cffi builder for NNAPI's CPU device: ``ffibuilder`` makes ``framework.nn._cpu``.

API mode, out of line.  ``nnapi-reference``, the runtime's own CPU device, runs
in the app's process, as Android's runtime runs its CPU fallback in-process.  It
must compute exactly what the emulated NPU computes, so it is built from the same
kernel sources (csrc/kernels) and the error table (csrc/hw/errors.c), and from
nothing else: no emulated hardware, no driver, no threads.  That is also why this
is a second extension rather than an import of ``npuhal._npu``: the app-side
runtime must not depend on the vendor layer (DESIGN.md, "nothing imports upward").

The cdef is the public headers themselves (npu/model.h and npu/errors.h), run
through the C preprocessor with empty stand-ins for the libc headers, as
build_npu.py does, so no declaration is copied by hand.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sysconfig
import tempfile

from cffi import FFI

HERE = pathlib.Path(__file__).resolve().parent
INCLUDE = HERE / "include"
HEADERS = ("npu/errors.h", "npu/model.h")
SOURCES = ("kernels/kernels.c", "kernels/plan.c", "hw/errors.c")


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def cdef_text() -> str:
    """npu/model.h and npu/errors.h, preprocessed into something cffi's parser reads."""
    with tempfile.TemporaryDirectory() as fake:
        for name in ("stdint.h", "stddef.h", "stdbool.h"):
            pathlib.Path(fake, name).write_text("/* cffi knows these types */\n")
        cmd = [*_compiler(), "-E", "-P", "-nostdinc", "-I", fake, "-I", str(INCLUDE),
               "-DNPU_CDEF", "-x", "c", "-"]
        text = "".join(f'#include "{h}"\n' for h in HEADERS)
        result = subprocess.run(cmd, input=text, text=True, capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"preprocessing the npu headers failed:\n{result.stderr}")
    return result.stdout


def _rel(path: pathlib.Path) -> str:
    # setuptools places object files by source path; relative keeps them in build/.
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


ffibuilder = FFI()
ffibuilder.cdef(cdef_text())
ffibuilder.set_source(
    "framework.nn._cpu",
    "".join(f'#include "{h}"\n' for h in HEADERS),
    sources=[_rel(HERE / s) for s in SOURCES],
    include_dirs=[_rel(INCLUDE)],
    extra_compile_args=["-std=gnu11", "-O2", "-Wall", "-Wextra"],
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
