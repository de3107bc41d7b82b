"""A user's job defined only in the tests: ridge regression from a seed. The MPI tests import it,
the end-to-end tests run it by ``--job tests/ridge_job.py:Ridge`` and as a script."""

import json
import os
import time

import numpy as np

import mpicoded


class Ridge(mpicoded.GradientJob):
    """Ridge regression; the data are made from a seed on rank 0 only."""

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
        return float(0.5 * np.mean((X @ theta - y) ** 2) + 0.5 * self.lam * theta @ theta)


class HangingRidge(Ridge):
    """The same job, but world rank 2 hangs in its first task for ever (a deadlock in user
    code: no chunk boundary, no purge can reach it)."""

    def compute(self, block, theta):
        if os.environ.get("OMPI_COMM_WORLD_RANK") == "2":
            time.sleep(10**6)
        return super().compute(block, theta)


def serial(job, iterations):
    """The same step rule by hand, with the whole data set: what exact decoding must give."""
    X, y = job.data()
    theta = np.zeros(job.dim)
    for _ in range(iterations):
        theta = job.step(theta, X.T @ (X @ theta - y), None)
    return theta


if __name__ == "__main__":  # the script a user would write
    result = mpicoded.run(Ridge(), code="gfrc", stragglers=2, delay="persistent",
                          task_time=0.002, slow_workers=[2, 5], slow_factor=40, iterations=15,
                          quiet=True)
    if result is not None:
        print("RESULT", json.dumps({"theta": result.theta.tolist(),
                                    "purged": result.totals["purged_tasks"]}))
