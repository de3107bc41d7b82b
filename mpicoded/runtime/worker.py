"""The worker loop: run the tasks of the newest iteration in order, send each result at once,
and drop the rest within one chunk of compute once a PURGE, a newer ITERATE or a STOP arrives.
An iteration's list is run by ``tasks.run_tasks`` (whole tasks) or ``pieces.run_pieces``
(partial work)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import traceback

import numpy as np
from mpi4py import MPI

from ..codes import combined
from ..core.inbox import Inbox
from ..core.piecelist import PieceList
from ..core.protocol import Message, Tag, pack_clock, pack_control, pack_result, pack_trace
from ..core.setup import PIECE_FLUSH_S, WorkerSetup
from ..core.trace import DROPPED, PURGED, TraceEntry
from ..core.tree_messages import pack_part, reduce_fields, relay_children, relay_of
from ..jobs import AnyJob, GradientJob, kernel_for
from ..jobs.rows import take_rows
from ..jobs.task import Block, Terms
from ..plan import ft_enabled
from .board import follow
from .buffers import Buffers
from .outbox import Outbox
from .pieces import run_pieces
from .tasks import run_tasks
from .transport import (
    ProcessesFailed,
    as_failure,
    drop_pending,
    failures_raised,
    receive,
    wait_buffer,
    wait_object,
)
from .waits import Backoff, blocking_mpi

MASTER = 0
SLICE_S = 0.002  # an injected delay is slept in slices this long, polling for control between
TRACE_FLUSH_S = 0.5  # a worker that sends no results sends its trace entries this often
RELEASE_WAIT_S = 60.0  # under ULFM, how long an acknowledged worker waits to be released


class Worker:
    """One worker rank serving ``job`` (its own copy, built by the user's script); counters go
    back to the master in STOP_ACK."""

    def __init__(self, comm: MPI.Comm, setup: WorkerSetup, job: AnyJob) -> None:
        self.comm, self.setup, self.job = comm, setup, job
        self.kernel = kernel_for(job, setup.data_coded)
        self.outbox = Outbox(comm)
        self.peers = Outbox(comm)  # to other workers: PARTs (a dead one is the master's to find)
        # ITERATEs forwarded (θ relayed), at most one on the wire to each, as the master's
        self.relays = Outbox(comm, hold_back=True)
        self.buffers = Buffers()  # ITERATEs received, RESULTs sent
        self.inbox = self.new_inbox()
        self.computed = self.sent = self.dropped = 0
        self.rows = 0  # data rows computed (a purged task's share done included)
        # trace entries (TRACE_FIELDS) not sent yet; None: no trace
        self.trace: list[TraceEntry] | None = [] if setup.trace else None
        self.trace_sent = time.perf_counter()  # when entries last left with a message
        self.pieces = PieceList(comm.Get_rank(), PIECE_FLUSH_S)  # partial work
        self.views: dict[tuple[int, int, int], Block] = {}  # partial work: (key, start, stop)
        # the newest ITERATE started: (epoch, job, iteration) and its theta, for a failover
        self.latest: tuple[tuple[int, int, int], np.ndarray] | None = None
        # results summed by the workers (set-up ``keep``): the values this worker sent of its
        # newest round, by the first task id each RESULT named
        self.kept_round: tuple[int, int, int] | None = None
        self.kept: dict[int, np.ndarray] = {}
        self.board = follow(None, setup.board)  # rank 0's, where θ comes on it

    def rebind(self, comm: MPI.Comm) -> None:
        """Serve a new master on ``comm`` (after a failover): what was queued for the old one,
        and what it had sent, is gone with it; the data, the set-up and the counters stay."""
        self.comm = comm
        self.outbox, self.peers, self.relays = Outbox(comm), Outbox(comm), Outbox(comm, True)
        self.inbox = self.new_inbox()
        self.pieces.rank = comm.Get_rank()

    def new_inbox(self) -> Inbox:
        skipped = self.trace_skipped if self.setup.trace else None
        return Inbox(self.poll, self.apply, purge=self.setup.purge, rank=self.comm.Get_rank(),
                     on_skip=skipped, epoch=lambda: self.setup.epoch, on_relay=self.forward)

    def forward(self, msg: Message) -> None:
        """An ITERATE relayed: on to the ranks after this one, before anything else (a dead
        one is the master's to find, and it sends θ to those below it)."""
        order = relay_of(msg)
        if not order:
            return
        assert msg.raw is not None
        for child in relay_children(order, self.comm.Get_rank()):
            with contextlib.suppress(ProcessesFailed):
                self.relays.send(msg.raw, child, Tag.ITERATE)

    def describe(self) -> str:
        """Where this worker is, in one line (SIGUSR1): its newest ITERATE, what it holds."""
        inbox = self.inbox
        held = [(m.job, m.iteration, m.epoch) for m in inbox.waiting]
        current = None if inbox.current is None else (inbox.current.job, inbox.current.iteration,
                                                      inbox.current.epoch)
        latest = None if self.latest is None else self.latest[0]
        return (f"worker {self.setup.worker} (epoch {self.setup.epoch}): newest ITERATE started "
                f"(epoch, job, iteration) {latest}, under way {current}, waiting {held}, "
                f"assigned {inbox.assigned}, ahead {inbox.ahead}, stopped {inbox.stopped}; "
                f"{len(self.outbox.pending)} sends pending; last read: {inbox.said()}")

    def poll(self) -> Message | None:
        """The next message from the master, or a PART from another worker."""
        while (got := self.receive()) is not None and got[0].tag == Tag.PING:
            self.outbox.send(pack_clock(self.setup.worker, time.perf_counter()), MASTER, Tag.PING)
        return None if got is None else got[0]

    def receive(self) -> tuple[Message, int] | None:
        """A message from any rank. Another worker's death (under ULFM a receive from any
        source fails until it is acknowledged, which naming it does) is the master's to find;
        the master's is this worker's end."""
        try:
            return receive(self.comm, MPI.ANY_SOURCE, self.buffers)
        except ProcessesFailed as exc:
            if MASTER in exc.ranks or not exc.ranks:
                raise
            return None

    def trace_skipped(self, msg: Message, tasks: tuple[int, ...]) -> None:
        """An ITERATE dropped unstarted (superseded, purged or stopped): every task dropped."""
        if self.trace is not None:
            now = time.perf_counter()
            self.trace.extend(TraceEntry(msg.job, msg.iteration, msg.epoch, t, now, now, 0, DROPPED)
                              for t in tasks)

    def arrived(self) -> bool:
        """Whether the master sent anything not read yet: one probe, cheaper than the inbox's
        read; it runs between every two chunks and at every turn an idle worker gets."""
        try:
            return self.comm.Iprobe(source=MPI.ANY_SOURCE)
        except MPI.Exception as exc:
            failure = as_failure(self.comm, exc)
            if not isinstance(failure, ProcessesFailed) or MASTER in failure.ranks or \
                    not failure.ranks:
                raise failure from None
            return True  # another worker died (acknowledged now): read again

    def interrupted(self) -> bool:
        """Between chunks and delay slices: must the iteration under way be dropped?"""
        inbox = self.inbox
        return self.setup.purge and (inbox.current_dropped or
                                     (self.arrived() and inbox.dropped()))

    def serve_delay(self, end: float) -> bool:
        """Sleep until ``end`` (time.monotonic) in slices, polling; False if the iteration was
        dropped meanwhile.

        Without purging (``--no-purge``, how public peers behave) the worker sleeps it out and
        finishes every task it was given, however stale.
        """
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(SLICE_S, left))
            self.outbox.prune()  # lets large sends already posted make progress
            if self.interrupted():
                return False
        return not self.interrupted()

    def run_iteration(self, msg: Message) -> None:
        """Run ``msg``'s list: pieces under partial work, else whole tasks."""
        if self.setup.pieces is not None:
            run_pieces(self, msg)
        else:
            run_tasks(self, msg)

    def begin(self, msg: Message, theta: np.ndarray, resumed: bool) -> float | None:
        """An iteration begins: it is the newest started (kept for a failover), a planned kill
        happens here, and the iteration's injected shift is served (once). Where the injected
        delays have brought it (time.monotonic), or None if it was dropped meanwhile."""
        # theta views this message's own buffer (not used again while viewed): kept, not copied
        self.latest = ((msg.epoch, msg.job, msg.iteration), theta)
        if (msg.job, msg.iteration, msg.epoch) != self.kept_round:
            self.kept_round, self.kept = (msg.job, msg.iteration, msg.epoch), {}
        setup, delay = self.setup, self.setup.delay
        if setup.kill_at is not None and (msg.job, msg.iteration) >= setup.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # fault injection: die like a lost node
        # each task's delay ends its real compute time plus its delay after the previous one's
        # due time, so the lateness of a sleep's wake-up (a millisecond on a loaded node) is
        # not carried from task to task
        due = time.monotonic()
        if delay.sleeps and not resumed:
            shift = float(delay.iteration_shifts(np.array([setup.worker]))[0])
            due += delay.seconds(shift)
            if shift and not self.serve_delay(due):
                return None
        return due

    def entry(self, msg: Message, task: int, began: float, chunks: int,
              outcome: float, ended: float | None = None) -> TraceEntry:
        """A task's trace entry, ended now unless told."""
        return TraceEntry(msg.job, msg.iteration, msg.epoch, task, began,
                          time.perf_counter() if ended is None else ended, chunks, outcome)

    def trace_dropped(self, msg: Message, unsent: list[TraceEntry],
                      cut: tuple[int, float, int] | None, left: list[int]) -> None:
        """The iteration was dropped: its results not sent yet were purged, so was the task
        ``cut`` (task, start, chunks; dropped if it had done no chunk), the ``left`` were
        never begun. A straggler purged every time sends its entries on their own, now and
        then."""
        trace = self.trace
        if trace is None:
            return
        now = time.perf_counter()
        trace.extend(entry._replace(outcome=PURGED) for entry in unsent)
        if cut is not None:
            task, began, chunks = cut
            trace.append(self.entry(msg, task, began, chunks, PURGED if chunks else DROPPED))
        trace.extend(TraceEntry(msg.job, msg.iteration, msg.epoch, t, now, now, 0, DROPPED)
                     for t in left)
        if now - self.trace_sent > TRACE_FLUSH_S:
            self.outbox.send(pack_trace(self.setup.worker, trace), MASTER, Tag.TRACE)
            trace.clear()
            self.trace_sent = now

    def piece_block(self, key: int, start: int, stop: int) -> Block:
        """Rows [start, stop) of block ``key``, cut once a set-up: its entries are not
        copied (``take_rows``), but a CSR matrix's header over them takes some 30 µs, every
        piece of every iteration otherwise."""
        view = self.views.get((key, start, stop))
        if view is None:
            view = self.views[key, start, stop] = take_rows(self.setup.blocks[key], start, stop)
        return view

    def load(self, blocks: dict[int, Block], terms: Terms) -> None:
        """Load into ``blocks`` (those the task will read: a re-split may have replaced the
        set-up meanwhile) the ones these terms use that are not there yet (a job whose data the
        master does not ship)."""
        job = self.job
        assert isinstance(job, GradientJob)  # only a GradientJob's blocks are remote
        for key, _ in terms:
            if key not in blocks:
                blocks[key] = job.load_block(key, self.setup.n_partitions)

    def apply(self, setup: WorkerSetup) -> None:
        """A new set-up after failures: a re-split (same epoch) adds the blocks and tasks it may
        now run; a re-code (new epoch) replaces them, its partitions being new."""
        if setup.epoch == self.setup.epoch:
            setup.blocks = {**self.setup.blocks, **setup.blocks}
            setup.terms = {**self.setup.terms, **setup.terms}
            setup.task_cost = {**self.setup.task_cost, **setup.task_cost}
        elif setup.data_coded != self.setup.data_coded:  # a re-code chose the other side
            self.kernel = kernel_for(self.job, setup.data_coded)
        self.setup = setup
        self.board = follow(self.board, setup.board)
        self.views.clear()

    def send_result(self, msg: Message, tasks: list[int], values: list[np.ndarray],
                    unsent: list[TraceEntry]) -> None:
        """Send results, with every trace entry not sent yet (``unsent``: these results'); the
        values kept, and their ids alone sent, where the workers add up the sum."""
        if self.setup.keep:
            firsts = [t for t in tasks if t >= 0]  # a run's later pieces are -(id + 1)
            self.kept.update(zip(firsts, values, strict=True))
            values = []
        trace = self.trace
        if trace is not None:
            trace.extend(unsent)
        buf = pack_result(msg.job, msg.iteration, self.setup.worker, tasks, values, msg.epoch,
                          trace or (), self.setup.half, self.buffers.take)
        if trace:
            trace.clear()  # copied into buf
            self.trace_sent = time.perf_counter()
        self.outbox.send(buf, MASTER, Tag.RESULT)
        self.sent += len(tasks)

    def sum_up(self) -> None:
        """Carry out the REDUCE read: this worker's values times their coefficients, plus its
        children's PARTs, to its parent; given up if it is cancelled meanwhile (a re-plan)."""
        inbox = self.inbox
        msg = inbox.take_reduce()
        mine = inbox.summing
        terms, children = reduce_fields(msg)
        if (msg.job, msg.iteration, msg.epoch) != self.kept_round:
            raise RuntimeError(f"a REDUCE of round {mine} came; the values held are of "
                               f"{self.kept_round}")
        total = combined(dict(terms), self.kept.__getitem__)
        backoff = Backoff()
        while len(parts := inbox.parts_for(mine)) < len(children):  # type: ignore[arg-type]
            if inbox.summing != mine:
                return
            self.outbox.prune()
            self.prune_peers()
            if self.arrived():
                inbox.read()
                backoff.reset()
            else:
                backoff.wait()
        for part in parts:
            total += part
        buf = pack_part(msg.job, msg.iteration, msg.epoch, msg.task, self.setup.worker, total,
                        self.setup.half, self.buffers.take)
        if msg.worker == MASTER:
            self.outbox.send(buf, MASTER, Tag.PART)
        else:
            with contextlib.suppress(ProcessesFailed):  # the master re-plans without it
                self.peers.send(buf, msg.worker, Tag.PART)
        inbox.summing = None

    def prune_peers(self) -> None:
        """Forget completed sends to other workers; a dead one's are dropped (the master
        finds the death and re-plans)."""
        for box in (self.peers, self.relays):
            with contextlib.suppress(ProcessesFailed):
                box.prune()

    def settle_peers(self) -> None:
        """Every send to another worker taken in, reading (and dropping) what they send
        meanwhile: no two workers wait on each other, and none exits with a send pending."""
        backoff = Backoff()
        while self.peers.pending or self.relays.pending or (
                self.relays.holdback is not None and self.relays.holdback.queues):
            self.prune_peers()
            if not (drop_pending(self.comm, Tag.PART) or drop_pending(self.comm, Tag.ITERATE)):
                backoff.wait()

    def run(self) -> None:
        """Serve iterations until STOP; then flush sends and acknowledge."""
        backoff = Backoff()
        inbox = self.inbox
        while True:
            # nothing new: one probe (idle ranks poll at every turn they get on an
            # oversubscribed core, and each poll's cost is taken from the ranks computing)
            msg = None
            if inbox.pending or self.arrived():
                inbox.read()
                if inbox.reduce is not None:
                    self.sum_up()
                    backoff.reset()
                    continue
                msg = inbox.next_iteration()
            if msg is None:
                if inbox.finished:
                    break
                self.outbox.prune()
                self.prune_peers()
                backoff.wait()
                continue
            backoff.reset()
            try:
                self.run_iteration(msg)
            except ProcessesFailed:  # the master is gone: nobody to report to
                raise
            except Exception:  # carried back with our rank; the master decides what follows
                with failures_raised(self.comm), blocking_mpi():
                    self.comm.send(traceback.format_exc(), dest=MASTER, tag=int(Tag.ERROR))
            inbox.close_current()  # idle now (what SIGUSR1's line says), until the next one
        self.dropped += self.inbox.skipped + self.pieces.dropped
        self.outbox.drain()
        self.settle_peers()
        ack = pack_control(worker=self.setup.worker,
                           counters=(self.computed, self.sent, self.dropped, self.rows),
                           trace=self.trace or ())
        with failures_raised(self.comm):
            self.comm.Send([ack, MPI.DOUBLE], dest=MASTER, tag=int(Tag.STOP_ACK))
        # stay until the master has every acknowledgement (a dead master: leave). Without
        # ULFM every rank that acknowledges is released, if only after the run has returned
        # (a lingering one), and nothing else can end the wait
        try:
            wait_buffer(self.comm, MASTER, Tag.RELEASE,
                        RELEASE_WAIT_S if ft_enabled() else float("inf"),
                        drop=(Tag.PART, Tag.ITERATE))
        except ProcessesFailed:
            pass


def receive_setup(comm: MPI.Comm) -> object:
    """The master's set-up for this worker, or what it sent instead when the run ends before it
    starts; ProcessesFailed if the master dies first."""
    with failures_raised(comm):
        return wait_object(comm, MASTER, Tag.SETUP)
