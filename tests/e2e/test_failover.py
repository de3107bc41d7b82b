"""The master's death. Under ULFM the survivors shrink the communicator and the lowest living
rank becomes the master: the run ends with every iteration done and the fault-free theta.
Without it, every rank is gone within seconds, the dead master named, no traceback."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from mpicoded.launcher.process import finish_mpi, kill_group, run_mpi, start_mpi
from mpicoded.launcher.procs import rank_pids

# frc, s = 1, groups {1, 2} {3, 4} {5, 6} by rank: rank 1 leaves its group to become the master,
# and rank 4, 5x slower, stays skippable (rank 3 covers for it), so the run keeps its pace
FLAGS = ["-m", "mpicoded.train", "--code", "frc", "--stragglers", "1", "--delay", "persistent",
         "--task-time", "0.01", "--slow-workers", "4", "--slow-factor", "5", "--samples", "6000",
         "--features", "20", "--iterations", "80", "--quiet"]


def kill_master(tmp_path, ft, after=10, flags=FLAGS):
    """Run ``flags`` on 7 ranks; SIGKILL rank 0 once ``after`` iterations are in the metrics.
    Returns the run's output, the metrics rows and the seconds from the kill to the end."""
    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    proc = start_mpi(7, [*flags, "--metrics", str(metrics), "--output", str(out)], ft=ft)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if metrics.exists() and metrics.read_text().count('"record": "iteration"') >= after:
                break
            time.sleep(0.02)
        os.kill(rank_pids(proc.pid)[0], signal.SIGKILL)
        killed = time.monotonic()
        done = finish_mpi(proc, timeout=120)
    finally:
        kill_group(proc)
    end = time.monotonic()
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return done, rows, end - killed


def test_the_run_survives_its_masters_death(tmp_path):
    done, rows, _ = kill_master(tmp_path, ft=True)
    assert done.returncode == 0, done.output[-3000:]
    assert "the master died; rank 1 took over (5 workers)" in done.output, done.output[-3000:]
    assert "Traceback" not in done.output
    failover = [r for r in rows if r["record"] == "failover"]
    assert len(failover) == 1 and failover[0]["new_master_world_rank"] == 1
    resumed = failover[0]["resumed_at"]["iteration"]
    assert resumed >= 10
    recorded = {r["iteration"] for r in rows if r["record"] == "iteration"}
    lost = set(failover[0]["unrecorded_iterations"])
    # every iteration done; the old master writes a record once the next decode brings its
    # loss, so up to two records die with it
    assert recorded | lost == set(range(80)) and len(lost) <= 2
    run = rows[-1]
    assert run["record"] == "run" and run["failovers"] == 1 and run["iterations"] == 80 - resumed
    reference = tmp_path / "ref"
    reference.mkdir()
    ref = run_mpi(7, [*FLAGS, "--output", str(reference / "theta.npy")], timeout=120)
    assert ref.returncode == 0, ref.output[-3000:]
    theta, expected = np.load(tmp_path / "theta.npy"), np.load(reference / "theta.npy")
    assert np.allclose(theta, expected, rtol=1e-9, atol=0)
    assert run["final_theta"] == theta.tolist()  # what the takeover costs: bench faults


def test_without_ulfm_a_dead_master_ends_every_rank_quickly(tmp_path):
    done, _, after_kill = kill_master(tmp_path, ft=False)
    assert done.returncode != 0
    assert "process rank 0" in done.output and "signal 9" in done.output, done.output[-3000:]
    assert "Traceback" not in done.output
    assert after_kill < 5.0


def test_every_worker_dead_ends_the_run_with_one_line():
    done = run_mpi(3, ["-m", "mpicoded.train", "--code", "uncoded", "--delay", "none",
                       "--iterations", "20", "--samples", "600", "--kill-worker", "1@2",
                       "--kill-worker", "2@2", "--quiet"], timeout=120, ft=True)
    assert done.returncode != 0
    assert "mpicoded: every worker has failed: the job cannot go on" in done.output, \
        done.output[-3000:]
    assert "Traceback" not in done.output


RIDGE = Path(__file__).parents[1] / "ridge_job.py"


def test_iteration_timeout_drops_a_silent_worker_without_ulfm(tmp_path):
    """Uncoded (no redundancy), rank 3 takes 20 s a task: after 1 s of silence it is treated
    as failed, the survivors are re-coded, and the run ends exact; the slow rank, alive, stops
    when told to."""
    flags = ["-m", "mpicoded.train", "--code", "uncoded", "--delay", "persistent",
             "--task-time", "0.01", "--samples", "2000", "--features", "8", "--iterations", "6",
             "--quiet"]
    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    done = run_mpi(5, [*flags, "--slow-workers", "3", "--slow-factor", "2000",
                       "--iteration-timeout", "1", "--metrics", str(metrics), "--output",
                       str(out)], timeout=120)
    assert done.returncode == 0, done.output[-3000:]
    assert "worker rank(s) [3] sent nothing in 1 s (--iteration-timeout)" in done.output
    run = json.loads(metrics.read_text().splitlines()[-1])
    assert run["timed_out_workers"] == [3] and run["recodes"] == 1 and run["iterations"] == 6
    assert run["makespan_s"] < 10  # not 6 slow tasks of 20 s
    ref = run_mpi(5, [*flags, "--output", str(tmp_path / "ref.npy")], timeout=120)
    assert ref.returncode == 0, ref.output[-3000:]
    assert np.allclose(np.load(out), np.load(tmp_path / "ref.npy"), rtol=1e-9, atol=0)


@pytest.mark.timeout(200)
def test_the_masters_own_stall_is_not_its_workers_silence(tmp_path):
    """Rank 0 stopped (SIGSTOP) for three iteration timeouts mid-run while every worker sends
    its results: once it runs again it reads what came meanwhile before it judges silence, so
    nobody is timed out, nothing is re-coded and the run ends whole. (It used to read one
    result, tick, and time out every other worker.)"""
    metrics = tmp_path / "m.jsonl"
    proc = start_mpi(7, ["-m", "mpicoded.train", "--code", "frc", "--stragglers", "1",
                         "--delay", "none", "--samples", "20000", "--features", "20",
                         "--iterations", "400", "--iteration-timeout", "1", "--quiet",
                         "--metrics", str(metrics)])
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (
                metrics.exists() and metrics.read_text().count('"record": "iteration"') >= 20):
            time.sleep(0.02)
        master = rank_pids(proc.pid)[0]
        os.kill(master, signal.SIGSTOP)
        try:
            time.sleep(3.0)
        finally:
            os.kill(master, signal.SIGCONT)
        done = finish_mpi(proc, timeout=150)
    finally:
        kill_group(proc)
    assert done.returncode == 0, done.output[-3000:]
    assert "sent nothing" not in done.output, done.output[-3000:]
    run = json.loads(metrics.read_text().splitlines()[-1])
    assert run["iterations"] == 400 and run["timed_out_workers"] == [] and run["recodes"] == 0


@pytest.mark.parametrize("code", [["--code", "uncoded"], ["--code", "frc", "--stragglers", "1"]])
def test_a_hung_worker_cannot_hang_the_run(tmp_path, code):
    """Rank 2 hangs inside a task for ever: uncoded, the iteration timeout drops it; frc decodes
    without it and it is never timed out, but it never acknowledges STOP either. Either way the
    run finishes, writes its output, then ends the job (the hung rank would never exit) with one
    line."""
    out = tmp_path / "theta.npy"
    start = time.monotonic()
    done = run_mpi(5, ["-m", "mpicoded.train", "--job", f"{RIDGE}:HangingRidge", *code,
                       "--delay", "none", "--iterations", "3", "--iteration-timeout", "1",
                       "--output", str(out), "--quiet"], timeout=120)
    assert done.returncode != 0
    assert "worker rank(s) [2] timed out and never acknowledged STOP; ending the job" in \
        done.output, done.output[-3000:]
    assert time.monotonic() - start < 60
    from ridge_job import Ridge, serial

    assert np.allclose(np.load(out), serial(Ridge(), 3), rtol=1e-10, atol=0)


def test_a_failover_re_splits_an_optimal_split_among_the_survivors(tmp_path):
    """Under a declared (optimal) split, the new master's own old tasks go to the survivors,
    whose data it places first: the run ends with the fault-free theta."""
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps([{"mu": 1, "c": 0.1}] * 3 + [{"mu": 3, "c": 0.1}] * 3))
    flags = ["-m", "mpicoded.train", "--job", "linreg", "--code", "mds", "--partitions", "12",
             "--redundancy", "1.5", "--features", "12", "--samples", "600", "--delay",
             "seed000", "--profile", str(profile), "--time-scale", "0.01", "--split", "optimal",
             "--iterations", "60", "--quiet"]
    done, rows, _ = kill_master(tmp_path, ft=True, flags=flags)
    assert done.returncode == 0, done.output[-3000:]
    assert [r for r in rows if r["record"] == "failover"] and rows[-1]["failovers"] == 1
    assert rows[-1]["final_loads"][0] == 0 and sum(rows[-1]["final_loads"]) == 18
    ref = run_mpi(7, [*flags, "--output", str(tmp_path / "ref.npy")], timeout=120)
    assert ref.returncode == 0, ref.output[-3000:]
    assert np.allclose(np.load(tmp_path / "theta.npy"), np.load(tmp_path / "ref.npy"),
                       rtol=1e-9, atol=0)
