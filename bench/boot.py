"""How fast the emulator boots and how much memory it holds (DESIGN.md's budgets).

Through the commands a user types: `npuemu boot --detach` (which returns once every
service is registered), `npuemu launch camera`, `npuemu shutdown`. Measured in the
same run, as the baseline: starting a Python interpreter that imports the project's
packages (what every process of the stack pays before it does anything), and that
interpreter's resident memory.

Targets (DESIGN.md): boot --detach under 2 s on a 2-core machine; the idle stack
(servicemanager, HAL, system_server) under 150 MB RSS in all; an app process under
60 MB. The load average is printed because these machines are shared.

    .venv/bin/python bench/boot.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from framework.emulator import RuntimeFiles

NPUEMU = [str(Path(sys.executable).with_name("npuemu"))]
BOOT_TARGET_S = 2.0
STACK_TARGET_MB = 150.0
APP_TARGET_MB = 60.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def npuemu(*args: str, root: Path) -> str:
    env = dict(os.environ, NPUEMU_RUNTIME_DIR=str(root))
    done = subprocess.run([*NPUEMU, *args], env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"npuemu {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def baseline() -> tuple[float, float]:
    """Seconds to start Python and import the stack's packages; that process's RSS."""
    code = "import framework.binder, framework.server, npuhal, sys; sys.stdout.write(open('/proc/self/status').read())"
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    seconds = time.perf_counter() - t0
    rss = next(int(line.split()[1]) / 1024 for line in out.splitlines() if line.startswith("VmRSS:"))
    return seconds, rss


def one_boot(root: Path, *, with_app: bool) -> dict:
    t0 = time.perf_counter()
    npuemu("boot", "--detach", root=root)
    boot_s = time.perf_counter() - t0
    try:
        state = RuntimeFiles(root).read_state()
        time.sleep(1.0)  # let the stack settle before reading its memory
        stack = {name: rss_mb(pid) for name, pid in state["pids"].items()}
        app = None
        if with_app:
            launched = npuemu("launch", "camera", root=root)
            pid = int(re.search(r"pid (\d+)", launched).group(1))
            time.sleep(6.0)  # the app loads its model and runs frames
            app = rss_mb(pid)
        return {"boot_s": boot_s, "stack": stack, "app": app}
    finally:
        npuemu("shutdown", root=root)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    base = [baseline() for _ in range(args.runs)]
    runs = []
    with tempfile.TemporaryDirectory(prefix="npuemu-bench-boot-") as tmp:
        for i in range(args.runs):
            root = Path(tmp) / f"run{i}"
            runs.append(one_boot(root, with_app=(i == args.runs - 1)))
    base_s = statistics.median(b[0] for b in base)
    base_mb = statistics.median(b[1] for b in base)
    boots = sorted(r["boot_s"] for r in runs)
    boot_med = statistics.median(boots)
    stacks = [sum(r["stack"].values()) for r in runs]
    stack_med = statistics.median(stacks)
    parts = {name: statistics.median(r["stack"][name] for r in runs) for name in runs[0]["stack"]}
    app = runs[-1]["app"]

    print(f"npuemu boot and memory ({args.runs} boots; load average {os.getloadavg()[0]:.2f} at the end)")
    print(f"baseline: python + the stack's imports starts in {base_s * 1000:.0f} ms (median), {base_mb:.1f} MB RSS\n")
    rows = [
        ("boot --detach (median)", f"{boot_med:.2f} s", f"< {BOOT_TARGET_S:.0f} s", boot_med < BOOT_TARGET_S,
         f"{boot_med / base_s:.1f}x one interpreter start"),
        ("boot --detach (max)", f"{boots[-1]:.2f} s", f"< {BOOT_TARGET_S:.0f} s", boots[-1] < BOOT_TARGET_S, ""),
        ("idle stack RSS (median)", f"{stack_med:.1f} MB", f"< {STACK_TARGET_MB:.0f} MB", stack_med < STACK_TARGET_MB,
         f"{stack_med / base_mb:.1f}x one interpreter"),
        ("app process RSS (camera)", f"{app:.1f} MB", f"< {APP_TARGET_MB:.0f} MB", app < APP_TARGET_MB,
         f"{app / base_mb:.1f}x one interpreter"),
    ]
    print(f"{'measure':26} {'value':>10} {'target':>10} {'met':>4}  vs baseline")
    print("-" * 76)
    for name, value, target, met, ratio in rows:
        print(f"{name:26} {value:>10} {target:>10} {'yes' if met else 'NO':>4}  {ratio}")
    print("\nidle stack by process (median MB): " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
