"""Malformed frames at the stack's real sockets, while a normal client keeps working.

The hostile peer is ``tests/fuzz/raw_peer.py``, a separate process (so that its pid
is one the emulator never launched) that speaks raw bytes to servicemanager, the HAL
and system_server: random bytes, truncated frames, lengths that lie, a 4 GiB length
prefix, frames of the wrong kind, and, with the shell token, transactions whose
parcels are garbage, with unknown codes or to objects that do not exist.

What a user relies on, and what is asserted:

- no server crashes (all three processes alive, every service still registered);
- every bad peer is dropped or answered with an error, never left hanging; a peer
  the emulator did not launch never gets a single reply;
- a bad oneway call costs its connection nothing: a ping after it is answered;
- a normal client (this process, init) is served throughout, every call in time;
- nothing leaks: each server's descriptor count comes back to where it was.

The codec itself is fuzzed in-process by hypothesis (``test_binder_wire.py``,
``test_binder_parcel.py``, ``test_fuzz_codec.py``) and by atheris (``make fuzz``).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import trio

from framework.binder import defaultServiceManager
from framework.emulator import HAL_SERVICES, SYSTEM_SERVER_SERVICES
from interfaces.android.npumanager import INpuManager
from interfaces.npuemu.hal import IHalControl
from test_reliability_support import HAL_CONTROL, booted, get, long_lived, socket_addresses, wait_until

pytestmark = [pytest.mark.multiprocess]

PEER = Path(__file__).with_name("fuzz") / "raw_peer.py"

# Cases that break framing or the handshake: the only right answer is to hang up
# (a Refused first is fine).
FRAMING = {
    "random-bytes", "huge-length-prefix", "over-limit-length", "zero-length", "truncated-hello", "short-header",
    "length-too-short", "length-too-long", "not-an-array", "unknown-kind", "wrong-field-count", "bad-version",
    "hello-token-not-str", "transaction-before-hello", "reply-from-client", "deep-nesting",
}
# Past the handshake, protocol violations: hang up.
VIOLATIONS = {
    "second-hello", "welcome-from-client", "junk-after-hello", "huge-prefix-after-hello", "txn-bad-types", "txn-as-array",
    "txn-negative-target", "txn-fds-announced-none-sent", "txn-reused-id",
}
# Well-framed calls the server cannot serve: an error reply on a live connection.
ANSWERED = {"unknown-object", "unknown-code", "code-max", "interface-of-missing-object"}


async def run_peer(rtdir: Path, address: str, *, shell: bool, seed: int, ping_target: int, rounds: int = 40) -> dict:
    argv = [sys.executable, str(PEER), "--runtime-dir", str(rtdir), "--address", address, "--seed", str(seed),
            "--ping-target", str(ping_target), "--rounds", str(rounds)]
    if shell:
        argv.append("--shell")
    result = await trio.run_process(argv, capture_stdout=True, capture_stderr=True, check=False)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return json.loads(result.stdout)


def check_stranger(report: dict) -> None:
    outcomes = {r["case"]: r["outcome"] for r in report["results"]}
    where = report["address"]
    assert set(outcomes.values()) <= {"refused", "dropped"}, (where, outcomes)
    # The handshake with no token, and with a wrong one, is an explicit refusal.
    assert outcomes["hello-then-call"] == "refused" and outcomes["wrong-token"] == "refused", (where, outcomes)


def check_shell(report: dict) -> None:
    results = report["results"]
    outcomes = {r["case"]: r["outcome"] for r in results}
    where = report["address"]
    assert "hung" not in outcomes.values() and "connect_failed" not in outcomes.values(), (where, results)
    for case in FRAMING | VIOLATIONS:
        assert outcomes[case] in ("dropped", "refused"), (where, case, outcomes[case])
    for case in ANSWERED:
        assert outcomes[case] == "error", (where, case, outcomes[case])
    assert outcomes["oneway-garbage-then-ping"] == "served", where
    assert outcomes["oneway-unknown-object-then-ping"] == "served", where
    assert outcomes["hello-then-call"] in ("ok", "error"), where  # the shell is served
    random_calls = Counter(r["outcome"] for r in results if r["case"].startswith("invalid-parcel-"))
    # Garbage parcels are answered (almost always with an error), never by a hang-up:
    # the peer's framing was right, so its connection lives on.
    assert set(random_calls) <= {"error", "ok"}, (where, random_calls)
    assert random_calls["error"] >= 30, (where, random_calls)


async def test_malformed_frames_to_every_stack_process_while_a_client_is_served():
    async with booted() as emu:
        sm = defaultServiceManager(emu.runtime)
        npu = await get(emu, "npu", INpuManager)
        control = await get(emu, HAL_CONTROL, IHalControl)
        await wait_until(lambda: _connected(npu))
        addresses = socket_addresses(emu)
        assert set(addresses) == {"servicemanager", "hal", "system_server"}, addresses
        # The normal client's own connections exist before the baseline is taken.
        await sm.listServices(15)
        await control.thermalStatus()
        before = long_lived(emu)

        served = Counter()
        stop = trio.Event()

        async def normal_client() -> None:
            while not stop.is_set():
                with trio.fail_after(5):  # slow would be a failure too: nobody may starve it
                    names = await sm.listServices(15)
                    assert set(HAL_SERVICES) | set(SYSTEM_SERVER_SERVICES) <= set(names)
                    assert (await control.thermalStatus()) is not None
                    assert "policy" in await npu.dump(["--json"])
                served["rounds"] += 1
                await trio.sleep(0.02)

        reports = []

        async def attack(name: str, shell: bool, seed: int) -> None:
            # An object each serves: ids are random, so the reference must have been handed over.
            ping_target = {"servicemanager": 0, "hal": control, "system_server": npu}[name]
            ping_target = ping_target if ping_target == 0 else ping_target.asBinder()._object_id
            reports.append(await run_peer(emu.runtime_dir, addresses[name], shell=shell, seed=seed,
                                          ping_target=ping_target))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(normal_client)
            async with trio.open_nursery() as attackers:
                for i, name in enumerate(addresses):
                    attackers.start_soon(attack, name, False, i)
                    attackers.start_soon(attack, name, True, 100 + i)
            stop.set()

        assert served["rounds"] >= 5, served
        assert len(reports) == 6
        for report in reports:
            (check_shell if report["shell"] else check_stranger)(report)
        for name in emu.pids:
            assert emu.process(name).returncode is None, f"{name} died under the fuzzer"
        names = await sm.listServices(15)
        assert set(HAL_SERVICES) | set(SYSTEM_SERVER_SERVICES) <= set(names)

        async def fds_back() -> bool:
            now = long_lived(emu)
            return all(now[n].fds <= before[n].fds for n in before)

        # Dropped connections are closed by the servers: no descriptor stays behind.
        await wait_until(fds_back, timeout=10)


async def _connected(npu) -> bool:
    return json.loads(await npu.dump(["--json"]))["hal"]["connected"]
