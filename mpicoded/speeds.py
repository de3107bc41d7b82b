"""Each worker's compute speed from the task trace (pure): row chunks computed a second of task
time, against the median worker's, over the run and over windows of its iterations, so that a
report can name the slow ranks (with an all-reduce every rank looks as slow as the slowest)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

SLOW = 0.5  # a worker at most this fraction of the median worker's speed is a straggler
WINDOWS = 4  # the run's iterations cut in this many windows

Task = Mapping[str, Any]  # a "record": "task" line of the metrics file


@dataclass(frozen=True)
class WorkerSpeed:
    """One worker: its MPI rank, its speed against the median worker's over the run and in its
    slowest window (1.0: as fast), the row chunks it computed, its tasks purged or dropped."""

    rank: int
    speed: float
    slowest: float
    chunks: int
    cut: int


def _relative(tasks: Sequence[Task], workers: list[int]) -> dict[int, float]:
    """Each worker's chunks a second over ``tasks``, over the median worker's (0.0 for one that
    computed nothing while others did); empty if nobody computed anything."""
    chunks = dict.fromkeys(workers, 0)
    busy = dict.fromkeys(workers, 0.0)
    for t in tasks:
        if t["chunks"] > 0:
            chunks[t["worker"]] += t["chunks"]
            busy[t["worker"]] += t["end_s"] - t["start_s"]
    return _median_relative(chunks, busy, idle=True)


def speeds(tasks: Sequence[Task]) -> list[WorkerSpeed]:
    """Every worker in the trace, slowest first (empty without one)."""
    workers = sorted({t["worker"] for t in tasks})
    overall = _relative(tasks, workers)
    if not overall:
        return []
    keys = sorted({(t["job"], t["iteration"]) for t in tasks})
    where = {key: i * WINDOWS // len(keys) for i, key in enumerate(keys)}
    windows: list[list[Task]] = [[] for _ in range(WINDOWS)]
    for t in tasks:
        windows[where[(t["job"], t["iteration"])]].append(t)
    slowest = dict(overall)
    for window in windows:
        for w, speed in _relative(window, workers).items():
            slowest[w] = min(slowest[w], speed)
    out = [WorkerSpeed(w + 1, overall[w], slowest[w],
                       sum(t["chunks"] for t in tasks if t["worker"] == w),
                       sum(t["worker"] == w and t["outcome"] in ("purged", "dropped")
                           for t in tasks))
           for w in workers]
    return sorted(out, key=lambda s: (s.speed, s.rank))


def speed_lines(tasks: Sequence[Task], handed: Mapping[int, int] | None = None) -> list[str]:
    """The report's section: a line a worker, slowest first, then the stragglers by rank.
    ``handed`` (partial work, the run record's): rank -> pieces of its share given to others."""
    table = speeds(tasks)
    if not table:
        return []
    lines = ["worker speed (the task trace's row chunks a second, against the median worker's;"
             " slowest first)",
             f"  {'rank':>4}  {'speed':>6}  {'slowest window':>14}  {'chunks':>7}  "
             f"{'purged or dropped':>17}" + ("  handed to others" if handed is not None else "")]
    lines += [f"  {s.rank:>4}  {s.speed:>5.2f}x  {s.slowest:>13.2f}x  {s.chunks:>7}  {s.cut:>17}"
              + ("" if handed is None else f"  {handed.get(s.rank, 0):>16}")
              for s in table]
    slow = [str(s.rank) for s in table if s.speed <= SLOW]
    lines.append(f"stragglers (at most {SLOW:g}x the median over the run): "
                 + (f"rank {', '.join(slow)}" if slow else "none"))
    return lines


class Timed(Protocol):
    """What a speed needs of a task record (``core.trace.TaskRecord``): its worker (rank - 1),
    times and chunks."""

    @property
    def worker(self) -> int: ...
    @property
    def start_s(self) -> float: ...
    @property
    def end_s(self) -> float: ...
    @property
    def chunks(self) -> int: ...


class StragglerWatch:
    """Says, as the run goes, when a worker rank becomes a straggler (at most SLOW of the median
    worker's speed over the last ``window`` iterations, and at least ``span_s`` of the run, so
    that a core shared by several ranks is not mistaken for a slow rank) and when it stops
    being one (``say`` None: silent); ``stragglers`` names them over the whole run. Counts are
    sums, so the master pays an addition a task record."""

    def __init__(self, say: Callable[[str], object] | None, window: int = 10,
                 span_s: float = 1.0) -> None:
        self.say, self.window, self.span_s = say, window, span_s
        self.chunks: Counter[int] = Counter()
        self.busy: defaultdict[int, float] = defaultdict(float)
        self.run_chunks: Counter[int] = Counter()
        self.run_busy: defaultdict[int, float] = defaultdict(float)
        self.iterations = 0
        self.first_s, self.last_s = float("inf"), float("-inf")
        self.slow: set[int] = set()

    def add(self, records: Sequence[Timed]) -> None:
        chunks, busy, run_chunks, run_busy = self.chunks, self.busy, self.run_chunks, self.run_busy
        first, last = self.first_s, self.last_s
        for r in records:
            if r.chunks > 0:
                rank, took = r.worker + 1, r.end_s - r.start_s
                chunks[rank] += r.chunks
                busy[rank] += took
                run_chunks[rank] += r.chunks
                run_busy[rank] += took
                first, last = min(first, r.start_s), max(last, r.end_s)
        self.first_s, self.last_s = first, last

    def iteration(self) -> None:
        """An iteration reported: once a window is long enough, the ranks are judged."""
        self.iterations += 1
        if self.iterations < self.window or self.last_s - self.first_s < self.span_s:
            return
        rate = _median_relative(self.chunks, self.busy)
        last = f"over the last {self.iterations} iterations"
        self.chunks.clear()
        self.busy.clear()
        self.iterations = 0
        self.first_s, self.last_s = float("inf"), float("-inf")
        slow = {r for r, x in rate.items() if x <= SLOW}
        if self.say is not None:
            for r in sorted(slow - self.slow):
                self.say(f"rank {r} is a straggler: {rate[r]:.2f}x the median worker's speed "
                         f"{last}")
            for r in sorted((self.slow - slow) & set(rate)):
                self.say(f"rank {r} is no longer a straggler: {rate[r]:.2f}x the median {last}")
        self.slow = slow | (self.slow - set(rate))  # a rank with nothing computed stays

    def stragglers(self) -> dict[int, float]:
        """The ranks at most SLOW of the median worker's speed over the run: their speeds."""
        rate = _median_relative(self.run_chunks, self.run_busy)
        return {r: round(x, 3) for r, x in sorted(rate.items()) if x <= SLOW}


def _median_relative(chunks: Mapping[int, int], busy: Mapping[int, float],
                     idle: bool = False) -> dict[int, float]:
    """Each rank's chunks a second over the median rank's (empty when nobody computed); a rank
    that computed nothing is left out, or at 0.0 with ``idle``."""
    rate = {r: chunks[r] / busy[r] if busy[r] > 0 else 0.0 for r in busy
            if busy[r] > 0 or idle}
    median = float(np.median(list(rate.values()))) if rate else 0.0
    return {r: x / median for r, x in rate.items()} if median > 0 else {}
