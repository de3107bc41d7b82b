"""Ridge regression as your own job: ``mpirun -n 7 python -m mpicoded.examples.ridge``."""

import numpy as np

import mpicoded

Block = tuple[np.ndarray, np.ndarray]  # a partition: its rows of X and of y


class Ridge(mpicoded.GradientJob):
    def __init__(self, n: int = 20000, dim: int = 20, lam: float = 0.1) -> None:
        self.n, self.dim, self.lam = n, dim, lam  # cheap: every rank builds the job

    def blocks(self, k: int) -> list[Block]:  # rank 0 only: make (or load) the data, cut it in k row blocks
        rng = np.random.default_rng(0)
        self.X = rng.standard_normal((self.n, self.dim))
        self.y = self.X @ np.linspace(-1, 1, self.dim) + 0.1 * rng.standard_normal(self.n)
        return [(self.X[r], self.y[r]) for r in np.array_split(np.arange(self.n), k)]

    def compute(self, block: Block, theta: np.ndarray) -> np.ndarray:
        """Workers: one partition's gradient, a sum over its rows."""
        X, y = block
        return np.asarray(X.T @ (X @ theta - y))

    def step(self, theta: np.ndarray, total: np.ndarray, covered: np.ndarray) -> np.ndarray:
        # rank 0: total sums compute over all partitions
        return np.asarray(theta - 0.5 * (total / self.n + self.lam * theta))

    def loss(self, theta: np.ndarray) -> float:
        r = self.X @ theta - self.y
        return float(0.5 * r @ r / self.n + 0.5 * self.lam * theta @ theta)


if __name__ == "__main__":
    job = Ridge()
    result = mpicoded.run(job, code="gfrc", stragglers=2, iterations=40, quiet=True)
    if result is not None:  # rank 0; the workers get None
        A = job.X.T @ job.X / job.n + job.lam * np.eye(job.dim)
        best = np.linalg.solve(A, job.X.T @ job.y / job.n)
        print(f"ridge: loss {result.losses[-1]:.6f}, distance to the closed form "
              f"{np.linalg.norm(result.theta - best):.2e}, makespan {result.makespan_s:.2f} s")
