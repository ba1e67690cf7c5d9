"""``npuemu.hal.IHalControl/default``: what the emulator needs of the HAL beyond the seeds.

See ``aidl/npuemu/hal/IHalControl.aidl`` for each method's contract and who may call
it.  In short: system (1000) and root (0) may do everything; the shell (2000, the
person at the terminal, as ``adb shell``) may dump, inject faults, set the thermal
state and run the test inference as any uid; apps may only read the thermal status
and run the test inference as themselves.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from framework.binder import (
    AID_ROOT,
    AID_SHELL,
    AID_SYSTEM,
    Binder,
    IllegalArgumentException,
    SecurityException,
)
from interfaces.npuemu.hal import IHalControl as _IHalControl
from interfaces.npuemu.hal import ThermalStatus as _ThermalStatus
from interfaces.npuemu.hal import WorkEvent as _WorkEvent

from ._errors import NpuError, NpuInvalidPriorityError, NpuLookupError, NpuPermissionError, NpuStateError, NpuValueError
from ._hal import Hal, require_shell_or_system, require_system
from ._model import ModelBuilder
from ._types import DeviceType, EndReason, FuseCode, OperationType, ThermalSeverity

__all__ = ["HalControl", "test_inference_model", "TEST_INFERENCE_COST_SCALE"]

log = logging.getLogger("android.hardware.npu")

#: Makes the test inference's one FULLY_CONNECTED (8448 bytes moved, memory-bound) cost
#: about 300 emulated ms on the reference driver's emu-npu (34.1 GB/s; 410 on emu-gpu,
#: 1 s on emu-dsp): long enough that a second job submitted tens of ms later finds the
#: channel busy.
TEST_INFERENCE_COST_SCALE = 1_210_000.0


def test_inference_model() -> Any:
    """The fixed model of ``runTestInference``: y = relu(x W^T + b), 64 -> 32, fixed weights."""
    rng = np.random.default_rng(20260101)
    m = ModelBuilder()
    x = m.input((1, 64))
    w = m.constant(rng.standard_normal((32, 64), dtype=np.float32))
    b = m.constant(rng.standard_normal(32, dtype=np.float32))
    y = m.operation(OperationType.FULLY_CONNECTED, [x, w, b, m.int32(FuseCode.RELU)], (1, 32))
    m.output(y)
    return m.build()


test_inference_model.__test__ = False  # not a pytest test, whatever its name


class HalControl(_IHalControl.Stub):
    """The private control service of one :class:`Hal`."""

    def __init__(self, hal: Hal) -> None:
        super().__init__()
        self._hal = hal
        self._test_models: dict[int, Any] = {}

    def _device_number(self, name: str) -> int:
        for number, known in self._hal.device_names.items():
            if known == name:
                return number
        raise IllegalArgumentException(f"no IDevice {name!r}; the HAL serves {sorted(self._hal.device_names.values())}")

    def _recorded(self, r: Any) -> Any:
        return _WorkEvent(
            kind=r.kind,
            reason=r.reason,
            info=r.info,
            workId=r.work_id,
            timeNs=r.time_ns,
            channel=r.channel,
            hwDevice=r.hw_device,
            deviceName=self._hal.device_names.get(r.info.deviceNumber, str(r.info.deviceNumber)),
        )

    async def revokeUidModels(self, uid: int) -> int:  # noqa: N802
        require_system("revokeUidModels")
        count = self._hal.revoke_uid(uid)
        log.info("revoked %d prepared model(s) of uid %d (asked by uid %d)", count, uid, Binder.getCallingUid())
        return count

    async def revokeRequestModels(self, uid: int, requestId: int, keepRequestIds: list[int]) -> int:  # noqa: N802,N803
        require_system("revokeRequestModels")
        keep = list(keepRequestIds or ())
        if requestId in keep:
            raise IllegalArgumentException(f"request {requestId} is both revoked and kept")
        count = self._hal.revoke_request(uid, requestId, keep)
        log.info(
            "revoked %d prepared model(s) of uid %d request %d%s (asked by uid %d)", count, uid, requestId,
            f", keeping requests {sorted(keep)}" if keep else "", Binder.getCallingUid(),
        )
        return count

    async def injectFault(self, device: str, kind: int, arg: float) -> None:  # noqa: N802
        require_shell_or_system("injectFault")
        number = self._device_number(device)
        driver = self._hal.driver
        log.warning("fault %d injected on %s (arg %r) by uid %d", kind, device, arg, Binder.getCallingUid())
        try:
            if kind == _IHalControl.FAULT_FAIL_NEXT_WORK:
                driver.fail_next_work(number)
            elif kind == _IHalControl.FAULT_HANG_CHANNEL:
                if arg != int(arg):
                    raise IllegalArgumentException(f"a channel is a whole number, not {arg}")
                driver.hang_channel(number, int(arg))
            elif kind == _IHalControl.FAULT_HEAT_SPIKE:
                driver.heat_spike(arg, number)
            elif kind == _IHalControl.FAULT_CRASH:
                logging.shutdown()  # the log up to here is what a postmortem reads
                driver.crash()
            else:
                raise IllegalArgumentException(f"unknown fault kind {kind} (FAULT_FAIL_NEXT_WORK..FAULT_CRASH)")
        except NpuValueError as exc:
            raise IllegalArgumentException(str(exc)) from None
        self._hal.poll()

    async def resetChannel(self, device: str, channel: int) -> None:  # noqa: N802
        require_shell_or_system("resetChannel")
        number = self._device_number(device)
        try:
            self._hal.driver.reset_channel(number, channel)
        except (NpuValueError, NpuStateError) as exc:
            raise IllegalArgumentException(str(exc)) from None

    def _thermal(self) -> Any:
        # Under a virtual clock, emulated time has stood still since the last work:
        # bring it to now first, so the die has cooled (or not) as it would have.
        self._hal.sync_clock()
        self._hal.poll()
        driver = self._hal.driver
        severity, temp = driver.thermal_state()
        return _ThermalStatus(severity=int(severity), temperatureC=float(temp), thresholdsC=list(self._hal.thresholds),
                              overridden=driver.thermal_held)

    def _band_middle(self, severity: int) -> tuple[ThermalSeverity, float]:
        """``severity``'s band and the temperature in its middle (from the driver's thresholds)."""
        try:
            sev = ThermalSeverity(severity)
        except ValueError:
            raise IllegalArgumentException(f"severity {severity} is not NONE (0) .. SHUTDOWN (6)") from None
        t = self._hal.thresholds
        if sev is ThermalSeverity.NONE:
            return sev, t[0] - 5.0
        if sev is ThermalSeverity.SHUTDOWN:
            return sev, t[5] + 5.0
        return sev, (t[sev - 1] + t[sev]) / 2

    async def thermalStatus(self) -> Any:  # noqa: N802
        return self._thermal()

    async def setThermalSeverity(self, severity: int) -> Any:  # noqa: N802
        require_shell_or_system("setThermalSeverity")
        sev, target = self._band_middle(severity)
        now = self._thermal().temperatureC
        self._hal.driver.heat_spike(target - now)
        self._hal.poll()
        log.info("thermal set to %s (%.1f C) by uid %d", sev.name, target, Binder.getCallingUid())
        return self._thermal()

    async def overrideThermalSeverity(self, severity: int) -> Any:  # noqa: N802
        require_shell_or_system("overrideThermalSeverity")
        sev, target = self._band_middle(severity)
        self._thermal()  # time up to now passes under the old rule
        self._hal.driver.hold_temperature(target)
        self._hal.poll()
        log.info("thermal override: the die is held at %s (%.1f C) by uid %d until reset",
                 sev.name, target, Binder.getCallingUid())
        return self._thermal()

    async def resetThermalOverride(self) -> Any:  # noqa: N802
        require_shell_or_system("resetThermalOverride")
        was = self._thermal()
        self._hal.driver.hold_temperature(None)
        if was.overridden:
            log.info("thermal override released by uid %d at %s (%.1f C): the die heats and cools again",
                     Binder.getCallingUid(), ThermalSeverity(was.severity).name, was.temperatureC)
        return self._thermal()

    async def dump(self) -> str:
        require_shell_or_system("dump")
        return self._hal.dump()

    async def registerListener(self, listener: Any) -> None:  # noqa: N802
        require_system("registerListener")
        if listener is None:
            raise IllegalArgumentException("null listener")
        if listener not in self._hal.listeners:
            self._hal.listeners.append(listener)

    async def unregisterListener(self, listener: Any) -> None:  # noqa: N802
        require_system("unregisterListener")
        if listener not in self._hal.listeners:
            raise IllegalArgumentException("listener not registered")
        self._hal.listeners.remove(listener)

    async def recentWorkEvents(self, max: int, sinceId: int) -> list:  # noqa: N802,N803,A002
        require_shell_or_system("recentWorkEvents")
        if max < 0:
            raise IllegalArgumentException(f"max {max} is negative")
        events = [r for r in self._hal.recent if r.info.id > sinceId] if sinceId >= 0 else list(self._hal.recent)
        return [self._recorded(r) for r in events[len(events) - max :]] if max else []

    async def runTestInference(self, jobPriority: int, originalUid: int, deviceName: str, asUid: int) -> list:  # noqa: N802,N803
        caller, pid = Binder.getCallingUid(), Binder.getCallingPid()
        uid = caller
        if asUid >= 0 and asUid != caller:
            if caller not in (AID_ROOT, AID_SYSTEM, AID_SHELL):
                raise SecurityException(f"uid {caller} may run the test inference only as itself, not as uid {asUid}")
            uid = asUid
        number = self._pick_device(deviceName)
        driver = self._hal.driver
        handle = self._test_models.get(number)
        if handle is None or not handle.loaded:
            try:
                handle = driver.load_model(number, test_inference_model(), cost_scale=TEST_INFERENCE_COST_SCALE)
            except NpuError as exc:
                raise IllegalArgumentException(f"cannot load the test model on {deviceName or number}: {exc}") from None
            self._test_models[number] = handle
            self._hal.poll()
        x = np.linspace(-1.0, 1.0, 64, dtype=np.float32).reshape(1, 64)
        self._hal.sync_clock()
        try:
            work_id = driver.submit(
                handle,
                [x],
                uid=uid,
                original_uid=uid if originalUid < 0 else originalUid,
                debug_pid=pid,
                job_priority=jobPriority,
                feature_id="run-test-inference",
            )
        except NpuPermissionError as exc:
            raise SecurityException(str(exc)) from None
        except (NpuInvalidPriorityError, NpuValueError, NpuLookupError) as exc:
            raise IllegalArgumentException(str(exc)) from None
        except NpuStateError as exc:
            raise IllegalArgumentException(f"{self._hal.device_names[number]}: {exc}") from None
        self._hal.work_submitted(work_id)
        ended = await driver.wait_work(work_id)
        await self._hal.wait_recorded(work_id)
        driver.forget(work_id)
        log.info(
            "test inference as uid %d (job priority %d) on %s ended %s",
            uid,
            jobPriority,
            self._hal.device_names[number],
            EndReason(ended.reason).name,
        )
        return [self._recorded(r) for r in self._hal.recent if r.work_id == work_id]

    async def getDeviceParts(self, device: str) -> list[str]:  # noqa: N802
        number = self._device_number(device)
        parts = self._hal.driver.device(number).parts
        return [self._hal.device_names.get(p, f"#{p}") for p in parts]

    def _pick_device(self, name: str) -> int:
        if name:
            return self._device_number(name)
        for number in sorted(self._hal.device_names):
            if self._hal.driver.device(number).type == DeviceType.ACCELERATOR:
                return number
        if self._hal.device_names:
            return min(self._hal.device_names)
        raise IllegalArgumentException("the HAL serves no device")
