"""What the two cffi builders (build_npu.py, build_nn_cpu.py) share.

cffi's parser cannot read preprocessor directives, so the cdef is the public headers
run through the C compiler's preprocessor, with empty stand-ins for the libc headers
whose types cffi already knows: the headers stay the one place each declaration lives.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sysconfig
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
INCLUDE = HERE / "include"
# -ffp-contract=off: no multiply-add fused by the compiler (a kernel fuses its own,
# explicitly: csrc/kernels/ops_internal.h's OPS_FMA), so results do not depend on the
# instruction set
CFLAGS = ["-std=gnu11", "-O2", "-ffp-contract=off", "-Wall", "-Wextra"]


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def includes(headers: tuple[str, ...]) -> str:
    """``#include`` lines for ``headers`` (paths under csrc/include)."""
    return "".join(f'#include "{h}"\n' for h in headers)


def cdef_text(headers: tuple[str, ...]) -> str:
    """``headers``, preprocessed into something cffi's parser reads."""
    with tempfile.TemporaryDirectory() as fake:
        for name in ("stdint.h", "stddef.h", "stdbool.h"):
            pathlib.Path(fake, name).write_text("/* cffi knows these types */\n")
        cmd = [*_compiler(), "-E", "-P", "-nostdinc", "-I", fake, "-I", str(INCLUDE),
               "-DNPU_CDEF", "-x", "c", "-"]
        result = subprocess.run(cmd, input=includes(headers), text=True, capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"preprocessing the npu headers {', '.join(headers)} failed:\n{result.stderr}")
    return result.stdout


def rel(path: pathlib.Path) -> str:
    """``path`` relative to the current directory: setuptools places object files by
    source path, and a relative one keeps them in build/."""
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)
