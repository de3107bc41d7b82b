"""End to end: θ from rank 0's board for the workers on its node (one node here: all six).
Every worker computes with the θ of its round: θ ends where serial descent does, with a
straggler purged, after a worker's death (the survivors' rounds re-planned, θ of a round on
the board once), and after the master's (the new master's θ travels in its ITERATEs)."""

from __future__ import annotations

import json

import numpy as np
from test_faults import kill_a_worker_mid_run, serial_logreg

from mpicoded.launcher.process import finish_mpi, kill_group, run_mpi, start_mpi

FEATURES = 10_000  # θ of 80 kB: past BOARD_BYTES
WIDE = ["-m", "mpicoded.train", "--code", "gfrc", "--stragglers", "2", "--partial", "on",
        "--delay", "persistent", "--task-time", "0.003", "--slow-workers", "2",
        "--slow-factor", "10", "--samples", "600", "--features", str(FEATURES), "--quiet"]


def test_theta_from_the_board_is_serial_descents(tmp_path):
    """Six workers read θ from the board, a 10x straggler purged: θ serial descent's at
    1e-9, and rank 0 writes θ once a round, not six times."""
    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    done = run_mpi(7, [*WIDE, "--iterations", "25", "--metrics", str(metrics),
                       "--output", str(out)], timeout=180)
    assert done.returncode == 0, done.output[-3000:]
    run = json.loads(metrics.read_text().splitlines()[-1])
    assert run["board_workers"] == 6 and run["total_purged_tasks"] > 0
    assert run["master_bytes_out"] / 25 < 1.5 * FEATURES * 8  # θ once, and the task lists
    np.testing.assert_allclose(np.load(out), serial_logreg(25, 600, FEATURES), rtol=1e-9,
                               atol=1e-12)


def test_the_master_killed_mid_run_fails_over_to_theta_in_messages(tmp_path):
    """ULFM: rank 0 SIGKILLed mid-run: the survivors held its board; the new master sends θ
    in its ITERATEs (it placed no set-up naming a board), and θ ends where serial descent
    does."""
    from test_failover import kill_master

    done, rows, _ = kill_master(tmp_path, ft=True, after=5,
                                flags=[*WIDE, "--iterations", "40"])
    assert done.returncode == 0, done.output[-3000:]
    assert len([r for r in rows if r["record"] == "failover"]) == 1
    assert rows[-1]["board_workers"] == 0
    np.testing.assert_allclose(np.load(tmp_path / "theta.npy"), serial_logreg(40, 600, FEATURES),
                               rtol=1e-9, atol=1e-12)


def test_a_worker_killed_mid_run_leaves_the_boards_theta_exact(tmp_path):
    """ULFM: a worker SIGKILLed from outside mid-run; the rounds are planned again among the
    living, whose θ still comes from the board: θ serial descent's at 1e-9. Open MPI's ob1
    sometimes crashes rank 0 in a receive of a result past the eager limit when its sender
    dies mid-transfer (docs/failures.md); the failover then carries on, θ exact all the same."""
    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    proc = start_mpi(7, [*WIDE, "--iterations", "60", "--metrics", str(metrics), "--output",
                         str(out)], ft=True)
    try:
        kill_a_worker_mid_run(proc, metrics, 6, 1.0, 7)
        done = finish_mpi(proc, timeout=180)
    finally:
        kill_group(proc)
    assert done.returncode == 0, done.output[-3000:]
    run = json.loads(metrics.read_text().splitlines()[-1])
    if "the master died" not in done.output:
        assert run["failed_workers"] == 1 and run["board_workers"] >= 5, done.output[-6000:]
    np.testing.assert_allclose(np.load(out), serial_logreg(60, 600, FEATURES), rtol=1e-9,
                               atol=1e-12)
