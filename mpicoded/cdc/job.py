"""What the nodes compute: Map each stored file to Q = K intermediate values, Reduce one each.

Both jobs keep every intermediate value the same size, so values can be XORed and split into
packets: v_{q,n} is a histogram of file n over the keys that reducer q owns.
- ``wordcount``: files are lists of words from a vocabulary; reducer q counts the words whose
  index is q mod K.
- ``sort``: files are lists of integer keys; reducer q owns the q-th range of keys and outputs
  them sorted (a counting sort of its histograms).
"""

from __future__ import annotations

from typing import cast

import numpy as np

JOBS = ("wordcount", "sort")


def make_files(job: str, n_files: int, seed: int, size: int = 200,
               vocabulary: int = 240) -> list[np.ndarray]:
    """Synthetic input: ``n_files`` arrays of ``size`` keys in [0, vocabulary)."""
    rng = np.random.default_rng([seed, 2])
    if job == "wordcount":  # Zipf-like word frequencies
        p = 1.0 / np.arange(1, vocabulary + 1)
        return [rng.choice(vocabulary, size=size, p=p / p.sum()) for _ in range(n_files)]
    return [rng.integers(0, vocabulary, size=size) for _ in range(n_files)]


def owned_keys(job: str, q: int, n_reducers: int, vocabulary: int) -> np.ndarray:
    """The keys reducer q owns."""
    if job == "wordcount":
        return np.arange(q, vocabulary, n_reducers)
    bounds = np.linspace(0, vocabulary, n_reducers + 1).astype(int)
    return np.arange(bounds[q], bounds[q + 1])


def value_length(job: str, n_reducers: int, vocabulary: int) -> int:
    """Keys in the largest reducer's share: every value is padded to this many counts."""
    return max(len(owned_keys(job, q, n_reducers, vocabulary)) for q in range(n_reducers))


def map_file(job: str, keys: np.ndarray, q: int, n_reducers: int, vocabulary: int) -> np.ndarray:
    """v_{q,n}: counts of reducer q's keys in one file, as int64, padded to a common length."""
    counts = np.bincount(keys, minlength=vocabulary)[owned_keys(job, q, n_reducers, vocabulary)]
    out = np.zeros(value_length(job, n_reducers, vocabulary), dtype=np.int64)
    out[: len(counts)] = counts
    return out


def reduce_values(job: str, q: int, n_reducers: int, vocabulary: int,
                  values: list[np.ndarray]) -> np.ndarray:
    """Reducer q's output: word counts (wordcount) or its keys in order (sort)."""
    keys = owned_keys(job, q, n_reducers, vocabulary)
    total = np.sum(values, axis=0)[: len(keys)]
    if job == "wordcount":
        return cast(np.ndarray, total)
    return np.repeat(keys, total)


def reference(job: str, files: list[np.ndarray], n_reducers: int,
              vocabulary: int) -> list[np.ndarray]:
    """Every reducer's output computed in one process, for verification."""
    return [reduce_values(job, q, n_reducers, vocabulary,
                          [map_file(job, f, q, n_reducers, vocabulary) for f in files])
            for q in range(n_reducers)]
