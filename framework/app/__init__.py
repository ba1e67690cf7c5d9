"""framework.app: what runs inside an app process before and around the app's code.

- ``_context``: ``Context`` (``getSystemService(Context.NPU_SERVICE)`` gives the
  ``NpuManager``) and ``open_app_context``, which sets one up from the binder.
- ``__main__``: ``python -m framework.app APP_DIR``, the app process the activity
  manager launches: it opens the binder runtime, a Context, and runs ``APP_DIR/main.py``'s
  ``async def main(context)``.
- ``_activity_thread``: what both kinds of app process run around the app's code: tell
  the activity manager when the app is up, log and report its crash (``AndroidRuntime``).
- ``_inprocess``: ``InProcessLauncher``, apps as tasks for whole-stack tests.
"""

from ._context import Context as Context
from ._context import open_app_context as open_app_context
from ._inprocess import InProcessApp as InProcessApp
from ._inprocess import InProcessLauncher as InProcessLauncher
from ._main import load_app_main as load_app_main
from ._main import run_app as run_app
