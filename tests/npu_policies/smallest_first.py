"""A user's npu load policy, as a policy engineer writes one (tests load it from this file).

At most ``maxBudget`` of weight approved or loaded at once; whenever a request may move,
the lightest waiting request that fits goes first (oldest first among equals). It never
displaces anybody and takes no turns. It keeps the thermal rule: a model the heat
forbids is asked to unload, an approval the heat forbids is cancelled.
"""

from framework.binder import IllegalArgumentException
from framework.npumanager import NPU_MODEL_UNLOAD_REASON_THERMAL
from framework.server import NpuPolicy, RequestState, WorkCompleted


class SmallestFirst(NpuPolicy):
    name = "smallest-first"
    policy_id = 100

    def __init__(self, budget: int = 4) -> None:
        self.budget = budget

    @property
    def max_budget(self) -> int:
        return self.budget

    def params(self) -> dict:
        return {"maxBudget": self.budget}

    @classmethod
    def from_params(cls, params):
        params = dict(params or {})
        budget = params.pop("maxBudget", 4)
        if params or type(budget) is not int or budget <= 0:
            raise IllegalArgumentException(f"smallest-first takes maxBudget (a positive int) only, not {params or budget!r}")
        return cls(budget)

    def on_event(self, ctx, event):
        if isinstance(event, WorkCompleted):
            return  # a completion frees nothing: nothing to decide (and rule 7 allows only turns)
        for r in ctx.requests():
            if ctx.live(r) and not ctx.thermal_allows(r):
                if r.state is RequestState.LOADED:
                    ctx.ask_unload(r, NPU_MODEL_UNLOAD_REASON_THERMAL)
                elif r.state is RequestState.APPROVED:
                    ctx.cancel(r)
        movable = [r for r in ctx.waiting() if (r.is_new or ctx.may_move) and ctx.thermal_allows(r)]
        for r in sorted(movable, key=lambda r: (ctx.weight(r), r.seq)):
            if ctx.available(r) >= ctx.weight(r):
                ctx.grant(r)
