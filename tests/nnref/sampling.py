"""RANDOM_MULTINOMIAL, drawing as Android's reference does: TensorFlow's Philox4x32-10 keyed by
the two seeds, two 32-bit outputs per double in [0, 1), and the first class whose running
sum of exp(logit - max) exceeds draw * total (non-finite logits add nothing). With both
seeds 0 the reference seeds itself at random, and so does this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from .core import F, Call, Operand

M32 = 0xFFFFFFFF
MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
KEY_STEP = (0x9E3779B9, 0xBB67AE85)


def philox4x32(counter: tuple[int, int, int, int], key: tuple[int, int], rounds: int = 10) -> tuple[int, int, int, int]:
    """One Philox4x32 block: ``rounds`` rounds of multiply-xor, the key bumped between rounds."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(rounds):
        p0, p1 = MULTIPLIERS[0] * c0, MULTIPLIERS[1] * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
        if r < rounds - 1:
            k0, k1 = (k0 + KEY_STEP[0]) & M32, (k1 + KEY_STEP[1]) & M32
    return c0, c1, c2, c3


def philox_stream(seed: int, seed2: int) -> Iterator[int]:
    """TensorFlow's PhiloxRandom(seed, seed2) read one 32-bit value at a time: the key is the
    64-bit seed, the counter's high half the 64-bit seed2, the low half counts blocks."""
    seed, seed2 = seed & (2**64 - 1), seed2 & (2**64 - 1)
    key = (seed & M32, seed >> 32)
    block = 0
    while True:
        low = block & (2**64 - 1)
        high = (seed2 + (block >> 64)) & (2**64 - 1)
        yield from philox4x32((low & M32, low >> 32, high & M32, high >> 32), key)
        block += 1


def uniform_doubles(seed: int, seed2: int) -> Iterator[float]:
    """Doubles in [0, 1) from 52 random mantissa bits: the low 32 from the first value, the high
    20 from the second."""
    stream = philox_stream(seed, seed2)
    while True:
        lo, hi = next(stream), next(stream)
        yield (((hi & 0xFFFFF) << 32) | lo) / float(1 << 52)


def random_multinomial(call: Call) -> list[Operand]:
    call.count(3)
    logits = call.tensor(0, *F)
    samples = call.int(1)
    seeds = call.ints(2)
    if logits.value.ndim != 2 or samples < 0 or len(seeds) != 2:  # type: ignore[union-attr]
        raise call.fail("logits are [batches, classes], the sample count >= 0, the seeds two int32")
    values = logits.value.astype(np.float32)  # type: ignore[union-attr]
    if seeds == [0, 0]:
        rng = np.random.default_rng()
        draws: Iterator[float] = iter(lambda: float(rng.random()), None)  # type: ignore[arg-type]
    else:
        draws = uniform_doubles(seeds[0], seeds[1])
    out = np.zeros((values.shape[0], samples), np.int32)
    for b, row in enumerate(values):
        finite = np.isfinite(row)
        top = float(row[finite].max()) if finite.any() else float(np.finfo(np.float32).min)
        cdf = np.cumsum(np.exp(np.where(finite, row.astype(np.float64) - top, -np.inf)))
        total = cdf[-1] if len(cdf) else 0.0
        for j in range(samples):
            out[b, j] = np.searchsorted(cdf, next(draws) * total, side="right")
    return [call.raw_result(0, out, type="TENSOR_INT32")]


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {"RANDOM_MULTINOMIAL": random_multinomial}
