"""Partial work played out with message latency (no MPI): the master's MasterState and each
worker's real Inbox, messages delayed at random (in order on each channel), pieces at each
worker's speed, a straggler slow or moving. The simulator hands each message over at once and
lines iterations up; this model lets ASSIGNs cross results, ITERATEs queue behind a straggler's
piece and stale results come in late, as they do over MPI. A run that stops with the iteration
not decoded and nothing left in flight is a hang, which the MPI runs can only time out on."""

from __future__ import annotations

import heapq
import itertools
from collections import deque

import numpy as np
import pytest

from mpicoded.codes import make_code
from mpicoded.codes.partial import partial_code
from mpicoded.runtime.inbox import Inbox
from mpicoded.runtime.protocol import (
    Message,
    Tag,
    iterate_fields,
    pack_assign,
    pack_control,
    pack_iterate,
    unpack,
)
from mpicoded.runtime.state import (
    Decoded,
    MasterState,
    Recode,
    SendAssign,
    SendIterate,
    SendPurge,
)

RANK = 1  # every model worker reads its list as comm rank 1 of the ITERATE


class ModelWorker:
    """One worker's loop over partial work, as ``Worker.run`` and ``run_iteration`` go: the
    Inbox decides what is started, a piece is computed between reads, and the pieces done are
    sent together (every ``flush`` of model time, before taking an ASSIGN, at the list's end;
    lost if the iteration is dropped first)."""

    def __init__(self, index: int, send, flush: float) -> None:
        self.index, self.send, self.flush = index, send, flush
        self.arrived: deque[Message] = deque()
        self.inbox = Inbox(self.poll, lambda _: None, rank=RANK)
        self.msg: Message | None = None  # the iteration it runs
        self.queue: deque[int] = deque()
        self.done: set[int] = set()  # this iteration's pieces computed
        self.unsent: list[int] = []
        self.last_sent = 0.0
        self.busy = False  # a piece under way
        self.ahead = 0  # iterations started with a list ASSIGNed before they began

    def poll(self) -> Message | None:
        return self.arrived.popleft() if self.arrived else None

    def send_done(self, now: float) -> None:
        if self.unsent:
            assert self.msg is not None
            self.send(self.index, self.msg, self.unsent)
            self.unsent, self.last_sent = [], now

    def finished(self, task: int, now: float) -> None:
        """A piece computed: sent now if the last send is ``flush`` old."""
        self.busy = False
        self.done.add(task)
        self.unsent.append(task)
        if now - self.last_sent >= self.flush:
            self.send_done(now)

    def next_piece(self, now: float) -> int | None:
        """Between pieces (or idle): what to compute next, None to wait for a message."""
        inbox = self.inbox
        if self.msg is not None:
            if inbox.dropped():
                self.msg, self.unsent = None, []
            elif inbox.assigned is not None:
                self.send_done(now)
                self.queue = deque(t for t in inbox.take_assigned() if t not in self.done)
            if self.msg is not None and self.queue:
                return self.queue.popleft()
            if self.msg is not None:
                self.send_done(now)
            inbox.close_current()
            self.msg = None
        if not (inbox.pending or self.arrived):
            return None
        msg = inbox.next_iteration()
        if msg is None:
            return None
        if inbox.assigned is not None:  # resumed with pieces handed over
            tasks = inbox.take_assigned()
        else:
            tasks = inbox.take_ahead(msg)
            self.ahead += tasks is not None
            if tasks is None:
                tasks = iterate_fields(msg, RANK)[0]
            self.done = set()
        self.msg, self.queue = msg, deque(t for t in tasks if t not in self.done)
        return self.next_piece(now)


class Model:
    """The master and ``n`` workers on one event heap of model time."""

    def __init__(self, code, speeds, latency: float, seed: int, flush: float = 0.0) -> None:
        self.code, self.speeds, self.latency = code, speeds, latency
        self.rng = np.random.default_rng(seed)
        self.state = MasterState(code)
        self.workers = [ModelWorker(w, self.result, flush) for w in range(code.n_workers)]
        self.heap: list[tuple[float, int, str, int, object]] = []
        self.order = itertools.count()
        self.channel: dict[tuple[str, int], float] = {}  # last arrival on each channel
        self.now = 0.0
        self.decoded = 0

    def push(self, at: float, kind: str, w: int, what: object) -> None:
        heapq.heappush(self.heap, (at, next(self.order), kind, w, what))

    def send(self, kind: str, w: int, what: object) -> None:
        """A message after a random latency, never before the last one on its channel."""
        at = max(self.now + self.rng.exponential(self.latency), self.channel.get((kind, w), 0))
        self.channel[kind, w] = at
        self.push(at, kind, w, what)

    def result(self, w: int, msg: Message, tasks: list[int]) -> None:
        self.send("from", w, (msg.job, msg.iteration, msg.epoch, list(tasks)))

    def to_worker(self, tag: Tag, w: int, buf: np.ndarray) -> None:
        self.send("to", w, unpack(tag, buf))

    def execute(self, actions) -> None:
        for a in actions:
            if isinstance(a, SendIterate):
                self.to_worker(Tag.ITERATE, a.worker, pack_iterate(
                    a.job, a.iteration, np.zeros(1), {RANK: a.tasks}, a.epoch))
            elif isinstance(a, SendAssign):
                self.to_worker(Tag.ASSIGN, a.worker,
                               pack_assign(a.job, a.iteration, a.tasks, a.epoch))
            elif isinstance(a, SendPurge):
                self.to_worker(Tag.PURGE, a.worker, pack_control(a.job, a.iteration,
                                                                  epoch=a.epoch))
            elif isinstance(a, Decoded):
                self.decoded += 1
                self.execute(self.state.start_iteration(0, self.decoded, self.now))
            else:
                assert not isinstance(a, Recode), a

    def wake(self, worker: ModelWorker) -> None:
        """The worker looks at what has arrived and starts its next piece, if any."""
        if worker.busy:
            return
        task = worker.next_piece(self.now)
        if task is not None:
            worker.busy = True
            took = self.rng.exponential(1.0 / self.speeds(worker.index, self.now))
            self.push(self.now + took, "piece", worker.index, task)

    def run(self, iterations: int, limit: int = 200_000) -> None:
        self.execute(self.state.start_iteration(0, 0, 0.0))
        for _ in range(limit):
            if self.decoded >= iterations:
                return
            if not self.heap:
                raise AssertionError(f"hang at model time {self.now:.1f}: "
                                     f"{self.state.describe()}")
            self.now, _, kind, w, what = heapq.heappop(self.heap)
            worker = self.workers[w]
            if kind == "to":
                worker.arrived.append(what)
                self.wake(worker)
            elif kind == "piece":
                worker.finished(what, self.now)
                self.wake(worker)
            else:  # results at the master
                job, iteration, epoch, tasks = what
                self.execute(self.state.on_result(w, job, iteration, tasks, None, self.now,
                                                  epoch))
        raise AssertionError(f"no progress in {limit} events: {self.state.describe()}")


def fixed(slow: tuple[int, ...], factor: float = 20.0):
    return lambda w, now: 1.0 / factor if w in slow else 1.0


def moving(n: int, period: float, factor: float = 20.0):
    return lambda w, now: 1.0 / factor if w == int(now // period) * 7 % n else 1.0


PATTERNS = {"none": lambda n: fixed(()), "fixed": lambda n: fixed((2,)),
            "two fixed": lambda n: fixed((2, 5)), "moving": lambda n: moving(n, 15.0)}


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize(("name", "params"), [("gfrc", {"stragglers": 2}),
                                              ("frc", {"stragglers": 3}),
                                              ("spread", {"stragglers": 2})])
def test_partial_work_never_hangs_under_message_latency(name, params, pattern):
    """Every iteration decodes, whatever order the messages cross in: 20 workers, latency a
    third of a piece, results sent one by one and coalesced, two seeds."""
    code = make_code(name, 20, **params)
    part = partial_code(code, [400] * code.n_partitions, 100)
    for seed, flush in ((0, 0.0), (1, 3.0)):
        model = Model(part, PATTERNS[pattern](20), latency=0.3, seed=seed, flush=flush)
        model.run(25)
        assert model.decoded == 25


def test_a_worker_assigned_pieces_before_it_began_runs_them():
    """The master hands a worker that looks idle pieces while its ITERATE is still in flight
    (a straggler's pieces were taken by others, and it is handed some back): both are read
    together and the ASSIGNed list is the one run (it used to be dropped, and the worker ran
    the ITERATE's own list, pieces the master had given to others)."""
    code = make_code("gfrc", 20, stragglers=2)
    part = partial_code(code, [400] * code.n_partitions, 100)
    model = Model(part, PATTERNS["moving"](20), latency=0.3, seed=0)
    model.run(25)
    assert sum(w.ahead for w in model.workers) > 0
