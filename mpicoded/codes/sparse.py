"""Sparse gradient code (paper 000, appendix): B of size KΩ x K with d non-zeros a row.

Any K task results give the gradient sum when their rows have full rank. Supports are dealt so
that every partition is in the same number of rows (within one), values are Gaussian; full rank
is then likely but not certain, so the constructor measures the probability over random sets of K
results and reports it.
"""

from __future__ import annotations

import numpy as np

from ._base import Code, check_int, check_target, even_split
from .cyclic import null_space_rows
from .decoders import GenericDecoder


def balanced_supports(n_rows: int, k: int, d: int, rng: np.random.Generator) -> list[np.ndarray]:
    """d distinct partitions a row, dealt from shuffled decks so every partition is used by
    about n_rows·d/k rows."""
    deck: list[int] = []
    supports = []
    for _ in range(n_rows):
        row: list[int] = []
        while len(row) < d:
            if not deck:
                deck = list(rng.permutation(k))
            pick = next((i for i, p in enumerate(deck) if p not in row), None)
            if pick is None:  # the rest of the deck is all in this row: start a fresh deck
                deck = list(rng.permutation(k)) + deck
                continue
            row.append(deck.pop(pick))
        supports.append(np.array(sorted(row)))
    return supports


def decode_probability(B: np.ndarray, k: int, trials: int, rng: np.random.Generator) -> float:
    """Fraction of random k-row subsets of B that have rank k (so decode the sum)."""
    if B.shape[0] == k:
        return float(np.linalg.matrix_rank(B) == k)
    hits = sum(np.linalg.matrix_rank(B[rng.choice(B.shape[0], size=k, replace=False)]) == k
               for _ in range(trials))
    return float(hits / trials)


def make_sparse(n_workers: int, partitions: int | None = None, redundancy: float = 1.25,
                degree: int = 3, seed: int = 0, trials: int = 200, target: str = "sum") -> Code:
    """K = ``partitions`` (default n_workers), Ω = ``redundancy``, d = ``degree``; the round(KΩ)
    tasks are dealt evenly to the workers. Any K results of full rank give the sum (target
    'sum') or every partition's value (target 'each': a sparse code for matrix-vector jobs)."""
    target = check_target(target)
    n = check_int("n_workers", n_workers, 1)
    k = check_int("partitions", n if partitions is None else partitions, 1)
    d = check_int("degree", degree, 1, k)
    if not float(redundancy) >= 1.0:
        raise ValueError(f"redundancy={redundancy} is out of range: allowed >= 1")
    n_tasks = int(round(k * float(redundancy)))
    if n_tasks * d < k:
        raise ValueError(f"degree={d}: {n_tasks} tasks of degree {d} cannot cover {k} partitions; "
                         f"allowed degree >= {-(-k // n_tasks)}")
    rng = np.random.default_rng(seed)
    B = null_space_rows(balanced_supports(n_tasks, k, d, rng), k, k, rng)
    p = decode_probability(B, k, trials, rng)
    params = {"partitions": k, "redundancy": n_tasks / k, "degree": d, "seed": seed,
              "decode_probability": p, "target": target}
    return Code("sparse", B, even_split(n_tasks, n), target, GenericDecoder, params)
