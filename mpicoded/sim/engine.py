"""Discrete-event simulation of coded iterations, on the runtime's own MasterState and decoders.

Per iteration every worker runs its schedule back to back: task i finishes at the sum of the
delays of its first i + 1 tasks (drawn, vectorised, from the same keyed stream the MPI workers
use, so iteration t meets the same delays in both). Results reach the master in time order and
are fed to a MasterState until it decodes; everything still running is purged. The records have
the runtime's fields; ``wall_s`` is model time times the delay model's time scale.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..codes import Code
from ..delays import DelayModel
from ..runtime.state import Decoded, IterationRecord, MasterState


@dataclass
class SimResult:
    """Per-iteration records, and how fast the simulation ran."""

    records: list[IterationRecord]
    events: int  # results the master processed
    task_events: int  # task completions simulated
    elapsed_s: float
    totals: dict[str, float] = field(default_factory=dict)

    @property
    def events_per_s(self) -> float:
        """Task completions simulated per second."""
        return self.task_events / self.elapsed_s if self.elapsed_s else float("inf")

    def mean(self, metric: str) -> float:
        return float(np.mean([getattr(r, metric) for r in self.records]))


class Simulator:
    """Simulates ``code`` under ``delay``; ``task_cost`` gives each task's work units."""

    def __init__(self, code: Code, delay: DelayModel, task_cost: np.ndarray | None = None,
                 tolerance: int = 0) -> None:
        self.code, self.delay, self.tolerance = code, delay, tolerance
        cost = np.count_nonzero(code.B, axis=1) if task_cost is None else np.asarray(task_cost)
        self.workers = np.concatenate([np.full(len(ts), w) for w, ts in enumerate(code.schedule)])
        self.tasks = np.concatenate([np.asarray(ts, dtype=int) for ts in code.schedule])
        self.units = cost[self.tasks].astype(np.float64)
        starts = np.cumsum([0] + code.loads[:-1])
        self.first = np.repeat(starts, code.loads)  # index of each entry's worker's first task
        self.last = np.repeat(starts + np.array(code.loads) - 1, code.loads)

    def finish_times(self, job: int, iteration: int) -> np.ndarray:
        """Model time at which each (worker, task) entry's result reaches the master."""
        delays = self.delay.task_delays(self.workers, job, iteration, self.tasks, self.units)
        done = np.cumsum(delays)
        done -= (done - delays)[self.first]  # restart the running sum at each worker's first task
        if self.code.messages == "single":  # one message once the worker's last task is done
            done = done[self.last]
        return done

    def run(self, iterations: int, job: int = 0) -> SimResult:
        state = MasterState(self.code, self.tolerance)
        records: list[IterationRecord] = []
        events = 0
        start = time.perf_counter()
        single = self.code.messages == "single"
        for it in range(iterations):
            state.start_iteration(job, it, 0.0)
            done = self.finish_times(job, it)
            order = np.argsort(done, kind="stable")
            if single:  # a worker's whole list arrives as one message
                order = order[np.isin(order, np.unique(self.last))]
            decoded = None
            for i in order:
                w = int(self.workers[i])
                tasks = list(self.code.schedule[w]) if single else [int(self.tasks[i])]
                events += 1
                actions = state.on_result(w, job, it, tasks, None, float(done[i]))
                if actions and isinstance(actions[-1], Decoded):
                    decoded = actions[-1]
                    break
            if decoded is None:
                raise RuntimeError(f"iteration {it}: every result arrived and {self.code.name} "
                                   "still cannot decode")
            rec = decoded.record
            records.append(IterationRecord(**{**rec.__dict__,
                                              "wall_s": self.delay.seconds(rec.wall_s)}))
        return SimResult(records, events, iterations * len(self.tasks),
                         time.perf_counter() - start, dict(state.totals))


def simulate(code: Code, delay: DelayModel, iterations: int, tolerance: int = 0,
             task_cost: np.ndarray | None = None) -> SimResult:
    """Simulate ``iterations`` iterations of ``code`` under ``delay``."""
    return Simulator(code, delay, task_cost, tolerance).run(iterations)
