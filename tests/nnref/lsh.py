"""LSH_PROJECTION, and the hash it signs with: FarmHash's Fingerprint64 (its "na" variant).

Each bit hashes the 4-byte float seed followed by one input row's bytes, scales the signed
64-bit hash by the row's weight (1 when no weight is given), and is 1 when the sum over
rows is positive. SPARSE_DEPRECATED (1) gives each hash function's bits as one integer,
first bit most significant; SPARSE (3) adds i * 2**bits to the i-th; DENSE (2) gives the bits.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from .core import F, Call, Operand

MASK = (1 << 64) - 1
K0, K1, K2 = 0xC3A5C85C97CB3127, 0xB492B66FBE98F273, 0x9AE16A3B2F90404F


def _fetch64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 8], "little")


def _fetch32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 4], "little")


def _rotate(v: int, shift: int) -> int:
    return ((v >> shift) | (v << (64 - shift))) & MASK if shift else v


def _shift_mix(v: int) -> int:
    return v ^ (v >> 47)


def _hash16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & MASK
    a ^= a >> 47
    b = ((v ^ a) * mul) & MASK
    b ^= b >> 47
    return (b * mul) & MASK


def _len0to16(s: bytes) -> int:
    n = len(s)
    if n >= 8:
        mul = (K2 + n * 2) & MASK
        a = (_fetch64(s, 0) + K2) & MASK
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & MASK
        d = ((_rotate(a, 25) + b) * mul) & MASK
        return _hash16(c, d, mul)
    if n >= 4:
        mul = (K2 + n * 2) & MASK
        return _hash16((n + (_fetch32(s, 0) << 3)) & MASK, _fetch32(s, n - 4), mul)
    if n > 0:
        y = s[0] + (s[n >> 1] << 8)
        z = n + (s[n - 1] << 2)
        return (_shift_mix(((y * K2) ^ (z * K0)) & MASK) * K2) & MASK
    return K2


def _ends(s: bytes, first_mul: int) -> tuple[int, int, int, int]:
    """The 17-to-64-byte mix of the first 16 and last 16 bytes: (mul, a, u, v)."""
    n = len(s)
    mul = (K2 + n * 2) & MASK
    a = (_fetch64(s, 0) * first_mul) & MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & MASK
    d = (_fetch64(s, n - 16) * K2) & MASK
    return mul, a, (_rotate((a + b) & MASK, 43) + _rotate(c, 30) + d) & MASK, (a + _rotate((b + K2) & MASK, 18) + c) & MASK


def _len17to32(s: bytes) -> int:
    mul, _, u, v = _ends(s, K1)
    return _hash16(u, v, mul)


def _len33to64(s: bytes) -> int:
    n = len(s)
    mul, a, y, v = _ends(s, K2)
    z = _hash16(y, v, mul)
    e = (_fetch64(s, 16) * mul) & MASK
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & MASK
    h = ((z + _fetch64(s, n - 24)) * mul) & MASK
    return _hash16((_rotate((e + f) & MASK, 43) + _rotate(g, 30) + h) & MASK,
                   (e + _rotate((f + a) & MASK, 18) + g) & MASK, mul)


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = (_fetch64(s, i + k) for k in (0, 8, 16, 24))
    a = (a + w) & MASK
    b = _rotate((b + a + z) & MASK, 21)
    c = a
    a = (a + x + y) & MASK
    b = (b + _rotate(a, 44)) & MASK
    return (a + z) & MASK, (b + c) & MASK


def fingerprint64(s: bytes) -> int:
    """FarmHash Fingerprint64 (farmhashna::Hash64) of ``s``, as an unsigned 64-bit integer."""
    n = len(s)
    if n <= 16:
        return _len0to16(s)
    if n <= 32:
        return _len17to32(s)
    if n <= 64:
        return _len33to64(s)
    x, y = 81, (81 * K1 + 113) & MASK
    z = (_shift_mix((y * K2 + 113) & MASK) * K2) & MASK
    v, w = (0, 0), (0, 0)
    x = (x * K2 + _fetch64(s, 0)) & MASK
    end = ((n - 1) // 64) * 64
    i = 0
    while True:
        x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & MASK, 37) * K1) & MASK
        y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & MASK, 42) * K1) & MASK
        x ^= w[1]
        y = (y + v[0] + _fetch64(s, i + 40)) & MASK
        z = (_rotate((z + w[0]) & MASK, 33) * K1) & MASK
        v = _weak32(s, i, (v[1] * K1) & MASK, (x + w[0]) & MASK)
        w = _weak32(s, i + 32, (z + w[1]) & MASK, (y + _fetch64(s, i + 16)) & MASK)
        z, x = x, z
        i += 64
        if i == end:
            break
    mul = (K1 + ((z & 0xFF) << 1)) & MASK
    i = n - 64
    w = ((w[0] + ((n - 1) & 63)) & MASK, w[1])
    v = ((v[0] + w[0]) & MASK, v[1])
    w = ((w[0] + v[0]) & MASK, w[1])
    x = (_rotate((x + y + v[0] + _fetch64(s, i + 8)) & MASK, 37) * mul) & MASK
    y = (_rotate((y + v[1] + _fetch64(s, i + 48)) & MASK, 42) * mul) & MASK
    x ^= (w[1] * 9) & MASK
    y = (y + v[0] * 9 + _fetch64(s, i + 40)) & MASK
    z = (_rotate((z + w[0]) & MASK, 33) * mul) & MASK
    v = _weak32(s, i, (v[1] * mul) & MASK, (x + w[0]) & MASK)
    w = _weak32(s, i + 32, (z + w[1]) & MASK, (y + _fetch64(s, i + 16)) & MASK)
    z, x = x, z
    return _hash16((_hash16(v[0], w[0], mul) + _shift_mix(y) * K0 + z) & MASK, (_hash16(v[1], w[1], mul) + x) & MASK, mul)


SPARSE_DEPRECATED, DENSE, SPARSE = 1, 2, 3


def lsh_projection(call: Call) -> list[Operand]:
    call.count(4)
    hashes = call.tensor(0, *F)
    lookup = call.tensor(1)
    weight = call.same_type(2, hashes).real() if call.has(2) and call.inputs[2].value.size else None  # type: ignore[union-attr]
    kind = call.int(3)
    if kind not in (SPARSE_DEPRECATED, DENSE, SPARSE):
        raise call.fail(f"projection type {kind} is not SPARSE_DEPRECATED (1), DENSE (2) or SPARSE (3)")
    if hashes.value.ndim != 2 or hashes.shape[1] > 32 or lookup.value.ndim < 1:  # type: ignore[union-attr]
        raise call.fail("the hash tensor is [functions, bits <= 32] and the input has a row dimension")
    if weight is not None and weight.shape != (lookup.shape[0],):
        raise call.fail(f"the weight has one entry per input row ({lookup.shape[0]})")
    rows = [np.ascontiguousarray(r).tobytes() for r in lookup.value]  # type: ignore[union-attr]
    functions, bits = hashes.shape
    signs = np.zeros((functions, bits), np.int32)
    for i in range(functions):
        for j in range(bits):
            seed = struct.pack("<f", float(hashes.value[i, j]))  # type: ignore[index]
            score = 0.0
            for r, row in enumerate(rows):
                signed = fingerprint64(seed + row)
                signed = signed - (1 << 64) if signed >> 63 else signed
                score += float(signed) * (1.0 if weight is None else float(weight[r]))
            signs[i, j] = 1 if score > 0 else 0
    if kind == DENSE:
        return [call.raw_result(0, signs.ravel(), type="TENSOR_INT32")]
    packed = np.array([int("".join(map(str, row)), 2) if bits else 0 for row in signs], np.int64)
    if kind == SPARSE:
        packed = packed + np.arange(functions) * (1 << bits)
    return [call.raw_result(0, packed.astype(np.int32), type="TENSOR_INT32")]


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {"LSH_PROJECTION": lsh_projection}
