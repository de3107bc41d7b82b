"""What every job provides: the data each task needs, the task's computation and the update."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..codes import Code
from .data import Dataset, DatasetError
from .task import Block, Kernel, Terms, default_chunk_rows, run_task


def row_blocks(n_rows: int, k: int) -> list[np.ndarray]:
    """Split ``range(n_rows)`` into k contiguous, nearly equal blocks (the partitions)."""
    if k > n_rows:
        raise DatasetError(f"{k} partitions need at least {k} rows of data, the job has {n_rows}")
    return np.array_split(np.arange(n_rows), k)


class Job:
    """One training problem coded by ``code``: partitions, the blocks workers hold, the update.

    A worker holds blocks (``block(key)``) and runs task t as ``sum over terms(t) of coef *
    f(block, θ)`` with the job's ``kernel``. By default blocks are the data partitions and the
    coefficients B's row t (B applied to results, each partition held once however many of a
    worker's tasks use it); a job may instead hold one pre-coded block per task (B on data).
    """

    name = ""
    kernel: Kernel

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

    @property
    def result_size(self) -> int:
        return int(np.prod(self.result_shape))

    def default_chunk_rows(self) -> int:
        """About a millisecond of compute a chunk, from the data's shape alone."""
        return default_chunk_rows(self.dim)

    def terms(self, task: int) -> Terms:
        """The (block key, coefficient) pairs task ``task`` sums: B's row over the partitions."""
        coef = self.code.B[task]
        return tuple((int(j), float(coef[j])) for j in np.flatnonzero(coef))

    def block(self, key: int) -> Block:  # pragma: no cover - abstract
        raise NotImplementedError

    def placement(self, tasks: Iterable[int]) -> tuple[dict[int, Block], dict[int, Terms]]:
        """What a worker that may run ``tasks`` holds: each block they use once, and their terms."""
        terms = {int(t): self.terms(int(t)) for t in tasks}
        keys = sorted({key for ts in terms.values() for key, _ in ts})
        return {key: self.block(key) for key in keys}, terms

    def compute(self, task: int, theta: np.ndarray, chunk_rows: int = 0) -> np.ndarray:
        """Task ``task``'s value, computed here (tests and references: what a worker returns)."""
        blocks, terms = self.placement([task])
        value, _ = run_task(self.kernel, blocks, terms[task], theta, self.result_size, chunk_rows)
        assert value is not None
        return value.reshape(self.result_shape)

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
