"""File allocation for heterogeneous coded MapReduce (paper 002).

K = 3: the files fall into seven subsets S_1, S_2, S_3 (one node only), S_12, S_13, S_23 (two
nodes) and S_123; Lemma 1's load is L = 2(S_1 + S_2 + S_3) + g(S_12, S_13, S_23) with g = half
their sum when the largest is at most the sum of the other two, else the largest. The minimum
over allocations is found by an exact search over the subset sizes (3 free sizes once the four
storage equations hold), O(N^3).

K > 3: a linear program over a_S, the number of files stored exactly on the node set S (HiGHS):
minimise the load estimate sum_S a_S (K - |S|) / |S| (a file on |S| nodes is wanted by the
other K - |S|, and coded multicasts can serve |S| of them at once) subject to the storage sizes,
solved with integer sizes; the coding scheme then reaches what it can on that allocation.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

SUBSETS3 = ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2))


def check_storage(storage: list[int], n_files: int) -> None:
    """The storage sizes must cover the files and fit in them; raises ValueError otherwise."""
    if n_files < 1:
        raise ValueError(f"files={n_files} is out of range: allowed >= 1")
    if len(storage) < 2:
        raise ValueError(f"storage lists {len(storage)} nodes: allowed >= 2")
    bad = [m for m in storage if not 0 <= m <= n_files]
    if bad:
        raise ValueError(f"storage {bad} out of range: every M_k must be in [0, N={n_files}]")
    if sum(storage) < n_files:
        raise ValueError(f"storage {storage} holds {sum(storage)} files, fewer than N={n_files}: "
                         "every file must be stored somewhere")


def lemma1_load(sizes: dict[tuple[int, ...], int]) -> Fraction:
    """Lemma 1's load for K = 3 from the subset sizes {(0,): S_1, ..., (0, 1): S_12, ...}."""
    single = sum(sizes.get((k,), 0) for k in range(3))
    pairs = [sizes.get(p, 0) for p in ((0, 1), (0, 2), (1, 2))]
    return 2 * single + pair_load(*pairs)


def pair_load(s12: int, s13: int, s23: int) -> Fraction:
    """g: files on exactly two nodes are each wanted by the third; XORs pair them up."""
    total, largest = s12 + s13 + s23, max(s12, s13, s23)
    return Fraction(total, 2) if largest <= total - largest else Fraction(largest)


@dataclass(frozen=True)
class Allocation:
    """Which node stores which files, the subset sizes and the load they allow."""

    files: tuple[frozenset[int], ...]  # files[k]: the files node k stores
    sizes: dict[tuple[int, ...], int]  # node set -> files stored exactly there
    load: Fraction  # the load the coding scheme reaches on this allocation (K = 3: Lemma 1)
    bound: float  # the LP estimate (K > 3) or the load itself (K = 3)

    @property
    def storage(self) -> list[int]:
        return [len(f) for f in self.files]


def sizes_to_files(sizes: dict[tuple[int, ...], int], n_nodes: int) -> tuple[frozenset[int], ...]:
    """Number the files subset by subset: files of S come in a contiguous run."""
    files: list[set[int]] = [set() for _ in range(n_nodes)]
    nxt = 0
    for subset in sorted(sizes, key=lambda s: (len(s), s)):
        for n in range(nxt, nxt + sizes[subset]):
            for k in subset:
                files[k].add(n)
        nxt += sizes[subset]
    return tuple(frozenset(f) for f in files)


def optimal_sizes3(storage: list[int], n_files: int) -> dict[tuple[int, ...], int]:
    """The subset sizes minimising Lemma 1's load for K = 3 (exact search)."""
    check_storage(storage, n_files)
    m1, m2, m3 = storage
    best, best_load = None, None
    for s12, s13, s23 in itertools.product(range(n_files + 1), repeat=3):
        twice = m1 + m2 + m3 - n_files - s12 - s13 - s23
        if twice < 0 or twice % 2:
            continue
        s123 = twice // 2
        s1, s2, s3 = m1 - s12 - s13 - s123, m2 - s12 - s23 - s123, m3 - s13 - s23 - s123
        if min(s1, s2, s3) < 0:
            continue
        sizes = dict(zip(SUBSETS3, (s1, s2, s3, s12, s13, s23, s123), strict=True))
        load = lemma1_load(sizes)
        if best_load is None or load < best_load:
            best, best_load = sizes, load
    if best is None:  # pragma: no cover - check_storage rules this out
        raise ValueError(f"no allocation of {n_files} files fits storage {storage}")
    return best


def lp_sizes(storage: list[int], n_files: int) -> tuple[dict[tuple[int, ...], int], float]:
    """K > 3: the LP heuristic solved with integer sizes (HiGHS), and the relaxation's value."""
    from scipy.optimize import linprog

    check_storage(storage, n_files)
    k = len(storage)
    subsets = [s for r in range(1, k + 1) for s in itertools.combinations(range(k), r)]
    cost = np.array([(k - len(s)) / len(s) for s in subsets])
    a_eq = np.array([[1.0 if node in s else 0.0 for s in subsets] for node in range(k)]
                    + [[1.0] * len(subsets)])
    b_eq = np.array([*storage, n_files], dtype=float)
    relaxed = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    integer = linprog(cost, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs",
                      integrality=np.ones(len(subsets)))
    if not (relaxed.success and integer.success):  # pragma: no cover - check_storage guards
        raise ValueError(f"no allocation of {n_files} files fits storage {storage}")
    sizes = {s: int(round(v)) for s, v in zip(subsets, integer.x, strict=True) if round(v) > 0}
    return sizes, float(relaxed.fun)


def allocate(storage: list[int], n_files: int) -> Allocation:
    """The allocation mpicoded uses: exact for K = 3, the LP heuristic for K > 3."""
    from .scheme import plan_shuffle

    if len(storage) == 3:
        sizes = optimal_sizes3(storage, n_files)
        files = sizes_to_files(sizes, 3)
        load = lemma1_load(sizes)
        return Allocation(files, sizes, load, float(load))
    sizes, bound = lp_sizes(storage, n_files)
    files = sizes_to_files(sizes, len(storage))
    return Allocation(files, sizes, plan_shuffle(files, n_files).load, bound)
