"""The coded shuffle: which node broadcasts which XOR of intermediate values (paper 002, Lemma 1).

Node k wants v_{k,n} for every file n it does not store. One broadcast from node i of
v_{a,n} XOR v_{b,m} serves two of those wants at once when i stores n and m, a stores m but not
n, and b stores n but not m: each receiver computes the other term from its own file. For K = 3
the pairs are exactly Lemma 1's: node i pairs files of S_ij (wanted by l) with files of S_il
(wanted by j), x_i times, with x_i + x_j <= S_ij; case 1 (triangle inequality) pairs every want
of the two-node files, case 2 pairs what it can and the rest of the largest set is sent plain.
When case 1 needs half pairs, each value is split into two packets. For K > 3 wants are paired
greedily. Everything not paired is sent plain by a node that stores the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

Part = tuple[int, int, int]  # (receiver k, file n, packet p): the packet p of v_{k,n}


@dataclass(frozen=True)
class Transmission:
    """One broadcast: ``sender`` sends the XOR of the parts' packets."""

    sender: int
    parts: tuple[Part, ...]


@dataclass
class ShufflePlan:
    """The broadcasts of a shuffle, each one packet (1 / ``packets`` of a value) long."""

    packets: int
    transmissions: list[Transmission] = field(default_factory=list)

    @property
    def load(self) -> Fraction:
        """The paper's load: equations sent, in units of one intermediate value."""
        return Fraction(len(self.transmissions), self.packets)


def holders_of(files: tuple[frozenset[int], ...], n_files: int) -> list[frozenset[int]]:
    return [frozenset(k for k, f in enumerate(files) if n in f) for n in range(n_files)]


def wants(files: tuple[frozenset[int], ...], n_files: int) -> list[tuple[int, int]]:
    """Every (node, file) pair where the node needs the file's value and lacks the file."""
    return [(k, n) for n in range(n_files) for k in range(len(files)) if n not in files[k]]


def uncoded_plan(files: tuple[frozenset[int], ...], n_files: int) -> ShufflePlan:
    """Every want sent plain by the first node that stores the file."""
    holders = holders_of(files, n_files)
    return ShufflePlan(1, [Transmission(min(holders[n]), ((k, n, 0),))
                           for k, n in wants(files, n_files)])


def _pair(a: int, b: int) -> tuple[int, int]:
    """The pair of nodes a, b, smaller first (``tuple(sorted((a, b)))``)."""
    return (a, b) if a <= b else (b, a)


def _pair_counts3(s: dict[tuple[int, int], int]) -> dict[int, Fraction]:
    """x_i for K = 3: pairs broadcast by node i, maximising x_0 + x_1 + x_2."""
    total = sum(s.values())
    largest = max(s, key=s.__getitem__)
    if s[largest] <= total - s[largest]:  # case 1: x_i = (S_ij + S_il - S_jl) / 2
        return {i: Fraction(s[_pair(i, j)] + s[_pair(i, lo)] - s[_pair(j, lo)], 2)
                for i in range(3) for j, lo in [tuple(x for x in range(3) if x != i)]}
    j, lo = largest  # case 2: S_jl too big; j and l pair all of S_ij and S_il with it
    i = 3 - j - lo
    return {i: Fraction(0), j: Fraction(s[_pair(i, j)]), lo: Fraction(s[_pair(i, lo)])}


def plan_shuffle(files: tuple[frozenset[int], ...], n_files: int) -> ShufflePlan:
    """The coded shuffle for an allocation (Lemma 1's scheme for K = 3, greedy pairs beyond)."""
    if len(files) == 3:
        return _plan3(files, n_files)
    return _plan_greedy(files, n_files)


def _plain(plan: ShufflePlan, holders: list[frozenset[int]], k: int, n: int) -> None:
    for p in range(plan.packets):
        plan.transmissions.append(Transmission(min(holders[n]), ((k, n, p),)))


def _plan3(files: tuple[frozenset[int], ...], n_files: int) -> ShufflePlan:
    holders = holders_of(files, n_files)
    two = {pair: [n for n in range(n_files) if holders[n] == frozenset(pair)]
           for pair in ((0, 1), (0, 2), (1, 2))}
    x = _pair_counts3({pair: len(ns) for pair, ns in two.items()})
    packets = 2 if any(v.denominator == 2 for v in x.values()) else 1
    plan = ShufflePlan(packets)
    # the two-node files' wants as packet units, consumed in order
    queue = {pair: [(3 - sum(pair), n, p) for n in ns for p in range(packets)]
             for pair, ns in two.items()}
    for i in range(3):
        j, lo = (x for x in range(3) if x != i)
        with_j, with_l = queue[_pair(i, j)], queue[_pair(i, lo)]
        for _ in range(int(x[i] * packets)):
            plan.transmissions.append(Transmission(i, (with_j.pop(0), with_l.pop(0))))
    for units in queue.values():  # case 2's leftover, sent plain
        plan.transmissions.extend(Transmission(min(holders[n]), ((k, n, p),))
                                  for k, n, p in units)
    for k, n in wants(files, n_files):
        if len(holders[n]) == 1:
            _plain(plan, holders, k, n)
    return plan


def _plan_greedy(files: tuple[frozenset[int], ...], n_files: int) -> ShufflePlan:
    holders = holders_of(files, n_files)
    plan = ShufflePlan(1)
    open_wants = wants(files, n_files)
    paired: set[int] = set()
    for x, (a, n) in enumerate(open_wants):
        if x in paired:
            continue
        for y in range(x + 1, len(open_wants)):
            b, m = open_wants[y]
            if y in paired or b == a or n == m:
                continue
            common = holders[n] & holders[m]
            if common and a in holders[m] and b in holders[n]:
                plan.transmissions.append(Transmission(min(common), ((a, n, 0), (b, m, 0))))
                paired.update((x, y))
                break
        else:
            _plain(plan, holders, a, n)
    return plan


def check_plan(plan: ShufflePlan, files: tuple[frozenset[int], ...], n_files: int) -> None:
    """Every want is met and every receiver can cancel the other terms; raises if not."""
    got = set()
    for t in plan.transmissions:
        for k, n, p in t.parts:
            if n not in files[t.sender]:
                raise AssertionError(f"node {t.sender} sends a value of file {n} it lacks")
            others = [q for q in t.parts if q != (k, n, p)]
            if any(m not in files[k] for _, m, _ in others):
                raise AssertionError(f"node {k} cannot cancel the other terms of {t}")
            got.add((k, n, p))
    need = {(k, n, p) for k, n in wants(files, n_files) for p in range(plan.packets)}
    if need - got:
        raise AssertionError(f"wants never met: {sorted(need - got)[:5]}")
