"""End to end: job streams, load splits and the online estimator on real MPI ranks."""

from __future__ import annotations

import json

import pytest

from mpicoded.launcher.process import run_mpi


def train(ranks, *flags, timeout=150):
    return run_mpi(ranks, ["-m", "mpicoded.train", *flags], timeout=timeout)


def records(path, kind):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if r["record"] == kind]


def test_adaptive_split_follows_a_worker_that_slows_down(tmp_path):
    """Rank 3 becomes 10x slower at iteration 15: the adaptive split, which started uniform
    (3 tasks each), ends giving it fewer tasks than anyone else."""
    metrics = tmp_path / "run.jsonl"
    done = train(7, "--job", "linreg", "--code", "mds", "--partitions", "12", "--redundancy",
                 "1.5", "--features", "12", "--samples", "600", "--delay", "persistent",
                 "--task-time", "0.01", "--slow-workers", "3", "--slow-factor", "10",
                 "--slow-from", "15", "--split", "adaptive", "--iterations", "40",
                 "--metrics", str(metrics), "--quiet")
    assert done.returncode == 0, done.output[-3000:]
    run = records(metrics, "run")[0]
    loads = run["final_loads"]
    assert sum(loads) == 18 and run["split"] == "adaptive"
    assert loads[2] < 3 and loads[2] == min(loads), loads
    its = records(metrics, "iteration")
    before = sum(r["wall_s"] for r in its[10:15]) / 5
    after = sum(r["wall_s"] for r in its[-5:]) / 5
    assert after < 3 * before  # the slow worker no longer sets the pace


def test_stream_of_jobs_in_order(tmp_path):
    metrics = tmp_path / "run.jsonl"
    done = train(5, "--job", "linreg", "--code", "uncoded", "--delay", "persistent",
                 "--task-time", "0.01", "--jobs", "3", "--arrival-rate", "20", "--iterations",
                 "4", "--samples", "400", "--features", "8", "--metrics", str(metrics), "--quiet")
    assert done.returncode == 0, done.output[-3000:]
    jobs = records(metrics, "job")
    assert [j["job"] for j in jobs] == [0, 1, 2]
    for prev, job in zip(jobs, jobs[1:], strict=False):
        assert job["start_s"] >= max(prev["done_s"], job["arrival_s"]) - 1e-6  # FIFO, in order
    from mpicoded.stream import poisson_arrivals

    expected = poisson_arrivals(3, 20.0, 0)  # the seed's arrivals, in seconds (time scale 1)
    assert [j["arrival_s"] for j in jobs] == pytest.approx(list(expected), abs=1e-12)
    for job in jobs:
        assert job["done_s"] > job["start_s"] >= job["arrival_s"]
        # 4 iterations of at least one 10 ms task each: the job's own service time at least
        assert job["done_s"] - job["start_s"] >= 4 * 0.01
    run = records(metrics, "run")[0]
    assert run["jobs"] == 3 and len(records(metrics, "iteration")) == 12
    assert run["genie_mean_in_order_delay_s"] <= run["mean_in_order_delay_s"]
