"""The scheduling lab: NPU sharing policies compared on the same arrivals.

    .venv/bin/python bench/scheduling.py                 # every bundled workload, a few minutes
    .venv/bin/python bench/scheduling.py prema           # PREMA's table beside the paper's ratios
    .venv/bin/python bench/scheduling.py phone --no-sweep --policy fcfs --policy preempt-ckpt
    .venv/bin/python bench/scheduling.py my.toml --driver build/drivers/mine.so --seed 3 --k 5

The same as ``npuemu bench scheduling`` (see ``--help``).  Each workload of
``bench/workloads/`` (or the files named) runs on the emulated NPU's virtual
clock under non-preemptive FCFS, non-preemptive priority, preemptive
highest-priority-first with checkpoint and with kill-restart, the reference
driver's own scheduling, PREMA and the paper's baselines (Python driver
policies, ``framework.lab._prema``), any ``--policy-file`` and any
``--driver``; the metrics are Eyerman and
Eeckhout's (ANTT, STP, fairness) and PREMA's (SLA satisfaction, the
high-priority tail).  Writes ``scheduling-lab/scheduling.json`` (every
number) and one PNG per workload.  The library is ``framework.lab``.
"""

from __future__ import annotations

import sys

from framework.cli import scheduling

if __name__ == "__main__":
    sys.exit(scheduling.main(args=sys.argv[1:], prog_name="bench/scheduling.py", standalone_mode=True))
