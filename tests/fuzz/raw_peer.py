"""A hostile binder peer: malformed frames over a raw Unix socket.

``python tests/fuzz/raw_peer.py --runtime-dir DIR --address NAME [--shell] [--seed N] [--rounds N]``

It speaks to one process of a running emulator (its socket ``DIR/NAME``) the way a
buggy or malicious client would, one fresh connection per case, and prints one JSON
object: every case with what the server did about it. It uses plain blocking
sockets and hand-built bytes, never the project's binder runtime, because the point
is to send what that runtime would refuse to send.

As a *stranger* (the default) it is a process the emulator did not launch: its pid is
registered nowhere, so the only thing it can earn is a ``Refused``. With ``--shell``
it reads the shell token and presents it, so it gets past the handshake and can send
transactions with broken parcels, unknown codes and unknown objects, as the shell
(uid 2000) may.

What a server may do with a bad case, and what the harness calls it:

- ``refused``: a Refused frame (then the connection closes);
- ``error``: a Reply for the case's transaction with a non-OK transport status or a
  binder exception;
- ``dropped``: the connection closed with no reply;
- ``ok``: a Reply without error (only expected for the control calls, ping);
- ``hung``: nothing at all within the deadline, the connection still open. That is
  the failure: a server that waits for ever on a peer it should have dropped.
- ``served``: a bad oneway call (no reply is due) followed by a ping on the same
  connection that was answered: the bad call cost the peer nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import msgpack

HEADER = struct.Struct(">I")
# Frame kinds and codes, spelled out here rather than imported: this peer must not
# depend on the code it attacks to build its attacks.
HELLO, WELCOME, REFUSED, TRANSACTION, REPLY = 0, 1, 2, 3, 4
PING_TRANSACTION = 0x5F504E47
INTERFACE_TRANSACTION = 0x5F4E5446
MAX_FRAME = (1 << 20) + 4096
DEADLINE_S = 6.0


def frame(items: list[Any]) -> bytes:
    body = msgpack.packb(items, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def hello(token: str | None) -> bytes:
    return frame([HELLO, 1, token])


# A call's frames have fixed binary headers: a transaction's kind, oneway, nfds, code,
# txn_id, target; a successful reply's kind, 0, nfds, txn_id. The parcel follows.
TXN_HEAD = struct.Struct(">BBHIqq")
OK_HEAD = struct.Struct(">BBHq")


def transaction(txn_id: int, target: int, code: int, data: Any, *, oneway: int = 0, nfds: int = 0) -> bytes:
    body = TXN_HEAD.pack(TRANSACTION, oneway, nfds, code, txn_id, target) + msgpack.packb(data, use_bin_type=True)
    return HEADER.pack(len(body)) + body


class Peer:
    """One connection, with a frame reader that tolerates anything the server sends."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(DEADLINE_S)
        self.sock.connect(os.fspath(path))
        self.buf = b""
        self.eof = False

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False  # the server already hung up: that is a drop

    def shut_write(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def next_frame(self, deadline: float) -> list[Any] | None | str:
        """The next frame's items, None at EOF, ``"hung"`` at the deadline."""
        while True:
            if len(self.buf) >= 4:
                (length,) = HEADER.unpack_from(self.buf)
                if len(self.buf) >= 4 + length:
                    body, self.buf = self.buf[4 : 4 + length], self.buf[4 + length :]
                    if body[:1] == bytes([REPLY]):  # a successful reply: [REPLY, txn_id, data, nfds]
                        _, _, nfds, txn_id = OK_HEAD.unpack_from(body)
                        data = msgpack.unpackb(body[OK_HEAD.size :], raw=False, strict_map_key=False)
                        return [REPLY, txn_id, data, nfds]
                    return msgpack.unpackb(body, raw=False, strict_map_key=False)
            if self.eof:
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return "hung"
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return "hung"
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
            self.buf += chunk

    def handshake(self, token: str | None) -> str:
        if not self.send(hello(token)):
            return "dropped"
        items = self.next_frame(time.monotonic() + DEADLINE_S)
        if items == "hung":
            return "hung"
        if items is None:
            return "dropped"
        return {WELCOME: "welcome", REFUSED: "refused"}.get(items[0], f"kind {items[0]}")

    def outcome_for(self, txn_id: int | None) -> tuple[str, str]:
        """Read until the reply to ``txn_id`` (or any verdict when None) or EOF."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            items = self.next_frame(deadline)
            if items == "hung":
                return "hung", ""
            if items is None:
                return "dropped", ""
            kind = items[0]
            if kind == REFUSED:
                return "refused", str(items[1])
            if kind == REPLY and (txn_id is None or items[1] == txn_id):
                if len(items) == 4:  # [REPLY, txn_id, data, nfds]: the short form of success
                    return "ok", ""
                status, exception, message = items[2], items[3], items[4]
                if status != 0 or exception != 0:
                    return "error", f"status {status} exception {exception}: {message}"[:200]
                return "ok", ""
            # a Welcome or another reply: keep reading

    def close(self) -> None:
        self.sock.close()


def junk_value(rng: random.Random, depth: int = 0) -> Any:
    """A random msgpack-able value: the zoo a broken encoder would produce."""
    choice = rng.randrange(10 if depth < 3 else 7)
    if choice == 0:
        return rng.choice([0, -1, 1, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63)])
    if choice == 1:
        return rng.choice(["", "x" * rng.randrange(300), "\u202e\x00nul", "android.hardware.npu.IScheduling/default"])
    if choice == 2:
        return None
    if choice == 3:
        return rng.random() * rng.choice([1, 1e308, -1e-308])
    if choice == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
    if choice == 5:
        return rng.choice([True, False])
    if choice == 6:
        return float("nan")
    if choice == 7:
        return [junk_value(rng, depth + 1) for _ in range(rng.randrange(6))]
    if choice == 8:
        return {junk_value(rng, 3): junk_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [["binder-1-deadbeef", rng.randrange(100), "android.os.IServiceManager"]]  # a forged binder reference


def run_case(path: Path, name: str, token: str | None, payload: bytes, *, txn_id: int | None, shut: bool,
             after_oneway_ping: bool = False, ping_target: int = 0) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        peer = Peer(path)
    except OSError as exc:
        return {"case": name, "outcome": "connect_failed", "detail": str(exc)}
    try:
        ok = peer.send(payload)
        if after_oneway_ping and ok:
            ok = peer.send(transaction(1 << 40, ping_target, PING_TRANSACTION, None))
            outcome, detail = peer.outcome_for(1 << 40)
            if outcome == "ok":
                outcome = "served"
        else:
            if shut:
                peer.shut_write()
            outcome, detail = peer.outcome_for(txn_id) if ok else ("dropped", "send failed")
    finally:
        peer.close()
    return {"case": name, "outcome": outcome, "detail": detail, "ms": round((time.monotonic() - t0) * 1000, 1)}


def cases(rng: random.Random, token: str | None, rounds: int):
    """(name, payload, txn_id to wait for, shut write side?, oneway-then-ping?)"""
    hs = hello(token)
    # Framing attacks, before any handshake: the server must not wait for ever.
    yield "random-bytes", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 512))), None, True, False
    yield "huge-length-prefix", HEADER.pack(0xFFFFFFFF) + b"\x00" * 16, None, False, False
    yield "over-limit-length", HEADER.pack(MAX_FRAME + 1), None, False, False
    yield "zero-length", HEADER.pack(0), None, False, False
    yield "truncated-hello", hs[: len(hs) - 2], None, True, False
    yield "short-header", b"\x00\x00", None, True, False
    body = msgpack.packb([HELLO, 1, token])
    yield "length-too-short", HEADER.pack(len(body) - 3) + body, None, True, False
    yield "length-too-long", HEADER.pack(len(body) + 40) + body, None, True, False
    yield "not-an-array", frame({"hello": 1}), None, True, False
    yield "unknown-kind", frame([99, 1, 2]), None, True, False
    yield "wrong-field-count", frame([HELLO, 1, token, "extra"]), None, True, False
    yield "bad-version", frame([HELLO, 7, token]), None, True, False
    yield "hello-token-not-str", frame([HELLO, 1, 12345]), None, True, False
    yield "wrong-token", frame([HELLO, 1, "0" * 64]), None, True, False
    yield "transaction-before-hello", transaction(1, 0, 1, []), None, True, False
    yield "reply-from-client", frame([REPLY, 1, 0, 0, "", 0, None, 0]), None, True, False
    yield "deep-nesting", HEADER.pack(4000) + b"\x91" * 3999 + b"\xc0", None, True, False
    yield "hello-then-call", hs + transaction(1, 0, 1, ["npu"]), 1, False, False
    if token is None:
        return
    # Past the handshake, as the shell.
    yield "second-hello", hs + hs, None, True, False
    yield "welcome-from-client", hs + frame([WELCOME, 1, 0, 0]), None, True, False
    yield "junk-after-hello", hs + bytes(rng.randrange(256) for _ in range(64)), None, True, False
    yield "huge-prefix-after-hello", hs + HEADER.pack(0xFFFFFFF0), None, False, False
    yield "txn-bad-types", hs + transaction(1, 0, 1, [], oneway=7), None, True, False
    yield "txn-as-array", hs + frame([TRANSACTION, 1, 0, 1, False, [], 0]), None, True, False
    yield "txn-negative-target", hs + transaction(1, -5, 1, []), None, True, False
    yield "txn-fds-announced-none-sent", hs + transaction(1, 0, 1, [], nfds=3), None, True, False
    yield "txn-reused-id", hs + transaction(7, 0, 7, ["never.registered", 5000]) + transaction(7, 0, 1, []), None, True, False
    yield "unknown-object", hs + transaction(1, 987654321, 1, []), 1, False, False
    yield "unknown-code", hs + transaction(1, 0, 4000, []), 1, False, False
    yield "code-max", hs + transaction(1, 0, 0xFFFFFFFF, []), 1, False, False
    yield "interface-of-missing-object", hs + transaction(1, 55555, INTERFACE_TRANSACTION, None), 1, False, False
    yield "oneway-garbage-then-ping", hs + transaction(2, 0, 3, junk_value(rng), oneway=True), None, False, True
    yield "oneway-unknown-object-then-ping", hs + transaction(2, 31337, 1, [], oneway=True), None, False, True
    for i in range(rounds):
        target = rng.choice([0, 0, 1, 2, 3, 4, 5, 6, 7, 8, rng.randrange(1 << 62)])
        code = rng.choice([rng.randrange(1, 25), rng.randrange(1, 25), rng.randrange(1 << 32)])
        data = junk_value(rng) if rng.random() < 0.3 else [junk_value(rng) for _ in range(rng.randrange(5))]
        yield f"invalid-parcel-{i}@{target}:{code}", hs + transaction(1, target, code, data), 1, False, False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtime-dir", required=True)
    ap.add_argument("--address", required=True)
    ap.add_argument("--shell", action="store_true", help="present the shell token")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ping-target", type=int, default=0,
                    help="an object the server exports (0 is the servicemanager's registry; others are random ids)")
    ap.add_argument("--rounds", type=int, default=40, help="random invalid-parcel calls (shell only)")
    args = ap.parse_args()
    rtdir = Path(args.runtime_dir)
    token = (rtdir / "shell.token").read_text().strip() if args.shell else None
    rng = random.Random(args.seed)
    results = []
    for name, payload, txn_id, shut, ping in cases(rng, token, args.rounds):
        results.append(run_case(rtdir / args.address, name, token, payload, txn_id=txn_id, shut=shut,
                                after_oneway_ping=ping, ping_target=args.ping_target))
    json.dump({"address": args.address, "shell": args.shell, "seed": args.seed, "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
