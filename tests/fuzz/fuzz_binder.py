"""Coverage-guided fuzzing of the binder's wire codec and of every real parcel decoder.

    .venv/bin/python tests/fuzz/fuzz_binder.py [-atheris_runs=N] [-max_total_time=S] [corpus_dir]
    .venv/bin/python tests/fuzz/fuzz_binder.py --write-seeds corpus_dir

(``make fuzz`` runs it with a time limit.) One input is a byte string; :func:`check_one`
puts it through what a server does with a peer's bytes:

1. The sans-IO protocol: a server-side ``Connection`` is fed the bytes in chunks (the
   first byte picks the chunk size, so partial frames are exercised), and events are
   pulled until ``NEED_DATA``. The only acceptable failure is ``ProtocolError``: the
   runtime's answer to it is to drop the peer. Anything else (``KeyError``,
   ``RecursionError``, ``MemoryError``...) would crash a server's connection task.
2. The typed codec: if the bytes are one msgpack value, it is decoded as the call
   arguments and the reply of every method of every interface the stack serves
   (servicemanager, the HAL's IScheduling/IDevice/IPreparedModel/IHalControl, the
   npu/activity/package/thermal services) and as every parcelable. The only
   acceptable failure is ``BadParcelableException`` (EX_BAD_PARCELABLE to the caller).

The same function runs under hypothesis in ``tests/test_fuzz_codec.py``, so the
harness itself is tested in the ordinary suite; atheris adds coverage feedback and
long runs. Without atheris installed this file says so and exits 2.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import msgpack

ROOT = Path(__file__).resolve().parents[2]


class NoObjectsContext:
    """A parcel context with no binders and no descriptors: every reference is bad."""

    def read_binder(self, handle: Any, interface: Any) -> Any:
        from framework.binder import BadParcelableException

        raise BadParcelableException(f"no binder {handle!r} in this parcel")

    def read_fd(self, index: Any) -> int:
        from framework.binder import BadParcelableException

        raise BadParcelableException(f"no descriptor {index!r} in this parcel")


@functools.cache
def decoders() -> tuple[Any, ...]:
    """(name, decode) for every method's call and reply and every parcelable the stack serves."""
    from framework.binder import AidlRegistry
    from framework.binder._aidl import InterfaceDef, ParcelableDef

    registry = AidlRegistry.load(ROOT / "interfaces")
    sm = AidlRegistry.load(ROOT / "framework" / "binder" / "aidl")
    ctx = NoObjectsContext()
    out = []
    for reg in (registry, sm):
        for d in reg:
            if isinstance(d, InterfaceDef):
                for m in d.methods:
                    out.append((f"{d.name}.{m.name}(call)", lambda w, m=m: m.decode_call(w, ctx)))
                    if not m.oneway:
                        out.append((f"{d.name}.{m.name}(reply)", lambda w, m=m: m.decode_reply(w, ctx)))
            elif isinstance(d, ParcelableDef):
                out.append((d.name, lambda w, c=d.cls: c.from_wire(w, ctx)))
    return tuple(out)


def check_one(data: bytes) -> None:
    """Raise AssertionError (with what went wrong) if ``data`` breaks the codec."""
    from framework.binder import BadParcelableException, ProtocolError, TransactionTooLargeException
    from framework.binder._wire import NEED_DATA, SERVER, Connection

    # 1. The protocol, as a server reads a peer.
    conn = Connection(SERVER)
    step = 1 + (data[0] % 64) if data else 1
    try:
        for i in range(0, max(len(data), 1), step):
            conn.receive_data(data[i : i + step])
            while conn.next_event() is not NEED_DATA:
                pass
    except (ProtocolError, TransactionTooLargeException):
        pass
    except Exception as exc:  # noqa: BLE001 - this is what the fuzzer hunts
        raise AssertionError(f"wire: {type(exc).__name__}: {exc} on {data[:64]!r}") from exc
    finally:
        conn.close()

    # 2. The typed codec, on one msgpack value.
    try:
        value = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - not one msgpack value: the framing layer's business
        return
    for name, decode in decoders():
        try:
            decode(value)
        except BadParcelableException:
            pass
        except Exception as exc:  # noqa: BLE001
            raise AssertionError(f"{name}: {type(exc).__name__}: {exc} on {value!r:.200}") from exc


def seed_inputs() -> list[bytes]:
    """Well-formed frames and parcels to start from (a fuzzer mutates these deeper than noise)."""
    from framework.binder._wire import Hello, Reply, Transaction, encode_frame

    frames = [
        Hello(token=None), Hello(token="0" * 64), Transaction(1, 0, 1, False, ["npu"]),
        Transaction(2, 3, 7, True, [[1001, 0, 1000, 500, True, False]]),
        Reply(1, data=[None]), Reply(2, exception=-1, message="no"),
    ]
    seeds = [b"".join(encode_frame(f)) for f in frames]
    seeds += [msgpack.packb(v) for v in ([1, None, "x"], [[0, 1, 2, 3, 4, 5, True, False]], [b"\x00" * 16, 3])]
    return seeds


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        out = Path(sys.argv[2])
        out.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(seed_inputs()):
            (out / f"seed-{i:02d}").write_bytes(seed)
        return 0
    try:
        import atheris
    except ImportError:
        print("atheris is not installed (pip install atheris==2.3.0); `make fuzz` falls back to hypothesis",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    with atheris.instrument_imports():
        import framework.binder._aidl  # noqa: F401
        import framework.binder._parcel  # noqa: F401
        import framework.binder._wire  # noqa: F401
    decoders()  # load the AIDL once, outside the timed inputs
    atheris.Setup(sys.argv, check_one)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
