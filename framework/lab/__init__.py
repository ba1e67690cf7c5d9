"""framework.lab: the scheduling lab, which measures how policies share the NPU.

General layout (each module imports only those above it):

- ``_errors``: ``LabError`` and its builtin-flavoured subclasses;
- ``_metrics``: the multiprogram metrics of Eyerman and Eeckhout (IEEE Micro
  2008) and PREMA (HPCA 2020), as pure functions of numbers;
- ``_workload``: the declarative workload file (TOML), validated, and the
  arrivals it generates (Poisson, periodic, bursts, traces; a load sweep);
- ``_policy``: the interface of a driver-level scheduling policy written in
  Python (events in, select/preempt decisions out), and loading one from a file;
- ``_prema``: PREMA (Choi and Rhu, HPCA 2020) and the paper's baselines as such
  policies;
- ``_run``: policies (scheduling x preemption mode, a driver ``.so``'s own, or
  a Python policy holding the queue) and one run of a workload on ``npuhal``'s
  virtual clock;
- ``_stack``: whole-stack mode: each task an app that goes through the npu
  service, NNAPI, the HAL and the driver, all in one trio run on the MockClock;
- ``_sweep``: where a grid's points run: in this process, or fanned out on a
  ``dask.distributed`` cluster (local or remote);
- ``_lab``: the experiment: every policy on the same arrivals, isolated
  times, a summary of every run (in driver or whole-stack mode);
- ``_report``: tables, the PNG plot, the JSON of every number;
- ``_check``: the npu service's invariants as a hypothesis state machine, run
  against any load policy (``npuemu lab check-policy``).

``npuemu bench scheduling`` and ``bench/scheduling.py`` are thin fronts on
this package.  Everything public is re-exported here, exactly once.
"""

from ._check import (
    CheckResult as CheckResult,
    NpuArbiterMachine as NpuArbiterMachine,
    check_policy as check_policy,
    policy_machine as policy_machine,
)
from ._errors import LabError as LabError, LabRunError as LabRunError, WorkloadError as WorkloadError
from ._lab import (
    GridResult as GridResult,
    PREMA_REPORTED as PREMA_REPORTED,
    WorkloadReport as WorkloadReport,
    failed_summary as failed_summary,
    prema_comparison as prema_comparison,
    run_grid as run_grid,
    run_workload as run_workload,
    summarize as summarize,
)
from ._metrics import (
    antt as antt,
    fairness as fairness,
    mean as mean,
    normalized_turnaround as normalized_turnaround,
    percentile as percentile,
    sla_satisfaction as sla_satisfaction,
    stp as stp,
)
from ._policy import (
    Arrived as Arrived,
    DriverPolicy as DriverPolicy,
    Ended as Ended,
    Event as Event,
    JobView as JobView,
    Mechanism as Mechanism,
    PolicyError as PolicyError,
    Preempted as Preempted,
    Started as Started,
    TaskInfo as TaskInfo,
    View as View,
    load_policy_file as load_policy_file,
)
from ._prema import (
    Fcfs as Fcfs,
    PreemptiveSjf as PreemptiveSjf,
    Prema as Prema,
    TokenOnly as TokenOnly,
    candidates as candidates,
    choose_mechanism as choose_mechanism,
    priority_weight as priority_weight,
    shortest as shortest,
    threshold as threshold,
    Tokens as Tokens,
)
from ._report import (
    METRICS_KEY as METRICS_KEY,
    format_prema as format_prema,
    format_report as format_report,
    plot_report as plot_report,
    report_figure as report_figure,
    report_json as report_json,
    write_json as write_json,
)
from ._run import (
    Calibration as Calibration,
    Job as Job,
    Policy as Policy,
    RunResult as RunResult,
    builtin_policies as builtin_policies,
    calibrate as calibrate,
    driver_policy as driver_policy,
    measure_isolated as measure_isolated,
    policy_file as policy_file,
    python_policies as python_policies,
    python_policy as python_policy,
    run_policy as run_policy,
)
from ._stack import NPU_POLICIES as NPU_POLICIES, npu_policy_label as npu_policy_label
from ._sweep import (
    DaskExecutor as DaskExecutor,
    Executor as Executor,
    SerialExecutor as SerialExecutor,
    UpstreamFailed as UpstreamFailed,
    open_executor as open_executor,
)
from ._workload import (
    Arrival as Arrival,
    Bursts as Bursts,
    Periodic as Periodic,
    Poisson as Poisson,
    Task as Task,
    IMPORTANCES as IMPORTANCES,
    Trace as Trace,
    Workload as Workload,
    default_workloads_dir as default_workloads_dir,
    factor_for_load as factor_for_load,
    generate_arrivals as generate_arrivals,
    load_workload as load_workload,
    offered_load as offered_load,
    parse_workload as parse_workload,
)
