"""No process may act as another: the whole stack as real processes, attacked from inside.

Two apps are installed: a *victim* that loads a model on the NPU through the public
APIs and holds it, and a *thief* that then tries, with the raw binder interfaces an
app can always reach (the AIDL is public), everything an app must not be able to do:
drive the scheduling HAL, touch the victim's request (whose id it knows), unload or
revoke the victim's model, attribute its own work to the victim's uid, pose as
system to the servicemanager, steer the activity manager. Each attempt's exception
is recorded by the thief and checked here, and the victim's state is checked
afterwards from outside (dumpsys and the HAL's own dump), because a refusal that
still changed something would be no refusal.

Also here: a process the emulator did not launch is refused by every runtime (and
gets the shell's rights, no more, with the shell token); manifests with entity
expansion or external entities are refused at install; the runtime directory is
0700 and every socket and secret in it 0600.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from interfaces.npuemu.server import IActivityManager, IPackageManager
from interfaces.npuemu.hal import IHalControl
from test_reliability_support import (
    HAL_CONTROL,
    booted,
    get,
    hal_dump,
    hal_prepared_models,
    npu_dump,
    wait_until,
    write_app,
)

pytestmark = [pytest.mark.multiprocess]

MANIFESTS = Path(__file__).with_name("manifests")

VICTIM = textwrap.dedent("""\
    import json, os
    import trio
    from apps._kit import mlp
    from framework.app import Context
    from framework.nn import open_nn_runtime
    from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager

    class Callback(ModelLoadRequestCallback):
        def __init__(self):
            self.approved = trio.Event()
            self.events = []
        def onCanLoadModel(self, request, status, listener):
            self.events.append(["can_load", status])
            if status == NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
                self.listener = listener
                self.approved.set()
        def onRequestUnloadModel(self, request, reason):
            self.events.append(["unload", reason])
        def onModelLoadRequestComplete(self, request, status):
            self.events.append(["complete", status])

    async def main(context):
        out = os.path.join(os.environ["NPUEMU_RUNTIME_DIR"], "victim.json")
        npu = context.getSystemService(Context.NPU_SERVICE)
        request = ModelLoadRequest.Builder(7).setSize(NpuManager.NPU_MODEL_SIZE_LESS_THAN_1GB).build()
        cb = Callback()
        await npu.requestCanLoadModel(request, cb, context.getMainExecutor())
        await cb.approved.wait()
        model, _ = mlp(seed=1, sizes=(16, 8))
        async with open_nn_runtime(context.runtime) as nn:
            compilation = nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")])
            compilation.setEmulatedModelSize(256 << 20)
            await compilation.finish()
            await cb.listener.notifyModelLoaded(request)
            while True:
                with open(out + ".tmp", "w") as f:
                    json.dump({"uid": context.getUid(), "pid": os.getpid(), "events": cb.events}, f)
                os.replace(out + ".tmp", out)
                await trio.sleep(0.1)
    """)

THIEF = textwrap.dedent("""\
    import json, os
    import trio
    from apps._kit import mlp
    from framework.app import Context
    from framework.binder import RemoteException, defaultServiceManager, open_binder_runtime
    from framework.nn import NeuralNetworksError, open_nn_runtime
    from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager
    from interfaces.android.hardware.npu import IScheduling, SchedulingConfig as SC
    from interfaces.android.npumanager import INpuManager, ModelLoadRequestParcelable
    from interfaces.npuemu.hal import IHalControl

    async def attempt(results, name, coro):
        try:
            value = await coro
        except RemoteException as exc:
            results[name] = [type(exc).__name__, exc.exception_code, str(exc)[:200]]
        except NeuralNetworksError as exc:
            results[name] = [type(exc).__name__, None, str(exc)[:200]]
        else:
            results[name] = ["ok", 0, repr(value)[:200]]

    class Callback(ModelLoadRequestCallback):
        def __init__(self):
            self.statuses = []
            self.got = trio.Event()
        def onCanLoadModel(self, request, status, listener):
            self.statuses.append(status)
            self.got.set()

    async def main(context):
        rtdir = os.environ["NPUEMU_RUNTIME_DIR"]
        victim = json.load(open(os.path.join(rtdir, "victim.json")))
        vuid = victim["uid"]
        results = {}
        sm = defaultServiceManager(context.runtime)
        raw = INpuManager.asInterface(await sm.checkService("npu"))
        Parcel = ModelLoadRequestParcelable
        theirs = Parcel(id=7, size=0, priority=0)
        # The victim's request, by its id: the service keys requests by the calling uid.
        await attempt(results, "notifyModelUnloaded(victim id)", raw.notifyModelUnloaded(theirs))
        await attempt(results, "cancelModelLoad(victim id)", raw.cancelModelLoad(theirs))
        await attempt(results, "notifyModelLoaded(victim id)", raw.notifyModelLoaded(theirs))
        await attempt(results, "dump npu", raw.dump(["--json"]))
        # The scheduling HAL is the framework's, not an app's.
        sched = IScheduling.asInterface(await sm.checkService("android.hardware.npu.IScheduling/default"))
        mine = SC(minPriority=0, maxPriority=0, uid=context.getUid(), appPriority=0, hasDirectAccess=True,
                  canAttributeOtherUid=True)
        await attempt(results, "setSchedulingConfigs", sched.setSchedulingConfigs([mine]))
        await attempt(results, "updateSchedulingConfigs", sched.updateSchedulingConfigs([mine]))
        await attempt(results, "setCallback(null)", sched.setCallback(None))
        control = IHalControl.asInterface(await sm.checkService("npuemu.hal.IHalControl/default"))
        await attempt(results, "revokeUidModels(victim)", control.revokeUidModels(vuid))
        await attempt(results, "revokeRequestModels(victim)", control.revokeRequestModels(vuid, 1, []))
        await attempt(results, "overrideThermalSeverity", control.overrideThermalSeverity(6))
        await attempt(results, "resetThermalOverride", control.resetThermalOverride())
        await attempt(results, "injectFault(crash)", control.injectFault("emu-npu", 4, 0.0))
        await attempt(results, "runTestInference(as victim)", control.runTestInference(0, -1, "emu-npu", vuid))
        # Posing as system to the registry, and steering other apps.
        await attempt(results, "registerProcess(self as system)", sm.registerProcess(os.getpid(), 1000))
        await attempt(results, "addService(npu)", sm.addService("npu", raw.asBinder(), False, 8))
        am = context.getSystemService(Context.ACTIVITY_SERVICE)
        await attempt(results, "killApp(victim)", am.killApp("com.sec.victim"))
        await attempt(results, "setImportance(self foreground)", am.setImportance("com.sec.thief", 100))
        # Work attributed to the victim, without ATTRIBUTE_WORK_TO_OTHER_APPS.
        model, _ = mlp(seed=2, sizes=(16, 8))
        import numpy as np
        async with open_nn_runtime(context.runtime) as nn:
            async with nn.createCompilationForDevices(model, [nn.getDeviceByName("emu-npu")]) as c:
                await c.finish()
                e = c.createExecution()
                e.setInput(0, np.ones((1, 16), np.float32))
                e.setOriginalUid(vuid)
                await attempt(results, "execute attributed to victim", e.compute_async())
                e = c.createExecution()
                e.setInput(0, np.ones((1, 16), np.float32))
                await attempt(results, "execute as itself", e.compute_async())
        # Its own request with the same id is its own business, and is served.
        npu = context.getSystemService(Context.NPU_SERVICE)
        cb = Callback()
        await attempt(results, "own request id 7", npu.requestCanLoadModel(
            ModelLoadRequest.Builder(7).build(), cb, context.getMainExecutor()))
        with trio.move_on_after(10):
            await cb.got.wait()
        results["own request statuses"] = cb.statuses
        with open(os.path.join(rtdir, "thief.json"), "w") as f:
            json.dump(results, f)
        await trio.sleep_forever()
    """)

EX_SECURITY, EX_ILLEGAL_STATE = -1, -5


async def test_an_app_cannot_act_for_another_app_or_for_the_system(tmp_path):
    apps = tmp_path / "apps"
    write_app(apps, "victim", "com.sec.victim", VICTIM)
    write_app(apps, "thief", "com.sec.thief", THIEF, importance="cached")
    async with booted(apps) as emu:
        am = await get(emu, "activity", IActivityManager)
        rtdir = emu.runtime_dir
        await am.startApp("com.sec.victim", 0)
        await wait_until(lambda: _exists(rtdir / "victim.json"), timeout=40)
        before = await npu_dump(emu)
        victim_uid = json.loads((rtdir / "victim.json").read_text())["uid"]
        assert [(r["uid"], r["id"], r["state"]) for r in before["requests"]] == [(victim_uid, 7, "loaded")]
        prepared_before = hal_prepared_models(await hal_dump(emu))
        assert prepared_before >= 1

        await am.startApp("com.sec.thief", 0)
        await wait_until(lambda: _exists(rtdir / "thief.json"), timeout=40)
        results = json.loads((rtdir / "thief.json").read_text())

        def refused(name: str, code: int = EX_SECURITY) -> None:
            kind, exception, message = results[name]
            assert exception == code, (name, results[name])

        refused("notifyModelUnloaded(victim id)", EX_ILLEGAL_STATE)
        refused("cancelModelLoad(victim id)", EX_ILLEGAL_STATE)
        refused("notifyModelLoaded(victim id)", EX_ILLEGAL_STATE)
        for name in ("dump npu", "setSchedulingConfigs", "updateSchedulingConfigs", "setCallback(null)",
                     "revokeUidModels(victim)", "revokeRequestModels(victim)", "overrideThermalSeverity",
                     "resetThermalOverride", "injectFault(crash)", "runTestInference(as victim)",
                     "registerProcess(self as system)", "addService(npu)", "killApp(victim)",
                     "setImportance(self foreground)"):
            refused(name)
        kind, _, message = results["execute attributed to victim"]
        assert kind == "OpFailedError" and "ATTRIBUTION_DENIED" in message, results["execute attributed to victim"]
        assert results["execute as itself"][0] == "ok", results["execute as itself"]
        assert results["own request id 7"][0] == "ok" and results["own request statuses"] == [0], results

        # Nothing of the victim's moved: its request, its model, its process.
        after = await npu_dump(emu)
        rows = sorted((r["uid"], r["id"], r["state"]) for r in after["requests"])
        thief_uid = next(r["uid"] for r in after["requests"] if r["uid"] != victim_uid)
        assert (victim_uid, 7, "loaded") in rows and (thief_uid, 7, "approved") in rows, rows
        assert hal_prepared_models(await hal_dump(emu)) >= prepared_before
        victim = json.loads((rtdir / "victim.json").read_text())
        assert victim["events"] == [["can_load", 0]], victim  # never asked to unload, never cancelled
        assert await am.getUidImportance(thief_uid) == 400  # its setImportance did nothing
        control = await get(emu, HAL_CONTROL, IHalControl)
        assert emu.process("hal").returncode is None  # the crash fault was refused
        assert await control.thermalStatus() is not None


STRANGER = textwrap.dedent("""\
    import json, sys, trio
    from framework.binder import RemoteException, SecurityException, defaultServiceManager, open_binder_runtime
    from interfaces.android.hardware.npu import IScheduling

    async def main(rtdir):
        out = {}
        try:
            async with open_binder_runtime(rtdir):
                out["plain"] = "served"
        except SecurityException as exc:
            out["plain"] = "SecurityException: " + str(exc)
        async with open_binder_runtime(rtdir, shell=True) as rt:
            out["shell_uid"] = rt.uid
            sm = defaultServiceManager(rt)
            for name, call in [("registerProcess", sm.registerProcess(rt.pid, 1000)),
                               ("addService", sm.addService("evil", sm.asBinder(), False, 8))]:
                try:
                    await call
                    out[name] = "ok"
                except RemoteException as exc:
                    out[name] = exc.exception_code
            sched = IScheduling.asInterface(await sm.checkService("android.hardware.npu.IScheduling/default"))
            try:
                await sched.setCallback(None)
                out["setCallback"] = "ok"
            except RemoteException as exc:
                out["setCallback"] = exc.exception_code
        print(json.dumps(out))

    trio.run(main, sys.argv[1])
    """)


async def test_a_process_the_emulator_did_not_launch_is_refused_and_the_shell_is_only_the_shell(tmp_path):
    script = tmp_path / "stranger.py"
    script.write_text(STRANGER)
    async with booted() as emu:
        result = await trio.run_process([sys.executable, str(script), str(emu.runtime_dir)], capture_stdout=True,
                                        capture_stderr=True, check=False)
        assert result.returncode == 0, result.stderr.decode()[-3000:]
        out = json.loads(result.stdout.decode().strip().splitlines()[-1])
        assert out["plain"].startswith("SecurityException") and "refused" in out["plain"], out
        assert out["shell_uid"] == 2000
        assert out["registerProcess"] == EX_SECURITY and out["addService"] == EX_SECURITY, out
        assert out["setCallback"] == EX_SECURITY, out
        assert "evil" not in await emu.list_services()


ENTITY_MANIFESTS = ["billion_laughs.xml", "external_entity.xml", "external_dtd.xml"]


async def test_manifests_with_entities_are_refused_at_install(tmp_path):
    # Installed at boot from --apps-dir, beside a good app: each bad one is refused and
    # reported, the good one installs, and system_server lives on.
    apps = tmp_path / "apps"
    write_app(apps, "good", "com.sec.good", "async def main(context):\n    pass\n")
    bad_dirs = []
    for i, name in enumerate(ENTITY_MANIFESTS):
        bad = apps / f"bad{i}"
        bad.mkdir()
        (bad / "AndroidManifest.xml").write_text((MANIFESTS / name).read_text())
        (bad / "main.py").write_text("async def main(context):\n    pass\n")
        bad_dirs.append(bad)
    async with booted(apps) as emu:
        pm = await get(emu, "package", IPackageManager)
        dump = json.loads(await pm.dump(["--json"]))
        assert "com.sec.good" in json.dumps(dump)
        refused = dump.get("refused") or []
        for bad in bad_dirs:
            assert any(str(bad) in r["path"] for r in refused), (bad, dump)
            # Through the binder at run time, too: the package service refuses it as well.
            with pytest.raises(Exception) as info:
                await pm.installPackage(str(bad))
            assert "entit" in str(info.value).lower() or "dtd" in str(info.value).lower(), info.value
        assert emu.process("system_server").returncode is None


async def test_the_runtime_directory_is_private_and_so_is_everything_in_it():
    async with booted() as emu:
        root = emu.runtime_dir
        st = root.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
        sockets = [p for p in root.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]
        # servicemanager, HAL, system_server and init itself each serve a socket.
        assert len(sockets) >= 4, sorted(p.name for p in root.iterdir())
        for p in sockets:
            assert stat.S_IMODE(p.lstat().st_mode) == 0o600, (p.name, oct(p.lstat().st_mode))
        for secret in ("shell.token", "logcat"):
            assert stat.S_IMODE((root / secret).stat().st_mode) == 0o600, secret
        assert stat.S_IMODE((root / "apps").stat().st_mode) == 0o700


async def _exists(path: Path) -> bool:
    return path.exists()
