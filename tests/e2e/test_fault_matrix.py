"""The fault matrix's cells that fit CI (``python -m mpicoded.bench faults`` runs them all):
world rank 6 SIGKILLed from outside during start-up (MPI loading on it, rank 0 not planning
yet: a death inside MPI_Init, after which the launcher starts the job again), during placement
(the moment rank 0 opens the metrics file: the issue's case, a death while the set-ups are
being sent) and at the shutdown (once the last iteration is recorded), under gfrc on 21 ranks
with ULFM, and during placement under the adaptive split; each exits 0 with the fault-free
theta."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mpicoded.bench.faults import mpi_loaded, run_cell
from mpicoded.launcher.procs import rank_pids

ITERATIONS = 20


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("fault-free")
    cell = run_cell("gfrc", None, ITERATIONS, out)
    assert cell.returncode == 0, cell.output[-3000:]
    return np.load(out / "theta.npy")


@pytest.mark.timeout(400)
@pytest.mark.parametrize("phase", ["start-up", "placement", "shutdown"])
def test_a_worker_killed_at_any_phase_is_survived(phase, reference, tmp_path):
    cell = run_cell("gfrc", phase, ITERATIONS, tmp_path, reference)
    assert cell.killed_s is not None, f"the {phase} never came:\n{cell.output[-3000:]}"
    assert cell.in_phase, f"killed at {cell.killed_s:.2f} s, after the {phase}"
    assert cell.returncode == 0, cell.output[-3000:]
    assert cell.theta_rel is not None and cell.theta_rel <= 1e-9, cell.theta_rel
    if phase != "start-up":  # (a kill just after MPI_Init needs no new start: either is right)
        assert "starting the job again" not in cell.output, cell.output[-3000:]


@pytest.mark.timeout(300)
def test_the_launcher_starts_again_after_a_death_inside_mpi_init():
    """``python -m mpicoded.launcher --ft`` (what launch/local.sh runs): world rank 3 SIGKILLed
    from outside as MPI loads on it, 7 ranks. The ranks left in MPI_Init would wait for ever;
    the launcher names the dead rank, starts the job again, and the run ends well."""
    proc = subprocess.Popen([sys.executable, "-m", "mpicoded.launcher", "-n", "7", "--ft", "--",
                             "-m", "mpicoded.train", "--iterations", "5", "--delay", "none",
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pids = rank_pids(proc.pid)
            if 3 in pids and mpi_loaded(pids[3]):
                os.kill(pids[3], signal.SIGKILL)
                break
            time.sleep(0.01)
        else:
            pytest.fail("rank 3 never loaded MPI")
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    assert "loss" in out, out[-3000:]  # the new start's summary


@pytest.mark.timeout(400)
def test_an_adaptive_split_survives_a_death_during_placement(tmp_path):
    """The adaptive split (uncoded, 80 partitions), world rank 6 killed during placement: the
    death comes before the run's clock starts and must not be stamped later than the start (a
    stamp on rank 0's earlier clock made every first result look 0.5 s early to the split's
    estimator, whose negative delays aborted the run)."""
    free, killed = tmp_path / "free", tmp_path / "killed"
    free.mkdir()
    killed.mkdir()
    cell = run_cell("adaptive split", None, ITERATIONS, free)
    assert cell.returncode == 0, cell.output[-3000:]
    cell = run_cell("adaptive split", "placement", ITERATIONS, killed, np.load(free / "theta.npy"))
    assert cell.killed_s is not None and cell.in_phase, cell.output[-3000:]
    assert cell.returncode == 0, cell.output[-3000:]
    assert cell.theta_rel is not None and cell.theta_rel <= 1e-9, cell.theta_rel
