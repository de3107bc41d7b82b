"""Injected delay models, drawn from a random stream keyed by (seed, worker, job, iteration, task).

Keying every draw makes runs comparable: two codes run under one seed meet the same slow and fast
workers, so a comparison between them is paired rather than luck. Delays are in model time units;
``time_scale`` (seconds per unit) turns them into the wall-clock sleep a worker serves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DELAY_MODELS = ("none", "seed001", "persistent")


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection on uint64 that scrambles every bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def keyed_uniform(seed: int, *key: np.ndarray | int) -> np.ndarray:
    """Uniform numbers in (0, 1) determined by ``seed`` and the integer key alone.

    A counter-based stream: each key component is folded in through SplitMix64, so a draw does
    not depend on call order and whole arrays of keys are drawn at once (the simulator draws a
    whole iteration in one call, the runtime one task at a time, and both get the same numbers).
    """
    with np.errstate(over="ignore"):
        x = _mix(np.asarray(seed, dtype=np.int64).astype(np.uint64) + _GOLDEN)
        for part in key:
            x = _mix(x ^ (np.asarray(part, dtype=np.int64).astype(np.uint64) * _GOLDEN + _GOLDEN))
    return ((x >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53


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

    def task_delays(self, workers: np.ndarray, job: int, iteration: int, tasks: np.ndarray,
                    units: np.ndarray) -> np.ndarray:
        """Model-time delays of many tasks at once (arrays of equal length)."""
        workers = np.asarray(workers)
        units = np.asarray(units, dtype=np.float64)
        if self.kind == "none":
            return np.zeros(units.shape)
        if self.kind == "seed001":  # one E ~ Exp(mean 1/mu) per worker and iteration
            shift = -np.log(keyed_uniform(self.seed, workers, job, iteration)) / self.mu
            return units * (self.alpha + shift)
        slow = np.isin(workers, list(self.slow))
        return units * self.task_time * np.where(slow, self.slow_factor, 1.0)

    def task_delay(self, worker: int, job: int, iteration: int, task: int, units: float) -> float:
        """Model-time delay of one task of ``units`` work units run by ``worker``."""
        return float(self.task_delays(np.array([worker]), job, iteration, np.array([task]),
                                      np.array([units]))[0])

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

