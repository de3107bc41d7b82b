"""The task trace (``--trace``): what each task of each worker did, and when, on the master's
clock (pure: no MPI).

A worker knows when a task started and ended, how many chunks it computed, and whether it sent
the result, was purged mid-task or dropped the task before starting it; it sends these entries
along with messages it sends anyway (its next RESULT, or STOP_ACK). Only the master knows what
became of a sent result: ``used`` in the decode, ``received`` but not needed (a replica's
duplicate, or past what the decoder took), or ``stale`` (its iteration was decoded or abandoned
before it arrived). ``TaskTrace`` joins the two.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import NamedTuple

import numpy as np

SENT, PURGED, DROPPED = 0.0, 1.0, 2.0  # a trace entry's outcome as the worker knows it


class TraceEntry(NamedTuple):
    """A task's trace entry as a worker records and sends it (clock: its time.perf_counter):
    the task of (job, iteration, epoch), when it ran, the row chunks it did and how it ended
    as the worker knows (SENT, PURGED or DROPPED); the master's TaskTrace reads them back."""

    job: int
    iteration: int
    epoch: int
    task: int
    start: float
    end: float
    chunks: int
    outcome: float



OUTCOMES = ("used", "received", "purged", "dropped", "stale")
FINISHED = ("used", "received", "stale")  # computed to the end and sent


_LINE = ('{"record": "task", "worker": %d, "job": %d, "iteration": %d, "epoch": %d, "task": %d, '
         '"start_s": %.6f, "end_s": %.6f, "chunks": %d, "outcome": "%s"}\n')


_Row = tuple[int, int, int, int, int, float, float, int]  # a TaskRecord but its outcome


class TaskRecord(NamedTuple):
    """One task of one worker: a ``"record": "task"`` line of the metrics file."""

    worker: int
    job: int
    iteration: int
    epoch: int
    task: int
    start_s: float
    end_s: float
    chunks: int
    outcome: str

    def line(self) -> str:
        """The JSON line (formatted by hand: a run writes one a task, on rank 0)."""
        return _LINE % self


class TaskTrace:
    """Entries in, task records out. ``offsets[worker]`` turns that worker's clock into the
    master's (``default_offset`` for a worker never pinged: right on one host, where every
    process reads the same monotonic clock)."""

    def __init__(self, default_offset: float = 0.0) -> None:
        self.offsets: dict[int, float] = {}
        self.default_offset = default_offset
        self.open: tuple[int, int, int] | None = None  # (job, iteration, epoch) being decoded
        self.pending: list[_Row] = []  # sent results of the open iteration, as they came
        self.records: list[TaskRecord] = []  # final, not taken yet

    def set_offset(self, worker: int, sent: float, reply: float, back: float) -> None:
        """A ping: the master's clock read at ``sent`` and ``back``, the worker's ``reply`` in
        between. The offset lies between ``sent - reply`` and ``back - reply``: if the one-host
        offset does, the two processes read one clock (one host, or containers on one kernel)
        and it is exact; else half-way (a round trip on 21 ranks sharing 2 cores can take
        milliseconds, and need not be symmetric)."""
        low, high = sent - reply, back - reply
        inside = low <= self.default_offset <= high
        self.offsets[worker] = self.default_offset if inside else (low + high) / 2

    def shift(self, delta: float) -> None:
        """The master's clock now starts ``delta`` seconds later."""
        self.default_offset -= delta
        self.offsets = {w: offset - delta for w, offset in self.offsets.items()}

    def opened(self, job: int, iteration: int, epoch: int) -> None:
        """The master sent (job, iteration) out: its results are pending until decoded."""
        self.close("received")
        self.open = (job, iteration, epoch)

    def add(self, worker: int, entries: np.ndarray, stale: bool = False) -> None:
        """A worker's entries (TraceEntry rows, its own clock); ``stale``: its results no
        longer count (a worker declared failed), whatever their iteration."""
        offset = self.offsets.get(worker, self.default_offset)
        for job, iteration, epoch, task, start, end, chunks, outcome in entries.tolist():
            row: _Row = (worker, int(job), int(iteration), int(epoch), int(task), start + offset,
                         end + offset, int(chunks))
            if outcome == SENT:
                if row[1:4] == self.open and not stale:
                    self.pending.append(row)
                    continue
                name = "stale"
            elif outcome == PURGED:
                name = "purged"
            elif outcome == DROPPED:
                name = "dropped"
            else:
                raise ValueError(f"worker {worker} sent a trace entry with outcome {outcome}")
            self.records.append(TaskRecord(*row, name))

    def withheld(self, worker: int, job: int, iteration: int, epoch: int,
                 tasks: tuple[int, ...], at: float) -> None:
        """An ITERATE the master never sent ``worker`` (a newer one made it stale first): its
        tasks were dropped unstarted, at ``at`` on the master's clock."""
        self.records.extend(TaskRecord(worker, job, iteration, epoch, task, at, at, 0, "dropped")
                            for task in tasks)

    def decoded(self, used: AbstractSet[int]) -> None:
        """The open iteration decoded from the results of tasks ``used``: the first result of
        each (in arrival order, as the decoder took them) was used, any other received."""
        taken: set[int] = set()
        for row in self.pending:
            task = row[4]
            outcome = "used" if task in used and task not in taken else "received"
            taken.add(task)
            self.records.append(TaskRecord(*row, outcome))
        self.pending = []
        self.open = None

    def close(self, outcome: str) -> None:
        """The open iteration ends undecoded (abandoned for a re-code, or the run ended): what
        it received is ``outcome``."""
        self.records.extend(TaskRecord(*row, outcome) for row in self.pending)
        self.pending = []
        self.open = None

    def take(self) -> list[TaskRecord]:
        """The records final since the last call."""
        out, self.records = self.records, []
        return out
