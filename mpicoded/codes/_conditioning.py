"""Conditioning of real-valued codes: how badly can a straggler set make decoding?"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

MAX_SETS = 2000  # erasure sets checked exhaustively up to this many, sampled beyond
WORK = 2e7  # budget of (rows x columns^2) work for the sampled checks of a large code


def erasure_sets(n: int, s: int, rng: np.random.Generator, limit: int = MAX_SETS) -> list[tuple[int, ...]]:
    """Every size-s subset of range(n) when there are at most ``limit``, else samples: ``limit``
    of them, fewer for large codes so the check stays under a second or so."""
    if math.comb(n, s) <= limit:
        return list(itertools.combinations(range(n), s))
    samples = max(100, min(limit, int(WORK / max(1, n - s) ** 3)))
    return [tuple(sorted(rng.choice(n, size=s, replace=False))) for _ in range(samples)]


def worst_condition(B: np.ndarray, sets: list[tuple[int, ...]]) -> float:
    """Largest condition number of B with the rows of any one erasure set removed: every
    set's rows at once, one stacked SVD (a set at a time took 4 s for an 18 x 12 code, which
    a new master pays while its heartbeat waits)."""
    if not sets:
        return float(np.linalg.cond(B))
    keep = np.ones((len(sets), B.shape[0]), dtype=bool)
    keep[np.arange(len(sets))[:, None], np.asarray(sets, dtype=np.intp)] = False
    rows = np.nonzero(keep)[1].reshape(len(sets), -1)  # each set's kept rows, in order
    return float(np.max(np.linalg.cond(B[rows])))


def best_conditioned(draw: Callable[[], np.ndarray], sets: list[tuple[int, ...]],
                     candidates: int = 8) -> tuple[np.ndarray, float]:
    """Draw ``candidates`` matrices and keep the one whose worst erasure set is best conditioned."""
    best, best_cond = None, math.inf
    for _ in range(candidates):
        B = draw()
        cond = worst_condition(B, sets)
        if cond < best_cond:
            best, best_cond = B, cond
    assert best is not None
    return best, best_cond
