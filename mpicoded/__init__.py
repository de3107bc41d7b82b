"""mpicoded: straggler-resilient coded distributed computing over MPI.

One BLAS thread per rank: 21 ranks on 2 cores with default BLAS threading ran a plain gradient
loop 35x slower here. The variables are set before numpy loads (``python -m mpicoded.train``
imports this first); ``limit_blas_threads`` covers a numpy that was already loaded.
"""

from __future__ import annotations

import os

BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
for _var in BLAS_VARS:
    os.environ.setdefault(_var, "1")

__version__ = "0.1.0"


def limit_blas_threads() -> None:
    """Cap every loaded BLAS/OpenMP pool at one thread."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
