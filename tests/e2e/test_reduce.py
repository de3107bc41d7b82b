"""End to end: results summed by the workers and θ relayed by them (``--reduce on --relay
on``), over mpirun. The sum a tree of workers forms is the decoded one and every worker gets
the θ of its round: θ ends where serial descent does, with a straggler purged, whole tasks or
pieces, and with a worker killed from outside mid-run (ULFM)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_faults import kill_a_worker_mid_run, serial_logreg

from mpicoded.launcher.process import finish_mpi, kill_group, run_mpi, start_mpi

SLOW = ["--delay", "persistent", "--task-time", "0.003", "--slow-workers", "2", "--slow-factor",
        "10", "--samples", "4000", "--quiet", "--reduce", "on", "--relay", "on", "--features",
        "20"]


def final(tmp_path, ranks, flags, name, ft=False):
    metrics = tmp_path / f"{name}.jsonl"
    done = run_mpi(ranks, ["-m", "mpicoded.train", *flags, "--metrics", str(metrics)],
                   timeout=180, ft=ft)
    assert done.returncode == 0, done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [r for r in rows if r["record"] == "iteration"], rows[-1]


@pytest.mark.parametrize("code", [["--code", "gfrc", "--stragglers", "2", "--partial", "on"],
                                  ["--code", "cyclic", "--stragglers", "2"]],
                         ids=["gfrc-pieces", "cyclic"])
def test_a_sum_the_workers_form_is_serial_descents(tmp_path, code):
    """gfrc s=2 in pieces (each run and piece once, helpers' copies left out) and cyclic s=2
    (real coefficients from least squares), a worker 10x slow purged: every iteration's sum
    formed along the workers' tree, θ serial descent's at 1e-9."""
    wide = [*SLOW[:-2], "--features", "1000"]  # θ of 8 kB: rank 0's copies show
    its, run = final(tmp_path, 7, [*code, *wide, "--iterations", "25"], "sum")
    assert (run["config"]["reduce"], run["config"]["relay"]) == ("on", "on") and len(its) == 25
    theta = 1000 * 8
    assert 2 * theta < run["master_bytes_out"] / 25 < 3 * theta  # two ITERATEs a round, not six
    assert run["master_bytes_in"] / 25 < 3 * theta  # two sums, not six results
    assert run["total_purged_tasks"] > 0  # the straggler's work was cut short
    np.testing.assert_allclose(run["final_theta"], serial_logreg(25, 4000, 1000), rtol=1e-9,
                               atol=1e-12)


def test_a_worker_killed_mid_run_leaves_the_sum_exact(tmp_path):
    """ULFM: a worker SIGKILLed from outside while the workers hold and sum values: the sum is
    planned again from the living's (or the code re-built), θ still serial descent's."""
    metrics = tmp_path / "killed.jsonl"
    flags = ["--code", "gfrc", "--stragglers", "2", "--partial", "on", *SLOW,
             "--iterations", "200"]
    proc = start_mpi(7, ["-m", "mpicoded.train", *flags, "--metrics", str(metrics)], ft=True)
    try:
        kill_a_worker_mid_run(proc, metrics, 6, 1.5, 5)
        done = finish_mpi(proc, timeout=240)
    finally:
        kill_group(proc)
    assert done.returncode == 0, done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert rows[-1]["failed_workers"] == 1
    assert len([r for r in rows if r["record"] == "iteration"]) == 200
    np.testing.assert_allclose(rows[-1]["final_theta"], serial_logreg(200, 4000, 20),
                               rtol=1e-9, atol=1e-12)


def test_the_master_killed_while_the_workers_sum_and_relay_fails_over_exactly(tmp_path):
    """ULFM: rank 0 SIGKILLed mid-run: the new master plans the same paths, the survivors
    hold their values and θ as any other worker, and θ ends where serial descent does."""
    from test_failover import kill_master

    flags = ["-m", "mpicoded.train", "--code", "gfrc", "--stragglers", "2", "--partial", "on",
             *SLOW, "--iterations", "80"]
    done, rows, _ = kill_master(tmp_path, ft=True, flags=flags)
    assert done.returncode == 0, done.output[-3000:]
    assert len([r for r in rows if r["record"] == "failover"]) == 1
    assert (rows[-1]["config"]["reduce"], rows[-1]["config"]["relay"]) == ("on", "on")
    np.testing.assert_allclose(np.load(tmp_path / "theta.npy"), serial_logreg(80, 4000, 20),
                               rtol=1e-9, atol=1e-12)
