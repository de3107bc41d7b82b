"""Uncoded computation: worker w computes partition w alone; every result is needed."""

from __future__ import annotations

import numpy as np

from ._base import Code, check_int, check_target, one_task_per_worker
from .decoders import PeelingDecoder


def make_uncoded(n_workers: int, target: str = "sum") -> Code:
    """Uncoded scheme over ``n_workers`` partitions; ``target`` 'sum' (gradient) or 'each'."""
    n = check_int("n_workers", n_workers, 1)
    return Code("uncoded", np.eye(n), one_task_per_worker(n), check_target(target), PeelingDecoder,
                {"stragglers": 0})
