"""Jobs: what a task computes. ``make_job(name, data, code)``; ``KERNELS[name]`` runs on workers."""

from __future__ import annotations

from ..codes import Code
from . import linreg, logreg
from ._base import Job
from .data import Dataset, DatasetError, load, synthetic
from .task import Kernel

JOBS: dict[str, type[Job]] = {"logreg": logreg.LogReg, "linreg": linreg.LinReg}
KERNELS: dict[str, Kernel] = {name: job.kernel for name, job in JOBS.items()}


def make_job(name: str, data: Dataset, code: Code, lr: float | None = None) -> Job:
    """Build job ``name`` over ``data`` coded by ``code``."""
    if name not in JOBS:
        raise ValueError(f"job={name!r} is unknown: allowed {sorted(JOBS)}")
    return JOBS[name](data, code, lr)


__all__ = ["JOBS", "KERNELS", "Dataset", "DatasetError", "Job", "Kernel", "load", "make_job",
           "synthetic"]
