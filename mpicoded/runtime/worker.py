"""The worker loop: run the tasks of the newest iteration in order, send each result at once,
and drop the rest the moment a PURGE, a newer ITERATE or a STOP arrives."""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from ..delays import DelayModel
from ..jobs import COMPUTE
from .protocol import Message, Tag, iterate_fields, pack_control, pack_result
from .transport import Backoff, Outbox, ProcessesFailed, receive, wait_object

MASTER = 0
SLICE_S = 0.002  # an injected delay is slept in slices this long, polling for control between


@dataclass
class WorkerSetup:
    """What the master places on a worker once, at start-up."""

    worker: int
    job: str
    payloads: dict[int, dict[str, np.ndarray]]
    task_cost: dict[int, float]
    delay: DelayModel
    single_message: bool
    purge: bool = True
    kill_at: tuple[int, int] | None = None  # (job, iteration) at which to SIGKILL itself


class Worker:
    """One worker rank; counters go back to the master in STOP_ACK."""

    def __init__(self, comm: MPI.Comm, setup: WorkerSetup) -> None:
        self.comm, self.setup = comm, setup
        self.compute = COMPUTE[setup.job]
        self.outbox = Outbox(comm)
        self.computed = self.sent = self.dropped = 0
        self.backlog: list[Message] = []  # control messages that arrived while busy

    def next_message(self) -> Message:
        """The oldest unhandled message from the master, waited for with backoff."""
        if self.backlog:
            return self.backlog.pop(0)
        backoff = Backoff()
        while (got := receive(self.comm, source=MASTER)) is None:
            self.outbox.prune()
            backoff.wait()
        return got[0]

    def interrupted(self, current: Message) -> bool:
        """Read what the master sent meanwhile; True if ``current``'s iteration must be dropped."""
        while (got := receive(self.comm, source=MASTER)) is not None:
            msg = got[0]
            if msg.tag == Tag.SETUP:  # new data for a re-split: the current work goes on
                self.apply(msg.payload)
                continue
            if msg.tag != Tag.PURGE:
                self.backlog.append(msg)  # a newer ITERATE, a new SETUP or STOP: after dropping
                return True
            if (msg.job, msg.iteration, msg.epoch) == (current.job, current.iteration,
                                                       current.epoch):
                return True
            # else: a purge of an iteration this worker already left behind
        return False

    def serve_delay(self, seconds: float, current: Message) -> bool:
        """Sleep ``seconds`` in slices, polling; False if purged meanwhile.

        Without purging (``--no-purge``, how public peers behave) the worker sleeps it out and
        finishes every task it was given, however stale.
        """
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(SLICE_S, left))
            self.outbox.prune()  # lets large sends already posted make progress
            if self.setup.purge and self.interrupted(current):
                return False
        return not (self.setup.purge and self.interrupted(current))

    def run_iteration(self, msg: Message) -> None:
        tasks, theta = iterate_fields(msg)
        setup = self.setup
        done_tasks: list[int] = []
        done_values: list[np.ndarray] = []
        shift = float(setup.delay.iteration_shifts(np.array([setup.worker]))[0])
        if (msg.job, msg.iteration) == setup.kill_at:  # fault injection: die like a lost node
            os.kill(os.getpid(), signal.SIGKILL)
        if shift and not self.serve_delay(setup.delay.seconds(shift), msg):
            self.dropped += len(tasks)  # purged before the first task began
            return
        for i, task in enumerate(tasks):
            value = self.compute(setup.payloads[task], theta)
            self.computed += 1
            model_time = setup.delay.task_delay(setup.worker, msg.job, msg.iteration, i,
                                                setup.task_cost[task])
            if not self.serve_delay(setup.delay.seconds(model_time), msg):
                self.dropped += len(tasks) - i + len(done_tasks)  # unsent results are dropped too
                return
            if setup.single_message:
                done_tasks.append(task)
                done_values.append(value)
            else:
                self.send_result(msg, [task], [value])
        if done_tasks:
            self.send_result(msg, done_tasks, done_values)

    def apply(self, setup: WorkerSetup) -> None:
        """A new set-up after failures (a re-split or a re-code): new settings, and the payloads
        of the tasks it may now run, added to those it has (an iteration under way keeps its)."""
        setup.payloads = {**self.setup.payloads, **setup.payloads}
        setup.task_cost = {**self.setup.task_cost, **setup.task_cost}
        self.setup = setup
        self.compute = COMPUTE[setup.job]

    def send_result(self, msg: Message, tasks: list[int], values: list[np.ndarray]) -> None:
        buf = pack_result(msg.job, msg.iteration, self.setup.worker, tasks, values, msg.epoch)
        self.outbox.send(buf, MASTER, Tag.RESULT)
        self.sent += len(tasks)

    def run(self) -> None:
        """Serve iterations until STOP; then flush sends and acknowledge."""
        while True:
            msg = self.next_message()
            if msg.tag == Tag.STOP:
                break
            if msg.tag == Tag.SETUP:
                self.apply(msg.payload)
            elif msg.tag == Tag.ITERATE:
                try:
                    self.run_iteration(msg)
                except Exception:  # carried back with our rank; the master decides what follows
                    self.comm.send(traceback.format_exc(), dest=MASTER, tag=int(Tag.ERROR))
            # a PURGE seen here is for an iteration this worker already finished: nothing to drop
        self.outbox.drain()
        ack = pack_control(worker=self.setup.worker,
                           counters=(self.computed, self.sent, self.dropped))
        self.comm.Send([ack, MPI.DOUBLE], dest=MASTER, tag=int(Tag.STOP_ACK))


def run_worker(comm: MPI.Comm) -> int:
    """Receive the set-up from the master, then serve until STOP; returns the exit status.

    A set-up of ``int`` is the master's exit status for a run that ends before it starts (a usage
    error found on rank 0): the worker leaves with it at once.
    """
    setup = wait_object(comm, MASTER, Tag.SETUP)
    if isinstance(setup, int):
        return setup
    try:
        Worker(comm, setup).run()
    except ProcessesFailed:  # only the master talks to a worker: nothing left to do
        print(f"mpicoded: rank {comm.Get_rank()}: the master (rank 0) died; exiting",
              file=sys.stderr, flush=True)
        return 1
    return 0
