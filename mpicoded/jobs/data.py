"""Datasets for the jobs: synthetic ones from a seed, or a .npz / .csv file."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class DatasetError(ValueError):
    """A dataset file that is missing or malformed (a user error, reported in one line)."""


@dataclass(frozen=True)
class Dataset:
    """Features X (n_samples x n_features) and targets y (n_samples,)."""

    X: np.ndarray
    y: np.ndarray
    source: str

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]


def synthetic(job: str, samples: int, features: int, seed: int) -> Dataset:
    """A learnable problem: y = X·θ* + noise (linreg) or y ~ Bernoulli(σ(X·θ*)) (logreg)."""
    if samples < 1 or features < 1:
        raise DatasetError(f"samples={samples}, features={features}: both must be >= 1")
    rng = np.random.default_rng([seed, 7])
    X = rng.standard_normal((samples, features))
    theta = rng.standard_normal(features) * 2.0 / np.sqrt(features)
    z = X @ theta
    if job == "logreg":
        y = (rng.random(samples) < 1.0 / (1.0 + np.exp(-4.0 * z))).astype(np.float64)
    else:
        y = z + 0.1 * rng.standard_normal(samples)
    return Dataset(X, y, f"synthetic(samples={samples}, features={features}, seed={seed})")


def dataset(job: str, path: str | None, samples: int, features: int, seed: int) -> Dataset:
    """The file at ``path`` if one is given, else job ``job``'s synthetic problem."""
    return load(path) if path else synthetic(job, samples, features, seed)


def _is_header(line: str) -> bool:
    """A .csv's first line names its columns: some field of it is not a number."""
    try:
        [float(field) for field in line.split(",") if field.strip()]
    except ValueError:
        return True
    return False


def load(path: str | Path) -> Dataset:
    """Read ``X`` and ``y`` from a .npz file, or a .csv whose last column is the target."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset {path}: no such file")
    try:
        if path.suffix == ".npz":
            with np.load(path) as f:
                if "X" not in f or "y" not in f:
                    raise DatasetError(f"dataset {path}: a .npz needs arrays 'X' and 'y', has {list(f)}")
                X, y = np.asarray(f["X"], dtype=np.float64), np.asarray(f["y"], dtype=np.float64)
        elif path.suffix == ".csv":
            with path.open(encoding="utf-8-sig") as f:  # a byte-order mark is no header
                header = _is_header(f.readline())
            try:  # numpy's C parser: 50000 x 51 in 1.0 s, genfromtxt 2.6 s
                table = np.loadtxt(path, delimiter=",", dtype=np.float64, skiprows=int(header),
                                   encoding="utf-8-sig",
                                   ndmin=2)
            except ValueError as exc:
                raise DatasetError(f"dataset {path}: non-numeric values or rows of unequal "
                                   f"length: {exc}") from None
            if table.ndim != 2 or table.shape[1] < 2:
                raise DatasetError(f"dataset {path}: a .csv needs >= 2 numeric columns (features, target)")
            X, y = table[:, :-1], table[:, -1]
        else:
            raise DatasetError(f"dataset {path}: unknown format {path.suffix!r}: allowed .npz, .csv")
    except DatasetError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:  # truncated files too
        raise DatasetError(f"dataset {path}: cannot be read: {exc}") from None
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0:
        raise DatasetError(f"dataset {path}: X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    if not (np.isfinite(X).all() and np.isfinite(y).all()):
        raise DatasetError(f"dataset {path}: holds NaN, infinite or non-numeric values")
    return Dataset(X, y, str(path))
