"""Dead workers (Open MPI ULFM), checkpoints and a killed master, long runs.

Every run here is started in its own process group with a hard timeout (mpicoded.launcher).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time

import numpy as np
import pytest

from mpicoded.launcher.process import finish_mpi, kill_group, run_mpi, start_mpi
from mpicoded.launcher.procs import every_rank_pid, rank_pids

GFRC = ["--code", "gfrc", "--stragglers", "3", "--delay", "persistent", "--task-time", "0.005",
        "--samples", "4000", "--features", "20", "--quiet"]
GFRC_20 = [*GFRC, "--iterations", "30"]


def train(ranks, flags, tmp_path, name, ft=True, timeout=240):
    metrics = tmp_path / f"{name}.jsonl"
    done = run_mpi(ranks, ["-m", "mpicoded.train", *flags, "--metrics", str(metrics)],
                   timeout=timeout, ft=ft)
    assert done.returncode == 0, done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r for r in rows if r["record"] == "iteration"], rows[-1], done.output


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    return train(21, GFRC_20, tmp_path_factory.mktemp("ref"), "ref")


@pytest.mark.parametrize("deaths", [1, 3])
def test_kill_one_then_s_workers_exact_recovery(tmp_path, fault_free, deaths):
    """Kill 1, then s = 3 workers at random iterations: gfrc tolerates them, no re-code, every
    iteration completes and the result is the fault-free one (exact decoding)."""
    rng = random.Random(deaths)
    victims = rng.sample(range(1, 21), deaths)
    at = sorted(rng.sample(range(1, 29), deaths))
    kills = [f"--kill-worker={r}@{i}" for r, i in zip(victims, at, strict=True)]
    its, run, out = train(21, GFRC_20 + kills, tmp_path, f"kill{deaths}")
    assert run["failed_workers"] == deaths and run["recodes"] == 0
    assert [r["iteration"] for r in its] == list(range(30))
    ref = fault_free[1]
    assert run["final_loss"] == pytest.approx(ref["final_loss"], rel=1e-9)
    assert np.allclose(run["final_theta"], ref["final_theta"], rtol=1e-9, atol=1e-12)


def test_kill_more_than_s_recodes_and_completes(tmp_path, fault_free):
    # workers 1, 5, 9, 13 (ranks 2, 6, 10, 14) share a congruence class mod 4; killing five
    # workers spread over every class leaves no class complete, so the code is re-built
    kills = [f"--kill-worker={r}@{i}" for r, i in [(1, 4), (2, 4), (3, 5), (4, 5), (6, 6)]]
    its, run, out = train(21, GFRC_20 + kills, tmp_path, "recode")
    assert run["failed_workers"] == 5 and run["recodes"] >= 1 and len(its) == 30
    assert re.search(r"re-coded for 1[5-8] workers: gfrc stragglers=3", out), out[-3000:]
    assert run["final_loss"] == pytest.approx(fault_free[1]["final_loss"], rel=1e-9)
    rows = [json.loads(line) for line in (tmp_path / "recode.jsonl").read_text().splitlines()]
    failures = [r for r in rows if r["record"] == "failure"]  # what the dashboard counts
    assert sorted(rank for r in failures for rank in r["ranks"]) == [1, 2, 3, 4, 6]
    assert sum(r["record"] == "recode" for r in rows) == run["recodes"]


def test_recode_keeps_the_code_family_and_the_tolerance_fraction(tmp_path):
    """frc, s = 1, on 8 workers (groups {0,1} {2,3} {4,5} {6,7}), 2 partitions of 8 tolerated.
    Both workers of two groups die: 4 partitions lost, so the survivors are re-coded, as frc with
    s = 1 again, and 1 partition of their 4 tolerated (the same quarter)."""
    flags = ["--code", "frc", "--stragglers", "1", "--tolerance", "0.25", "--delay", "none",
             "--iterations", "8", "--samples", "2000", "--features", "6", "--quiet",
             *[f"--kill-worker={r}@3" for r in (1, 2, 3, 4)]]
    its, run, out = train(9, flags, tmp_path, "frc")
    assert run["failed_workers"] == 4 and run["recodes"] == 1 and len(its) == 8
    assert "re-coded for 4 workers: frc stragglers=1, tolerance 1" in out, out[-3000:]
    assert run["final_loss"] < run["initial_loss"]


def kill_a_worker_mid_run(proc, metrics, workers, pause, seed):
    """Once the run is iterating (a kill during MPI_Init is not survivable), SIGKILL one of its
    ``workers`` from outside after a pause of up to ``pause`` seconds, both drawn from
    ``seed``."""
    deadline = time.time() + 90
    while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size):
        time.sleep(0.1)
    pids = rank_pids(proc.pid)
    time.sleep(random.Random(seed).uniform(0.2, pause))
    os.kill(pids[random.Random(seed + 1).randint(1, workers)], signal.SIGKILL)


def test_sigkill_a_worker_from_outside(tmp_path):
    metrics = tmp_path / "outside.jsonl"
    flags = [*GFRC, "--iterations", "300"]  # long enough to strike mid-run
    proc = start_mpi(21, ["-m", "mpicoded.train", *flags, "--metrics", str(metrics)], ft=True)
    try:
        kill_a_worker_mid_run(proc, metrics, 20, 3.0, 3)
        done = finish_mpi(proc, timeout=240)
    finally:
        kill_group(proc)
    assert done.returncode == 0, done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert rows[-1]["failed_workers"] == 1
    assert len([r for r in rows if r["record"] == "iteration"]) == 300
    assert np.allclose(rows[-1]["final_theta"], serial_logreg(300, 4000, 20), rtol=1e-6,
                       atol=1e-9)


@pytest.mark.xfail(strict=False, reason="Open MPI's ob1 aborts rank 0 in a send-completion "
                   "callback as the worker's link closes, in about one run in ten; rank 1 then "
                   "takes over and mpirun exits 7 (docs/failures.md)")
def test_a_worker_falsely_reported_dead_is_left_out_not_a_crash(tmp_path):
    """A living worker held from running longer than the detector's timeout (SIGSTOP: a rank
    starved of its core, or a VM paused) is reported dead by ULFM's heartbeat detector while it
    is alive. The run goes on without it, exits 0 and ends at serial descent's θ; the worker,
    continued, is never counted back in (Open MPI tells it it was reported dead)."""
    metrics = tmp_path / "paused.jsonl"
    flags = ["--code", "gfrc", "--stragglers", "2", "--delay", "persistent", "--task-time",
             "0.005", "--samples", "4000", "--features", "20", "--quiet", "--iterations", "1500"]
    proc = start_mpi(7, ["-m", "mpicoded.train", *flags, "--metrics", str(metrics)], ft=True)
    try:
        deadline = time.time() + 90
        while time.time() < deadline and not (metrics.exists() and metrics.stat().st_size):
            time.sleep(0.1)  # iterating
        victim = every_rank_pid(proc.pid, 7)[3]
        os.kill(victim, signal.SIGSTOP)
        try:  # stopped until the run has taken it for dead: its failure record is written
            deadline = time.time() + 60
            while time.time() < deadline and '"record": "failure"' not in metrics.read_text():
                time.sleep(0.1)
        finally:
            os.kill(victim, signal.SIGCONT)
        assert proc.poll() is None  # the run (1500 iterations, about 16 s) still going
        done = finish_mpi(proc, timeout=240)
    finally:
        kill_group(proc)
    # the head too: which rank an abort came from (a loop saw rank 0 die once, 1 in 18 runs)
    assert done.returncode == 0, done.output[:3000] + "\n[...]\n" + done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    failures = [r for r in rows if r["record"] == "failure"]
    assert [rank for r in failures for rank in r["ranks"]] == [3], failures
    assert rows[-1]["failed_workers"] == 1
    assert len([r for r in rows if r["record"] == "iteration"]) == 1500
    assert np.allclose(rows[-1]["final_theta"], serial_logreg(1500, 4000, 20), rtol=1e-6,
                       atol=1e-9)


def test_checkpoint_resume_after_the_master_is_killed(tmp_path):
    """A run killed (master and all) after a checkpoint, resumed, ends with the very theta of an
    uninterrupted run: same seed, same keyed delays, bitwise."""
    flags = ["--code", "frc", "--stragglers", "1", "--delay", "persistent", "--task-time", "0.02",
             "--iterations", "60", "--samples", "1200", "--features", "10", "--quiet",
             "--checkpoint-every", "5"]
    _, whole, _ = train(7, [*flags, "--checkpoint", str(tmp_path / "a")], tmp_path, "whole",
                        ft=False)
    ckdir = tmp_path / "b"
    proc = start_mpi(7, ["-m", "mpicoded.train", *flags, "--checkpoint", str(ckdir)])
    try:
        deadline = time.time() + 60
        while not (ckdir / "checkpoint.npz").exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        kill_group(proc)  # SIGTERM then SIGKILL: the master dies mid-run
    finally:
        kill_group(proc)
    with np.load(ckdir / "checkpoint.npz") as f:
        resume_at = int(f["iteration"])
    assert 0 < resume_at < 60
    its, resumed, out = train(7, [*flags, "--checkpoint", str(ckdir), "--resume"], tmp_path,
                              "resumed", ft=False)
    # it resumed (a restart from 0 would end with the same theta: runs are deterministic)
    assert [r["iteration"] for r in its] == list(range(resume_at, 60))
    assert resumed["final_theta"] == whole["final_theta"]  # bitwise


def test_resume_refuses_other_settings(tmp_path):
    flags = ["--code", "frc", "--stragglers", "1", "--iterations", "5", "--samples", "600",
             "--delay", "none", "--checkpoint", str(tmp_path), "--checkpoint-every", "5"]
    train(5, flags, tmp_path, "first", ft=False)
    done = run_mpi(5, ["-m", "mpicoded.train", *flags, "--seed", "3", "--resume"], timeout=60)
    assert done.returncode == 2 and "written by a run with other settings" in done.output


def test_resume_of_a_finished_run_exits_0_with_one_line(tmp_path):
    flags = ["--code", "frc", "--stragglers", "1", "--iterations", "5", "--samples", "600",
             "--delay", "none", "--checkpoint", str(tmp_path), "--checkpoint-every", "5"]
    train(5, flags, tmp_path, "first", ft=False)
    done = run_mpi(5, ["-m", "mpicoded.train", *flags, "--resume"], timeout=60)
    assert done.returncode == 0, done.output[-3000:]
    assert "finished run" in done.output and "nothing to resume" in done.output
    assert "Traceback" not in done.output


def test_kill_worker_without_ulfm_is_refused(tmp_path):
    done = run_mpi(5, ["-m", "mpicoded.train", "--kill-worker", "2@3"], timeout=60)
    assert done.returncode == 2 and "needs Open MPI's fault tolerance" in done.output


SOAK = ["--code", "frc", "--stragglers", "1", "--delay", "seed001", "--time-scale", "0.02",
        "--samples", "600", "--features", "8", "--loss-every", "0", "--quiet"]


def serial_logreg(iterations, samples=600, features=8):
    """Serial gradient descent on every sample of the built-in logreg's data (the soak's by
    default): what exact decoding gives."""
    from mpicoded.jobs import LogReg

    job = LogReg(samples=samples, features=features, seed=0)
    job.blocks(1)
    theta = np.zeros(features)
    for _ in range(iterations):
        full = job.data.X.T @ (1 / (1 + np.exp(-job.data.X @ theta)) - job.data.y)
        theta = job.step(theta, full, np.arange(1))
    return theta


def test_soak_2000_iterations_with_a_worker_killed(tmp_path):
    """The CI-sized soak: 2,000 iterations with random delays and purges, and a worker killed
    at iteration 700: nothing stale decoded (theta equals a serial run's), outstanding sends
    stay bounded."""
    its, run, _ = train(7, [*SOAK, "--iterations", "2000", "--kill-worker", "3@700"], tmp_path,
                        "soak", timeout=280)
    assert len(its) == 2000 and [r["iteration"] for r in its] == list(range(2000))
    assert run["total_purged_tasks"] > 0 and run["failed_workers"] == 1
    assert run["master_max_pending_sends"] <= 3 * 6
    assert np.allclose(run["final_theta"], serial_logreg(2000), rtol=1e-6, atol=1e-9)


@pytest.mark.slow
@pytest.mark.timeout(2700)  # its runs' own budgets, 600 + 1800 s, come first
def test_soak_10000_iterations(tmp_path):
    """10,000 iterations with random delays and purges: nothing stale decoded (theta equals a
    serial run's), outstanding sends stay bounded, the master's memory does not grow."""
    _, short, _ = train(7, [*SOAK, "--iterations", "1000"], tmp_path, "short", ft=False,
                        timeout=600)
    its, long, _ = train(7, [*SOAK, "--iterations", "10000"], tmp_path, "long", ft=False,
                         timeout=1800)
    assert len(its) == 10000 and long["total_purged_tasks"] > 0
    assert long["master_max_pending_sends"] <= 3 * 6
    assert long["master_maxrss_mb"] < short["master_maxrss_mb"] + 25
    assert np.allclose(long["final_theta"], serial_logreg(10000), rtol=1e-6, atol=1e-9)


def test_a_recode_keeps_the_adaptive_split(tmp_path):
    """4 of 6 workers die at iteration 3 under an adaptive split: the 2 left cannot decode mds
    K = 12 from their share, so the run re-codes, and goes on split adaptively over the
    survivors (their estimates carried over) rather than by the new code's fixed schedule."""
    flags = ["--job", "linreg", "--code", "mds", "--partitions", "12", "--redundancy", "1.5",
             "--features", "12", "--samples", "600", "--delay", "persistent", "--task-time",
             "0.005", "--split", "adaptive", "--iterations", "10", "--quiet",
             *[f"--kill-worker={r}@3" for r in (1, 2, 3, 4)]]
    its, run, out = train(7, flags, tmp_path, "adaptive-recode")
    assert run["failed_workers"] == 4 and run["recodes"] >= 1 and len(its) == 10
    # the four deaths may be seen at once or in two batches (re-coding for 3, then 2 left)
    assert re.search(r"re-coded for [23] workers: mds", out), out[-3000:]
    loads = run["final_loads"]
    assert run["split"] == "adaptive" and len(loads) in (2, 3)
    assert sum(loads) == 18 and sum(k > 0 for k in loads) == 2  # mds K = 12, Ω = 1.5
    assert run["final_loss"] < run["initial_loss"]


def test_pagerank_partial_work_re_codes_past_its_tolerance(tmp_path):
    """PageRank under mds s=1 with --partial on, ranks 2 and 4 killed at iteration 3: one more
    death than the code takes, so the run re-codes for the four left, cuts the new code's
    blocks in ranges and ends on the serial power iteration within 1e-9."""
    from mpicoded.jobs.pagerank import PageRank

    flags = ["--job", "pagerank", "--nodes", "900", "--code", "mds", "--stragglers", "1",
             "--partial", "on", "--iterations", "8", "--quiet",
             *[f"--kill-worker={r}@3" for r in (2, 4)]]
    its, run, out = train(7, flags, tmp_path, "pagerank")
    assert run["failed_workers"] == 2 and run["recodes"] >= 1 and len(its) == 8
    job = PageRank(nodes=900)
    A, x = job.matrix(), job.start()
    for _ in range(8):
        x = job.step(x, A @ x)
    assert np.linalg.norm(np.array(run["final_theta"]) - x) <= 1e-9 * np.linalg.norm(x)
