"""The npu service's invariants under random operation (issue 8), as a hypothesis state machine.

The machine (``framework.lab.NpuArbiterMachine``, which ``npuemu lab check-policy`` runs
against a policy of one's own; its docstring lists the invariants) drives an
``NpuArbiter`` under the built-in policies, switched by setPolicy, with every input the
service gets, and checks after every step what the apps were told against the
arbiter's state. Run longer with ``NPUEMU_HYPOTHESIS_PROFILE=soak``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from framework.lab import NpuArbiterMachine

PROFILE = os.environ.get("NPUEMU_HYPOTHESIS_PROFILE", "default")
SETTINGS = {
    "default": settings(max_examples=250, stateful_step_count=40, deadline=None),
    "soak": settings(
        max_examples=2000, stateful_step_count=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
    ),
}[PROFILE]


class BuiltinPolicies(NpuArbiterMachine):
    pass


BuiltinPolicies.TestCase.settings = SETTINGS
TestNpuArbiterInvariants = BuiltinPolicies.TestCase
