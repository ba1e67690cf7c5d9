"""Workloads: a small declarative file of tasks and how their requests arrive.

A workload is a TOML file (``bench/workloads/*.toml``)::

    name = "phone"
    description = "camera preview, assistant bursts, background photo indexing"
    seed = 1                 # the arrivals' random seed (the CLI's --seed overrides)
    duration_ms = 3000       # requests arrive in [0, duration_ms); the run then drains
    device = "emu-npu"       # the driver device every task runs on
    slices_per_operation = 4 # optional: preemption points per operation (the hardware's default: 4)
    thermal = false          # optional: true lets the die heat and throttle (off: cleaner comparisons)
    default_run = true       # optional: false keeps a bundled workload out of a bare
                             #   `npuemu bench scheduling` (one that takes minutes: name it to run it)

    [sla]
    k = 4.0                  # a high-priority request meets its SLA within k x its isolated time

    [sweep]
    loads = [0.3, 0.6, 0.9]  # offered utilisations to sweep (see below); [] or absent: none

    [[task]]
    name = "camera"
    priority = 0             # the job priority, 0..1000; lower runs first (IScheduling)
    work_ms = 6.0            # how long one request runs alone on the device, roughly
    size_mb = 300            # emulated weight memory the model occupies
    model = "iris_landmark"  # optional: a real network (a MediaPipe .tflite that NNAPI takes whole,
                             #   framework.nn.tflite) instead of the small MLP below; work_ms scales it
    layers = 2               # optional: FULLY_CONNECTED layers (more layers: more preemption points)
    width = 64               # optional: the layers' width (what the kernels really compute)
    uid = 10010              # optional: the app uid the work is submitted as
    sla = true               # optional: counted in SLA satisfaction and the tail latency (if no
                             #   task says, the tasks at the workload's most important priority)
    scale_with_load = true   # optional: whether the sweep scales this task's arrival rate
    importance = "foreground"  # optional, whole-stack mode: the app's ActivityManager importance
                             #   (foreground, foreground_service, visible, perceptible, service,
                             #   top_sleeping, cached), from which the npu service derives its priority
    arrival = { kind = "periodic", period_ms = 33.333, jitter_ms = 1.0 }

Arrival kinds:

- ``periodic``: ``period_ms`` (> 0), optional ``jitter_ms`` (uniform +-, less than
  half the period) and ``phase_ms`` (the first frame);
- ``poisson``: ``rate_hz`` (> 0), exponential gaps;
- ``bursts``: bursts start as a Poisson process of ``rate_hz``; each is ``size``
  requests ``gap_ms`` apart (an assistant turn, a photo burst);
- ``trace``: recorded times, ``times_ms = [...]`` inline or ``file = "x.csv"``
  (one time in ms per line, ``#`` comments; relative to the workload file).

Every task's arrivals come from its own random stream (seeded by ``[seed,
task index]``), so adding a task does not move the others' requests, and
every policy is compared on exactly the same arrivals.

The sweep.  A task's *offered load* is its mean arrival rate times its
isolated run time; the workload's is the sum over tasks divided by the
device's channels (1.0: the device would be busy all the time if it never
wasted a cycle).  For each level in ``sweep.loads`` the arrival rates of the
tasks that ``scale_with_load`` are multiplied by one factor so that the
offered load is that level.  Scaling is a time compression of the same random
draws (periodic periods and trace times shrink, Poisson gaps shrink; a
burst's inner gap stays), so the levels differ only in intensity.

Unknown keys are errors, as typos in an experiment are worse than noise.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping, Sequence
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from interfaces.android.hardware.npu import IScheduling

from ._errors import WorkloadError

__all__ = [
    "Periodic",
    "Poisson",
    "Bursts",
    "Trace",
    "ArrivalProcess",
    "Task",
    "Workload",
    "Arrival",
    "load_workload",
    "parse_workload",
    "generate_arrivals",
    "offered_load",
    "factor_for_load",
    "default_workloads_dir",
    "IMPORTANCES",
]

#: A task's job priority is IScheduling's: 0 (most urgent) .. MAX_PRIORITY.
MAX_PRIORITY = IScheduling.MAX_PRIORITY
#: Enough for any experiment that finishes in reasonable time; a typo like
#: rate_hz = 1e9 is caught here instead of exhausting memory.
MAX_REQUESTS = 200_000


@dataclass(frozen=True, slots=True)
class Periodic:
    """A frame source: one request every ``period_ms``, jittered uniformly by +-``jitter_ms``."""

    period_ms: float
    jitter_ms: float = 0.0
    phase_ms: float = 0.0

    def rate_per_ms(self, duration_ms: float) -> float:
        return 1.0 / self.period_ms

    def times_ms(self, rng: np.random.Generator, duration_ms: float, factor: float) -> np.ndarray:
        period = self.period_ms / factor
        n = max(0, math.ceil((duration_ms - self.phase_ms) / period))
        base = self.phase_ms + period * np.arange(n)
        # Draw the jitter for every frame even when it is zero, so that the
        # stream's consumption does not depend on the parameters.
        jitter = rng.uniform(-1.0, 1.0, size=n) * self.jitter_ms
        return base + jitter


@dataclass(frozen=True, slots=True)
class Poisson:
    """Independent requests: exponential gaps with mean ``1000 / rate_hz`` ms."""

    rate_hz: float

    def rate_per_ms(self, duration_ms: float) -> float:
        return self.rate_hz / 1000.0

    def times_ms(self, rng: np.random.Generator, duration_ms: float, factor: float) -> np.ndarray:
        return _poisson_times(rng, self.rate_hz * factor / 1000.0, duration_ms)


@dataclass(frozen=True, slots=True)
class Bursts:
    """Bursts of ``size`` requests ``gap_ms`` apart, the bursts a Poisson process of ``rate_hz``."""

    rate_hz: float
    size: int
    gap_ms: float

    def rate_per_ms(self, duration_ms: float) -> float:
        return self.rate_hz * self.size / 1000.0

    def times_ms(self, rng: np.random.Generator, duration_ms: float, factor: float) -> np.ndarray:
        starts = _poisson_times(rng, self.rate_hz * factor / 1000.0, duration_ms)
        return (starts[:, None] + self.gap_ms * np.arange(self.size)[None, :]).ravel()


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests at recorded times (ms from the start of the run)."""

    times: tuple[float, ...]

    def rate_per_ms(self, duration_ms: float) -> float:
        return sum(1 for t in self.times if t < duration_ms) / duration_ms

    def times_ms(self, rng: np.random.Generator, duration_ms: float, factor: float) -> np.ndarray:
        return np.asarray(self.times, dtype=np.float64) / factor


ArrivalProcess = Periodic | Poisson | Bursts | Trace


def _poisson_times(rng: np.random.Generator, rate_per_ms: float, duration_ms: float) -> np.ndarray:
    # Draw standard exponentials in fixed-size chunks and scale them: the same
    # draws at any rate, so a sweep compresses one realisation in time.
    chunks: list[np.ndarray] = []
    t = 0.0
    while t < duration_ms:
        gaps = rng.standard_exponential(256) / rate_per_ms
        times = t + np.cumsum(gaps)
        chunks.append(times)
        t = float(times[-1])
    return np.concatenate(chunks) if chunks else np.empty(0)


@dataclass(frozen=True, slots=True)
class Task:
    """One stream of requests: one app's model, at one priority."""

    name: str
    priority: int
    work_ms: float
    size_mb: float
    arrival: ArrivalProcess
    uid: int
    sla: bool
    layers: int = 2
    width: int = 64
    scale_with_load: bool = True
    importance: str = "foreground"
    model: str | None = None


#: ActivityManager importances a task's app may run at (whole-stack mode).
IMPORTANCES = ("foreground", "foreground_service", "visible", "perceptible", "service", "top_sleeping", "cached")


@dataclass(frozen=True, slots=True)
class Workload:
    """A parsed, validated workload.  ``source`` is the file it came from (or ``"<dict>"``)."""

    name: str
    description: str
    source: str
    seed: int
    duration_ms: float
    device: str
    tasks: tuple[Task, ...]
    sla_k: float = 4.0
    sweep_loads: tuple[float, ...] = ()
    slices_per_operation: int | None = None
    thermal: bool = False
    default_run: bool = True
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_seed(self, seed: int) -> Workload:
        return _replace(self, seed=seed)

    def with_sla_k(self, k: float) -> Workload:
        return _replace(self, sla_k=k)

    def with_sweep(self, loads: Sequence[float]) -> Workload:
        return _replace(self, sweep_loads=tuple(loads))

    def to_dict(self) -> dict[str, Any]:
        """Everything that defines the run, as plain JSON-able data."""
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "seed": self.seed,
            "duration_ms": self.duration_ms,
            "device": self.device,
            "slices_per_operation": self.slices_per_operation,
            "thermal": self.thermal,
            "default_run": self.default_run,
            "sla_k": self.sla_k,
            "sweep_loads": list(self.sweep_loads),
            "tasks": [
                {
                    "name": t.name,
                    "priority": t.priority,
                    "work_ms": t.work_ms,
                    "size_mb": t.size_mb,
                    "uid": t.uid,
                    "sla": t.sla,
                    "layers": t.layers,
                    "width": t.width,
                    "scale_with_load": t.scale_with_load,
                    "importance": t.importance,
                    "model": t.model,
                    "arrival": {"kind": type(t.arrival).__name__.lower(), **_arrival_fields(t.arrival)},
                }
                for t in self.tasks
            ],
        }


def _arrival_fields(a: ArrivalProcess) -> dict[str, Any]:
    if isinstance(a, Trace):
        return {"times_ms": list(a.times)}
    return {name: getattr(a, name) for name in a.__slots__}


def _replace(w: Workload, **changes: Any) -> Workload:
    return dataclasses.replace(w, **changes)


@dataclass(frozen=True, slots=True, order=True)
class Arrival:
    """One request: when it arrives (emulated ns from the start) and which task sends it."""

    time_ns: int
    task: int


# ---- parsing -------------------------------------------------------------------


class _Reader:
    """Typed access to one table of the file, with error messages that say where."""

    def __init__(self, table: Any, where: str, source: str) -> None:
        if not isinstance(table, Mapping):
            raise WorkloadError(f"{source}: {where or 'the file'} must be a table, got {_show(table)}")
        self.table = table
        self.where = where
        self.source = source
        self.used: set[str] = set()

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def fail(self, key: str, message: str) -> WorkloadError:
        return WorkloadError(f"{self.source}: {self.path(key)}: {message}")

    def get(self, key: str, default: Any = ..., *, required: bool = False) -> Any:
        self.used.add(key)
        if key not in self.table:
            if required or default is ...:
                raise WorkloadError(f"{self.source}: {self.path(key)}: missing (required)")
            return default
        return self.table[key]

    def number(self, key: str, default: Any = ..., *, minimum: float | None = None, above: float | None = None,
               below: float | None = None) -> float:
        value = self.get(key, default)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(key, f"must be a finite number, got {_show(value)}")
        if above is not None and not value > above:
            raise self.fail(key, f"must be a number > {above:g}, got {value!r}")
        if minimum is not None and not value >= minimum:
            raise self.fail(key, f"must be a number >= {minimum:g}, got {value!r}")
        if below is not None and not value < below:
            raise self.fail(key, f"must be a number < {below:g}, got {value!r}")
        return float(value)

    def integer(self, key: str, default: Any = ..., *, minimum: int | None = None, maximum: int | None = None) -> int:
        value = self.get(key, default)
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {_show(value)}")
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            lo = "" if minimum is None else f"{minimum}"
            hi = "" if maximum is None else f"{maximum}"
            raise self.fail(key, f"must be an integer in {lo}..{hi}, got {value}")
        return value

    def string(self, key: str, default: Any = ...) -> str:
        value = self.get(key, default)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"must be a non-empty string, got {_show(value)}")
        return value

    def boolean(self, key: str, default: Any = ...) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {_show(value)}")
        return value

    def finish(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            known = ", ".join(sorted(self.used))
            raise WorkloadError(f"{self.source}: {self.path(unknown[0])}: unknown key (known here: {known})")


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file (TOML).  Bad files raise ``WorkloadError``."""
    path = Path(path)
    source = path.name
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such workload file") from None
    except OSError as e:
        raise WorkloadError(f"{path}: cannot read the workload file: {e.strerror or e}") from None
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise WorkloadError(f"{source}: not UTF-8 text (a workload is a TOML file)") from None
    except tomllib.TOMLDecodeError as e:
        raise WorkloadError(f"{source}: not valid TOML: {e}") from None
    return parse_workload(data, source=source, base_dir=path.parent)


def parse_workload(data: Mapping[str, Any], *, source: str = "<dict>", base_dir: str | Path | None = None) -> Workload:
    """Validate a workload given as a dict (what ``tomllib`` returns).

    ``base_dir`` is where a trace ``file`` is looked for (the workload file's folder).
    """
    top = _Reader(data, "", source)
    name = top.string("name")
    description = top.get("description", "")
    if not isinstance(description, str):
        raise top.fail("description", f"must be a string, got {_show(description)}")
    seed = top.integer("seed", 1, minimum=0)
    duration_ms = top.number("duration_ms", above=0)
    device = top.string("device")
    slices = top.integer("slices_per_operation", None, minimum=1, maximum=4096)
    thermal = top.boolean("thermal", False)
    default_run = top.boolean("default_run", True)

    sla = _Reader(top.get("sla", {}), "sla", source)
    sla_k = sla.number("k", 4.0, minimum=1.0)
    sla.finish()

    sweep = _Reader(top.get("sweep", {}), "sweep", source)
    loads_raw = sweep.get("loads", [])
    if not isinstance(loads_raw, list):
        raise sweep.fail("loads", f"must be a list of numbers, got {_show(loads_raw)}")
    loads = []
    for i, value in enumerate(loads_raw):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value <= 10):
            raise sweep.fail(f"loads[{i}]", f"must be an offered load in (0, 10], got {_show(value)}")
        loads.append(float(value))
    sweep.finish()

    raw_tasks = top.get("task", required=True)
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise top.fail("task", "needs at least one [[task]] table")
    tasks = []
    names: set[str] = set()
    uids: dict[int, str] = {}
    for index, raw in enumerate(raw_tasks):
        label = f"task[{index}]"
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
            label += f" ({raw['name']})"
        tasks.append(_parse_task(raw, index, label, source, base_dir, duration_ms))
        task = tasks[-1]
        if task.name in names:
            raise WorkloadError(f"{source}: {label}.name: a second task named {task.name!r}")
        names.add(task.name)
        if task.uid in uids:
            raise WorkloadError(f"{source}: {label}.uid: {task.uid} is already task {uids[task.uid]!r}'s uid")
        uids[task.uid] = task.name
    top.finish()

    # SLA tasks: those that say so; if none says, the most important priority level present.
    if not any(isinstance(r, Mapping) and "sla" in r for r in raw_tasks):
        best = min(t.priority for t in tasks)
        tasks = [_task_replace(t, sla=t.priority == best) for t in tasks]
    if not any(t.sla for t in tasks):
        raise WorkloadError(f"{source}: no task has sla = true: SLA satisfaction and the tail latency need one")

    total = 0
    for t in tasks:
        total += len(t.arrival.times) if isinstance(t.arrival, Trace) else t.arrival.rate_per_ms(duration_ms) * duration_ms
    if total > MAX_REQUESTS:
        raise WorkloadError(
            f"{source}: about {total:.0f} requests in {duration_ms:g} ms; the lab caps a run at {MAX_REQUESTS}"
        )
    return Workload(
        name=name,
        description=description,
        source=source,
        seed=seed,
        duration_ms=duration_ms,
        device=device,
        tasks=tuple(tasks),
        sla_k=sla_k,
        sweep_loads=tuple(loads),
        slices_per_operation=slices,
        thermal=thermal,
        default_run=default_run,
        raw=dict(data),
    )


def _task_replace(t: Task, **changes: Any) -> Task:
    return dataclasses.replace(t, **changes)


def _parse_task(raw: Any, index: int, label: str, source: str, base_dir: str | Path | None, duration_ms: float) -> Task:
    r = _Reader(raw, label, source)
    name = r.string("name")
    priority = r.integer("priority", minimum=0, maximum=MAX_PRIORITY)
    work_ms = r.number("work_ms", above=0)
    if work_ms > 10_000:
        raise r.fail("work_ms", f"{work_ms:g} ms per request is beyond what the lab runs (at most 10000)")
    size_mb = r.number("size_mb", 1.0, above=0)
    layers = r.integer("layers", 2, minimum=1, maximum=64)
    width = r.integer("width", 64, minimum=1, maximum=1024)
    uid = r.integer("uid", 10000 + index, minimum=0, maximum=2**31 - 1)
    sla = r.boolean("sla", False)
    scale = r.boolean("scale_with_load", True)
    importance = r.string("importance", "foreground").strip().lower().replace("-", "_").removeprefix("importance_")
    if importance not in IMPORTANCES:
        raise r.fail("importance", f"must be one of {', '.join(IMPORTANCES)}, got {r.table['importance']!r}")
    model = r.get("model", None)
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise r.fail("model", f"must be the name of a .tflite model, got {_show(model)}")
    arrival = _parse_arrival(r.get("arrival", required=True), f"{label}.arrival", source, base_dir, duration_ms)
    r.finish()
    return Task(
        name=name, priority=priority, work_ms=work_ms, size_mb=size_mb, arrival=arrival, uid=uid, sla=sla,
        layers=layers, width=width, scale_with_load=scale, importance=importance, model=model,
    )


_KINDS = ("periodic", "poisson", "bursts", "trace")


def _parse_arrival(raw: Any, where: str, source: str, base_dir: str | Path | None, duration_ms: float) -> ArrivalProcess:
    r = _Reader(raw, where, source)
    kind = r.get("kind", required=True)
    if kind not in _KINDS:
        raise r.fail("kind", f"must be one of {', '.join(_KINDS)}, got {_show(kind)}")
    arrival: ArrivalProcess
    if kind == "periodic":
        period = r.number("period_ms", above=0)
        jitter = r.number("jitter_ms", 0.0, minimum=0)
        if jitter >= period / 2:
            raise r.fail("jitter_ms", f"must be less than half the period ({period / 2:g} ms), got {jitter:g}")
        phase = r.number("phase_ms", 0.0, minimum=0)
        arrival = Periodic(period, jitter, phase)
    elif kind == "poisson":
        arrival = Poisson(r.number("rate_hz", above=0))
    elif kind == "bursts":
        arrival = Bursts(r.number("rate_hz", above=0), r.integer("size", minimum=1, maximum=10_000),
                         r.number("gap_ms", minimum=0))
    else:
        has_inline, has_file = "times_ms" in r.table, "file" in r.table
        if has_inline == has_file:
            raise WorkloadError(f"{source}: {where}: a trace needs exactly one of times_ms = [...] or file = \"...\"")
        if has_inline:
            values = r.get("times_ms")
            if not isinstance(values, list):
                raise r.fail("times_ms", f"must be a list of times in ms, got {_show(values)}")
            times = [_trace_time(v, f"{where}.times_ms[{i}]", source) for i, v in enumerate(values)]
        else:
            times = _read_trace_file(r.string("file"), f"{where}.file", source, base_dir)
        if not times:
            raise WorkloadError(f"{source}: {where}: the trace has no times")
        arrival = Trace(tuple(sorted(times)))
    r.finish()
    return arrival


def _trace_time(value: Any, where: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise WorkloadError(f"{source}: {where}: must be a time in ms >= 0, got {_show(value)}")
    return float(value)


def _read_trace_file(name: str, where: str, source: str, base_dir: str | Path | None) -> list[float]:
    path = Path(name)
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise WorkloadError(f"{source}: {where}: cannot read trace {str(path)!r}: {getattr(e, 'strerror', None) or e}") from None
    times = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        # A CSV trace: the first column is the time; a header line is allowed.
        cell = text.split(",", 1)[0].strip()
        try:
            value = float(cell)
        except ValueError:
            if not times and number == 1:
                continue  # a header
            raise WorkloadError(f"{source}: {where}: {path.name} line {number}: not a time in ms: {cell!r}") from None
        times.append(_trace_time(value, f"{where}: {path.name} line {number}", source))
    return times


# ---- arrivals ------------------------------------------------------------------


def offered_load(workload: Workload, isolated_ms: Sequence[float], channels: int, factor: float = 1.0) -> float:
    """The workload's offered utilisation at a rate ``factor`` (see the module docstring)."""
    busy = 0.0
    for task, iso in zip(workload.tasks, isolated_ms, strict=True):
        f = factor if task.scale_with_load else 1.0
        busy += task.arrival.rate_per_ms(workload.duration_ms) * f * iso
    return busy / channels


def factor_for_load(workload: Workload, isolated_ms: Sequence[float], channels: int, load: float) -> float:
    """The rate factor that makes the offered load ``load``.

    Raises ``WorkloadError`` if the tasks that do not scale already offer more.
    """
    fixed = offered_load(workload, [0 if t.scale_with_load else i for t, i in zip(workload.tasks, isolated_ms)], channels)
    scaled = offered_load(workload, [i if t.scale_with_load else 0 for t, i in zip(workload.tasks, isolated_ms)], channels)
    if scaled <= 0:
        raise WorkloadError(f"{workload.source}: sweep: no task has scale_with_load = true")
    if load <= fixed:
        raise WorkloadError(
            f"{workload.source}: sweep.loads: {load:g} is below the {fixed:.3f} that the unscaled tasks offer alone"
        )
    return (load - fixed) / scaled


def generate_arrivals(workload: Workload, factor: float = 1.0) -> list[Arrival]:
    """Every request of the run, in time order (ties: task order).

    A pure function of the workload (its seed included) and ``factor``: the
    same arguments give the same list, on any machine.
    """
    if not (factor > 0 and math.isfinite(factor)):
        raise WorkloadError(f"the rate factor must be a positive number, got {factor!r}")
    out: list[Arrival] = []
    for index, task in enumerate(workload.tasks):
        rng = np.random.default_rng([workload.seed, index])
        f = factor if task.scale_with_load else 1.0
        times = task.arrival.times_ms(rng, workload.duration_ms, f)
        times = times[(times >= 0) & (times < workload.duration_ms)]
        out.extend(Arrival(int(round(t * 1e6)), index) for t in times.tolist())
    if len(out) > MAX_REQUESTS:
        raise WorkloadError(f"{workload.source}: {len(out)} requests at rate factor {factor:g}; the cap is {MAX_REQUESTS}")
    out.sort()
    return out


def default_workloads_dir() -> Path:
    """``bench/workloads`` of the source tree this package runs from."""
    return Path(__file__).resolve().parents[2] / "bench" / "workloads"
