"""Decoders: structured ones where the code's structure allows, the generic one elsewhere.

- ``GenericDecoder``: any B; rank test on an orthonormal basis of the received rows.
- ``IntervalDecoder``: binary codes whose tasks sum contiguous runs of partitions (FRC, GFRC);
  a binary decoding vector is a chain of received runs covering 0..k, found by reachability.
- ``PeelingDecoder``: tasks of degree <= 2 (uncoded, UC-MMC, CPGC); a partition is known once a
  degree-one task names it, or a degree-two task pairs it with a known one.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from ._base import Code, Decoder

_NONE = np.empty(0, dtype=np.intp)  # no partition missing: shared, so read-only
_NONE.flags.writeable = False


class GenericDecoder(Decoder):
    """Works for any B: keeps an orthonormal basis of the received rows' span.

    Target ``sum`` is recoverable once the all-ones vector lies in that span (its squared
    projection reaches k); partition j of target ``each`` once e_j does (row j of the basis has
    unit norm). Both are tracked incrementally, O(k·rank) a result. Values are combined once,
    at ``result()``, by the pseudo-inverse of the received rows.
    """

    _TOL = 1e-9

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        if code.target == "sum" and self.tolerance:
            raise ValueError(
                f"tolerance={self.tolerance}: {code.name} decodes a sum with the generic decoder, "
                "which recovers all or nothing; allowed tolerance 0"
            )
        k = code.n_partitions
        self._basis = np.zeros((k, k))
        self._rank = 0
        self._row_norms = np.zeros(k)  # squared norms of the basis rows: 1 once e_j is in span
        self._ones_proj = 0.0  # squared norm of the projection of the all-ones vector

    def _update(self, task: int) -> bool:
        k = self.code.n_partitions
        if self._rank == k:
            return True
        basis = self._basis[:, : self._rank]
        row = self.code.B[task]
        for _ in range(2):  # re-orthogonalise once for stability
            row = row - basis @ (basis.T @ row)
        norm = np.linalg.norm(row)
        if norm > self._TOL * max(1.0, float(np.linalg.norm(self.code.B[task]))):
            q = row / norm
            self._basis[:, self._rank] = q
            self._rank += 1
            self._row_norms += q * q
            self._ones_proj += float(q.sum()) ** 2
        if self.code.target == "each":
            return k - int(np.count_nonzero(self._row_norms > 1.0 - 1e-7)) <= self.tolerance
        return k - self._ones_proj < 1e-9 * k  # squared distance of 1 from the span

    @property
    def missing_partitions(self) -> np.ndarray:
        if self.code.target == "sum":  # a sum is all or nothing here (tolerance 0)
            return np.arange(0 if self.ready else self.code.n_partitions)
        return np.flatnonzero(self._row_norms <= 1.0 - 1e-7)

    def combination(self) -> dict[int, float]:
        rows = self.code.B[self.tasks]
        coef = np.linalg.lstsq(rows.T, np.ones(self.code.n_partitions), rcond=None)[0]
        return {t: float(c) for t, c in zip(self.tasks, coef, strict=True) if c != 0.0}

    def _result(self) -> np.ndarray:
        if self.code.target == "sum":
            return super()._result()
        values = np.stack([self.value(t) for t in self.tasks])
        flat = values.reshape(len(values), -1)
        # the small matrix's pseudo-inverse, then one product: lstsq factors the right-hand
        # side too (5 x 5 rows, 24000 values each: 4.1 ms against 0.13)
        each = np.linalg.pinv(self.code.B[self.tasks]) @ flat
        each[self.missing_partitions] = np.nan
        return cast(np.ndarray, each.reshape((self.code.n_partitions, *values.shape[1:])))


def _intervals(code: Code) -> list[tuple[int, int]]:
    """Each task's run [start, stop) of partitions; checks the code is binary and contiguous."""
    runs = []
    for t, support in enumerate(code.supports):
        start, stop = int(support[0]), int(support[-1]) + 1
        if stop - start != len(support) or not np.all(code.B[t, support] == 1.0):
            raise ValueError(f"{code.name}: task {t} is not a binary run of partitions")
        runs.append((start, stop))
    return runs


class IntervalDecoder(Decoder):
    """Binary decoding for codes whose tasks each sum a contiguous run of partitions.

    The sum is recoverable when received runs chain from 0 to k: each class of a (G)FRC code is
    such a chain, and so is a mix of runs from several classes that meet at shared boundaries.
    Exact decoding is an incremental reachability over the k + 1 boundaries (O(1) amortised a
    result). With a tolerance, a shortest-path pass finds the chain that skips fewest partitions.
    """

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        if "intervals" not in code.__dict__:
            code.__dict__["intervals"] = _intervals(code)
        self._runs: list[tuple[int, int]] = code.__dict__["intervals"]
        self._reach: dict[int, tuple[int, int] | None] = {0: None}  # boundary -> (task, from)
        self._waiting: dict[int, list[int]] = {}  # start boundary -> received tasks not reached
        self._path: list[int] = []
        self._missing = np.arange(code.n_partitions)

    def _update(self, task: int) -> bool:
        start, _ = self._runs[task]
        if start in self._reach:
            self._extend(task)
        else:
            self._waiting.setdefault(start, []).append(task)
        k = self.code.n_partitions
        if k in self._reach:
            self._path, self._missing = self._chain(), np.arange(0)
            return True
        if self.tolerance:
            path, missing = self._fewest_gaps()
            if len(missing) <= self.tolerance:
                self._path, self._missing = path, missing
                return True
        return False

    def _extend(self, task: int) -> None:
        stack = [task]
        while stack:
            t = stack.pop()
            start, stop = self._runs[t]
            if stop not in self._reach:
                self._reach[stop] = (t, start)
                stack.extend(self._waiting.pop(stop, []))

    def _chain(self) -> list[int]:
        path, at = [], self.code.n_partitions
        while (step := self._reach[at]) is not None:
            path.append(step[0])
            at = step[1]
        return path

    def _fewest_gaps(self) -> tuple[list[int], np.ndarray]:
        """Chain from 0 to k that skips the fewest partitions (DAG shortest path, 0/1 costs)."""
        k = self.code.n_partitions
        starting: dict[int, list[int]] = {}
        for t in self.tasks:
            starting.setdefault(self._runs[t][0], []).append(t)
        cost = [0] + [k + 1] * k
        back: list[tuple[int, int] | None] = [None] * (k + 1)  # (task or -1 for a skip, from)
        for p in range(k):
            if cost[p] + 1 < cost[p + 1]:
                cost[p + 1], back[p + 1] = cost[p] + 1, (-1, p)
            for t in starting.get(p, ()):
                stop = self._runs[t][1]
                if cost[p] < cost[stop]:
                    cost[stop], back[stop] = cost[p], (t, p)
        path, missing, at = [], [], k
        while at:
            step = back[at]
            assert step is not None  # every cost is finite: skips alone reach each partition
            t, prev = step
            if t < 0:
                missing.append(prev)
            else:
                path.append(t)
            at = prev
        return path, np.array(sorted(missing), dtype=int)

    @property
    def used(self) -> set[int]:
        return set(self._path) if self.ready else set(self.tasks)

    @property
    def missing_partitions(self) -> np.ndarray:
        return self._missing

    def combination(self) -> dict[int, float]:
        return dict.fromkeys(self._path, 1.0)


class PeelingDecoder(Decoder):
    """Decoding of degree <= 2 codes by peeling; ``each`` gives every partition, ``sum`` adds them.

    A degree-two task a·W_i + b·W_j waits until W_i or W_j is known, then yields the other. Work
    is O(1) amortised a result; values are solved once, in the order partitions were learnt.
    """

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        if "degrees_ok" not in code.__dict__:
            too_big = [t for t, s in enumerate(code.supports) if not 1 <= len(s) <= 2]
            if too_big:
                raise ValueError(f"{code.name}: peeling needs tasks of degree 1 or 2; "
                                 f"task {too_big[0]} has degree {len(code.supports[too_big[0]])}")
            code.__dict__["degrees_ok"] = True
        self._how: dict[int, tuple[int, int]] = {}  # partition -> (task, partner or -1)
        self._order: list[int] = []
        self._pending: dict[int, list[int]] = {}  # unknown partition -> degree-2 tasks naming it

    def _update(self, task: int) -> bool:
        support = self.code.supports[task]
        if len(support) == 1:
            self._learn(int(support[0]), task, -1)
        else:
            i, j = int(support[0]), int(support[1])
            if i in self._how and j not in self._how:
                self._learn(j, task, i)
            elif j in self._how and i not in self._how:
                self._learn(i, task, j)
            elif i not in self._how:
                self._pending.setdefault(i, []).append(task)
                self._pending.setdefault(j, []).append(task)
        return self.code.n_partitions - len(self._how) <= self.tolerance

    def _learn(self, partition: int, task: int, partner: int) -> None:
        stack = [(partition, task, partner)]
        while stack:
            p, t, q = stack.pop()
            if p in self._how:
                continue
            self._how[p] = (t, q)
            self._order.append(p)
            for t2 in self._pending.pop(p, []):
                a, b = (int(x) for x in self.code.supports[t2])
                other = b if a == p else a
                if other not in self._how:
                    stack.append((other, t2, p))

    @property
    def used(self) -> set[int]:
        return {t for t, _ in self._how.values()}

    @property
    def missing_partitions(self) -> np.ndarray:
        if len(self._how) == self.code.n_partitions:  # every iteration without a straggler
            return _NONE
        known = np.zeros(self.code.n_partitions, dtype=bool)
        known[list(self._how)] = True
        return np.flatnonzero(~known)

    def combination(self) -> dict[int, float]:
        """Each partition learnt, as a combination of task values (in the order learnt: a
        partner is learnt before the partition it yields), added up."""
        B = self.code.B
        solved: dict[int, dict[int, float]] = {}
        out: dict[int, float] = {}
        for p in self._order:
            t, q = self._how[p]
            combo = {t: 1.0}
            if q >= 0:
                for k, c in solved[q].items():
                    combo[k] = combo.get(k, 0.0) - B[t, q] * c
            b = B[t, p]
            solved[p] = combo if b == 1.0 else {k: c / b for k, c in combo.items()}
            for k, c in solved[p].items():
                out[k] = out.get(k, 0.0) + c
        return {k: c for k, c in out.items() if c != 0.0}

    def _result(self) -> np.ndarray:
        if self.code.target == "sum":
            return super()._result()
        B = self.code.B
        solved: dict[int, np.ndarray] = {}
        for p in self._order:
            t, q = self._how[p]
            v = self.value(t) if q < 0 else self.value(t) - B[t, q] * solved[q]
            b = B[t, p]
            solved[p] = v if b == 1.0 else v / b
        first = next(iter(solved.values()))
        each = np.full((self.code.n_partitions, *first.shape), np.nan)
        for p, v in solved.items():
            each[p] = v
        return each
