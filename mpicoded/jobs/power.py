"""The power method (a MatVecJob): the leading eigenvector of a symmetric matrix."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import cast

import numpy as np

from .data import DatasetError
from .kinds import MatVecJob


def spiked_matrix(n: int, seed: int) -> np.ndarray:
    """A symmetric n x n matrix with eigenvalues 1, 0.8, then evenly down to 0: a 0.8 gap."""
    if n < 2:
        raise DatasetError(f"features={n}: the power job needs a matrix of at least 2 x 2")
    rng = np.random.default_rng([seed, 13])
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    values = np.concatenate([[1.0], np.linspace(0.8, 0.0, n - 1)])
    return cast(np.ndarray, (Q * values) @ Q.T)


def read_matrix(path: str | Path) -> np.ndarray:
    path = Path(path)
    try:
        A = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DatasetError(f"matrix {path}: cannot be read as .npy: {exc}") from None
    if A.ndim != 2 or A.shape[0] != A.shape[1] or not np.allclose(A, A.T):
        raise DatasetError(f"matrix {path}: the power job needs a square symmetric matrix")
    return np.asarray(A, dtype=np.float64)


class Power(MatVecJob):
    """x <- A x / |A x| from a seeded random start."""

    name = "power"

    def __init__(self, dataset: str | None = None, features: int = 50, seed: int = 0) -> None:
        self.dataset, self.features, self.seed = dataset, features, seed

    @cached_property
    def A(self) -> np.ndarray:
        return read_matrix(self.dataset) if self.dataset else spiked_matrix(self.features,
                                                                             self.seed)

    @property
    def title(self) -> str:
        where = self.dataset or f"synthetic(features={self.features}, seed={self.seed})"
        return f"power on {where}: {len(self.A)} x {len(self.A)}"

    def matrix(self) -> np.ndarray:
        return self.A

    def start(self) -> np.ndarray:
        x = np.random.default_rng([self.seed, 17]).standard_normal(len(self.A))
        return cast(np.ndarray, x / np.linalg.norm(x))

    def step(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Normalise y = A x; a missed row is estimated as the Rayleigh quotient times x."""
        missed = np.isnan(y)
        if missed.any():
            seen = ~missed
            rayleigh = x[seen] @ y[seen] / max(x[seen] @ x[seen], 1e-300)
            y = np.where(missed, rayleigh * x, y)
        return cast(np.ndarray, y / np.linalg.norm(y))

    def eigenvalue(self, x: np.ndarray) -> float:
        return float(x @ self.A @ x)

    def loss(self, x: np.ndarray) -> float:
        """|A x − (xᵀ A x) x|: zero at an eigenvector."""
        Ax = self.A @ x
        return float(np.linalg.norm(Ax - (x @ Ax) * x))

    def summary(self, x: np.ndarray) -> str:
        return f"leading eigenvalue {self.eigenvalue(x):.8f}"
