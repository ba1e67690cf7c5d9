"""nnref's LSH_PROJECTION (AOSP's lsh_projection vectors) and the FarmHash fingerprint under it."""

from __future__ import annotations

import numpy as np
import pytest

import nnref
from nnref import BadOperation, int32, tensor
from nnref.lsh import fingerprint64

# FarmHash Fingerprint64 of bytes (i * 37 + 11) % 256, i < n, as Google's library computes
# it: one length per branch (0-16, 17-32, 33-64 and the 64-byte loop).
FINGERPRINTS = {0: 11160318154034397263, 4: 14708324829907283305, 12: 1342307080078500921,
                17: 6692022265393568454, 33: 9480451918888261270, 64: 4226431515964725,
                65: 18101669290602532278, 200: 5850749971184008558}


@pytest.mark.parametrize("n,expected", FINGERPRINTS.items())
def test_fingerprint64_matches_farmhash(n, expected):
    assert fingerprint64(bytes((i * 37 + 11) % 256 for i in range(n))) == expected


HASH = tensor("TENSOR_FLOAT32", np.array([0.123, 0.456, -0.321, -0.654, 1.234, 5.678, -4.321, -8.765], np.float32)
              .reshape(4, 2))
LOOKUP = tensor("TENSOR_INT32", np.array([12345, 54321, 67890, 9876, -12345678, -87654321]).reshape(3, 2))
NO_WEIGHT = tensor("TENSOR_FLOAT32", np.zeros(0))


def test_lsh_projection_dense_and_sparse():
    dense = nnref.evaluate("LSH_PROJECTION", [HASH, LOOKUP, tensor("TENSOR_FLOAT32", [0.12, 0.34, 0.56]), int32(2)])[0]
    assert dense.value.tolist() == [1, 1, 1, 0, 1, 1, 1, 0]
    sparse = nnref.evaluate("LSH_PROJECTION", [HASH, LOOKUP, NO_WEIGHT, int32(1)])[0]
    assert sparse.value.tolist() == [1, 2, 2, 0]
    # 1.2's SPARSE offsets each hash function's value by i * 2**bits.
    offset = nnref.evaluate("LSH_PROJECTION", [HASH, LOOKUP, NO_WEIGHT, int32(3)])[0]
    assert offset.value.tolist() == [1, 2 + 4, 2 + 8, 0 + 12]
    with pytest.raises(BadOperation, match="projection type 4"):
        nnref.evaluate("LSH_PROJECTION", [HASH, LOOKUP, NO_WEIGHT, int32(4)])
