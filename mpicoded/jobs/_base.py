"""What every job provides: the data each task needs, the task's computation and the update."""

from __future__ import annotations

import numpy as np

from ..codes import Code
from .data import Dataset, DatasetError


def row_blocks(n_rows: int, k: int) -> list[np.ndarray]:
    """Split ``range(n_rows)`` into k contiguous, nearly equal blocks (the partitions)."""
    if k > n_rows:
        raise DatasetError(f"{k} partitions need at least {k} rows of data, the job has {n_rows}")
    return np.array_split(np.arange(n_rows), k)


class Job:
    """One training problem coded by ``code``: partitions, per-task payloads, the update.

    ``payload(task)`` is what a worker holds to run ``task``; the module-level ``compute`` of the
    job's module turns a payload and θ into the task's result, ``sum_j B[t, j] f_j(θ)``.
    """

    name = ""

    def __init__(self, data: Dataset, code: Code, lr: float | None = None) -> None:
        self.data, self.code = data, code
        self.partitions = row_blocks(data.n_samples, code.n_partitions)
        self.lr = lr if lr is not None else self.default_lr()
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr} is out of range: allowed > 0")

    @property
    def dim(self) -> int:
        return self.data.n_features

    @property
    def result_shape(self) -> tuple[int, ...]:
        return (self.dim,)

    def task_cost(self) -> np.ndarray:
        """Work units of each task: computing over d partitions' data costs d."""
        return np.count_nonzero(self.code.B, axis=1).astype(np.float64)

    def default_lr(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def payload(self, task: int) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def gradient(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def loss(self, theta: np.ndarray) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """One gradient step from the decoded target."""
        return theta - self.lr * self.gradient(theta, decoded, missing)

    def rows_present(self, missing: np.ndarray) -> int:
        """Samples in the partitions the decoded result covers."""
        return self.data.n_samples - sum(len(self.partitions[j]) for j in missing)

    def sum_of_each(self, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """The partitions' sum from a decoded target: as is for 'sum', rows added for 'each'."""
        if self.code.target == "sum":
            return decoded
        keep = np.setdiff1d(np.arange(self.code.n_partitions), missing)
        return decoded[keep].sum(axis=0)
