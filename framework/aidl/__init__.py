"""framework.aidl: the framework's own AIDL, loaded once per process.

``android/npumanager/`` is the NPU Manager's binder API as AOSP names it
(``INpuManager``, ``IModelLoadCallback``, ``ModelLoadRequestParcelable``, and
``PolicyParams``, npuemu's stand-in for setPolicy's ``PersistableBundle``);
``npuemu/server/`` holds system_server's private interfaces (activity, package and
thermal services), which Android keeps hidden too. Both the app side
(``framework.npumanager``, ``framework.app``) and system_server build their stubs and
proxies from here, as both sides of an Android binder are compiled from one .aidl.
"""

from __future__ import annotations

import functools
from pathlib import Path

from framework.binder import AidlRegistry, interface_class

__all__ = ["AIDL_ROOT", "framework_aidl", "framework_interface"]

AIDL_ROOT = Path(__file__).resolve().parent


@functools.cache
def framework_aidl() -> AidlRegistry:
    """Every definition under ``framework/aidl`` (a memo of a pure function)."""
    return AidlRegistry.load(AIDL_ROOT)


def framework_interface(name: str) -> type:
    """The interface class (``Stub``, ``asInterface``) of a framework interface."""
    return interface_class(framework_aidl().interface(name))
