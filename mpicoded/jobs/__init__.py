"""Jobs: what a task computes. ``make_job(name, data, code)``; ``COMPUTE[name]`` runs on workers."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..codes import Code
from . import linreg, logreg
from ._base import Job
from .data import Dataset, DatasetError, load, synthetic

JOBS: dict[str, type[Job]] = {"logreg": logreg.LogReg, "linreg": linreg.LinReg}
COMPUTE: dict[str, Callable[[dict[str, np.ndarray], np.ndarray], np.ndarray]] = {
    "logreg": logreg.compute,
    "linreg": linreg.compute,
}


def make_job(name: str, data: Dataset, code: Code, lr: float | None = None) -> Job:
    """Build job ``name`` over ``data`` coded by ``code``."""
    if name not in JOBS:
        raise ValueError(f"job={name!r} is unknown: allowed {sorted(JOBS)}")
    return JOBS[name](data, code, lr)


__all__ = ["COMPUTE", "JOBS", "Dataset", "DatasetError", "Job", "load", "make_job", "synthetic"]
