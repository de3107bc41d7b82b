"""Spread repetition: one partition for every set of s+1 workers, so that a straggler's share of
the work spreads over all the others instead of its s group mates (not from the papers: what
partial work needs to pay for a straggler only what it costs).

FRC and GFRC give each partition's s+1 copies to workers that share all their partitions, so a
slow worker's rows fall on its s group mates: under partial work (``codes.partial``) they do
1 + 1/s times their share. Here the k = C(n, s+1) partitions are the (s+1)-subsets of the
workers: each worker holds C(n-1, s) of them, the same (s+1)/n of the data as GFRC, and shares
one with every other set of s workers. One slow worker's pieces then go to the n - 1 others,
about 1/(n-1) of its share each: a tax of n/(n-1), the limit. Each task is one partition
(B = identity) and the target their sum (or each), so any s stragglers leave every partition a
holder.
A matrix-vector job takes it with target 'each': its blocks are the partitions' own rows,
so, unlike MDS, whose every block sums K partitions (K times the non-zeros of a sparse
matrix), a task costs what a partition does. Worker w runs its partitions in the order of
the others' cyclic offsets from w, which puts a pair's shared partition early in one
worker's list and late in the other's: statically, with no straggler, the holders together
cover each partition about once before purged. C(n, s+1)
grows fast; past MAX_PARTITIONS the partitions are the cyclic sets {j, j+d, ..., j+s*d} of a
few steps d, so a straggler's pieces go to about 2 s per step workers instead of all.
"""

from __future__ import annotations

from itertools import combinations
from math import comb

import numpy as np

from ._base import Code, check_int, check_target
from .decoders import PeelingDecoder

MAX_PARTITIONS = 40  # beyond this, a partition's pieces cost more than spreading saves: on 20
# workers, logreg 240000 x 100, partial work took 150 ms an iteration with C(20, 2) = 190
# partitions and 571 ms with C(20, 3) = 1140, against 41-43 ms for gfrc (20 partitions)


def _stepped(n: int, s: int, budget: int) -> tuple[list[tuple[int, ...]], list[int]]:
    """Sets {j, j+d, ..., j+s*d} mod n for j < n and a few steps d (as many as ``budget``
    allows, at least one), and the steps: each step gives a worker up to 2 s partners, and
    steps whose offsets ±i*d are new come first, so that a straggler's pieces reach as many
    workers as the budget allows. Duplicates dropped (d and n - d give one family)."""
    seen: set[frozenset[int]] = set()
    out: list[tuple[int, ...]] = []
    steps: list[int] = []
    offsets: set[int] = set()
    for disjoint in (True, False):
        for d in range(1, n):
            mine = {(i * d) % n for i in range(1, s + 1)} | {(-i * d) % n for i in range(1, s + 1)}
            family = [tuple(sorted((j + i * d) % n for i in range(s + 1))) for j in range(n)]
            fresh = [f for f in dict.fromkeys(family) if frozenset(f) not in seen]
            if (0 in mine or len(fresh) < len(set(family)) or (disjoint and mine & offsets)
                    or (steps and len(out) + len(fresh) > budget)):
                continue
            seen.update(frozenset(f) for f in fresh)
            out += fresh
            steps.append(d)
            offsets |= mine
    return out, steps


def make_spread(n_workers: int, stragglers: int = 1, target: str = "sum") -> Code:
    """Spread repetition for ``n_workers`` workers and ``stragglers`` s: C(n, s+1) partitions,
    one for each set of s+1 workers, or, where that is more than MAX_PARTITIONS, the cyclic
    sets of a few steps (``_stepped``): every partition still on s+1 workers. ``target``
    'sum' (a gradient) or 'each' (a matrix-vector job: each partition's rows held as they are
    by s+1 workers, a repetition code on the data that adds no non-zeros)."""
    n = check_int("n_workers", n_workers, 1)
    s = check_int("stragglers", stragglers, 0, n - 1)
    steps: list[int] = []
    if comb(n, s + 1) <= MAX_PARTITIONS:
        subsets = list(combinations(range(n), s + 1))
    else:
        subsets, steps = _stepped(n, s, MAX_PARTITIONS)
    k = len(subsets)
    schedule = []
    for w in range(n):
        mine = [j for j, members in enumerate(subsets) if w in members]
        mine.sort(key=lambda j: (sum((v - w) % n for v in subsets[j]), subsets[j]))
        schedule.append(tuple(mine))
    return Code("spread", np.eye(k), tuple(schedule), check_target(target), PeelingDecoder,
                {"stragglers": s, "partitions": k, "subsets": tuple(subsets),
                 "steps": tuple(steps)})
