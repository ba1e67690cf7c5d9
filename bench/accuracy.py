"""Real models' accuracy against LiteRT: per output, and per tensor where it goes wrong.

    python bench/accuracy.py [--seeds 0,1,2] [NAME ...]
    python bench/accuracy.py --tensors NAME [--seed 0]
    python bench/accuracy.py --emulate NAME [--seed 0]

The first form runs every MediaPipe model LiteRT runs (``make models`` fetches them)
through NNAPI as the tests do (the HAL over the reference driver in this process, virtual
clock): compiled for ``nnapi-reference`` alone and with ``create`` across the emulated
devices, on ``syntheticImage(seed)``. Per output it prints the max error relative to the
output's range against LiteRT's default kernels (XNNPACK), against LiteRT's builtin
kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``), and two measures of how much float32
rounding alone moves that output: LiteRT's builtin kernels against its default ones, and
LiteRT's default kernels against themselves on the input moved by one ulp (the largest of
three draws). MediaPipe's ``Convolution2DTransposeBias`` has no builtin kernel: there the
builtin kernels run up to it and npuemu's kernels the rest.

The second form follows one model tensor by tensor: every operation's output, computed op
by op on nnapi-reference's kernels (``TfLiteModel.runOperation``) from npuemu's own
previous outputs (``us``) and, alone, from XNNPACK's inputs (``1op``), against LiteRT's
tensors (XNNPACK's read by making each tensor a model output; the builtin kernels'
with ``experimental_preserve_all_tensors``). Where ``1op`` is small and ``us`` large, the
difference is carried and grown from earlier operations, not made there.

The third runs one model op by op with its convolutions computed in numpy in a given order,
with or without FMA (``convolution``): npuemu's order before it fused (depthwise taps row by
row, no FMA), XNNPACK's order (bias first; a depthwise convolution's taps column by column)
without FMA, and with it, which is XNNPACK's arithmetic and npuemu's kernels' (bit for bit):
what is left is the other operations' rounding.

It measures only: no assertion.
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

import numpy as np
import tflite
import trio
import trio.testing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402

from bench.models import MODELS, open_app_nn  # noqa: E402
from framework.nn import CPU_DEVICE_NAME  # noqa: E402
from framework.nn.tflite import TfLiteModel, loadTfLite, modelsDir, syntheticImage  # noqa: E402


def patched(data: bytes, outputs: list[int], operations: int | None = None) -> bytes:
    """The .tflite file with subgraph 0's outputs replaced by ``outputs`` (a new vector
    appended to the file: a flatbuffer's offsets point forward) and, if given, only its
    first ``operations`` operators (the operators vector's length lowered in place)."""
    graph = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    buf = bytearray(data)
    buf += bytes(-len(buf) % 4)
    field = graph._tab.Pos + graph._tab.Offset(8)  # SubGraph.outputs (the schema's third field)
    struct.pack_into("<I", buf, field, len(buf) - field)
    buf += struct.pack(f"<I{len(outputs)}i", len(outputs), *outputs)
    if operations is not None:
        field = graph._tab.Pos + graph._tab.Offset(10)  # SubGraph.operators
        vector = field + struct.unpack_from("<I", buf, field)[0]
        struct.pack_into("<I", buf, vector, operations)
    return bytes(buf)


def litert(data: bytes, inputs, builtin: bool = False) -> dict[int, np.ndarray]:
    """LiteRT single-threaded: every output tensor, by index."""
    kind = {"experimental_op_resolver_type": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES} if builtin else {}
    interpreter = Interpreter(model_content=data, num_threads=1, **kind)
    interpreter.allocate_tensors()
    for detail, x in zip(interpreter.get_input_details(), inputs):
        interpreter.set_tensor(detail["index"], x)
    interpreter.invoke()
    return {d["index"]: interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()}


def computed(model: TfLiteModel) -> list[int]:
    return [t for op in model.operations if op.where != "folded" for t in op.outputs]


def litert_xnnpack_tensors(model: TfLiteModel, data: bytes, inputs) -> dict[int, np.ndarray]:
    """Every computed tensor as XNNPACK computes it (each made an output of the model)."""
    values = litert(patched(data, computed(model)), inputs)
    plain = litert(data, inputs)
    for t in model.outputs:  # the outputs XNNPACK gives unchanged by the others being outputs
        assert np.array_equal(values[t], plain[t]), f"{model.name}: exposing tensors changed output {t}"
    return values


def litert_builtin_tensors(model: TfLiteModel, data: bytes, inputs) -> dict[int, np.ndarray]:
    """Every computed tensor as LiteRT's builtin kernels compute it; from MediaPipe's first
    custom operation on (no builtin kernel), npuemu's kernels on the builtin kernels' tensors."""
    # a builtin's name is its enum's (RESIZE_BILINEAR); a custom operation's is its own
    cut = next((op.index for op in model.operations if not op.name.isupper()), len(model.operations))
    head = [t for op in model.operations[:cut] if op.where != "folded" for t in op.outputs]
    values = litert(patched(data, head, cut), inputs, builtin=True)
    values.update(zip(model.inputs, inputs))
    for op in model.operations[cut:]:
        values.update(model.runOperation(op.index, values))
    return values


def error(got: np.ndarray, want: np.ndarray, span: float | None = None) -> float:
    """Max |got - want| over ``span``, by default want's range (1 where the range is 0)."""
    want = np.asarray(want, np.float64)
    span = span or float(want.max() - want.min()) or 1.0
    return float(np.abs(np.asarray(got, np.float64).reshape(want.shape) - want).max()) / span


def one_ulp(data: bytes, inputs, outputs: list[int], draws: int = 3) -> list[float]:
    """XNNPACK against itself on the inputs moved by one ulp up or down (at random), per output."""
    base = litert(data, inputs)
    rng = np.random.default_rng(0)
    worst = [0.0] * len(outputs)
    for _ in range(draws):
        moved = [np.where(rng.random(x.shape) < 0.5, np.nextafter(x, np.float32(np.inf)),
                          np.nextafter(x, np.float32(-np.inf))).astype(np.float32) for x in inputs]
        again = litert(data, moved)
        worst = [max(w, error(again[t], base[t])) for w, t in zip(worst, outputs)]
    return worst


# ---- per model and output ---------------------------------------------------------------------


async def run_through_nnapi(nn, model: TfLiteModel, inputs, devices) -> list[np.ndarray]:
    compiled = await model.compile(nn, devices)
    try:
        return await compiled.run(inputs)
    finally:
        await compiled.aclose()


async def measure(names: list[str], seeds: list[int]) -> list[dict]:
    rows = []
    async with open_app_nn() as nn:
        cpu = nn.getDeviceByName(CPU_DEVICE_NAME)
        for name in names:
            path = modelsDir() / f"{name}.tflite"
            data = path.read_bytes()
            model = loadTfLite(path)
            for seed in seeds:
                inputs = [syntheticImage(model.tensors[t].shape, seed=seed) for t in model.inputs]
                xnn = litert(data, inputs)
                builtin = litert_builtin_tensors(model, data, inputs)
                reference = await run_through_nnapi(nn, model, inputs, [cpu])
                created = await run_through_nnapi(nn, model, inputs, None)
                ulp = one_ulp(data, inputs, list(model.outputs))
                for k, t in enumerate(model.outputs):
                    rows.append({"model": name, "seed": seed, "output": k,
                                 "reference": error(reference[k], xnn[t]), "create": error(created[k], xnn[t]),
                                 "referenceVsBuiltin": error(reference[k], builtin[t]),
                                 "builtinVsXnnpack": error(builtin[t], xnn[t]), "oneUlp": ulp[k]})
            print(f"  measured {name}", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["max |error| / the output's range; xnn = LiteRT's default kernels (XNNPACK), builtin = its builtin ones",
             f"{'model':<31} {'seed':>4} {'out':>3} | {'ref-xnn':>8} {'create-xnn':>10} {'ref-builtin':>11}"
             f" | {'builtin-xnn':>11} {'xnn 1-ulp':>9}"]
    for r in rows:
        lines.append(f"{r['model']:<31} {r['seed']:>4} {r['output']:>3} | {r['reference']:>8.1e} {r['create']:>10.1e}"
                     f" {r['referenceVsBuiltin']:>11.1e} | {r['builtinVsXnnpack']:>11.1e} {r['oneUlp']:>9.1e}")
    return "\n".join(lines)


# ---- per tensor ---------------------------------------------------------------------------------


def tensors(name: str, seed: int) -> str:
    path = modelsDir() / f"{name}.tflite"
    data = path.read_bytes()
    model = loadTfLite(path)
    inputs = [syntheticImage(model.tensors[t].shape, seed=seed) for t in model.inputs]
    xnn = litert_xnnpack_tensors(model, data, inputs)
    xnn.update(zip(model.inputs, inputs))
    builtin = litert_builtin_tensors(model, data, inputs)
    ours = dict(zip(model.inputs, inputs))
    lines = [f"{name} (seed {seed}): each operation's output, max |error| / XNNPACK's range of it",
             f"{'op':>4} {'operation':<27} {'tensor':>6} {'range':>9} | {'us-xnn':>8} {'us-builtin':>10}"
             f" {'builtin-xnn':>11} | {'1op-xnn':>8}"]
    for op in model.operations:
        if op.where == "folded":
            continue
        ours.update(model.runOperation(op.index, ours))
        alone = model.runOperation(op.index, xnn)
        for t in op.outputs:
            want = xnn[t].astype(np.float64)
            span = float(want.max() - want.min()) or 1.0
            mark = "  <- output" if t in model.outputs else ""
            lines.append(f"{op.index:>4} {op.name[:27]:<27} {t:>6} {span:>9.3g} | {error(ours[t], want):>8.1e} "
                         f"{error(ours[t], builtin[t], span):>10.1e} {error(builtin[t], want):>11.1e} | "
                         f"{error(alone[t], want):>8.1e}{mark}")
    return "\n".join(lines)


# ---- convolutions summed as XNNPACK sums them, with FMA or without -----------------------------------


_BOUNDS = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}  # TFLite's fused activations


def convolution(model: TfLiteModel, index: int, x: np.ndarray, fma: bool, columns_first: bool = True) -> np.ndarray:
    """CONV_2D or DEPTHWISE_CONV_2D (multiplier 1) ``index`` of ``model`` on ``x``, in numpy, summed
    as XNNPACK's micro-kernels sum: the bias first, then tap by tap (a depthwise one's taps column
    by column if ``columns_first``, else row by row; a convolution's row by row, each tap's input
    channels in order), one product at a time: rounded once (``fma``, a fused multiply-add: the
    float32 product is exact in float64; XNNPACK's and npuemu's kernels) or twice (the product, then
    the sum)."""
    op = model.operations[index]
    o = op.options
    w = model.tensors[op.inputs[1]].value.astype(np.float64)
    bias = model.tensors[op.inputs[2]].value if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    depthwise = op.name == "DEPTHWISE_CONV_2D"
    assert op.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and (not depthwise or w.shape[3] == x.shape[3])
    _, h, width, channels = x.shape
    out = model.tensors[op.outputs[0]].shape
    (kh, kw), (sh, sw), (dh, dw) = w.shape[1:3], (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor())
    top = max((out[1] - 1) * sh + (kh - 1) * dh + 1 - h, 0) // 2 if o.Padding() == tflite.Padding.SAME else 0
    left = max((out[2] - 1) * sw + (kw - 1) * dw + 1 - width, 0) // 2 if o.Padding() == tflite.Padding.SAME else 0
    padded = np.zeros((x.shape[0], h + kh * dh + sh * out[1], width + kw * dw + sw * out[2], channels), np.float64)
    padded[:, top:top + h, left:left + width] = x
    acc = np.zeros(out, np.float32) + (bias if bias is not None else np.float32(0))
    taps = [(ky, kx) for ky in range(kh) for kx in range(kw)]
    if depthwise and columns_first:
        taps.sort(key=lambda t: (t[1], t[0]))
    for ky, kx in taps:
        window = padded[:, ky * dh:ky * dh + sh * out[1]:sh, kx * dw:kx * dw + sw * out[2]:sw]
        products = [window * w[0, ky, kx]] if depthwise else (window[..., c:c + 1] * w[:, ky, kx, c] for c in range(channels))
        for p in products:
            acc = (acc + p).astype(np.float32) if fma else acc + p.astype(np.float32)
    return np.clip(acc, *_BOUNDS[o.FusedActivationFunction()]).astype(np.float32)


def emulated(name: str, seed: int) -> str:
    """The model op by op on npuemu's kernels, its convolutions replaced by :func:`convolution`:
    row by row without FMA (npuemu's kernels before they fused), XNNPACK's order without FMA, and
    with it (npuemu's kernels now, bit for bit); each output's error against XNNPACK."""
    path = modelsDir() / f"{name}.tflite"
    model = loadTfLite(path)
    inputs = [syntheticImage(model.tensors[t].shape, seed=seed) for t in model.inputs]
    want = litert(path.read_bytes(), inputs)
    lines = [f"{name} (seed {seed}): per output, max |error| / its range against XNNPACK"]
    for label, fma, columns_first in (("row by row, no FMA", False, False),
                                      ("XNNPACK's order, no FMA", False, True), ("XNNPACK's order and FMA", True, True)):
        values = dict(zip(model.inputs, inputs))
        for op in model.operations:
            if op.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and op.where == "nnapi":
                values[op.outputs[0]] = convolution(model, op.index, values[op.inputs[0]], fma, columns_first)
            else:
                values.update(model.runOperation(op.index, values))
        lines.append(f"  {label:<24} " + " ".join(f"{error(values[t], want[t]):.1e}" for t in model.outputs))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=MODELS)
    parser.add_argument("--seeds", default="0", help="syntheticImage seeds, comma-separated")
    parser.add_argument("--tensors", metavar="NAME", help="one model, tensor by tensor")
    parser.add_argument("--emulate", metavar="NAME", help="one model, its convolutions emulated in numpy")
    parser.add_argument("--seed", type=int, default=0, help="the picture's seed for --tensors and --emulate")
    args = parser.parse_args()
    if args.tensors or args.emulate:
        print(tensors(args.tensors, args.seed) if args.tensors else emulated(args.emulate, args.seed))
        return
    missing = [n for n in args.names if not (modelsDir() / f"{n}.tflite").is_file()]
    if missing:
        sys.exit(f"models missing in {modelsDir()}: {', '.join(missing)} (`make models` fetches them)")
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = trio.run(measure, args.names, seeds, clock=trio.testing.MockClock(autojump_threshold=0))
    print(table(rows))


if __name__ == "__main__":
    main()
