"""Real-valued MDS codes for matrix-vector jobs: any k of the coded blocks give every W_j·θ."""

from __future__ import annotations

import numpy as np

from ._base import Code, check_int, even_split, one_task_per_worker
from ._conditioning import best_conditioned, erasure_sets
from .decoders import GenericDecoder


def mds_matrix(n_rows: int, k: int, rng: np.random.Generator,
               candidates: int = 8) -> tuple[np.ndarray, float]:
    """An n_rows x k generator whose k-row submatrices are all invertible (probability one).

    Candidates are Gaussian frames with orthonormal columns (a tight frame spreads every
    partition evenly over the blocks); the one whose worst erasure set (exhaustive up to 2000
    sets, sampled beyond) has the smallest condition number is kept.
    """
    sets = erasure_sets(n_rows, n_rows - k, rng)
    return best_conditioned(lambda: np.linalg.qr(rng.standard_normal((n_rows, k)))[0], sets,
                            candidates)


def make_mds(n_workers: int, stragglers: int | None = None, partitions: int | None = None,
             redundancy: float | None = None, seed: int = 0) -> Code:
    """Either ``stragglers`` s (one block a worker, k = n - s) or ``partitions`` K with
    ``redundancy`` Ω (round(KΩ) blocks dealt evenly over the workers)."""
    n = check_int("n_workers", n_workers, 1)
    rng = np.random.default_rng(seed)
    if partitions is None:
        if redundancy is not None:
            raise ValueError("redundancy needs partitions: give partitions=K, redundancy=Ω")
        s = check_int("stragglers", 0 if stragglers is None else stragglers, 0, n - 1)
        k, n_tasks, schedule = n - s, n, one_task_per_worker(n)
    else:
        if stragglers is not None:
            raise ValueError("give either stragglers or partitions with redundancy, not both")
        k = check_int("partitions", partitions, 1)
        omega = 1.0 if redundancy is None else float(redundancy)
        if not omega >= 1.0:
            raise ValueError(f"redundancy={redundancy} is out of range: allowed >= 1")
        n_tasks = int(round(k * omega))
        schedule = even_split(n_tasks, n)
    B, cond = mds_matrix(n_tasks, k, rng)
    params = {"stragglers": n_tasks - k, "partitions": k, "seed": seed, "worst_condition": cond}
    if partitions is not None:
        params["redundancy"] = n_tasks / k
    return Code("mds", B, schedule, "each", GenericDecoder, params)
