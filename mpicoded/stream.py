"""A stream of jobs served in order (paper 000): Poisson arrivals, the Lindley recursion, and the
genie lower bound on the in-order delay.

Job j arrives at A_j and needs S_j of service (the sum of its iterations' times); jobs are served
first come, first served, so it departs at D_j = max(D_{j-1}, A_j) + S_j and its in-order delay
is D_j - A_j. The genie knows every realized task time and ends each iteration at the earliest
moment K tasks could have been finished by the workers running back to back; its iteration
times fed through the same recursion bound the delay from below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .delays import DelayModel, keyed_uniform

ARRIVAL_KEY = 1_000_003  # keeps the arrival stream apart from the workers' delay streams


def poisson_arrivals(n_jobs: int, rate: float, seed: int) -> np.ndarray:
    """Arrival times (model time) of a Poisson process of ``rate``; the first job at time 0."""
    if n_jobs < 1 or not rate > 0:
        raise ValueError(f"jobs={n_jobs} and arrival rate={rate}: allowed jobs >= 1, rate > 0")
    gaps = -np.log(keyed_uniform(seed, ARRIVAL_KEY, np.arange(1, n_jobs))) / rate
    return np.concatenate([[0.0], np.cumsum(gaps)])


@dataclass(frozen=True)
class StreamTimes:
    """Start, departure and in-order delay of every job."""

    start: np.ndarray
    done: np.ndarray
    delay: np.ndarray


def serve_in_order(arrivals: Sequence[float] | np.ndarray,
                   services: Sequence[float] | np.ndarray) -> StreamTimes:
    """The Lindley recursion D_j = max(D_{j-1}, A_j) + S_j."""
    arrivals, services = np.asarray(arrivals, float), np.asarray(services, float)
    start, done = np.empty_like(arrivals), np.empty_like(arrivals)
    free = -np.inf
    for j, (a, s) in enumerate(zip(arrivals, services, strict=True)):
        start[j] = max(free, a)
        done[j] = free = start[j] + s
    return StreamTimes(start, done, done - arrivals)


def genie_iteration_time(delay: DelayModel, n_workers: int, job: int, iteration: int,
                         needed: int, units: float = 1.0) -> float:
    """Earliest model time by which ``needed`` tasks could be done: every worker runs slot after
    slot from its communication delay on, with the realized (keyed) task times."""
    workers = np.repeat(np.arange(n_workers), needed)
    slots = np.tile(np.arange(needed), n_workers)
    times = delay.task_delays(workers, job, iteration, slots, np.full(len(slots), units))
    finish = np.cumsum(times.reshape(n_workers, needed), axis=1)
    finish += delay.iteration_shifts(np.arange(n_workers))[:, None]
    return float(np.partition(finish.ravel(), needed - 1)[needed - 1])
