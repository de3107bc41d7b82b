"""Code and Decoder: the contract every coding scheme meets (pure numpy, no MPI)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

TARGETS = ("sum", "each")


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """Validate an integer parameter, raising ValueError naming it and its allowed range."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name}={value} is out of range: allowed {allowed}")
    return value


class Decoder:
    """Incremental decoder for one iteration: feed results as they arrive, ask when ready.

    ``add(task)`` works from ids alone (simulation); ``add(task, value)`` keeps the value so that
    ``result()`` can return the decoded target. Duplicate task ids are ignored.
    """

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        self.code = code
        self.tolerance = check_int("tolerance", tolerance, 0, code.n_partitions)
        self.tasks: list[int] = []
        self.values: list[np.ndarray] = []
        self._seen: set[int] = set()
        self.ready = False

    def add(self, task: int, value: np.ndarray | None = None) -> bool:
        """Record one finished task; returns True once the target is recoverable."""
        task = int(task)
        if not 0 <= task < self.code.n_tasks:
            raise ValueError(f"task={task} is out of range: allowed [0, {self.code.n_tasks - 1}]")
        if task in self._seen or self.ready:
            return self.ready
        self._seen.add(task)
        self.tasks.append(task)
        if value is not None:
            self.values.append(np.asarray(value, dtype=np.float64))
        self.ready = self._update(task)
        return self.ready

    @property
    def results_used(self) -> int:
        """Results the decoder consumed (those that arrived up to the moment it became ready)."""
        return len(self.tasks)

    def _update(self, task: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def missing_partitions(self) -> np.ndarray:
        """Indices of partitions the decoded result leaves out (empty for an exact decode)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def result(self) -> np.ndarray:
        """The decoded target: the sum over partitions, or one row per partition (NaN if missed)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def _values_for_result(self) -> np.ndarray:
        if not self.ready:
            raise RuntimeError("decoder is not ready: the results so far do not determine the target")
        if len(self.values) != len(self.tasks):
            raise RuntimeError("result() needs values: call add(task, value) for every task")
        return np.stack(self.values)


class GenericDecoder(Decoder):
    """Works for any B: keeps an orthonormal basis of the received rows' span.

    Target ``sum`` is recoverable once the all-ones vector lies in that span; partition j of
    target ``each`` once e_j does (its row of the basis has unit norm). Values are combined by a
    least-squares solve once, at ``result()``.
    """

    _TOL = 1e-9

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        if code.target == "sum" and self.tolerance:
            raise ValueError(
                "tolerance > 0 needs a target 'each' code or a structured decoder; "
                f"{code.name} decodes a sum with the generic decoder, allowed tolerance 0"
            )
        k = code.n_partitions
        self._basis = np.zeros((k, 0))
        self._ones = np.ones(k) / np.sqrt(k)

    def _update(self, task: int) -> bool:
        row = self.code.B[task].astype(np.float64)
        for _ in range(2):  # re-orthogonalise once for stability
            row = row - self._basis @ (self._basis.T @ row)
        norm = np.linalg.norm(row)
        if norm > self._TOL * max(1.0, np.linalg.norm(self.code.B[task])):
            self._basis = np.column_stack([self._basis, row / norm])
        return len(self.missing_partitions) <= self.tolerance if self.code.target == "each" else (
            np.linalg.norm(self._ones - self._basis @ (self._basis.T @ self._ones)) < 1e-7
        )

    @property
    def missing_partitions(self) -> np.ndarray:
        if self.code.target == "sum":  # a sum is all or nothing here (tolerance 0)
            return np.arange(self.code.n_partitions) if not self.ready else np.arange(0)
        norms = np.einsum("ij,ij->i", self._basis, self._basis)
        return np.flatnonzero(norms < 1.0 - 1e-7)

    def result(self) -> np.ndarray:
        values = self._values_for_result()
        rows = self.code.B[self.tasks].astype(np.float64)
        flat = values.reshape(len(values), -1)
        if self.code.target == "sum":
            coef = np.linalg.lstsq(rows.T, np.ones(self.code.n_partitions), rcond=None)[0]
            return (coef @ flat).reshape(values.shape[1:])
        each = np.linalg.lstsq(rows, flat, rcond=None)[0]
        each[self.missing_partitions] = np.nan
        return each.reshape((self.code.n_partitions, *values.shape[1:]))


@dataclass
class Code:
    """A coding scheme: encoding matrix B, the per-worker schedule of tasks, target and decoder.

    ``B[t, j]`` is the coefficient of partition j in task t; ``schedule[w]`` the task ids worker w
    runs, in order. ``messages`` is ``"multi"`` (a result is sent the moment a task is done) or
    ``"single"`` (one message per worker after all its tasks).
    """

    name: str
    B: np.ndarray
    schedule: tuple[tuple[int, ...], ...]
    target: str
    params: dict = field(default_factory=dict)
    messages: str = "multi"

    def __post_init__(self) -> None:
        self.B = np.asarray(self.B, dtype=np.float64)
        if self.B.ndim != 2:
            raise ValueError(f"B must be a 2-D matrix, got shape {self.B.shape}")
        if self.target not in TARGETS:
            raise ValueError(f"target={self.target!r} is not allowed: allowed {TARGETS}")
        self.schedule = tuple(tuple(int(t) for t in tasks) for tasks in self.schedule)
        for w, tasks in enumerate(self.schedule):
            bad = [t for t in tasks if not 0 <= t < self.n_tasks]
            if bad:
                raise ValueError(f"schedule[{w}] names tasks {bad} outside [0, {self.n_tasks - 1}]")

    @property
    def n_tasks(self) -> int:
        return self.B.shape[0]

    @property
    def n_partitions(self) -> int:
        return self.B.shape[1]

    @property
    def n_workers(self) -> int:
        return len(self.schedule)

    @property
    def support(self) -> list[np.ndarray]:
        """support[t]: the partitions task t touches."""
        return [np.flatnonzero(row) for row in self.B]

    @property
    def task_cost(self) -> np.ndarray:
        """Work units of each task: a coded gradient over d partitions costs d, a coded block 1."""
        if self.target == "sum":
            return np.count_nonzero(self.B, axis=1).astype(np.float64)
        return np.ones(self.n_tasks)

    @property
    def result_fraction(self) -> float:
        """Size of one result relative to the full target (paper 001's unit of volume)."""
        return 1.0 if self.target == "sum" else 1.0 / self.n_partitions

    def decoder(self, tolerance: int = 0) -> Decoder:
        """A fresh decoder for one iteration."""
        return GenericDecoder(self, tolerance)

    def describe(self) -> dict:
        """A JSON-able summary for metrics and logs."""
        return {
            "name": self.name,
            "n_workers": self.n_workers,
            "n_tasks": self.n_tasks,
            "n_partitions": self.n_partitions,
            "target": self.target,
            "messages": self.messages,
            **{k: v for k, v in self.params.items() if isinstance(v, (int, float, str))},
        }


def one_task_per_worker(n_workers: int) -> tuple[tuple[int, ...], ...]:
    """The schedule of gradient codes where worker w runs task w alone."""
    return tuple((w,) for w in range(n_workers))
