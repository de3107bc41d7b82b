"""The master loop: carry out MasterState's actions over MPI, decode, update theta, record."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from mpi4py import MPI

from .. import checkpoint as ckpt
from ..balance import Splitter
from ..codes import Code, rebuild, rescaled_tolerance
from ..codes.partial import piece_cost
from ..delays import DelayModel
from ..jobs import Coded
from ..log import logger
from .protocol import (
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
from .ranks import WorkerRanks
from .result import JobRecord, RunResult
from .state import (
    Action,
    Decoded,
    Forget,
    IterationRecord,
    MasterState,
    Recode,
    ResultArrived,
    SendAssign,
    SendIterate,
    SendPurge,
    SendStop,
    StaleResults,
    StopAcknowledged,
    Tick,
    TimedOut,
    WorkerLost,
)
from .trace import TaskTrace
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
from .worker import WorkerSetup


@dataclass(frozen=True)
class SetupShared:
    """What every worker's set-up of one placement shares: the code (and under partial work
    its ``pieces``), the job, the delays and the run's settings. A re-code makes a new one."""

    code: Code
    job: Coded
    delay: DelayModel
    pieces: Code | None = None
    epoch: int = 0
    purge: bool = True
    chunk_rows: int = 0
    report_progress: bool = False  # an adaptive split learns from purged tasks' progress
    trace: bool = False

    def for_worker(self, world_rank: int, index: int, tasks: Sequence[int],
                   kill_at: tuple[int, int] | None = None) -> WorkerSetup:
        """The set-up of code worker ``index``, of world rank ``world_rank`` (its identity:
        delays are keyed by it): the blocks and terms of ``tasks`` (only the ids of blocks a
        job's workers load themselves); under partial work the row range of every piece of
        the partitions it holds (it may be sent any)."""
        job = self.job
        cost = job.task_cost()
        blocks, terms = job.placement(tasks)
        setup = WorkerSetup(worker=world_rank - 1, blocks=blocks, terms=terms, remote=job.remote,
                            n_partitions=self.code.n_partitions,
                            task_cost={t: float(cost[t]) for t in tasks},
                            result_size=job.result_size, delay=self.delay,
                            single_message=self.code.messages == "single",
                            chunk_rows=self.chunk_rows, purge=self.purge, kill_at=kill_at,
                            report_progress=self.report_progress, epoch=self.epoch,
                            trace=self.trace, data_coded=job.data_coded, half=job.half)
        if self.pieces is not None:
            table = self.pieces.params["pieces"]
            holds = self.pieces.params["holds"][index]
            mine = [t for t, p in enumerate(table) if p.key in holds]
            setup.pieces = {t: (table[t].key, table[t].start, table[t].stop) for t in mine}
            setup.task_cost = dict(zip(mine, piece_cost(self.pieces)[mine].tolist(),
                                       strict=True))
            setup.result_size = self.pieces.params.get("value_size", setup.result_size)
        return setup


def task_share(job: Coded, code: Code) -> float:
    """The share of the data a mean task of ``code`` computes over (its work, relatively)."""
    return float(job.task_cost().mean()) / code.n_partitions


class AllWorkersFailed(RuntimeError):
    """No worker is left to run the job."""


class Master:
    """Rank 0: serves jobs of ``job`` over the workers of ``comm``, surviving dead workers.

    Code worker w runs on rank ``ranks.rank(w)`` (rank w + 1 until workers die). Under ULFM a dead
    worker is a permanent straggler: it gets no more work; when the living can no longer decode
    an iteration, the master abandons it, re-builds the code for the survivors (GFRC, which
    exists for any (n, s)), re-places their data and runs the iteration again.
    """

    def __init__(self, comm: MPI.Comm, code: Code, job: Coded, delay: DelayModel,
                 tolerance: int = 0, purge: bool = True, loss_every: int = 1,
                 splitter: Splitter | None = None, chunk_rows: int | None = None,
                 kill_at: dict[int, tuple[int, int]] | None = None,
                 checkpoint: tuple[str, int, str] | None = None,
                 iteration_timeout: float | None = None,
                 on_iteration: Callable[[IterationRecord, float | None, np.ndarray], None]
                 | None = None,
                 on_job: Callable[[JobRecord], None] | None = None,
                 log: Callable[[str], object] | None = None, trace: bool = False,
                 partial: bool = False) -> None:
        self.comm, self.code, self.job, self.delay = comm, code, job, delay
        self.partial = partial  # partial work: the state machine decodes pieces of the code
        self.tolerance, self.purge = tolerance, purge
        self.loss_every, self.splitter = loss_every, splitter
        self.default_chunks = chunk_rows is None  # then fitted to each code's partitions
        self.chunk_rows = job.default_chunk_rows() if chunk_rows is None else chunk_rows
        self.kill_at = kill_at or {}
        self.checkpoint = checkpoint  # (directory, every N iterations, fingerprint)
        self.iteration_timeout = iteration_timeout
        # ranks, of any epoch (a re-code leaves them out of the code): who is dead is the
        # state's, but these processes may be alive and are still stopped and released
        self.timed_out: set[int] = set()  # declared failed for silence: alive, maybe hung
        self.stop_sent = False  # STOP has gone out to every living worker
        self.stopped: set[int] = set()  # ranks that acknowledged STOP
        self.unstopped: list[int] = []  # running at the end, and never acknowledged STOP
        self.on_iteration, self.on_job = on_iteration, on_job
        self.log = log  # takes metrics lines: task records, failures, re-codes
        self.pieces = self.cut()
        self.state = MasterState(self.pieces or code, tolerance, purge=purge)
        self.outbox = Outbox(comm, hold_back=purge, on_withheld=self.withheld)
        self.withheld_tasks = 0  # of ITERATEs never sent: superseded before the worker got one
        self.ranks = WorkerRanks.first(code.n_workers)
        self.recodes = 0
        self.theta = job.theta0()
        self.records: list[IterationRecord] = []
        self.losses: list[float | None] = []
        self.counters: dict[int, tuple[int, int, int, int]] = {}
        # rank 0's CPU for the results it handled (unpacking, the state machine, sends it
        # triggered; not the receive), and how many: master CPU a result
        self.result_cpu_s = 0.0
        self.results_handled = 0
        self.decoded: Decoded | None = None
        self.recoding: Recode | None = None  # carried out once the loop is back at the top
        self.max_pending = 0  # most sends outstanding at once (a leak would make it grow)
        self.placed_bytes = 0  # set-ups sent: settings, data blocks (or only their ids), terms
        self.t0 = time.perf_counter()
        # task records (--trace); workers on this host read the same clock: offset -t0 to start
        self.trace = TaskTrace(default_offset=-self.t0) if trace else None

    def clock(self) -> float:
        """Seconds since this master began: the time of the events MasterState sees."""
        return time.perf_counter() - self.t0

    def cut(self) -> Code | None:
        """Under partial work, the code's pieces (row ranges of the chunk grid), else None;
        and the values a result holds where they travel as float32 (``half_width``)."""
        pieces = None
        if self.partial:
            pieces = self.job.pieces(self.chunk_rows, fit=self.default_chunks)
        width = self.job.result_size if pieces is None else pieces.params.get(
            "value_size", self.job.result_size)
        self.half_width = width if self.job.half else 0
        return pieces

    def placement(self) -> Sequence[Sequence[int]]:
        """Which tasks' data each worker holds: its schedule, or every task for an adaptive
        split (which moves tasks between workers every iteration)."""
        if self.splitter is None:
            return self.code.schedule
        if self.splitter.kind == "adaptive":
            return [range(self.code.n_tasks)] * self.code.n_workers
        return self.splitter.schedule()

    def place(self, placement: Sequence[Sequence[int]] | None = None) -> None:
        """Post to every worker, once, its settings and the payloads of the tasks it may run:
        ``placement[w]`` (default: ``placement()``). Non-blocking: a worker hung inside MPI
        (seen under ULFM, beside ranks that died) must not hang the master; it stays a
        straggler (``--iteration-timeout`` ends its wait). What follows (ITERATEs) arrives
        after the set-up: MPI keeps one sender's messages in order."""
        shared = SetupShared(
            self.code, self.job, self.delay, self.pieces, epoch=self.state.epoch,
            purge=self.purge, chunk_rows=self.chunk_rows, trace=self.trace is not None,
            report_progress=self.splitter is not None and self.splitter.kind == "adaptive")
        for w, tasks in enumerate(self.placement() if placement is None else placement):
            if not self.state.is_live(w):
                continue
            rank = self.ranks.rank(w)
            world = self.ranks.world(rank)
            setup = shared.for_worker(world, w, tasks, self.kill_at.get(world))
            head, arrays = object_frames(setup)
            try:
                self.outbox.send(head, rank, Tag.SETUP)
                for frame in arrays:
                    self.outbox.send(frame, rank, Tag.SETUP_DATA)
            except ProcessesFailed as exc:  # died before its data left: a dead worker
                self.lose(exc.ranks)
                continue
            self.placed_bytes += len(head) + sum(frame.nbytes for frame in arrays)

    def wait_sent(self) -> None:
        """Until every send posted so far has completed (at start-up, or after a failover: the
        set-ups, before the clocks are compared), workers found dead meanwhile lost. No deadline
        (a large data set takes what it takes): a worker hung inside MPI then hangs the start."""
        while True:
            try:
                self.outbox.drain()
                return
            except ProcessesFailed as exc:
                self.lose(exc.ranks)

    def sync_clocks(self, pings: int = 3, patience: float = 2.0) -> None:
        """Learn each living worker's clock offset (--trace: task records on the master's clock,
        so hosts line up): the ping of ``pings`` with the shortest round trip counts. A worker
        silent for ``patience`` seconds keeps the default offset (one host's)."""
        assert self.trace is not None
        for w, rank in enumerate(self.ranks):
            if not self.state.is_live(w):
                continue
            best = None
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
                self.lose(exc.ranks)
                continue
            if best is not None:
                self.trace.set_offset(self.ranks.world(rank) - 1, *best)

    def record(self, row: dict[str, Any]) -> None:
        """A line of the metrics file (if any) for an event: a failure, a re-code."""
        if self.log is not None:
            self.log(json.dumps({**row, "at_s": round(self.clock(), 6)}) + "\n")

    def adopt(self, survivors: dict[int, int], epoch: int) -> None:
        """After a failover: code worker w (world rank w + 1) is on the comm rank
        ``survivors[w + 1]``, or dead (this rank's own old tasks included); the workers hold
        set-ups of ``epoch``."""
        self.ranks = WorkerRanks.adopted(self.code.n_workers, survivors)
        self.state = MasterState(self.pieces or self.code, self.tolerance, purge=self.purge,
                                 epoch=epoch, totals=self.state.totals)
        for w, rank in enumerate(self.ranks):
            if rank < 0:  # the Forget it returns is moot: nothing was ever sent to it
                self.state.handle(WorkerLost(w))
                if self.splitter is not None:
                    self.splitter.exclude(w)

    def execute(self, actions: Sequence[Action]) -> None:
        lost: set[int] = set()
        iterates = [a for a in actions if isinstance(a, SendIterate)]
        if iterates:  # one buffer, theta packed once, sent to every worker of the iteration
            buf = pack_iterate(iterates[0].job, iterates[0].iteration, self.theta,
                               {self.ranks.rank(a.worker): a.tasks for a in iterates},
                               self.state.epoch)
        for action in actions:
            try:
                if isinstance(action, SendIterate):
                    self.outbox.send(buf, self.ranks.rank(action.worker), Tag.ITERATE)
                else:
                    self._execute(action)
            except ProcessesFailed as exc:
                lost |= exc.ranks
        if lost:
            self.lose(lost)

    def _execute(self, action: Action) -> None:
        epoch = self.state.epoch
        if isinstance(action, SendPurge):
            buf = pack_control(action.job, action.iteration, epoch=epoch)
            self.outbox.send(buf, self.ranks.rank(action.worker), Tag.PURGE)
        elif isinstance(action, SendAssign):
            buf = pack_assign(action.job, action.iteration, action.tasks, epoch)
            self.outbox.send(buf, self.ranks.rank(action.worker), Tag.ASSIGN)
        elif isinstance(action, SendStop):
            self.outbox.send(pack_control(), self.ranks.rank(action.worker), Tag.STOP)
        elif isinstance(action, Decoded):
            self.decoded = action
        elif isinstance(action, Forget):
            self.outbox.forget({self.ranks.rank(action.worker)})
        elif isinstance(action, TimedOut):  # lost to the code, but maybe alive: stopped too
            self.timed_out.add(self.ranks.rank(action.worker))
        elif isinstance(action, Recode):  # not now: a re-code would change the ranks under
            self.recoding = action  # whatever sent, placed or lost this

    def withheld(self, rank: int, messages: list[tuple[Buffer, Tag]]) -> None:
        """Messages the outbox held for ``rank`` behind an ITERATE it had not taken in, made
        stale before they left: the tasks of each ITERATE (or of the ASSIGN that replaced its
        list) were dropped, as the worker would have dropped them unstarted."""
        lists: dict[tuple[int, int, int], tuple[int, ...]] = {}
        for buf, tag in messages:
            assert isinstance(buf, np.ndarray)  # ITERATE, PURGE and ASSIGN are doubles
            msg = unpack(tag, buf)
            key = (msg.job, msg.iteration, msg.epoch)
            if tag == Tag.ITERATE:
                lists[key] = iterate_fields(msg, rank)[0]
            elif tag == Tag.ASSIGN and key in lists:
                lists[key] = assign_fields(msg)
        for (job, iteration, epoch), tasks in lists.items():
            self.withheld_tasks += len(tasks)
            if self.trace is not None:
                self.trace.withheld(self.ranks.world(rank) - 1, job, iteration, epoch, tasks,
                                    self.clock())

    def describe(self) -> str:
        """Where the run is, in one line (SIGUSR1): the open iteration, the dead and timed-out
        ranks of this code, pending sends."""
        held = self.outbox.holdback.queues if self.outbox.holdback is not None else {}
        dead = sorted(r for r in (self.ranks.rank(w) for w in self.state.dead) if r > 0)
        return (f"master: {self.state.describe()}; dead ranks {dead}, timed out "
                f"{sorted(self.timed_out)}, {len(self.outbox.pending)} sends pending, held for "
                f"ranks { {rank: [h.tag.name for h in sends] for rank, sends in held.items()} }")

    def lose(self, ranks: set[int]) -> None:
        """Ranks found dead: the state says which are losses and what follows. A rank the code
        has no worker for was left out by a re-code: lost already."""
        actions: list[Action] = []
        for rank in sorted(ranks):
            index = self.ranks.index(rank)
            if index is not None:
                actions += self.state.handle(WorkerLost(index))
        self.lost(actions)

    def time_out(self) -> None:
        """Workers silent past --iteration-timeout, as the state finds them, are lost."""
        assert self.iteration_timeout is not None
        self.lost(self.state.handle(Tick(self.clock(), self.iteration_timeout)))

    def lost(self, actions: list[Action]) -> None:
        """What losses took (a Forget each, a TimedOut before those declared so): logged, the
        actions carried out and the load split again among the living."""
        silent = [self.ranks.rank(a.worker) for a in actions if isinstance(a, TimedOut)]
        if silent:
            logger.warning("worker rank(s) %s sent nothing in %g s (--iteration-timeout)",
                           silent, self.iteration_timeout)
        lost = [a.worker for a in actions if isinstance(a, Forget)]
        if not lost:
            return
        new, alive = [self.ranks.rank(w) for w in lost], len(self.state.live)
        logger.warning("worker rank(s) %s failed; %d workers left", new, alive)
        self.record({"record": "failure", "ranks": new, "workers_left": alive})
        self.execute(actions)
        if self.splitter is not None:  # split the load again among the living
            for w in lost:
                self.splitter.exclude(w)
            if self.splitter.kind != "adaptive":  # only adaptive has all data everywhere
                self.place(self.splitter.schedule())

    def pump(self, until: Callable[[], bool]) -> None:
        """Handle arriving messages, with backoff between empty polls, until ``until()``."""
        backoff = Backoff()
        while not until():
            try:
                got = receive(self.comm)
                if got is None:
                    self.max_pending = max(self.max_pending, len(self.outbox.pending))
                    self.outbox.prune()
                    backoff.wait()
                    continue
            except ProcessesFailed as exc:
                self.lose(exc.ranks)
                continue
            backoff.reset()
            msg, src = got
            index = self.ranks.index(src)
            if msg.tag == Tag.RESULT:
                began = time.thread_time()
                if index is None:  # a worker the current code no longer has
                    self.state.handle(StaleResults(msg.count))
                    if self.trace is not None:  # of an old epoch: stale
                        self.trace.add(msg.worker, result_trace(msg), stale=True)
                    continue
                tasks, values, entries = result_fields(msg, self.half_width)
                if self.trace is not None:  # before the decode: these results' entries are here
                    self.trace.add(msg.worker, entries, stale=not self.state.is_live(index))
                self.execute(self.state.handle(ResultArrived(
                    index, msg.job, msg.iteration, tasks, values, self.clock(), msg.epoch)))
                self.result_cpu_s += time.thread_time() - began
                self.results_handled += len(tasks)
            elif msg.tag == Tag.PROGRESS:
                if index is not None and self.splitter is not None:
                    self.splitter.partial(index, *progress_fields(msg),
                                          (msg.job, msg.iteration, msg.epoch))
            elif msg.tag == Tag.TRACE:
                if self.trace is not None:
                    self.trace.add(msg.worker, trace_fields(msg))
            elif msg.tag == Tag.PING:
                pass  # a clock's answer that came after sync_clocks stopped waiting
            elif msg.tag == Tag.STOP_ACK:
                self.counters[msg.worker], entries = ack_fields(msg)  # by world rank - 1
                if self.trace is not None:
                    self.trace.add(msg.worker, entries)
                self.stopped.add(src)
                if index is not None:
                    self.state.handle(StopAcknowledged(index))
            else:
                raise RuntimeError(f"master got an unexpected {msg.tag.name} from rank {src}")

    def start_iteration(self, job: int, iteration: int) -> None:
        """Send out (job, iteration) on the split's schedule (or the code's), re-coding first if
        the living cannot decode it."""
        self.decoded = None
        self.current = (job, iteration)
        while True:
            schedule = self.splitter.schedule() if self.splitter is not None else None
            if self.trace is not None:
                self.trace.opened(job, iteration, self.state.epoch)
            self.execute(self.state.start_iteration(job, iteration, self.clock(),
                                                    schedule))
            if self.recoding is None:
                return
            self.recode(self.recoding.reason)  # the living cannot decode it: nothing was sent
            self.decoded = None

    def finish_iteration(self) -> IterationRecord:
        """Wait until the open iteration decodes (re-coding and restarting it if too many
        workers die); step theta; let the splitter learn."""
        while True:
            self.pump(lambda: self.decoded is not None or self.recoding is not None
                      or bool(self.silent()))
            if self.decoded is not None:
                break
            if self.recoding is None:  # workers silent past --iteration-timeout
                self.time_out()
                if self.recoding is None:
                    continue
            self.recode(self.recoding.reason)
            self.start_iteration(*self.current)
        decoded = self.decoded
        assert decoded.result is not None
        if self.trace is not None:
            self.trace.decoded(decoded.used)
        self.theta = self.job.update(self.theta, decoded.result, decoded.missing)
        if self.splitter is not None:
            self.splitter.observe(decoded.arrivals, decoded.decoded_at,
                                  (decoded.job, decoded.iteration, decoded.record.epoch))
        return decoded.record

    def running(self) -> set[int]:
        """Ranks that may still be running: the code's live workers, and those timed out
        (lost to the code, but alive maybe)."""
        return {self.ranks.rank(w) for w in self.state.live} | self.timed_out

    def silent(self) -> list[int]:
        """Code workers silent past the iteration timeout (none without one)."""
        if self.iteration_timeout is None:
            return []
        return self.state.silent(self.clock(), self.iteration_timeout)

    def recode(self, reason: str) -> None:
        """Abandon the open iteration and re-build the code, and the data, for the survivors
        (the state's live workers, as they are now)."""
        self.execute(self.state.abandon())
        survivors = sorted(self.state.live)
        if not survivors:
            raise AllWorkersFailed("every worker has failed: the job cannot go on")
        live = [self.ranks.rank(w) for w in survivors]
        code = rebuild(self.code, len(live))
        self.tolerance = rescaled_tolerance(self.tolerance, self.code, code)
        job = self.job.recoded(code)
        if self.splitter is not None:  # what is known of the living, for tasks of a new size
            scale = task_share(job, code) / task_share(self.job, self.code)
            self.splitter = self.splitter.for_survivors(survivors, code.n_tasks, scale)
        totals, epoch = self.state.totals, self.state.epoch + 1
        self.code, self.job, self.ranks = code, job, self.ranks.recoded(live)
        if self.default_chunks:  # the survivors' partitions are new: cut them evenly too
            self.chunk_rows = job.default_chunk_rows()
        self.pieces = self.cut()
        self.state = MasterState(self.pieces or code, self.tolerance, purge=self.purge,
                                 epoch=epoch, totals=totals)
        self.recoding = None
        self.recodes += 1
        shown = ", ".join(f"{k}={v}" for k, v in code.built_with.items())
        logger.info("%s: re-coded for %d workers: %s %s, tolerance %d (epoch %d)",
                    reason, len(live), code.name, shown, self.tolerance, epoch)
        self.record({"record": "recode", "reason": reason, "epoch": epoch,
                     "workers": len(live), "code": code.name})
        self.place()  # a death while re-placing is found here or by the next iteration

    def report(self, record: IterationRecord, last: bool = False,
               decoded: float | None = None, theta: np.ndarray | None = None) -> float | None:
        """Record an iteration with the loss of the theta it produced: ``decoded`` with the next
        iteration's results for a job whose workers return their loss, else computed here
        every ``loss_every``-th iteration and at a job's last (a pass over all the data on
        rank 0)."""
        loss = decoded
        due = self.loss_every and (record.iteration + 1) % self.loss_every == 0
        if loss is None and (last or (due and not self.job.free_loss)):
            loss = self.job.loss(self.theta)
        self.records.append(record)
        self.losses.append(loss)
        if self.on_iteration is not None:  # with the theta the iteration produced
            self.on_iteration(record, loss, self.theta if theta is None else theta)
        self.write_trace()
        try:  # an ITERATE taken in meanwhile lets the one held behind it go
            self.outbox.prune()
        except ProcessesFailed as exc:  # as in pump: a death found here is handled now
            self.lose(exc.ranks)
        return loss

    def write_trace(self) -> None:
        """The task records final so far, into the metrics file."""
        if self.trace is not None and self.log is not None:
            records = self.trace.take()
            if records:
                self.log("".join(r.line() for r in records))

    def shutdown(self) -> None:
        """STOP every worker and wait for all acknowledgements (results still arriving are stale).

        Also the way out after a WorkerError: the failed worker is still serving and acks too.
        """
        self.send_stop()
        for rank in sorted(self.timed_out):  # alive, maybe: told too
            try:
                self.outbox.send(pack_control(), rank, Tag.STOP)
            except ProcessesFailed:
                pass
        # with --iteration-timeout, nobody is waited for longer than that (or 5 s): a worker
        # hung in the last iteration, which decoded without it, never acknowledges
        grace = None if self.iteration_timeout is None else (
            time.perf_counter() + max(5.0, self.iteration_timeout))

        def over() -> bool:
            done = self.state.all_acked and self.timed_out <= self.stopped
            return done or (grace is not None and time.perf_counter() > grace)

        while True:
            try:
                self.pump(over)
                break
            except WorkerError:
                continue  # a second worker's failure changes nothing now: keep draining
        if grace is not None:
            self.unstopped = sorted(self.running() - self.stopped)
        self.outbox.forget(self.timed_out | set(self.unstopped))  # hung: their sends may not end
        self.drain()
        # only now may the workers leave: under ULFM one leaving while others still stop is
        # reported as a death, and the master would then forget to stop a living one
        for rank in sorted(self.stopped & self.running()):
            try:
                self.outbox.send(pack_control(), rank, Tag.RELEASE)
            except ProcessesFailed:
                pass
        self.drain()

    def send_stop(self) -> None:
        """STOP to every living worker, once."""
        if not self.stop_sent:
            self.stop_sent = True
            self.execute(self.state.stop())

    def drain(self) -> None:
        """Every send out; a rank that died with one pending is dropped."""
        while True:
            try:
                self.outbox.drain()
                return
            except ProcessesFailed:
                continue

    def run(self, iterations: int, arrivals_s: Sequence[float] | np.ndarray = (0.0,),
            resume: ckpt.Checkpoint | None = None) -> RunResult:
        """Jobs arriving at ``arrivals_s`` (seconds from the start), served in order, each
        ``iterations`` iterations from theta = 0 (or from a checkpoint); STOP goes out as the
        last one decodes, before its loss is computed. The makespan ends when every worker
        acknowledged. An idle master waits for the next arrival, still draining late results.

        The loss of iteration t's result is computed after iteration t+1 is sent out, while the
        workers compute, so that bookkeeping never delays them.
        """
        start = time.perf_counter()
        self.record({"record": "start", "jobs": len(arrivals_s), "iterations": iterations})
        jobs, thetas = [], []
        first_job, first_it = (resume.job, resume.iteration) if resume else (0, 0)
        for job in range(first_job, len(arrivals_s)):
            arrival = arrivals_s[job]

            def arrived(a: float = arrival) -> bool:
                return time.perf_counter() - start >= a

            if not arrived():  # no ITERATE follows the last decode at once: purge now
                self.execute(self.state.release_purges())
            self.pump(arrived)
            began = time.perf_counter() - start
            resumed = resume is not None and job == first_job
            self.theta = resume.theta.copy() if resume is not None and resumed else self.job.theta0()
            previous: IterationRecord | None = None  # decoded, its loss not known yet
            ready: tuple[IterationRecord, bool, float | None, np.ndarray | None] | None = None
            for it in range(first_it if resumed else 0, iterations):
                self.start_iteration(job, it)
                if ready is not None:  # while the workers compute
                    self.report(*ready)
                    ready = None
                # the previous iteration's theta (this one's start), whose loss this decodes
                produced = self.theta.copy() if self.job.free_loss else None
                record = self.finish_iteration()
                if not self.job.free_loss:
                    ready = (record, False, None, None)  # its loss from theta now, on rank 0
                elif previous is not None:  # this decode carried the loss of previous' theta
                    ready = (previous, False, self.job.decoded_loss, produced)
                previous = record
                self.save_checkpoint(job, it + 1)
            done = time.perf_counter() - start
            if job == len(arrivals_s) - 1:  # no more work: STOP now, so that a straggler reads
                self.send_stop()  # it with the last purge (its next burst of CPU, on a quota),
                # and acknowledges while the last loss is computed here
            if ready is not None and ready[0] is not previous:
                self.report(*ready)
            loss = self.report(previous, last=True) if previous else self.job.loss(self.theta)
            jobs.append(JobRecord(job, arrival, began, done, done - arrival, loss))
            thetas.append(self.theta.copy())
            if self.on_job is not None:
                self.on_job(jobs[-1])
        self.shutdown()
        makespan = time.perf_counter() - start
        if self.trace is not None:
            self.trace.close("stale")  # an iteration left open (none when the run ended well)
            self.write_trace()
        loads = None if self.splitter is None else [int(k) for k in self.splitter.loads]
        return RunResult(self.theta, self.records, self.losses, makespan,
                         dict(self.state.totals), self.counters, jobs, self.recodes, thetas,
                         final_loads=loads)

    def save_checkpoint(self, job: int, next_iteration: int) -> None:
        """Every N iterations: theta and the resume point, written atomically."""
        if self.checkpoint is None:
            return
        directory, every, fingerprint = self.checkpoint
        if next_iteration % every == 0:
            ckpt.save(directory, ckpt.Checkpoint(job, next_iteration, self.theta, fingerprint))
