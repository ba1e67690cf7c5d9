"""The cffi builder for npuemu's C layer: ``ffibuilder`` makes ``npuhal._npu``.

API mode, out of line.  The extension holds the emulated hardware
(csrc/hw), the float32 kernels (csrc/kernels) and the built-in reference
driver (csrc/drivers/reference), plus the loader that dlopens any other
driver .so by path.

The cdef is not a second copy of the declarations: it is the public headers
themselves, run through the C preprocessor with an empty stand-in for the
libc headers (cffi already knows ``uint32_t``, ``size_t`` and ``bool``), so
the X-macro error list expands into its enum and the include guards vanish.

The build id baked into every driver's version string is a hash of the C
sources, so each change of the C code yields a new getVersionString(), as
NNAPI requires of a new driver build.
"""

from __future__ import annotations

import hashlib
import pathlib
import sys

from cffi import FFI

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _cbuild import CFLAGS, HERE, INCLUDE, cdef_text, includes, rel  # noqa: E402 - beside this file

# system.h includes the driver-facing headers; ops.h is the operation library.
HEADERS = ("npu/system.h", "npu/ops.h", "npu/bind.h")
SOURCE_DIRS = ("hw", "kernels", "drivers/reference")


def sources() -> list[pathlib.Path]:
    return sorted(p for d in SOURCE_DIRS for p in (HERE / d).glob("*.c"))


def build_id() -> str:
    """A short hash of every C source and header under csrc/."""
    digest = hashlib.sha256()
    for path in sorted(HERE.rglob("*")):
        if path.suffix in (".c", ".h") and "tests" not in path.relative_to(HERE).parts:
            digest.update(str(path.relative_to(HERE)).encode())
            digest.update(b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


ffibuilder = FFI()
ffibuilder.cdef(cdef_text(HEADERS))
ffibuilder.set_source(
    "npuhal._npu",
    includes(HEADERS),
    sources=[rel(p) for p in sources()],
    include_dirs=[rel(INCLUDE)],
    define_macros=[("NPU_BUILD_ID", f'"{build_id()}"'), ("NPU_BUILTIN_REFERENCE", "1")],
    extra_compile_args=CFLAGS,
    libraries=["m", "dl", "pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
