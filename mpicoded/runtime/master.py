"""The master loop: carry out MasterState's actions over MPI, decode, update theta, record."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from mpi4py import MPI

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
    losses: list[float]
    makespan_s: float
    totals: dict[str, float] = field(default_factory=dict)
    worker_counters: dict[int, tuple[int, int, int]] = field(default_factory=dict)


def rank_of(worker: int) -> int:
    """Worker w runs on MPI rank w + 1; rank 0 is the master."""
    return worker + 1


def place_data(comm: MPI.Comm, code: Code, job: Job, delay: DelayModel) -> None:
    """Send every worker, once, the payloads of all tasks in its schedule and its settings."""
    cost = code.task_cost
    for w, tasks in enumerate(code.schedule):
        setup = WorkerSetup(
            worker=w, job=job.name, payloads={t: job.payload(t) for t in tasks},
            task_cost={t: float(cost[t]) for t in tasks}, delay=delay,
            single_message=code.messages == "single",
        )
        comm.send(setup, dest=rank_of(w), tag=int(Tag.SETUP))


class Master:
    """Rank 0: runs ``iterations`` iterations of ``job`` over the workers of ``comm``."""

    def __init__(self, comm: MPI.Comm, code: Code, job: Job, tolerance: int = 0,
                 on_iteration: Callable[[IterationRecord, float], None] | None = None) -> None:
        self.comm, self.code, self.job = comm, code, job
        self.state = MasterState(code, tolerance)
        self.outbox = Outbox(comm)
        self.on_iteration = on_iteration
        self.theta = np.zeros(job.dim)
        self.records: list[IterationRecord] = []
        self.losses: list[float] = []
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

    def run_iteration(self, job: int, iteration: int) -> IterationRecord:
        self.decoded = None
        self.execute(self.state.start_iteration(job, iteration, time.perf_counter()))
        self.pump(lambda: self.decoded is not None)
        decoded = self.decoded
        assert decoded is not None and decoded.result is not None
        self.theta = self.job.update(self.theta, decoded.result, decoded.missing)
        return decoded.record

    def shutdown(self) -> None:
        """STOP every worker and wait for all acknowledgements (results still arriving are stale).

        Also the way out after a WorkerError: the failed worker is still serving and acks too.
        """
        self.execute(self.state.stop())
        while True:
            try:
                self.pump(lambda: self.state.acked >= self.state.workers)
                break
            except WorkerError:
                continue  # a second worker's failure changes nothing now: keep draining
        self.outbox.drain()

    def run(self, iterations: int, job: int = 0) -> RunResult:
        """All iterations, then STOP; the makespan ends when every worker acknowledged."""
        start = time.perf_counter()
        for it in range(iterations):
            record = self.run_iteration(job, it)
            loss = self.job.loss(self.theta)
            self.records.append(record)
            self.losses.append(loss)
            if self.on_iteration is not None:
                self.on_iteration(record, loss)
        self.shutdown()
        makespan = time.perf_counter() - start
        return RunResult(self.theta, self.records, self.losses, makespan,
                         dict(self.state.totals), self.counters)
