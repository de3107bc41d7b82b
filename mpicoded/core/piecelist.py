"""A worker's partial work (pure): which piece it computes next, and which finished pieces it
sends when. The MPI worker computes the pieces and sends the results; the model tests run this
same logic on simulated workers.

A worker's list for an iteration is its ITERATE's, or an ASSIGN's that came before it began
(``take_ahead``), or, when it is idle after its list and pieces are ASSIGNed, the new list of the
iteration it ran last (resumed). Between pieces it checks whether the iteration was dropped (a
PURGE, a newer ITERATE, STOP) and takes an ASSIGN's list in place of what is left of its own, the
pieces done meanwhile sent first. Finished pieces go out together at the end of the list, and
at least every ``flush_s`` seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .inbox import Inbox
from .protocol import Message, iterate_fields


class PieceList:
    """The pieces of the iteration under way for the worker of comm rank ``rank``."""

    def __init__(self, rank: int, flush_s: float) -> None:
        self.rank, self.flush_s = rank, flush_s
        self.queue: deque[int] = deque()
        self.done: set[int] = set()  # the iteration's pieces computed (sent or about to be)
        self.unsent: list[int] = []
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

    def next(self, inbox: Inbox, interrupted: Callable[[], bool]) -> tuple[list[int], int | None]:
        """Between pieces: (finished pieces to send first, the piece to compute next). None
        for the piece: the list is over (its last pieces are in the first part), or the
        iteration was dropped (``queue`` still holds the list: ``drop`` it)."""
        if not self.queue:
            return self._flush(), None
        if self.slot and interrupted():
            return [], None  # the caller drops it
        self.slot += 1
        send: list[int] = []
        if inbox.assigned is not None:  # pieces handed to it, or taken away
            send = self._flush()
            mine = set(self.queue)
            self.queue = deque(t for t in inbox.take_assigned() if t not in self.done)
            self.dropped += len(mine.difference(self.queue))  # handed to idle holders
            if not self.queue:  # every piece it had left went to idle holders
                return send, None
        return send, self.queue.popleft()

    def finished(self, task: int, now: float) -> list[int]:
        """``task`` is computed: the pieces to send now (every ``flush_s``), maybe none."""
        self.done.add(task)
        self.unsent.append(task)
        return self._flush(now) if now - self.last_sent >= self.flush_s else []

    def drop(self, cut: int | None = None) -> tuple[list[int], list[int]]:
        """The iteration was dropped (``cut``: the piece under way): the finished pieces not
        sent yet, lost, and those never begun."""
        lost, self.unsent = self.unsent, []
        left = list(self.queue)
        self.queue.clear()
        self.dropped += len(left) + len(lost) + (cut is not None)
        return lost, left

    def _flush(self, now: float | None = None) -> list[int]:
        out, self.unsent = self.unsent, []
        if now is not None:
            self.last_sent = now
        return out
