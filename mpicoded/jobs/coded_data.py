"""Jobs coded on their data: each task holds one pre-encoded block, a linear gradient job's
Σ_j B[t, j] (A_j, b_j, c_j) or a matrix-vector job's Σ_j B[t, j] A_j."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from ..codes import Code
from ..codes.partial import cut_ranges
from .coded import Coded
from .coded_results import CodedGradient
from .kernels import MATVEC_KERNEL, gradient_kernel
from .kinds import GradientJob, MatVecJob, job_name, overrides
from .rows import is_sparse, row_blocks, row_width
from .task import Block, Terms, default_chunk_rows


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
        self.kernel = gradient_kernel(job, True)
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
            A = _csr(form[0]) if is_sparse(form[0]) else np.asarray(form[0], float)
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
        A = A.tocsr() if is_sparse(A) else np.asarray(A, dtype=np.float64)
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
        return max(1, A.nnz // max(1, A.shape[0])) if is_sparse(A) else int(A.shape[1])


def _form_entries(A: Any) -> int:
    return int(A.nnz) if is_sparse(A) else int(A.size)


def _csr(A: Any) -> Any:
    """A sparse ``A`` as a CSR matrix (SciPy is imported already: ``A`` is one of its)."""
    import scipy.sparse as sp

    return sp.csr_matrix(A)


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
        self.kernel = MATVEC_KERNEL
        A: Any = job.matrix()  # numpy or scipy.sparse (untyped): the code below asks self.sparse
        if A.ndim != 2:
            raise ValueError(f"{self.name}.matrix() must be 2-D, has shape {A.shape}")
        self.sparse = is_sparse(A)
        A = _csr(A) if self.sparse else np.asarray(A, dtype=np.float64)
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
            import scipy.sparse as sp

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
        return row_width(self.plain[0])

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

    def update(self, theta: np.ndarray, decoded: np.ndarray, missing: np.ndarray,
               step: int) -> np.ndarray:
        """``step`` with y = A @ x reassembled from the blocks (NaN rows for missed blocks)."""
        y = np.concatenate([decoded[j, : len(r)] for j, r in enumerate(self.rows)])
        return np.asarray(self.job.step(theta, y), dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        coded, plain = self.entries()
        return {"matrix_shape": [self.m, self.dim], "data_rows": self.m, "sparse": self.sparse,
                "matrix_nonzeros": self.nnz, "task_nonzeros": float(coded.mean()),
                "partition_nonzeros": plain, **self.cost_facts()}
