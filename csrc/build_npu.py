"""The cffi builder for npuemu's C layer (API mode, out of line).

Placeholder until the emulated hardware lands: it compiles only the version
constant, so the whole build and install path is exercised from the first commit.
"""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef("const char *npu_build_version(void);")
ffibuilder.set_source(
    "npuhal._npu",
    'const char *npu_build_version(void) { return "0.1.0"; }',
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
