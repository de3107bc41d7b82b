"""End to end: your own job through ``--job file.py:NAME`` and through a script calling
``mpicoded.run`` under mpirun; PageRank from a SNAP file; the examples; bad --job values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mpicoded.launcher.process import run_mpi

JOB_FILE = Path(__file__).parents[1] / "ridge_job.py"  # also run as a script: its __main__
SLOW = ["--code", "gfrc", "--stragglers", "2", "--delay", "persistent", "--task-time", "0.002",
        "--slow-workers", "2,5", "--slow-factor", "40", "--iterations", "15", "--quiet"]


def serial_theta(iterations):
    from ridge_job import Ridge, serial

    return serial(Ridge(), iterations)


def test_a_job_file_through_the_cli_equals_serial_descent(tmp_path):
    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    done = run_mpi(7, ["-m", "mpicoded.train", "--job", f"{JOB_FILE}:Ridge", *SLOW,
                       "--metrics", str(metrics), "--output", str(out)], timeout=150)
    assert done.returncode == 0, done.output[-3000:]
    run = json.loads(metrics.read_text().splitlines()[-1])
    assert run["total_purged_tasks"] >= 15 and run["job"]["class"].endswith("Ridge")
    theta = np.load(out)
    assert np.allclose(theta, serial_theta(15), rtol=1e-10, atol=0)


def test_a_script_calling_run_equals_serial_descent():
    done = run_mpi(7, [str(JOB_FILE)], timeout=150)
    assert done.returncode == 0, done.output[-3000:]
    line = next(s for s in done.output.splitlines() if s.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    assert got["purged"] >= 15
    assert np.allclose(got["theta"], serial_theta(15), rtol=1e-10, atol=0)


@pytest.mark.parametrize("options", ['code="cpgcx"', 'code="cpgc", stragglers=2'])
def test_a_scripts_bad_keyword_is_told_once_by_keyword(options, tmp_path):
    """A refused run through the API: one traceback (rank 0's, not one a rank), the message
    naming the keyword, the job ended with an error."""
    script = tmp_path / "bad.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(JOB_FILE.parent)!r})\n"
                      f"import mpicoded\nfrom ridge_job import Ridge\n"
                      f"mpicoded.run(Ridge(), {options})\n")
    done = run_mpi(4, [str(script)], timeout=120)
    assert done.returncode != 0
    assert done.output.count("Traceback") == 1, done.output[-3000:]
    assert "code='cpgc" in done.output and "--code" not in done.output, done.output[-3000:]


def test_pagerank_of_a_snap_file(tmp_path):
    edges = tmp_path / "g.txt"
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 400, 3000), rng.integers(0, 400, 3000)
    lines = "".join(f"{a}\t{b}\n" for a, b in zip(src, dst, strict=True) if a % 7)  # dangling too
    edges.write_text("# Directed graph (each unordered pair of nodes is saved once)\n"
                     "# FromNodeId\tToNodeId\n" + lines)
    out = tmp_path / "rank.npy"
    done = run_mpi(5, ["-m", "mpicoded.train", "--job", "pagerank", "--graph", str(edges),
                       "--iterations", "30", "--delay", "none", "--output", str(out)],
                   timeout=120)
    assert done.returncode == 0, done.output[-3000:]
    assert "top nodes (id: score)" in done.output
    assert "code spread stragglers=2" in done.output  # the matrix-vector default
    from mpicoded.jobs import PageRank

    job = PageRank(graph=str(edges))
    x = job.start()
    for _ in range(30):
        x = job.step(x, job.transition @ x)
    rank = np.load(out)
    assert rank.shape == (400,) and rank.sum() == pytest.approx(1.0)
    assert np.allclose(rank, x, rtol=1e-10, atol=0)


@pytest.mark.parametrize(("job", "message"), [
    ("no_such_module:Job", "--job no_such_module: no module named 'no_such_module'"),
    ("mpicoded.jobs:Nope", "--job mpicoded.jobs:Nope: mpicoded.jobs has no attribute 'Nope'"),
    ("mpicoded:__version__", "__version__ is not a job class or a function"),
    ("os:getcwd", "getcwd() returned a str, not a job"),
    ("missing.py:Job", "--job missing.py: no such file"),
    ("logistic", "--job 'logistic': expected a built-in job name"),
])
def test_bad_job_values_exit_2_with_one_line(job, message):
    done = run_mpi(3, ["-m", "mpicoded.train", "--job", job], timeout=60)
    assert done.returncode == 2, done.output[-3000:]
    errors = [s for s in done.output.splitlines() if s.startswith("mpicoded.train: error:")]
    assert len(errors) == 1 and message in errors[0], done.output[-2000:]
    assert "Traceback" not in done.output


def test_a_sum_code_is_refused_for_pagerank():
    done = run_mpi(3, ["-m", "mpicoded.train", "--job", "pagerank", "--code", "frc"], timeout=60)
    assert done.returncode == 2 and "needs a code whose target is 'each'" in done.output


@pytest.mark.parametrize(("name", "expected"), [
    ("ridge", "distance to the closed form"), ("mlp", "test accuracy"),
    ("torch_digits", "test accuracy"), ("pagerank", "top nodes (id: score)"),
    ("callbacks_csv", "iterations logged to")])
def test_the_examples_run(name, expected, tmp_path):
    if name in ("mlp", "torch_digits"):
        pytest.importorskip("sklearn", reason="the example needs the examples extra")
    if name == "torch_digits":
        pytest.importorskip("torch", reason="the example needs the torch extra")
    argv = [str(tmp_path / "run.csv")] if name == "callbacks_csv" else []
    done = run_mpi(7, ["-m", f"mpicoded.examples.{name}", *argv], timeout=240)
    assert done.returncode == 0, done.output[-3000:]
    if name == "callbacks_csv":  # a row an iteration; progress through the standard logging
        rows = (tmp_path / "run.csv").read_text().splitlines()
        assert rows[0].startswith("iteration,wall_s,loss") and len(rows) == 31
        assert [int(r.split(",")[0]) for r in rows[1:]] == list(range(30))
        assert "INFO rank 0: iteration 30/30" in done.output
        assert "INFO rank 0: logreg on synthetic" in done.output
    line = next(s for s in done.output.splitlines() if expected in s)
    if name in ("mlp", "torch_digits"):
        assert float(line.rsplit("test accuracy ", 1)[1].split(",")[0]) > 0.9
    if name == "ridge":
        assert float(line.rsplit("closed form ", 1)[1].split(",")[0]) < 1e-6


@pytest.mark.parametrize("code", ["gfrc", "spread"])
def test_a_torch_model_through_mpirun_equals_single_process_training(code):
    """A torch MLP with SGD and momentum, gfrc s=2 and spread s=2 (both with partial work, the
    default for them) with a purged straggler that really computes 30x over: the same
    parameters as torch alone."""
    pytest.importorskip("torch", reason="needs the torch extra")
    script = Path(__file__).parents[1] / "torch_job.py"
    done = run_mpi(7, [str(script), code], timeout=180)
    assert done.returncode == 0, done.output[-3000:]
    got = json.loads(next(s for s in done.output.splitlines()
                          if s.startswith("RESULT "))[len("RESULT "):])
    from torch_job import single_process

    assert got["purged"] > 0
    assert np.allclose(got["theta"], single_process(), rtol=1e-6, atol=1e-9)


def serial_logreg(job, iterations):
    """Plain full-batch descent on ``job``'s data in memory: what exact decoding must give."""
    from mpicoded.jobs.logreg import REG

    X, y = job.data.X, job.data.y
    theta = np.zeros(job.dim)
    for _ in range(iterations):
        z = X @ theta
        theta = theta - job.step_size * (X.T @ (1 / (1 + np.exp(-z)) - y) / len(y) + REG * theta)
    return theta


def test_real_data_formats_through_mpirun(tmp_path):
    """A LIBSVM file trains sparse end to end (-1/+1 labels), and a memory-mapped .npy is read
    by the workers themselves: rank 0 places partition ids only (placed_bytes), and both
    equal serial descent on the same data."""
    from mpicoded.jobs import LogReg, synthetic

    data = synthetic("logreg", 3000, 20, seed=4)
    X = np.where(np.abs(data.X) > 1.0, data.X, 0.0)  # about a third of the entries non-zero
    lines = [" ".join([f"{2 * label - 1:+.0f}"] + [f"{j + 1}:{v:.17g}" for j in np.flatnonzero(row)
                                                  for v in [row[j]]])
             for row, label in zip(X, data.y, strict=True)]
    (tmp_path / "d.svm").write_text("\n".join(lines) + "\n")
    np.save(tmp_path / "d.npy", np.column_stack([data.X, data.y]))
    np.savez(tmp_path / "d.npz", X=data.X, y=data.y)
    placed = {}
    for name in ("d.svm", "d.npy", "d.npz"):
        metrics, out = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.theta.npy"
        done = run_mpi(5, ["-m", "mpicoded.train", "--job", "logreg", "--dataset",
                           str(tmp_path / name), "--code", "gfrc", "--stragglers", "1",
                           "--delay", "none", "--iterations", "12", "--quiet",
                           "--metrics", str(metrics), "--output", str(out)], timeout=150)
        assert done.returncode == 0, done.output[-3000:]
        placed[name] = json.loads(metrics.read_text().splitlines()[-1])["placed_bytes"]
        reference = serial_logreg(LogReg(dataset=str(tmp_path / name)), 12)
        np.testing.assert_allclose(np.load(out), reference, rtol=1e-9)
    assert placed["d.npy"] < 10_000 < 3000 * 21 * 8 < placed["d.npz"], placed
