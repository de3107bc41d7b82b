"""Partial work: a binary code re-cut into pieces (partition, row range), so a straggler's
finished rows count and the other holders of its partitions take over the rest (pure numpy).

A job coded on its results whose value is a sum over rows (an additive gradient) can be
decoded from pieces: partition j's rows are cut on a chunk grid, each piece (j, chunk) is
computed by some holder of j (a worker whose tasks include j), and the target is the sum of
every piece exactly once. The holders of j split its pieces into equal primary shares, which
are the workers' task lists: with no straggler every row is computed once, as uncoded, however
many replicas the code keeps. A worker done with its share takes the far half of the largest
share still owed among the partitions it holds (the Session decides, see
``core/pieces.py``), so a slow holder ascending and its helper descending meet in the middle.
``partial_code`` returns an ordinary Code whose tasks are the pieces: both executors of the
Session drive it like any other.

A job coded on its data (a matrix-vector product) is cut the other way (``range_code``): every
coded block's rows are cut on one grid of row ranges, and each range is decoded on its own, from
any tasks that suffice for it. The holders start their blocks at offsets spread round the grid,
each with a share of as many ranges as the code needs: with no straggler every range is
computed about as often as the code needs (work close to uncoded). A worker done with its share
computes, from its own block, the ranges of the far half of the largest share still owed (any
task will do for an MDS code; under a repetition code, such as spread, only a block's own
holders can), so a straggler's ranges are covered by the others (rateless-like).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from ._base import Code, Decoder, check_int

PIECES_A_HOLDER = 4  # default chunks: a holder's share of a partition in at least this many pieces


@dataclass(frozen=True)
class Piece:
    """Rows [start, stop) of block ``key``: a partition (a job coded on its results) or a
    coded task's block (coded on its data)."""

    key: int
    start: int
    stop: int


class PieceDecoder(Decoder):
    """Ready once every piece of all but ``tolerance`` partitions is in; ``sum`` adds each piece
    once, ``each`` adds them per partition. A piece received twice is counted once."""

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        self._keys: tuple[int, ...] = code.params["keys"]  # each piece's partition
        self._left = np.bincount(self._keys, minlength=code.n_partitions).tolist()
        self._incomplete = sum(1 for left in self._left if left)
        self._in_run: set[int] = set()  # pieces received in a run of several
        self._zeroed: set[int] = set()  # pieces whose value is in a run's, kept at another
        self._zero: np.ndarray | None = None  # what a piece summed in a run's value stands for

    def add_run(self, tasks: list[int], value: np.ndarray | None) -> bool:
        """Pieces ``tasks`` computed as one sum, ``value`` (None: ids alone), of one partition or,
        for an exact decode, of several. Those received already, each on its own, are
        superseded (their values count zero): every row counts once, and none is subtracted.
        Runs never overlap (each is of its computer's own share)."""
        if len(tasks) == 1:
            return self.add(tasks[0], value)
        seen = self._seen
        new = [t for t in tasks if t not in seen]
        if self.ready or not new:
            return self.ready
        old = [t for t in tasks if t in seen]
        if old and self._in_run.intersection(old):
            raise ValueError(f"runs of pieces overlap at {sorted(self._in_run.intersection(old))}")
        keys = self._keys
        if self.tolerance and any(keys[t] != keys[tasks[0]] for t in tasks):
            raise ValueError(f"a run of pieces spans partitions under a tolerance (a partition "
                             f"left out could not be taken out of its value): {tasks}")
        self._zeroed.update(old)
        self._zeroed.update(new[1:])  # the run's value is kept at its first new piece
        if value is not None:
            value = np.asarray(value)
            if self._zero is None or self._zero.shape != value.shape:
                self._zero = np.zeros_like(value)
                self._zero.flags.writeable = False  # shared by every piece a run stands for
            zero = self._zero
            for t in old:
                self.values[t] = zero
            for t in new:
                self.values[t] = value if t == new[0] else zero
        for t in new:
            seen.add(t)
            self.tasks.append(t)
            self.ready = self._update(t)
        self._in_run.update(tasks)
        return self.ready

    def _update(self, task: int) -> bool:
        j = self._keys[task]
        self._left[j] -= 1
        if self._left[j] == 0:
            self._incomplete -= 1
        return self._incomplete <= self.tolerance

    @property
    def missing_partitions(self) -> np.ndarray:
        return np.flatnonzero(self._left)

    def could_finish(self, held: set[int]) -> bool:
        """Whether workers holding the partitions ``held`` could still complete the decode."""
        return sum(int(j) not in held for j in self.missing_partitions) <= self.tolerance

    def combination(self) -> dict[int, float]:
        """Every piece of the complete partitions once: each run's value and each single."""
        zeroed = self._zeroed
        return dict.fromkeys((t for t in sorted(self.used) if t not in zeroed), 1.0)

    def _result(self) -> np.ndarray:
        if self.code.target == "sum":
            return super()._result()
        keys, left = self._keys, self._left
        size = self.value(self.tasks[0]).shape
        out = np.full((self.code.n_partitions, *size), np.nan)
        out[np.equal(left, 0)] = 0.0
        for t in self.tasks:
            if not left[keys[t]]:
                out[keys[t]] += self.value(t)
        return out

    @property
    def used(self) -> set[int]:
        keys, left = self._keys, self._left
        return {t for t in self.tasks if not left[keys[t]]}


def holders(code: Code) -> list[list[int]]:
    """holders[j]: the workers whose tasks include partition j, in worker order."""
    held: list[list[int]] = [[] for _ in range(code.n_partitions)]
    for w, tasks in enumerate(code.schedule):
        for j in sorted({int(j) for t in tasks for j in code.supports[t]}):
            held[j].append(w)
    return held


def _balanced(n: int, loads: list[int]) -> list[range]:
    """``range(n)`` in contiguous runs, one a holder, lengths within one, the longer ones going
    to the holders whose ``loads`` (primary pieces so far) are least."""
    base, extra = divmod(n, len(loads))
    longer = set(sorted(range(len(loads)), key=lambda i: (loads[i], i))[:extra])
    sizes = [base + (i in longer) for i in range(len(loads))]
    edges = np.concatenate([[0], np.cumsum(sizes)])
    return [range(int(edges[i]), int(edges[i + 1])) for i in range(len(loads))]


def partial_code(code: Code, rows: Sequence[int], chunk_rows: int) -> Code:
    """``code`` re-cut into pieces of at most ``chunk_rows`` rows of partitions of ``rows``
    rows; ValueError if ``code`` is not binary (a piece of a task with real coefficients has
    no meaning) or a partition has no holder."""
    if not np.isin(code.B, (0.0, 1.0)).all():
        raise ValueError(f"partial work needs a binary code (tasks that sum partitions); "
                         f"{code.name} has other coefficients: use frc, gfrc, spread, uncoded, ucmmc or "
                         "cpgc")
    if len(rows) != code.n_partitions:
        raise ValueError(f"{len(rows)} partition sizes for {code.n_partitions} partitions")
    chunk_rows = check_int("chunk_rows", chunk_rows, 1)
    held = holders(code)
    orphan = [j for j, h in enumerate(held) if not h]
    if orphan:
        raise ValueError(f"{code.name}: partition {orphan[0]} is in no worker's tasks")
    pieces: list[Piece] = []
    first: list[int] = []  # id of partition j's first piece
    for j, n in enumerate(rows):
        n = check_int(f"rows[{j}]", int(n), 1)
        first.append(len(pieces))
        for start in range(0, n, chunk_rows):
            pieces.append(Piece(j, start, min(n, start + chunk_rows)))
    counts = [first[j + 1] - first[j] for j in range(len(rows) - 1)] + [len(pieces) - first[-1]]
    primary: list[list[int]] = [[] for _ in range(code.n_workers)]
    for j, hs in enumerate(held):
        shares = _balanced(counts[j], [len(primary[w]) for w in hs])
        for i, owner in enumerate(hs):
            primary[owner].extend(first[j] + c for c in shares[i])  # ascending
    B = np.zeros((len(pieces), code.n_partitions))
    B[np.arange(len(pieces)), [p.key for p in pieces]] = 1.0
    holds = tuple(frozenset(j for j, hs in enumerate(held) if w in hs)
                  for w in range(code.n_workers))
    params = {**code.params, "pieces": tuple(pieces), "keys": tuple(p.key for p in pieces),
              "holds": holds, "of": code.name}
    return Code(f"{code.name} partial", B, tuple(map(tuple, primary)), code.target,
                PieceDecoder, params)


def piece_cost(code: Code) -> np.ndarray:
    """Each piece's units of injected delay: its rows over a 1/n share of the data's (as
    ``Code.work_units`` counts a task's), or over a coded block's rows (a pre-coded task costs
    one unit)."""
    rows = np.array([p.stop - p.start for p in code.params["pieces"]], dtype=np.float64)
    if "ranges" in code.params:
        return cast(np.ndarray, rows / code.params["ranges"][-1][1])
    return cast(np.ndarray, rows / (rows.sum() / code.n_workers))


class RangeDecoder(Decoder):
    """Pieces of coded blocks on one grid of row ranges (``range_code``): each range is decoded
    by its own decoder of the code cut, from the tasks whose piece of it arrived; ready once
    every range is. Exact only (tolerance 0): a partition's rows come from every range."""

    def __init__(self, code: Code, tolerance: int = 0) -> None:
        super().__init__(code, tolerance)
        if self.tolerance:
            raise ValueError(f"tolerance={self.tolerance}: {code.name} decodes every row range "
                             "exactly; allowed tolerance 0")
        base: Code = code.params["base"]
        self._ranges: tuple[tuple[int, int], ...] = code.params["ranges"]
        self._inner = [base.decoder() for _ in self._ranges]
        self._left = len(self._ranges)

    def needs(self, task: int) -> bool:
        return not self._inner[task % len(self._ranges)].ready and super().needs(task)

    def needed(self, tasks: list[int]) -> list[int]:
        return [t for t in tasks if self.needs(t)]

    def _update(self, task: int) -> bool:
        key, r = divmod(task, len(self._ranges))
        inner = self._inner[r]
        if not inner.ready and inner.add(key, self.values.get(task)):
            self._left -= 1
        return self._left == 0

    @property
    def missing_partitions(self) -> np.ndarray:
        return np.arange(0 if self.ready else self.code.n_partitions)

    def could_finish(self, held: set[int]) -> bool:
        """Whether workers holding the coded blocks ``held`` could still complete every range."""
        base: Code = self.code.params["base"]
        for received in {tuple(inner.tasks) for inner in self._inner if not inner.ready}:
            probe = base.decoder()  # once for each set of tasks in (one at the start)
            for key in [*received, *sorted(held)]:
                if probe.add(key):
                    break
            if not probe.ready:
                return False
        return True

    @property
    def used(self) -> set[int]:
        m = len(self._ranges)
        return {key * m + r for r, inner in enumerate(self._inner) for key in inner.used}

    def _result(self) -> np.ndarray:
        parts = [inner.result() for inner in self._inner]
        out = np.empty((self.code.n_partitions, self._ranges[-1][1], *parts[0].shape[2:]))
        for (start, stop), part in zip(self._ranges, parts, strict=True):
            out[:, start:stop] = part[:, : stop - start]
        return out


def grid_step(code: Code) -> int:
    """What ``range_code``'s number of ranges must be a multiple of for the holders' shares to
    tile the grid: the holders of a block under a repetition code (every task one partition,
    each on as many workers: a block's holders then split its ranges in equal runs, each range
    computed once), else the tasks (an MDS code's blocks start a share apart round the grid,
    each range computed by as many blocks as the code needs)."""
    counts = {len(h) for h in _task_holders(code)}
    return counts.pop() if _repetition(code) and len(counts) == 1 else code.n_tasks


def _repetition(code: Code) -> bool:
    """Whether every task is one partition, each partition one task (its copies are the
    workers holding it): no task can stand in for another."""
    return (code.n_tasks == code.n_partitions
            and bool((np.count_nonzero(code.B, axis=1) == 1).all()))


def _task_holders(code: Code) -> list[list[int]]:
    """_task_holders(code)[t]: the workers whose schedule lists task t, in worker order."""
    held: list[list[int]] = [[] for _ in range(code.n_tasks)]
    for w, tasks in enumerate(code.schedule):
        for t in dict.fromkeys(tasks):
            held[t].append(w)
    return held


def range_code(code: Code, height: int, ranges: int) -> Code:
    """``code``'s coded blocks (``height`` rows each) cut into ``ranges`` row ranges: piece
    key * ranges + r is range r of block (task) key. Holder i of a block starts at slot
    i * n_tasks + key of the holders' slots, spread evenly round the grid (a block's holders
    apart by ranges / holders when every block has as many), and its share (its list) is as many ranges
    as the code needs (n_partitions of every range's holders): with no straggler each range is
    computed as often as the code needs. Another block's piece of a range may stand in for a
    straggler's (``stand_ins``) unless the code is a repetition, whose every block is needed.
    ValueError if ``code`` decodes a sum (pieces of a task's value are only defined for
    row-aligned results) or a task has no holder."""
    if code.target != "each":
        raise ValueError(f"row ranges of coded blocks need a code whose target is 'each'; "
                         f"{code.name} decodes a sum")
    height = check_int("height", height, 1)
    m = check_int("ranges", ranges, 1, height)
    edges = np.linspace(0, height, m + 1).round().astype(int)
    grid = tuple((int(edges[r]), int(edges[r + 1])) for r in range(m))
    held = _task_holders(code)
    if not all(held):
        raise ValueError(f"{code.name}: task {held.index([])} is in no worker's schedule")
    slots = sum(len(h) for h in held)
    share = min(m, -(-m * code.n_partitions // slots))  # ranges a holder computes first
    primary: list[list[int]] = [[] for _ in range(code.n_workers)]
    slot = {(t, i): i * code.n_tasks + t for t, hs in enumerate(held) for i in range(len(hs))}
    for t, hs in enumerate(held):
        for i, w in enumerate(hs):  # evenly round the grid, a block's holders m / len(hs) apart
            offset = slot[t, i] * m // slots
            primary[w].extend(t * m + (offset + r) % m for r in range(share))
    pieces = tuple(Piece(t, start, stop) for t in range(code.n_tasks) for start, stop in grid)
    B = np.repeat(code.B, m, axis=0)
    holds = tuple(frozenset(tasks) for tasks in code.schedule)
    params = {**code.params, "pieces": pieces, "holds": holds, "of": code.name, "base": code,
              "ranges": grid, "value_size": max(stop - start for start, stop in grid),
              "stand_ins": not _repetition(code)}
    return Code(f"{code.name} partial", B, tuple(map(tuple, primary)), code.target,
                RangeDecoder, params)


def cut_rows(code: Code, rows: Sequence[int], chunk_rows: int, fit: bool = False) -> Code:
    """``partial_code`` in chunks of ``chunk_rows``; ``fit`` (the default chunks): smaller
    where needed for PIECES_A_HOLDER pieces a holder, so that a share can be split."""
    if fit:
        most = max(len(h) for h in holders(code))
        chunk_rows = max(1, min(chunk_rows, min(rows) // (PIECES_A_HOLDER * most)))
    return partial_code(code, rows, chunk_rows)


def cut_ranges(code: Code, height: int, chunk_rows: int, fit: bool = False) -> Code:
    """``range_code`` in ranges of at most ``chunk_rows`` rows; ``fit``: as many ranges as it
    takes for the holders' shares to tile the grid (``grid_step``), or a multiple of that."""
    if chunk_rows < 1:
        raise ValueError("--partial on needs chunks: --chunk-rows must be >= 1")
    ranges = -(-height // chunk_rows)
    if fit:
        step = grid_step(code)
        ranges = min(height, step * -(-ranges // step))
    return range_code(code, height, ranges)
