"""Rank 0's executor: receive, turn messages into events, feed the Session, carry out what it
says over MPI. No decision is made here (``core/session.py`` makes them all); a rank found dead
by any MPI call becomes a ``WorkerLost`` event, in ``lost``'s one place."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np
from mpi4py import MPI

from .. import checkpoint as ckpt
from ..core import events as ev
from ..core.observers import Observers
from ..core.protocol import HEADER, Tag, pack_assign, pack_control, pack_iterate
from ..core.reading import event_of, withheld_lists
from ..core.session import Session
from ..core.setup import SetupShared
from ..core.trace import TaskTrace
from ..core.tree_messages import pack_reduce, relay_children
from ..delays import DelayModel
from ..plan import ft_enabled
from .board import BOARD_BYTES, Board
from .buffers import Buffers
from .clocks import sync
from .outbox import Outbox, each
from .transport import Buffer, ProcessesFailed, WorkerError, object_frames, receive
from .waits import Backoff

DRAIN_MAX = 1000  # messages read before a Tick that is due: so much traffic cannot put it off
HELD_S = 0.25  # wall time this long without CPU between two looks: the master was held up


class AllWorkersFailed(RuntimeError):
    """No worker is left to run the job."""


class Master:
    """Serves one Session over ``comm``: set-ups carry ``delay`` and the kills of
    ``kill_at``; ``checkpoint`` is (directory, fingerprint); ``arrivals_s`` the jobs' arrivals
    from the run's start; ``trace`` the task trace the observers fill (its clocks set here)."""

    def __init__(self, comm: MPI.Comm, session: Session, observers: Observers,
                 delay: DelayModel, arrivals_s: Sequence[float] | np.ndarray,
                 kill_at: dict[int, tuple[int, int]], checkpoint: tuple[str, str] | None,
                 trace: TaskTrace | None) -> None:
        self.comm, self.session, self.observers = comm, session, observers
        self.delay, self.kill_at = delay, kill_at
        self.arrivals, self.checkpoint, self.trace = list(arrivals_s), checkpoint, trace
        self.outbox = Outbox(comm, hold_back=session.settings.purge, on_withheld=self.withheld,
                             synchronous=ft_enabled())
        self.buffers = Buffers()  # results received, ITERATEs sent
        self.events: deque[ev.Event] = deque()
        self.feeding = False
        self.t0 = time.perf_counter()
        self.started = False
        self.arrived = 0  # jobs whose arrival was fed
        self.wake: float | None = None
        self.last_pass = (0.0, time.process_time())  # when ``due`` last looked: wall, CPU
        self.work: Any = None  # the job as coded for the current placement
        self.half_width = 0
        self.coded(session.work, session.pieces)
        self.outcome: ev.Outcome | None = None
        self.max_pending = self.placed_bytes = self.results_handled = 0
        self.received_bytes = 0  # every message from the workers
        self.result_cpu_s = 0.0
        self.makespan_s = 0.0
        self.lingering: set[int] = set()  # stopped, known slow: released after the run
        self.board: Board | None = None  # θ for the workers on this node (``runtime/board.py``)
        self.boarded: set[int] = set()  # ranks whose set-up named the board
        self.board_bytes = 0  # θ written to it
        self.on_board: tuple[tuple[int, int, int], tuple[int, int]] | None = None  # round, slot

    @property
    def sent_bytes(self) -> int:
        """Every byte rank 0 sent the workers: its messages, and θ written to its board."""
        return self.outbox.sent_bytes + self.board_bytes

    def clock(self) -> float:
        """Seconds since the run started: every event's time. 0.0 until then, so that an event
        before the start (a death during placement) is not later than the start itself."""
        return time.perf_counter() - self.t0 if self.started else 0.0

    def run(self) -> ev.Outcome:
        """Place, run every job, stop every worker (``makespan_s``: from the first ITERATE to
        the last STOP acknowledgement the end waits for: not a lingering rank's)."""
        try:
            self.feed(ev.Begin())
            backoff = Backoff()
            while self.outcome is None:
                got = self.take_in()
                if got:
                    backoff.reset()
                if self.due() or got:  # due on every pass: traffic must not delay it
                    continue
                self.max_pending = max(self.max_pending, len(self.outbox.pending))
                self.call(self.outbox.prune)
                backoff.wait()
            return self.outcome
        finally:  # the workers opened it at their set-ups: theirs stays while they read
            if self.board is not None:
                self.board.close()

    def take_in(self) -> bool:
        """Read one message, if any, and feed what it tells (a death found meanwhile too);
        whether anything was read or found."""
        try:
            got = receive(self.comm, buffers=self.buffers)
        except ProcessesFailed as exc:
            self.lost(exc.ranks)
            return True
        except WorkerError as exc:
            self.feed(ev.WorkerFailed(exc.rank, exc.text))
            return True
        if got is None:
            return False
        payload = got[0].payload
        if isinstance(payload, np.ndarray):  # a worker sends doubles (a refusal aside)
            self.received_bytes += (HEADER + payload.size) * 8
        self.message(*got)
        return True

    def due(self) -> bool:
        """Feed a job's arrival, or a Tick, if one is due; whether one was. A master held up
        itself (SIGSTOP, a starved core: wall time passed, its CPU time did not) puts its Tick
        off by as long: a round it opened just before is stamped then, and its workers have had
        no time to answer what it sends now. A master busy computing is not held up."""
        now, cpu = self.clock(), time.process_time()
        held = (now - self.last_pass[0]) - (cpu - self.last_pass[1])
        self.last_pass = (now, cpu)
        if held > HELD_S and self.started and self.wake is not None:
            self.wake = max(self.wake, now + held)
        if self.started and self.arrived < len(self.arrivals) and \
                now >= self.arrivals[self.arrived]:
            self.arrived += 1
            self.feed(ev.JobArrived(self.arrived - 1, self.arrivals[self.arrived - 1]))
            return True
        if self.wake is not None and now >= self.wake:
            # what has arrived is read first: a master held up (inside MPI while ULFM names a
            # death, or descheduled) must not take its own silence for the workers'
            for _ in range(DRAIN_MAX):
                if self.outcome is not None or not self.take_in():
                    break
            if self.outcome is None and self.wake is not None and self.clock() >= self.wake:
                self.wake = None
                self.feed(ev.Tick(self.clock()))
            return True
        return False

    def message(self, msg: Any, src: int) -> None:
        began = time.thread_time()
        event = event_of(msg, src, self.clock(), self.session.epoch, self.half_width)
        if event is None:  # a clock's answer that came after the pings stopped waiting
            return
        self.feed(event)
        if isinstance(event, ev.ResultArrived):  # rank 0's CPU a result: unpack, decide, send
            self.result_cpu_s += time.thread_time() - began
            self.results_handled += len(event.tasks)

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
        if not ranks:
            return
        self.events.extend(ev.WorkerLost(rank, self.clock()) for rank in sorted(ranks))
        self.feed()

    def perform(self, i: ev.Instruction) -> None:
        send = self.outbox.send
        if isinstance(i, ev.Iterate):
            first = relay_children(i.relay, 0) if i.relay else [r for r, _ in i.lists]
            near = [] if i.relay or self.board is None else [r for r in first
                                                             if r in self.boarded]
            if near:
                small = pack_iterate(i.job, i.iteration, i.theta, dict(i.lists), i.epoch,
                                     board=self.posted((i.job, i.iteration, i.epoch), i.theta))
                each(lambda r: send(small, r, Tag.ITERATE), near)
            far = [r for r in first if r not in near]
            if far:
                buf = pack_iterate(i.job, i.iteration, i.theta, dict(i.lists), i.epoch,
                                   self.work.half_theta, self.buffers.take, i.relay)
                each(lambda r: send(buf, r, Tag.ITERATE), far)  # theta packed once
        elif isinstance(i, ev.Assign):
            send(pack_assign(i.job, i.iteration, i.tasks, i.epoch), i.rank, Tag.ASSIGN)
        elif isinstance(i, ev.Reduce):
            send(pack_reduce(i.job, i.iteration, i.epoch, i.attempt, i.parent, i.terms,
                             i.children), i.rank, Tag.REDUCE)
        elif isinstance(i, ev.Purge):
            send(pack_control(i.job, i.iteration, epoch=i.epoch), i.rank, Tag.PURGE)
        elif isinstance(i, ev.Stop | ev.Release):
            send(pack_control(), i.rank, Tag.STOP if isinstance(i, ev.Stop) else Tag.RELEASE)
        elif isinstance(i, ev.Linger):
            self.lingering.add(i.rank)
        elif isinstance(i, ev.Forget):
            self.outbox.forget({i.rank})
        elif isinstance(i, ev.WakeAt):
            self.wake = i.at
        elif isinstance(i, ev.ComputeLoss):
            loss = self.work.loss(i.theta) if i.with_loss else None
            evaluation = self.work.evaluate(i.theta) if i.evaluate else None
            self.events.append(ev.LossComputed(i.job, i.iteration, loss, self.clock(),
                                               evaluation))
            self.outbox.prune()  # an ITERATE taken in meanwhile lets the one held behind it go
        elif isinstance(i, ev.SaveCheckpoint) and self.checkpoint is not None:
            directory, fingerprint = self.checkpoint
            # the job's state as its last update left it: the one that produced this theta
            ckpt.save(directory, ckpt.Checkpoint(i.job, i.iteration, i.theta, fingerprint,
                                                 self.work.state()))
        elif isinstance(i, ev.Place):
            self.place(i)
        elif isinstance(i, ev.Settle):
            self.settle(i.sync_clocks)
        elif isinstance(i, ev.Abort):
            raise AllWorkersFailed(i.text) if i.rank is None else WorkerError(i.rank, i.text)
        elif isinstance(i, ev.Finish):
            self.drain(but=self.lingering)  # theirs may wait on them: completed after the run
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
        shared = SetupShared(i.code, self.work, self.delay, i.pieces, i.epoch,
                             self.session.settings.purge,
                             i.chunk_rows, i.report_progress, self.trace is not None, i.run_rows,
                             i.keep, i.runs_within)
        board = self.boarding([target.rank for target in i.targets])

        def post(target: ev.Target) -> None:
            setup = shared.for_worker(target.world, target.worker, target.tasks,
                                      self.kill_at.get(target.world))
            if board is not None and target.rank in board:
                setup.board = board[target.rank]
                self.boarded.add(target.rank)
            else:
                self.boarded.discard(target.rank)
            head, arrays = object_frames(setup)
            self.outbox.send(head, target.rank, Tag.SETUP)
            for frame in arrays:
                self.outbox.send(frame, target.rank, Tag.SETUP_DATA)
            self.placed_bytes += len(head) + sum(frame.nbytes for frame in arrays)

        each(post, i.targets)  # one that died before its data left is a dead worker

    def posted(self, key: tuple[int, int, int], theta: np.ndarray) -> tuple[int, int]:
        """Round ``key``'s θ on the board: written once however many ITERATEs of the round
        name it (a re-sent one too), so that a slot is written again only four rounds on,
        when its round is long decoded."""
        assert self.board is not None
        if self.on_board is None or self.on_board[0] != key:
            self.on_board = (key, self.board.write(theta))
            self.board_bytes += self.board.size * self.board.dtype.itemsize
        return self.on_board[1]

    def boarding(self, ranks: list[int]) -> dict[int, tuple[str, str, int]] | None:
        """The board's name for those of ``ranks`` on this node, the board made at the first
        placement that has any; None where θ travels in its ITERATEs (θ under BOARD_BYTES,
        no purge: a straggler reads every ITERATE, however old; no such rank; no board)."""
        settings, work = self.session.settings, self.work
        dtype = np.dtype(np.float32 if work.half_theta else np.float64)
        nodes = settings.nodes
        near = [r for r in ranks if nodes and nodes[r] == nodes[0]]
        if not near or not settings.purge or work.dim * dtype.itemsize < BOARD_BYTES:
            return None
        if self.board is None:
            self.board = Board.create(work.dim, dtype)
        if self.board is None or (self.board.size, self.board.dtype) != (work.dim, dtype):
            return None
        return dict.fromkeys(near, (self.board.path, dtype.name, work.dim))

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
            self.lost(sync(self.comm, self.outbox, self.session, self.trace,
                           lambda: time.perf_counter() - self.t0))
        start = time.perf_counter()
        if self.trace is not None:
            self.trace.shift(start - self.t0)
        self.t0, self.started = start, True
        self.events.append(ev.Started(0.0))

    def drain(self, but: Collection[int] = ()) -> None:
        """Every send out (but those to ``but``); a rank that died with one pending is
        dropped."""
        while True:
            try:
                self.outbox.drain(but)
                return
            except ProcessesFailed:
                continue

    def withheld(self, rank: int, messages: list[tuple[Buffer, Tag]]) -> None:
        """ITERATEs the outbox held for ``rank`` and dropped unsent (a newer one made them stale
        first): the tasks of each were never begun."""
        self.events.extend(ev.Withheld(rank, *key, tasks, self.clock())
                           for key, tasks in withheld_lists(rank, messages).items())

    def describe(self) -> str:
        """Where the run is, in one line (SIGUSR1): the session's view, the sends pending."""
        held = self.outbox.holdback.queues if self.outbox.holdback is not None else {}
        return (f"master: {self.session.describe()}; {len(self.outbox.pending)} sends pending, "
                f"held for ranks { {r: [h.tag.name for h in s] for r, s in held.items()} }")
