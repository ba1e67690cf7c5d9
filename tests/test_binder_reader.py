"""The binder's reading role (framework/binder/_reader.py), sans-IO, under property tests.

Two hypothesis state machines play the runtime around a Reader: one a client
connection (callers sending, replies arriving in any order, oneways, stray replies,
cancellation, the peer's death and the watcher), one a server connection (handlers
that block or not, finish, are cancelled, the connection ending). They check after
every step that the role is held by at most one party and never lies free while
someone waits for it, that a party is woken exactly when it stops waiting, and at the
end that every reply reached its own caller once and no live party is left waiting.
A last test walks the whole product of kinds, states and inputs: whatever the table
does not list is refused and changes nothing.
"""

from __future__ import annotations

import itertools
import math
import os

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from framework.binder import Binder, DeadObjectException, MemoryNetwork, interface_class
from framework.binder._reader import (
    _TRANSITIONS,
    ACTIVE,
    CALLER,
    DONE,
    READING,
    WAITING,
    WATCHER,
    WORKER,
    Input,
    Kind,
    Party,
    Reader,
    ReaderError,
    State,
)
from framework.binder._runtime import open_runtime

SETTINGS = settings(max_examples=100, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Reply:
    """What the peer sends back: whose it is, and a serial to tell copies apart."""

    serial = itertools.count()

    def __init__(self, txn_id: int) -> None:
        self.txn_id = txn_id
        self.n = next(self.serial)


class ClientConnection(RuleBasedStateMachine):
    """The runtime's side of a client connection, played step by step."""

    @initialize()
    def start(self) -> None:
        self.reader = Reader(self._wake)
        self.woken: list[Party] = []  # woken, not yet run
        self.waiting: set[Party] = set()  # parties we parked
        self.sending: list[Party] = []  # callers between call() and their send's end
        self.callers: dict[int, Party] = {}  # every two-way call, by txn id
        self.cancelled: set[int] = set()
        self.oneways: set[int] = set()
        self.unanswered: list[int] = []  # two-way calls the peer has not answered yet
        self.stream: list[Reply] = []  # replies sent, not yet read
        self.sent: dict[int, Reply] = {}
        self.dropped: list[Reply] = []  # replies nobody wanted (the runtime closes their fds)
        self.ids = itertools.count(1)
        self.watcher: Party | None = None
        self.hung_up = False
        self.broken = False

    def _wake(self, party: Party) -> None:
        # A party is woken exactly when it leaves WAITING, once per wait.
        assert party in self.waiting, f"woke {party!r}, which was not waiting"
        assert party.state is not WAITING
        self.waiting.discard(party)
        self.woken.append(party)

    # -- callers ---------------------------------------------------------------------

    @rule()
    def begin_call(self) -> None:
        txn_id = next(self.ids)
        party = self.reader.call(txn_id, task=f"task {txn_id}")
        self.callers[txn_id] = party
        if party.state is ACTIVE:
            self.sending.append(party)
            if not self.hung_up:
                self.unanswered.append(txn_id)
        else:  # the connection is lost: the call fails at once
            assert self.reader.lost and party.reply is None

    @rule()
    def oneway(self) -> None:
        self.oneways.add(next(self.ids))  # an id spent, nothing registered, no reply due

    @rule(data=st.data())
    @precondition(lambda self: self.sending)
    def send_done(self, data) -> None:
        party = self.sending.pop(data.draw(st.integers(0, len(self.sending) - 1)))
        if party.state is ACTIVE:
            state = self.reader.read(party)
            assert state is party.state
            if state is WAITING:
                self.waiting.add(party)
        else:
            assert party.state is DONE  # answered or lost while it was sending

    @rule(data=st.data())
    @precondition(lambda self: self.sending)
    def send_fails(self, data) -> None:
        party = self.sending.pop(data.draw(st.integers(0, len(self.sending) - 1)))
        self._cancel(party)

    @rule(data=st.data())
    @precondition(lambda self: self.waiting)
    def cancel_waiting(self, data) -> None:
        party = data.draw(st.sampled_from(sorted(self.waiting, key=id)))
        self.waiting.discard(party)
        self._cancel(party)

    @rule()
    @precondition(lambda self: self.reader.holder is not None and self._running(self.reader.holder))
    def cancel_reader(self) -> None:
        holder = self.reader.holder
        if holder in self.woken:
            self.woken.remove(holder)
        self._cancel(holder)

    def _cancel(self, party: Party) -> None:
        was = party.state
        unread = self.reader.cancel(party)
        assert party.state is DONE
        if party.kind is CALLER:
            self.cancelled.add(party.txn_id)
            if unread is not None:
                assert was is DONE and unread.txn_id == party.txn_id
                self.dropped.append(unread)
        if was is READING:
            assert self.reader.holder is not party

    # -- the peer ----------------------------------------------------------------------

    @rule(data=st.data())
    @precondition(lambda self: self.unanswered and not self.hung_up)
    def peer_replies(self, data) -> None:
        txn_id = self.unanswered.pop(data.draw(st.integers(0, len(self.unanswered) - 1)))
        reply = Reply(txn_id)
        self.sent[txn_id] = reply
        self.stream.append(reply)

    @rule()
    @precondition(lambda self: not self.hung_up)
    def peer_hangs_up(self) -> None:
        self.hung_up = True  # what it sent still counts; it sends nothing more

    @rule()
    @precondition(lambda self: self.hung_up and self.watcher is None)
    def watcher_notices(self) -> None:
        self.watcher = self.reader.watch(task="watcher")
        if self.watcher.state is ACTIVE and self.reader.read(self.watcher) is WAITING:
            self.waiting.add(self.watcher)

    # -- reading -----------------------------------------------------------------------

    def _running(self, party: Party) -> bool:
        """Not parked: the runtime's task for it can act (a woken party has run)."""
        return party not in self.waiting

    @rule()
    @precondition(lambda self: self.woken)
    def woken_runs(self) -> None:
        party = self.woken.pop(0)
        assert party.state in (READING, DONE)
        if party.state is DONE and party.kind is CALLER and party.reply is not None:
            assert party.reply.txn_id == party.txn_id

    @rule()
    @precondition(lambda self: self.reader.holder is not None and self.reader.holder not in self.woken and self.stream)
    def holder_reads(self) -> None:
        holder = self.reader.holder
        reply = self.stream.pop(0)
        txn_id = reply.txn_id
        delivered = self.reader.answer(txn_id, reply)
        if delivered:
            party = self.callers[txn_id]
            assert party.reply is reply and party.state is DONE
            assert txn_id not in self.cancelled
        else:
            # Only a reply whose caller gave up (or a stray one) finds nobody.
            assert txn_id in self.cancelled or txn_id in self.oneways or txn_id not in self.callers
            self.dropped.append(reply)
        if holder.kind is CALLER and holder.txn_id == txn_id:
            assert self.reader.holder is not holder  # it has its reply: the role moved on

    @rule(stray=st.sampled_from(["oneway", "unknown"]))
    @precondition(lambda self: not self.hung_up)
    def peer_sends_a_stray_reply(self, stray) -> None:
        if stray == "oneway" and self.oneways:
            txn_id = min(self.oneways)
        else:
            txn_id = 10_000 + next(self.ids)
        self.stream.append(Reply(txn_id))

    @rule()
    @precondition(lambda self: self.reader.holder is not None and not self.stream and self.hung_up)
    def holder_meets_the_end(self) -> None:
        self._lose()

    @rule()
    def connection_breaks(self) -> None:
        self.broken = True  # what was not read yet is lost with it
        self._lose()

    def _lose(self) -> None:
        self.reader.lose()
        assert self.reader.lost and self.reader.holder is None
        assert not self.waiting, "every waiting party is woken"
        for party in self.callers.values():
            assert party.state is DONE

    # -- what must always hold ----------------------------------------------------------

    @invariant()
    def one_reader_at_most(self) -> None:
        if not hasattr(self, "reader"):
            return
        reading = [p for p in self._all() if p.state is READING]
        assert len(reading) <= 1
        assert reading == ([self.reader.holder] if self.reader.holder else [])

    @invariant()
    def nobody_waits_for_a_free_role(self) -> None:
        if not hasattr(self, "reader"):
            return
        if self.waiting:
            assert self.reader.holder is not None, f"{self.waiting} wait, nobody reads: deadlock"
        if self.reader.lost:
            assert not self.waiting and not [p for p in self._all() if p.state is not DONE]

    def _all(self) -> list[Party]:
        return [*self.callers.values(), *([self.watcher] if self.watcher else [])]

    def teardown(self) -> None:
        if not hasattr(self, "reader"):
            return
        # Run to the end: every send finishes, the peer answers everyone it still
        # can, whoever holds the role reads; then no reply may be lost or misdelivered.
        while self.sending:
            self.send_done(_First())
        if not self.reader.lost:
            if not self.hung_up:
                while self.unanswered:
                    self.peer_replies(_First())
            while True:
                while self.woken:
                    self.woken_runs()
                if not self.stream or self.reader.holder is None:
                    break
                self.holder_reads()
            live = [p for p in self.callers.values() if p.state is not DONE]
            if self.hung_up:
                self._lose()  # the end of the stream
            else:
                assert not live, f"{live} never got their replies"
                assert self.reader.holder is None and not self.waiting
        for txn_id, party in self.callers.items():
            assert party.state is DONE
            if party.reply is not None:
                assert party.reply is self.sent[txn_id], "a reply reached another caller"
            elif not self.broken and txn_id in self.sent and txn_id not in self.cancelled:
                raise AssertionError(f"{party!r} lost its reply")
        for reply in self.dropped:
            party = self.callers.get(reply.txn_id)
            assert party is None or party.reply is not reply


class _First:
    """Stands in for hypothesis' ``data`` when the teardown drives a rule: index 0."""

    def draw(self, strategy) -> int:
        return 0


class ServerConnection(RuleBasedStateMachine):
    """The runtime's side of a server connection: serving tasks and their handlers."""

    MAX_IDLE = 1  # small, so that runs reach it

    @initialize()
    def start(self) -> None:
        self.reader = Reader(self._wake, self._spawn, max_idle=self.MAX_IDLE)
        self.first = self.reader.first_worker(task="first")
        self.parties = [self.first]
        self.waiting: set[Party] = set()
        self.woken: list[Party] = []
        self.busy: list[Party] = []  # finishing a handler that blocked
        self.spawned: list[Party] = []
        self.served = 0

    def _wake(self, party: Party) -> None:
        assert party in self.waiting, f"woke {party!r}, which was not idle"
        assert party.state is not WAITING
        self.waiting.discard(party)
        self.woken.append(party)

    def _spawn(self, party: Party) -> None:
        assert party.kind is WORKER and party.state is READING and party is self.reader.holder
        assert not self.waiting, "a new task while one idles: the idle one must be handed the role"
        self.spawned.append(party)
        self.parties.append(party)

    @rule(blocks=st.booleans(), oneway=st.booleans())
    @precondition(lambda self: not self.reader.lost and self.reader.holder not in self.woken)
    def holder_serves_a_call(self, blocks, oneway) -> None:
        holder = self.reader.holder
        self.served += 1  # oneway or not, the reading role does the same
        if blocks:
            self.reader.block()
            assert holder.state is ACTIVE and self.reader.holder is not holder
            self.busy.append(holder)

    @rule(data=st.data(), cancelled=st.booleans())
    @precondition(lambda self: self.busy)
    def handler_finishes(self, data, cancelled) -> None:
        party = self.busy.pop(data.draw(st.integers(0, len(self.busy) - 1)))
        if cancelled:
            assert self.reader.cancel(party) is None and party.state is DONE
            return
        idle_before = len(self.reader._idle)
        state = self.reader.idle(party)
        if state is WAITING:
            self.waiting.add(party)
        else:
            assert self.reader.lost or idle_before >= self.MAX_IDLE

    @rule(data=st.data())
    @precondition(lambda self: self.waiting)
    def idle_task_cancelled(self, data) -> None:
        party = data.draw(st.sampled_from(sorted(self.waiting, key=id)))
        self.waiting.discard(party)
        self.reader.cancel(party)
        assert party.state is DONE

    @rule()
    @precondition(lambda self: self.woken)
    def woken_runs(self) -> None:
        party = self.woken.pop(0)
        assert party.state in (READING, DONE)

    @rule()
    def connection_ends(self) -> None:
        self.reader.lose()
        assert not self.waiting and self.reader.holder is None

    @rule()
    def the_role_is_not_handed_out_twice(self) -> None:
        with pytest.raises(ReaderError):
            self.reader.first_worker(task="another")

    @invariant()
    def the_role_is_always_held(self) -> None:
        if not hasattr(self, "reader"):
            return
        reading = [p for p in self.parties if p.state is READING]
        if self.reader.lost:
            assert not reading and not self.waiting
            assert all(p.state in (ACTIVE, DONE) for p in self.parties)
        else:
            # A server must always be reading: the next call may be the one that
            # unblocks every handler waiting now.
            assert reading == [self.reader.holder]
        assert len(self.reader._idle) <= self.MAX_IDLE
        assert set(self.reader._idle) == self.waiting


TestClientConnection = ClientConnection.TestCase
TestClientConnection.settings = SETTINGS
TestServerConnection = ServerConnection.TestCase
TestServerConnection.settings = SETTINGS


def test_the_table_refuses_every_transition_it_does_not_list():
    for kind, state, what in itertools.product(Kind, State, Input):
        party = Party(kind, state)
        if (kind, state, what) in _TRANSITIONS:
            assert Reader._move(party, what) is _TRANSITIONS[kind, state, what]
            continue
        with pytest.raises(ReaderError, match=f"{kind.value} cannot {what.value} while {state.value}"):
            Reader._move(party, what)
        assert party.state is state  # refused, and nothing moved


def test_the_table_lets_every_party_end():
    # From every state a party of each kind can reach, some path leads to DONE.
    for kind in Kind:
        reached, todo = set(), [ACTIVE, READING] if kind is WORKER else [ACTIVE]
        while todo:
            state = todo.pop()
            if state in reached:
                continue
            reached.add(state)
            todo += [s for (k, s0, _), s in _TRANSITIONS.items() if k is kind and s0 is state]
        for state in reached - {DONE}:
            assert _ends(kind, state), f"a {kind.value} {state.value} can never end"


def _ends(kind: Kind, state: State, seen: frozenset = frozenset()) -> bool:
    if state is DONE:
        return True
    nexts = {s for (k, s0, _), s in _TRANSITIONS.items() if k is kind and s0 is state} - seen - {state}
    return any(_ends(kind, s, seen | {state}) for s in nexts)


def test_the_api_refuses_what_the_role_does_not_allow():
    woken = []
    reader = Reader(woken.append)
    with pytest.raises(ReaderError, match="read by nobody"):
        reader.answer(1, object())
    with pytest.raises(ReaderError, match="nobody holding the role"):
        reader.block()
    caller = reader.call(1, task="a")
    with pytest.raises(ReaderError, match="already waiting"):
        reader.call(1, task="b")
    assert reader.read(caller) is READING
    with pytest.raises(ReaderError, match="caller cannot queue while reading"):
        reader.read(caller)
    with pytest.raises(ReaderError, match="caller cannot block while reading"):
        reader.block()  # a client's holder never blocks: it serves no handler
    reader.watch(task="w")
    with pytest.raises(ReaderError, match="one watcher"):
        reader.watch(task="w2")
    server = Reader(woken.append)
    worker = server.first_worker(task="t")
    with pytest.raises(ReaderError, match="worker cannot cancel while reading"):
        server.cancel(worker)  # the server's holder leaves only by blocking or the end
    with pytest.raises(ReaderError, match="worker cannot idle while reading"):
        server.idle(worker)
    assert woken == []


def test_a_lone_call_reads_its_own_reply_and_frees_the_role():
    woken = []
    reader = Reader(woken.append)
    party = reader.call(7, task="t")
    assert reader.read(party) is READING and reader.holder is party
    reply = Reply(7)
    assert reader.answer(7, reply)
    assert party.state is DONE and party.reply is reply
    assert reader.holder is None and woken == []  # no task switch, nobody woken


def test_the_watcher_is_handed_the_role_before_waiting_callers():
    woken = []
    reader = Reader(woken.append)
    first, second = reader.call(1, task="1"), reader.call(2, task="2")
    assert reader.read(first) is READING
    assert reader.read(second) is WAITING
    watcher = reader.watch(task="w")
    assert reader.read(watcher) is WAITING
    assert reader.answer(1, Reply(1))
    assert woken == [watcher] and reader.holder is watcher
    reader.lose()
    assert woken == [watcher, second] and second.state is DONE and second.reply is None


# ---------------------------------------------------------------------------------
# The same, end to end: a client and a server runtime over the in-memory network.

PLAN = st.lists(
    st.fixed_dictionaries(
        {
            "oneway": st.booleans(),
            "start_ms": st.integers(0, 20),
            "work_ms": st.sampled_from([0, 0, 1, 5, 30]),  # 0: the handler never waits
            "cancel_ms": st.none() | st.integers(0, 40),
            "fd": st.booleans(),  # the reply carries a descriptor
        }
    ),
    min_size=1,
    max_size=12,
)
CODE_WORK, CODE_NOTE = 1, 2


class Worker(Binder):
    """Answers [id] with [id, "done"] after work_ms (and a pipe's end, if asked);
    notes oneway ids in the order they are served."""

    def __init__(self) -> None:
        super().__init__()
        self.notes: list[int] = []

    async def onTransact(self, code, data, ctx):  # noqa: N802
        call_id, work_ms, fd = data
        if work_ms:
            await trio.sleep(work_ms / 1000)
        if code == CODE_NOTE:
            self.notes.append(call_id)
            return None
        if fd:
            ctx.write_fd(fd_source)
        return [call_id, "done"]


fd_source = -1


async def _allow(runtime, pid, token):
    await trio.lowlevel.checkpoint()
    return 10_000 + pid


async def _interleave(plan: list[dict], death_ms: int | None) -> None:
    net = MemoryNetwork()
    server_pid, client_pid = net.spawn(), net.spawn()
    worker = Worker()
    outcomes: dict[int, object] = {}
    oneways_sent: list[int] = []
    with trio.fail_after(30):  # virtual seconds: a call nobody reads for would hang here
        async with trio.open_nursery() as nursery:
            server_scope = trio.CancelScope()
            server_up = trio.Event()

            async def server():
                with server_scope:
                    async with open_runtime(
                        network=net, pid=server_pid, uid=1000, resolver=_allow, interfaces=interface_class, address="server"
                    ) as rt:
                        rt.export(worker)
                        server_up.set()
                        await trio.sleep_forever()

            nursery.start_soon(server)
            await server_up.wait()
            async with open_runtime(
                network=net, pid=client_pid, uid=10_001, resolver=_allow, interfaces=interface_class
            ) as client:
                proxy = client.proxy("server", worker._object_id)

                async def call(i: int, step: dict) -> None:
                    await trio.sleep(step["start_ms"] / 1000)
                    data = [i, step["work_ms"], step["fd"]]
                    deadline = math.inf if step["cancel_ms"] is None else trio.current_time() + step["cancel_ms"] / 1000
                    with trio.CancelScope(deadline=deadline) as scope:
                        try:
                            reply = await proxy.transact(CODE_WORK, data)
                        except DeadObjectException:
                            outcomes[i] = "dead"
                            return
                        for fd in reply.fds:
                            os.close(fd)
                        outcomes[i] = reply.data
                    if scope.cancelled_caught:
                        outcomes[i] = "cancelled"

                async def send_oneways() -> None:
                    # One task sends them, so that "the order they were sent" is defined.
                    for i, step in enumerate(plan):
                        if step["oneway"]:
                            await trio.sleep(step["start_ms"] / 1000)
                            try:
                                await proxy.transact(CODE_NOTE, [i, step["work_ms"], False], oneway=True)
                            except DeadObjectException:
                                outcomes[i] = "dead"
                                return
                            oneways_sent.append(i)
                            outcomes[i] = "sent"

                async with trio.open_nursery() as callers:
                    callers.start_soon(send_oneways)
                    for i, step in enumerate(plan):
                        if not step["oneway"]:
                            callers.start_soon(call, i, step)
                    if death_ms is not None:
                        await trio.sleep(death_ms / 1000)
                        server_scope.cancel()  # the server process dies
            await trio.sleep(1)  # let the oneways that were sent be served
            server_scope.cancel()
    for i, step in enumerate(plan):
        got = outcomes.get(i, "not sent")  # a oneway after one that met the death
        if step["oneway"]:
            assert got in ("sent", "dead", "not sent")
        elif got not in ("dead", "cancelled"):
            assert got == [i, "done"], f"call {i} got {got!r}: another call's reply"
        if got == "dead":
            assert death_ms is not None
        if got == "cancelled":
            assert step["cancel_ms"] is not None
    if death_ms is None:
        assert all(outcomes[i] != "dead" for i in outcomes)
    # Oneways on one connection are served in the order they were sent (all of them,
    # unless the server died first).
    assert worker.notes == oneways_sent[: len(worker.notes)]
    if death_ms is None:
        assert worker.notes == oneways_sent


@given(plan=PLAN, death_ms=st.none() | st.integers(0, 40))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_interleaving_of_calls_cancellations_and_death_delivers_each_reply_to_its_caller(plan, death_ms):
    global fd_source
    r, w = os.pipe()
    fd_source = w
    try:
        before = len(os.listdir("/proc/self/fd"))
        trio.run(_interleave, plan, death_ms, clock=trio.testing.MockClock(autojump_threshold=0))
        # Every reply's descriptor was closed by its caller or, if nobody took the
        # reply (cancelled, or the connection ended), by the runtime.
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        os.close(r)
        os.close(w)
