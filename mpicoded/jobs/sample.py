"""Gradient jobs over the rows of a dataset: the built-in logreg and linreg share this."""

from __future__ import annotations

from functools import cached_property
from itertools import pairwise
from typing import Any

import numpy as np

from .data import Dataset, DatasetError, dataset, mapped, row_chunks
from .kinds import GradientJob
from .rows import is_sparse, row_blocks

DENSE_GRAM = 4096  # the Gram matrix of the smaller side is formed up to this order (134 MB)


def gram_top_eigenvalue(X: Any) -> float:
    """λ_max(XᵀX), for the default step sizes: XᵀX's for data with few columns (a memory map a
    chunk of rows at a time), XXᵀ's for few rows and many columns (XᵀX would need d² floats),
    and by Lanczos iteration from a fixed start otherwise, as for sparse data."""
    n, d = X.shape
    if is_sparse(X) and min(n, d) < 2:  # a single row or column: XᵀX has rank one, λ_max = ‖X‖²
        return float(X.power(2).sum())
    if not is_sparse(X) and d <= DENSE_GRAM:
        gram = np.zeros((d, d))
        for rows in row_chunks(n, X[0].nbytes):
            part = np.asarray(X[rows])
            gram += part.T @ part
        return float(np.linalg.eigvalsh(gram)[-1])
    if not is_sparse(X) and n <= DENSE_GRAM and not isinstance(X, np.memmap):
        return float(np.linalg.eigvalsh(X @ X.T)[-1])
    from scipy.sparse.linalg import svds  # here: kept out of every rank's start

    v0 = np.ones(min(n, d))  # fixed, so every run gets the same step
    return float(svds(X, k=1, v0=v0, return_singular_vectors=False)[0] ** 2)


class SampleJob(GradientJob):
    """A gradient job over the rows of a dataset (synthetic from a seed, or a file): blocks are
    (X_j, y_j) row blocks; the step divides the covered partitions' sum by their rows."""

    name = ""

    def __init__(self, samples: int = 20000, features: int = 50, seed: int = 0,
                 dataset: str | None = None, lr: float | None = None) -> None:
        self.samples, self.features, self.seed = samples, features, seed
        self.dataset, self.lr = dataset, lr
        self.sizes: list[int] = []
        self._counted: np.ndarray | None = None  # under mini-batches: the step's rows a partition

    @cached_property
    def data(self) -> Dataset:
        """Loaded on first use (rank 0): constructing the job stays cheap on every rank."""
        data = self.prepare(dataset(self.name, self.dataset, self.samples, self.features,
                                    self.seed))
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr={self.lr} is out of range: allowed > 0")
        return data

    def prepare(self, data: Dataset) -> Dataset:
        """The data as the job learns from them; DatasetError for data it cannot learn from."""
        return data

    @property
    def workers_load(self) -> bool:  # type: ignore[override]
        """A .npy dataset is memory-mapped: each worker reads its own partitions' rows."""
        return self.dataset is not None and str(self.dataset).endswith(".npy")

    def partitioned(self, k: int) -> None:
        try:
            rows = row_blocks(self.data.n_samples, k)
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
        self.sizes = [len(r) for r in rows]
        self._counted = None  # full batches until a run's batch_rows says otherwise

    def partition_rows(self, k: int) -> list[int]:
        """Each partition's rows, from the .npy's shape alone (workers read the rows)."""
        return [len(rows) for rows in row_blocks(self.data.n_samples, k)]

    @cached_property
    def _table(self) -> np.ndarray:
        """A worker's memory map of the .npy (its rows are read as its partitions are)."""
        assert self.dataset is not None
        return mapped(self.dataset)

    def load_block(self, j: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Partition j of a memory-mapped .npy, read on the worker (features, target)."""
        rows = row_blocks(self._table.shape[0], k)[j]
        part = self._table[rows[0]:rows[-1] + 1]
        return np.array(part[:, :-1]), np.array(part[:, -1])  # contiguous copies, in memory

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self.data.n_features

    @property
    def title(self) -> str:
        return f"{self.name} on {self.data.source}"

    @cached_property
    def step_size(self) -> float:
        return self.lr if self.lr is not None else self.default_lr()

    def prepare_step(self) -> None:
        """The default step needs λ_max(XᵀX) over every row (0.1 s for 240000 x 100): once,
        before the first iteration, not between its decode and the second."""
        _ = self.step_size

    def default_lr(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def blocks(self, k: int) -> list[tuple[Any, np.ndarray]]:
        self.partitioned(k)
        bounds = np.cumsum([0, *self.sizes])
        return [(self.data.X[a:b], self.data.y[a:b]) for a, b in pairwise(bounds)]

    def batch_rows(self, rows: np.ndarray) -> None:
        self._counted = rows

    def rows_covered(self, covered: np.ndarray) -> int:
        """The rows the covered partitions' sum is over: in the step's batch, or in the data."""
        if self._counted is not None:
            return int(self._counted[covered].sum())
        if len(covered) == len(self.sizes):  # every partition (covered has no repeats)
            return self.data.n_samples
        return int(sum(self.sizes[j] for j in covered))
