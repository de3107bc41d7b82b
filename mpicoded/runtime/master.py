"""The master loop: carry out MasterState's actions over MPI, decode, update theta, record."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

from ..balance import Splitter
from ..codes import Code
from ..delays import DelayModel
from ..jobs import Job
from .protocol import Tag, pack_control, pack_iterate, result_fields
from .state import Action, Decoded, IterationRecord, MasterState, SendIterate, SendPurge, SendStop
from .transport import Backoff, Outbox, WorkerError, receive
from .worker import WorkerSetup


@dataclass
class RunResult:
    """What a finished run leaves: the model, per-iteration records and run totals."""

    theta: np.ndarray
    records: list[IterationRecord]
    losses: list[float | None]
    makespan_s: float
    totals: dict[str, float] = field(default_factory=dict)
    worker_counters: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    jobs: list[JobRecord] = field(default_factory=list)


@dataclass(frozen=True)
class JobRecord:
    """One job of a stream: when it arrived, started and finished (seconds from the run's start),
    its in-order delay and its final loss."""

    job: int
    arrival_s: float
    start_s: float
    done_s: float
    in_order_delay_s: float
    final_loss: float


def rank_of(worker: int) -> int:
    """Worker w runs on MPI rank w + 1; rank 0 is the master."""
    return worker + 1


def place_data(comm: MPI.Comm, code: Code, job: Job, delay: DelayModel, purge: bool = True,
               placement: Sequence[Sequence[int]] | None = None) -> None:
    """Send every worker, once, its settings and the payloads of the tasks it may be asked to
    run: ``placement[w]`` (by default the code's schedule; a split that moves tasks between
    workers every iteration places every task everywhere)."""
    cost = job.task_cost()
    for w, tasks in enumerate(code.schedule if placement is None else placement):
        setup = WorkerSetup(
            worker=w, job=job.name, payloads={t: job.payload(t) for t in tasks},
            task_cost={t: float(cost[t]) for t in tasks}, delay=delay,
            single_message=code.messages == "single", purge=purge,
        )
        comm.send(setup, dest=rank_of(w), tag=int(Tag.SETUP))


class Master:
    """Rank 0: runs ``iterations`` iterations of ``job`` over the workers of ``comm``."""

    def __init__(self, comm: MPI.Comm, code: Code, job: Job, tolerance: int = 0, purge: bool = True,
                 loss_every: int = 1, splitter: Splitter | None = None,
                 on_iteration: Callable[[IterationRecord, float | None], None] | None = None,
                 on_job: Callable[[JobRecord], None] | None = None) -> None:
        self.comm, self.code, self.job = comm, code, job
        self.loss_every, self.splitter = loss_every, splitter
        self.on_job = on_job
        self.state = MasterState(code, tolerance, purge=purge)
        self.outbox = Outbox(comm)
        self.on_iteration = on_iteration
        self.theta = np.zeros(job.dim)
        self.records: list[IterationRecord] = []
        self.losses: list[float | None] = []
        self.counters: dict[int, tuple[int, int, int]] = {}
        self.decoded: Decoded | None = None

    def execute(self, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, SendIterate):
                buf = pack_iterate(action.job, action.iteration, action.tasks, self.theta)
                self.outbox.send(buf, rank_of(action.worker), Tag.ITERATE)
            elif isinstance(action, SendPurge):
                buf = pack_control(action.job, action.iteration)
                self.outbox.send(buf, rank_of(action.worker), Tag.PURGE)
            elif isinstance(action, SendStop):
                self.outbox.send(pack_control(), rank_of(action.worker), Tag.STOP)
            elif isinstance(action, Decoded):
                self.decoded = action

    def pump(self, until: Callable[[], bool]) -> None:
        """Handle arriving messages, with backoff between empty polls, until ``until()``."""
        backoff = Backoff()
        while not until():
            got = receive(self.comm)
            if got is None:
                self.outbox.prune()
                backoff.wait()
                continue
            backoff.reset()
            msg, src = got
            if msg.tag == Tag.RESULT:
                tasks, values = result_fields(msg)
                self.execute(self.state.on_result(src - 1, msg.job, msg.iteration, tasks, values,
                                                  time.perf_counter()))
            elif msg.tag == Tag.STOP_ACK:
                self.counters[src - 1] = tuple(int(v) for v in msg.payload[:3])
                self.state.on_stop_ack(src - 1)
            else:
                raise RuntimeError(f"master got an unexpected {msg.tag.name} from rank {src}")

    def start_iteration(self, job: int, iteration: int,
                        schedule: tuple[tuple[int, ...], ...] | None = None) -> None:
        self.decoded = None
        self.execute(self.state.start_iteration(job, iteration, time.perf_counter(), schedule))

    def finish_iteration(self) -> IterationRecord:
        """Wait until the open iteration decodes; step theta; let the splitter learn."""
        self.pump(lambda: self.decoded is not None)
        decoded = self.decoded
        assert decoded is not None and decoded.result is not None
        self.theta = self.job.update(self.theta, decoded.result, decoded.missing)
        if self.splitter is not None:
            cur = self.state.current
            self.splitter.observe(cur.arrivals, cur.decoded_at)
        return decoded.record

    def report(self, record: IterationRecord, last: bool = False) -> float | None:
        """Record an iteration with the loss of the theta it produced (every ``loss_every``-th
        iteration, and a job's last: the loss costs a pass over all the data on rank 0)."""
        due = self.loss_every and (record.iteration + 1) % self.loss_every == 0
        loss = self.job.loss(self.theta) if due or last else None
        self.records.append(record)
        self.losses.append(loss)
        if self.on_iteration is not None:
            self.on_iteration(record, loss)
        return loss

    def shutdown(self) -> None:
        """STOP every worker and wait for all acknowledgements (results still arriving are stale).

        Also the way out after a WorkerError: the failed worker is still serving and acks too.
        """
        self.execute(self.state.stop())
        while True:
            try:
                self.pump(lambda: self.state.all_acked)
                break
            except WorkerError:
                continue  # a second worker's failure changes nothing now: keep draining
        self.outbox.drain()

    def run(self, iterations: int, arrivals_s: Sequence[float] = (0.0,)) -> RunResult:
        """Jobs arriving at ``arrivals_s`` (seconds from the start), served in order, each
        ``iterations`` iterations from theta = 0; then STOP. The makespan ends when every worker
        acknowledged. An idle master waits for the next arrival, still draining late results.

        The loss of iteration t's result is computed after iteration t+1 is sent out, while the
        workers compute, so that bookkeeping never delays them.
        """
        start = time.perf_counter()
        jobs = []
        for job, arrival in enumerate(arrivals_s):
            self.pump(lambda a=arrival: time.perf_counter() - start >= a)
            began = time.perf_counter() - start
            self.theta = np.zeros(self.job.dim)
            previous: IterationRecord | None = None
            for it in range(iterations):
                self.start_iteration(job, it, self.splitter.schedule() if self.splitter else None)
                if previous is not None:
                    self.report(previous)
                previous = self.finish_iteration()
            done = time.perf_counter() - start
            loss = self.report(previous, last=True)
            jobs.append(JobRecord(job, arrival, began, done, done - arrival, loss))
            if self.on_job is not None:
                self.on_job(jobs[-1])
        self.shutdown()
        makespan = time.perf_counter() - start
        return RunResult(self.theta, self.records, self.losses, makespan,
                         dict(self.state.totals), self.counters, jobs)
