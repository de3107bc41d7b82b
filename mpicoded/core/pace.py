"""Each worker's pace (pure): seconds a row, from the results it sent, so that partial work's
hand-over can tell a slow holder from one a little behind (held back by its CPU quota for a
while, say), which is not worth the messages and the rows computed twice of a hand-over."""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence

ROUNDS = 5  # a worker's pace is its time over its rows in its last rounds
SLOW = 4.0  # a worker this many times the workers' typical pace is slow
SLACK = 1.0  # a holder this far (of its expected time) past its expected end is overdue, or
# there once silent for SILENT times the workers' typical longest silence, if sooner
SILENT = 1.5


class Paces:
    """Seconds a row for each worker: in a round, the time from its start to a result, less
    the time it waited idle before taking pieces over, over the rows reported (or, for a
    worker with pieces left when the round decoded, to then over those rows and its next
    piece's); over rounds, its time over its rows in its last ROUNDS, or this round's pace if
    slower. Time over rows, not a median of paces: a capped worker computes in bursts of its
    quota (a rank at a third of the others' share may compute at full speed for two rounds
    of three, then not at all), and one slow round weighs only its own time. A worker's
    longest silence in a round (between two results, or from its start): the median
    worker's, the longest in the last ROUNDS, is the typical one; SILENT times that, no
    worker on time keeps (``stalled``)."""

    def __init__(self, rows: Sequence[int]) -> None:
        self.rows = rows  # each piece's rows
        self.recent: dict[int, deque[tuple[float, int]]] = {}  # worker -> its last rounds'
        # (seconds, rows)
        self.spent: dict[int, tuple[float, int]] = {}  # worker -> (seconds, rows) in the open
        # round
        self.done: dict[int, int] = {}  # worker -> rows reported in the open round
        self.last: dict[int, float] = {}  # worker -> its last result's time in the open round
        self.begun: dict[int, tuple[float, int]] = {}  # worker -> (its start, less the time it
        # waited idle, and the rows done by then: its pace counts from there)
        self.back: dict[int, float] = {}  # worker -> when it last took pieces over
        self.quiet: dict[int, float] = {}  # worker -> its longest silence in the open round
        self.silences: deque[float] = deque(maxlen=ROUNDS)  # the median one, last rounds
        self.started = 0.0
        self.median: tuple[float | None] | None = None  # the typical pace, until one changes
        self.kept: dict[int, float | None] = {}  # each worker's pace, until its own changes

    def open(self, now: float) -> None:
        """A new round, sent out at ``now``."""
        for w, spent in self.spent.items():
            self.recent.setdefault(w, deque(maxlen=ROUNDS)).append(spent)
        if self.quiet:
            self.silences.append(statistics.median(self.quiet.values()))
        self.started = now
        self.median = None
        self.kept.clear()
        self.spent.clear()
        self.done.clear()
        self.last.clear()
        self.begun.clear()
        self.back.clear()
        self.quiet.clear()

    def reported(self, worker: int, tasks: list[int], now: float) -> None:
        """``worker`` sent ``tasks`` (pieces) of the open round at ``now``."""
        rows = self.rows
        done = self.done[worker] = self.done.get(worker, 0) + sum([rows[t] for t in tasks])
        self.quiet[worker] = max(self.quiet.get(worker, 0.0), now - self._began(worker))
        self.last[worker] = now
        began, before = self.begun.get(worker, (self.started, 0))
        if done > before and now > began:
            self._count(worker, now - began, done - before)

    def resumed(self, worker: int, now: float, waited: bool = True) -> None:
        """``worker``, idle since its last result (or since it last took pieces over), took
        pieces over at ``now``: the time it ``waited`` does not count in its pace (one robbed
        of its last piece since may have been computing it all along: that time counts)."""
        began, before = self.begun.get(worker, (self.started, 0))
        idle = now - max(self.last.get(worker, self.started), self.back.get(worker, 0.0))
        self.begun[worker] = (began + max(idle, 0.0) * waited, before)
        self.back[worker] = now

    def forget(self, worker: int) -> None:
        """``worker`` is lost: its pace no longer counts in the typical one."""
        for paces in (self.recent, self.spent, self.done, self.last, self.begun, self.back,
                      self.quiet, self.kept):
            paces.pop(worker, None)
        self.median = None

    def behind(self, worker: int, rows: int, now: float) -> None:
        """``worker`` had not sent ``rows`` more by ``now``, when the round decoded without
        them: its pace is at least that slow (a straggler's results all come too late to be
        measured)."""
        began, before = self.begun.get(worker, (self.started, 0))
        rows += self.done.get(worker, 0) - before
        if (now - began) / rows > (self.current(worker) or 0.0):
            self._count(worker, now - began, rows)

    def _count(self, worker: int, seconds: float, rows: int) -> None:
        """``worker``'s time and rows in the open round, so far."""
        self.spent[worker] = (seconds, rows)
        self.median = None
        self.kept.pop(worker, None)

    def current(self, worker: int) -> float | None:
        """``worker``'s pace in the open round, if it sent a result in it."""
        spent = self.spent.get(worker)
        return None if spent is None else spent[0] / spent[1]

    def pace(self, worker: int) -> float | None:
        """``worker``'s pace: its time over its rows in its last rounds, or this one's so far
        if slower (asked for every pair of idle worker and holder at every result: kept)."""
        if worker in self.kept:
            return self.kept[worker]
        recent, current = self.recent.get(worker), self.current(worker)
        paces = [sum(s for s, _ in recent) / sum(r for _, r in recent)] if recent else []
        paces += [current] if current is not None else []
        pace = self.kept[worker] = max(paces) if paces else None
        return pace

    def typical(self) -> float | None:
        """The workers' median pace, each's latest."""
        if self.median is None:
            latest = {w: s / r for w, (s, r) in (
                [(w, p[-1]) for w, p in self.recent.items() if p] + list(self.spent.items()))}
            self.median = (statistics.median(latest.values()) if latest else None,)
        return self.median[0]

    def slow(self, worker: int) -> bool:
        """Whether ``worker`` is slow: its pace SLOW times the typical one."""
        pace, typical = self.pace(worker), self.typical()
        return pace is not None and typical is not None and pace > SLOW * typical

    def faster(self, worker: int, other: int) -> bool:
        """Whether ``worker`` (of no known pace: the typical one) is at least twice as fast
        as ``other``."""
        pace, theirs = self.pace(worker) or self.typical(), self.pace(other)
        return pace is not None and theirs is not None and 2 * pace <= theirs

    def sooner(self, worker: int, holder: int, owed: list[int], now: float) -> bool:
        """Whether ``worker``, taking the far half of ``owed`` (``holder``'s pieces still to
        come) at ``now``, would be done with it before ``holder`` with all of them, each at
        its pace (the typical one, if it has none)."""
        mine, theirs = self.pace(worker) or self.typical(), self._expected(holder)
        if mine is None or theirs is None:
            return False
        rows = [self.rows[t] for t in owed]
        return now + sum(rows[len(rows) // 2:]) * mine < self._began(holder) + sum(rows) * theirs

    def _expected(self, worker: int) -> float | None:
        """``worker``'s pace in this round if it sent a result in it, else in its last
        rounds, else the typical pace."""
        return self.current(worker) or self.pace(worker) or self.typical()

    def _began(self, worker: int) -> float:
        """When ``worker`` began what it still owes: its last result, or when it last took
        pieces over."""
        return max(self.last.get(worker, self.started), self.back.get(worker, 0.0))

    def finish(self, worker: int, owed: list[int]) -> float | None:
        """When ``worker`` would be done with ``owed`` at its expected pace, from when it began
        them (None: no pace known at all)."""
        pace = self._expected(worker)
        return None if pace is None else self._began(worker) + sum([self.rows[t] for t in owed]) * pace

    def due(self, worker: int, owed: list[int]) -> float | None:
        """When ``worker`` is overdue with ``owed`` (its pieces still to come, in its order):
        past when it would be done, from its last result or the last time it took pieces over,
        at its pace in this round (if it has sent a result in it) or in its last rounds, or the
        workers' typical pace if it has never sent one, by SLACK times that, or once silent for
        SILENT times the typical longest silence, if sooner (a round many quota periods long is
        not that much late; a worker silent that long when it should be done is stalled; one
        that sent just before its end, owing a little, may so be later than before, by up to
        half a silence); None if no pace is known at all."""
        alone = self.finish(worker, owed)
        if alone is None:
            return None
        late = alone + SLACK * (alone - self.started)
        stalled = self.stalled()
        return late if stalled is None else max(alone, min(late, self._began(worker) + stalled))

    def stalled(self) -> float | None:
        """A silence no worker on time keeps: SILENT times the typical longest one (None:
        none measured yet)."""
        return SILENT * max(self.silences) if self.silences else None
