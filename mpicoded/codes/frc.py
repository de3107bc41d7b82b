"""Fractional repetition gradient code (Tandon et al.): groups of s+1 workers share s+1 partitions."""

from __future__ import annotations

import numpy as np

from ._base import Code, Decoder, check_int, one_task_per_worker


class GroupDecoder(Decoder):
    """FRC decoding: one result from every group suffices; O(1) work per result.

    With a tolerance, groups may be missing as long as their partitions number at most
    ``tolerance``; the result is then the partial sum over the groups present.
    """

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        self._group_size = code.params["stragglers"] + 1
        self._n_groups = code.n_workers // self._group_size
        self._first: dict[int, int] = {}  # group -> index into self.tasks of its first result

    def _update(self, task: int) -> bool:
        self._first.setdefault(task // self._group_size, len(self.tasks) - 1)
        return (self._n_groups - len(self._first)) * self._group_size <= self.tolerance

    @property
    def missing_partitions(self) -> np.ndarray:
        missing = [g for g in range(self._n_groups) if g not in self._first]
        size = self._group_size
        return np.array([g * size + i for g in missing for i in range(size)], dtype=int)

    @property
    def results_used(self) -> int:
        return len(self._first)

    def result(self) -> np.ndarray:
        values = self._values_for_result()
        return values[list(self._first.values())].sum(axis=0)


class FRCCode(Code):
    """Tandon et al.'s fractional repetition code; needs (s+1) | n_workers."""

    def decoder(self, tolerance: int = 0) -> Decoder:
        return GroupDecoder(self, tolerance)


def make_frc(n_workers: int, stragglers: int = 1) -> Code:
    """FRC for ``n_workers`` workers tolerating ``stragglers``; k = n_workers partitions."""
    n = check_int("n_workers", n_workers, 1)
    s = check_int("stragglers", stragglers, 0, n - 1)
    if n % (s + 1):
        divisors = [d - 1 for d in range(1, n + 1) if n % d == 0]
        raise ValueError(
            f"stragglers={s}: frc needs (stragglers + 1) to divide n_workers={n}; "
            f"allowed stragglers {divisors} (gfrc or cyclic take any value)"
        )
    group = s + 1
    B = np.zeros((n, n))
    for w in range(n):
        g = w // group
        B[w, g * group : (g + 1) * group] = 1.0
    return FRCCode("frc", B, one_task_per_worker(n), "sum", {"stragglers": s})
