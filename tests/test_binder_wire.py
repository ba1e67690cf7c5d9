"""The sans-IO binder protocol: framing, events, and the connection state table."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.binder import MAX_TRANSACTION_SIZE, ProtocolError, TransactionTooLargeException
from framework.binder._wire import (
    CLIENT,
    MAX_FRAME_SIZE,
    NEED_DATA,
    SERVER,
    Connection,
    Hello,
    LocalProtocolError,
    Refused,
    Reply,
    State,
    Transaction,
    Welcome,
    decode_frames,
    encode_frame,
)

# msgpack-able parcel data, as the AIDL codec produces it.
parcel_data = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=64),
    lambda children: st.lists(children, max_size=5),
    max_leaves=20,
)
u32 = st.integers(min_value=0, max_value=2**32 - 1)
txn_ids = st.integers(min_value=0, max_value=2**63 - 1)
i32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)

events = st.one_of(
    st.builds(Hello, version=st.integers(0, 2**31 - 1), token=st.none() | st.text(max_size=64)),
    st.builds(Welcome, pid=st.integers(0, 2**31 - 1), uid=st.integers(0, 2**31 - 1), peer_uid=st.integers(0, 2**31 - 1)),
    st.builds(Refused, reason=st.text(max_size=40)),
    st.builds(
        Transaction,
        txn_id=txn_ids,
        target=st.integers(0, 2**63 - 1),
        code=u32,
        oneway=st.booleans(),
        data=parcel_data,
        nfds=st.just(0),
        fds=st.just(()),
    ),
    st.builds(
        Reply,
        txn_id=txn_ids,
        status=i32,
        exception=i32,
        message=st.text(max_size=40),
        service_code=i32,
        data=parcel_data,
        nfds=st.just(0),
        fds=st.just(()),
    ),
)


@given(st.lists(events, min_size=1, max_size=5))
def test_encode_then_decode_is_identity(evs):
    data = b"".join(b"".join(encode_frame(e)) for e in evs)
    assert decode_frames(data) == evs


@given(st.lists(events, min_size=1, max_size=4), st.integers(1, 7))
def test_frames_split_anywhere_reassemble(evs, step):
    """A stream socket may cut frames at any byte; the connection must not care."""
    server = Connection(SERVER)
    data = b"".join(b"".join(encode_frame(e)) for e in evs)
    from framework.binder._wire import _Framer

    framer = _Framer()
    got = []
    for i in range(0, len(data), step):
        framer.feed(data[i : i + step], ())
        while (ev := framer.next()) is not NEED_DATA:
            got.append(ev)
    assert got == evs
    assert server.state is State.HANDSHAKE


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_error(blob):
    conn = Connection(SERVER)
    conn.receive_data(blob)
    try:
        while conn.next_event() is not NEED_DATA:
            pass
    except ProtocolError:
        pass


@settings(max_examples=200)
@given(st.lists(parcel_data | st.integers(0, 6) | st.text(), max_size=8))
def test_wellformed_msgpack_of_wrong_shape_raises_protocol_error(items):
    body = msgpack.packb(items)
    conn = Connection(CLIENT)
    conn.receive_data(struct.pack(">I", len(body)) + body)
    try:
        conn.next_event()
    except ProtocolError:
        pass


def test_huge_length_prefix_is_refused_before_waiting_for_the_body():
    conn = Connection(SERVER)
    conn.receive_data(struct.pack(">I", 0xFFFFFFF0) + b"abc")
    with pytest.raises(ProtocolError, match="frame length"):
        conn.next_event()


def test_zero_length_frame_is_refused():
    conn = Connection(SERVER)
    conn.receive_data(b"\0\0\0\0")
    with pytest.raises(ProtocolError):
        conn.next_event()


def test_truncated_msgpack_body_is_refused():
    body = msgpack.packb([3, 1, 2, 3, False, [1, 2, 3], 0])[:-3]
    conn = Connection(SERVER)
    conn.receive_data(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError, match="undecodable"):
        conn.next_event()


def test_partial_frame_needs_data():
    frame = b"".join(encode_frame(Hello()))
    conn = Connection(SERVER)
    conn.receive_data(frame[:-1])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(frame[-1:])
    assert conn.next_event() == Hello()


def handshake() -> tuple[Connection, Connection]:
    client, server = Connection(CLIENT), Connection(SERVER)
    server.receive_data(b"".join(client.send(Hello(token="t"))))
    assert server.next_event() == Hello(token="t")
    client.receive_data(b"".join(server.send(Welcome(pid=7, uid=1000, peer_uid=10001))))
    assert client.next_event() == Welcome(7, 1000, 10001)
    assert client.state is server.state is State.READY
    return client, server


def test_calls_and_replies_pair_up_by_id():
    client, server = handshake()
    a = Transaction(client.new_txn_id(), 1, 1, False, [1])
    b = Transaction(client.new_txn_id(), 1, 2, False, [2])
    assert a.txn_id != b.txn_id
    server.receive_data(b"".join(client.send(a)) + b"".join(client.send(b)))
    assert [server.next_event(), server.next_event()] == [a, b]
    assert client.pending_count() == 2
    # Replies may come back in any order: each handler is its own task.
    client.receive_data(b"".join(server.send(Reply(b.txn_id, data=[20]))))
    assert client.next_event() == Reply(b.txn_id, data=[20])
    client.receive_data(b"".join(server.send(Reply(a.txn_id, data=[10]))))
    assert client.next_event().data == [10]
    assert client.pending_count() == 0


def test_reply_to_unknown_transaction_is_the_peers_fault():
    client, server = handshake()
    forged = Connection(SERVER)
    forged.state = State.READY
    forged._pending.add(99)
    client.receive_data(b"".join(forged.send(Reply(99))))
    with pytest.raises(ProtocolError, match="unknown transaction"):
        client.next_event()


def test_oneway_calls_get_no_reply():
    client, server = handshake()
    t = Transaction(client.new_txn_id(), 1, 1, True, [])
    server.receive_data(b"".join(client.send(t)))
    assert server.next_event() == t
    with pytest.raises(LocalProtocolError):
        server.send(Reply(t.txn_id))


def test_reused_transaction_id_in_flight_is_refused():
    client, server = handshake()
    t = Transaction(5, 1, 1, False, [])
    frame = b"".join(encode_frame(t))
    server.receive_data(frame + frame)
    server.next_event()
    with pytest.raises(ProtocolError, match="reused"):
        server.next_event()


@pytest.mark.parametrize(
    "event",
    [Transaction(1, 1, 1, False, []), Reply(1), Welcome(1, 1, 1)],
)
def test_nothing_but_hello_before_the_handshake(event):
    server = Connection(SERVER)
    server.receive_data(b"".join(encode_frame(event)))
    with pytest.raises(ProtocolError):
        server.next_event()


def test_refused_closes_the_connection():
    client, server = Connection(CLIENT), Connection(SERVER)
    server.receive_data(b"".join(client.send(Hello())))
    server.next_event()
    client.receive_data(b"".join(server.send(Refused("unknown pid"))))
    assert client.next_event() == Refused("unknown pid")
    assert client.state is server.state is State.CLOSED
    with pytest.raises(LocalProtocolError):
        client.send(Transaction(1, 1, 1, False, []))


def test_server_cannot_speak_before_hello():
    with pytest.raises(LocalProtocolError):
        Connection(SERVER).send(Welcome(1, 1, 1))


def test_wrong_protocol_version_is_refused():
    server = Connection(SERVER)
    server.receive_data(b"".join(encode_frame(Hello(version=99))))
    with pytest.raises(ProtocolError, match="version"):
        server.next_event()


def test_oversize_transaction_is_refused_before_it_is_sent_and_leaves_no_trace():
    client, _ = handshake()
    big = Transaction(client.new_txn_id(), 1, 1, False, [b"\0" * (MAX_TRANSACTION_SIZE + 1)])
    with pytest.raises(TransactionTooLargeException):
        client.send(big)
    assert client.pending_count() == 0
    # The id is free again and the connection still works.
    client.send(Transaction(big.txn_id, 1, 1, False, [b"small"]))


def test_descriptors_are_matched_to_frames_in_order():
    client, server = handshake()
    t1 = Transaction(client.new_txn_id(), 1, 1, False, [0], nfds=2)
    t2 = Transaction(client.new_txn_id(), 1, 1, False, [0], nfds=1)
    server.receive_data(b"".join(client.send(t1)), [10, 11])
    server.receive_data(b"".join(client.send(t2)), [12])
    assert server.next_event().fds == (10, 11)
    assert server.next_event().fds == (12,)


def test_frame_announcing_missing_descriptors_is_refused():
    client, server = handshake()
    server.receive_data(b"".join(client.send(Transaction(client.new_txn_id(), 1, 1, False, [], nfds=3))), [10])
    with pytest.raises(ProtocolError, match="descriptors"):
        server.next_event()
    assert server.close() == [10]  # the stray fd goes back to the transport to close


@pytest.mark.parametrize(
    "make",
    [
        lambda: Transaction(-1, 1, 1, False, []),
        lambda: Transaction(1, 1, 2**32, False, []),
        lambda: Transaction(1, 1, 1, "yes", []),
        lambda: Reply(1, message=b"bytes"),
        lambda: Hello(token=5),
        lambda: Welcome(-1, 0, 0),
        lambda: Transaction(1, 1, 1, False, [], nfds=254),
        lambda: Reply.ok(-1, []),
        lambda: Reply.ok(True, []),
        lambda: Reply.ok(1, [], nfds=254),
        lambda: Reply.ok(1, [], nfds=1.0),
    ],
)
def test_events_validate_themselves(make):
    with pytest.raises(ProtocolError):
        make()


def test_a_successful_reply_is_the_full_reply_with_status_ok():
    ok = Reply.ok(7, ["data"], nfds=2)
    assert type(ok) is Reply and ok == Reply(7, 0, 0, "", 0, ["data"], 2)
    assert decode_frames(b"".join(encode_frame(Reply.ok(7, ["data"])))) == [Reply(7, data=["data"])]


def test_frame_limit_leaves_room_for_the_envelope():
    assert MAX_FRAME_SIZE > MAX_TRANSACTION_SIZE


def test_a_call_travels_under_binary_headers_and_a_failure_in_full():
    head, parcel = encode_frame(Transaction(9, 5, 77, True, [1], nfds=2))
    assert head == struct.pack(">IBBHIqq", 24 + len(parcel), 3, 1, 2, 77, 9, 5) and msgpack.unpackb(parcel) == [1]
    head, parcel = encode_frame(Reply(7, data=[1]))
    assert head == struct.pack(">IBBHq", 12 + len(parcel), 4, 0, 0, 7) and msgpack.unpackb(parcel) == [1]
    assert msgpack.unpackb(encode_frame(Reply(7, exception=-3, message="no"))[1]) == [4, 7, 0, -3, "no", 0, None, 0]
    assert decode_frames(b"".join(encode_frame(Reply(7, status=-32, data=[1])))) == [Reply(7, status=-32, data=[1])]


def test_a_transaction_sent_as_an_array_is_refused():
    body = msgpack.packb([3, 1, 1, 1, False, [], 0])
    with pytest.raises(ProtocolError, match="binary header"):
        decode_frames(struct.pack(">I", len(body)) + body)


@settings(max_examples=300)
@given(
    kind=st.sampled_from([3, 4]),
    head=st.binary(min_size=23, max_size=23),
    parcel=parcel_data,
    fds=st.lists(st.integers(100, 200), max_size=3),
)
def test_binary_headers_make_only_events_that_check_themselves(kind, head, parcel, fds):
    """Any bytes under a binary header either make an event its own constructor
    accepts, field for field, or a ProtocolError (validation by the layout, once)."""
    size = 24 if kind == 3 else 12
    body = bytes([kind]) + head[: size - 1] + msgpack.packb(parcel)
    framer_fds = list(fds)
    from framework.binder._wire import _Framer

    framer = _Framer()
    framer.feed(struct.pack(">I", len(body)) + body, framer_fds)
    try:
        event = framer.next()
    except ProtocolError:
        return
    if kind == 3:
        assert event == Transaction(*event)
    else:
        assert event == Reply.ok(event.txn_id, event.data, event.nfds, event.fds) == Reply(*event)
    assert len(event.fds) == event.nfds and event.data == parcel


@pytest.mark.parametrize(
    "head, wrong",
    [
        (struct.pack(">BBHIqq", 3, 2, 0, 1, 1, 1), "oneway"),
        (struct.pack(">BBHIqq", 3, 0, 254, 1, 1, 1), "nfds"),
        (struct.pack(">BBHIqq", 3, 0, 0, 1, -1, 1), "txn_id"),
        (struct.pack(">BBHIqq", 3, 0, 0, 1, 1, -1), "target"),
        (struct.pack(">BBHq", 4, 1, 0, 1), "second byte"),
        (struct.pack(">BBHq", 4, 0, 254, 1), "nfds"),
        (struct.pack(">BBHq", 4, 0, 0, -7), "txn_id"),
        (struct.pack(">BBHI", 3, 0, 0, 1), "no room"),
        (struct.pack(">BBHq", 4, 0, 0, 1), "no room"),
    ],
)
def test_a_bad_binary_header_names_its_field(head, wrong):
    body = head + (msgpack.packb([]) if "room" not in wrong else b"")
    with pytest.raises(ProtocolError, match=wrong):
        decode_frames(struct.pack(">I", len(body)) + body)


@given(
    target=st.integers(0, 2**63 - 1),
    code=u32,
    oneway=st.booleans(),
    data=parcel_data,
    nfds=st.integers(0, 253),
)
def test_send_call_and_send_reply_frame_what_send_frames(target, code, oneway, data, nfds):
    """The hot path's two frames are exactly the events' frames, with the same bookkeeping."""
    client, server = handshake()
    txn_id, frame = client.send_call(target, code, oneway, data, nfds)
    assert frame == b"".join(encode_frame(Transaction(txn_id, target, code, oneway, data, nfds)))
    assert client.pending_count() == (0 if oneway else 1)
    server.receive_data(frame, list(range(100, 100 + nfds)))
    call = server.next_event()
    assert call == Transaction(txn_id, target, code, oneway, data, nfds, tuple(range(100, 100 + nfds)))
    if oneway:
        with pytest.raises(LocalProtocolError):
            server.send_reply(txn_id, data)
        return
    reply = server.send_reply(txn_id, data, nfds)
    assert reply == b"".join(encode_frame(Reply.ok(txn_id, data, nfds)))
    assert server.pending_count() == 0
    with pytest.raises(LocalProtocolError, match="no two-way transaction"):
        server.send_reply(txn_id, data)  # answered once only


@pytest.mark.parametrize(
    "fields, wrong",
    [
        ((-1, 1, False, []), "target"),
        ((1, 2**32, False, []), "code"),
        ((1, 1, 1, []), "oneway"),
        ((1, True, False, []), "code"),
        ((1, 1, False, [object()]), "cannot encode"),
    ],
)
def test_send_call_refuses_bad_fields_and_leaves_no_trace(fields, wrong):
    client, _ = handshake()
    with pytest.raises(ProtocolError, match=wrong):
        client.send_call(*fields)
    assert client.pending_count() == 0
    with pytest.raises(LocalProtocolError):
        Connection(SERVER).send_call(1, 1, False, [])  # only a ready client calls


def test_descriptors_of_a_refused_frame_go_back_to_the_transport():
    client, server = handshake()
    bad = struct.pack(">BBHIqq", 3, 2, 2, 1, 1, 1) + msgpack.packb([])  # oneway is neither 0 nor 1
    server.receive_data(struct.pack(">I", len(bad)) + bad, [10, 11])
    with pytest.raises(ProtocolError, match="oneway"):
        server.next_event()
    assert server.close() == [10, 11]


def _outcome(conn: Connection, data: bytes, via_receive: bool):
    """What ``conn`` makes of one read: its event(s) or error, and its state after."""
    try:
        if via_receive:
            got = [conn.receive(data)]
        else:
            conn.receive_data(data)
            got = [conn.next_event()]
        while got[-1] is not NEED_DATA:
            got.append(conn.next_event())
    except ProtocolError as exc:
        got = [("error", str(exc))]
    return got, conn.state, conn.pending_count(), conn._pos, len(conn._buf)


@settings(max_examples=500, deadline=None)  # a loaded machine is slow, not wrong
@given(
    role=st.sampled_from([SERVER, CLIENT]),
    head=st.tuples(
        st.sampled_from([0, 0, 1, 2]),
        st.sampled_from([0, 0, 0, 1, 254]),
        u32,
        st.integers(-2, 2) | txn_ids,
        st.integers(-2, 2) | st.integers(-(2**63), 2**63 - 1),
    ),
    kind=st.sampled_from([None, None, None, 3, 4, 0]),  # None: the role's own kind
    parcel=parcel_data,
    cut=st.sampled_from([0, 0, 0, 0, -1, 1]),
    extra=st.sampled_from([b"", b"", b"", b"\x00", b"\x00\x00\x00\x01\xc0"]),
    garbage=st.sampled_from([False, False, False, True]),
    in_flight=st.booleans(),
)
def test_receive_of_one_read_is_receive_data_then_next_event(role, head, kind, parcel, cut, extra, garbage, in_flight):
    """``receive`` takes a read holding one whole call frame in one go: whatever the
    read (a good frame, a bad field, a reused or unknown id, garbage for a parcel, a
    frame cut short or followed by more), it makes the same events or the same error
    and leaves the connection as the general way does."""
    if kind is None:
        kind = 3 if role is SERVER else 4
    flag, nfds, code, txn_id, target = head
    body = b"\xc1" if garbage else msgpack.packb(parcel)
    if kind == 3:
        header = struct.pack(">BBHIqq", kind, flag, nfds, code, txn_id, target)
    else:
        header = struct.pack(">BBHq", kind, flag, nfds, txn_id)
    frame = header + body
    data = struct.pack(">I", len(frame) + cut) + frame + extra
    twins = []
    for _ in range(2):
        client, server = handshake()
        conn = server if role is SERVER else client
        if in_flight and txn_id >= 0:  # the id in flight: a reply's to take, a call's to refuse
            conn._pending.add(txn_id)
        twins.append(conn)
    assert _outcome(twins[0], data, True) == _outcome(twins[1], data, False)


def test_receive_takes_a_lone_call_and_its_reply_whole():
    client, server = handshake()
    txn_id, frame = client.send_call(5, 7, False, [1, b"x"])
    assert server.receive(frame) == Transaction(txn_id, 5, 7, False, [1, b"x"])
    assert server.pending_count() == 1
    with pytest.raises(ProtocolError, match="reused while in flight"):
        server.receive(frame)  # the same id again, its call not yet answered
    client, server = handshake()
    txn_id, frame = client.send_call(5, 7, False, [1])
    server.receive(frame)
    reply = server.send_reply(txn_id, [2])
    assert client.receive(reply) == Reply.ok(txn_id, [2]) and client.pending_count() == 0
    with pytest.raises(ProtocolError, match="unknown transaction"):
        client.receive(reply)  # answered already


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=80), pending=st.sets(st.integers(0, 3)), header=st.sampled_from([b"", b"\x03", b"\x04\x00"]))
def test_the_c_frame_cutter_takes_only_what_it_can_and_never_fails_on_bytes(blob, pending, header):
    """``_wirec`` answers any bytes with an event its own constructor accepts or None
    (never an error, never a crash): deciding what is wrong is the Python's."""
    from framework.binder import _wirec

    data = struct.pack(">I", len(header + blob)) + header + blob
    for take, cls in ((_wirec.take_transaction, Transaction), (_wirec.take_reply, Reply)):
        before = set(pending)
        event = take(data, before)
        if event is not None:
            assert type(event) is cls and event == cls(*event) and not event.fds
        for cut in (data[:-1], data + b"\x00"):  # not one whole frame
            assert take(cut, set(pending)) is None
    assert _wirec.take_transaction(bytearray(data), set()) is None  # not bytes: the general way takes it
    with pytest.raises(TypeError):
        _wirec.take_reply(data, frozenset())
    with pytest.raises(TypeError):
        _wirec.frame_call(msgpack.Packer().pack, 1, 2)
    assert _wirec.frame_reply(msgpack.Packer().pack, -1, 0, []) is None
