"""Injected delay models, drawn from a random stream keyed by (seed, worker, job, iteration, task).

Keying every draw makes runs comparable: two codes run under one seed meet the same slow and fast
workers, so a comparison between them is paired rather than luck. Delays are in model time units;
``time_scale`` (seconds per unit) turns them into the wall-clock sleep a worker serves.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

DELAY_MODELS = ("none", "seed001", "seed000", "persistent", "compute")
# paper 000, Section VI: 20 workers, mu_p = 1, 2, 4, 8 and c_p = 2, 1, 0.5, 0.25, five of each
PAPER000_PROFILE: tuple[tuple[float, float], ...] = tuple(
    (mu, c) for mu, c in ((1, 2.0), (2, 1.0), (4, 0.5), (8, 0.25)) for _ in range(5))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection on uint64 that scrambles every bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return cast(np.ndarray, x ^ (x >> np.uint64(31)))


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
    return cast(np.ndarray, ((x >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53)


_MOVES: dict[tuple[int, int, int], list[int]] = {}  # (seed, n, job) -> choices of blocks 0..


def moving_choice(seed: int, n: int, job: int, block: int) -> int:
    """Which of ``n`` workers is the moving straggler in ``block`` (of iterations or of seconds):
    a seeded random one, never the one of the block before."""
    chain = _MOVES.setdefault((seed, n, job), [])
    while len(chain) <= block:
        previous = chain[-1] if chain else -1
        u = float(keyed_uniform(seed, 7919, job, len(chain)))
        pick = int(u * (n - (previous >= 0))) if n > 1 else 0
        chain.append(pick + (0 <= previous <= pick) if n > 1 else 0)
    return chain[block]


@dataclass(frozen=True)
class DelayModel:
    """How long a task of ``units`` work units takes, in model time, on top of the real compute.

    - ``none``: no injected delay.
    - ``seed001``: each worker draws E ~ Exp(mean 1/mu) once per iteration; each unit of work takes
      alpha + E (paper 001, Section 4.1: mu = 10, alpha = 0.01).
    - ``seed000``: worker p's i-th task of an iteration takes T ~ Exp(rate mu_p / C), after a
      communication delay c_p once per iteration (paper 000, Section VI); (mu_p, c_p) come from
      ``profile`` and C is ``complexity``. A task's work is in C, so ``units`` are not used.
    - ``persistent``: each unit takes ``task_time``; workers in ``slow`` take ``slow_factor`` times
      longer, in every iteration from ``slow_from`` on (so a worker can slow down mid-run). With
      ``slow_every`` K, the slow worker moves instead: every K iterations a different seeded
      random one of the ``n_workers`` (``moving_choice``), ``slow`` being ignored.
    - ``compute``: nothing is slept; the workers in ``slow`` (from ``slow_from`` on) really compute
      every task ``slow_factor`` times over, burning CPU like a slow machine (``compute_factor``).

    Draws are keyed by (seed, worker, job, iteration) and, for seed000, the task's slot (its
    position in the worker's list), so a draw exists for every slot a worker could run.
    """

    kind: str = "none"
    seed: int = 0
    mu: float = 10.0
    alpha: float = 0.01
    task_time: float = 0.01
    slow: frozenset[int] = frozenset()
    slow_factor: float = 10.0
    time_scale: float = 1.0
    profile: tuple[tuple[float, float], ...] = ()
    complexity: float = 1.0
    slow_from: int = 0
    slow_every: int = 0  # persistent, compute: a moving slow worker, changing every K iterations
    n_workers: int = 0  # of which the moving one is drawn

    def __post_init__(self) -> None:
        if self.kind not in DELAY_MODELS:
            raise ValueError(f"delay={self.kind!r} is unknown: allowed {list(DELAY_MODELS)}")
        for name in ("mu", "time_scale", "slow_factor"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)} is out of range: allowed > 0")
        for name in ("alpha", "task_time"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}={getattr(self, name)} is out of range: allowed >= 0")
        if self.slow_every < 0 or (self.slow_every and self.n_workers < 1):
            raise ValueError(f"slow_every={self.slow_every} is out of range: allowed >= 0, with "
                             "the workers' count known")
        if self.kind == "compute" and not self.slow_factor >= 1:
            raise ValueError(f"slow_factor={self.slow_factor} is out of range for delay compute: "
                             "allowed >= 1 (a slow worker computes its tasks that many times)")
        if self.kind == "seed000":
            if not self.profile:
                raise ValueError("delay seed000 needs a heterogeneity profile (--profile)")
            if not self.complexity > 0:
                raise ValueError(f"complexity={self.complexity} is out of range: allowed > 0")

    @property
    def sleeps(self) -> bool:
        """Whether tasks get an injected delay slept on top of their compute."""
        return self.kind not in ("none", "compute")

    @property
    def rates(self) -> np.ndarray:
        """seed000: each worker's task rate mu_p / C."""
        return np.array([mu for mu, _ in self.profile]) / self.complexity

    def iteration_shifts(self, workers: np.ndarray) -> np.ndarray:
        """Model-time delay before a worker's first task of an iteration (seed000's c_p)."""
        workers = np.asarray(workers)
        if self.kind != "seed000":
            return np.zeros(workers.shape)
        return cast(np.ndarray, np.array([c for _, c in self.profile])[workers])

    def task_delays(self, workers: np.ndarray, job: int, iteration: int, slots: np.ndarray,
                    units: np.ndarray) -> np.ndarray:
        """Model-time delays of many tasks at once (arrays of equal length); ``slots`` are the
        tasks' positions in their workers' lists."""
        workers = np.asarray(workers)
        units = np.asarray(units, dtype=np.float64)
        if self.kind in ("none", "compute"):
            return np.zeros(units.shape)
        if self.kind == "seed001":  # one E ~ Exp(mean 1/mu) per worker and iteration
            shift = -np.log(keyed_uniform(self.seed, workers, job, iteration)) / self.mu
            return cast(np.ndarray, units * (self.alpha + shift))
        if self.kind == "seed000":
            u = keyed_uniform(self.seed, workers, job, iteration, np.asarray(slots))
            return cast(np.ndarray, -np.log(u) / self.rates[workers])
        slow = self.slow_mask(workers, job, iteration)
        return units * self.task_time * np.where(slow, self.slow_factor, 1.0)

    def slow_mask(self, workers: np.ndarray, job: int, iteration: int) -> np.ndarray:
        """Which of ``workers`` are slow in (job, iteration): ``slow``, or the moving one."""
        workers = np.asarray(workers)
        if iteration < self.slow_from:
            return np.zeros(workers.shape, dtype=bool)
        if self.slow_every:
            block = (iteration - self.slow_from) // self.slow_every
            return cast(np.ndarray, workers == moving_choice(self.seed, self.n_workers, job, block))
        return np.isin(workers, list(self.slow))

    def task_delay(self, worker: int, job: int, iteration: int, slot: int, units: float) -> float:
        """Model-time delay of one task of ``units`` work units, ``slot``-th of ``worker``."""
        return float(self.task_delays(np.array([worker]), job, iteration, np.array([slot]),
                                      np.array([units]))[0])

    def compute_factor(self, worker: int, iteration: int, job: int = 0) -> float:
        """How many times over ``worker`` computes its tasks in ``iteration`` (``compute`` model)."""
        if self.kind == "compute" and bool(self.slow_mask(np.array(worker), job, iteration)):
            return self.slow_factor
        return 1.0

    def seconds(self, model_time: float) -> float:
        """Wall-clock seconds for a model-time delay."""
        return model_time * self.time_scale

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary for metrics."""
        out: dict[str, Any] = {"delay": self.kind, "seed": self.seed, "time_scale": self.time_scale}
        if self.kind == "seed001":
            out |= {"mu": self.mu, "alpha": self.alpha}
        elif self.kind == "seed000":
            out |= {"profile": [list(p) for p in self.profile], "complexity": self.complexity}
        elif self.kind in ("persistent", "compute"):
            if self.kind == "persistent":
                out["task_time"] = self.task_time
            # MPI ranks, as --slow-workers takes them (``slow`` holds code workers: rank - 1)
            out |= {"slow_workers": sorted(w + 1 for w in self.slow), "slow_factor": self.slow_factor,
                    "slow_from": self.slow_from, "slow_every": self.slow_every}
        return out



def load_profile(spec: str, n_workers: int) -> tuple[tuple[float, float], ...]:
    """A heterogeneity profile: ``paper000``, or a .json / .toml file listing (mu, c) per worker.

    JSON: ``[{"mu": 1, "c": 2}, ...]``; TOML: ``[[worker]]`` tables with ``mu`` and ``c``.
    """
    if spec == "paper000":
        profile = PAPER000_PROFILE
    else:
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"profile {spec}: no such file (or use the built-in 'paper000')")
        try:
            if path.suffix == ".json":
                entries = json.loads(path.read_text())
            elif path.suffix == ".toml":
                if sys.version_info >= (3, 11):
                    import tomllib
                else:  # the same parser, from PyPI (a dependency on 3.10)
                    import tomli as tomllib

                entries = tomllib.loads(path.read_text()).get("worker", [])
            else:
                raise ValueError(f"profile {spec}: unknown format {path.suffix!r}: allowed .json, .toml")
            profile = tuple((float(e["mu"]), float(e.get("c", 0.0))) for e in entries)
        except (KeyError, TypeError, ValueError, ImportError) as exc:
            if isinstance(exc, ValueError) and str(exc).startswith("profile "):
                raise
            raise ValueError(f"profile {spec}: needs a list of entries with 'mu' (and 'c'): "
                             f"{exc}") from None
    if len(profile) != n_workers:
        raise ValueError(f"profile {spec} describes {len(profile)} workers, the run has {n_workers}")
    if not all(mu > 0 and c >= 0 for mu, c in profile):
        raise ValueError(f"profile {spec}: every worker needs mu > 0 and c >= 0")
    return profile
