"""The model-load policies of ``setPolicy``: status quo, budget, turn taking.

A policy here is a small, immutable description of *how much may be loaded at once*;
the arbiter (``_arbiter``) owns the one algorithm that applies it (SPEC Part C, budget
rules 1-10), so every policy gets the same reservations, victim walk, re-examination
and deadlines, and a new policy is a new class with four members:

- ``policy_id``: the ``NPU_MODEL_POLICY_*`` number ``setPolicy`` selects it by.
- ``from_params(params)``: build it from a ``PersistableBundle``-like dict, or raise
  IllegalArgumentException (the arbiter then keeps the old policy).
- ``max_budget``: the budget, or None for "unbounded" (nothing is ever refused for size).
- ``weight(size)``: what a request of that size class costs.
- ``takes_turns``: whether completing work while an equal uid waits costs a uid its
  models (rule 7).
- ``params()``: the parameters, for ``dumpsys`` and ``cmd npu info``.

Bundle keys are AOSP's: ``maxBudget`` (int) and ``modelSizeWeights`` (three ints, for
LESS_THAN_1GB, BETWEEN_1GB_AND_2GB, GREATER_THAN_2G). A missing key takes its default;
an unknown key is refused rather than ignored, because a misspelt ``maxbudget``
silently meaning 4 is the bug a policy engineer would least like to chase.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from framework.binder import IllegalArgumentException
from framework.npumanager import (
    DEFAULT_MAX_BUDGET,
    DEFAULT_MODEL_SIZE_WEIGHTS,
    KEY_MAX_BUDGET,
    KEY_MODEL_SIZE_WEIGHTS,
    NPU_MODEL_POLICY_BUDGET,
    NPU_MODEL_POLICY_STATUS_QUO,
    NPU_MODEL_POLICY_TURN_TAKING,
    NPU_MODEL_SIZES,
)



def _bundle(params: Mapping[str, Any] | None, policy: str) -> Mapping[str, Any]:
    if params is None:  # Java callers pass a null bundle for "no parameters"
        return {}
    if not isinstance(params, Mapping):
        raise IllegalArgumentException(f"{policy} policy parameters must be a bundle (a dict), not {params!r}")
    for key in params:
        if not isinstance(key, str):
            raise IllegalArgumentException(f"{policy} policy parameter names must be strings, not {key!r}")
    return params


def _positive_int(value: Any, what: str) -> int:
    if type(value) is not int or value <= 0:
        raise IllegalArgumentException(f"{what} must be a positive int, not {value!r}")
    return value


class NpuPolicy:
    """The interface every policy implements (see the module docstring)."""

    policy_id: ClassVar[int]
    name: ClassVar[str]
    takes_turns: ClassVar[bool]

    @property
    def max_budget(self) -> int | None:
        raise NotImplementedError

    def weight(self, size: int) -> int:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> NpuPolicy:
        raise NotImplementedError


class _Parameterless:
    """What a policy that takes no parameters shares: it reports none and refuses any."""

    __slots__ = ()
    name: ClassVar[str]

    def params(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> Any:
        what = cls.name.replace("-", " ")
        if _bundle(params, what):
            raise IllegalArgumentException(f"the {what} policy takes no parameters, got {sorted(params)}")
        return cls()


@dataclass(frozen=True, slots=True)
class StatusQuoPolicy(_Parameterless, NpuPolicy):
    """AOSP's default: every request is CAN_LOAD_NOW at once; nothing is weighed.

    Weights are still reported (the budget's defaults) so ``dumpsys`` can show what
    the loaded models would cost under a budget, which is what someone about to switch
    policies wants to know.
    """

    policy_id: ClassVar[int] = NPU_MODEL_POLICY_STATUS_QUO
    name: ClassVar[str] = "status-quo"
    takes_turns: ClassVar[bool] = False

    @property
    def max_budget(self) -> None:
        return None

    def weight(self, size: int) -> int:
        return DEFAULT_MODEL_SIZE_WEIGHTS[size]


@dataclass(frozen=True, slots=True)
class BudgetPolicy(NpuPolicy):
    """At most ``maxBudget`` of weight approved or loaded at once (rules 1-7)."""

    policy_id: ClassVar[int] = NPU_MODEL_POLICY_BUDGET
    name: ClassVar[str] = "budget"
    takes_turns: ClassVar[bool] = True

    budget: int = DEFAULT_MAX_BUDGET
    weights: tuple[int, int, int] = DEFAULT_MODEL_SIZE_WEIGHTS

    def __post_init__(self) -> None:
        _positive_int(self.budget, KEY_MAX_BUDGET)
        if len(self.weights) != len(NPU_MODEL_SIZES):
            raise IllegalArgumentException(f"{KEY_MODEL_SIZE_WEIGHTS} needs {len(NPU_MODEL_SIZES)} weights")
        for w in self.weights:
            _positive_int(w, f"each of {KEY_MODEL_SIZE_WEIGHTS}")

    @property
    def max_budget(self) -> int:
        return self.budget

    def weight(self, size: int) -> int:
        return self.weights[size]

    def params(self) -> dict[str, Any]:
        return {KEY_MAX_BUDGET: self.budget, KEY_MODEL_SIZE_WEIGHTS: list(self.weights)}

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> BudgetPolicy:
        bundle = _bundle(params, "budget")
        unknown = sorted(set(bundle) - {KEY_MAX_BUDGET, KEY_MODEL_SIZE_WEIGHTS})
        if unknown:
            raise IllegalArgumentException(
                f"unknown budget policy parameter(s) {unknown}; known: {KEY_MAX_BUDGET}, {KEY_MODEL_SIZE_WEIGHTS}"
            )
        budget = _positive_int(bundle.get(KEY_MAX_BUDGET, DEFAULT_MAX_BUDGET), KEY_MAX_BUDGET)
        raw = bundle.get(KEY_MODEL_SIZE_WEIGHTS, DEFAULT_MODEL_SIZE_WEIGHTS)
        if isinstance(raw, (str, bytes)) or not isinstance(raw, (list, tuple)) or len(raw) != len(NPU_MODEL_SIZES):
            raise IllegalArgumentException(
                f"{KEY_MODEL_SIZE_WEIGHTS} must be {len(NPU_MODEL_SIZES)} ints "
                f"(<1GB, 1-2GB, >2GB), not {raw!r}"
            )
        weights = tuple(_positive_int(w, f"each of {KEY_MODEL_SIZE_WEIGHTS}") for w in raw)
        return cls(budget, weights)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class TurnTakingPolicy(_Parameterless, BudgetPolicy):
    """The budget policy with every weight 1 and a maximum of 1: one model at a time.

    Apps of equal importance alternate: the one that completed work most recently
    yields (rule 7). It takes no parameters; a non-empty bundle is refused.
    """

    policy_id: ClassVar[int] = NPU_MODEL_POLICY_TURN_TAKING
    name: ClassVar[str] = "turn-taking"
    takes_turns: ClassVar[bool] = True

    budget: int = 1
    weights: tuple[int, int, int] = (1, 1, 1)


DEFAULT_POLICIES: Mapping[int, type[NpuPolicy]] = MappingProxyType(
    {cls.policy_id: cls for cls in (StatusQuoPolicy, TurnTakingPolicy, BudgetPolicy)}
)
"""The policies ``setPolicy`` knows by default, by id (read-only; pass your own to the arbiter)."""
