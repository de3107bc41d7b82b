"""The dashboard's view of a metrics file (pure), and its Prometheus counters."""

from __future__ import annotations

import json

import pytest

from mpicoded.dashboard.runlog import BUCKETS, RunLog, worker_summary


def iteration(i, wall=0.004, purged=1, stale=0, received=3):
    return {"record": "iteration", "job": 0, "iteration": i, "wall_s": wall,
            "results_received": received, "stale_results": stale, "purged_tasks": purged,
            "started_s": 0.01 * i, "loss": None if i % 2 else 1.0 / (i + 1)}


def task(worker, i, outcome="used", start=0.0, end=0.001):
    return {"record": "task", "worker": worker, "job": 0, "iteration": i, "epoch": 0,
            "task": worker, "start_s": start, "end_s": end, "chunks": 1, "outcome": outcome}


def write(path, rows, mode="a"):
    with open(path, mode) as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))


def test_follows_the_file_as_it_grows_and_waits_for_unfinished_lines(tmp_path):
    path = tmp_path / "run.jsonl"
    log = RunLog(str(path))
    assert log.poll() == 0  # not there yet
    write(path, [iteration(0), task(0, 0), task(1, 0, "purged")])
    assert log.poll() == 3
    line = json.dumps(iteration(1, wall=0.02, purged=0, stale=2)) + "\n"
    with open(path, "a") as f:
        f.write(line[:10])  # a record half written
    assert log.poll() == 0 and len(log.iterations) == 1
    with open(path, "a") as f:
        f.write(line[10:])
    assert log.poll() == 1
    totals = log.totals
    assert (totals.iterations, totals.purged_tasks, totals.stale_results,
            totals.results_received) == (2, 1, 2, 6)
    assert totals.iteration_seconds_sum == pytest.approx(0.024)
    assert totals.iteration_buckets[BUCKETS.index(0.005)] == 1
    assert totals.iteration_buckets[BUCKETS.index(0.025)] == 2  # cumulative
    assert dict(totals.rank_tasks) == {(1, "used"): 1, (2, "purged"): 1}  # MPI ranks
    assert log.workers()["rank"] == [1.0, 2.0] and log.workers()["load"] == [1.0, 1.0]


def test_events_count_failures_and_recodes_and_a_new_run_starts_over(tmp_path):
    path = tmp_path / "run.jsonl"
    log = RunLog(str(path))
    write(path, [iteration(0), {"record": "failure", "ranks": [3, 4], "workers_left": 18},
                 {"record": "recode", "epoch": 1, "workers": 18, "code": "gfrc"},
                 {"record": "run", "failed_workers": 2}])
    log.poll()
    assert (log.totals.failed_workers, log.totals.recodes) == (2, 1) and log.run is not None
    write(path, [iteration(0)], mode="w")  # a new run truncates the file
    log.poll()
    assert log.generation == 1 and log.totals.iterations == 1 and log.totals.recodes == 0


def test_worker_summary_is_speed_against_the_median_and_newest_load_by_rank():
    """Rank 2's one task was purged after its one chunk, in 0.5 s: it shows, 25x slower than
    rank 1 (three chunks in 0.04 s)."""
    rows = [task(0, 0, "used", 0.0, 0.010), task(0, 0, "received", 0.010, 0.030),
            task(0, 1, "used", 0.1, 0.11), task(1, 0, "purged", 0.0, 0.5),
            {**task(1, 1, "dropped", 0.6, 0.6), "chunks": 0}]  # never begun
    got = worker_summary(rows)
    assert got["rank"] == [1.0, 2.0] and got["load"] == [1.0, 1.0]
    assert got["speed"][0] / got["speed"][1] == pytest.approx((3 / 0.04) / (1 / 0.5))


def test_prometheus_text_has_every_counter_and_the_histogram(tmp_path):
    prometheus_client = pytest.importorskip("prometheus_client")
    from mpicoded.dashboard.metrics import RunCollector

    path = tmp_path / "run.jsonl"
    write(path, [iteration(0), iteration(1, wall=0.3), task(2, 0, "stale"),
                 {"record": "recode", "epoch": 1}])
    log = RunLog(str(path))
    log.poll()
    registry = prometheus_client.CollectorRegistry()
    registry.register(RunCollector(log))
    text = prometheus_client.generate_latest(registry).decode()
    for line in ("mpicoded_iterations_total 2.0", "mpicoded_results_received_total 6.0",
                 "mpicoded_stale_results_total 0.0", "mpicoded_purged_tasks_total 2.0",
                 "mpicoded_failed_workers_total 0.0", "mpicoded_recodes_total 1.0",
                 'mpicoded_iteration_seconds_bucket{le="0.005"} 1.0',
                 'mpicoded_iteration_seconds_bucket{le="+Inf"} 2.0',
                 "mpicoded_iteration_seconds_count 2.0",
                 'mpicoded_worker_tasks_total{outcome="stale",rank="3"} 1.0'):
        assert line in text.splitlines(), line


def test_prometheus_has_each_workers_speed_against_the_median(tmp_path):
    """Ranks 1 and 3 a chunk a millisecond, rank 2 one in 20 ms: speeds 1, 0.05 and 1."""
    prometheus_client = pytest.importorskip("prometheus_client")
    from mpicoded.dashboard.metrics import RunCollector

    path = tmp_path / "run.jsonl"
    write(path, [iteration(0), task(0, 0), task(1, 0, end=0.02), task(2, 0)])
    log = RunLog(str(path))
    log.poll()
    registry = prometheus_client.CollectorRegistry()
    registry.register(RunCollector(log))
    lines = prometheus_client.generate_latest(registry).decode().splitlines()
    speeds = {line.split('"')[1]: float(line.split()[-1]) for line in lines
              if line.startswith("mpicoded_worker_speed{")}
    assert speeds == {"1": 1.0, "2": pytest.approx(0.05), "3": 1.0}


def test_without_the_extra_the_dashboard_says_what_to_install(monkeypatch, capsys):
    import importlib.util

    from mpicoded.dashboard.__main__ import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "bokeh" else real(name, *a))
    assert main(["run.jsonl"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'mpicoded[dashboard]'" in err


def test_a_long_trace_keeps_the_newest_tasks_only(tmp_path):
    path = tmp_path / "run.jsonl"
    write(path, [task(w % 3, i) for i, w in enumerate(range(45))])
    log = RunLog(str(path), keep_tasks=10)
    log.poll()
    assert log.task_count == 45 and 10 <= len(log.tasks) < 20
    assert log.tasks[-1]["iteration"] == 44 and sum(log.totals.rank_tasks.values()) == 45
    everything = RunLog(str(path), keep_tasks=None)  # what report --html reads
    everything.poll()
    assert len(everything.tasks) == 45


def test_a_file_rewritten_by_a_new_run_is_read_again_even_when_it_grew(tmp_path):
    path = tmp_path / "run.jsonl"
    write(path, [iteration(0, wall=0.001)])
    log = RunLog(str(path))
    log.poll()
    write(path, [iteration(0, wall=0.002), iteration(1, wall=0.003)], mode="w")  # longer
    log.poll()
    assert log.generation == 1 and [r["wall_s"] for r in log.iterations] == [0.002, 0.003]
