"""Code and Decoder: the contract every coding scheme meets (pure numpy, no MPI)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

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


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not allowed: allowed {list(TARGETS)}")
    return target


def total(values: Iterable[np.ndarray]) -> np.ndarray:
    """The sum of ``values`` in float64 (float32 ones widened as they are added), one pass over
    each and no stacked copy of them all (a result may be megabytes)."""
    items = list(values)
    return combined(dict.fromkeys(range(len(items)), 1.0), items.__getitem__)


def combined(coefficients: Mapping[int, float], value: Callable[[int], np.ndarray]) -> np.ndarray:
    """``sum coefficient * value(key)`` in float64, one pass over each value."""
    out: np.ndarray | None = None
    for key, coef in coefficients.items():
        v = value(key)
        if out is None:
            out = np.array(v, dtype=np.float64)
            if coef != 1.0:
                out *= coef
        elif coef == 1.0:
            out += v
        else:
            out += coef * np.asarray(v, dtype=np.float64)
    if out is None:
        raise ValueError("a combination of no results")
    return out


class Decoder:
    """Incremental decoder for one iteration: feed results as they arrive, ask when ready.

    ``add(task)`` works from ids alone (simulation); ``add(task, value)`` keeps the value so that
    ``result()`` can return the decoded target. Duplicate task ids, and results after the decoder
    is ready, are ignored. With ``tolerance`` m the decoder is ready once all but m partitions are
    recoverable; ``missing_partitions`` then names the ones left out.
    """

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        self.code = code
        self.tolerance = check_int("tolerance", tolerance, 0, code.n_partitions)
        self.tasks: list[int] = []
        self.values: dict[int, np.ndarray] = {}
        self._seen: set[int] = set()
        self.ready = False

    def add(self, task: int, value: np.ndarray | None = None) -> bool:
        """Record one finished task; returns True once the target is recoverable."""
        task = int(task)
        if not 0 <= task < self.code.n_tasks:
            raise ValueError(f"task={task} is out of range: allowed [0, {self.code.n_tasks - 1}]")
        if self.ready or task in self._seen:
            return self.ready
        self._seen.add(task)
        self.tasks.append(task)
        if value is not None:  # kept as it came (float32 where results travel so)
            self.values[task] = np.asarray(value)
        self.ready = self._update(task)
        return self.ready

    def add_run(self, tasks: list[int], value: np.ndarray | None) -> bool:
        """Record pieces computed as one sum, ``value`` (None: ids alone); only decoders of
        pieces can."""
        if len(tasks) == 1:
            return self.add(tasks[0], value)
        raise ValueError(f"{type(self).__name__} decodes a value a task, not runs of pieces")

    def needs(self, task: int) -> bool:
        """Whether the result of ``task`` could still count: not received yet (nor, for pieces
        of coded blocks, its row range decoded already)."""
        return task not in self._seen

    def needed(self, tasks: list[int]) -> list[int]:
        """Those of ``tasks`` whose results could still count (``needs``), in order."""
        seen = self._seen
        return [t for t in tasks if t not in seen]

    @property
    def seen(self) -> set[int]:
        """The task ids received so far (read-only: the decoder's own set)."""
        return self._seen

    @property
    def used(self) -> set[int]:
        """The tasks whose results the decoded value combines (so far, before it is ready)."""
        return set(self.tasks)

    @property
    def results_used(self) -> int:
        """Results the decoded value combines."""
        return len(self.used)

    def _update(self, task: int) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def missing_partitions(self) -> np.ndarray:
        """Indices of partitions the decoded result leaves out (empty for an exact decode)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def could_finish(self, held: set[int]) -> bool:
        """Partial work: whether workers holding the blocks ``held`` (partitions, or coded
        tasks) could still complete the decode; only decoders of pieces can tell."""
        raise NotImplementedError(f"{type(self).__name__} decodes whole tasks, not pieces")

    def result(self) -> np.ndarray:
        """The decoded target: the sum over partitions, or one row per partition (NaN if missed)."""
        if not self.ready:
            raise RuntimeError("decoder is not ready: the results so far do not determine the target")
        return self._result()

    def _result(self) -> np.ndarray:
        """A sum target: the combination of the values kept (``combination``), added in the
        order of their task ids, so that the bits do not depend on the order results arrived
        in (a run is reproducible); a decoder of ``each`` defines its own."""
        return combined(dict(sorted(self.combination().items())), self.value)

    def combination(self) -> dict[int, float]:
        """Target ``sum``, once ready: the coefficient of each received task's value in the
        decoded sum (tasks not named count zero). From ids alone: the workers that hold the
        values can form the sum among themselves, rank 0 naming the coefficients."""
        raise NotImplementedError(f"{type(self).__name__} decodes no sum")  # pragma: no cover

    def value(self, task: int) -> np.ndarray:
        """The value of a received task (for ``_result``)."""
        if task not in self.values:
            raise RuntimeError("result() needs values: call add(task, value) for every task")
        return self.values[task]


@dataclass
class Code:
    """A coding scheme: encoding matrix B, the per-worker schedule of tasks, target and decoder.

    ``B[t, j]`` is the coefficient of partition j in task t; ``schedule[w]`` the task ids worker w
    runs, in order (several workers may share a task id when they compute the same row).
    ``messages`` is ``"multi"`` (a result is sent the moment a task is done) or ``"single"`` (one
    message per worker after all its tasks). ``decoder_cls`` decodes one iteration.
    """

    name: str
    B: np.ndarray
    schedule: tuple[tuple[int, ...], ...]
    target: str
    decoder_cls: type[Decoder]
    params: dict[str, Any] = field(default_factory=dict)
    messages: str = "multi"
    built_with: dict[str, Any] = field(default_factory=dict)  # the parameters make_code was given

    def __post_init__(self) -> None:
        self.B = np.asarray(self.B, dtype=np.float64)
        if self.B.ndim != 2:
            raise ValueError(f"B must be a 2-D matrix, got shape {self.B.shape}")
        check_target(self.target)
        self.schedule = tuple(tuple(int(t) for t in tasks) for tasks in self.schedule)
        for w, tasks in enumerate(self.schedule):
            bad = [t for t in tasks if not 0 <= t < self.n_tasks]
            if bad:
                raise ValueError(f"schedule[{w}] names tasks {bad} outside [0, {self.n_tasks - 1}]")

    @property
    def n_tasks(self) -> int:
        return int(self.B.shape[0])

    @property
    def n_partitions(self) -> int:
        return int(self.B.shape[1])

    @property
    def n_workers(self) -> int:
        return len(self.schedule)

    @property
    def work_units(self) -> np.ndarray:
        """Each task's work in units of a 1/n share of the data (one partition where there are
        as many as workers): injected delays are per unit, so a code that cuts the data finer
        pays per row computed, not per partition."""
        units: np.ndarray = np.count_nonzero(self.B, axis=1) * (self.n_workers / self.n_partitions)
        return units

    @cached_property
    def supports(self) -> list[np.ndarray]:
        """supports[t]: the partitions task t touches (cached: decoders read it every iteration)."""
        return [np.flatnonzero(row) for row in self.B]

    @property
    def result_fraction(self) -> float:
        """Size of one result relative to the full target (paper 001's unit of volume)."""
        return 1.0 if self.target == "sum" else 1.0 / self.n_partitions

    @property
    def loads(self) -> list[int]:
        """Tasks each worker runs."""
        return [len(tasks) for tasks in self.schedule]

    def decoder(self, tolerance: int = 0) -> Decoder:
        """A fresh decoder for one iteration."""
        return self.decoder_cls(self, tolerance)

    def describe(self) -> dict[str, Any]:
        """A JSON-able summary for metrics and logs."""
        return {
            "name": self.name,
            "n_workers": self.n_workers,
            "n_tasks": self.n_tasks,
            "n_partitions": self.n_partitions,
            "target": self.target,
            "messages": self.messages,
            "decoder": self.decoder_cls.__name__,
            **{k: v for k, v in self.params.items() if isinstance(v, (int, float, str))},
        }


def one_task_per_worker(n_workers: int) -> tuple[tuple[int, ...], ...]:
    """The schedule of gradient codes where worker w runs task w alone."""
    return tuple((w,) for w in range(n_workers))


def even_split(n_tasks: int, n_workers: int) -> tuple[tuple[int, ...], ...]:
    """Tasks dealt to workers in contiguous runs whose lengths differ by at most one."""
    return tuple(tuple(int(t) for t in run) for run in np.array_split(np.arange(n_tasks), n_workers))
