"""The float convolutions give the same bits on every x86-64 machine, FMA or not.

Their sums fuse each product (csrc/kernels' OPS_FMA): the x86-64-v3 clones and the AVX-512
kernels (the GEMM's, the depthwise convolution's) with the FMA instruction, the baseline with
C99's fmaf, all rounded once as IEEE 754 requires. tests/kernels_fma_check.c runs CONV_2D
(3x3 and 1x1), GROUPED_CONV_2D, DEPTHWISE_CONV_2D (multiplier 1 on 38 and 91 channels, and
2), FULLY_CONNECTED and TRANSPOSE_CONV_2D on fixed pseudo-random data; built with the clones
(the loader picks x86-64-v3, and AVX-512 where the CPU has them) and with the baseline alone
(``-DNPU_NO_CLONES``), the two print the same bytes.
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
SOURCES = [CSRC / "kernels" / f for f in ("ops_conv.c", "ops_gemm.c", "ops_common.c", "ops_math.c", "quant.c")]
CFLAGS = ["-std=gnu11", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror"]  # csrc/_cbuild.py's

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")


def build_and_run(tmp: pathlib.Path, name: str, *flags: str) -> tuple[dict[str, np.ndarray], str]:
    exe = tmp / name
    cc = shlex.split(os.environ.get("CC") or "cc")
    argv = [*cc, *CFLAGS, *flags, f"-I{CSRC / 'include'}", str(ROOT / "tests" / "kernels_fma_check.c"),
            *map(str, SOURCES), str(CSRC / "hw" / "errors.c"), "-lm", "-o", str(exe)]
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    done = subprocess.run([str(exe)], check=True, capture_output=True, timeout=120)
    outputs, data = {}, done.stdout
    while data:
        header, data = data.split(b"\n", 1)
        op, count = header.decode().split()
        outputs[op] = np.frombuffer(data[: 4 * int(count)], np.float32)
        data = data[4 * int(count):]
    return outputs, done.stderr.decode()


def draws(count: int, state: int = 12345) -> tuple[np.ndarray, int]:
    """The check's xorshift32 values in [-1, 1)."""
    values = []
    for _ in range(count):
        state ^= (state << 13) & 0xFFFFFFFF
        state ^= state >> 17
        state ^= (state << 5) & 0xFFFFFFFF
        values.append(np.float32(state >> 8) / np.float32(1 << 24) * np.float32(2) - np.float32(1))
    return np.array(values, np.float32), state


def test_the_baseline_and_the_fma_clone_give_the_same_bits(tmp_path):
    clones, cpu = build_and_run(tmp_path, "clones")
    baseline, _ = build_and_run(tmp_path, "baseline", "-DNPU_NO_CLONES")
    assert list(clones) == ["fully_connected", "conv_2d", "conv_2d_1x1", "grouped_conv_2d", "depthwise_conv_2d",
                            "depthwise_conv_2d_91", "depthwise_conv_2d_x2", "transpose_conv_2d"]
    for op, values in clones.items():
        assert np.isfinite(values).all() and np.count_nonzero(values) > values.size // 4, op  # RELU zeroes about half
        assert values.tobytes() == baseline[op].tobytes(), f"{op}: the clones ({cpu.strip()}) and the baseline differ"
    # both fuse: FULLY_CONNECTED (its inputs drawn first) is the bias, then each product
    # added exactly (float64) and rounded once, in order; rounding each product differs
    values, state = draws(7 * 37)
    x = values.reshape(7, 37)
    values, state = draws(39 * 37, state)
    w = values.reshape(39, 37)
    bias, _ = draws(39, state)
    fused = np.broadcast_to(bias, (7, 39)).copy()
    unfused = fused.copy()
    for k in range(37):
        fused = (fused + x[:, k:k + 1].astype(np.float64) * w[:, k]).astype(np.float32)
        unfused = unfused + (x[:, k:k + 1] * w[:, k])
    np.testing.assert_array_equal(clones["fully_connected"].reshape(7, 39), fused)
    assert not np.array_equal(fused, unfused)
    if "x86-64-v3: yes" not in cpu and "avx512f: yes" not in cpu:
        pytest.skip("this CPU runs the baseline: the two builds ran the same code")
