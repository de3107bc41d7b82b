"""Spread repetition: one partition for every set of s+1 workers, so that a straggler's share of
the work spreads over all the others instead of its s group mates (not from the papers: what
partial work needs to pay for a straggler only what it costs).

FRC and GFRC give each partition's s+1 copies to workers that share all their partitions, so a
slow worker's rows fall on its s group mates: under partial work (``codes.partial``) they do
1 + 1/s times their share. Here the k = C(n, s+1) partitions are the (s+1)-subsets of the
workers: each worker holds C(n-1, s) of them, the same (s+1)/n of the data as GFRC, and shares
one with every other set of s workers. One slow worker's pieces then go to the n - 1 others,
about 1/(n-1) of its share each: a tax of n/(n-1), the limit. Each task is one partition
(B = identity) and the target their sum, so any s stragglers leave every partition a holder.
Worker w runs its partitions in the order of the others' cyclic offsets from w, which puts a
pair's shared partition early in one worker's list and late in the other's: statically, with
no straggler, the holders together cover each partition about once before purged.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np

from ._base import Code, check_int
from .decoders import PeelingDecoder

MAX_PARTITIONS = 5000  # C(n, s+1) grows fast: beyond this, partitions get too thin to pay


def make_spread(n_workers: int, stragglers: int = 1) -> Code:
    """Spread repetition for ``n_workers`` workers and ``stragglers`` s: C(n, s+1) partitions,
    one for each set of s+1 workers; ValueError when that is more than MAX_PARTITIONS."""
    n = check_int("n_workers", n_workers, 1)
    s = check_int("stragglers", stragglers, 0, n - 1)
    k = comb(n, s + 1)
    if k > MAX_PARTITIONS:
        fits = max((t for t in range(s) if comb(n, t + 1) <= MAX_PARTITIONS), default=0)
        raise ValueError(f"spread with n_workers={n}, stragglers={s} needs C({n}, {s + 1}) = {k} "
                         f"partitions, more than {MAX_PARTITIONS}: use stragglers <= {fits}, "
                         "or gfrc")
    subsets = list(combinations(range(n), s + 1))
    schedule = []
    for w in range(n):
        mine = [j for j, members in enumerate(subsets) if w in members]
        mine.sort(key=lambda j: (sum((v - w) % n for v in subsets[j]), subsets[j]))
        schedule.append(tuple(mine))
    return Code("spread", np.eye(k), tuple(schedule), "sum", PeelingDecoder,
                {"stragglers": s, "partitions": k, "subsets": tuple(subsets)})
