"""Uncoded computation: worker w computes partition w alone; every result is needed."""

from __future__ import annotations

import numpy as np

from ._base import TARGETS, Code, Decoder, check_int, one_task_per_worker


class UncodedDecoder(Decoder):
    """Ready once every partition has arrived (or all but ``tolerance`` of them)."""

    def _update(self, task: int) -> bool:
        return self.code.n_partitions - len(self.tasks) <= self.tolerance

    @property
    def missing_partitions(self) -> np.ndarray:
        return np.setdiff1d(np.arange(self.code.n_partitions), self.tasks)

    def result(self) -> np.ndarray:
        values = self._values_for_result()
        if self.code.target == "sum":
            return values.sum(axis=0)
        each = np.full((self.code.n_partitions, *values.shape[1:]), np.nan)
        each[self.tasks] = values
        return each


class UncodedCode(Code):
    """B = I: no redundancy, so the slowest worker sets the pace."""

    def decoder(self, tolerance: int = 0) -> Decoder:
        return UncodedDecoder(self, tolerance)


def make_uncoded(n_workers: int, target: str = "sum") -> Code:
    """Uncoded scheme over ``n_workers`` partitions; ``target`` 'sum' (gradient) or 'each'."""
    n = check_int("n_workers", n_workers, 1)
    if target not in TARGETS:
        raise ValueError(f"target={target!r} is not allowed: allowed {TARGETS}")
    return UncodedCode("uncoded", np.eye(n), one_task_per_worker(n), target, {"stragglers": 0})
