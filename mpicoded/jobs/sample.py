"""Gradient jobs over the rows of a dataset: the built-in logreg and linreg share this."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .coded import row_blocks
from .data import Dataset, DatasetError, dataset
from .kinds import GradientJob


class SampleJob(GradientJob):
    """A gradient job over the rows of a dataset (synthetic from a seed, or a file): blocks are
    (X_j, y_j) row blocks; the step divides the covered partitions' sum by their rows."""

    name = ""

    def __init__(self, samples: int = 20000, features: int = 50, seed: int = 0,
                 dataset: str | None = None, lr: float | None = None) -> None:
        self.samples, self.features, self.seed = samples, features, seed
        self.dataset, self.lr = dataset, lr
        self.sizes: list[int] = []

    @cached_property
    def data(self) -> Dataset:
        """Loaded on first use (rank 0): constructing the job stays cheap on every rank."""
        data = dataset(self.name, self.dataset, self.samples, self.features, self.seed)
        self.check(data)
        if self.lr is not None and not self.lr > 0:
            raise ValueError(f"lr={self.lr} is out of range: allowed > 0")
        return data

    def check(self, data: Dataset) -> None:
        """Refuse data the job cannot learn from."""

    @property
    def dim(self) -> int:  # type: ignore[override]
        return self.data.n_features

    @property
    def title(self) -> str:
        return f"{self.name} on {self.data.source}"

    @cached_property
    def step_size(self) -> float:
        return self.lr if self.lr is not None else self.default_lr()

    def default_lr(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def blocks(self, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        try:
            rows = row_blocks(self.data.n_samples, k)
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
        self.sizes = [len(r) for r in rows]
        return [(self.data.X[r], self.data.y[r]) for r in rows]

    def rows_covered(self, covered: np.ndarray) -> int:
        if len(covered) == len(self.sizes):  # every partition (covered has no repeats)
            return self.data.n_samples
        return int(sum(self.sizes[j] for j in covered))
