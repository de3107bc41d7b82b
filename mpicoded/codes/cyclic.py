"""Cyclic repetition gradient code (Tandon et al., Algorithm 2) with real coefficients."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._base import Code, check_int, one_task_per_worker

_CANDIDATES = 8  # random H matrices tried; the best conditioned one is kept
_MAX_SETS = 2000  # straggler sets checked exhaustively up to this many, sampled beyond


def _cyclic_B(n: int, s: int, rng: np.random.Generator) -> np.ndarray:
    H = rng.standard_normal((s, n))
    H[:, -1] = -H[:, :-1].sum(axis=1)
    B = np.zeros((n, n))
    for w in range(n):
        support = [(w + i) % n for i in range(s + 1)]
        B[w, support[0]] = 1.0
        if s:
            B[w, support[1:]] = np.linalg.solve(H[:, support[1:]], -H[:, support[0]])
    return B


def _straggler_sets(n: int, s: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    if math.comb(n, s) <= _MAX_SETS:
        return list(itertools.combinations(range(n), s))
    return [tuple(rng.choice(n, size=s, replace=False)) for _ in range(_MAX_SETS)]


def worst_condition(B: np.ndarray, sets: list[tuple[int, ...]]) -> float:
    """Largest condition number of B with the rows of any one straggler set removed."""
    n = B.shape[0]
    keep = [np.setdiff1d(np.arange(n), S) for S in sets]
    return max(float(np.linalg.cond(B[rows])) for rows in keep)


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
    sets = _straggler_sets(n, s, rng)
    candidates = [_cyclic_B(n, s, rng) for _ in range(_CANDIDATES if s else 1)]
    conds = [worst_condition(B, sets) for B in candidates]
    best = int(np.argmin(conds))
    params = {"stragglers": s, "seed": seed, "worst_condition": conds[best]}
    return Code("cyclic", candidates[best], one_task_per_worker(n), "sum", params)
