"""A run's metrics file, followed as it grows (pure: no Bokeh, no MPI).

``RunLog.poll()`` reads the records written since the last call (a line still being written
waits for its end) and keeps them, with the running totals the Prometheus endpoint serves. A
file that shrinks, or whose first bytes changed, was started again by a new run: the log starts
over.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..speeds import speeds

KEEP_TASKS = 50_000  # task records kept (the newest): a long run's trace need not fit in memory
HEAD = 256  # bytes of the file's start compared on every poll: a new run rewrites them
# upper bounds of mpicoded_iteration_seconds' buckets (+Inf added by the exporter)
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Totals:
    """What the Prometheus counters count, over the records read so far."""

    iterations: int = 0
    results_received: int = 0
    stale_results: int = 0
    purged_tasks: int = 0
    failed_workers: int = 0
    recodes: int = 0
    master_bytes_in: int = 0
    master_bytes_out: int = 0
    iteration_seconds_sum: float = 0.0
    iteration_buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    rank_tasks: Counter[tuple[int, str]] = field(default_factory=Counter)  # (MPI rank, outcome)


class RunLog:
    """The records of one metrics file: iterations, tasks (the newest ``keep_tasks`` of
    ``task_count``; None: all), events (failures, re-codes, failovers, jobs) and the final run
    record, in the order written."""

    def __init__(self, path: str, keep_tasks: int | None = KEEP_TASKS) -> None:
        self.path, self.keep_tasks = path, keep_tasks
        self.reset()

    def reset(self) -> None:
        self.offset = 0
        self.head = b""  # the file's first bytes as read
        self.tail = b""  # a line not finished yet
        self.iterations: list[dict[str, Any]] = []
        self.tasks: list[dict[str, Any]] = []
        self.task_count = 0
        self.events: list[dict[str, Any]] = []
        self.run: dict[str, Any] | None = None
        self.totals = Totals()
        self.generation = 0  # bumped on every reset: readers holding positions start over
        self._workers: tuple[int, dict[str, list[float]]] | None = None

    def poll(self) -> int:
        """Read what was appended since the last poll; the number of records read."""
        try:
            with open(self.path, "rb") as f:
                head = f.read(HEAD)
                f.seek(0, 2)
                size = f.tell()
                started_again = size < self.offset or not head.startswith(self.head)
                if started_again:  # truncated, or rewritten: a new run writes the file
                    generation = self.generation
                    self.reset()
                    self.generation = generation + 1
                self.head = head
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:  # not created yet
            return 0
        self.offset += len(data)
        lines = (self.tail + data).split(b"\n")
        self.tail = lines.pop()
        read = 0
        for line in lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line torn by a master's death, say
                continue
            if isinstance(row, dict):
                self.add(row)
                read += 1
        return read

    def workers(self) -> dict[str, list[float]]:
        """``worker_summary`` of the tasks kept, computed once for every page showing it."""
        if self._workers is None or self._workers[0] != self.task_count:
            self._workers = (self.task_count, worker_summary(self.tasks))
        return self._workers[1]

    def add(self, row: dict[str, Any]) -> None:
        """One record."""
        kind = row.get("record")
        totals = self.totals
        if kind == "iteration":
            self.iterations.append(row)
            totals.iterations += 1
            totals.results_received += int(row.get("results_received", 0))
            totals.stale_results += int(row.get("stale_results", 0))
            totals.purged_tasks += int(row.get("purged_tasks", 0))
            totals.master_bytes_in += int(row.get("master_bytes_in", 0))
            totals.master_bytes_out += int(row.get("master_bytes_out", 0))
            wall = float(row.get("wall_s", 0.0))
            totals.iteration_seconds_sum += wall
            for i, bound in enumerate(BUCKETS):
                if wall <= bound:
                    totals.iteration_buckets[i] += 1
        elif kind == "task":
            self.tasks.append(row)
            self.task_count += 1
            if self.keep_tasks is not None and len(self.tasks) >= 2 * self.keep_tasks:
                del self.tasks[:-self.keep_tasks]
            totals.rank_tasks[(int(row["worker"]) + 1, str(row["outcome"]))] += 1
        elif kind == "run":
            self.run = row
            totals.failed_workers = max(totals.failed_workers, int(row.get("failed_workers", 0)))
        else:
            self.events.append(row)
            if kind == "failure":
                totals.failed_workers += len(row.get("ranks", ()))
            elif kind == "recode":
                totals.recodes += 1


def loss_value(row: dict[str, Any]) -> float:
    """An iteration's loss, NaN when it has none (a job that reports none, or not that one)."""
    loss = row.get("loss")
    return float(loss) if loss is not None and math.isfinite(loss) else math.nan


def worker_summary(tasks: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per worker, by MPI rank: its speed against the median worker's (``speeds``: row chunks
    a second, so a straggler whose every task is purged shows too), and its tasks in its newest
    iteration (its load, as a split set it)."""
    newest: dict[int, tuple[int, int, int]] = {}
    load: Counter[int] = Counter()
    for row in tasks:
        w = int(row["worker"])
        key = (int(row["job"]), int(row.get("epoch", 0)), int(row["iteration"]))
        if key > newest.get(w, (-1, -1, -1)):
            newest[w], load[w] = key, 0
        if key == newest[w]:
            load[w] += 1
    speed = {s.rank: s.speed for s in speeds(tasks)}
    workers = sorted(newest)
    return {
        "rank": [float(w + 1) for w in workers],
        "speed": [speed.get(w + 1, math.nan) for w in workers],
        "load": [float(load[w]) for w in workers],
    }
