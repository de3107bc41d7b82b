"""Logistic regression: task t returns sum_j B[t, j] X_jᵀ(σ(X_j θ) − y_j)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ._base import Job
from .data import DatasetError
from .task import Block, Kernel

REG = 1e-4  # L2 regularisation: keeps the problem strongly convex on separable data


def default_lr(X: np.ndarray) -> float:
    """1 / smoothness of the mean logistic loss with the L2 term."""
    return 1.0 / (np.linalg.eigvalsh(X.T @ X)[-1] / (4.0 * len(X)) + REG)


def accumulate(block: Block, theta: np.ndarray, start: int, stop: int, coef: float,
               out: np.ndarray) -> None:
    """Add coef times the partial gradient of rows [start, stop) of a partition to ``out``."""
    X = block["X"][start:stop]
    residual = expit(X @ theta) - block["y"][start:stop]
    if coef != 1.0:
        residual *= coef
    out += X.T @ residual


KERNEL = Kernel(rows=lambda block: len(block["X"]), accumulate=accumulate)


class LogReg(Job):
    """Binary logistic regression by gradient descent over coded partial gradients."""

    name = "logreg"
    kernel = KERNEL

    def __init__(self, data, code, lr=None):
        labels = np.unique(data.y)
        if not np.isin(labels, (0.0, 1.0)).all():
            raise DatasetError(f"logreg needs labels 0/1, the dataset has {labels[:6].tolist()}")
        super().__init__(data, code, lr)

    def default_lr(self) -> float:
        return default_lr(self.data.X)

    def block(self, key: int) -> Block:
        """Partition ``key``'s samples."""
        rows = self.partitions[key]
        return {"X": self.data.X[rows], "y": self.data.y[rows]}

    def gradient(self, theta, decoded, missing):
        total = self.sum_of_each(decoded, missing)
        return total / max(1, self.rows_present(missing)) + REG * theta

    def loss(self, theta: np.ndarray) -> float:
        z = self.data.X @ theta
        logloss = np.mean(np.logaddexp(0.0, z) - self.data.y * z)
        return float(logloss + 0.5 * REG * theta @ theta)

    def accuracy(self, theta: np.ndarray) -> float:
        return float(np.mean((self.data.X @ theta > 0) == (self.data.y > 0.5)))
