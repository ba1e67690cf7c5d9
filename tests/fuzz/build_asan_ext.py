"""Build the driver extension under ASan+UBSan, beside the real one, for ``make sanitize``.

    .venv/bin/python tests/fuzz/build_asan_ext.py OUT_DIR

It compiles ``csrc/build_npu.py``'s very ``ffibuilder`` (same sources, same build id)
with ``-fsanitize=address,undefined`` into ``OUT_DIR/npuhal/_npu.abi3.so`` and copies
the rest of the ``npuhal`` package (its Python and AIDL) next to it, so that
``PYTHONPATH=OUT_DIR`` makes every process that imports ``npuhal`` (the HAL process,
above all) load the instrumented driver while everything else stays as installed. The
sanitizer runtime must be loaded first: ``LD_PRELOAD=$(cc -print-file-name=libasan.so)``.
The installed extension in the source tree is never touched.
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAN = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-g"]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    pkg = out / "npuhal"
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(ROOT / "npuhal", pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__", "_npu.c", "*.o"))
    os.chdir(ROOT)  # the builder names its sources relative to the tree
    os.environ["CFLAGS"] = " ".join([os.environ.get("CFLAGS", ""), *SAN]).strip()
    os.environ["LDFLAGS"] = " ".join([os.environ.get("LDFLAGS", ""), "-fsanitize=address,undefined"]).strip()
    builder = runpy.run_path(str(ROOT / "csrc" / "build_npu.py"))["ffibuilder"]
    # cffi compiles in tmpdir with the builder's relative source paths: give it a copy
    # of csrc there (objects land in the copy, never in the tree).
    tmp = out / "tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(ROOT / "csrc", tmp / "csrc", ignore=shutil.ignore_patterns("*.o", "__pycache__"))
    built = Path(builder.compile(tmpdir=str(tmp), verbose=False))
    target = pkg / built.name
    shutil.copy2(built, target)
    print(f"ASan/UBSan driver extension: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
