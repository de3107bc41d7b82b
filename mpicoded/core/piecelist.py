"""A worker's partial work (pure): which piece it computes next, and which finished pieces it
sends when. The MPI worker computes the pieces and sends the results; the model tests run this
same logic on simulated workers.

A worker's list for an iteration is its ITERATE's, or an ASSIGN's that came before it began
(``take_ahead``), or, when it is idle after its list and pieces are ASSIGNed, the new list of the
iteration it ran last (resumed). Between pieces it checks whether the iteration was dropped (a
PURGE, a newer ITERATE, STOP) and takes an ASSIGN's list in place of what is left of its own, the
pieces done meanwhile sent first. Finished pieces go out together at the end of the list, and
at least every ``flush_s`` seconds.

Pieces are cut fine so that a share can be split, but a job may pay for every call (an autograd
call each): consecutive pieces of the worker's own share are computed as one run (``Runs``), one call and
one value for all, up to about a chunk and a half of rows (more where a value is larger than a
chunk's data), across its partitions where the decode is exact.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import islice

from ..jobs.task import CHUNK_ELEMENTS
from .inbox import Inbox
from .protocol import Message, iterate_fields

Run = tuple[int, ...]  # pieces computed as one sum, in order
RUN_CHUNKS = 1.5  # a run's rows at most, in chunks (as a partition is cut into chunks)


def run_rows(chunk_rows: int, sleeps: bool = False, value_size: int = 0) -> int:
    """The rows a run holds at most, for chunks of ``chunk_rows``; 0 (pieces one at a time)
    where a delay is injected (``sleeps``): each piece has its own. A run costs a value of
    ``value_size`` entries (a call's setup, a sum, a message's bytes) where a chunk's data is
    ``CHUNK_ELEMENTS``: a value larger than that many entries (a model of millions of
    parameters) pays for as many more rows a run."""
    return 0 if sleeps else int(chunk_rows * RUN_CHUNKS * max(1.0, value_size / CHUNK_ELEMENTS))


@dataclass(frozen=True)
class Runs:
    """Which pieces join into one run: pieces of the worker's ``own`` share (the code's primary
    list), of one block, rows adjoining (or, ``span``, one after another in its list, of any
    of its blocks: an exact decode, whose every partition is complete), ``rows`` rows in all at
    most, a stretch of them cut into runs of even rows (two of 2000 rows, not 3000 and 1000: a
    run's rows stay in cache between the kernel's two passes over them). Only the owner of a
    share runs its pieces, so two runs never overlap; pieces taken over are computed alone."""

    pieces: Mapping[int, tuple[int, int, int]]  # piece -> (block, first row, end row)
    own: frozenset[int]
    rows: int
    span: bool = False

    @functools.cached_property
    def follows(self) -> dict[int, int]:
        """Own piece -> the own piece of its block whose rows begin where its rows end."""
        starts = {(self.pieces[t][0], self.pieces[t][1]): t for t in self.own}
        return {t: q for t in self.own
                if (q := starts.get((self.pieces[t][0], self.pieces[t][2]))) is not None}

    def joining(self, first: int, queue: deque[int]) -> int:
        """How many pieces at the head of ``queue`` join ``first``'s run."""
        follows, pieces, own = self.follows, self.pieces, self.own
        stretch, last = 0, first
        while stretch < len(queue) and (queue[stretch] in own if self.span
                                        else follows.get(last) == queue[stretch]):
            last = queue[stretch]
            stretch += 1
        sizes = [pieces[t][2] - pieces[t][1] for t in (first, *islice(queue, stretch))]
        total = sum(sizes)
        even = total / -(-total // self.rows)  # the stretch's rows over the runs it needs
        joined, rows = 0, sizes[0]
        while joined < stretch and rows + sizes[joined + 1] <= even:
            joined += 1
            rows += sizes[joined]
        return joined


class PieceList:
    """The pieces of the iteration under way for the worker of comm rank ``rank``."""

    def __init__(self, rank: int, flush_s: float, runs: Runs | None = None) -> None:
        self.rank, self.flush_s, self.runs = rank, flush_s, runs
        self.queue: deque[int] = deque()
        self.done: set[int] = set()  # the iteration's pieces computed (sent or about to be)
        self.unsent: list[Run] = []
        self.last_sent = 0.0
        self.slot = 0  # the next piece's slot in the iteration (its injected delay's key)
        self.resumed = False
        self.dropped = 0  # pieces given up: handed to others, or cut by a purge

    def begin(self, inbox: Inbox, msg: Message, now: float) -> None:
        """Start ``msg`` (the inbox's ``next_iteration``) with the list it should run."""
        tasks = iterate_fields(msg, self.rank)[0]
        self.resumed = inbox.assigned is not None
        if self.resumed:  # pieces handed over once this worker was idle
            tasks = inbox.take_assigned()
        elif (ahead := inbox.take_ahead(msg)) is not None:  # ASSIGNed before it began
            self.dropped += len(set(tasks).difference(ahead))  # handed to idle holders
            tasks = ahead
        if not self.resumed:
            self.slot, self.done = 0, set()
        self.queue = deque(t for t in tasks if t not in self.done)
        self.unsent, self.last_sent = [], now

    def next(self, inbox: Inbox, interrupted: Callable[[], bool]) -> tuple[list[Run],
                                                                           Run | None]:
        """Between pieces: (finished runs to send first, the run to compute next). None for
        the run: the list is over (its last pieces are in the first part), or the iteration
        was dropped (``queue`` still holds the list: ``drop`` it)."""
        if not self.queue:
            return self._flush(), None
        if self.slot and interrupted():
            return [], None  # the caller drops it
        self.slot += 1
        send: list[Run] = []
        if inbox.assigned is not None:  # pieces handed to it, or taken away
            send = self._flush()
            mine = set(self.queue)
            self.queue = deque(t for t in inbox.take_assigned() if t not in self.done)
            self.dropped += len(mine.difference(self.queue))  # handed to idle holders
            if not self.queue:  # every piece it had left went to idle holders
                return send, None
        run = [self.queue.popleft()]
        for _ in range(0 if self.runs is None else self.runs.joining(run[0], self.queue)):
            run.append(self.queue.popleft())
        return send, tuple(run)

    def finished(self, run: Run, now: float) -> list[Run]:
        """``run`` is computed: the runs to send now (every ``flush_s``), maybe none."""
        self.done.update(run)
        self.unsent.append(run)
        return self._flush(now) if now - self.last_sent >= self.flush_s else []

    def drop(self, cut: Run | None = None) -> tuple[list[int], list[int]]:
        """The iteration was dropped (``cut``: the run under way): the finished pieces not
        sent yet, lost, and those never begun."""
        lost = [t for run in self.unsent for t in run]
        self.unsent = []
        left = list(self.queue)
        self.queue.clear()
        self.dropped += len(left) + len(lost) + (0 if cut is None else len(cut))
        return lost, left

    def _flush(self, now: float | None = None) -> list[Run]:
        out, self.unsent = self.unsent, []
        if now is not None:
            self.last_sent = now
        return out
