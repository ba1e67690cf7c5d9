"""system_server, the HAL and an app as real processes, driven through the CLI.

The stack: ``open_stack(processes=True)``: a servicemanager, the HAL and ``python -m
framework.server`` as uid 1000 (this process is init, uid 0), and an app that the
activity manager launches as its own process (``python -m framework.app``). The shell commands
run with click's CliRunner in a worker thread (each makes its own trio run); from this
process they reach the system as init, which may do whatever the shell may.
"""

from __future__ import annotations

import json
import textwrap

import pytest
import trio
from click.testing import CliRunner

from framework.binder import defaultServiceManager
from framework.cli import main
from framework.emulator import BootConfig, open_stack
from test_server_support import manifest

pytestmark = [pytest.mark.multiprocess]

APP_MAIN = textwrap.dedent("""\
    import trio
    from framework.app import Context
    from framework.npumanager import ModelLoadRequest, ModelLoadRequestCallback, NpuManager

    class Callback(ModelLoadRequestCallback):
        async def onCanLoadModel(self, request, status, listener):
            print("onCanLoadModel", request.id, status, flush=True)
            if status == NpuManager.NPU_MODEL_LOAD_STATUS_CAN_LOAD_NOW:
                await listener.notifyModelLoaded(request)

    async def main(context):
        npu = context.getSystemService(Context.NPU_SERVICE)
        request = ModelLoadRequest.Builder(42).setSize(NpuManager.NPU_MODEL_SIZE_BETWEEN_1GB_AND_2GB).build()
        await npu.requestCanLoadModel(request, Callback(), context.getMainExecutor())
        await trio.sleep_forever()
    """)


def cli(*args: str):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


async def run_cli(*args: str):
    return await trio.to_thread.run_sync(lambda: cli(*args))


async def wait_until(predicate, timeout=10.0):
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(0.05)


@pytest.fixture
async def stack(tmp_path):
    apps = tmp_path / "apps"
    (apps / "loader").mkdir(parents=True)
    (apps / "loader" / "AndroidManifest.xml").write_text(manifest("com.test.loader"))
    (apps / "loader" / "main.py").write_text(APP_MAIN)
    # init does not restart the HAL here: the test kills it and restarts it itself.
    config = BootConfig(clock="virtual", record=False, boot_timeout=30, restart_hal=False,
                        system_server_args=("--unload-timeout", "1.5"))
    async with open_stack(processes=True, apps_dir=apps, config=config) as emu:
        yield emu, emu.process("system_server")


async def test_real_processes_through_the_cli(stack):
    hal, system_server = stack
    rtdir = str(hal.runtime_dir)
    sm = defaultServiceManager(hal.runtime)
    names = await sm.listServices(15)
    assert {"npu", "package", "activity", "thermal"} <= set(names)

    async def npu_dump():
        result = await run_cli("--runtime-dir", rtdir, "dumpsys", "npu", "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    async def connected():
        return (await npu_dump())["hal"]["connected"]

    await wait_until(connected)

    result = await run_cli("--runtime-dir", rtdir, "cmd", "npu", "set-budget-policy", "--max-budget", "6")
    assert result.exit_code == 0 and "budget" in result.output

    result = await run_cli("--runtime-dir", rtdir, "am", "launch", "com.test.loader", "--importance", "visible")
    assert result.exit_code == 0, result.output
    assert "started com.test.loader as pid" in result.output

    async def loaded():
        return [(r["package"], r["id"], r["state"]) for r in (await npu_dump())["requests"]] == [("com.test.loader", 42, "loaded")]

    await wait_until(loaded)
    data = await npu_dump()
    assert data["policy"]["params"]["maxBudget"] == 6 and data["budget"]["in_use"] == 2
    uid = data["requests"][0]["uid"]
    assert uid >= 10000

    everything = await run_cli("--runtime-dir", rtdir, "dumpsys")
    for name in ("npu", "activity", "package", "thermal"):
        assert f"DUMP OF SERVICE {name}:" in everything.output
    assert "200 visible" in everything.output and "com.test.loader" in everything.output

    result = await run_cli("--runtime-dir", rtdir, "am", "set-importance", "com.test.loader", "cached")
    assert result.exit_code == 0, result.output

    async def cached():
        cfg = {c["uid"]: c for c in (await npu_dump())["scheduling_configs"]}
        return cfg[uid]["minPriority"] == 1500 and cfg[uid]["pushed"]

    await wait_until(cached)
    text = await run_cli("--runtime-dir", rtdir, "dumpsys", "activity")
    assert "com.test.loader" in text.output and "cached" in text.output

    result = await run_cli("--runtime-dir", rtdir, "am", "kill", "com.test.loader")
    assert result.exit_code == 0, result.output

    async def dropped():
        d = await npu_dump()
        return d["requests"] == [] and d["counters"]["dropped_at_death"] == 1

    await wait_until(dropped)

    # user errors: one line, non-zero, no traceback
    result = await run_cli("--runtime-dir", rtdir, "am", "kill", "com.test.nosuch")
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "com.test.nosuch" in result.output and len(result.output.strip().splitlines()) == 1
    result = await run_cli("--runtime-dir", rtdir, "cmd", "npu", "set-budget-policy", "--max-budget", "0")
    assert result.exit_code == 2 and "maxBudget" in result.output  # IllegalArgumentException: bad usage
    assert "IllegalArgumentException" not in result.output  # the message alone, as click's usage errors
    result = await run_cli("--runtime-dir", rtdir, "am", "set-importance", "com.test.loader", "sleepy")
    assert result.exit_code == 2 and "unknown importance" in result.output


def test_cli_without_an_emulator_is_one_clear_line(tmp_path):
    result = cli("dumpsys", "npu", "--runtime-dir", str(tmp_path / "nothing"))
    assert result.exit_code == 3
    result = cli("cmd", "--runtime-dir", str(tmp_path / "nothing"), "npu", "info")
    assert result.exit_code == 3
    assert "no emulator" in result.output and "Traceback" not in result.output


async def test_system_server_reconnects_to_a_restarted_hal_process(stack):
    hal, system_server = stack
    rtdir = str(hal.runtime_dir)

    async def hal_state():
        result = await run_cli("--runtime-dir", rtdir, "dumpsys", "npu", "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.output)["hal"]

    async def connected_once():
        return (await hal_state())["connects"] == 1

    await wait_until(connected_once)
    hal.kill("hal")  # SIGKILL: the death notice is the socket closing

    async def lost():
        s = await hal_state()
        return not s["connected"] and s["deaths"] == 1

    await wait_until(lost)
    await hal.restart_hal()

    async def back():
        s = await hal_state()
        return s["connected"] and s["connects"] == 2

    await wait_until(back, timeout=20)
    assert system_server.returncode is None  # system_server rode it out
