"""Datasets for the jobs: synthetic ones from a seed, or a file: .npz, .csv, a LIBSVM
(svmlight) text file kept sparse, or a .npy memory-mapped (the workers read their own rows)."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .rows import is_sparse

if TYPE_CHECKING:
    import scipy.sparse as sp

SVMLIGHT_SUFFIXES = (".svm", ".svmlight", ".libsvm")
CHUNK_BYTES = 1 << 26  # rows of a memory-mapped file checked or multiplied at a time: 64 MB


class DatasetError(ValueError):
    """A dataset file that is missing or malformed (a user error, reported in one line)."""


@dataclass(frozen=True)
class Dataset:
    """Features X (n_samples x n_features: a numpy array, a CSR matrix for a LIBSVM file, or a
    read-only memory map of a .npy) and targets y (n_samples,)."""

    X: Any
    y: np.ndarray
    source: str

    @property
    def mapped(self) -> bool:
        """Whether X is memory-mapped from a .npy: rows are read where they are used."""
        return isinstance(self.X, np.memmap)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


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
    """Read ``X`` and ``y`` from a .npz file (arrays X and y), a .csv or a .npy whose last column
    is the target (the .npy memory-mapped), or a LIBSVM file (``label index:value ...``)."""
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
            X, y = _columns(path, _csv(path), ".csv")
        elif path.suffix == ".npy":
            X, y = _columns(path, mapped(path), ".npy")
        elif path.suffix in SVMLIGHT_SUFFIXES:
            X, y = _svmlight(path)
        else:
            raise DatasetError(f"dataset {path}: unknown format {path.suffix!r}: allowed .npz, "
                               f".csv, .npy, {', '.join(SVMLIGHT_SUFFIXES)}")
    except DatasetError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:  # truncated files too
        raise DatasetError(f"dataset {path}: cannot be read: {exc}") from None
    if X.ndim != 2 or y.shape != (X.shape[0],) or X.shape[0] == 0:
        raise DatasetError(f"dataset {path}: X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    if not (_finite(X) and np.isfinite(y).all()):
        raise DatasetError(f"dataset {path}: holds NaN, infinite or non-numeric values")
    return Dataset(X, y, str(path))


def _csv(path: Path) -> np.ndarray:
    with path.open(encoding="utf-8-sig") as f:  # a byte-order mark is no header
        header = _is_header(f.readline())
    try:  # numpy's C parser: 50000 x 51 in 1.0 s, genfromtxt 2.6 s
        return np.loadtxt(path, delimiter=",", dtype=np.float64, skiprows=int(header),
                          encoding="utf-8-sig", ndmin=2)
    except ValueError as exc:
        raise DatasetError(f"dataset {path}: non-numeric values or rows of unequal length: "
                           f"{_bad_line(path, int(header)) or exc}") from None


def _bad_line(path: Path, skip: int) -> str | None:
    """Where a CSV that numpy could not read goes wrong, by the file's own line numbers (numpy
    counts data rows from 0); None if no line is found wrong."""
    width = None
    with path.open(encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].strip().split(",")
            if number <= skip or fields == [""]:
                continue
            width = width or len(fields)
            if len(fields) != width:
                return f"line {number} has {len(fields)} values, the lines before {width}"
            for column, field in enumerate(fields, 1):
                try:
                    float(field)
                except ValueError:
                    return f"line {number}, column {column}: {field.strip()!r} is not a number"
    return None


def mapped(path: str | Path) -> np.ndarray:
    """A .npy's array memory-mapped read-only: pages are read when rows are used."""
    table = np.load(path, mmap_mode="r", allow_pickle=False)
    if table.dtype != np.float64:
        raise DatasetError(f"dataset {path}: a .npy dataset must hold float64 (it holds "
                           f"{table.dtype}): np.save(path, table.astype(np.float64))")
    return cast(np.ndarray, table)


def _columns(path: Path, table: np.ndarray, kind: str) -> tuple[Any, np.ndarray]:
    """Features and target of a table whose last column is the target."""
    if table.ndim != 2 or table.shape[1] < 2:
        raise DatasetError(f"dataset {path}: a {kind} needs >= 2 numeric columns (features, "
                           f"target), got shape {table.shape}")
    return table[:, :-1], np.array(table[:, -1])


def row_chunks(n_rows: int, row_bytes: int) -> list[slice]:
    """Slices of about CHUNK_BYTES of rows: a memory map is used a chunk at a time."""
    step = max(1, CHUNK_BYTES // max(1, row_bytes))
    return [slice(start, min(n_rows, start + step)) for start in range(0, n_rows, step)]


def _finite(X: Any) -> bool:
    if is_sparse(X):
        return bool(np.isfinite(X.data).all())
    return all(np.isfinite(X[rows]).all() for rows in row_chunks(X.shape[0], X[0].nbytes))


def _svmlight(path: Path) -> tuple[sp.csr_matrix, np.ndarray]:
    """A LIBSVM file by scikit-learn's C loader: X stays a CSR matrix."""
    import scipy.sparse as sp  # here: dense data starts without it

    try:
        from sklearn.datasets import load_svmlight_file
    except ImportError:
        raise DatasetError(f"dataset {path}: reading LIBSVM files needs scikit-learn: pip "
                           "install mpicoded[data]") from None
    try:
        X, y = load_svmlight_file(str(path), dtype=np.float64)
    except ValueError as exc:
        raise DatasetError(f"dataset {path}: {_svmlight_fault(path) or exc}") from None
    return sp.csr_matrix(X), np.asarray(y, dtype=np.float64)


def _svmlight_fault(path: Path) -> str | None:
    """The first line of a LIBSVM file that is not ``label [qid:N] index:value ...``, named by
    its number (the C loader's errors name no line)."""
    with path.open(encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            try:
                float(fields[0])
            except ValueError:
                return f"line {number}: the label {fields[0]!r} is not a number"
            for field in fields[1:]:
                index, sep, value = field.partition(":")
                try:
                    ok = bool(sep) and (index == "qid" or int(index) >= 0)
                    float(value)
                except ValueError:
                    ok = False
                if not ok:
                    return f"line {number}: {field!r} is not index:value"
    return None
