"""Uncoded computation: k partitions (default one a worker), each computed by one worker alone;
every result is needed. With k > n_workers a load split deals the partitions out unevenly."""

from __future__ import annotations

import numpy as np

from ._base import Code, check_int, check_target, even_split
from .decoders import PeelingDecoder


def make_uncoded(n_workers: int, partitions: int | None = None, target: str = "sum") -> Code:
    """Uncoded scheme over ``partitions`` (default ``n_workers``) partitions, dealt to the workers
    in contiguous runs; ``target`` 'sum' (gradient) or 'each'."""
    n = check_int("n_workers", n_workers, 1)
    k = check_int("partitions", n if partitions is None else partitions, n)
    return Code("uncoded", np.eye(k), even_split(k, n), check_target(target), PeelingDecoder,
                {"stragglers": 0, "partitions": k})
