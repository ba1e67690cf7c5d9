"""Every kernel, through a model loaded on a device, against plain numpy on random inputs.

The hardware computes in slices (a few output rows, pixels or elements at a
time), so these also check that slicing never changes a result.
"""

import zlib

import numpy as np
import pytest

import npuhal
from npuhal import FuseCode, ModelBuilder, OperationType

FUSES = list(FuseCode)


def fuse(x, code):
    if code == FuseCode.RELU:
        return np.maximum(x, 0)
    if code == FuseCode.RELU1:
        return np.clip(x, -1, 1)
    if code == FuseCode.RELU6:
        return np.clip(x, 0, 6)
    return x


def ref_fully_connected(x, w, b, code):
    return fuse(x @ w.T + b, code)


def ref_conv2d(x, f, b, pads, strides, code):
    pl, pr, pt, pb = pads
    sw, sh = strides
    n, h, w, c = x.shape
    out_c, fh, fw, _ = f.shape
    xp = np.zeros((n, h + pt + pb, w + pl + pr, c), np.float64)
    xp[:, pt : pt + h, pl : pl + w, :] = x
    oh = (h + pt + pb - fh) // sh + 1
    ow = (w + pl + pr - fw) // sw + 1
    out = np.zeros((n, oh, ow, out_c), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * sh : i * sh + fh, j * sw : j * sw + fw, :]
            out[:, i, j, :] = np.tensordot(patch, f, axes=([1, 2, 3], [1, 2, 3]))
    return fuse(out + b, code)


def ref_softmax(x, beta):
    z = beta * (x - x.max(axis=-1, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture
def rng(request):
    # One seed per test id: failures reproduce, and each case differs.
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


@pytest.fixture
def driver():
    # The virtual clock needs no trio run: these tests step it by hand.
    with npuhal.Driver.open(clock="virtual") as d:
        yield d


def run(driver, model, inputs, device=None):
    device = device if device is not None else npu_device(driver)
    handle = driver.load_model(device, model)
    work = driver.submit(handle, inputs, uid=10001, job_priority=0)
    driver.run_until_idle()
    ended = driver.work_ended(work)
    assert ended is not None and ended.reason is npuhal.EndReason.COMPLETED, ended
    assert ended.info.deviceNumber == device.number
    return driver.outputs(work)


def npu_device(driver):
    return next(d for d in driver.devices if d.type is npuhal.DeviceType.ACCELERATOR)


@pytest.mark.parametrize("op, ref", [(OperationType.ADD, np.add), (OperationType.SUB, np.subtract), (OperationType.MUL, np.multiply)])
@pytest.mark.parametrize("code", FUSES)
def test_elementwise(driver, rng, op, ref, code):
    shape = (3, 5, 7)
    a = rng.standard_normal(shape, dtype=np.float32) * 4
    b = rng.standard_normal(shape, dtype=np.float32) * 4
    m = ModelBuilder()
    x, y = m.input(shape), m.input(shape)
    m.output(m.operation(op, [x, y, m.int32(code)], shape))
    (out,) = run(driver, m.build(), [a, b])
    np.testing.assert_allclose(out, fuse(ref(a, b), code), rtol=1e-6, atol=1e-6)


def test_elementwise_with_a_constant_operand(driver, rng):
    a = rng.standard_normal((4, 64), dtype=np.float32)
    c = rng.standard_normal((4, 64), dtype=np.float32)  # large: lands in a pool
    m = ModelBuilder()
    x = m.input(a.shape)
    m.output(m.operation(OperationType.MUL, [x, m.constant(c), m.int32(0)], a.shape))
    (out,) = run(driver, m.build(), [a])
    np.testing.assert_allclose(out, a * c, rtol=1e-6)


def test_relu(driver, rng):
    a = rng.standard_normal((6, 33), dtype=np.float32)
    m = ModelBuilder()
    x = m.input(a.shape)
    m.output(m.operation(OperationType.RELU, [x], a.shape))
    (out,) = run(driver, m.build(), [a])
    np.testing.assert_array_equal(out, np.maximum(a, 0))


@pytest.mark.parametrize("code", FUSES)
def test_fully_connected(driver, rng, code):
    batch, n_in, units = 3, 17, 9
    x = rng.standard_normal((batch, n_in), dtype=np.float32)
    w = rng.standard_normal((units, n_in), dtype=np.float32)
    b = rng.standard_normal(units, dtype=np.float32)
    m = ModelBuilder()
    i = m.input(x.shape)
    m.output(m.operation(OperationType.FULLY_CONNECTED, [i, m.constant(w), m.constant(b), m.int32(code)], (batch, units)))
    (out,) = run(driver, m.build(), [x])
    np.testing.assert_allclose(out, ref_fully_connected(x.astype(np.float64), w, b, code), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "pads, strides, code",
    [((0, 0, 0, 0), (1, 1), FuseCode.NONE), ((1, 1, 1, 1), (1, 1), FuseCode.RELU), ((1, 0, 2, 1), (2, 1), FuseCode.RELU6), ((0, 2, 0, 2), (2, 2), FuseCode.RELU1)],
)
def test_conv2d(driver, rng, pads, strides, code):
    x = rng.standard_normal((2, 7, 6, 3), dtype=np.float32)
    f = rng.standard_normal((4, 3, 2, 3), dtype=np.float32)
    b = rng.standard_normal(4, dtype=np.float32)
    expected = ref_conv2d(x.astype(np.float64), f, b, pads, strides, code)
    m = ModelBuilder()
    i = m.input(x.shape)
    params = [m.int32(p) for p in pads] + [m.int32(strides[0]), m.int32(strides[1]), m.int32(code)]
    m.output(m.operation(OperationType.CONV_2D, [i, m.constant(f), m.constant(b), *params], expected.shape))
    (out,) = run(driver, m.build(), [x])
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("beta", [1.0, 0.5, 3.0])
def test_softmax(driver, rng, beta):
    x = rng.standard_normal((4, 10), dtype=np.float32) * 3
    m = ModelBuilder()
    i = m.input(x.shape)
    m.output(m.operation(OperationType.SOFTMAX, [i, m.float32(beta)], x.shape))
    (out,) = run(driver, m.build(), [x])
    np.testing.assert_allclose(out, ref_softmax(x.astype(np.float64), beta), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)


def test_a_chain_of_operations_matches_numpy(driver, rng):
    x = rng.standard_normal((2, 12), dtype=np.float32)
    w = rng.standard_normal((8, 12), dtype=np.float32)
    b = rng.standard_normal(8, dtype=np.float32)
    s = rng.standard_normal((2, 8), dtype=np.float32)
    m = ModelBuilder()
    i = m.input(x.shape)
    fc = m.operation(OperationType.FULLY_CONNECTED, [i, m.constant(w), m.constant(b), m.int32(FuseCode.RELU)], (2, 8))
    sub = m.operation(OperationType.SUB, [fc, m.constant(s), m.int32(FuseCode.NONE)], (2, 8))
    m.output(m.operation(OperationType.SOFTMAX, [sub, m.float32(1.0)], (2, 8)))
    (out,) = run(driver, m.build(), [x])
    expected = ref_softmax(ref_fully_connected(x.astype(np.float64), w, b, FuseCode.RELU) - s, 1.0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_every_device_computes_the_same_results(driver, rng):
    x = rng.standard_normal((2, 16), dtype=np.float32)
    y = rng.standard_normal((2, 16), dtype=np.float32)
    m = ModelBuilder()
    a, b = m.input(x.shape), m.input(y.shape)
    m.output(m.operation(OperationType.ADD, [a, b, m.int32(FuseCode.RELU)], x.shape))
    model = m.build()
    seen = []
    for device in driver.devices:
        if not all(driver.supported_operations(device, model)):
            continue
        (out,) = run(driver, model, [x, y], device=device)
        np.testing.assert_allclose(out, np.maximum(x + y, 0), rtol=1e-6)
        seen.append(device.type)
    # The heterogeneous device (OTHER) runs work too, on its parts' silicon.
    assert {npuhal.DeviceType.ACCELERATOR, npuhal.DeviceType.GPU, npuhal.DeviceType.OTHER} <= set(seen)


def test_outputs_written_into_the_callers_buffers(driver, rng):
    a = rng.standard_normal((3, 4), dtype=np.float32)
    m = ModelBuilder()
    x = m.input(a.shape)
    m.output(m.operation(OperationType.RELU, [x], a.shape))
    handle = driver.load_model(npu_device(driver), m.build())
    mine = np.full(a.shape, np.nan, np.float32)
    raw = bytearray(a.nbytes)
    w1 = driver.submit(handle, [a], [mine], uid=1, job_priority=0)
    w2 = driver.submit(handle, [a.tobytes()], [raw], uid=1, job_priority=0)
    driver.run_until_idle()
    assert driver.outputs(w1)[0] is mine
    np.testing.assert_array_equal(mine, np.maximum(a, 0))
    np.testing.assert_array_equal(np.frombuffer(raw, np.float32).reshape(a.shape), np.maximum(a, 0))
