"""Fractional repetition codes: FRC (Tandon et al.) and generalized FRC for any (n, s) (paper 003).

GFRC splits the workers into s+1 congruence classes K_i = {w : w = i mod (s+1)}, whose sizes
differ by at most one. Within each class the k partitions are dealt out as contiguous runs whose
lengths differ by at most one (or follow the workers' speeds), and each worker sums its run. With
s stragglers one class is complete (pigeonhole), and adding that class's results is a binary
decode. Every partition is in exactly s+1 tasks: k(s+1), the least total load any code resilient
to s stragglers can have (paper 003, Lemma 5). When (s+1) | n and k = n this is Tandon et al.'s
FRC: the runs line up into n/(s+1) groups of s+1 workers computing the same sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from ._base import Code, check_int, one_task_per_worker
from .decoders import IntervalDecoder


def run_lengths(k: int, weights: np.ndarray) -> np.ndarray:
    """Split k partitions into len(weights) runs of at least one, proportional to the weights.

    Largest-remainder rounding, so equal weights give lengths that differ by at most one.
    """
    share = 1 + (k - len(weights)) * weights / weights.sum()
    lengths = np.floor(share).astype(int)
    order = np.argsort(-(share - lengths), kind="stable")
    lengths[order[: k - lengths.sum()]] += 1
    return cast(np.ndarray, lengths)


def congruence_classes(n: int, s: int, speeds: np.ndarray | None) -> list[list[int]]:
    """The s+1 classes of workers; with speeds, workers are dealt fastest first in a snake order
    so that every class gets a similar total speed."""
    if speeds is None:
        return [list(range(i, n, s + 1)) for i in range(s + 1)]
    classes: list[list[int]] = [[] for _ in range(s + 1)]
    for rank, w in enumerate(np.argsort(-speeds, kind="stable")):
        lap, pos = divmod(rank, s + 1)
        classes[pos if lap % 2 == 0 else s - pos].append(int(w))
    return classes


def gfrc_matrix(n: int, s: int, k: int, speeds: np.ndarray | None) -> np.ndarray:
    B = np.zeros((n, k))
    for members in congruence_classes(n, s, speeds):
        weights = np.ones(len(members)) if speeds is None else speeds[members]
        start = 0
        for w, length in zip(members, run_lengths(k, weights), strict=True):
            B[w, start : start + length] = 1.0
            start += length
    return B


def make_gfrc(n_workers: int, stragglers: int = 1, partitions: int | None = None,
              speeds: Sequence[float] | None = None) -> Code:
    """GFRC for any 0 <= s < n; ``partitions`` k defaults to n, ``speeds`` skews the loads."""
    n = check_int("n_workers", n_workers, 1)
    s = check_int("stragglers", stragglers, 0, n - 1)
    largest_class = -(-n // (s + 1))
    k = n if partitions is None else check_int("partitions", partitions, largest_class)
    speed_arr = None
    if speeds is not None:
        speed_arr = np.asarray(speeds, dtype=np.float64)
        if speed_arr.shape != (n,) or not np.all(speed_arr > 0):
            raise ValueError(f"speeds must be {n} positive numbers (one a worker), got {speeds!r}")
    B = gfrc_matrix(n, s, k, speed_arr)
    loads = B.sum(axis=1)
    params = {"stragglers": s, "partitions": k, "min_load": int(loads.min()),
              "max_load": int(loads.max()), "total_load": int(loads.sum())}
    return Code("gfrc", B, one_task_per_worker(n), "sum", IntervalDecoder, params)


def make_frc(n_workers: int, stragglers: int = 1) -> Code:
    """Tandon et al.'s FRC: needs (s+1) | n; n/(s+1) groups of s+1 workers share s+1 partitions."""
    n = check_int("n_workers", n_workers, 1)
    s = check_int("stragglers", stragglers, 0, n - 1)
    if n % (s + 1):
        allowed = [d - 1 for d in range(1, n + 1) if n % d == 0]
        raise ValueError(
            f"stragglers={s}: frc needs (stragglers + 1) to divide n_workers={n}; "
            f"allowed stragglers {allowed} (gfrc and cyclic take any value)"
        )
    code = make_gfrc(n, s)
    code.name = "frc"
    return code
