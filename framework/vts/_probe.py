"""The VTS driver probe: what a driver says about its devices, asked in a child process.

``npuemu vts`` needs a few facts that no public interface carries: which devices a
driver *describes* (so that a device the HAL refused to register, say for a bad
name, is still seen), how many execution channels each has (to size the ordering
check), which devices a heterogeneous device manages, and the version strings of a
second build.  It asks the driver directly, in a throwaway process, because the
driver under test may crash or hang in its very first callback and the suite must
survive that::

    python -m framework.vts._probe [--driver PATH]

prints one JSON object (``{"vendor": ..., "devices": [{"number", "name", "type",
"version", "channels", "parts"}, ...]}``) and exits 0, or prints the error on
stderr and exits 1.  The driver runs on the virtual clock: no hardware threads
start and nothing is executed.
"""

from __future__ import annotations

import argparse
import json
import sys

from npuhal import Driver, NpuError


def probe(path: str | None) -> dict:
    """The driver's own description of its devices, as plain data."""
    with Driver.open(path, clock="virtual") as driver:
        return {
            "vendor": driver.vendor,
            "devices": [
                {
                    "number": d.number,
                    "name": d.name,
                    "type": int(d.type),
                    "version": d.version,
                    "channels": d.channels,
                    "parts": list(d.parts),
                }
                for d in driver.devices
            ],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m framework.vts._probe")
    parser.add_argument("--driver", default=None, help="driver .so (default: the built-in reference)")
    args = parser.parse_args(argv)
    try:
        facts = probe(args.driver)
    except NpuError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    json.dump(facts, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
