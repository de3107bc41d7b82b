"""End to end: mini-batch SGD of a torch model through mpirun, with a purged straggler, against
real PyTorch DDP (gloo, three processes) over ``mpicoded.ShardSampler``: the same parameters
step by step (float64 to 1e-9, float32 to 1e-5), after a resume mid-pass and after the
master's death mid-pass (the optimizer's momentum kept in the checkpoint), and across a
worker's death and the re-code it takes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mpicoded.launcher.process import finish_mpi, kill_group, run_mpi, start_mpi
from mpicoded.launcher.procs import rank_pids

SCRIPT = Path(__file__).parents[1] / "torch_job.py"
DDP_WORLD = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ddp(out: Path) -> np.ndarray:
    """Every step's parameters of a DDP run (rank 0's), in TORCH_JOB_DTYPE's precision."""
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    procs = [subprocess.Popen([sys.executable, str(SCRIPT), "ddp", str(rank), str(DDP_WORLD),
                               str(out)], env=env, start_new_session=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(DDP_WORLD)]
    try:
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    assert all(p.returncode == 0 for p in procs), "\n".join(o[-2000:] for o in outputs)
    return np.load(out)


@pytest.fixture(scope="module")
def ddp_thetas(tmp_path_factory):
    """Every step's parameters of the float64 DDP run."""
    pytest.importorskip("torch", reason="needs the torch extra")
    return run_ddp(tmp_path_factory.mktemp("ddp") / "thetas.npy")


def thetas_of(done) -> tuple[np.ndarray, dict]:
    """The parameters after every iteration of a torch_job.py run, and what else it said."""
    assert done.returncode == 0, done.output[-3000:]
    got = json.loads(next(s for s in done.output.splitlines()
                          if s.startswith("RESULT "))[len("RESULT "):])
    return np.array(got["thetas"]), got


def test_mini_batches_through_mpirun_equal_ddp_step_by_step(ddp_thetas):
    """gfrc s=2 with partial work (pieces of the step's rows; whole tasks over them: the
    worker-kill test below), a worker really computing 30x over and purged: every step's
    parameters those of DDP's loop, across a pass's end (float64)."""
    from torch_job import BATCH, ITERATIONS, single_process

    thetas, got = thetas_of(run_mpi(7, [str(SCRIPT), "gfrc", str(BATCH)], timeout=180))
    assert got["purged"] > 0 and thetas.shape == ddp_thetas.shape == (ITERATIONS, thetas.shape[1])
    np.testing.assert_allclose(thetas, ddp_thetas, rtol=1e-9, atol=1e-12)
    # and mini-batches they were: full-batch training lands elsewhere
    assert not np.allclose(thetas[-1], single_process(), rtol=1e-3, atol=1e-6)


def test_float32_mini_batches_equal_ddp_within_float32s_rounding(tmp_path, monkeypatch):
    """PyTorch's default precision: the same run (a straggler purged) and DDP's, both in
    float32, whose sums are rounded in another order: every step within 1e-5."""
    pytest.importorskip("torch", reason="needs the torch extra")
    from torch_job import BATCH

    monkeypatch.setenv("TORCH_JOB_DTYPE", "float32")  # DDP's processes and the ranks inherit it
    ddp = run_ddp(tmp_path / "thetas.npy")
    thetas, got = thetas_of(run_mpi(7, [str(SCRIPT), "gfrc", str(BATCH)], timeout=180))
    assert got["purged"] > 0 and ddp.dtype == np.float32
    assert np.array_equal(thetas, thetas.astype(np.float32))  # a float32 model's parameters
    np.testing.assert_allclose(thetas, ddp, rtol=1e-5, atol=1e-6)


def test_a_run_resumed_mid_pass_goes_on_with_ddps_parameters(ddp_thetas, tmp_path):
    """Stopped after 7 of a pass's 10 steps (SGD with momentum), resumed to 12: the resumed
    steps are DDP's, which they are only with the optimizer's momentum from the checkpoint."""
    from torch_job import BATCH, ITERATIONS

    def run(*args):
        return thetas_of(run_mpi(7, [str(SCRIPT), "gfrc", str(BATCH), *args], timeout=180))[0]

    np.testing.assert_allclose(run("7", str(tmp_path)), ddp_thetas[:7], rtol=1e-9, atol=1e-12)
    resumed = run(str(ITERATIONS), str(tmp_path), "resume")
    np.testing.assert_allclose(resumed, ddp_thetas[7:], rtol=1e-9, atol=1e-12)


def test_a_master_killed_mid_pass_fails_over_onto_ddps_trajectory(ddp_thetas, tmp_path):
    """Under ULFM, rank 0 SIGKILLed mid-pass: the new master goes on from the newest
    checkpoint, the optimizer's momentum with it, and ends on DDP's parameters."""
    from torch_job import BATCH, BATCH_SEED, ITERATIONS

    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    flags = ["-m", "mpicoded.train", "--job", f"{SCRIPT}:job", "--code", "gfrc",
             "--stragglers", "2", "--batch-size", str(BATCH), "--batch-seed", str(BATCH_SEED),
             "--iterations", str(ITERATIONS), "--delay", "persistent", "--task-time", "0.05",
             "--slow-workers", "4", "--slow-factor", "3", "--checkpoint", str(tmp_path / "ck"),
             "--checkpoint-every", "3", "--metrics", str(metrics), "--output", str(out),
             "--quiet"]
    proc = start_mpi(7, flags, ft=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (  # checkpoint 3 is in by then
                metrics.exists() and metrics.read_text().count('"record": "iteration"') >= 4):
            time.sleep(0.01)
        ranks = rank_pids(proc.pid)
        assert 0 in ranks, "the run ended before rank 0 could be killed"
        os.kill(ranks[0], signal.SIGKILL)
        done = finish_mpi(proc, timeout=120)
    finally:
        kill_group(proc)
    assert done.returncode == 0, done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    failover = [r for r in rows if r["record"] == "failover"]
    assert len(failover) == 1 and failover[0]["resumed_at"]["iteration"] in (3, 6, 9, 12)
    np.testing.assert_allclose(np.load(out), ddp_thetas[-1], rtol=1e-9, atol=1e-12)


def test_a_worker_killed_mid_pass_leaves_ddps_trajectory_alone(ddp_thetas, tmp_path):
    """Under ULFM, worker rank 2 SIGKILLs itself at step 5 and uncoded is re-built over the
    five left, in five new partitions: the batches are numbered by the data's rows, not the
    code's partitions, so the steps stay DDP's."""
    from torch_job import BATCH, BATCH_SEED, ITERATIONS

    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    done = run_mpi(7, ["-m", "mpicoded.train", "--job", f"{SCRIPT}:job", "--code", "uncoded",
                       "--batch-size", str(BATCH), "--batch-seed",
                       str(BATCH_SEED), "--iterations", str(ITERATIONS), "--delay", "none",
                       "--kill-worker", "2@5", "--metrics", str(metrics), "--output", str(out),
                       "--quiet"], timeout=180, ft=True)
    assert done.returncode == 0, done.output[-3000:]
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    assert [r["ranks"] for r in rows if r["record"] == "failure"] == [[2]]
    assert [r["epoch"] for r in rows if r["record"] == "recode"] == [1]
    np.testing.assert_allclose(np.load(out), ddp_thetas[-1], rtol=1e-9, atol=1e-12)
