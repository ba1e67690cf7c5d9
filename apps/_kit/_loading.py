"""Loading an approved request's model, as an app on a phone must: CAN_LOAD_NOW is not a promise.

``CAN_LOAD_NOW`` says the NPU Manager's budget has room; the device may still refuse
the model, and the request may end before the model is in. Both are ordinary under
the budget policy (SPEC Part C, rules 4 and 8):

- A more important app's request may cancel this one while it compiles (an approved
  request that is not loaded yet is cancelled, not asked to unload). Its budget frees
  at once and goes to that app; this app learns it from
  ``onModelLoadRequestComplete(CANCELLED)``, or from ``notifyModelLoaded`` refused with
  ``IllegalStateException``. It must release what it compiled, unused.
- The other side of the same race: the app granted that freed budget may find the
  device's weight memory still taken by the cancelled app's compilation, which holds it
  until that app learns of the cancellation and releases. ``prepareModel`` then fails
  with ``RESOURCE_EXHAUSTED_*`` (``WEIGHT_MEMORY_FULL``). The app gives the approval
  back (``cancelModelLoad``), waits a little, and asks again.

:func:`load_model` does both, and says which happened.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from framework.binder import IllegalStateException
from framework.nn import ResourceExhaustedPersistentError, ResourceExhaustedTransientError

__all__ = ["LoadOutcome", "load_model"]


class LoadOutcome(enum.Enum):
    """What :func:`load_model` did."""

    LOADED = "loaded"
    """The model is in device memory and the service was told (``notifyModelLoaded``)."""
    ENDED = "ended"
    """The request ended before the model was in (cancelled for a more important app, or
    by the heat); what was compiled is released. Ask again later, if still wanted."""
    DEVICE_FULL = "device_full"
    """The device refused the model for want of memory; the approval is given back
    (``cancelModelLoad``). Wait a little (another app is releasing), then ask again."""


async def load_model(
    npu: Any, request: Any, listener: Any, compilation: Any, *, ended: Callable[[], bool] = lambda: False
) -> LoadOutcome:
    """Finish ``compilation`` for the approved ``request`` and tell the service it is loaded.

    ``ended()`` says whether ``onModelLoadRequestComplete`` has come for the request
    (so an app that already knows does not compile for nothing). On any outcome but
    ``LOADED`` the compilation is closed and the request has ended (or is ending: a
    ``cancelModelLoad`` was sent); the caller then files a new request to try again.
    """
    if ended():
        await compilation.aclose()
        return LoadOutcome.ENDED
    try:
        await compilation.finish()
    except (ResourceExhaustedPersistentError, ResourceExhaustedTransientError):
        await compilation.aclose()
        if not ended():
            try:
                await npu.cancelModelLoad(request)
            except IllegalStateException:
                pass  # it ended meanwhile: nothing left to give back
        return LoadOutcome.DEVICE_FULL
    except BaseException:
        await compilation.aclose()
        raise
    if not ended():
        try:
            await listener.notifyModelLoaded(request)
            return LoadOutcome.LOADED
        except IllegalStateException:
            pass  # cancelled while it compiled; the callback is on its way
    await compilation.aclose()
    return LoadOutcome.ENDED
