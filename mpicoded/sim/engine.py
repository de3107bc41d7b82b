"""Discrete-event simulation of coded iterations, on the runtime's own MasterState and decoders.

Per iteration every worker runs its task list back to back after its communication delay: task
i finishes at the sum of the delays of its first i + 1 tasks (drawn, vectorised, from the same
keyed stream the MPI workers use, so iteration t meets the same delays in both). Results reach
the master in time order and are fed to a MasterState until it decodes; everything still running
is purged. Records have the runtime's fields; times are model time times the time scale.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..balance import Splitter
from ..codes import Code
from ..delays import DelayModel
from ..runtime.state import (
    Decoded,
    IterationRecord,
    MasterState,
    ResultArrived,
    SendAssign,
    SendIterate,
)
from ..stream import StreamTimes, genie_iteration_time, serve_in_order


@dataclass
class SimResult:
    """Per-iteration records, and how fast the simulation ran."""

    records: list[IterationRecord]
    events: int  # results the master processed
    task_events: int  # task completions simulated
    elapsed_s: float
    totals: dict[str, float] = field(default_factory=dict)
    jobs: StreamTimes | None = None  # for a stream: the jobs' start, departure and delay
    genie: StreamTimes | None = None  # the genie's lower bound on the same delays

    @property
    def events_per_s(self) -> float:
        """Task completions simulated per second."""
        return self.task_events / self.elapsed_s if self.elapsed_s else float("inf")

    def mean(self, metric: str) -> float:
        return float(np.mean([getattr(r, metric) for r in self.records]))


@dataclass(frozen=True)
class _Entries:
    """One schedule flattened: an entry per (worker, task) in execution order."""

    workers: np.ndarray
    tasks: np.ndarray
    slots: np.ndarray  # position in the worker's list
    first: np.ndarray  # index of the entry's worker's first entry
    last: np.ndarray  # index of the entry's worker's last entry


@lru_cache(maxsize=64)
def _entries(schedule: tuple[tuple[int, ...], ...]) -> _Entries:
    loads = np.array([len(ts) for ts in schedule])
    workers = np.repeat(np.arange(len(schedule)), loads)
    tasks = np.array([t for ts in schedule for t in ts], dtype=int)
    starts = np.concatenate([[0], np.cumsum(loads)[:-1]])
    first = np.repeat(starts, loads)
    return _Entries(workers, tasks, np.arange(len(tasks)) - first, first,
                    np.repeat(starts + loads - 1, loads))


class Simulator:
    """Simulates ``code`` under ``delay``; ``task_cost`` gives each task's work units."""

    def __init__(self, code: Code, delay: DelayModel, task_cost: np.ndarray | None = None,
                 tolerance: int = 0, splitter: Splitter | None = None) -> None:
        self.code, self.delay, self.tolerance, self.splitter = code, delay, tolerance, splitter
        cost = np.count_nonzero(code.B, axis=1) if task_cost is None else np.asarray(task_cost)
        self.cost = cost.astype(np.float64)
        self.task_events = 0

    def finish_times(self, job: int, iteration: int,
                     schedule: tuple[tuple[int, ...], ...] | None = None) -> np.ndarray:
        """Model time at which each (worker, task) entry's result reaches the master."""
        e = _entries(self.code.schedule if schedule is None else schedule)
        delays = self.delay.task_delays(e.workers, job, iteration, e.slots, self.cost[e.tasks])
        done = np.cumsum(delays)
        done -= (done - delays)[e.first]  # restart the running sum at each worker's first task
        done += self.delay.iteration_shifts(e.workers)
        if self.code.messages == "single":  # one message once the worker's last task is done
            done = done[e.last]
        return done

    def iteration(self, state: MasterState, job: int, it: int) -> tuple[IterationRecord, int]:
        """One iteration on ``state``; its record (times in seconds) and results processed."""
        if state.partial:
            return self.partial_iteration(state, job, it)
        schedule = self.splitter.schedule() if self.splitter else self.code.schedule
        e = _entries(schedule)
        state.start_iteration(job, it, 0.0, schedule)
        done = self.finish_times(job, it, schedule)
        self.task_events += len(done)
        order = np.argsort(done, kind="stable")
        single = self.code.messages == "single"
        if single:  # a worker's whole list arrives as one message
            order = order[e.last[order] == order]
        processed = 0
        for i in order:
            w = int(e.workers[i])
            tasks = list(schedule[w]) if single else [int(e.tasks[i])]
            processed += 1
            actions = state.handle(ResultArrived(w, job, it, tasks, None, float(done[i])))
            if actions and isinstance(actions[-1], Decoded):
                if self.splitter is not None:
                    self.splitter.observe(actions[-1].arrivals, actions[-1].decoded_at)
                rec = actions[-1].record
                return IterationRecord(**{**rec.__dict__,
                                          "wall_s": self.delay.seconds(rec.wall_s)}), processed
        raise RuntimeError(f"iteration {it}: every result arrived and {self.code.name} "
                           "still cannot decode")

    def partial_iteration(self, state: MasterState, job: int,
                          it: int) -> tuple[IterationRecord, int]:
        """Partial work, event by event: a worker computes its list a piece at a time, each
        finished piece reaches the master at once, and the pieces the master hands over
        (SendAssign) replace what is left of the receiver's list."""
        actions = state.start_iteration(job, it, 0.0, self.code.schedule)
        queues = {a.worker: deque(a.tasks) for a in actions if isinstance(a, SendIterate)}
        shifts = self.delay.iteration_shifts(np.arange(self.code.n_workers))
        slots = dict.fromkeys(queues, 0)
        busy: set[int] = set()
        heap: list[tuple[float, int, int, int]] = []
        order = itertools.count()  # ties in time: first pushed, first served

        def start(w: int, now: float) -> None:
            if w in busy or not queues.get(w):
                return
            task = queues[w].popleft()
            took = self.delay.task_delays(np.array([w]), job, it, np.array([slots[w]]),
                                          self.cost[[task]])[0]
            slots[w] += 1
            busy.add(w)
            heapq.heappush(heap, (now + float(took), next(order), w, task))

        for w in queues:
            start(w, float(shifts[w]))
        processed = 0
        while heap:
            now, _, w, task = heapq.heappop(heap)
            busy.discard(w)
            self.task_events += 1
            processed += 1
            actions = state.handle(ResultArrived(w, job, it, [task], None, now))
            if actions and isinstance(actions[-1], Decoded):
                rec = actions[-1].record
                return IterationRecord(**{**rec.__dict__,
                                          "wall_s": self.delay.seconds(rec.wall_s)}), processed
            for action in actions:
                if isinstance(action, (SendAssign, SendIterate)):
                    queues[action.worker] = deque(action.tasks)
                    slots.setdefault(action.worker, 0)
                    start(action.worker, now)
            start(w, now)
        raise RuntimeError(f"iteration {it}: every piece arrived and {self.code.name} still "
                           "cannot decode")

    def run(self, iterations: int, job: int = 0) -> SimResult:
        return self.run_stream(np.zeros(1), iterations, genie=False, first_job=job)

    def run_stream(self, arrivals: np.ndarray, iterations: int, genie: bool = True,
                   first_job: int = 0) -> SimResult:
        """Jobs arriving at ``arrivals`` (model time), ``iterations`` each, served in order."""
        state = MasterState(self.code, self.tolerance)
        records: list[IterationRecord] = []
        processed = 0
        self.task_events = 0
        start = time.perf_counter()
        services, genie_services = [], []
        for j in range(len(arrivals)):
            job = first_job + j
            service = genie_service = 0.0
            for it in range(iterations):
                rec, n = self.iteration(state, job, it)
                records.append(rec)
                processed += n
                service += rec.wall_s
                if genie:
                    genie_service += self.delay.seconds(genie_iteration_time(
                        self.delay, self.code.n_workers, job, it, self.code.n_partitions))
            services.append(service)
            genie_services.append(genie_service)
        elapsed = time.perf_counter() - start
        arrivals_s = np.array([self.delay.seconds(a) for a in arrivals])
        return SimResult(records, processed, self.task_events, elapsed, dict(state.totals),
                         serve_in_order(arrivals_s, services),
                         serve_in_order(arrivals_s, genie_services) if genie else None)


def simulate(code: Code, delay: DelayModel, iterations: int, tolerance: int = 0,
             task_cost: np.ndarray | None = None) -> SimResult:
    """Simulate ``iterations`` iterations of ``code`` under ``delay``."""
    return Simulator(code, delay, task_cost, tolerance).run(iterations)


def expected_iteration_time(code: Code, delay: DelayModel, loads: np.ndarray,
                            iterations: int = 200) -> float:
    """Mean simulated iteration time (model time) of ``code`` with a fixed split ``loads`` -
    the simulator's figure beside each candidate of the code-parameter search."""
    from ..balance import split_schedule

    fixed = Code(code.name, code.B, split_schedule(loads, code.n_tasks), code.target,
                 code.decoder_cls, code.params, code.messages)
    res = Simulator(fixed, delay, np.ones(code.n_tasks)).run(iterations)
    return res.mean("wall_s") / delay.time_scale
