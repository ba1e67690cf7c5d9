"""Convolutions, fully connected and pooling (NHWC or NCHW, explicit or implicit padding).

A quantized convolution accumulates (input - zero point) * (filter - zero point) in int32,
adds the int32 bias, and requantizes with input_scale * filter_scale / output_scale (one
multiplier per output channel for a TENSOR_QUANT8_SYMM_PER_CHANNEL filter), as Android's
reference does; the padded border holds the input's zero point, that is a real zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from .core import (
    F,
    F_Q8,
    Call,
    Operand,
    activate,
    from_nhwc,
    implicit_padding,
    output_size,
    quant_activation_range,
    requantize,
    to_nhwc,
)

FILTERS = ("TENSOR_FLOAT32", "TENSOR_FLOAT16", "TENSOR_QUANT8_ASYMM", "TENSOR_QUANT8_SYMM_PER_CHANNEL")


@dataclasses.dataclass
class Window:
    """A spatial operation's geometry, NHWC: pads (top, bottom, left, right), strides, dilations."""

    pads: tuple[int, int, int, int]
    strides: tuple[int, int]  # (height, width)
    dilations: tuple[int, int] = (1, 1)

    def out_hw(self, h: int, w: int, fh: int, fw: int) -> tuple[int, int]:
        top, bottom, left, right = self.pads
        oh = output_size(h, fh, self.strides[0], self.dilations[0], top, bottom)
        ow = output_size(w, fw, self.strides[1], self.dilations[1], left, right)
        return oh, ow


def _window(call: Call, explicit: bool, first: int, x_hw: tuple[int, int], f_hw: tuple[int, int],
            dilation_at: int | None) -> tuple[Window, int]:
    """Read pads (or the scheme) and strides from input ``first``; returns the window and the
    index after the strides."""
    if explicit:
        left, right, top, bottom = (call.int(first + k) for k in range(4))
        at = first + 4
    else:
        scheme = call.int(first)
        at = first + 1
    sw, sh = call.int(at), call.int(at + 1)
    dw = dh = 1
    if dilation_at is not None and call.has(dilation_at):
        dw, dh = call.int(dilation_at), call.int(dilation_at + 1)
    if min(sw, sh, dw, dh) < 1:
        raise call.fail(f"strides ({sw}, {sh}) and dilations ({dw}, {dh}) are at least 1")
    if not explicit:
        top, bottom = implicit_padding(x_hw[0], sh, f_hw[0], dh, scheme)
        left, right = implicit_padding(x_hw[1], sw, f_hw[1], dw, scheme)
    if min(left, right, top, bottom) < 0:
        raise call.fail("padding is not negative")
    return Window((top, bottom, left, right), (sh, sw), (dh, dw)), at + 2


def _nhwc_input(call: Call, i: int, layout_at: int, types: tuple[str, ...]) -> tuple[Operand, bool, np.ndarray]:
    x = call.tensor(i, *types)
    if x.value.ndim != 4:  # type: ignore[union-attr]
        raise call.fail(f"input {i} has rank 4, got {x.value.ndim}")  # type: ignore[union-attr]
    nchw = call.bool(layout_at, False)
    return x, nchw, to_nhwc(x.value, nchw)  # type: ignore[arg-type]


def _centered(x: Operand, array: np.ndarray) -> np.ndarray:
    """A quantized operand's values minus its zero point (int64), or a float operand's reals."""
    if x.type in ("TENSOR_QUANT8_ASYMM", "TENSOR_QUANT8_SYMM_PER_CHANNEL"):
        zero = x.zero_point if x.type == "TENSOR_QUANT8_ASYMM" else 0
        return array.astype(np.int64) - zero
    return array.astype(np.float64)


def convolve(x: np.ndarray, f: np.ndarray, window: Window, groups: int = 1) -> np.ndarray:
    """NHWC input, [out, fh, fw, in/groups] filter, zero padding: the sums, in x's dtype."""
    n, h, w, c = x.shape
    out, fh, fw, cg = f.shape
    if c != cg * groups or out % groups:
        raise ValueError(f"input depth {c} and filter {list(f.shape)} do not fit {groups} groups")
    top, bottom, left, right = window.pads
    (sh, sw), (dh, dw) = window.strides, window.dilations
    oh, ow = window.out_hw(h, w, fh, fw)
    if oh < 1 or ow < 1:
        raise ValueError(f"the output would be {oh}x{ow}")
    padded = np.zeros((n, h + top + bottom, w + left + right, c), x.dtype)
    padded[:, top : top + h, left : left + w, :] = x
    result = np.zeros((n, oh, ow, out), np.result_type(x.dtype, f.dtype))
    og = out // groups
    for i in range(fh):
        for j in range(fw):
            rows = slice(i * dh, i * dh + sh * (oh - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)
            patch = padded[:, rows, cols, :]
            for g in range(groups):
                result[..., g * og : (g + 1) * og] += np.einsum(
                    "nhwc,oc->nhwo", patch[..., g * cg : (g + 1) * cg], f[g * og : (g + 1) * og, i, j, :])
    return result


def _bias_and_output(call: Call, x: Operand, f: Operand, acc: np.ndarray, fuse: int, nchw: bool,
                     bias_at: int = 2) -> list[Operand]:
    out_channels = acc.shape[-1]
    if x.type == "TENSOR_QUANT8_ASYMM":
        bias = call.tensor(bias_at, "TENSOR_INT32")
        if bias.shape != (out_channels,):
            raise call.fail(f"bias is [{out_channels}], got {list(bias.shape)}")
        out = call.spec(0, x)
        filter_scales = (np.asarray(f.channel_quant.scales, np.float64)  # type: ignore[union-attr]
                         if f.type == "TENSOR_QUANT8_SYMM_PER_CHANNEL" else np.float64(f.scale))
        lo, hi = quant_activation_range(fuse, out)
        stored = requantize(acc + bias.value.astype(np.int64), x.scale * filter_scales / out.scale, out, lo, hi)  # type: ignore[union-attr]
        return [call.raw_result(0, from_nhwc(stored, nchw), x)]
    bias = call.same_type(bias_at, x)
    if bias.shape != (out_channels,):
        raise call.fail(f"bias is [{out_channels}], got {list(bias.shape)}")
    return [call.real_result(0, from_nhwc(activate(acc + bias.real(), fuse), nchw), x)]


def _filter(call: Call, x: Operand, i: int = 1, channel_dim: int = 0) -> Operand:
    f = call.tensor(i, *FILTERS)
    allowed = {x.type} | ({"TENSOR_QUANT8_SYMM_PER_CHANNEL"} if x.type == "TENSOR_QUANT8_ASYMM" else set())
    if f.type not in allowed:
        raise call.fail(f"a {x.type} input takes a {' or '.join(sorted(allowed))} filter, got {f.type}")
    if f.type == "TENSOR_QUANT8_SYMM_PER_CHANNEL" and f.channel_quant.channel_dim != channel_dim:  # type: ignore[union-attr]
        raise call.fail(f"a per-channel filter's channelDim is {channel_dim}")
    if f.value.ndim != 4:  # type: ignore[union-attr]
        raise call.fail(f"the filter has rank 4, got {f.value.ndim}")  # type: ignore[union-attr]
    return f


def _convolution(call: Call, implicit: bool, layout_at: int, channel_dim: int = 0,
                 dilation: bool = True) -> tuple[Operand, bool, np.ndarray, Operand, Window, int]:
    """A convolution's common reads: the input (as NHWC), the filter, the window (padding and
    strides from input 3 on, dilation after the layout); returns them with the next index."""
    x, nchw, xv = _nhwc_input(call, 0, layout_at, F_Q8)
    f = _filter(call, x, channel_dim=channel_dim)
    window, at = _window(call, not implicit, 3, xv.shape[1:3], f.shape[1:3], layout_at + 1 if dilation else None)
    return x, nchw, xv, f, window, at


def conv_2d(call: Call) -> list[Operand]:
    n = call.count(7, 8, 10, 11, 13)
    implicit = n == 7 or call.inputs[7].type == "BOOL"
    x, nchw, xv, f, window, at = _convolution(call, implicit, 7 if implicit else 10)
    if f.shape[3] != xv.shape[3]:
        raise call.fail(f"filter depth {f.shape[3]} != input depth {xv.shape[3]}")
    acc = convolve(_centered(x, xv), _centered(f, f.value), window)  # type: ignore[arg-type]
    return _bias_and_output(call, x, f, acc, call.int(at), nchw)


def depthwise_conv_2d(call: Call) -> list[Operand]:
    n = call.count(8, 9, 11, 12, 14)
    implicit = n == 8 or call.inputs[8].type == "BOOL"
    x, nchw, xv, f, window, at = _convolution(call, implicit, 8 if implicit else 11, channel_dim=3)
    multiplier = call.int(at)
    if f.shape[0] != 1 or f.shape[3] != xv.shape[3] * multiplier:
        raise call.fail(f"filter {list(f.shape)} is [1, fh, fw, {xv.shape[3]} * {multiplier}]")
    # Output channel k reads input channel k // multiplier: a grouped convolution with one
    # group per input channel, each group's filters the multiplier's slice.
    filters = np.transpose(_centered(f, f.value), (3, 1, 2, 0))  # type: ignore[arg-type]
    acc = convolve(_centered(x, xv), filters, window, groups=xv.shape[3])
    return _bias_and_output(call, x, f, acc, call.int(at + 1), nchw)


def grouped_conv_2d(call: Call) -> list[Operand]:
    implicit = call.count(9, 12) == 9
    x, nchw, xv, f, window, at = _convolution(call, implicit, 8 if implicit else 11, dilation=False)
    groups = call.int(at)
    if groups < 1 or xv.shape[3] != f.shape[3] * groups or f.shape[0] % groups:
        raise call.fail(f"input depth {xv.shape[3]} and filter {list(f.shape)} do not fit {groups} groups")
    acc = convolve(_centered(x, xv), _centered(f, f.value), window, groups)  # type: ignore[arg-type]
    return _bias_and_output(call, x, f, acc, call.int(at + 1), nchw)


def transpose_conv_2d(call: Call) -> list[Operand]:
    n = call.count(9, 11)
    explicit = n == 11
    layout_at = 10 if explicit else 8
    x, nchw, xv = _nhwc_input(call, 0, layout_at, F_Q8)
    f = _filter(call, x)
    _, h, w, c = xv.shape
    out_c, fh, fw, fc = f.shape
    if fc != c:
        raise call.fail(f"filter depth {fc} != input depth {c}")
    if explicit:
        left, right, top, bottom = (call.int(3 + k) for k in range(4))
        sw, sh, fuse = call.int(7), call.int(8), call.int(9)
    else:
        shape = call.ints(3)
        if len(shape) != 4:
            raise call.fail(f"the output shape has 4 entries, got {shape}")
        oh, ow = (shape[2], shape[3]) if nchw else (shape[1], shape[2])
        scheme, sw, sh, fuse = call.int(4), call.int(5), call.int(6), call.int(7)
        top, bottom = _transpose_padding(oh, sh, fh, scheme)
        left, right = _transpose_padding(ow, sw, fw, scheme)
    if min(sw, sh) < 1:
        raise call.fail("strides are at least 1")
    full_h, full_w = sh * (h - 1) + fh, sw * (w - 1) + fw
    oh, ow = full_h - top - bottom, full_w - left - right
    if oh < 1 or ow < 1:
        raise call.fail(f"the output would be {oh}x{ow}")
    xc, fcen = _centered(x, xv), _centered(f, f.value)  # type: ignore[arg-type]
    full = np.zeros((xv.shape[0], max(full_h, top + oh), max(full_w, left + ow), out_c), np.result_type(xc, fcen))
    for i in range(fh):
        for j in range(fw):
            full[:, i : i + sh * (h - 1) + 1 : sh, j : j + sw * (w - 1) + 1 : sw, :] += np.einsum(
                "nhwc,oc->nhwo", xc, fcen[:, i, j, :])
    acc = full[:, top : top + oh, left : left + ow, :]
    return _bias_and_output(call, x, f, acc, fuse, nchw)


def _transpose_padding(out: int, stride: int, filter_size: int, scheme: int) -> tuple[int, int]:
    """The 1.2 reference's implicit padding for TRANSPOSE_CONV_2D, from the output's size: SAME
    centres the input's footprint; the tail may be negative (the output extends past it)."""
    if scheme not in (1, 2):
        raise ValueError(f"padding scheme {scheme} is not SAME (1) or VALID (2)")
    if scheme == 2:
        return 0, 0
    needed = ((out + stride - 1) // stride - 1) * stride + filter_size - out
    head = needed // 2 if needed > 0 else 0
    return head, needed - head


def fully_connected(call: Call) -> list[Operand]:
    call.count(4)
    x = call.tensor(0, *F_Q8)
    wts = call.same_type(1, x)
    if wts.value.ndim != 2:  # type: ignore[union-attr]
        raise call.fail(f"weights have rank 2, got {wts.value.ndim}")  # type: ignore[union-attr]
    units, size = wts.shape
    if x.value.size % size:  # type: ignore[union-attr]
        raise call.fail(f"input of {x.value.size} values is not a whole number of rows of {size}")  # type: ignore[union-attr]
    rows = _centered(x, x.value.reshape(-1, size))  # type: ignore[union-attr]
    acc = rows @ _centered(wts, wts.value).T  # type: ignore[arg-type]
    return _bias_and_output(call, x, wts, acc, call.int(3), False)


def _pool(reduce: Callable[[np.ndarray, np.ndarray, Call, Operand, int], np.ndarray],
          types: tuple[str, ...]) -> Callable[[Call], list[Operand]]:
    def operation(call: Call) -> list[Operand]:
        n = call.count(7, 8, 10, 11)
        explicit = n >= 10
        layout_at = 10 if explicit else 7
        x, nchw, xv = _nhwc_input(call, 0, layout_at, types)
        # The filter size follows the strides: read them once the window's reads are known.
        at = 5 if explicit else 2
        fw, fh = call.int(at + 2), call.int(at + 3)
        if min(fw, fh) < 1:
            raise call.fail("the filter is at least 1x1")
        window, _ = _window(call, explicit, 1, xv.shape[1:3], (fh, fw), None)
        fuse = call.int(at + 4)
        _, h, w, _ = xv.shape
        oh, ow = window.out_hw(h, w, fh, fw)
        if oh < 1 or ow < 1:
            raise call.fail(f"the output would be {oh}x{ow}")
        top, bottom, left, right = window.pads
        sh, sw = window.strides
        values = x.value.astype(np.float64) if x.type == "TENSOR_QUANT8_ASYMM" else x.real()  # type: ignore[union-attr]
        values = to_nhwc(values, nchw)
        padded = np.zeros((xv.shape[0], h + top + bottom, w + left + right, xv.shape[3]))
        valid = np.zeros(padded.shape[:3] + (1,), bool)
        padded[:, top : top + h, left : left + w, :] = values
        valid[:, top : top + h, left : left + w, :] = True
        patches, masks = [], []
        for i in range(fh):
            for j in range(fw):
                rows, cols = slice(i, i + sh * (oh - 1) + 1, sh), slice(j, j + sw * (ow - 1) + 1, sw)
                patches.append(padded[:, rows, cols, :])
                masks.append(np.broadcast_to(valid[:, rows, cols, :], patches[-1].shape))
        result = reduce(np.stack(patches), np.stack(masks), call, x, fuse)
        result = from_nhwc(result, nchw)
        if x.type == "TENSOR_QUANT8_ASYMM":
            return [call.raw_result(0, result.astype(np.uint8), x)]
        return [call.real_result(0, result, x)]

    return operation


def _quant_clamp(values: np.ndarray, call: Call, x: Operand, fuse: int) -> np.ndarray:
    lo, hi = quant_activation_range(fuse, call.spec(0, x))
    return np.clip(values, lo, hi)


def _average(p: np.ndarray, m: np.ndarray, call: Call, x: Operand, fuse: int) -> np.ndarray:
    total, count = np.where(m, p, 0).sum(axis=0), m.sum(axis=0)
    if x.type == "TENSOR_QUANT8_ASYMM":  # the reference's integer mean: (sum + count/2) / count
        return _quant_clamp((total.astype(np.int64) + count // 2) // count, call, x, fuse)
    return activate(total / count, fuse)


def _maximum(p: np.ndarray, m: np.ndarray, call: Call, x: Operand, fuse: int) -> np.ndarray:
    best = np.where(m, p, -np.inf).max(axis=0)
    if x.type == "TENSOR_QUANT8_ASYMM":
        return _quant_clamp(best, call, x, fuse)
    return activate(best, fuse)


def _l2(p: np.ndarray, m: np.ndarray, call: Call, x: Operand, fuse: int) -> np.ndarray:
    return activate(np.sqrt(np.where(m, p * p, 0).sum(axis=0) / m.sum(axis=0)), fuse)


OPERATIONS: dict[str, Callable[[Call], list[Operand]]] = {
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "GROUPED_CONV_2D": grouped_conv_2d,
    "TRANSPOSE_CONV_2D": transpose_conv_2d,
    "FULLY_CONNECTED": fully_connected,
    "AVERAGE_POOL_2D": _pool(_average, F_Q8),
    "MAX_POOL_2D": _pool(_maximum, F_Q8),
    "L2_POOL_2D": _pool(_l2, F),
}
