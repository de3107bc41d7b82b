"""What a run records (pure: no MPI): an iteration's record, a job's, and the RunResult that
``mpicoded.run`` gives rank 0."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class IterationRecord:
    """What one iteration cost (metric names from the design)."""

    job: int
    iteration: int
    wall_s: float
    results_used: int
    results_received: int
    stale_results: int
    purged_tasks: int
    messages: int
    volume: float
    missing_partitions: int
    started_s: float = 0.0  # when it was sent out, on the master's clock (steady-state rates)
    epoch: int = 0  # re-codes before it: the epoch of its tasks
    # the job's evaluation on held-out data of the theta it produced (``--eval-every``)
    evaluation: dict[str, float] | None = None


@dataclass(frozen=True)
class JobRecord:
    """One job of a stream: when it arrived, started and finished (seconds from the run's start),
    its in-order delay and its final loss."""

    job: int
    arrival_s: float
    start_s: float
    done_s: float
    in_order_delay_s: float
    final_loss: float | None


@dataclass
class RunResult:
    """What a finished run leaves: the model, per-iteration records and run totals."""

    theta: np.ndarray
    records: list[IterationRecord]
    losses: list[float | None]
    makespan_s: float
    totals: dict[str, float] = field(default_factory=dict)
    worker_counters: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    jobs: list[JobRecord] = field(default_factory=list)
    recodes: int = 0
    job_thetas: list[np.ndarray] = field(default_factory=list)  # each served job's final theta
    record: dict[str, Any] = field(default_factory=dict)  # the run record (what --metrics ends with)
    final_loads: list[int] | None = None  # tasks a worker of the load split (None: uniform)
