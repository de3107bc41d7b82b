"""A user's job coded by a code: which data each task needs, how a worker computes it, and how
the master turns a decoded target into the next iterate. ``coded(job, code)`` builds it on rank 0;
``kernel_for(job)`` is the worker's side, built from the worker's own copy of the job.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..codes import Code
from .kinds import AnyJob, GradientJob, MatVecJob, overrides
from .task import Block, Kernel, Terms, default_chunk_rows, run_task


def job_name(job: object) -> str:
    """What progress lines call the job: its ``name`` attribute, else its class name."""
    return str(getattr(job, "name", "") or type(job).__name__)


def row_blocks(n_rows: int, k: int) -> list[np.ndarray]:
    """Split ``range(n_rows)`` into k contiguous, nearly equal blocks (the partitions)."""
    if k > n_rows:
        raise ValueError(f"{k} partitions need at least {k} rows of data, the job has {n_rows}")
    return np.array_split(np.arange(n_rows), k)


def _arrays(block: Any) -> tuple[Any, ...] | None:
    """The arrays of a block that can be cut in row chunks: an array or sparse matrix, or a
    tuple of them sharing their first dimension; None for anything else."""
    parts = block if isinstance(block, tuple) else (block,)
    rows = -1  # a plain loop: this runs for every chunk a worker computes
    for p in parts:
        if not ((isinstance(p, np.ndarray) and p.ndim >= 1) or sp.issparse(p)):
            return None
        if rows < 0:
            rows = p.shape[0]
        elif p.shape[0] != rows:
            return None
    return parts if rows >= 0 else None


def _rows(block: Any) -> int:
    parts = _arrays(block)
    return 1 if parts is None else int(parts[0].shape[0])


def _take(block: Any, start: int, stop: int) -> Any:
    if isinstance(block, tuple):
        return tuple(p[start:stop] for p in block)
    return block[start:stop]


def _row_width(block: Any) -> int:
    """Matrix entries a row of the block holds (non-zeros for sparse), for the chunk size."""
    parts = _arrays(block)
    if parts is None:
        return 1
    width = 0
    for p in parts:
        if sp.issparse(p):
            width += max(1, p.nnz // max(1, p.shape[0]))
        else:
            width += int(np.prod(p.shape[1:], dtype=np.int64))
    return max(1, width)


def _defined_at(mro: tuple[type, ...], method: str) -> int:
    """How far up ``mro`` the class defining ``method`` is (0: the object's own class)."""
    return next((i for i, cls in enumerate(mro) if method in vars(cls)), len(mro))


def kernel_for(job: AnyJob) -> Kernel:
    """How a worker computes a task of ``job``, row chunk by row chunk."""
    if isinstance(job, MatVecJob):
        return MATVEC_KERNEL
    if not isinstance(job, GradientJob):
        raise TypeError(f"{type(job).__name__} is not a job: subclass mpicoded.GradientJob or "
                        "mpicoded.MatVecJob")
    chunked = bool(job.additive)
    name = job_name(job)
    with_loss = overrides(job, "block_loss", GradientJob)
    # a subclass that redefines compute (or block_loss) below a fused compute_with_loss means
    # its own: the fused one would compute the parent's
    mro = type(job).__mro__
    fused = with_loss and _defined_at(mro, "compute_with_loss") <= min(
        _defined_at(mro, "compute"), _defined_at(mro, "block_loss"))

    def rows(block: Block) -> int:
        return _rows(block) if chunked else 1

    def accumulate(block: Block, theta: np.ndarray, start: int, stop: int, coef: float,
                   out: np.ndarray) -> None:
        part = _take(block, start, stop) if chunked and _arrays(block) is not None else block
        if with_loss:  # the partition's loss share rides in the last entry, coded alike
            if fused:
                value, loss = job.compute_with_loss(part, theta)
            else:
                value, loss = job.compute(part, theta), job.block_loss(part, theta)
            out[-1] += coef * float(loss)
            out = out[:-1]
        else:
            value = job.compute(part, theta)
        value = np.asarray(value, dtype=np.float64).reshape(-1)
        if value.size != out.size:
            raise ValueError(f"{name}.compute returned {value.size} values; expected dim = "
                             f"{out.size}")
        out += value if coef == 1.0 else coef * value

    return Kernel(rows=rows, accumulate=accumulate)


def _matvec_accumulate(block: Block, x: np.ndarray, start: int, stop: int, coef: float,
                       out: np.ndarray) -> None:
    """Rows [start, stop) of a coded block's product with x, times coef, into ``out``."""
    value = np.asarray(block[start:stop] @ x).reshape(-1)
    out[start:stop] += value if coef == 1.0 else coef * value


MATVEC_KERNEL = Kernel(rows=lambda block: int(block.shape[0]), accumulate=_matvec_accumulate)


class Coded:
    """What the master needs of a coded job; subclasses say how blocks are made and decoded."""

    def __init__(self, job: AnyJob, code: Code) -> None:
        self.job, self.code = job, code
        self.name = job_name(job)
        self.kernel = kernel_for(job)

    result_size: int
    dim: int
    free_loss = False  # the loss is decoded with the results (``decoded_loss``)
    decoded_loss: float | None = None  # the loss at the theta the last update started from

    def recoded(self, code: Code) -> Coded:
        """The same job under another code (after workers died)."""
        return type(self)(self.job, code)  # type: ignore[arg-type]

    def task_cost(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def terms(self, task: int) -> Terms:  # pragma: no cover - abstract
        raise NotImplementedError

    def block(self, key: int) -> Block:  # pragma: no cover - abstract
        raise NotImplementedError

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

    def update(self, theta: np.ndarray, decoded: np.ndarray,
               missing: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def loss(self, theta: np.ndarray) -> float | None:
        value = self.job.loss(theta)
        return None if value is None else float(value)

    def describe(self) -> dict[str, Any]:
        """Facts about the coded data for the run record."""
        return {}


class CodedGradient(Coded):
    """B applied to results: blocks are the partitions, held once each; task t sums
    B[t, j] * compute(partition j)."""

    job: GradientJob

    def __init__(self, job: GradientJob, code: Code) -> None:
        super().__init__(job, code)
        k = code.n_partitions
        self.dim = int(job.dim)
        self.free_loss = overrides(job, "block_loss", GradientJob)
        self.result_size = self.dim + self.free_loss
        self._remote = not overrides(job, "blocks", GradientJob)
        self._every = np.arange(k)  # the partitions an exact decode covers (every iteration)
        self._every.flags.writeable = False
        if self._remote and not overrides(job, "load_block", GradientJob):
            raise ValueError(f"{self.name} defines neither blocks(k) nor load_block(j, k)")
        self.parts: list[Any] = []
        if not self._remote:
            self.parts = list(job.blocks(k))
            if len(self.parts) != k:
                raise ValueError(f"{self.name}.blocks({k}) returned {len(self.parts)} blocks; "
                                 f"expected {k}")

    @property
    def remote(self) -> bool:
        return self._remote

    def task_cost(self) -> np.ndarray:
        """Work units of each task: computing over d partitions' data costs d."""
        return np.count_nonzero(self.code.B, axis=1).astype(np.float64)

    def terms(self, task: int) -> Terms:
        coef = self.code.B[task]
        return tuple((int(j), float(coef[j])) for j in np.flatnonzero(coef))

    def block(self, key: int) -> Block:
        return self.parts[key]

    def local_block(self, key: int) -> Block:
        if self._remote:
            return self.job.load_block(key, self.code.n_partitions)
        return self.parts[key]

    def default_chunk_rows(self) -> int:
        """About 2 MB of data a chunk (CHUNK_ELEMENTS), from the data's shape alone."""
        if not self.parts:  # remote blocks: only the width is known here
            return default_chunk_rows(self.dim)
        if _arrays(self.parts[0]) is None:  # computed whole: chunks mean nothing
            return default_chunk_rows(_row_width(self.parts[0]))
        return default_chunk_rows(_row_width(self.parts[0]), max(_rows(p) for p in self.parts))

    def theta0(self) -> np.ndarray:
        return self.first_iterate(self.job.theta0(), "theta0")

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """``step`` with the sum over the partitions the decode covers."""
        covered = np.setdiff1d(self._every, missing) if len(missing) else self._every
        total = decoded if self.code.target == "sum" else decoded[covered].sum(axis=0)
        if self.free_loss:
            self.decoded_loss = float(self.job.combine_loss(theta, float(total[-1]), covered))
            total = total[:-1]
        return np.asarray(self.job.step(theta, total, covered), dtype=np.float64)


class CodedMatVec(Coded):
    """B applied to data: A's rows in k blocks, task t holds sum_j B[t, j] A_j (padded to the
    longest block) and returns its product with x; the decode yields every block's product."""

    job: MatVecJob

    def __init__(self, job: MatVecJob, code: Code) -> None:
        if code.target != "each":
            raise ValueError(f"{job_name(job)} is a MatVecJob: it needs a code whose target is "
                             f"'each' (mds, cpgc, ucmmc, mcc; sparse or uncoded with target each); "
                             f"{code.name} decodes a sum")
        super().__init__(job, code)
        A: Any = job.matrix()  # numpy or scipy.sparse (untyped): the code below asks self.sparse
        if A.ndim != 2:
            raise ValueError(f"{self.name}.matrix() must be 2-D, has shape {A.shape}")
        self.sparse = sp.issparse(A)
        A = sp.csr_matrix(A) if self.sparse else np.asarray(A, dtype=np.float64)
        self.rows = row_blocks(A.shape[0], code.n_partitions)
        self.result_size = max(len(r) for r in self.rows)
        self.dim = int(A.shape[1])
        self.m = int(A.shape[0])
        self.nnz = int(A.nnz) if self.sparse else int(np.count_nonzero(A))
        self.plain = [self._pad(A[r[0]: r[-1] + 1]) for r in self.rows]
        self.coded: dict[int, Block] = {}

    def _pad(self, block: Any) -> Any:
        extra = self.result_size - block.shape[0]
        if not extra:
            return block
        if self.sparse:
            return sp.vstack([block, sp.csr_matrix((extra, self.dim))], format="csr")
        return np.vstack([block, np.zeros((extra, self.dim))])

    def task_cost(self) -> np.ndarray:
        """A pre-coded block costs one unit, like one partition's."""
        return np.ones(self.code.n_tasks)

    def terms(self, task: int) -> Terms:
        return ((int(task), 1.0),)

    def block(self, key: int) -> Block:
        """Task ``key``'s coded block: sum_j B[key, j] A_j (sparse stays sparse)."""
        if key not in self.coded:
            coef = self.code.B[key]
            support = np.flatnonzero(coef)
            total = sum(float(coef[j]) * self.plain[j] for j in support)
            self.coded[key] = total.tocsr() if self.sparse else np.asarray(total)
        return self.coded[key]

    @cached_property
    def nonzeros(self) -> tuple[float, float]:
        """Mean non-zeros of a coded task's block, and of a plain partition's block (counted
        once: the banner and the run record both show them)."""
        def nnz(block: Any) -> int:
            return int(block.nnz) if self.sparse else int(np.count_nonzero(block))
        coded = np.mean([nnz(self.block(t)) for t in range(self.code.n_tasks)])
        return float(coded), float(np.mean([nnz(b) for b in self.plain]))

    def default_chunk_rows(self) -> int:
        return default_chunk_rows(_row_width(self.plain[0]), self.result_size)

    def theta0(self) -> np.ndarray:
        return self.first_iterate(self.job.start(), "start")

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """``step`` with y = A @ x reassembled from the blocks (NaN rows for missed blocks)."""
        y = np.concatenate([decoded[j, : len(r)] for j, r in enumerate(self.rows)])
        return np.asarray(self.job.step(theta, y), dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        coded, plain = self.nonzeros
        return {"matrix_shape": [self.m, self.dim], "sparse": self.sparse,
                "matrix_nonzeros": self.nnz, "task_nonzeros": coded, "partition_nonzeros": plain}


def coded(job: object, code: Code) -> Coded:
    """``job`` coded by ``code``; TypeError if it is not a job, ValueError if they do not fit."""
    if isinstance(job, MatVecJob):
        return CodedMatVec(job, code)
    if isinstance(job, GradientJob):
        return CodedGradient(job, code)
    raise TypeError(f"{type(job).__name__} is not a job: subclass mpicoded.GradientJob or "
                    "mpicoded.MatVecJob")
