"""npu load policies with bugs, for the tests of what the service and check-policy do with them."""

from framework.npumanager import NPU_MODEL_SIZE_GREATER_THAN_2G
from framework.server import NpuPolicy, RequestFiled


class Greedy(NpuPolicy):
    """Declares a budget of 1, then grants every new request the heat allows: the second one breaks the budget."""

    name = "greedy"

    @property
    def max_budget(self) -> int:
        return 1

    def weight(self, size: int) -> int:
        return 1

    def on_event(self, ctx, event):
        if isinstance(event, RequestFiled):
            r = ctx.request(event.uid, event.request_id)
            if ctx.thermal_allows(r):
                ctx.grant(r)


class Raises(NpuPolicy):
    """Grants every request, but raises on a >2GB one (a bug in its own code)."""

    name = "raises"

    def on_event(self, ctx, event):
        if isinstance(event, RequestFiled):
            if event.size == NPU_MODEL_SIZE_GREATER_THAN_2G:
                raise KeyError(event.size)
            ctx.grant(ctx.request(event.uid, event.request_id))


class RaisesForCached(NpuPolicy):
    """Grants every request, but raises on a cached app's (a bug the lab's whole-stack runs meet)."""

    name = "raises-for-cached"

    def on_event(self, ctx, event):
        if isinstance(event, RequestFiled):
            if ctx.importance(event.uid) >= 400:
                raise RuntimeError(f"no rule for importance {ctx.importance(event.uid)}")
            ctx.grant(ctx.request(event.uid, event.request_id))
