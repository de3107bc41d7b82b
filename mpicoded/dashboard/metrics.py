"""The Prometheus endpoint's metrics, computed from the run's records on every scrape."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .runlog import BUCKETS, RunLog

COUNTERS = (
    ("iterations", "iterations decoded"),
    ("results_received", "task results the master received in time for their iteration"),
    ("stale_results", "task results that arrived after their iteration was over"),
    ("purged_tasks", "tasks purged: still owed when their iteration decoded"),
    ("failed_workers", "workers found dead or silent past --iteration-timeout"),
    ("recodes", "times the code was re-built for the surviving workers"),
    ("master_bytes_in", "bytes rank 0 received from the workers (the set-ups aside)"),
    ("master_bytes_out", "bytes rank 0 sent the workers (the set-ups aside)"),
)


class RunCollector(Collector):  # type: ignore[misc, unused-ignore]  # Any without the extra
    """mpicoded_* counters, the iteration-time histogram, per-worker task outcomes and speeds
    of one RunLog (whose owner polls it)."""

    def __init__(self, log: RunLog) -> None:
        self.log = log

    def collect(self) -> Iterator[Metric]:
        totals = self.log.totals
        for name, text in COUNTERS:
            yield CounterMetricFamily(f"mpicoded_{name}", text, value=getattr(totals, name))
        buckets = [(repr(bound), count) for bound, count in zip(BUCKETS, totals.iteration_buckets,
                                                                strict=True)]
        buckets.append(("+Inf", totals.iterations))
        yield HistogramMetricFamily("mpicoded_iteration_seconds",
                                    "seconds from sending an iteration out to its decode",
                                    buckets=buckets, sum_value=totals.iteration_seconds_sum)
        tasks = CounterMetricFamily("mpicoded_worker_tasks",
                                    "tasks by worker (MPI rank) and outcome (the task trace)",
                                    labels=["rank", "outcome"])
        for (rank, outcome), count in sorted(totals.rank_tasks.items()):
            tasks.add_metric([str(rank), outcome], count)
        yield tasks
        speed = GaugeMetricFamily("mpicoded_worker_speed",
                                  "row chunks a second against the median worker's, over the "
                                  "tasks kept (the report's straggler at 0.5 or less)",
                                  labels=["rank"])
        workers = self.log.workers()
        for at, value in zip(workers["rank"], workers["speed"], strict=True):
            if not math.isnan(value):
                speed.add_metric([str(int(at))], value)
        yield speed
