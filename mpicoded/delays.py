"""Injected delay models, drawn from a random stream keyed by (seed, worker, job, iteration, task).

Keying every draw makes runs comparable: two codes run under one seed meet the same slow and fast
workers, so a comparison between them is paired rather than luck. Delays are in model time units;
``time_scale`` (seconds per unit) turns them into the wall-clock sleep a worker serves.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

DELAY_MODELS = ("none", "seed001", "persistent")


def keyed_rng(seed: int, *key: int) -> np.random.Generator:
    """A generator determined by ``seed`` and the integer key alone, independent of call order."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, *key])))


@dataclass(frozen=True)
class DelayModel:
    """How long a task of ``units`` work units takes, in model time, on top of the real compute.

    - ``none``: no injected delay.
    - ``seed001``: each worker draws E ~ Exp(mean 1/mu) once per iteration; each unit of work takes
      alpha + E (paper 001, Section 4.1: mu = 10, alpha = 0.01).
    - ``persistent``: each unit takes ``task_time``; workers in ``slow`` take ``slow_factor`` times
      longer, every iteration.
    """

    kind: str = "none"
    seed: int = 0
    mu: float = 10.0
    alpha: float = 0.01
    task_time: float = 0.01
    slow: frozenset[int] = frozenset()
    slow_factor: float = 10.0
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in DELAY_MODELS:
            raise ValueError(f"delay={self.kind!r} is unknown: allowed {list(DELAY_MODELS)}")
        for name in ("mu", "time_scale", "slow_factor"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} is out of range: allowed > 0")
        for name in ("alpha", "task_time"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}={getattr(self, name)} is out of range: allowed >= 0")

    def task_delay(self, worker: int, job: int, iteration: int, task: int, units: float) -> float:
        """Model-time delay of one task of ``units`` work units run by ``worker``."""
        if self.kind == "none":
            return 0.0
        if self.kind == "seed001":
            shift = keyed_rng(self.seed, worker, job, iteration).exponential(1.0 / self.mu)
            return units * (self.alpha + shift)
        factor = self.slow_factor if worker in self.slow else 1.0
        return units * self.task_time * factor

    def seconds(self, model_time: float) -> float:
        """Wall-clock seconds for a model-time delay."""
        return model_time * self.time_scale

    def describe(self) -> dict:
        """A JSON-able summary for metrics."""
        out: dict = {"delay": self.kind, "seed": self.seed, "time_scale": self.time_scale}
        if self.kind == "seed001":
            out |= {"mu": self.mu, "alpha": self.alpha}
        elif self.kind == "persistent":
            out |= {"task_time": self.task_time, "slow_workers": sorted(self.slow),
                    "slow_factor": self.slow_factor}
        return out


def worker_set(workers: Iterable[int], n_workers: int, name: str = "slow_workers") -> frozenset:
    """Validate worker indices (0-based) against ``n_workers``."""
    out = frozenset(int(w) for w in workers)
    bad = sorted(w for w in out if not 0 <= w < n_workers)
    if bad:
        raise ValueError(f"{name} {bad} out of range: allowed [0, {n_workers - 1}]")
    return out
