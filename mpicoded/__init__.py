"""mpicoded: straggler-resilient coded distributed computing over MPI.

One BLAS thread per rank: 21 ranks on 2 cores with default BLAS threading ran a plain gradient
loop 35x slower here. The variables are set before numpy loads (``python -m mpicoded.train``
imports this first); ``limit_blas_threads`` covers a numpy that was already loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
for _var in BLAS_VARS:
    os.environ.setdefault(_var, "1")

__version__ = "0.1.0"

from .jobs.batches import ShardSampler  # noqa: E402 - after the BLAS variables
from .jobs.kinds import GradientJob, MatVecJob  # noqa: E402
from .log import log_to_stderr  # noqa: E402

if TYPE_CHECKING:  # the names __getattr__ imports when asked for, for type checkers
    from mpi4py import MPI

    from .core.result import IterationRecord, RunResult
    from .jobs.torchjob import TorchJob


def run(job: GradientJob | MatVecJob, comm: MPI.Intracomm | None = None,
        callbacks: Sequence[Callable[..., Any]] = (), **options: Any) -> RunResult | None:
    """Run ``job`` coded over ``comm`` (MPI.COMM_WORLD if None; call it on every rank of it):
    its rank 0 returns the RunResult, the others serve and return None. The options are
    ``python -m mpicoded.train``'s flags, by name: ``run(job, code="gfrc", stragglers=3)``;
    ``callbacks`` are called on rank 0 after every iteration (``runtime.api.run``). MPI is
    loaded here, not on ``import mpicoded``. A user error is a UsageError naming keywords,
    told by rank 0 alone."""
    from .options import UsageError, as_keywords
    from .runtime.api import run as _run

    try:
        return _run(job, comm, callbacks, **options)
    except UsageError as exc:
        raise UsageError(as_keywords(str(exc)), echoed=exc.echoed) from None


__all__ = ["GradientJob", "IterationRecord", "MatVecJob", "RunResult", "ShardSampler",
           "TorchJob", "limit_blas_threads", "log_to_stderr", "run"]


def __getattr__(name: str) -> type:
    """``mpicoded.TorchJob`` (with torch), ``RunResult`` and ``IterationRecord`` (the types a
    run returns and a callback gets), imported only when asked for."""
    if name == "TorchJob":
        from .jobs.torchjob import TorchJob

        return TorchJob
    if name == "RunResult":
        from .core.result import RunResult

        return RunResult
    if name == "IterationRecord":
        from .core.result import IterationRecord

        return IterationRecord
    raise AttributeError(f"module 'mpicoded' has no attribute {name!r}")


def limit_blas_threads(threads: int = 1) -> None:
    """Set every loaded BLAS/OpenMP pool to ``threads`` threads."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads)
