"""A user's job coded by a code: which data each task needs, how a worker computes it, and how
the master turns a decoded target into the next iterate. ``coded(job, code)`` builds it on rank 0;
``kernel_for(job, data_coded)`` is the worker's side, built from the worker's own copy of the job.
Both go through ``JOB_KINDS``, the one place a kind of job is registered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from ..codes import Code
from ..codes.partial import cut_ranges, cut_rows
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


def take_rows(block: Any, start: int, stop: int) -> Any:
    """Rows [start, stop) of a block that can be cut (``_arrays``), its entries not copied."""
    if isinstance(block, tuple):
        return tuple(row_range(p, start, stop) for p in block)
    return row_range(block, start, stop)


def row_range(matrix: Any, start: int, stop: int) -> Any:
    """Rows [start, stop) of an array or a sparse matrix without copying its entries: scipy's
    slice of a CSR matrix copies them (and faults their pages in) at every call, 5.5 times
    the product of a chunk of PageRank's rows (1.9 ms against 0.34), and so does its
    constructor for arrays that view less than half of another (``prune``). Here a CSR
    matrix's rows are an empty matrix of their shape given views of its arrays. Other sparse
    formats are sliced by scipy."""
    if not sp.issparse(matrix) or matrix.format != "csr" or not 0 <= start <= matrix.shape[0]:
        return matrix[start:stop]
    stop = max(start, min(stop, matrix.shape[0]))
    lo, hi = matrix.indptr[start], matrix.indptr[stop]
    rows = type(matrix)((stop - start, matrix.shape[1]), dtype=matrix.dtype)
    rows.data, rows.indices = matrix.data[lo:hi], matrix.indices[lo:hi]
    rows.indptr = matrix.indptr[start:stop + 1] - lo
    return rows


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


def _entries(block: Any) -> int:
    """Matrix entries a block multiplies: rows x columns (non-zeros where sparse)."""
    return _rows(block) * _row_width(block)


def kernel_for(job: AnyJob, data_coded: bool = False) -> Kernel:
    """How a worker computes a task of ``job``, row chunk by row chunk; ``data_coded``: a linear
    gradient job whose tasks hold coded (A, b, c) blocks (``CodedLinear``)."""
    return job_kind(job).kernel(job, data_coded)


def _gradient_kernel(job: GradientJob, data_coded: bool) -> Kernel:
    """A gradient job's kernel: its own compute over row chunks, or the linear one on coded
    data."""
    if data_coded:
        return LINEAR_LOSS_KERNEL if overrides(job, "block_loss", GradientJob) else LINEAR_KERNEL
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
        part = block  # whole (a piece's rows are cut once, by the worker)
        if chunked and _arrays(block) is not None and (start, stop) != (0, _rows(block)):
            part = take_rows(block, start, stop)
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
    rows = block if (start, stop) == (0, block.shape[0]) else row_range(block, start, stop)
    value = np.asarray(rows @ x).reshape(-1)
    out[start:stop] += value if coef == 1.0 else coef * value


MATVEC_KERNEL = Kernel(rows=lambda block: int(block.shape[0]), accumulate=_matvec_accumulate)


def _linear_accumulate(block: Block, theta: np.ndarray, start: int, stop: int, coef: float,
                       out: np.ndarray) -> None:
    """Rows [start, stop) of a coded linear block's A θ − b, times coef, into ``out``."""
    A, b, _ = block
    value = np.asarray(row_range(A, start, stop) @ theta).reshape(-1) - b[start:stop]
    out[start:stop] += value if coef == 1.0 else coef * value


def _linear_loss_accumulate(block: Block, theta: np.ndarray, start: int, stop: int, coef: float,
                            out: np.ndarray) -> None:
    """The same, and these rows' share of the block's loss ½ θᵀAθ − bᵀθ + c in the last entry
    (c with the first rows): a linear gradient's loss is that quadratic, linear in (A, b, c)."""
    A, b, c = block
    value = np.asarray(row_range(A, start, stop) @ theta).reshape(-1) - b[start:stop]
    loss = float(theta[start:stop] @ (0.5 * value - 0.5 * b[start:stop]))
    if start == 0:
        loss += c
    out[start:stop] += value if coef == 1.0 else coef * value
    out[-1] += coef * loss


def _linear_rows(block: Block) -> int:
    return int(block[0].shape[0])


LINEAR_KERNEL = Kernel(rows=_linear_rows, accumulate=_linear_accumulate)
LINEAR_LOSS_KERNEL = Kernel(rows=_linear_rows, accumulate=_linear_loss_accumulate)


RESULT_DTYPES = ("float64", "float32")


class Coded:
    """What the master needs of a coded job; subclasses say how blocks are made and decoded."""

    def __init__(self, job: AnyJob, code: Code) -> None:
        self.job, self.code = job, code
        self.name = job_name(job)
        self.kernel = kernel_for(job)
        dtype = getattr(job, "result_dtype", "float64")
        if dtype not in RESULT_DTYPES:
            raise ValueError(f"{self.name}.result_dtype = {dtype!r}: allowed "
                             f"{', '.join(map(repr, RESULT_DTYPES))}")
        self.half = dtype == "float32"  # results travel as float32

    result_size: int
    dim: int
    free_loss = False  # the loss is decoded with the results (``decoded_loss``)
    decoded_loss: float | None = None  # the loss at the theta the last update started from
    data_coded = False  # B applied to the data (coded blocks), else to the results
    kernel: Kernel

    def recoded(self, code: Code) -> Coded:
        """The same job under another code (after workers died): coded on the side that is
        cheaper under it."""
        return coded(self.job, code)

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

    def update(self, theta: np.ndarray, decoded: np.ndarray,
               missing: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

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


class CodedGradient(Coded):
    """B applied to results: blocks are the partitions, held once each; task t sums
    B[t, j] * compute(partition j)."""

    job: GradientJob

    def __init__(self, job: GradientJob, code: Code, parts: list[Any] | None = None) -> None:
        """``parts``: the job's blocks(k) already read (else read here)."""
        super().__init__(job, code)
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

    @property
    def remote(self) -> bool:
        return self._remote

    def task_cost(self) -> np.ndarray:
        """Work units of each task: computing over d partitions' data costs d."""
        return cast(np.ndarray, np.count_nonzero(self.code.B, axis=1).astype(np.float64))

    @cached_property
    def _partition_entries(self) -> np.ndarray:
        """Each partition's entries (1 each where workers load their own: sizes unknown)."""
        if not self.parts:
            return np.ones(self.code.n_partitions)
        return np.array([_entries(p) for p in self.parts], dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        facts = super().describe()
        if self.parts and not self.data_coded:  # the rows a run's workers compute, against
            facts["data_rows"] = int(sum(_rows(p) for p in self.parts))
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
        if self.remote or any(_arrays(p) is None for p in self.parts):
            raise ValueError(f"--partial on: {self.name}'s blocks must be arrays (or tuples of "
                             "them) held by rank 0, to be cut in row ranges")
        if chunk_rows < 1:
            raise ValueError("--partial on needs chunks: --chunk-rows must be >= 1")
        return cut_rows(self.code, [_rows(p) for p in self.parts], chunk_rows, fit)

    def shape(self) -> dict[str, Any]:
        arrays = bool(self.parts) and _arrays(self.parts[0]) is not None
        rows = [_rows(p) for p in self.parts] if arrays else []
        return {**super().shape(), "rows": rows}

    def default_chunk_width(self) -> int:
        return _row_width(self.parts[0]) if self.parts else self.dim

    def block(self, key: int) -> Block:
        return self.parts[key]

    def local_block(self, key: int) -> Block:
        if self._remote:
            return self.job.load_block(key, self.code.n_partitions)
        return self.parts[key]

    def default_chunk_rows(self) -> int:
        """About 2 MB of data a chunk (CHUNK_ELEMENTS), from the data's shape alone."""
        if not self.parts or _arrays(self.parts[0]) is None:  # remote, or computed whole
            return default_chunk_rows(self.default_chunk_width())
        return default_chunk_rows(self.default_chunk_width(), max(_rows(p) for p in self.parts))

    def theta0(self) -> np.ndarray:
        return self.first_iterate(self.job.theta0(), "theta0")

    def prepare_update(self) -> None:
        self.job.prepare_step()

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """``step`` with the sum over the partitions the decode covers."""
        covered = np.setdiff1d(self._every, missing) if len(missing) else self._every
        total = decoded if self.code.target == "sum" else decoded[covered].sum(axis=0)
        if self.free_loss:
            self.decoded_loss = float(self.job.combine_loss(theta, float(total[-1]), covered))
            total = total[:-1]
        return np.asarray(self.job.step(theta, total, covered), dtype=np.float64)


class DataCoded:
    """B applied to the data: task t holds one pre-encoded block, its own (``encode``d from
    row t of B once, when first asked for), and costs one unit of work, like one partition."""

    data_coded = True
    code: Code
    coded: dict[int, Block]

    def task_cost(self) -> np.ndarray:
        """A pre-coded block costs one unit, like one partition's."""
        return np.ones(self.code.n_tasks)

    def terms(self, task: int) -> Terms:
        return ((int(task), 1.0),)

    def block(self, key: int) -> Block:
        """Task ``key``'s coded block."""
        if key not in self.coded:
            self.coded[key] = self.encode(self.code.B[key])
        return self.coded[key]

    def encode(self, coef: np.ndarray) -> Block:  # pragma: no cover - abstract
        """The block of a task whose row of B is ``coef``."""
        raise NotImplementedError


class CodedLinear(DataCoded, CodedGradient):
    """B applied to data for a gradient linear in θ: partition j's value is A_j θ − b_j
    (``linear_form``), so task t holds (Σ_j B[t, j] A_j, Σ_j B[t, j] b_j) and computes one
    product, whatever the code's density (papers 000 and 001). With ``block_loss`` the loss
    rides along as c = Σ_j B[t, j] block_loss(partition j, 0): a linear gradient's loss is the
    quadratic ½ θᵀAθ − bᵀθ + c, so it is coded on the data too."""

    def __init__(self, job: GradientJob, code: Code, parts: list[Any] | None = None) -> None:
        super().__init__(job, code, parts)
        if self.remote:
            raise ValueError(f"{self.name} loads its own blocks on the workers: it can only be "
                             "coded on its results (data coding combines partitions on rank 0)")
        self.forms = self.forms_of(job, self.parts)
        self.kernel = kernel_for(job, data_coded=True)
        self.coded: dict[int, Block] = {}

    @classmethod
    def forms_of(cls, job: GradientJob, parts: list[Any]) -> list[tuple[Any, np.ndarray, float]]:
        """Each partition's (A_j, b_j, c_j), the first checked against ``compute`` (and
        ``block_loss``) at a random θ: ValueError naming the job if it is not linear."""
        name, dim = job_name(job), int(job.dim)
        with_loss = overrides(job, "block_loss", GradientJob)
        forms = []
        for j, part in enumerate(parts):
            form: Any = job.linear_form(part)
            A = sp.csr_matrix(form[0]) if sp.issparse(form[0]) else np.asarray(form[0], float)
            b = form[1]
            b = np.asarray(b, dtype=np.float64).reshape(-1)
            if A.shape != (dim, dim) or b.shape != (dim,):
                raise ValueError(f"{name}.linear_form returned A of shape {A.shape} and b of "
                                 f"shape {b.shape}; expected ({dim}, {dim}) and ({dim},)")
            c = float(job.block_loss(part, np.zeros(dim))) if with_loss else 0.0
            forms.append((A, b, c))
            if j == 0:
                cls._check(job, part, forms[0], with_loss)
        return forms

    @staticmethod
    def _check(job: GradientJob, part: Any, form: tuple[Any, np.ndarray, float],
               with_loss: bool) -> None:
        name, (A, b, c) = job_name(job), form
        theta = np.random.default_rng(0).standard_normal(int(job.dim))
        want = np.asarray(job.compute(part, theta), dtype=np.float64).reshape(-1)
        got = np.asarray(A @ theta).reshape(-1) - b
        scale = np.linalg.norm(np.asarray(A @ np.abs(theta)).reshape(-1)) + np.linalg.norm(b)
        if want.shape != got.shape or np.linalg.norm(want - got) > 1e-8 * max(scale, 1e-300):
            raise ValueError(f"{name} declares linear = True, but compute(block, θ) is not "
                             "linear_form's A θ − b (checked at a random θ); set linear = False "
                             "or fix linear_form")
        if with_loss:
            quadratic = float(theta @ (0.5 * got - 0.5 * b)) + c
            loss = float(job.block_loss(part, theta))
            if abs(quadratic - loss) > 1e-8 * max(abs(loss), abs(c), 1.0):
                raise ValueError(f"{name}.block_loss is not the loss whose gradient compute is: "
                                 "a linear job's block loss must be ½ θᵀAθ − bᵀθ + block_loss("
                                 "block, 0) (checked at a random θ)")

    def encode(self, coef: np.ndarray) -> Block:
        """Σ_j coef[j] (A_j, b_j, c_j) (sparse stays sparse)."""
        support = np.flatnonzero(coef)
        A: Any = sum(float(coef[j]) * self.forms[j][0] for j in support)
        b = sum(float(coef[j]) * self.forms[j][1] for j in support)
        c = sum(float(coef[j]) * self.forms[j][2] for j in support)
        A = A.tocsr() if sp.issparse(A) else np.asarray(A, dtype=np.float64)
        return A, np.asarray(b, dtype=np.float64), float(c)

    def local_block(self, key: int) -> Block:
        return self.block(key)

    def entries(self) -> tuple[np.ndarray, float]:
        """A coded block's entries against a plain partition's form (A_j)."""
        task = np.array([_form_entries(self.block(t)[0]) for t in range(self.code.n_tasks)],
                        dtype=np.float64)
        return task, float(np.mean([_form_entries(A) for A, _, _ in self.forms]))

    def default_chunk_rows(self) -> int:
        return default_chunk_rows(self.default_chunk_width(), self.forms[0][0].shape[0])

    def default_chunk_width(self) -> int:
        A = self.forms[0][0]
        return max(1, A.nnz // max(1, A.shape[0])) if sp.issparse(A) else int(A.shape[1])


def _form_entries(A: Any) -> int:
    return int(A.nnz) if sp.issparse(A) else int(A.size)


class CodedMatVec(DataCoded, Coded):
    """B applied to data: A's rows in k blocks, task t holds sum_j B[t, j] A_j (padded to the
    longest block) and returns its product with x; the decode yields every block's product."""

    job: MatVecJob

    def __init__(self, job: MatVecJob, code: Code) -> None:
        if code.target != "each":
            raise ValueError(f"{job_name(job)} is a MatVecJob: it needs a code whose target is "
                             "'each' (mds, cpgc, ucmmc, mcc; sparse, spread or uncoded with "
                             f"target each); {code.name} decodes a sum")
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

    def encode(self, coef: np.ndarray) -> Block:
        """Σ_j coef[j] A_j (sparse stays sparse)."""
        total = sum(float(coef[j]) * self.plain[j] for j in np.flatnonzero(coef))
        return total.tocsr() if self.sparse else np.asarray(total)

    @cached_property
    def _nonzeros(self) -> tuple[np.ndarray, float]:
        def nnz(block: Any) -> int:
            return int(block.nnz) if self.sparse else int(np.count_nonzero(block))
        coded = np.array([nnz(self.block(t)) for t in range(self.code.n_tasks)], dtype=float)
        return coded, float(np.mean([nnz(b) for b in self.plain]))

    def entries(self) -> tuple[np.ndarray, float]:
        """Non-zeros of each coded task's block, and the mean of a plain partition's (counted
        once: the banner and the run record both show them)."""
        return self._nonzeros

    def default_chunk_rows(self) -> int:
        return default_chunk_rows(self.default_chunk_width(), self.result_size)

    def default_chunk_width(self) -> int:
        return _row_width(self.plain[0])

    def shape(self) -> dict[str, Any]:
        return {**super().shape(), "rows": [len(r) for r in self.rows],
                "height": self.result_size}

    def theta0(self) -> np.ndarray:
        return self.first_iterate(self.job.start(), "start")

    def pieces(self, chunk_rows: int, fit: bool = False) -> Code:
        """Every coded block cut on one grid of row ranges of at most ``chunk_rows`` rows
        (``range_code``); ``fit``: as many ranges as it takes for the holders' shares to tile
        the grid (``grid_step``), or a multiple of that."""
        return cut_ranges(self.code, self.result_size, chunk_rows, fit)

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """``step`` with y = A @ x reassembled from the blocks (NaN rows for missed blocks)."""
        y = np.concatenate([decoded[j, : len(r)] for j, r in enumerate(self.rows)])
        return np.asarray(self.job.step(theta, y), dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        coded, plain = self.entries()
        return {"matrix_shape": [self.m, self.dim], "data_rows": self.m, "sparse": self.sparse,
                "matrix_nonzeros": self.nnz, "task_nonzeros": float(coded.mean()),
                "partition_nonzeros": plain, **self.cost_facts()}


def _code_gradient(job: GradientJob, code: Code) -> Coded:
    """A gradient job coded on its results, or on its data where it is linear in theta and
    that is cheaper."""
    results = CodedGradient(job, code)
    if not job.linear or results.remote:
        return results
    data = CodedLinear(job, code, results.parts)
    # data coding multiplies one coded block a task, results coding every partition of its
    # support: the cheaper of the two (data, unless partitions have fewer rows than dim / d)
    return data if data.entries()[0].mean() <= results.entries()[0].mean() else results


@dataclass(frozen=True)
class JobKind:
    """A kind of job users subclass, registered once: how rank 0 codes one for a run, how a
    worker computes its tasks, and the code (with parameters) a run gets without --code."""

    base: type
    coder: Callable[[Any, Code], Coded]
    kernel: Callable[[Any, bool], Kernel]
    default_code: str
    code_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


JOB_KINDS: tuple[JobKind, ...] = (
    JobKind(GradientJob, _code_gradient, _gradient_kernel, "frc"),
    JobKind(MatVecJob, CodedMatVec, lambda job, data_coded: MATVEC_KERNEL, "mds",
            MappingProxyType({"target": "each"})),  # each coded block's product is decoded
)


def job_kind(job: object) -> JobKind:
    """The registered kind ``job`` is of; TypeError naming the base classes if none."""
    for kind in JOB_KINDS:
        if isinstance(job, kind.base):
            return kind
    bases = " or ".join(f"mpicoded.{kind.base.__name__}" for kind in JOB_KINDS)
    raise TypeError(f"{type(job).__name__} is not a job: subclass {bases}")


def coded(job: object, code: Code) -> Coded:
    """``job`` coded by ``code``; TypeError if it is not a job, ValueError if they do not fit."""
    return job_kind(job).coder(job, code)
