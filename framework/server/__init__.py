"""framework.server: system_server's services, starting with the ``npu`` service's core.

Layout: ``_arbiter`` is the ``npu`` service's decision core (pure, sans-IO: inputs in,
``_actions`` out): the protocol, around a load policy behind the public plug-in API of
``_policy_api`` (events, checked actions, invariants), of which ``_policies`` holds the
built-in ones (SPEC Part C's budget rules) under the ``_thermal`` rules;
``_priority`` maps app importance to the HAL's ``SchedulingConfig``. ``_package`` and
``_activity`` are the pure package and activity managers.

The I/O halves (``_dump``: what every dump shares, the binder reply's limit): ``_npu_service`` (``NpuService``: the arbiter over the binder, the HAL
connection, deadlines, deaths, ``dumpsys npu``, ``cmd npu``) and ``_system_server``
(the ``package``, ``activity`` and ``thermal`` services and ``serve_system_server``,
the whole process; ``python -m framework.server`` runs it).
"""

from ._actions import (
    Action as Action,
    CanLoad as CanLoad,
    Log as Log,
    RequestComplete as RequestComplete,
    RequestUnload as RequestUnload,
    Revoke as Revoke,
)
from ._arbiter import (
    DEFAULT_UNLOAD_TIMEOUT_S as DEFAULT_UNLOAD_TIMEOUT_S,
    MAX_OPEN_REQUESTS_PER_APP as MAX_OPEN_REQUESTS_PER_APP,
    NpuArbiter as NpuArbiter,
    PolicyContext as PolicyContext,
)
from ._policies import (
    DEFAULT_POLICIES as DEFAULT_POLICIES,
    BudgetPolicy as BudgetPolicy,
    BudgetRules as BudgetRules,
    StatusQuoPolicy as StatusQuoPolicy,
    TurnTakingPolicy as TurnTakingPolicy,
)
from ._policy_api import (
    NEVER as NEVER,
    AppDied as AppDied,
    Event as Event,
    ImportanceChanged as ImportanceChanged,
    LoadRequest as LoadRequest,
    ModelLoaded as ModelLoaded,
    ModelUnloaded as ModelUnloaded,
    NpuPolicy as NpuPolicy,
    PolicyError as PolicyError,
    PolicyLoadError as PolicyLoadError,
    PolicySet as PolicySet,
    PolicyViolation as PolicyViolation,
    RequestCancelled as RequestCancelled,
    RequestFiled as RequestFiled,
    RequestState as RequestState,
    ThermalChanged as ThermalChanged,
    UnloadDeadline as UnloadDeadline,
    WorkCompleted as WorkCompleted,
    load_policy as load_policy,
    parse_policy_params as parse_policy_params,
    policy_source as policy_source,
)
from ._activity import (
    IMPORTANCE_CACHED as IMPORTANCE_CACHED,
    IMPORTANCE_FOREGROUND as IMPORTANCE_FOREGROUND,
    IMPORTANCE_FOREGROUND_SERVICE as IMPORTANCE_FOREGROUND_SERVICE,
    IMPORTANCE_GONE as IMPORTANCE_GONE,
    IMPORTANCE_PERCEPTIBLE as IMPORTANCE_PERCEPTIBLE,
    IMPORTANCE_SERVICE as IMPORTANCE_SERVICE,
    IMPORTANCE_TOP_SLEEPING as IMPORTANCE_TOP_SLEEPING,
    IMPORTANCE_VISIBLE as IMPORTANCE_VISIBLE,
    importance_name as importance_name,
    parse_importance as parse_importance,
)
from ._priority import (
    check_config as check_config,
    effective_priority as effective_priority,
    priority_band as priority_band,
    scheduling_config_for as scheduling_config_for,
)
from ._thermal import (
    THERMAL_STATUS_CRITICAL as THERMAL_STATUS_CRITICAL,
    THERMAL_STATUS_EMERGENCY as THERMAL_STATUS_EMERGENCY,
    THERMAL_STATUS_LIGHT as THERMAL_STATUS_LIGHT,
    THERMAL_STATUS_MODERATE as THERMAL_STATUS_MODERATE,
    THERMAL_STATUS_NONE as THERMAL_STATUS_NONE,
    THERMAL_STATUS_SEVERE as THERMAL_STATUS_SEVERE,
    THERMAL_STATUS_SHUTDOWN as THERMAL_STATUS_SHUTDOWN,
    thermal_allows as thermal_allows,
)
from ._npu_service import _SHELL_HELP as NPU_SHELL_HELP  # `cmd npu help`'s text, for the CLI to show offline
from ._dump import DUMP_REPLY_LIMIT as DUMP_REPLY_LIMIT
from ._dump import fit_reply as fit_reply
from ._npu_service import CALLBACK_DEADLINE_S as CALLBACK_DEADLINE_S
from ._npu_service import DUMP_PAGE_ROWS as DUMP_PAGE_ROWS
from ._npu_service import NpuService as NpuService
from ._system_server import (
    ANR_KILL_BELOW_IMPORTANCE as ANR_KILL_BELOW_IMPORTANCE,
    ActivityManagerService as ActivityManagerService,
    PackageManagerService as PackageManagerService,
    SystemServer as SystemServer,
    ThermalService as ThermalService,
    launch_app_process as launch_app_process,
    serve_system_server as serve_system_server,
)
