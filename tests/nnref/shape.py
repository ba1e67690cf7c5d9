"""Operations that move values without arithmetic (or with a reduction): reshapes, slices,
concatenation, padding, gathers, space/depth/batch rearrangements, reductions, arg min/max.

Moving a quantized value keeps its stored integer, so these keep the input's scale and
zero point unless an output template says otherwise (then the value is requantized).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .core import F, F_Q8, QUANTIZED, Call, Operand, from_nhwc, quantize, to_nhwc

MOVABLE = ("TENSOR_FLOAT16", "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")


def _moved(call: Call, k: int, x: Operand, stored: np.ndarray) -> Operand:
    """Output ``k`` holding stored values of ``x`` moved: requantized if the output's parameters differ."""
    spec = call.spec(k, x)
    if spec.type in QUANTIZED and (spec.scale, spec.zero_point) != (x.scale, x.zero_point):
        real = (stored.astype(np.float64) - x.zero_point) * x.scale
        return call.raw_result(k, quantize(real, spec.type, spec.scale, spec.zero_point), x)
    if spec.type != x.type:
        raise call.fail(f"output {k} is {x.type}, not {spec.type}")
    return call.raw_result(k, stored, x)


def reshape(call: Call) -> list[Operand]:
    call.count(2)
    x = call.tensor(0, *F_Q8)
    shape = call.ints(1)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise call.fail(f"the shape {shape} has at most one -1 and no other negative size")
    known = math.prod(d for d in shape if d != -1)
    if -1 in shape:
        if known == 0 or x.value.size % known:  # type: ignore[union-attr]
            raise call.fail(f"cannot reshape {list(x.shape)} to {shape}")
        shape[shape.index(-1)] = x.value.size // known  # type: ignore[union-attr]
    if math.prod(shape) != x.value.size:  # type: ignore[union-attr]
        raise call.fail(f"cannot reshape {list(x.shape)} to {shape}")
    return [_moved(call, 0, x, x.value.reshape(shape))]  # type: ignore[union-attr]


def concatenation(call: Call) -> list[Operand]:
    if len(call.inputs) < 2:
        raise call.fail("takes at least one tensor and the axis")
    first = call.tensor(0, *F_Q8)
    rank = first.value.ndim  # type: ignore[union-attr]
    axis = call.axis(len(call.inputs) - 1, rank)
    parts = [call.same_type(i, first) for i in range(len(call.inputs) - 1)]
    for i, p in enumerate(parts):
        if p.value.ndim != rank or any(a != b for d, (a, b) in enumerate(zip(p.shape, first.shape)) if d != axis):  # type: ignore[union-attr]
            raise call.fail(f"input {i} is {list(p.shape)}, unlike {list(first.shape)} off axis {axis}")
    if first.type == "TENSOR_QUANT8_ASYMM":
        return [call.real_result(0, np.concatenate([p.real() for p in parts], axis), first)]
    return [call.raw_result(0, np.concatenate([p.value for p in parts], axis), first)]  # type: ignore[misc]


def _paddings(call: Call, i: int, rank: int) -> list[tuple[int, int]]:
    p = call.tensor(i, "TENSOR_INT32")
    if p.shape != (rank, 2) or (p.value < 0).any():  # type: ignore[operator]
        raise call.fail(f"paddings are [{rank}, 2] non-negative, got {p.value.tolist()}")  # type: ignore[union-attr]
    return [(int(a), int(b)) for a, b in p.value]  # type: ignore[union-attr]


def pad(call: Call) -> list[Operand]:
    call.count(2)
    x = call.tensor(0, *F_Q8)
    widths = _paddings(call, 1, x.value.ndim)  # type: ignore[union-attr]
    fill = x.zero_point if x.type == "TENSOR_QUANT8_ASYMM" else 0
    return [_moved(call, 0, x, np.pad(x.value, widths, constant_values=fill))]  # type: ignore[arg-type]


def pad_v2(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *F_Q8)
    widths = _paddings(call, 1, x.value.ndim)  # type: ignore[union-attr]
    scalar = {"TENSOR_FLOAT32": "FLOAT32", "TENSOR_FLOAT16": "FLOAT16", "TENSOR_QUANT8_ASYMM": "INT32"}[x.type]
    fill = call.input(2, scalar).item()
    if x.type == "TENSOR_QUANT8_ASYMM" and not 0 <= int(fill) <= 255:
        raise call.fail(f"a quantized pad value is a stored uint8, got {fill}")
    return [_moved(call, 0, x, np.pad(x.value, widths, constant_values=fill))]  # type: ignore[arg-type]


def _axes(call: Call, i: int, rank: int) -> tuple[int, ...]:
    axes = call.ints(i)
    for a in axes:
        if not -rank <= a < rank:
            raise call.fail(f"axis {a} is outside [-{rank}, {rank})")
    return tuple(sorted({a % rank for a in axes}))


def mean(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *F_Q8)
    axes = _axes(call, 1, x.value.ndim)  # type: ignore[union-attr]
    keep = call.int(2) > 0
    return [call.real_result(0, x.real().mean(axis=axes, keepdims=keep), x)]


def _reduce(types: tuple[str, ...], fn: Callable[..., np.ndarray]) -> Callable[[Call], list[Operand]]:
    def operation(call: Call) -> list[Operand]:
        call.count(3)
        x = call.tensor(0, *types)
        axes = _axes(call, 1, x.value.ndim)  # type: ignore[union-attr]
        keep = call.bool(2)
        if x.type == "TENSOR_BOOL8":
            return [call.raw_result(0, fn(x.value, axis=axes, keepdims=keep), x)]
        if x.type == "TENSOR_QUANT8_ASYMM":  # max and min pick a stored value
            return [_moved(call, 0, x, fn(x.value, axis=axes, keepdims=keep))]
        with np.errstate(over="ignore"):
            return [call.real_result(0, fn(x.real(), axis=axes, keepdims=keep), x)]

    return operation


def _arg(fn: Callable[..., np.ndarray]) -> Callable[[Call], list[Operand]]:
    def operation(call: Call) -> list[Operand]:
        call.count(2)
        x = call.tensor(0, *MOVABLE)
        axis = call.axis(1, x.value.ndim)  # type: ignore[union-attr]
        return [call.raw_result(0, fn(x.value, axis=axis).astype(np.int32), type="TENSOR_INT32")]

    return operation


def _clamped_index(index: int, dim: int, positive: bool) -> int:
    if positive:
        return dim if index >= dim else (min(max(index, -dim), dim) % dim if dim else 0)
    return -1 if index < -dim else min(max(index, -dim), dim - 1) % dim


def strided_slice(call: Call) -> list[Operand]:
    call.count(7)
    x = call.tensor(0, *F_Q8)
    rank = x.value.ndim  # type: ignore[union-attr]
    begin, end, strides = call.ints(1), call.ints(2), call.ints(3)
    if not len(begin) == len(end) == len(strides) == rank:
        raise call.fail(f"begin, end and strides have {rank} entries each")
    begin_mask, end_mask, shrink_mask = call.int(4), call.int(5), call.int(6)
    result = x.value
    shape = []
    for d in range(rank):
        dim, s = x.shape[d], strides[d]
        if s == 0:
            raise call.fail("a stride is not 0")
        b = (0 if s > 0 else dim - 1) if begin_mask >> d & 1 else _clamped_index(begin[d], dim, s > 0)
        e = (dim if s > 0 else -1) if end_mask >> d & 1 else _clamped_index(end[d], dim, s > 0)
        index = np.arange(b, e, s)
        result = np.take(result, index, axis=d)  # type: ignore[arg-type]
        if shrink_mask >> d & 1:
            if len(index) != 1:
                raise call.fail(f"shrinking axis {d} needs one element, the slice has {len(index)}")
        else:
            shape.append(len(index))
    return [_moved(call, 0, x, result.reshape(shape))]  # type: ignore[union-attr]


def slice_op(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *MOVABLE)
    begin, size = call.ints(1), call.ints(2)
    rank = x.value.ndim  # type: ignore[union-attr]
    if not len(begin) == len(size) == rank:
        raise call.fail(f"begin and size have {rank} entries each")
    index = []
    for d in range(rank):
        length = x.shape[d] - begin[d] if size[d] == -1 else size[d]
        if begin[d] < 0 or length < 0 or begin[d] + length > x.shape[d]:
            raise call.fail(f"slice [{begin[d]}, +{size[d]}) leaves axis {d} of size {x.shape[d]}")
        index.append(slice(begin[d], begin[d] + length))
    return [_moved(call, 0, x, x.value[tuple(index)])]  # type: ignore[index]


def transpose(call: Call) -> list[Operand]:
    call.count(1, 2)
    x = call.tensor(0, *F_Q8)
    rank = x.value.ndim  # type: ignore[union-attr]
    perm = call.ints(1) if call.has(1) else list(reversed(range(rank)))
    if sorted(perm) != list(range(rank)):
        raise call.fail(f"{perm} is not a permutation of {rank} axes")
    return [_moved(call, 0, x, np.transpose(x.value, perm))]  # type: ignore[arg-type]


def squeeze(call: Call) -> list[Operand]:
    call.count(1, 2)
    x = call.tensor(0, *F_Q8)
    rank = x.value.ndim  # type: ignore[union-attr]
    axes = _axes(call, 1, rank) if call.has(1) and call.inputs[1].value.size else None  # type: ignore[union-attr]
    if axes is None:
        axes = tuple(d for d in range(rank) if x.shape[d] == 1)
    if any(x.shape[a] != 1 for a in axes):
        raise call.fail(f"squeezed axes {axes} of {list(x.shape)} have size 1")
    return [_moved(call, 0, x, np.squeeze(x.value, axis=axes))]  # type: ignore[arg-type]


def expand_dims(call: Call) -> list[Operand]:
    call.count(2)
    x = call.tensor(0, *MOVABLE)
    rank = x.value.ndim  # type: ignore[union-attr]
    axis = call.int(1)
    if not -(rank + 1) <= axis <= rank:
        raise call.fail(f"axis {axis} is outside [{-(rank + 1)}, {rank}]")
    return [_moved(call, 0, x, np.expand_dims(x.value, axis % (rank + 1)))]  # type: ignore[arg-type]


def tile(call: Call) -> list[Operand]:
    call.count(2)
    x = call.tensor(0, *MOVABLE)
    multiples = call.ints(1)
    if len(multiples) != x.value.ndim or min(multiples, default=1) < 1:  # type: ignore[union-attr]
        raise call.fail(f"multiples {multiples} has one entry >= 1 per axis")
    return [_moved(call, 0, x, np.tile(x.value, multiples))]  # type: ignore[arg-type]


def gather(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *MOVABLE)
    axis = call.axis(1, x.value.ndim)  # type: ignore[union-attr]
    indices = call.tensor(2, "TENSOR_INT32").value
    if ((indices < 0) | (indices >= x.shape[axis])).any():  # type: ignore[operator]
        raise call.fail(f"an index is outside [0, {x.shape[axis]})")
    return [_moved(call, 0, x, np.take(x.value, indices, axis=axis))]  # type: ignore[arg-type]


def split(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *MOVABLE)
    axis = call.axis(1, x.value.ndim)  # type: ignore[union-attr]
    parts = call.int(2)
    if parts < 1 or x.shape[axis] % parts:
        raise call.fail(f"axis {axis} of size {x.shape[axis]} does not split into {parts}")
    return [_moved(call, k, x, v) for k, v in enumerate(np.split(x.value, parts, axis=axis))]  # type: ignore[arg-type]


def channel_shuffle(call: Call) -> list[Operand]:
    call.count(3)
    x = call.tensor(0, *F_Q8)
    groups = call.int(1)
    axis = call.axis(2, x.value.ndim)  # type: ignore[union-attr]
    c = x.shape[axis]
    if groups < 1 or c % groups:
        raise call.fail(f"{c} channels do not split into {groups} groups")
    v = np.moveaxis(x.value, axis, -1)  # type: ignore[arg-type]
    v = v.reshape(v.shape[:-1] + (groups, c // groups)).swapaxes(-1, -2).reshape(v.shape)
    return [_moved(call, 0, x, np.moveaxis(v, -1, axis))]


def _block_op(call: Call, n: int) -> tuple[Operand, bool, np.ndarray]:
    x = call.tensor(0, *F_Q8)
    if x.value.ndim != 4:  # type: ignore[union-attr]
        raise call.fail("the input has rank 4")
    nchw = call.bool(n, False)
    return x, nchw, to_nhwc(x.value, nchw)  # type: ignore[arg-type]


def depth_to_space(call: Call) -> list[Operand]:
    call.count(2, 3)
    x, nchw, v = _block_op(call, 2)
    b = call.int(1)
    n, h, w, c = v.shape
    if b < 1 or c % (b * b):
        raise call.fail(f"depth {c} is not a multiple of block {b} squared")
    v = v.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5).reshape(n, h * b, w * b, c // (b * b))
    return [_moved(call, 0, x, from_nhwc(v, nchw))]


def space_to_depth(call: Call) -> list[Operand]:
    call.count(2, 3)
    x, nchw, v = _block_op(call, 2)
    b = call.int(1)
    n, h, w, c = v.shape
    if b < 1 or h % b or w % b:
        raise call.fail(f"height {h} and width {w} are multiples of block {b}")
    v = v.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // b, w // b, c * b * b)
    return [_moved(call, 0, x, from_nhwc(v, nchw))]


def batch_to_space_nd(call: Call) -> list[Operand]:
    call.count(2, 3)
    x, nchw, v = _block_op(call, 2)
    bh, bw = _block(call, 1)
    n, h, w, c = v.shape
    if n % (bh * bw):
        raise call.fail(f"batch {n} is not a multiple of {bh * bw}")
    v = v.reshape(bh, bw, n // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(n // (bh * bw), h * bh, w * bw, c)
    return [_moved(call, 0, x, from_nhwc(v, nchw))]


def space_to_batch_nd(call: Call) -> list[Operand]:
    call.count(3, 4)
    x, nchw, v = _block_op(call, 3)
    bh, bw = _block(call, 1)
    widths = _paddings(call, 2, 2)
    fill = x.zero_point if x.type == "TENSOR_QUANT8_ASYMM" else 0
    v = np.pad(v, [(0, 0), *widths, (0, 0)], constant_values=fill)
    n, h, w, c = v.shape
    if h % bh or w % bw:
        raise call.fail(f"padded {h}x{w} is not a multiple of the block {bh}x{bw}")
    v = v.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5).reshape(n * bh * bw, h // bh, w // bw, c)
    return [_moved(call, 0, x, from_nhwc(v, nchw))]


def _block(call: Call, i: int) -> tuple[int, int]:
    block = call.ints(i)
    if len(block) != 2 or min(block) < 1:
        raise call.fail(f"the block shape is two sizes >= 1, got {block}")
    return block[0], block[1]


def _resize(call: Call) -> tuple[Operand, bool, np.ndarray, int, int]:
    # RESIZE_BILINEAR's layout is optional (1.0 had 3 inputs); RESIZE_NEAREST_NEIGHBOR, new
    # in 1.2, always has it.
    call.count(*((3, 4) if call.name == "RESIZE_BILINEAR" else (4,)))
    x = call.tensor(0, *F_Q8)
    if x.value.ndim != 4:  # type: ignore[union-attr]
        raise call.fail("the input has rank 4")
    nchw = call.bool(3, False)
    v = to_nhwc(x.value, nchw)  # type: ignore[arg-type]
    h, w = v.shape[1:3]
    if call.inputs[1].type == "INT32":
        ow, oh = call.int(1), call.int(2)
    else:
        ow, oh = int(math.floor(w * call.float(1, like=x))), int(math.floor(h * call.float(2, like=x)))
    if oh < 1 or ow < 1:
        raise call.fail(f"the output would be {oh}x{ow}")
    return x, nchw, v, oh, ow


def resize_bilinear(call: Call) -> list[Operand]:
    x, nchw, v, oh, ow = _resize(call)
    real = to_nhwc(x.real(), nchw)
    h, w = v.shape[1:3]

    def grid(out: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.arange(out) * (size / out)
        lo = np.floor(pos).astype(int)
        return lo, np.minimum(lo + 1, size - 1), pos - lo

    y0, y1, dy = grid(oh, h)
    x0, x1, dx = grid(ow, w)
    dy, dx = dy[None, :, None, None], dx[None, None, :, None]
    top = real[:, y0][:, :, x0] * (1 - dx) + real[:, y0][:, :, x1] * dx
    bottom = real[:, y1][:, :, x0] * (1 - dx) + real[:, y1][:, :, x1] * dx
    return [call.real_result(0, from_nhwc(top * (1 - dy) + bottom * dy, nchw), x)]


def resize_nearest_neighbor(call: Call) -> list[Operand]:
    x, nchw, v, oh, ow = _resize(call)
    h, w = v.shape[1:3]
    # the reference's arithmetic is float32 throughout: scale = (float)in / out, then dest * scale
    rows = np.minimum(np.floor(np.arange(oh, dtype=np.float32) * (np.float32(h) / np.float32(oh))).astype(int), h - 1)
    cols = np.minimum(np.floor(np.arange(ow, dtype=np.float32) * (np.float32(w) / np.float32(ow))).astype(int), w - 1)
    return [_moved(call, 0, x, from_nhwc(v[:, rows][:, :, cols], nchw))]


def topk_v2(call: Call) -> list[Operand]:
    call.count(2)
    x = call.tensor(0, *MOVABLE)
    k = call.int(1)
    if not 1 <= k <= x.shape[-1]:
        raise call.fail(f"k {k} is outside [1, {x.shape[-1]}]")
    order = np.argsort(-x.value.astype(np.float64), axis=-1, kind="stable")[..., :k]  # type: ignore[union-attr]
    values = np.take_along_axis(x.value, order, axis=-1)  # type: ignore[arg-type]
    return [_moved(call, 0, x, values), call.raw_result(1, order.astype(np.int32), type="TENSOR_INT32")]


def embedding_lookup(call: Call) -> list[Operand]:
    call.count(2)
    lookups = call.tensor(0, "TENSOR_INT32").value
    values = call.tensor(1, "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")
    if lookups.ndim != 1 or ((lookups < 0) | (lookups >= values.shape[0])).any():  # type: ignore[union-attr,operator]
        raise call.fail(f"lookups are a vector of rows in [0, {values.shape[0]})")
    return [_moved(call, 0, values, values.value[lookups])]  # type: ignore[index]


def hashtable_lookup(call: Call) -> list[Operand]:
    call.count(3)
    lookups = call.tensor(0, "TENSOR_INT32").value
    keys = call.tensor(1, "TENSOR_INT32").value
    values = call.tensor(2, "TENSOR_FLOAT32", "TENSOR_INT32", "TENSOR_QUANT8_ASYMM")
    if keys.ndim != 1 or values.shape[0] != keys.shape[0]:  # type: ignore[union-attr]
        raise call.fail("keys are a vector with one entry per row of values")
    rows = {int(k): r for r, k in enumerate(keys)}  # type: ignore[union-attr]
    hits = np.asarray([int(k) in rows for k in lookups], bool)  # type: ignore[union-attr]
    out = np.zeros((len(lookups),) + values.shape[1:], values.value.dtype)  # type: ignore[arg-type,union-attr]
    for i, k in enumerate(lookups):  # type: ignore[arg-type]
        if int(k) in rows:
            out[i] = values.value[rows[int(k)]]  # type: ignore[index]
    return [_moved(call, 0, values, out),
            call.raw_result(1, hits.astype(np.uint8), Operand("TENSOR_QUANT8_ASYMM", None, 1.0, 0))]


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {
    "RESHAPE": reshape,
    "CONCATENATION": concatenation,
    "PAD": pad,
    "PAD_V2": pad_v2,
    "MEAN": mean,
    "REDUCE_ALL": _reduce(("TENSOR_BOOL8",), np.all),
    "REDUCE_ANY": _reduce(("TENSOR_BOOL8",), np.any),
    "REDUCE_MAX": _reduce(F_Q8, np.max),
    "REDUCE_MIN": _reduce(F_Q8, np.min),
    "REDUCE_PROD": _reduce(F, np.prod),
    "REDUCE_SUM": _reduce(F, np.sum),
    "ARGMAX": _arg(np.argmax),
    "ARGMIN": _arg(np.argmin),
    "STRIDED_SLICE": strided_slice,
    "SLICE": slice_op,
    "TRANSPOSE": transpose,
    "SQUEEZE": squeeze,
    "EXPAND_DIMS": expand_dims,
    "TILE": tile,
    "GATHER": gather,
    "SPLIT": split,
    "CHANNEL_SHUFFLE": channel_shuffle,
    "DEPTH_TO_SPACE": depth_to_space,
    "SPACE_TO_DEPTH": space_to_depth,
    "BATCH_TO_SPACE_ND": batch_to_space_nd,
    "SPACE_TO_BATCH_ND": space_to_batch_nd,
    "RESIZE_BILINEAR": resize_bilinear,
    "RESIZE_NEAREST_NEIGHBOR": resize_nearest_neighbor,
    "TOPK_V2": topk_v2,
    "EMBEDDING_LOOKUP": embedding_lookup,
    "HASHTABLE_LOOKUP": hashtable_lookup,
}

