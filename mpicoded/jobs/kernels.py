"""The kernels: how a worker computes a task of a gradient job (on its own blocks or on coded
linear ones) or of a matrix-vector job, row range by row range."""

from __future__ import annotations

import numpy as np

from .kinds import GradientJob, job_name, overrides
from .rows import row_arrays, row_count, row_range, take_rows
from .task import Block, Kernel


def _defined_at(mro: tuple[type, ...], method: str) -> int:
    """How far up ``mro`` the class defining ``method`` is (0: the object's own class)."""
    return next((i for i, cls in enumerate(mro) if method in vars(cls)), len(mro))


def gradient_kernel(job: GradientJob, data_coded: bool) -> Kernel:
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
        return row_count(block) if chunked else 1

    def accumulate(block: Block, theta: np.ndarray, start: int, stop: int, coef: float,
                   out: np.ndarray) -> None:
        part = block  # whole (a piece's rows are cut once, by the worker)
        if chunked and (start or stop != row_count(block)) and row_arrays(block) is not None:
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
        value = np.asarray(value).reshape(-1)  # float32 added to the float64 sum as it is
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
