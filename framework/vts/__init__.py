"""npuemu's driver conformance suite (``npuemu vts``), public face.

::

    report = await framework.vts.run_vts("build/drivers/mydriver.so")
    print("\\n".join(report.lines()))      # PASS/FAIL per check, then "N passed, M failed"

See ``_suite`` for every check and the rules it enforces.
"""

from ._cases import (
    GenCase as GenCase,
    Tensor as Tensor,
    default_cases_path as default_cases_path,
    load_cases as load_cases,
    model_of as model_of,
    sources_digest as sources_digest,
    write_cases as write_cases,
)
from ._suite import (
    CHECK_NAMES as CHECK_NAMES,
    DEFAULT_CHECK_TIMEOUT_S as DEFAULT_CHECK_TIMEOUT_S,
    DEFAULT_TIMEOUT_S as DEFAULT_TIMEOUT_S,
    VtsCheckResult as VtsCheckResult,
    VtsDriverNotLoadedError as VtsDriverNotLoadedError,
    VtsReport as VtsReport,
    REPORT_FILE as REPORT_FILE,
    describe_checks as describe_checks,
    run_vts as run_vts,
)
