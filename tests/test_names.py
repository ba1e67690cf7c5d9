"""Logs, dumps and reports say Android's names, not the numbers on the wire.

The names come from where the numbers are defined (``framework.npumanager``'s
constants through ``constantToString``, the HAL's AIDL enums ``StartReason`` and
``EndReason``, the thermal HAL's severities), never from a second table. Pinned here:
the npu service's log lines and ``dumpsys npu`` over the binder in one trio run, a
sample app's log, and the demo's report.
"""

from __future__ import annotations

import json
import logging

import pytest

from apps._kit import LoadSlot, Report
from framework.emulator import enum_name
from framework.emulator._demo import _checks
from framework.npumanager import NpuManager, SynchronousExecutor, constantToString
from interfaces.android.hardware.npu import EndReason, StartReason
from interfaces.android.hardware.thermal import ThrottlingSeverity
from test_server_support import Recorder, ask, npu_of, request, world  # noqa: F401

BIG = NpuManager.NPU_MODEL_SIZE_GREATER_THAN_2G


def test_constant_to_string_names_each_group_and_keeps_unknown_numbers():
    assert constantToString("NPU_MODEL_LOAD_STATUS_", NpuManager.NPU_MODEL_LOAD_STATUS_WAIT_FOR_UNLOAD) == "WAIT_FOR_UNLOAD"
    assert constantToString("NPU_MODEL_LOAD_REQUEST_STATUS_", 3) == "CANCELLED"
    assert constantToString("NPU_MODEL_UNLOAD_REASON_", 3) == "THERMAL"
    assert constantToString("NPU_MODEL_PRIORITY_", 2000) == "OPPORTUNISTIC"
    assert constantToString("NPU_MODEL_SIZE_", 1) == "BETWEEN_1GB_AND_2GB"
    assert constantToString("NPU_MODEL_POLICY_", 2) == "BUDGET"
    # Prefixes do not bleed into each other (LOAD_STATUS_ 3 is not LOAD_REQUEST_STATUS_ 3).
    assert constantToString("NPU_MODEL_LOAD_STATUS_", 3) == "3"
    assert constantToString("NPU_MODEL_LOAD_STATUS_", True) == "True"
    assert constantToString("NPU_MODEL_UNLOAD_REASON_", 9) == "9"


async def test_the_npu_service_logs_and_dumps_names(autojump_clock, world, caplog):  # noqa: F811
    caplog.set_level(logging.INFO, logger="NpuManagerService")
    await world.start_hal()
    system = await world.start_system()
    bg = await world.launch("com.test.bg")
    fg = await world.launch("com.test.fg")
    await npu_of(fg).setPolicy(NpuManager.NPU_MODEL_POLICY_BUDGET, {"maxBudget": 4})
    await ask(world, bg, request(1, BIG, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND), Recorder(auto_unload=False))
    await ask(world, fg, request(7, BIG), Recorder())
    await world.hal.work(fg.context.getUid(), reason=2)  # requested, started INITIAL, ended PAUSED
    await world.hal.set_severity(4)
    await world.settle()
    lines = [r.getMessage() for r in caplog.records if r.name == "NpuManagerService"]
    text = "\n".join(lines)
    assert "setPolicy(BUDGET [2]) by uid" in text
    assert "request 1: onCanLoadModel(CAN_LOAD_NOW [0])" in text
    assert "request 7: onCanLoadModel(WAIT_FOR_UNLOAD [1])" in text
    assert any(line.endswith("request 1: onRequestUnloadModel(RESOURCE_PRESSURE [1], deadline in 2 s)") for line in lines)
    assert "onRequestUnloadModel(reason" not in text and "onCanLoadModel(0)" not in text

    dump = system.npu.dump_text()
    assert "BACKGROUND" in dump and " 1000 " not in dump.split("Requests:")[1].split("Loaded models")[0]
    events = dump.split("Recent work events:")[1]
    assert "started   uid" in events and "INITIAL [0]" in events and "PAUSED [2]" in events
    assert " reason " not in events
    data = json.loads(system.npu.dump_text(["--json"]))
    ended = [e for e in data["recent_work_events"] if e["kind"] == "ended"]
    assert [(e["reason"], e["reasonName"]) for e in ended] == [(2, "PAUSED")]


async def test_a_sample_apps_log_names_what_it_was_told(caplog, monkeypatch):
    monkeypatch.delenv("NPUEMU_RUNTIME_DIR", raising=False)
    caplog.set_level(logging.INFO, logger="npuemu.app.photos")

    class Context:
        def getPackageName(self):
            return "com.example.test"

        def getUid(self):
            return 10042

    class Npu:
        async def requestCanLoadModel(self, request, callback, executor):  # noqa: N802
            pass

    report = Report("photos", Context())
    slot = LoadSlot(Npu(), SynchronousExecutor(), report, BIG, NpuManager.NPU_MODEL_PRIORITY_BACKGROUND)
    await slot.file()
    await slot.onCanLoadModel(slot.request, NpuManager.NPU_MODEL_LOAD_STATUS_NOT_PRIORITIZED, None)
    await slot.onRequestUnloadModel(slot.request, NpuManager.NPU_MODEL_UNLOAD_REASON_THERMAL)
    await slot.onModelLoadRequestComplete(slot.request, NpuManager.NPU_MODEL_LOAD_REQUEST_STATUS_CANCELLED)
    assert [r.getMessage() for r in caplog.records] == [
        "request: request 1 size GREATER_THAN_2G priority BACKGROUND",
        "can_load: request 1: NOT_PRIORITIZED",
        "unload_requested: request 1, reason THERMAL",
        "complete: request 1: CANCELLED",
    ]


def test_the_demo_report_names_statuses_reasons_and_severity():
    reports = {
        "photos": {"unload_reasons": [1, 3], "unload_requests": 2, "unloads": 2, "loads": 3},
        "assistant": {"statuses": [1, 0], "loads": 1, "unloads": 1},
    }
    summary = {"errors": [], "revocations": 1, "blocked_or_warned": 1, "preemptions": 1, "resumes": 1, "jobs": 9,
               "thermal_max_severity": 4, "thermal_max_severity_name": "CRITICAL", "temperature_max_c": 80.0}
    details = {c.name: c.detail for c in _checks(reports, summary)}
    assert "(reasons [RESOURCE_PRESSURE, THERMAL])" in details[
        "photos: asked to unload (budget, then heat), complied every time, came back"]
    assert details["assistant: waited for the unloads, then loaded and released"].startswith(
        "statuses [WAIT_FOR_UNLOAD, CAN_LOAD_NOW]")
    assert details["thermal: the spike reached CRITICAL"] == "max severity CRITICAL, max 80.0 C"


@pytest.mark.parametrize("enum, value, name", [
    (ThrottlingSeverity, 0, "NONE"), (ThrottlingSeverity, 4, "CRITICAL"), (ThrottlingSeverity, 6, "SHUTDOWN"),
    (ThrottlingSeverity, 9, "9"), (StartReason, 1, "RESUMED"), (EndReason, 2, "PAUSED"), (EndReason, -1, "-1"),
])
def test_records_name_values_by_the_compiled_enums_and_keep_unknown_numbers(enum, value, name):
    assert enum_name(enum, value) == name
