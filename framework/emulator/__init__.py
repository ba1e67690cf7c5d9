"""framework.emulator: booting and watching a whole emulator (init's library).

This is the library home of what ``npuemu boot``, ``shutdown``, ``trace``, ``plot``
and ``demo`` do, so that tests and tools can do the same without the command line.
It sits above everything else (it starts the other layers as processes and talks to
them only through the binder) and below ``framework.cli``, which is a thin face of it.

Layout:

- ``_paths``: which runtime directory a command means, and the files init keeps
  there (``logcat`` and ``logcat.1``, the log's ring; ``init.json``, ``trace.jsonl``, ``apps/``).
- ``_errors``: ``EmulatorError`` and its builtin-flavoured subclasses.
- ``_logcat``: writing, adopting and parsing logcat lines, ``-s`` filters, and the bounded ring the log is.
- ``_stack``: ``open_stack``, the one way to assemble a stack: as real processes
  (``npuemu boot``, ``demo``, ``vts``, the process tests) or in one process over the
  in-memory binder (the lab, the in-process tests).
- ``_boot``: its process form, init itself: servicemanager, HAL, system_server.
- ``_daemon``: ``python -m framework.emulator``, the detached init of ``boot --detach``,
  and ``hold_until_signalled`` (a stop signal during the boot interrupts it).
- ``_reaper``: init's dead-man switch; it finds a boot's processes by ``$NPUEMU_BOOT_ID``.
- ``_userns``: what a boot that is not root would need for real uids in a user namespace.
- ``_services``: the AIDL interfaces a client uses, and ``open_shell`` (uid 2000).
- ``_recorder``: init's trace recorder (``trace.jsonl``).
- ``_trace``: the recorded run as a Chrome/Perfetto trace, and its summary numbers.
- ``_plot``: the same timeline as a PNG.
- ``_control``: what the shell commands do (launch, thermal, devices, shutdown).
- ``_demo``: the scenario of ``npuemu demo``.
"""

from ._boot import BootConfig as BootConfig
from ._boot import Emulator as Emulator
from ._boot import HAL_SERVICES as HAL_SERVICES
from ._boot import SYSTEM_SERVER_SERVICES as SYSTEM_SERVER_SERVICES
from ._boot import grant_search as grant_search
from ._control import DeviceRow as DeviceRow
from ._control import LaunchedApp as LaunchedApp
from ._control import describe_start as describe_start
from ._control import follow_log as follow_log
from ._control import launch_apps as launch_apps
from ._control import list_devices as list_devices
from ._control import parse_severity as parse_severity
from ._control import read_log as read_log
from ._control import reset_thermal as reset_thermal
from ._control import resolve_app as resolve_app
from ._control import set_thermal_severity as set_thermal_severity
from ._control import shutdown as shutdown
from ._control import thermal_status as thermal_status
from ._daemon import hold_until_signalled as hold_until_signalled
from ._daemon import serve_until_signalled as serve_until_signalled
from ._demo import run_demo as run_demo
from ._errors import BootError as BootError
from ._errors import BootInterruptedError as BootInterruptedError
from ._errors import EmulatorAlreadyRunningError as EmulatorAlreadyRunningError
from ._errors import EmulatorError as EmulatorError
from ._errors import EmulatorNotRunningError as EmulatorNotRunningError
from ._errors import NoSuchAppError as NoSuchAppError
from ._logcat import LOGCAT_BUFFER_BYTES as LOGCAT_BUFFER_BYTES
from ._logcat import LOGCAT_LINE_MAX as LOGCAT_LINE_MAX
from ._logcat import LogFilter as LogFilter
from ._logcat import LogLine as LogLine
from ._logcat import LogRing as LogRing
from ._logcat import format_line as format_line
from ._logcat import log_parts as log_parts
from ._logcat import parse_lines as parse_lines
from ._paths import RuntimeFiles as RuntimeFiles
from ._paths import resolve_runtime_dir as resolve_runtime_dir
from ._plot import plot_timeline as plot_timeline
from ._services import HAL_CONTROL as HAL_CONTROL
from ._services import open_shell as open_shell
from ._stack import MemoryStack as MemoryStack
from ._stack import open_stack as open_stack
from ._recorder import work_event_names as work_event_names
from ._trace import enum_name as enum_name
from ._trace import load_timeline as load_timeline
from ._trace import summarize as summarize
from ._trace import write_trace as write_trace
from ._userns import SUBORDINATE_IDS_NEEDED as SUBORDINATE_IDS_NEEDED
from ._userns import SubordinateRange as SubordinateRange
from ._userns import enter_user_namespace as enter_user_namespace
from ._userns import in_user_namespace as in_user_namespace
from ._userns import join_emulator_namespace as join_emulator_namespace
from ._userns import join_user_namespace as join_user_namespace
from ._userns import subordinate_range as subordinate_range
from ._userns import userns_check as userns_check
