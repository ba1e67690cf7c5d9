"""Build a C extension under ASan+UBSan, beside the real one, for ``make sanitize`` and ``make fuzz-bindings``.

    .venv/bin/python tests/fuzz/build_asan_ext.py OUT_DIR [npuhal|cpu ...]

``npuhal`` (the default) compiles ``csrc/build_npu.py``'s very ``ffibuilder`` (same
sources, same build id) with ``-fsanitize=address,undefined`` into
``OUT_DIR/npuhal/_npu.abi3.so`` and copies the rest of the ``npuhal`` package (its
Python and AIDL) next to it, so that ``PYTHONPATH=OUT_DIR`` makes every process that
imports ``npuhal`` (the HAL process, above all) load the instrumented driver while
everything else stays as installed. ``cpu`` does the same for ``csrc/build_nn_cpu.py``'s
``framework.nn._cpu`` (the operation library and its bindings, as nnapi-reference runs
them in the app's process) in a copy of the ``framework`` package. The sanitizer
runtime must be loaded first: ``LD_PRELOAD=$(cc -print-file-name=libasan.so)``.
The installed extensions in the source tree are never touched.
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: what each name builds: (the package copied to OUT_DIR, the builder, the extension's folder in it)
EXTENSIONS = {
    "npuhal": ("npuhal", "build_npu.py", "npuhal"),
    "cpu": ("framework", "build_nn_cpu.py", "framework/nn"),
}
SAN = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined", "-g"]


def build(out: Path, name: str) -> Path:
    package, builder_file, folder = EXTENSIONS[name]
    pkg = out / package
    if pkg.exists():
        shutil.rmtree(pkg)
    shutil.copytree(ROOT / package, pkg, ignore=shutil.ignore_patterns("*.so", "__pycache__", "_npu.c", "_cpu.c", "*.o"))
    builder = runpy.run_path(str(ROOT / "csrc" / builder_file))["ffibuilder"]
    # cffi compiles in tmpdir with the builder's relative source paths: give it a copy
    # of csrc there (objects land in the copy, never in the tree).
    tmp = out / "tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(ROOT / "csrc", tmp / "csrc", ignore=shutil.ignore_patterns("*.o", "__pycache__"))
    built = Path(builder.compile(tmpdir=str(tmp), verbose=False))
    target = out / folder / built.name
    shutil.copy2(built, target)
    return target


def main() -> int:
    names = sys.argv[2:] or ["npuhal"]
    if len(sys.argv) < 2 or not set(names) <= set(EXTENSIONS):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1]).resolve()
    os.chdir(ROOT)  # the builders name their sources relative to the tree
    os.environ["CFLAGS"] = " ".join([os.environ.get("CFLAGS", ""), *SAN]).strip()
    os.environ["LDFLAGS"] = " ".join([os.environ.get("LDFLAGS", ""), "-fsanitize=address,undefined"]).strip()
    for name in names:
        print(f"ASan/UBSan {name} extension: {build(out, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
