"""Least squares through matrix-vector products with W = XᵀX (paper 001).

Target 'each': W is split in row blocks W_j and task t returns (sum_j B[t, j] W_j)·θ, a block the
size of one partition's rows. Target 'sum': partitions are sample blocks and task t returns
sum_j B[t, j] (X_jᵀX_j θ − X_jᵀ y_j), a full gradient-sized vector. Either way f is linear, so B
is applied to the data once, at placement: a worker holds one pre-coded block (A, b) a task.
"""

from __future__ import annotations

import numpy as np

from ._base import Job, row_blocks
from .task import Block, Kernel, Terms


def accumulate(block: Block, theta: np.ndarray, start: int, stop: int, coef: float,
               out: np.ndarray) -> None:
    """Rows [start, stop) of a coded matrix-vector product A·θ − b, times coef, into ``out``."""
    value = block["A"][start:stop] @ theta - block["b"][start:stop]
    if coef != 1.0:
        value *= coef
    out[start:stop] += value


KERNEL = Kernel(rows=lambda block: len(block["A"]), accumulate=accumulate)


class LinReg(Job):
    """Linear regression by gradient descent, gradient = (Wθ − Xᵀy) / n."""

    name = "linreg"
    kernel = KERNEL

    def __init__(self, data, code, lr=None):
        self.W = data.X.T @ data.X
        self.Xty = data.X.T @ data.y
        if code.target == "each":
            self.w_blocks = row_blocks(data.n_features, code.n_partitions)
        super().__init__(data, code, lr)

    @property
    def result_shape(self) -> tuple[int, ...]:
        if self.code.target == "each":
            return (max(len(b) for b in self.w_blocks),)
        return (self.dim,)

    def task_cost(self) -> np.ndarray:
        """A pre-coded block of W (target 'each') costs one unit, like one partition's block."""
        if self.code.target == "each":
            return np.ones(self.code.n_tasks)
        return super().task_cost()

    def default_lr(self) -> float:
        return self.data.n_samples / np.linalg.eigvalsh(self.W)[-1]

    def terms(self, task: int) -> Terms:
        """Task ``task`` is its own pre-coded block."""
        return ((int(task), 1.0),)

    def block(self, key: int) -> Block:
        """Task ``key``'s coded block: sum_j B[key, j] times partition j's (A, b)."""
        coef = self.code.B[key]
        support = np.flatnonzero(coef)
        if self.code.target == "each":
            A = np.zeros((self.result_shape[0], self.dim))
            for j in support:
                block = self.w_blocks[j]
                A[: len(block)] += coef[j] * self.W[block]
            return {"A": A, "b": np.zeros(len(A))}
        A, b = np.zeros((self.dim, self.dim)), np.zeros(self.dim)
        for j in support:
            Xj, yj = self.data.X[self.partitions[j]], self.data.y[self.partitions[j]]
            A += coef[j] * (Xj.T @ Xj)
            b += coef[j] * (Xj.T @ yj)
        return {"A": A, "b": b}

    def gradient(self, theta, decoded, missing):
        if self.code.target == "sum":  # a partial sum covers fewer samples
            return decoded / max(1, self.rows_present(missing))
        grad = np.zeros(self.dim)
        for j, block in enumerate(self.w_blocks):
            if j not in missing:  # a missed block's coordinates are left out of this update
                grad[block] = (decoded[j, : len(block)] - self.Xty[block]) / self.data.n_samples
        return grad

    def loss(self, theta: np.ndarray) -> float:
        r = self.data.X @ theta - self.data.y
        return float(0.5 * np.mean(r * r))
