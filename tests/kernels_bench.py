"""Kernel benchmark: the operation library's CONV_2D against numpy's matmul on the same GEMM.

    .venv/bin/python tests/kernels_bench.py [--repeat N]

(It lives under tests/, not bench/: it calls the C directly through framework.nn._cpu, a
private module that only tests may import, tests/test_layering.py says.)

A mobile-sized layer (MobileNet's 56x56 stage): input 1x56x56x64, a 3x3 filter to 64
channels, stride 1, SAME padding, computed by ``npu_op_conv_2d`` (im2col packed on the fly
into the cache-blocked GEMM) in float32 and in TENSOR_QUANT8_ASYMM (int32 accumulation,
Android's requantization). The in-run baseline is numpy's matmul of the same GEMM, the
input im2col'd beforehand (not timed): float32 ``A @ W.T`` for float32 (BLAS), and the
int32 product of the centred values for quant8 (numpy's integer matmul, no BLAS). numpy's
BLAS runs on one thread, as the C kernels do, unless OPENBLAS_NUM_THREADS says otherwise.

Prints, per variant, the best and median wall time of --repeat runs, GFLOP/s
(2*M*N*K per run) and the ratio C/numpy of throughput (above 1: the C is faster), and the
CPU time per run (which load skews less than wall time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy loads its BLAS: one thread, as the C

import numpy as np  # noqa: E402

from framework.nn._cpu import ffi, lib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n, h, w, c, oc, k = 1, 56, 56, 64, 64, 3
    rng = np.random.default_rng(0)
    M, K = n * h * w, k * k * c
    flops = 2.0 * M * oc * K

    def descriptor(type_code, array, scale=0.0, zero_point=0):
        t = ffi.new("struct npu_tensor *")
        t.type, t.rank = type_code, array.ndim
        for i, d in enumerate(array.shape):
            t.dims[i] = d
        t.data = ffi.cast("void *", ffi.from_buffer(array, require_writable=True))
        t.scale, t.zero_point = scale, zero_point
        return t

    window = ffi.new("struct npu_window *")
    window.pad_left = window.pad_right = window.pad_top = window.pad_bottom = 1
    window.stride_w = window.stride_h = window.dilation_w = window.dilation_h = 1

    def im2col(x):
        padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        cols = [padded[:, i : i + h, j : j + w, :] for i in range(k) for j in range(k)]
        return np.concatenate(cols, axis=-1).reshape(M, K)

    def timed(fn):
        walls, cpus = [], []
        fn()  # warm up
        for _ in range(args.repeat):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        return min(walls), statistics.median(walls), statistics.median(cpus)

    rows = []
    # float32
    x = rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32)
    f = rng.uniform(-1, 1, (oc, k, k, c)).astype(np.float32)
    b = rng.uniform(-1, 1, oc).astype(np.float32)
    out = np.zeros((n, h, w, oc), np.float32)
    keep = [descriptor(3, a) for a in (x, f, b, out)]
    rc = lib.npu_op_conv_2d(keep[0], keep[1], keep[2], window, keep[3], 0, 2**64 - 1)
    assert rc == lib.NPU_OK, rc
    a_cols, w_rows = im2col(x), f.reshape(oc, K)
    np.testing.assert_allclose(out.reshape(M, oc), a_cols @ w_rows.T + b, atol=1e-4, rtol=1e-4)
    rows.append(("conv 3x3 float32", timed(lambda: lib.npu_op_conv_2d(keep[0], keep[1], keep[2], window, keep[3], 0, 2**64 - 1)),
                 timed(lambda: a_cols @ w_rows.T)))
    # quant8
    xq = rng.integers(0, 256, (n, h, w, c), dtype=np.uint8)
    fq = rng.integers(0, 256, (oc, k, k, c), dtype=np.uint8)
    bq = rng.integers(-1000, 1000, oc).astype(np.int32)
    outq = np.zeros((n, h, w, oc), np.uint8)
    keepq = [descriptor(5, xq, 0.02, 128), descriptor(5, fq, 0.01, 120), descriptor(4, bq), descriptor(5, outq, 0.5, 100)]
    assert lib.npu_op_conv_2d(keepq[0], keepq[1], keepq[2], window, keepq[3], 0, 2**64 - 1) == lib.NPU_OK
    aq = im2col(xq.astype(np.int32) - 128)  # the pad is the zero point: a centred 0
    wq = fq.reshape(oc, K).astype(np.int32) - 120
    rows.append(("conv 3x3 quant8", timed(lambda: lib.npu_op_conv_2d(keepq[0], keepq[1], keepq[2], window, keepq[3], 0, 2**64 - 1)),
                 timed(lambda: aq @ wq.T)))

    print(f"CONV_2D 1x{h}x{w}x{c} -> {oc}, 3x3, SAME: GEMM M={M} N={oc} K={K}, {flops / 1e9:.3f} GFLOP per run; "
          f"numpy {np.__version__}, BLAS threads {os.environ['OPENBLAS_NUM_THREADS']}, best of {args.repeat}")
    print(f"{'variant':<18} {'C best ms':>10} {'C med ms':>9} {'C cpu ms':>9} {'C GFLOP/s':>10} "
          f"{'np best ms':>11} {'np GFLOP/s':>11} {'C/np':>6}")
    for name, (c_best, c_med, c_cpu), (n_best, _, _) in rows:
        print(f"{name:<18} {c_best * 1e3:>10.2f} {c_med * 1e3:>9.2f} {c_cpu * 1e3:>9.2f} {flops / c_best / 1e9:>10.2f} "
              f"{n_best * 1e3:>11.2f} {flops / n_best / 1e9:>11.2f} {n_best / c_best:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
