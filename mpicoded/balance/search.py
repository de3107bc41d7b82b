"""Paper 000's Algorithm 1: code parameters (K, C, Ω) searched, each with its optimal split."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .split import Moments, finish_level, mismatch, optimal_split


@dataclass
class Candidate:
    """One (K, C, Ω) of the code-parameter search with its optimal split."""

    partitions: int
    complexity: float
    redundancy: float
    loads: np.ndarray
    mismatch: float
    level: float
    expected_iteration: float | None = None


def parameter_search(work: float, mu: np.ndarray, c: np.ndarray,
                     partitions: list[int], redundancies: list[float], gamma: float = 1.0,
                     simulate_iteration: Callable[[Candidate], float] | None = None
                     ) -> list[Candidate]:
    """Algorithm 1: over (K, C = work / K, Ω), the optimal split and its mismatch, best first.

    Task times are exponential with rate μ_p / C, so m_p = C / μ_p and v_p = m_p². If given,
    ``simulate_iteration(candidate)`` adds the simulator's expected iteration time beside each.
    """
    mu = np.asarray(mu, dtype=np.float64)
    out = []
    for k in partitions:
        complexity = work / k
        moments = Moments(complexity / mu, (complexity / mu) ** 2, np.asarray(c, dtype=float))
        for omega in redundancies:
            n_tasks = int(round(k * omega))
            loads = optimal_split(n_tasks, moments, gamma)
            level = float(finish_level(moments, loads, gamma).max())
            cand = Candidate(k, complexity, omega, loads, mismatch(moments, loads, gamma), level)
            if simulate_iteration is not None:
                cand.expected_iteration = simulate_iteration(cand)
            out.append(cand)
    return sorted(out, key=lambda cand: cand.mismatch)
