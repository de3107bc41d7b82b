"""Jobs: the two kinds users subclass, the built-ins, and a job coded for a run."""

from __future__ import annotations

from collections.abc import Callable

from .coded import Coded
from .data import Dataset, DatasetError, load, synthetic
from .kinds import AnyJob, GradientJob, MatVecJob, job_name
from .linreg import LinReg
from .logreg import LogReg
from .pagerank import PageRank
from .power import Power
from .registry import JOB_KINDS, JobKind, coded, job_kind, kernel_for
from .spec import JobSpecError, build_job

BUILTINS: dict[str, Callable[..., AnyJob]] = {  # each takes seed= and its own data flags
    "logreg": LogReg, "linreg": LinReg, "pagerank": PageRank, "power": Power}

__all__ = ["BUILTINS", "JOB_KINDS", "AnyJob", "Coded", "Dataset", "DatasetError", "GradientJob",
           "JobKind", "JobSpecError", "LinReg", "LogReg", "MatVecJob", "PageRank", "Power",
           "build_job", "coded", "job_kind", "job_name", "kernel_for", "load", "synthetic"]
