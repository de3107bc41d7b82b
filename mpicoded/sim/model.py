"""A model of the cluster for checking the Session (pure: no MPI), in the manner of a model
checker: the real Session, and workers that run the real worker logic (``Inbox``, ``PieceList``)
on the real wire format, with message latency (in order on each channel), speeds that vary
(fixed, moving and several stragglers), workers that die or freeze at any moment, and
``--iteration-timeout``. ``sim/checks.py`` plays it over many seeded interleavings.

A run must end with every STOP acknowledged (or a frozen worker given up on), every iteration
decoded, and theta equal to serial gradient descent: each partition j's value is A_j theta + b_j
(the sum over its rows), so a result of a stale theta, a row counted twice or missed shows. A
heap that runs dry before the end is a hang: some piece still needed waits on a worker that
will never compute it.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Any

import numpy as np

from ..codes import Code
from ..core import events as ev
from ..core.holdback import SUPERSEDED, Held, HoldBack
from ..core.inbox import Inbox
from ..core.piecelist import PieceList, Runs
from ..core.protocol import (
    Message,
    Tag,
    assign_fields,
    iterate_fields,
    pack_assign,
    pack_control,
    pack_iterate,
    unpack,
)
from ..core.session import Session
from ..core.settings import Settings
from ..core.tree_messages import pack_reduce, relay_children, relay_of
from .linear import Linear
from .model_workers import ModelWorker, Speeds, Workers


class Model(Workers):
    """The Session and the workers of ``code`` (partial work if ``pieces``) on one heap."""

    def __init__(self, code: Code, seed: int, speeds: Speeds, pieces: bool = True,
                 iterations: int = 8, latency: float = 0.3, rows: int = 48, chunk: int = 3,
                 deaths: tuple[tuple[float, int], ...] = (), freezes: tuple[tuple[float, int], ...]
                 = (), timeout: float | None = None, flush: float = 0.0,
                 hold_back: bool = False, run_rows: int = 0, reduce: bool = False,
                 relay: bool = False, nodes: tuple[int, ...] = ()) -> None:
        self.rng = np.random.default_rng(seed)
        k = code.n_partitions
        n_rows = rows * k
        a = self.rng.uniform(0, 1, n_rows) / n_rows
        b = self.rng.standard_normal((n_rows, 2)) / n_rows
        self.work = Linear(code, a, b, [len(r) for r in np.array_split(np.arange(n_rows), k)])
        cut = self.work.pieces(chunk) if pieces else None
        self.session = Session(Settings(code, self.work, cut, chunk, iterations=iterations,
                                        loss_every=0, iteration_timeout=timeout,
                                        run_rows=run_rows, linger=timeout is None,
                                        reduce=reduce, relay=relay, nodes=nodes))
        self.iterations, self.speeds, self.latency, self.flush = iterations, speeds, latency, \
            flush
        self.workers = {r: ModelWorker(r) for r in range(1, code.n_workers + 1)}
        self.inboxes = {r: self.inbox(w) for r, w in self.workers.items()}
        self.lists = {r: PieceList(r, flush) for r in self.workers}
        self.heap: list[tuple[float, int, str, Any]] = []
        self.order = itertools.count()
        self.channel: dict[tuple[str, int, int], float] = {}
        self.now = 0.0
        self.events = 0
        self.outcome: ev.Outcome | None = None
        self.lingering: set[int] = set()  # released after the outcome, once they acknowledge
        self.wake_at: float | None = None
        # a theta past MPI's eager limit: an ITERATE is on the wire until the worker reads it,
        # and the master's hold-back (the runtime's own policy) keeps what follows it
        self.holdback = HoldBack() if hold_back else None
        self.on_wire: set[int] = set()
        self.queue: deque[ev.Event] = deque()
        for at, rank in deaths:
            self.push(at, "die", rank)
        for at, rank in freezes:
            self.push(at, "freeze", rank)

    def inbox(self, worker: ModelWorker) -> Inbox:
        def setup(payload: object) -> None:
            worker.setup = payload  # type: ignore[assignment]

        def poll() -> Message | None:
            if not worker.arrived:
                return None
            msg = worker.arrived.popleft()
            if msg.tag == Tag.ITERATE and self.holdback is not None:
                self.taken_in(worker.rank)
            return msg

        def forward(msg: Message) -> None:  # θ relayed: on to the ranks after this one
            for child in relay_children(relay_of(msg), worker.rank):
                self.send("to", child, msg, worker.rank)

        return Inbox(poll, setup, rank=worker.rank,
                     epoch=lambda: -1 if worker.setup is None else worker.setup[0],
                     on_relay=forward)

    # ---- the master ------------------------------------------------------------------------

    def feed(self, event: ev.Event) -> None:
        queue = self.queue
        queue.append(event)
        if len(queue) > 1:  # fed while another is handled: it comes in turn
            return
        while queue:
            self.events += 1
            for i in self.session.handle(queue[0]):
                self.perform(i, queue)
            queue.popleft()
        self.watched()

    def watched(self) -> None:
        """No idle worker of the open round waits on a holder with nothing to make it look
        again (``PieceWork.unwatched``)."""
        s = self.session
        rnd, work = s.round, s.piecework
        if rnd is not None and not rnd.done and work is not None:
            lost = work.unwatched(rnd, s.live, self.now)
            assert not lost, f"idle workers wait on holders unwatched: {lost}; {s.describe()}"
            assert rnd.wake is None or (self.wake_at is not None and self.wake_at <= rnd.wake), \
                f"no Tick asked for by {rnd.wake} (asked: {self.wake_at})"

    def to_worker(self, rank: int, msg: Message) -> None:
        """A send to ``rank``, through the hold-back when theta is large."""
        box = self.holdback
        if box is None:
            self.send("to", rank, msg)
            return
        key = None if msg.tag not in SUPERSEDED else (msg.job, msg.iteration, msg.epoch)
        held = Held(msg.tag, key, msg)
        offer = box.offer(rank, held, msg.tag == Tag.ITERATE and rank in self.on_wire)
        lists: dict[tuple[int, int, int], tuple[int, ...]] = {}
        for h in offer.stale:  # dropped unsent: the master is told, as the Outbox tells it
            m = h.payload
            if h.tag == Tag.ITERATE and h.key is not None:
                lists[h.key] = iterate_fields(m, rank)[0]
            elif h.tag == Tag.ASSIGN and h.key in lists and h.key is not None:
                lists[h.key] = assign_fields(m)
        for k, tasks in lists.items():
            self.feed(ev.Withheld(rank, *k, tasks, self.now))
        if offer.purge is not None:
            self.post(rank, Held(Tag.PURGE, offer.purge, unpack(Tag.PURGE, pack_control(
                offer.purge[0], offer.purge[1], epoch=offer.purge[2]))))
        if offer.now:
            self.post(rank, held)

    def post(self, rank: int, held: Held) -> None:
        assert self.holdback is not None
        self.holdback.posted(rank, held)
        if held.tag == Tag.ITERATE:
            self.on_wire.add(rank)
        self.send("to", rank, held.payload)

    def taken_in(self, rank: int) -> None:
        """``rank`` read its ITERATE on the wire: what waited behind it goes."""
        assert self.holdback is not None
        self.on_wire.discard(rank)
        for held in self.holdback.release(rank):
            self.post(rank, held)

    def perform(self, i: ev.Instruction, queue: deque[ev.Event]) -> None:
        if isinstance(i, ev.Place):
            for t in i.targets:
                setup: Any = (i.epoch, i.code, i.pieces, i.work,  # a SETUP carries an object
                              self.runs(i, t.worker))
                self.to_worker(t.rank, Message(Tag.SETUP, -1, -1, -1, -1, -1, 0, setup))
        elif isinstance(i, ev.Iterate):
            buf = pack_iterate(i.job, i.iteration, i.theta, dict(i.lists), i.epoch,
                               relay=i.relay)
            for rank in relay_children(i.relay, 0) if i.relay else [r for r, _ in i.lists]:
                self.to_worker(rank, unpack(Tag.ITERATE, buf))
        elif isinstance(i, ev.Assign):
            self.to_worker(i.rank, unpack(Tag.ASSIGN, pack_assign(i.job, i.iteration, i.tasks,
                                                                  i.epoch)))
        elif isinstance(i, ev.Reduce):
            self.to_worker(i.rank, unpack(Tag.REDUCE, pack_reduce(
                i.job, i.iteration, i.epoch, i.attempt, i.parent, i.terms, i.children)))
        elif isinstance(i, ev.Purge):
            self.to_worker(i.rank, unpack(Tag.PURGE, pack_control(i.job, i.iteration,
                                                                  epoch=i.epoch)))
        elif isinstance(i, ev.Stop):
            self.to_worker(i.rank, unpack(Tag.STOP, pack_control()))
        elif isinstance(i, ev.Forget) and self.holdback is not None:
            self.holdback.forget(i.rank)
        elif isinstance(i, ev.Settle):
            queue.append(ev.Started(self.now))
        elif isinstance(i, ev.ComputeLoss):
            queue.append(ev.LossComputed(i.job, i.iteration, None, self.now))
        elif isinstance(i, ev.WakeAt):  # the latest replaces the others
            self.wake_at = i.at
            self.push(i.at, "tick", i.at)
        elif isinstance(i, ev.Abort):
            raise AssertionError(f"the run aborted: {i.text}")
        elif isinstance(i, ev.Linger):
            self.lingering.add(i.rank)
        elif isinstance(i, ev.Finish):
            self.outcome = i.outcome

    def runs(self, place: ev.Place, worker: int) -> Runs | None:
        """How code worker ``worker`` joins its own share's pieces into runs (None: it does
        not), as the set-up says."""
        pieces = place.pieces
        if pieces is None or not place.run_rows:
            return None
        table = {t: (p.key, p.start, p.stop) for t, p in enumerate(pieces.params["pieces"])}
        return Runs(table, frozenset(pieces.schedule[worker]), place.run_rows,
                    not place.runs_within)

    # ---- the run ---------------------------------------------------------------------------

    def run(self, limit: int = 500_000) -> ev.Outcome:
        self.feed(ev.Begin())
        self.feed(ev.JobArrived(0, 0.0))
        for _ in range(limit):
            if self.outcome is not None and all(self.workers[r].acked or self.workers[r].dead
                                                for r in self.lingering):
                return self.outcome
            if not self.heap and self.resumed():
                continue
            if not self.heap:
                idle = sorted(r for r, w in self.workers.items() if not (w.busy or w.dead))
                raise AssertionError(f"hang at model time {self.now:.2f}: "
                                     f"{self.session.describe()}; idle ranks {idle}")
            self.now, _, kind, what = heapq.heappop(self.heap)
            if self.outcome is not None and kind in ("from", "lost", "tick"):
                continue  # the session is over: what the lingering send is read and dropped
            if kind == "to":
                rank, msg = what
                w = self.workers[rank]
                if not w.dead:
                    w.arrived.append(msg)
                    self.wake(w)
            elif kind == "from":
                rank, event = what
                if isinstance(event, ev.ResultArrived | ev.PartArrived):
                    event.now = self.now
                self.feed(event)
            elif kind == "done":
                self.done(*what)
            elif kind == "die":
                self.workers[what].dead = True
                self.push(self.now + self.latency, "lost", what)
            elif kind == "lost":
                self.feed(ev.WorkerLost(what, self.now))
            elif kind == "freeze":
                self.workers[what].frozen = True
            elif kind == "tick" and what == self.wake_at:
                self.wake_at = None
                self.feed(ev.Tick(self.now))
        raise AssertionError(f"no end in {limit} events: {self.session.describe()}")

    def resumed(self) -> bool:
        """Nothing more can happen and the run waits on frozen workers with no timeout: if
        every iteration is decoded (the run waits for their STOP acknowledgements) they are
        resumed, as the linger tests resume them; not while a round is open (its pieces should
        have been taken over from them: a hang)."""
        frozen = [w for w in self.workers.values() if w.frozen and not w.dead]
        rnd = self.session.round
        if not frozen or (rnd is not None and not rnd.done):
            return False
        for w in frozen:
            w.frozen = False
            if w.paused is not None:
                self.push(self.now, "done", (w.rank, w.paused))
                w.paused = None
            else:
                self.wake(w)
        return True
