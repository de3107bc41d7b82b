"""``JOB_KINDS``, the one place a kind of job is registered: ``coded(job, code)`` builds a coded job
on rank 0 and ``kernel_for(job, data_coded)`` a worker's kernel from its own copy of the job."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..codes import Code
from .coded import Coded
from .coded_data import CodedLinear, CodedMatVec
from .coded_results import CodedGradient
from .kernels import MATVEC_KERNEL, gradient_kernel
from .kinds import AnyJob, GradientJob, MatVecJob, job_name
from .rows import is_sparse, row_arrays
from .task import Kernel


def _code_gradient(job: GradientJob, code: Code, batch_size: int, batch_seed: int) -> Coded:
    """A gradient job coded on its results, or on its data where it is linear in theta and
    that is cheaper (never under mini-batches: a coded block sums whole partitions)."""
    results = CodedGradient(job, code, None, batch_size, batch_seed)
    if not job.linear or results.remote or batch_size:
        return results
    arrays = row_arrays(results.parts[0]) if results.parts else None
    dense = arrays is not None and not any(is_sparse(a) for a in arrays)
    if dense and int(job.dim) ** 2 > results.entries()[0].mean():
        return results  # a dense block's form has dim² entries: more than its rows' work
    data = CodedLinear(job, code, results.parts)
    # data coding multiplies one coded block a task, results coding every partition of its
    # support: the cheaper of the two (data, unless partitions have fewer rows than dim / d)
    return data if data.entries()[0].mean() <= results.entries()[0].mean() else results


def _code_matvec(job: MatVecJob, code: Code, batch_size: int, batch_seed: int) -> Coded:
    """A matrix-vector job: B on its data, every row computed every iteration."""
    if batch_size:
        raise ValueError(f"--batch-size: {job_name(job)} is a matrix-vector job, whose every "
                         "iteration needs all of its rows; drop --batch-size")
    return CodedMatVec(job, code)


@dataclass(frozen=True)
class JobKind:
    """A kind of job users subclass, registered once: how rank 0 codes one for a run, how a
    worker computes its tasks, and parameters any code gets for it unless given (the code a
    run gets without --code is the job's ``measured_as`` table's, ``jobs/defaults.py``)."""

    base: type
    coder: Callable[[Any, Code, int, int], Coded]  # (job, code, batch size, batch seed)
    kernel: Callable[[Any, bool], Kernel]
    code_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


JOB_KINDS: tuple[JobKind, ...] = (
    JobKind(GradientJob, _code_gradient, gradient_kernel),
    JobKind(MatVecJob, _code_matvec, lambda job, data_coded: MATVEC_KERNEL,
            MappingProxyType({"target": "each"})),  # each coded block's product is decoded
)


def job_kind(job: object) -> JobKind:
    """The registered kind ``job`` is of; TypeError naming the base classes if none."""
    for kind in JOB_KINDS:
        if isinstance(job, kind.base):
            return kind
    bases = " or ".join(f"mpicoded.{kind.base.__name__}" for kind in JOB_KINDS)
    raise TypeError(f"{type(job).__name__} is not a job: subclass {bases}")


def coded(job: object, code: Code, batch_size: int = 0, batch_seed: int = 0) -> Coded:
    """``job`` coded by ``code`` (in mini-batches of ``batch_size`` rows, if not 0); TypeError
    if it is not a job, ValueError if they do not fit."""
    return job_kind(job).coder(job, code, batch_size, batch_seed)


def kernel_for(job: AnyJob, data_coded: bool = False) -> Kernel:
    """How a worker computes a task of ``job``, row chunk by row chunk; ``data_coded``: a linear
    gradient job whose tasks hold coded (A, b, c) blocks (``CodedLinear``)."""
    return job_kind(job).kernel(job, data_coded)
