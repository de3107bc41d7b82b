"""``Coded``, what the master needs of a job under a code: which data each task needs, how it is
computed and how a decoded target becomes the next iterate; subclasses say which side B goes on."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..codes import Code
from .batches import Batches
from .kinds import AnyJob, job_name
from .task import Block, Kernel, Terms, run_task

RESULT_DTYPES = ("float64", "float32")


class Coded:
    """What the master needs of a coded job; subclasses say how blocks are made and decoded."""

    def __init__(self, job: AnyJob, code: Code, batch_size: int = 0, batch_seed: int = 0) -> None:
        self.job, self.code = job, code
        self.batch_size, self.batch_seed = batch_size, batch_seed
        self.name = job_name(job)
        dtypes = {attr: getattr(job, attr, "float64") for attr in ("result_dtype", "theta_dtype")}
        for attr, dtype in dtypes.items():
            if dtype not in RESULT_DTYPES:
                raise ValueError(f"{self.name}.{attr} = {dtype!r}: allowed "
                                 f"{', '.join(map(repr, RESULT_DTYPES))}")
        self.half = dtypes["result_dtype"] == "float32"  # results travel as float32
        self.half_theta = dtypes["theta_dtype"] == "float32"  # and θ

    result_size: int
    dim: int
    free_loss = False  # the loss is decoded with the results (``decoded_loss``)
    decoded_loss: float | None = None  # the loss at the theta the last update started from
    data_coded = False  # B applied to the data (coded blocks), else to the results
    kernel: Kernel  # set by each subclass
    batches: Batches | None = None  # mini-batches: which rows each step computes
    bounds: tuple[int, ...] = ()  # under mini-batches: where each partition begins, and the end

    def recoded(self, code: Code) -> Coded:
        """The same job under another code (after workers died): coded on the side that is
        cheaper under it."""
        from .registry import coded  # the registry imports this class's subclasses

        return coded(self.job, code, self.batch_size, self.batch_seed)

    def entries(self) -> tuple[np.ndarray, float]:  # pragma: no cover - abstract
        """Matrix entries each task multiplies (rows x columns, non-zeros where sparse), and
        what one plain partition's would: a task's real compute against a partition's."""
        raise NotImplementedError

    def cost_facts(self) -> dict[str, Any]:
        """A task's real compute beside a plain partition's, for the banner and the record."""
        task, partition = self.entries()
        return {"coded_on": "data" if self.data_coded else "results",
                "task_entries": float(task.mean()), "task_entries_max": float(task.max()),
                "partition_entries": partition,
                "task_cost_ratio": float(task.max()) / max(partition, 1.0)}

    def task_cost(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def terms(self, task: int) -> Terms:  # pragma: no cover - abstract
        raise NotImplementedError

    def block(self, key: int) -> Block:  # pragma: no cover - abstract
        raise NotImplementedError

    def pieces(self, chunk_rows: int, fit: bool = False) -> Code:
        """The code re-cut into pieces of at most ``chunk_rows`` rows, for partial work;
        ``fit``: the chunks are the default ones, and may be cut finer to spread the work."""
        raise ValueError(f"--partial on: {self.name} cannot be computed in pieces")

    @property
    def remote(self) -> bool:
        """Whether workers load their blocks themselves (the master sends ids only)."""
        return False

    def placement(self, tasks: Iterable[int]) -> tuple[dict[int, Block], dict[int, Terms]]:
        """What a worker that may run ``tasks`` holds: each block they use once (none if workers
        load their own), and every task's (block, coefficient) terms."""
        terms = {int(t): self.terms(int(t)) for t in tasks}
        keys = sorted({key for ts in terms.values() for key, _ in ts})
        return ({} if self.remote else {key: self.block(key) for key in keys}), terms

    def compute(self, task: int, theta: np.ndarray, chunk_rows: int = 0) -> np.ndarray:
        """Task ``task``'s value computed here: what a worker returns (tests, references)."""
        terms = self.terms(task)
        blocks = {key: self.local_block(key) for key, _ in terms}
        value, _, _ = run_task(self.kernel, blocks, terms, theta, self.result_size, chunk_rows)
        assert value is not None
        return value

    def local_block(self, key: int) -> Block:
        return self.block(key)

    def default_chunk_rows(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def theta0(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def first_iterate(self, value: object, method: str) -> np.ndarray:
        """What the job's ``method`` returned, checked: a vector of ``dim`` entries."""
        x = np.asarray(value, dtype=np.float64)
        if x.shape != (self.dim,):
            raise ValueError(f"{self.name}.{method}() has shape {x.shape}; expected "
                             f"({self.dim},)")
        return x

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray:  # pragma: no cover - abstract
        """The iterate after step ``step`` (its iteration) from its decoded target."""
        raise NotImplementedError

    def state(self) -> np.ndarray | None:
        """The job's state beside theta, for a checkpoint (``GradientJob.state``)."""
        return None

    @property
    def stateful(self) -> bool:
        """Whether later steps depend on ``state()`` (``GradientJob.stateful``)."""
        return False

    @property
    def evaluates(self) -> bool:
        """Whether the job has an evaluation on held-out data (``GradientJob.evaluate``)."""
        return False

    def evaluate(self, theta: np.ndarray) -> dict[str, float] | None:
        return None

    def restore(self, state: np.ndarray) -> None:
        """A checkpoint's ``state()`` given back to the job."""

    def prepare_update(self) -> None:
        """Rank 0's one-off work for ``update``, done while the set-ups travel."""

    def loss(self, theta: np.ndarray) -> float | None:
        value = self.job.loss(theta)
        return None if value is None else float(value)

    def describe(self) -> dict[str, Any]:
        """Facts about the coded data for the run record."""
        return self.cost_facts()

    def shape(self) -> dict[str, Any]:
        """Its shape without the data (``core.shape.Shape``'s fields): what a replay of its
        event log needs to cut and re-code it as this job does."""
        return {"rows": [], "height": 0, "width": self.default_chunk_width(),
                "data_coded": self.data_coded, "free_loss": self.free_loss}

    def default_chunk_width(self) -> int:
        """The row width its default chunks are sized by."""
        return 1
