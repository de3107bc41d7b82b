"""Cyclic repetition gradient code (Tandon et al., Algorithm 2) with real coefficients."""

from __future__ import annotations

import numpy as np

from ._base import Code, check_int, one_task_per_worker
from ._conditioning import best_conditioned, erasure_sets
from .decoders import GenericDecoder


def null_space_rows(supports: list[np.ndarray], n_columns: int, dim: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Rows with the given supports inside the null space of a random H with H·1 = 0.

    That null space has dimension ``dim`` and holds the all-ones vector, so any ``dim``
    independent rows span it and give the sum. A support of d entries has d - (n_columns - dim)
    free coefficients (the first is 1, the rest random) and the others solve H·row = 0.
    """
    constraints = n_columns - dim
    H = rng.standard_normal((constraints, n_columns))
    if constraints:
        H[:, -1] = -H[:, :-1].sum(axis=1)
    B = np.zeros((len(supports), n_columns))
    for t, support in enumerate(supports):
        free, solved = support[: len(support) - constraints], support[len(support) - constraints :]
        B[t, free] = np.concatenate([[1.0], rng.standard_normal(len(free) - 1)])
        if constraints:
            B[t, solved] = np.linalg.solve(H[:, solved], -H[:, free] @ B[t, free])
    return B


def make_cyclic(n_workers: int, stragglers: int = 1, seed: int = 0) -> Code:
    """Worker w computes partitions w, w+1, ..., w+s (mod n); any n - s results give the sum.

    Every row of B lies in the null space of a random H (s x n) with H·1 = 0. Any n - s rows are
    independent with probability one, so they span that (n - s)-dimensional space, which holds 1.
    A random H can still be badly conditioned, so several are drawn and the one whose worst
    straggler set (exhaustive up to 2000 sets, sampled beyond) is best conditioned is kept.
    """
    n = check_int("n_workers", n_workers, 1)
    s = check_int("stragglers", stragglers, 0, n - 1)
    rng = np.random.default_rng(seed)
    supports = [np.array([(w + i) % n for i in range(s + 1)]) for w in range(n)]
    sets = erasure_sets(n, s, rng)
    B, cond = best_conditioned(lambda: null_space_rows(supports, n, n - s, rng), sets,
                               candidates=8 if s else 1)
    params = {"stragglers": s, "seed": seed, "worst_condition": cond}
    return Code("cyclic", B, one_task_per_worker(n), "sum", GenericDecoder, params)
