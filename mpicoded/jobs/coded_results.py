"""A gradient job coded on its results: its blocks are the partitions, and task t sums
B[t, j] times partition j's value."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from ..codes import Code
from ..codes.partial import cut_rows
from .batches import Batches
from .coded import Coded
from .kernels import gradient_kernel
from .kinds import GradientJob, overrides
from .rows import entry_count, row_arrays, row_count, row_width
from .task import Block, Terms, default_chunk_rows


class CodedGradient(Coded):
    """B applied to results: blocks are the partitions, held once each; task t sums
    B[t, j] * compute(partition j)."""

    job: GradientJob

    def __init__(self, job: GradientJob, code: Code, parts: list[Any] | None = None,
                 batch_size: int = 0, batch_seed: int = 0) -> None:
        """``parts``: the job's blocks(k) already read (else read here); ``batch_size``:
        mini-batches of that many rows, shuffled by ``batch_seed`` (0: full batches)."""
        super().__init__(job, code, batch_size, batch_seed)
        self.kernel = gradient_kernel(job, False)
        k = code.n_partitions
        self.dim = int(job.dim)
        self.free_loss = overrides(job, "block_loss", GradientJob)
        self.result_size = self.dim + self.free_loss
        self._remote = bool(job.workers_load) or not overrides(job, "blocks", GradientJob)
        self._every = np.arange(k)  # the partitions an exact decode covers (every iteration)
        self._every.flags.writeable = False
        if self._remote and not overrides(job, "load_block", GradientJob):
            raise ValueError(f"{self.name} defines neither blocks(k) nor load_block(j, k)")
        self.parts: list[Any] = []
        job.partitioned(k)
        if not self._remote:
            self.parts = list(job.blocks(k)) if parts is None else parts
            if len(self.parts) != k:
                raise ValueError(f"{self.name}.blocks({k}) returned {len(self.parts)} blocks; "
                                 f"expected {k}")
        if batch_size:
            self.batches, self.bounds = self._batched(batch_size, batch_seed)

    def _batched(self, size: int, seed: int) -> tuple[Batches, tuple[int, ...]]:
        """The run's mini-batches, and where each partition begins in the rows they number;
        ValueError where the job cannot be trained so."""
        if not overrides(self.job, "batch_rows", GradientJob):
            raise ValueError(f"--batch-size: {self.name} does not define batch_rows(rows), which "
                             "tells its step how many rows of a mini-batch it divides by; "
                             "drop --batch-size to train on full batches")
        if self._remote and not overrides(self.job, "partition_rows", GradientJob):
            raise ValueError(f"--batch-size: {self.name}'s workers load their own blocks and it "
                             "does not define partition_rows(k), which numbers their rows for "
                             "the batches; define it, or let rank 0 read the data")
        if not self.job.additive or any(row_arrays(p) is None for p in self.parts):
            raise ValueError(f"--batch-size: {self.name}'s blocks must be arrays (or tuples of "
                             "them) summed over rows (additive), to be sampled by rows")
        k = self.code.n_partitions
        rows = list(self.job.partition_rows(k)) if self._remote else [row_count(p)
                                                                     for p in self.parts]
        if len(rows) != k:
            raise ValueError(f"{self.name}.partition_rows({k}) gave {len(rows)} counts; "
                             f"expected {k}")
        bounds = tuple(int(b) for b in np.cumsum([0, *rows]))
        return Batches(bounds[-1], size, seed), bounds

    @property
    def remote(self) -> bool:
        return self._remote

    def task_cost(self) -> np.ndarray:
        """Work units of each task: the data it computes over (``Code.work_units``)."""
        return self.code.work_units

    @cached_property
    def _partition_entries(self) -> np.ndarray:
        """Each partition's entries (1 each where workers load their own: sizes unknown)."""
        if not self.parts:
            return np.ones(self.code.n_partitions)
        return np.array([entry_count(p) for p in self.parts], dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        facts = super().describe()
        if self.parts and not self.data_coded:  # the rows a run's workers compute, against
            facts["data_rows"] = int(sum(row_count(p) for p in self.parts))
        return facts

    def entries(self) -> tuple[np.ndarray, float]:
        """A task computes every partition of its support: their entries add up."""
        sizes = self._partition_entries
        task = np.array([sizes[np.flatnonzero(row)].sum() for row in self.code.B])
        return task, float(sizes.mean())

    def terms(self, task: int) -> Terms:
        coef = self.code.B[task]
        return tuple((int(j), float(coef[j])) for j in np.flatnonzero(coef))

    def pieces(self, chunk_rows: int, fit: bool = False) -> Code:
        """The code re-cut into pieces of ``chunk_rows`` rows (``partial_code``): partial work
        for a job whose value sums over rows; ValueError where that has no meaning. ``fit``
        (the default chunks): smaller pieces where needed for PIECES_A_HOLDER a holder, so
        that a share can be split."""
        if self.data_coded or not self.job.additive:
            why = "it is coded on its data" if self.data_coded else "its compute is no sum " \
                "over rows (additive = False)"
            raise ValueError(f"--partial on: {self.name} cannot be computed in pieces: {why}")
        if self.remote or any(row_arrays(p) is None for p in self.parts):
            raise ValueError(f"--partial on: {self.name}'s blocks must be arrays (or tuples of "
                             "them) held by rank 0, to be cut in row ranges")
        if chunk_rows < 1:
            raise ValueError("--partial on needs chunks: --chunk-rows must be >= 1")
        return cut_rows(self.code, [row_count(p) for p in self.parts], chunk_rows, fit)

    def shape(self) -> dict[str, Any]:
        arrays = bool(self.parts) and row_arrays(self.parts[0]) is not None
        rows = [row_count(p) for p in self.parts] if arrays else []
        share = {} if self.batches is None else {"share": self.batches.share}
        return {**super().shape(), "rows": rows, **share}

    def default_chunk_width(self) -> int:
        return row_width(self.parts[0]) if self.parts else self.dim

    def block(self, key: int) -> Block:
        return self.parts[key]

    def local_block(self, key: int) -> Block:
        if self._remote:
            return self.job.load_block(key, self.code.n_partitions)
        return self.parts[key]

    def default_chunk_rows(self) -> int:
        """About 2 MB of data a chunk (CHUNK_ELEMENTS), from the data's shape alone."""
        if not self.parts or row_arrays(self.parts[0]) is None:  # remote, or computed whole
            return default_chunk_rows(self.default_chunk_width())
        share = 1.0 if self.batches is None else self.batches.share
        return default_chunk_rows(self.default_chunk_width(),
                                  max(row_count(p) for p in self.parts), share)

    def theta0(self) -> np.ndarray:
        return self.first_iterate(self.job.theta0(), "theta0")

    def state(self) -> np.ndarray | None:
        return self.job.state()

    @property
    def stateful(self) -> bool:
        return self.job.stateful

    @property
    def evaluates(self) -> bool:
        return self.job.evaluates

    def evaluate(self, theta: np.ndarray) -> dict[str, float] | None:
        return self.job.evaluate(theta)

    def restore(self, state: np.ndarray) -> None:
        self.job.restore(state)

    def prepare_update(self) -> None:
        self.job.prepare_step()

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray:
        """``step`` with the sum over the partitions the decode covers (their rows in step
        ``step``'s batch told first, under mini-batches)."""
        if self.batches is not None:
            self.job.batch_rows(self.batches.counts(step, self.bounds))
        covered = np.setdiff1d(self._every, missing) if len(missing) else self._every
        total = decoded if self.code.target == "sum" else decoded[covered].sum(axis=0)
        if self.free_loss:
            self.decoded_loss = float(self.job.combine_loss(theta, float(total[-1]), covered))
            total = total[:-1]
        return np.asarray(self.job.step(theta, total, covered), dtype=np.float64)
