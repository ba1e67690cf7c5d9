"""The ``npuemu`` command line: thin click commands over the libraries.

Layout: ``_main`` is the root group (``--runtime-dir`` for every subcommand); each
other module holds the commands of one area and is registered at the end of
``_main``: ``_boot`` (boot, shutdown, service list, devices), ``_launch``,
``_logcat``, ``_thermal``, ``_trace``, ``_plot``, ``_demo`` (all over
``framework.emulator``), ``_server`` (dumpsys, cmd npu, am), ``_vts``
(vts, run-test-inference), ``_nn`` (nn plan), ``_bench`` (bench scheduling),
``_lab`` (lab check-policy).
``_common`` is what they share: the runtime-dir option and the mapping of a user's
errors to one line on stderr and an exit status.
"""

from ._bench import scheduling as scheduling
from ._main import main as main
