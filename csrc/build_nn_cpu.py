"""The cffi builder for NNAPI's CPU device: ``ffibuilder`` makes ``framework.nn._cpu``.

API mode, out of line.  ``nnapi-reference``, the runtime's own CPU device, runs
in the app's process, as Android's runtime runs its CPU fallback in-process.  It
must compute exactly what the emulated NPU computes, so it is built from the same
kernel sources (csrc/kernels) and the error table (csrc/hw/errors.c), and from
nothing else: no emulated hardware, no driver, no threads.  That is also why this
is a second extension rather than an import of ``npuhal._npu``: the app-side
runtime must not depend on the vendor layer (DESIGN.md, "nothing imports upward").

The cdef is the public headers themselves (npu/model.h, npu/ops.h and npu/errors.h), run
through the C preprocessor with empty stand-ins for the libc headers, as
build_npu.py does, so no declaration is copied by hand.
"""

from __future__ import annotations

import pathlib
import sys

from cffi import FFI

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _cbuild import CFLAGS, HERE, INCLUDE, cdef_text, includes, rel  # noqa: E402 - beside this file

HEADERS = ("npu/errors.h", "npu/model.h", "npu/ops.h", "npu/bind.h")
# the kernels (the model's, the plan, the operation library and its bindings) and the
# error table: every file of csrc/kernels, so a new operation family needs no list here
SOURCES = (*sorted(p.relative_to(HERE).as_posix() for p in (HERE / "kernels").glob("*.c")), "hw/errors.c")


ffibuilder = FFI()
ffibuilder.cdef(cdef_text(HEADERS))
ffibuilder.set_source(
    "framework.nn._cpu",
    includes(HEADERS),
    sources=[rel(HERE / s) for s in SOURCES],
    include_dirs=[rel(INCLUDE)],
    extra_compile_args=CFLAGS,
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
