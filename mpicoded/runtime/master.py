"""Rank 0's executor: receive, turn messages into events, feed the Session, carry out what it
says over MPI. No decision is made here (``core/session.py`` makes them all); a rank found dead
by any MPI call becomes a ``WorkerLost`` event, in ``perform``'s one place."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from .. import checkpoint as ckpt
from ..core import events as ev
from ..core.observers import Observers
from ..core.protocol import (
    Tag,
    ack_fields,
    assign_fields,
    iterate_fields,
    pack_assign,
    pack_control,
    pack_iterate,
    progress_fields,
    result_fields,
    result_trace,
    trace_fields,
    unpack,
)
from ..core.result import RunResult
from ..core.session import Session
from ..core.setup import SetupShared
from ..core.trace import TaskTrace
from ..delays import DelayModel
from .transport import (
    Backoff,
    Buffer,
    Outbox,
    ProcessesFailed,
    WorkerError,
    object_frames,
    receive,
    wait_buffer,
)


class AllWorkersFailed(RuntimeError):
    """No worker is left to run the job."""


class Master:
    """Serves one Session over ``comm``: set-ups carry ``delay``, ``purge`` and the kills of
    ``kill_at``; ``checkpoint`` is (directory, fingerprint); ``arrivals_s`` the jobs' arrivals
    from the run's start; ``trace`` the task trace the observers fill (its clocks set here)."""

    def __init__(self, comm: MPI.Comm, session: Session, observers: Observers,
                 delay: DelayModel, purge: bool, arrivals_s: Sequence[float] | np.ndarray,
                 kill_at: dict[int, tuple[int, int]], checkpoint: tuple[str, str] | None,
                 trace: TaskTrace | None) -> None:
        self.comm, self.session, self.observers = comm, session, observers
        self.delay, self.purge, self.kill_at = delay, purge, kill_at
        self.arrivals, self.checkpoint, self.trace = list(arrivals_s), checkpoint, trace
        self.outbox = Outbox(comm, hold_back=purge, on_withheld=self.withheld)
        self.events: deque[ev.Event] = deque()
        self.feeding = False
        self.t0 = time.perf_counter()
        self.started = False
        self.arrived = 0  # jobs whose arrival was fed
        self.wake: float | None = None
        self.work: Any = None  # the job as coded for the current placement
        self.half_width = 0
        self.coded(session.work, session.pieces)
        self.outcome: ev.Outcome | None = None
        self.max_pending = self.placed_bytes = self.results_handled = 0
        self.result_cpu_s = 0.0
        self.makespan_s = 0.0

    def clock(self) -> float:
        """Seconds since the run started (since this master began, until then)."""
        return time.perf_counter() - self.t0

    def run(self) -> RunResult:
        """Place, run every job, stop every worker: the RunResult (the makespan from the first
        ITERATE to the last STOP acknowledged)."""
        self.feed(ev.Begin())
        backoff = Backoff()
        while self.outcome is None:
            try:
                got = receive(self.comm)
            except ProcessesFailed as exc:
                self.lost(exc.ranks)
                continue
            except WorkerError as exc:
                self.feed(ev.WorkerFailed(exc.rank, str(exc)))
                continue
            if got is not None:
                backoff.reset()
                self.message(*got)
            elif not self.due():
                self.max_pending = max(self.max_pending, len(self.outbox.pending))
                self.call(self.outbox.prune)
                backoff.wait()
        o = self.outcome
        return RunResult(o.theta, o.records, o.losses, self.makespan_s, o.totals, o.counters,
                         o.jobs, o.recodes, o.job_thetas, final_loads=o.loads)

    def due(self) -> bool:
        """Feed a job's arrival, or a Tick, if one is due; whether one was."""
        now = self.clock()
        if self.started and self.arrived < len(self.arrivals) and \
                now >= self.arrivals[self.arrived]:
            self.arrived += 1
            self.feed(ev.JobArrived(self.arrived - 1, self.arrivals[self.arrived - 1]))
            return True
        if self.wake is not None and now >= self.wake:
            self.wake = None
            self.feed(ev.Tick(now))
            return True
        return False

    def message(self, msg: Any, src: int) -> None:
        tag = msg.tag
        if tag == Tag.RESULT:
            began = time.thread_time()
            if msg.epoch == self.session.epoch:
                tasks, values, entries = result_fields(msg, self.half_width)
            else:  # of an abandoned epoch: stale, whatever its values' width
                tasks, values, entries = [int(t) for t in msg.payload[:msg.count]], None, \
                    result_trace(msg)
            self.feed(ev.ResultArrived(src, msg.job, msg.iteration, msg.epoch, tasks, values,
                                       self.clock(), entries))
            self.result_cpu_s += time.thread_time() - began
            self.results_handled += len(tasks)
        elif tag == Tag.PROGRESS:
            self.feed(ev.ProgressReported(src, msg.job, msg.iteration, msg.epoch,
                                          *progress_fields(msg)))
        elif tag == Tag.TRACE:
            self.feed(ev.TraceArrived(src, trace_fields(msg)))
        elif tag == Tag.STOP_ACK:
            counters, entries = ack_fields(msg)
            self.feed(ev.StopAcknowledged(src, counters, entries))
        elif tag != Tag.PING:  # a PING is a clock's answer that came after sync stopped waiting
            raise RuntimeError(f"master got an unexpected {tag.name} from rank {src}")

    def feed(self, event: ev.Event | None = None) -> None:
        """Handle ``event`` and every event that carrying out its instructions gives rise to
        (queued, and handled in turn, if it comes while another is carried out)."""
        if event is not None:
            self.events.append(event)
        if self.feeding:
            return
        self.feeding = True
        try:
            while self.events:
                event = self.events.popleft()
                out = self.session.handle(event)
                self.observers(event, out)
                for instruction in out:
                    self.call(self.perform, instruction)
        finally:
            self.feeding = False

    def call(self, do: Callable[..., object], *args: Any) -> None:
        """``do(*args)``; ranks found dead meanwhile are lost (the one place this is decided)."""
        try:
            do(*args)
        except ProcessesFailed as exc:
            self.lost(exc.ranks)

    def lost(self, ranks: set[int]) -> None:
        self.events.extend(ev.WorkerLost(rank, self.clock()) for rank in sorted(ranks))
        self.feed()

    def perform(self, i: ev.Instruction) -> None:
        send = self.outbox.send
        if isinstance(i, ev.Iterate):
            buf = pack_iterate(i.job, i.iteration, i.theta, dict(i.lists), i.epoch)
            dead: set[int] = set()
            for rank, _ in i.lists:  # one buffer, theta packed once, for every worker of it
                try:
                    send(buf, rank, Tag.ITERATE)
                except ProcessesFailed as exc:
                    dead |= exc.ranks
            if dead:
                raise ProcessesFailed(dead)
        elif isinstance(i, ev.Assign):
            send(pack_assign(i.job, i.iteration, i.tasks, i.epoch), i.rank, Tag.ASSIGN)
        elif isinstance(i, ev.Purge):
            send(pack_control(i.job, i.iteration, epoch=i.epoch), i.rank, Tag.PURGE)
        elif isinstance(i, ev.Stop | ev.Release):
            send(pack_control(), i.rank, Tag.STOP if isinstance(i, ev.Stop) else Tag.RELEASE)
        elif isinstance(i, ev.Forget):
            self.outbox.forget({i.rank})
        elif isinstance(i, ev.WakeAt):
            self.wake = i.at
        elif isinstance(i, ev.ComputeLoss):
            loss = self.work.loss(i.theta)
            self.events.append(ev.LossComputed(i.job, i.iteration, loss, self.clock()))
            self.outbox.prune()  # an ITERATE taken in meanwhile lets the one held behind it go
        elif isinstance(i, ev.SaveCheckpoint) and self.checkpoint is not None:
            directory, fingerprint = self.checkpoint
            ckpt.save(directory, ckpt.Checkpoint(i.job, i.iteration, i.theta, fingerprint))
        elif isinstance(i, ev.Place):
            self.place(i)
        elif isinstance(i, ev.Settle):
            self.settle(i.sync_clocks)
        elif isinstance(i, ev.Abort):
            raise AllWorkersFailed(i.text) if i.rank is None else WorkerError(i.rank, i.text)
        elif isinstance(i, ev.Finish):
            self.drain()
            self.makespan_s = self.clock()
            self.outcome = i.outcome

    def coded(self, work: Any, pieces: Any) -> None:
        """The job as coded now (``pieces``: cut in pieces), and the width of its results'
        values where they travel as float32."""
        self.work = work
        width = work.result_size if pieces is None else pieces.params.get(
            "value_size", work.result_size)
        self.half_width = width if work.half else 0

    def place(self, i: ev.Place) -> None:
        """Post each target its set-up (non-blocking: a worker hung inside MPI must not hang
        the master); what follows (ITERATEs) arrives after it, MPI keeping one sender's order."""
        self.coded(i.work, i.pieces)
        shared = SetupShared(i.code, self.work, self.delay, i.pieces, i.epoch, self.purge,
                             i.chunk_rows, i.report_progress, self.trace is not None)
        dead: set[int] = set()
        for target in i.targets:
            setup = shared.for_worker(target.world, target.worker, target.tasks,
                                      self.kill_at.get(target.world))
            head, arrays = object_frames(setup)
            try:
                self.outbox.send(head, target.rank, Tag.SETUP)
                for frame in arrays:
                    self.outbox.send(frame, target.rank, Tag.SETUP_DATA)
            except ProcessesFailed as exc:  # died before its data left: a dead worker
                dead |= exc.ranks
                continue
            self.placed_bytes += len(head) + sum(frame.nbytes for frame in arrays)
        if dead:
            raise ProcessesFailed(dead)

    def settle(self, sync_clocks: bool) -> None:
        """Every set-up out (no deadline: a large data set takes what it takes), the workers'
        clocks learnt, then the run's clock starts. Rank 0's one-off work for the job's step
        is done while the set-ups travel."""
        self.work.prepare_update()
        while True:
            try:
                self.outbox.drain()
                break
            except ProcessesFailed as exc:
                self.lost(exc.ranks)
        if sync_clocks and self.trace is not None:
            self.sync_clocks(self.trace)
        start = time.perf_counter()
        if self.trace is not None:
            self.trace.shift(start - self.t0)
        self.t0, self.started = start, True
        self.events.append(ev.Started(0.0))

    def sync_clocks(self, trace: TaskTrace, pings: int = 3, patience: float = 2.0) -> None:
        """Each living worker's clock offset (task records on the master's clock, so hosts line
        up): the ping of ``pings`` with the shortest round trip counts; a worker silent for
        ``patience`` seconds keeps the default offset (one host's)."""
        ranks = self.session.ranks
        for w in sorted(self.session.live):
            rank, best = ranks.rank(w), None
            try:
                for _ in range(pings):
                    sent = self.clock()
                    self.outbox.send(pack_control(), rank, Tag.PING)
                    reply = wait_buffer(self.comm, rank, Tag.PING, patience)
                    if reply is None:  # hung, maybe: --iteration-timeout will tell
                        break
                    back = self.clock()
                    self.outbox.prune()  # the ping was received: its send is done
                    if best is None or back - sent < best[2] - best[0]:
                        best = (sent, float(reply[-1]), back)
            except ProcessesFailed as exc:
                self.lost(exc.ranks)
                continue
            if best is not None:
                trace.set_offset(ranks.world(rank) - 1, *best)

    def drain(self) -> None:
        """Every send out; a rank that died with one pending is dropped."""
        while True:
            try:
                self.outbox.drain()
                return
            except ProcessesFailed:
                continue

    def withheld(self, rank: int, messages: list[tuple[Buffer, Tag]]) -> None:
        """ITERATEs the outbox held for ``rank`` and dropped unsent (a newer one made them stale
        first): the tasks of each (or of the ASSIGN that replaced its list) were never begun."""
        lists: dict[tuple[int, int, int], tuple[int, ...]] = {}
        for buf, tag in messages:
            assert isinstance(buf, np.ndarray)  # ITERATE, PURGE and ASSIGN are doubles
            msg = unpack(tag, buf)
            key = (msg.job, msg.iteration, msg.epoch)
            if tag == Tag.ITERATE:
                lists[key] = iterate_fields(msg, rank)[0]
            elif tag == Tag.ASSIGN and key in lists:
                lists[key] = assign_fields(msg)
        self.events.extend(ev.Withheld(rank, *key, tasks, self.clock())
                           for key, tasks in lists.items())

    def describe(self) -> str:
        """Where the run is, in one line (SIGUSR1): the session's view, the sends pending."""
        held = self.outbox.holdback.queues if self.outbox.holdback is not None else {}
        return (f"master: {self.session.describe()}; {len(self.outbox.pending)} sends pending, "
                f"held for ranks { {r: [h.tag.name for h in s] for r, s in held.items()} }")
