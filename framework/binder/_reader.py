"""Who reads a binder connection, sans-IO: the reading role as a state machine.

A connection is a byte stream that one task at a time may read (trio allows one
waiter per socket; and a frame must be read whole, by someone). Yet many tasks
take part in it: on the client, every caller waiting for its reply; on the
server, every task serving a call. Rather than give each connection a reader task
that hands what it reads to the others (a task switch per message, at each end),
the tasks that wait take turns reading (leader/follower, as in ACE's reactor or
binder's own looper threads). Whoever holds the *reading role* reads for
everyone:

- On a **client**, a caller that finds nobody reading reads its reply itself: a
  lone call gets its reply with no task switch. Replies it meets for other callers
  it hands to them; when its own comes, it passes the role to a caller still
  waiting (or to the watcher, the connection's own task, which reads what a dead
  peer said before it went), or leaves it free.
- On a **server**, the task holding the role reads a call and runs the handler
  itself. The moment the handler has to wait, it gives the role up (to an idle
  task, or a new one) and finishes the handler; then it idles until it is handed
  the role again, or retires when enough others idle already.

This module is that bookkeeping and nothing else: no trio, no socket. Each task
taking part is a :class:`Party`, in one of four states; what may happen to it
(:class:`Input`) in each state is listed once, in ``_TRANSITIONS``, and anything
absent is a :class:`ReaderError` (a bug in the runtime, never the peer's doing:
the peer's mistakes are :mod:`._wire`'s to catch). The runtime (``_runtime``)
does the I/O and tells the :class:`Reader` what happened; the reader moves the
parties and calls back ``wake(party)`` for each party it takes out of
``WAITING`` (the runtime reschedules its task: a party is woken exactly when it
leaves ``WAITING``) and ``spawn(party)`` for a new server party given the role
(the runtime starts a task for it). The property tests drive it with arbitrary
interleavings (tests/test_binder_reader.py).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

__all__ = [
    "Input",
    "Kind",
    "Party",
    "Reader",
    "ReaderError",
    "State",
]


class Kind(enum.Enum):
    CALLER = "caller"  # client: a two-way call, from its send until it has its reply
    WATCHER = "watcher"  # client: the connection's task, once the peer has hung up
    WORKER = "worker"  # server: a task that reads calls and serves them

    __hash__ = object.__hash__  # members are singletons; Enum's own hash is Python code


class State(enum.Enum):
    ACTIVE = "active"  # running its own code: sending its call, finishing a handler
    WAITING = "waiting"  # parked until woken: for its reply or the role, or idle
    READING = "reading"  # holds the reading role (at most one party does)
    DONE = "done"  # out: has its reply, or the connection is over, or gave up

    __hash__ = object.__hash__


class Input(enum.Enum):
    TAKE = "take"  # wants to read, and the role is free: it takes it
    QUEUE = "queue"  # wants to read (or its reply), and another party reads: it waits
    HAND = "hand"  # the role is handed to it
    ANSWER = "answer"  # its reply was read
    BLOCK = "block"  # its handler has to wait: it gives the role up and finishes the handler
    IDLE = "idle"  # its handler is done: it waits to be handed the role again
    RETIRE = "retire"  # its handler is done and enough others idle (or the connection is over)
    CANCEL = "cancel"  # it gives up (cancelled, or its call could not be sent)
    LOSE = "lose"  # the connection is over

    __hash__ = object.__hash__


CALLER, WATCHER, WORKER = Kind.CALLER, Kind.WATCHER, Kind.WORKER
ACTIVE, WAITING, READING, DONE = State.ACTIVE, State.WAITING, State.READING, State.DONE
TAKE, QUEUE, HAND, ANSWER = Input.TAKE, Input.QUEUE, Input.HAND, Input.ANSWER
BLOCK, IDLE, RETIRE, CANCEL, LOSE = Input.BLOCK, Input.IDLE, Input.RETIRE, Input.CANCEL, Input.LOSE

# (kind, state, input) -> next state. Leaving WAITING wakes the party; leaving
# READING passes the role on (or, on LOSE, ends it). Nothing else is allowed.
_TRANSITIONS: dict[tuple[Kind, State, Input], State] = {
    # A caller sends, then reads or waits; its reply may come in any of these states.
    (CALLER, ACTIVE, TAKE): READING,
    (CALLER, ACTIVE, QUEUE): WAITING,
    (CALLER, ACTIVE, ANSWER): DONE,  # the reply beat its send's return
    (CALLER, ACTIVE, CANCEL): DONE,
    (CALLER, ACTIVE, LOSE): DONE,
    (CALLER, WAITING, HAND): READING,
    (CALLER, WAITING, ANSWER): DONE,
    (CALLER, WAITING, CANCEL): DONE,
    (CALLER, WAITING, LOSE): DONE,
    (CALLER, READING, ANSWER): DONE,  # read its own reply
    (CALLER, READING, CANCEL): DONE,
    (CALLER, READING, LOSE): DONE,
    (CALLER, DONE, CANCEL): DONE,  # gave up once settled: the runtime drops the reply
    # The watcher reads only once the peer has hung up, to the end of the stream.
    (WATCHER, ACTIVE, TAKE): READING,
    (WATCHER, ACTIVE, QUEUE): WAITING,
    (WATCHER, ACTIVE, CANCEL): DONE,
    (WATCHER, ACTIVE, LOSE): DONE,
    (WATCHER, WAITING, HAND): READING,
    (WATCHER, WAITING, CANCEL): DONE,
    (WATCHER, WAITING, LOSE): DONE,
    (WATCHER, READING, CANCEL): DONE,
    (WATCHER, READING, LOSE): DONE,
    # A server task reads and serves until a handler blocks, then finishes it and
    # idles or retires. The server's role never lies free while the connection
    # lasts, so its holder leaves READING only by BLOCK (handing it on) or LOSE.
    (WORKER, READING, BLOCK): ACTIVE,
    (WORKER, READING, LOSE): DONE,
    (WORKER, ACTIVE, IDLE): WAITING,
    (WORKER, ACTIVE, RETIRE): DONE,
    (WORKER, ACTIVE, CANCEL): DONE,
    (WORKER, WAITING, HAND): READING,
    (WORKER, WAITING, CANCEL): DONE,
    (WORKER, WAITING, LOSE): DONE,
}


# Reader.answer's shortcut for a lone caller's own reply assumes this.
if _TRANSITIONS[(CALLER, READING, ANSWER)] is not DONE:
    raise RuntimeError("Reader.answer's shortcut assumes a caller that reads its own reply is done")


class ReaderError(RuntimeError):
    """The runtime asked for a transition the reading role does not allow (a bug here)."""


class Party:
    """One task taking part in a connection's reading.

    ``task`` is the runtime's handle on it (opaque here: what ``wake`` needs, so
    the runtime may set it as late as just before the party waits);
    a caller's ``reply`` is set when its reply is read (None when the connection
    was lost before it came).
    """

    __slots__ = ("kind", "state", "task", "txn_id", "reply")

    def __init__(self, kind: Kind, state: State, task: Any = None, txn_id: int = 0) -> None:
        self.kind = kind
        self.state = state
        self.task = task
        self.txn_id = txn_id
        self.reply: Any = None

    def __repr__(self) -> str:
        txn = f" txn {self.txn_id}" if self.kind is CALLER else ""
        return f"<Party {self.kind.value}{txn} {self.state.value}>"


def _noop(party: Party) -> None:
    pass


class Reader:
    """The reading role of one connection, and the parties that share it.

    ``wake(party)`` is called for every party taken out of ``WAITING``;
    ``spawn(party)`` (servers) for a new party given the role. ``max_idle`` is how
    many server parties may idle at once; more retire.
    """

    __slots__ = ("holder", "lost", "_calls", "_waiting", "_idle", "_watcher", "_wake", "_spawn", "_max_idle")

    def __init__(
        self,
        wake: Callable[[Party], None],
        spawn: Callable[[Party], None] = _noop,
        *,
        max_idle: int = 4,
    ) -> None:
        self.holder: Party | None = None  # the party holding the role
        self.lost = False
        self._calls: dict[int, Party] = {}  # callers not yet answered, by txn id
        self._waiting: dict[Party, None] = {}  # callers waiting, in the order they began to
        self._idle: list[Party] = []  # server parties waiting for the role
        self._watcher: Party | None = None
        self._wake = wake
        self._spawn = spawn
        self._max_idle = max_idle

    def __repr__(self) -> str:
        state = "lost" if self.lost else f"held by {self.holder!r}" if self.holder else "free"
        return f"<Reader {state}, {len(self._calls)} calls, {len(self._idle)} idle>"

    # -- what the table allows ---------------------------------------------------

    @staticmethod
    def _move(party: Party, what: Input) -> State:
        state = _TRANSITIONS.get((party.kind, party.state, what))
        if state is None:
            raise ReaderError(f"a {party.kind.value} cannot {what.value} while {party.state.value}")
        party.state = state
        return state

    # -- parties -------------------------------------------------------------------

    def call(self, txn_id: int, task: Any = None) -> Party:
        """A two-way call about to be sent; its reply will come under ``txn_id``.

        Once the connection is lost, the call is DONE at once with no reply.
        """
        party = Party(CALLER, ACTIVE, task, txn_id)
        if self.lost:
            party.state = DONE
            return party
        if txn_id in self._calls:
            raise ReaderError(f"transaction {txn_id} is already waiting for its reply")
        self._calls[txn_id] = party
        return party

    def watch(self, task: Any = None) -> Party:
        """The client connection's own task, which reads once the peer has hung up."""
        if self._watcher is not None:
            raise ReaderError("a connection has one watcher")
        party = self._watcher = Party(WATCHER, DONE if self.lost else ACTIVE, task)
        return party

    def first_worker(self, task: Any = None) -> Party:
        """The server connection's first task, holding the role from the start."""
        if self.holder is not None or self.lost:
            raise ReaderError("the role is not free for a first worker")
        party = self.holder = Party(WORKER, READING, task)
        return party

    # -- client and server -----------------------------------------------------------

    def read(self, party: Party) -> State:
        """``party`` wants to read (or its reply): it takes the free role, or waits."""
        if self.holder is None:
            self._move(party, TAKE)
            self.holder = party
            return READING
        self._move(party, QUEUE)
        if party.kind is CALLER:
            self._waiting[party] = None
        return WAITING

    def answer(self, txn_id: int, reply: Any) -> bool:
        """The holder read ``reply`` for call ``txn_id``. False: nobody waits for it."""
        holder = self.holder
        if holder is None:
            raise ReaderError("a reply read by nobody holding the role")
        party = self._calls.pop(txn_id, None)
        if party is None:
            return False
        if party is holder and not self._waiting and self._watcher is None:
            # A lone call read its own reply (most calls): READING -> DONE, and the
            # role is free, as _move and _pass would have it (checked at import).
            party.state = DONE
            party.reply = reply
            self.holder = None
            return True
        was = party.state
        self._move(party, ANSWER)
        party.reply = reply
        if was is WAITING:
            del self._waiting[party]
            self._wake(party)
        elif was is READING:
            self._pass()
        return True

    def cancel(self, party: Party) -> Any:
        """``party`` gives up. Returns the reply it leaves unread (its descriptors
        are the runtime's to close), if it had one."""
        was = party.state
        self._move(party, CANCEL)
        if party.kind is CALLER:
            self._calls.pop(party.txn_id, None)
            if was is WAITING:
                del self._waiting[party]
        elif was is WAITING and party.kind is WORKER:
            self._idle.remove(party)
        if was is READING:
            self._pass()
        reply, party.reply = party.reply, None
        return reply

    def lose(self) -> None:
        """The connection is over: every party still in play is DONE (callers with
        no reply) and those waiting are woken. Losing twice changes nothing."""
        if self.lost:
            return
        self.lost = True
        parties = list(self._calls.values())
        parties += self._idle
        if self._watcher is not None and self._watcher.state is not DONE:
            parties.append(self._watcher)
        holder, self.holder = self.holder, None
        if holder is not None and holder not in parties:
            parties.append(holder)
        self._calls.clear()
        self._waiting.clear()
        self._idle.clear()
        for party in parties:
            was = party.state
            self._move(party, LOSE)
            if was is WAITING:
                self._wake(party)

    # -- server ----------------------------------------------------------------------

    def block(self) -> None:
        """The holder's handler is about to wait: the role goes to an idle party, or
        to a new one (``spawn``), while the holder finishes the handler."""
        holder = self.holder
        if holder is None:
            raise ReaderError("a handler blocked with nobody holding the role")
        self._move(holder, BLOCK)
        if self._idle:
            party = self._idle.pop()
            self._move(party, HAND)
            self.holder = party
            self._wake(party)
        else:
            party = self.holder = Party(WORKER, READING)
            self._spawn(party)

    def idle(self, party: Party) -> State:
        """``party``'s handler is done: it waits for the role (WAITING), or retires
        (DONE) if ``max_idle`` parties idle already or the connection is over."""
        if self.lost or len(self._idle) >= self._max_idle:
            self._move(party, RETIRE)
            return DONE
        self._move(party, IDLE)
        self._idle.append(party)
        return WAITING

    # -- inside --------------------------------------------------------------------

    def _pass(self) -> None:
        """The holder left READING: hand the role to the watcher if it waits, else
        to the caller that has waited longest, else leave it free."""
        watcher = self._watcher
        if watcher is not None and watcher.state is WAITING:
            party = watcher
        elif self._waiting:
            party = next(iter(self._waiting))
            del self._waiting[party]
        else:
            self.holder = None
            return
        self._move(party, HAND)
        self.holder = party
        self._wake(party)

    # -- for tests and tools -------------------------------------------------------------

    def parties(self) -> list[Party]:
        """Every party still in play (not DONE)."""
        seen: dict[int, Party] = {}
        for party in (*self._calls.values(), *self._idle, self._watcher, self.holder):
            if party is not None and party.state is not DONE:
                seen[id(party)] = party
        return list(seen.values())
