"""The job the model computes (pure): rows of value a_r theta + b_r, so that a result of a stale
theta, a row counted twice or missed shows in theta against serial gradient descent."""

from __future__ import annotations

import numpy as np

from ..codes import Code
from ..core.shape import Shape

LR = 0.5


class Linear(Shape):
    """Rows r with value a_r theta + b_r; a partition's value sums its rows'. Theta steps down
    the decoded sum."""

    def __init__(self, code: Code, a: np.ndarray, b: np.ndarray, rows: list[int]) -> None:
        super().__init__(code, rows=rows, width=2)
        self.a, self.b = a, b
        self.cum_a = np.concatenate([[0.0], np.cumsum(a)])
        self.cum_b = np.vstack([np.zeros(b.shape[1]), np.cumsum(b, axis=0)])

    def recoded(self, code: Code) -> Linear:
        k = code.n_partitions
        rows = [len(r) for r in np.array_split(np.arange(len(self.a)), k)]
        return Linear(code, self.a, self.b, rows)

    def rows_value(self, start: int, stop: int, theta: np.ndarray) -> np.ndarray:
        """The value of global rows [start, stop) at ``theta``."""
        return np.asarray((self.cum_a[stop] - self.cum_a[start]) * theta
                          + self.cum_b[stop] - self.cum_b[start])

    def theta0(self) -> np.ndarray:
        return np.ones(self.b.shape[1])

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray:
        return theta - LR * decoded

    def serial(self, iterations: int) -> np.ndarray:
        theta = self.theta0()
        for _ in range(iterations):
            theta = self.update(theta, self.rows_value(0, len(self.a), theta), np.array([]), 0)
        return theta
