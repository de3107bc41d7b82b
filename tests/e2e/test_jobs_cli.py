"""End to end: your own job through ``--job file.py:NAME`` and through a script calling
``mpicoded.run`` under mpirun; PageRank from a SNAP file; the examples; bad --job values."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from mpicoded.launcher import run_mpi

JOB_FILE = '''
import numpy as np
import mpicoded


class Ridge(mpicoded.GradientJob):
    """Ridge regression from a seed; defined only in this file."""

    def __init__(self, n=900, dim=7, lam=0.05, lr=0.1):
        self.n, self.dim, self.lam, self.lr = n, dim, lam, lr

    def data(self):
        rng = np.random.default_rng(5)
        X = rng.standard_normal((self.n, self.dim))
        return X, X @ np.linspace(-2, 2, self.dim) + rng.standard_normal(self.n)

    def blocks(self, k):
        X, y = self.data()
        return [(X[r], y[r]) for r in np.array_split(np.arange(self.n), k)]

    def compute(self, block, theta):
        X, y = block
        return X.T @ (X @ theta - y)

    def step(self, theta, total, covered):
        return theta - self.lr * (total / self.n + self.lam * theta)

    def loss(self, theta):
        X, y = self.data()
        return float(0.5 * np.mean((X @ theta - y) ** 2))


def serial(iterations):
    job = Ridge()
    X, y = job.data()
    theta = np.zeros(job.dim)
    for _ in range(iterations):
        theta = job.step(theta, X.T @ (X @ theta - y), None)
    return theta


if __name__ == "__main__":
    result = mpicoded.run(Ridge(), code="gfrc", stragglers=2, delay="persistent",
                          task_time=0.002, slow_workers=[2, 5], slow_factor=40, iterations=15,
                          quiet=True)
    if result is not None:
        print("RESULT", json.dumps({"theta": result.theta.tolist(),
                                    "purged": result.totals["purged_tasks"]}))
'''.replace("import numpy as np\n", "import json\nimport numpy as np\n", 1)

SLOW = ["--code", "gfrc", "--stragglers", "2", "--delay", "persistent", "--task-time", "0.002",
        "--slow-workers", "2,5", "--slow-factor", "40", "--iterations", "15", "--quiet"]


@pytest.fixture
def job_file(tmp_path):
    path = tmp_path / "myjobs.py"
    path.write_text(JOB_FILE)
    sys.path.insert(0, str(tmp_path))
    yield path
    sys.path.remove(str(tmp_path))
    sys.modules.pop("myjobs", None)


def serial_theta(iterations):
    import myjobs

    return myjobs.serial(iterations)


def test_a_job_file_through_the_cli_equals_serial_descent(tmp_path, job_file):
    metrics, out = tmp_path / "m.jsonl", tmp_path / "theta.npy"
    done = run_mpi(7, ["-m", "mpicoded.train", "--job", f"{job_file}:Ridge", *SLOW,
                       "--metrics", str(metrics), "--output", str(out)], timeout=150)
    assert done.returncode == 0, done.output[-3000:]
    run = json.loads(metrics.read_text().splitlines()[-1])
    assert run["total_purged_tasks"] >= 15 and run["job"]["class"].endswith("Ridge")
    theta = np.load(out)
    assert np.allclose(theta, serial_theta(15), rtol=1e-10, atol=0)


def test_a_script_calling_run_equals_serial_descent(job_file):
    done = run_mpi(7, [str(job_file)], timeout=150)
    assert done.returncode == 0, done.output[-3000:]
    line = next(s for s in done.output.splitlines() if s.startswith("RESULT "))
    got = json.loads(line[len("RESULT "):])
    assert got["purged"] >= 15
    assert np.allclose(got["theta"], serial_theta(15), rtol=1e-10, atol=0)


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
    assert "top nodes (id: score)" in done.output and "code mds" in done.output
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
    ("pagerank", "top nodes (id: score)")])
def test_the_examples_run(name, expected):
    if name == "mlp":
        pytest.importorskip("sklearn", reason="the mlp example needs the examples extra")
    done = run_mpi(7, ["-m", f"mpicoded.examples.{name}"], timeout=240)
    assert done.returncode == 0, done.output[-3000:]
    line = next(s for s in done.output.splitlines() if expected in s)
    if name == "mlp":
        assert float(line.rsplit("test accuracy ", 1)[1].split(",")[0]) > 0.9
    if name == "ridge":
        assert float(line.rsplit("closed form ", 1)[1].split(",")[0]) < 1e-6
