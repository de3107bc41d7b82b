"""Paper 001's schedules for the matrix-vector job W·θ (target ``each``, M = n_workers partitions).

- ``ucmmc``: uncoded with multi-message; worker w runs W_w, W_{w+1}, ..., W_{w+r-1} (mod M).
- ``cpgc``: first task uncoded W_w; the later ones are sums of two partitions taken from
  pair-partitions of {W_1..W_M}, circularly shifted so no partition appears twice in a worker.
  Degree <= 2 keeps decoding a peeling and allows partial recovery.
- ``mcc``: an (M, M·r) MDS code; each worker sends one message after all r computations.

``n_workers=4, load=2`` gives exactly the Section 2 example (A_u, A_c, A_m); ``cpgc`` with
``n_workers=20, load=3`` is the Section 4.1 construction, generalised to any even n_workers: each
coded row takes the paper's pair-partition and shift when no worker would then compute a
partition twice, else the first (pair-partition, shift) that avoids it, else any assignment of a
pair-partition's pairs to the workers that does. Read literally, the
paper's circshift(v3, 1) gives worker 7 both W15+W16 and W6+W15; circshift(v3, 3) is the only
shift of v3 without a repeat, and is what is used (``params["rows"]`` records the choices).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ._base import Code, check_int
from .decoders import GenericDecoder, PeelingDecoder
from .mds import mds_matrix

Pairs = list[tuple[int, int]]

# Section 2, 0-based: worker w's second task in A_c, and A_m's coefficients 2**w.
EXAMPLE_CPGC_SECOND = [(2, 3), (0, 2), (1, 3), (0, 1)]


def make_ucmmc(n_workers: int, load: int = 2) -> Code:
    """UC-MMC with the shifted schedule: worker w computes W_w, ..., W_{w+r-1} (indices mod M)."""
    m = check_int("n_workers", n_workers, 1)
    r = check_int("load", load, 1, m)
    schedule = tuple(tuple((w + i) % m for i in range(r)) for w in range(m))
    return Code("ucmmc", np.eye(m), schedule, "each", PeelingDecoder, {"load": r})


class _Matchings:
    """The pair-partitions not used yet, generated lazily (there are about m/2 of them)."""

    def __init__(self, m: int) -> None:
        self._source = _pair_partitions(m)
        self._made: dict[str, Pairs] = {}
        self._used: set[str] = set()

    def __iter__(self) -> Iterator[tuple[str, Pairs]]:
        yield from [(n, p) for n, p in self._made.items() if n not in self._used]
        for name, pairs in self._source:
            self._made[name] = pairs
            yield name, pairs

    def get(self, name: str) -> Pairs | None:
        while name not in self._made and (nxt := next(self._source, None)) is not None:
            self._made[nxt[0]] = nxt[1]
        return None if name in self._used else self._made.get(name)

    def use(self, name: str) -> None:
        self._used.add(name)


def _ordered(a: int, b: int) -> tuple[int, int]:
    """The pair (a, b) smaller first, as ``tuple(sorted((a, b)))``."""
    return (a, b) if a <= b else (b, a)


def _pair_partitions(m: int) -> Iterator[tuple[str, Pairs]]:
    """Perfect matchings of 0..m-1: the paper's v1..v4 first, then {a, c - a mod m} for odd c."""
    half = m // 2
    yield "v1", [(2 * i, 2 * i + 1) for i in range(half)]
    if m % 4 == 0:
        yield "v2", [(a, a + 2) for a in range(m) if a % 4 in (0, 1)]
    yield "v3", [(i, m - 1 - i) for i in range(half)]
    yield "v4", [(i, half + i) for i in range(half)]
    for c in range(1, m, 2):
        if c != m - 1:
            yield f"r{c}", sorted({_ordered(a, (c - a) % m) for a in range(m)})


# Section 4.1: A(2, :) = [circshift(v1, -1), circshift(v2, -1)], A(3, :) = [circshift(v3, 1),
# circshift(v4, -2)]; circshift(v, d) shifts right d times, as np.roll(v, d) does.
PAPER_ROWS = [(("v1", -1), ("v2", -1)), (("v3", 1), ("v4", -2))]


def _cpgc_rows(m: int, r: int) -> tuple[list[list[tuple[int, int]]], list[str]]:
    """The coded rows 2..r: for each, the pair every worker sums (no partition twice a worker),
    and the (pair-partition, shift) choices made."""
    half = m // 2
    matchings = _Matchings(m)
    seen: list[set[int]] = [{w} for w in range(m)]
    rows, choices = [], []
    for row in range(r - 1):
        paper = PAPER_ROWS[row] if row < len(PAPER_ROWS) else ()
        coded: list[tuple[int, int]] = []
        for part, workers in enumerate((range(half), range(half, m))):
            choice = _place(matchings, paper[part] if paper else None, workers, seen)
            if choice is None:
                raise ValueError(
                    f"load={r}: cpgc on {m} workers places only {row + 1} computations per "
                    f"worker without repeating a partition; allowed load in [1, {row + 1}]"
                )
            name, shift, pairs = choice
            matchings.use(name)
            choices.append(f"{name}:{shift}")
            coded.extend(pairs)
        for w, pair in enumerate(coded):
            seen[w].update(pair)
        rows.append(coded)
    return rows, choices


def _place(matchings: _Matchings, preferred: tuple[str, int] | None, workers: range,
           seen: list[set[int]]) -> tuple[str, str, Pairs] | None:
    """A pair-partition placed on the workers of one half so none gets a partition twice.

    The paper's circular shift when it works, else the first shift of any pair-partition, else
    any assignment of its pairs to the workers (a bipartite matching), in that order.
    """
    def clash(w: int, pair: tuple[int, int]) -> bool:
        return bool(seen[w] & set(pair))

    def shifted(pairs: Pairs, shift: int) -> Pairs:
        return [(int(a), int(b)) for a, b in np.roll(np.array(pairs), shift, axis=0)]

    def fits(pairs: Pairs) -> bool:
        return not any(clash(w, p) for w, p in zip(workers, pairs, strict=True))

    if preferred and (pairs := matchings.get(preferred[0])) is not None:
        if fits(moved := shifted(pairs, preferred[1])):
            return preferred[0], str(preferred[1]), moved
    for name, pairs in matchings:
        for shift in range(len(workers)):
            if fits(moved := shifted(pairs, shift)):
                return name, str(shift), moved
    from scipy.optimize import linear_sum_assignment  # here: a rare path, kept out of every rank's start

    for name, pairs in matchings:
        cost = np.array([[clash(w, p) for p in pairs] for w in workers], dtype=float)
        rows, cols = linear_sum_assignment(cost)
        if cost[rows, cols].sum() == 0:
            return name, "assigned", [pairs[c] for c in cols]
    return None


def make_cpgc(n_workers: int, load: int = 2) -> Code:
    """CPGC over M = n_workers partitions (even), ``load`` r computations a worker."""
    m = check_int("n_workers", n_workers, 2)
    if m % 2:
        raise ValueError(f"n_workers={m}: cpgc pairs partitions and needs an even n_workers")
    r = check_int("load", load, 1, m)
    if (m, r) == (4, 2):
        rows, choices = [EXAMPLE_CPGC_SECOND], ["section 2 example"]
    else:
        rows, choices = _cpgc_rows(m, r)
    B = np.zeros((m * r, m))
    B[np.arange(m), np.arange(m)] = 1.0
    schedule: list[list[int]] = [[w] for w in range(m)]
    for row, coded in enumerate(rows, start=1):
        for w, (i, j) in enumerate(coded):
            task = row * m + w
            schedule[w].append(task)
            B[task, [i, j]] = 1.0
    return Code("cpgc", B, tuple(map(tuple, schedule)), "each", PeelingDecoder,
                {"load": r, "rows": ",".join(choices)})


def make_mcc(n_workers: int, load: int = 2, seed: int = 0) -> Code:
    """MDS-coded computation: M·r coded blocks, any M decode; one message a worker."""
    m = check_int("n_workers", n_workers, 1)
    r = check_int("load", load, 1, m)
    if (m, r) == (4, 2):  # A_m: worker w computes W_1 + 2^w W_3 and W_2 + 2^w W_4
        B = np.zeros((8, 4))
        for w in range(4):
            B[2 * w, [0, 2]] = (1.0, 2.0**w)
            B[2 * w + 1, [1, 3]] = (1.0, 2.0**w)
        cond = None
    else:
        B, cond = mds_matrix(m * r, m, np.random.default_rng(seed))
    schedule = tuple(tuple(range(w * r, (w + 1) * r)) for w in range(m))
    params: dict[str, float] = {"load": r, "seed": seed}
    if cond is not None:
        params["worst_condition"] = cond
    return Code("mcc", B, schedule, "each", GenericDecoder, params, messages="single")
