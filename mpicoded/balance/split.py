"""Load splits from the workers' task-time moments: uniform, optimal (paper 000's Theorem 2) with
its continuous check, and the schedule a split makes."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import cast

import numpy as np


@dataclass(frozen=True)
class Moments:
    """Per-worker task-time mean m, variance v and per-iteration communication delay c."""

    m: np.ndarray
    v: np.ndarray
    c: np.ndarray

    def __post_init__(self) -> None:
        for name in ("m", "v", "c"):
            arr = np.asarray(getattr(self, name), dtype=np.float64)
            object.__setattr__(self, name, arr)
        if not (self.m.shape == self.v.shape == self.c.shape and self.m.ndim == 1):
            raise ValueError("m, v and c must be 1-D arrays of one length (one value a worker)")
        if not (np.all(self.m > 0) and np.all(self.v >= 0) and np.all(self.c >= 0)):
            raise ValueError("moments must have m > 0, v >= 0 and c >= 0 for every worker")

    @property
    def n_workers(self) -> int:
        return len(self.m)


def uniform_split(n_tasks: int, n_workers: int) -> np.ndarray:
    """n_tasks / n_workers each, rounded so the loads differ by at most one and sum to n_tasks."""
    base, extra = divmod(n_tasks, n_workers)
    return np.array([base + (w < extra) for w in range(n_workers)])


def finish_level(moments: Moments, loads: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    """D_p(κ_p) for every worker (0 for a worker with no tasks)."""
    k = np.asarray(loads, dtype=np.float64)
    level = moments.c + k * moments.m + gamma * np.sqrt(k * moments.v)
    return np.where(k > 0, level, 0.0)


def optimal_split(n_tasks: int, moments: Moments, gamma: float = 1.0) -> np.ndarray:
    """Integer split minimising the largest D_p: greedy, one task at a time (a heap).

    Worker p's time for κ tasks is c_p plus a sum of κ task times: mean c_p + κ m_p, variance
    κ v_p. The optimal split equalises D_p(κ) = c_p + κ m_p + γ sqrt(κ v_p) over the workers it
    uses (the paper's Theorem 2 with γ = 1; its formula is missing from the text;
    docs/architecture.md restates it). Giving the tasks one at a time to the worker whose
    D_p(κ_p + 1) is smallest minimises the largest D_p exactly; a worker whose c_p alone exceeds
    the level gets none. The continuous solution (level τ with Σ κ_p(τ) = KΩ, by bisection:
    ``continuous_split``) is its check.
    """
    if n_tasks < 0:
        raise ValueError(f"n_tasks={n_tasks} is out of range: allowed >= 0")
    m, v, c = moments.m, moments.v, moments.c
    loads = np.zeros(moments.n_workers, dtype=int)

    def next_level(p: int) -> float:
        k = loads[p] + 1
        return float(c[p] + k * m[p] + gamma * math.sqrt(k * v[p]))

    heap = [(next_level(p), p) for p in range(moments.n_workers)]
    heapq.heapify(heap)
    for _ in range(n_tasks):
        _, p = heapq.heappop(heap)
        loads[p] += 1
        heapq.heappush(heap, (next_level(p), p))
    return loads


def continuous_split(n_tasks: float, moments: Moments, gamma: float = 1.0) -> tuple[np.ndarray, float]:
    """Real-valued loads κ_p(τ) at the level τ where they sum to n_tasks, and τ (bisection).

    κ_p(τ) solves c_p + κ m_p + γ sqrt(κ v_p) = τ: a quadratic in sqrt(κ); 0 when τ <= c_p.
    """
    m, v, c = moments.m, moments.v, moments.c

    def loads_at(tau: float) -> np.ndarray:
        b = gamma * np.sqrt(v)
        room = np.maximum(tau - c, 0.0)
        root = (-b + np.sqrt(b * b + 4 * m * room)) / (2 * m)
        return cast(np.ndarray, root * root)

    low, high = 0.0, float(np.max(c) + n_tasks * np.max(m) + gamma * math.sqrt(n_tasks * np.max(v)))
    for _ in range(200):
        mid = 0.5 * (low + high)
        if loads_at(mid).sum() < n_tasks:
            low = mid
        else:
            high = mid
    return loads_at(high), high


def mismatch(moments: Moments, loads: np.ndarray, gamma: float = 1.0) -> float:
    """Variance of D_p over the workers that have tasks (0 when they all finish together)."""
    used = np.asarray(loads) > 0
    return float(np.var(finish_level(moments, loads, gamma)[used])) if used.any() else 0.0


def split_schedule(loads: np.ndarray, n_tasks: int | None = None) -> tuple[tuple[int, ...], ...]:
    """Worker p runs the next loads[p] task ids, in order: contiguous runs of 0..Σ loads - 1."""
    total = int(np.sum(loads))
    if n_tasks is not None and total != n_tasks:
        raise ValueError(f"loads sum to {total}, not to the {n_tasks} tasks")
    edges = np.concatenate([[0], np.cumsum(loads)])
    return tuple(tuple(range(int(a), int(b))) for a, b in zip(edges[:-1], edges[1:], strict=True))
