"""A whole stack in one trio run, for the system_server tests (and a check of the fakes).

servicemanager, a fake HAL (IScheduling + IHalControl, served from the HAL's own .aidl
files, recording what it is told and able to send work events and thermal changes),
system_server and app "processes" (``InProcessLauncher``), each its own runtime with its
own fake pid on one MemoryNetwork, under the autojump MockClock. Other test files import
``World``, ``Recorder`` and ``world`` from here.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from framework.app import Context, InProcessLauncher
from framework.binder import (
    Binder,
    IllegalArgumentException,
    MemoryNetwork,
    SecurityException,
    defaultServiceManager,
    open_binder_runtime,
    serve_servicemanager,
)
from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager
from framework.server import serve_system_server
from interfaces.android.hardware.npu import IScheduling, WorkInfo
from interfaces.npuemu.hal import IHalControl, IHalListener, ThermalStatus

NPU_PERM = '<uses-permission android:name="android.permission.ACCESS_NPU_MODEL_MANAGER_API" />'
NPU_FEATURE = '<uses-feature android:name="android.hardware.npu" android:required="false" />'


def manifest(package: str, *, perm: bool = True, feature: bool = True, extra: str = "", importance: str = "foreground") -> str:
    return textwrap.dedent(f"""\
        <?xml version="1.0" encoding="utf-8"?>
        <manifest xmlns:android="http://schemas.android.com/apk/res/android" package="{package}">
            <uses-sdk android:minSdkVersion="29" android:targetSdkVersion="37" />
            {NPU_FEATURE if feature else ""}
            {NPU_PERM if perm else ""}
            {extra}
            <application android:label="{package}">
                <meta-data android:name="npuemu.launch.importance" android:value="{importance}" />
            </application>
        </manifest>
        """)


TEST_APPS = {
    "com.test.fg": dict(),
    "com.test.bg": dict(importance="cached"),
    "com.test.a": dict(importance="service"),
    "com.test.b": dict(importance="service"),
    "com.test.noperm": dict(perm=False),
    "com.test.legacy": dict(feature=False),
    "com.test.attr": dict(extra='<uses-permission android:name="android.permission.ATTRIBUTE_WORK_TO_OTHER_APPS" />'),
}


def write_apps(root: Path, apps: dict[str, dict] = TEST_APPS) -> Path:
    for package, kw in apps.items():
        d = root / package.rsplit(".", 1)[-1]
        d.mkdir(parents=True, exist_ok=True)
        (d / "AndroidManifest.xml").write_text(manifest(package, **kw))
    return root


class FakeHal:
    """IScheduling/default and IHalControl/default in a 'HAL process' of their own."""

    def __init__(self, *, refuse: bool = False) -> None:
        self.refuse = refuse  # refuse system_server's setCallback (a misconfigured HAL)
        self.refusals: list[float] = []
        self.configs: dict[int, Any] = {}
        self.set_calls: list[list[Any]] = []
        self.update_calls: list[list[Any]] = []
        self.callback: Any = None
        self.revoked: list[int] = []  # revokeUidModels: an app died
        self.revoked_requests: list[tuple[int, int, list[int]]] = []  # revokeRequestModels: a deadline passed
        self.listeners: list[Any] = []
        self.severity = 0
        self.overridden = False  # what thermalStatus says of an override
        self.next_id = 1
        self.runtime: Any = None
        hal = self

        class Scheduling(IScheduling.Stub):
            async def setSchedulingConfigs(self, configs):  # noqa: N802
                uids = [c.uid for c in configs]
                if len(set(uids)) != len(uids):
                    raise IllegalArgumentException("duplicated uid")
                hal._check_caller()
                hal.set_calls.append(list(configs))
                hal.configs = {c.uid: c for c in configs}

            async def updateSchedulingConfigs(self, configs):  # noqa: N802
                hal._check_caller()
                hal.update_calls.append(list(configs))
                hal.configs.update((c.uid, c) for c in configs)

            async def setCallback(self, callback):  # noqa: N802
                hal._check_caller()
                if hal.refuse:
                    hal.refusals.append(trio.current_time())
                    raise SecurityException("this HAL trusts nobody")
                hal.callback = callback

        class Control(IHalControl.Stub):
            async def revokeUidModels(self, uid):  # noqa: N802
                hal._check_caller()
                hal.revoked.append(uid)
                return 1

            async def revokeRequestModels(self, uid, requestId, keepRequestIds):  # noqa: N802,N803
                hal._check_caller()
                hal.revoked_requests.append((uid, requestId, list(keepRequestIds)))
                return 1

            async def registerListener(self, listener):  # noqa: N802
                hal.listeners.append(IHalListener.asInterface(listener))

            async def thermalStatus(self):  # noqa: N802
                return ThermalStatus(severity=hal.severity, temperatureC=40.0 + 10 * hal.severity, thresholdsC=[60.0, 70, 80, 90, 100, 110], overridden=hal.overridden)

        self.scheduling = Scheduling()
        self.control = Control()

    def _check_caller(self) -> None:
        if Binder.getCallingUid() not in (0, 1000):
            raise SecurityException("system only")

    async def work(self, uid: int, *, reason: int = 4, original_uid: int = -1) -> None:
        """One requested/started/ended sequence for ``uid`` (reason 4: COMPLETED)."""
        assert self.callback is not None, "system_server has not set its callback"

        def info() -> Any:
            self.next_id += 1
            return WorkInfo(id=self.next_id, groupId=None, uid=uid, debugPid=0, originalUid=original_uid,
                            debugFeatureId=None, jobPriority=500, effectivePriority=600,
                            timestampMs=int(trio.current_time() * 1000), deviceNumber=0)

        await self.callback.onWorkRequested(info())
        await self.callback.onWorkStarted(info(), 0)
        await self.callback.onWorkEnded(info(), reason)

    async def set_severity(self, severity: int) -> None:
        self.severity = severity
        for listener in self.listeners:
            await listener.onThermalSeverityChanged(severity, 40.0 + 10 * severity)


class Recorder(ModelLoadRequestCallback):
    """A callback that records every call, and loads/unloads as told."""

    def __init__(self, *, auto_load: bool = True, auto_unload: bool = True) -> None:
        self.events: list[tuple] = []
        self.auto_load = auto_load
        self.auto_unload = auto_unload
        self.listener: Any = None
        self.changed = trio.Event()

    def _note(self, *event: Any) -> None:
        self.events.append(event)
        self.changed.set()
        self.changed = trio.Event()

    async def onCanLoadModel(self, request, status, listener):  # noqa: N802
        self.listener = listener
        self._note("can_load", request.id, status)
        if status == NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW and self.auto_load:
            await listener.notifyModelLoaded(request)
            self._note("loaded", request.id)

    async def onRequestUnloadModel(self, request, reason):  # noqa: N802
        self._note("unload", request.id, reason)
        if self.auto_unload:
            await self.listener.notifyModelUnloaded(request)
            self._note("unloaded", request.id)

    def onModelLoadRequestComplete(self, request, status):  # noqa: N802
        self._note("complete", request.id, status)

    def statuses(self, request_id: int) -> list[tuple]:
        return [e for e in self.events if e[1] == request_id]


def request(request_id: int, size: int = 0, priority: int = 0) -> ModelLoadRequest:
    return ModelLoadRequest.Builder(request_id).setSize(size).setPriority(priority).build()


async def idle(context: Context) -> None:
    await trio.sleep_forever()


class World:
    def __init__(self, net, nursery, init, apps_dir) -> None:
        self.net = net
        self.nursery = nursery
        self.init = init
        self.apps_dir = apps_dir
        self.hal = FakeHal()
        self.hal_scope: trio.CancelScope | None = None
        self.system: Any = None
        self.system_scope: trio.CancelScope | None = None
        self.launcher = InProcessLauncher(net, {}, nursery)

    async def spawn(self, uid: int) -> int:
        pid = self.net.spawn(self.net.init_pid)
        await defaultServiceManager(self.init).registerProcess(pid, uid)
        return pid

    async def start_hal(self, hal: FakeHal | None = None) -> FakeHal:
        if hal is not None:
            self.hal = hal
        pid = await self.spawn(1000)
        hal = self.hal

        async def run(task_status):
            with trio.CancelScope() as scope:
                async with open_binder_runtime(network=self.net, pid=pid) as rt:
                    hal.runtime = rt
                    sm = defaultServiceManager(rt)
                    await sm.addService("npuemu.hal.IHalControl/default", hal.control, False, 8)
                    await sm.addService("android.hardware.npu.IScheduling/default", hal.scheduling, False, 8)
                    task_status.started(scope)
                    await trio.sleep_forever()

        self.hal_scope = await self.nursery.start(run)
        return hal

    def kill_hal(self) -> None:
        assert self.hal_scope is not None
        self.hal_scope.cancel()

    async def start_system(self, **kw: Any) -> Any:
        pid = await self.spawn(1000)

        async def run(task_status):
            with trio.CancelScope() as scope:
                async with open_binder_runtime(network=self.net, pid=pid) as rt:
                    system = await self.nursery.start(functools.partial(
                        serve_system_server, rt, apps_dir=self.apps_dir, launcher=self.launcher, **kw))
                    task_status.started((scope, system))
                    await trio.sleep_forever()

        self.system_scope, self.system = await self.nursery.start(run)
        return self.system

    async def launch(self, package: str, main=idle, importance: str | None = None):
        self.launcher.apps[package] = main
        await self.system.activity.start_app(package, importance)
        app = self.launcher.launched[package]
        with trio.fail_after(5):
            await app.started.wait()
        return app

    async def shell(self):
        """A shell runtime (uid 2000), as `npuemu` commands use."""
        return open_binder_runtime(network=self.net, pid=self.net.spawn(), shell=True)

    async def settle(self, seconds: float = 0.05) -> None:
        await trio.sleep(seconds)


async def booted(world, **kw):
    """The fake HAL and system_server (``kw`` for it), once the npu service has connected to the HAL."""
    await world.start_hal()
    system = await world.start_system(**kw)
    with trio.fail_after(5):
        await system.npu.wait_hal_connected()
    return system


def npu_of(app) -> NpuManager:
    return app.context.getSystemService(Context.NPU_SERVICE)


async def ask(world, app, req: ModelLoadRequest, recorder) -> None:
    """``app`` asks for ``req`` with its main executor, and the world settles."""
    await npu_of(app).requestCanLoadModel(req, recorder, app.context.getMainExecutor())
    await world.settle()


@pytest.fixture
async def world(autojump_clock, tmp_path):
    # Tests must also name autojump_clock themselves: pytest-trio takes the clock only
    # from a test's own arguments, not from a fixture's.
    net = MemoryNetwork()
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(serve_servicemanager, network=net))
        async with open_binder_runtime(network=net, pid=net.init_pid) as init:
            yield World(net, nursery, init, write_apps(tmp_path / "apps"))
        nursery.cancel_scope.cancel()


async def test_the_fake_hal_refuses_apps(autojump_clock, world):
    """The fake keeps the real HAL's rule that only system and root configure scheduling."""
    await world.start_hal()
    pid = await world.spawn(10050)
    async with open_binder_runtime(network=world.net, pid=pid) as rt:
        sched = IScheduling.asInterface(await defaultServiceManager(rt).checkService("android.hardware.npu.IScheduling/default"))
        with pytest.raises(SecurityException):
            await sched.setCallback(None)
