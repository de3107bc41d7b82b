"""What the master has sent a worker and the worker has not acted on yet (pure: no MPI).

A worker never starts stale work: before it starts an ITERATE it reads everything that arrived
and keeps only the newest iteration that is not purged; superseded ITERATEs and their purges are
dropped unread. While it computes it asks ``dropped()`` between chunks (once a probe says a
message came): true once the iteration under way is purged, superseded by a newer ITERATE, or
ended by STOP. Without purging
(``purge=False``, how public peers behave) every ITERATE is run in the order sent, stale or not,
and STOP comes after all of them.

Under partial work the master may ASSIGN the worker other pieces of the iteration under way
(``assigned``, taken between pieces) or, once it is idle, of the last one it ran: that one is
resumed (``next_iteration`` returns it again) unless it was purged or something newer came. An
ASSIGN for an ITERATE read but not started yet replaces that ITERATE's list (``take_ahead``):
the master counts on the ASSIGNed pieces, whether or not the worker had begun.

A large θ comes relayed (``on_relay`` forwards each ITERATE taken, before anything else): an
ITERATE then comes from another worker, the master's PURGE, ASSIGN or STOP of its round may
come first, and a re-send after a relaying rank's death may come twice. A PURGE of a round not
read yet skips it when it comes, an ASSIGN waits for it, STOP skips whatever comes after it,
and an ITERATE of a round read already (or older than one read) is dropped.

Where the workers add up the decoded sum (REDUCE), a REDUCE drops what is left of its round as
a PURGE does and waits to be carried out (``take_reduce``); the PARTs its children send are
kept by (round, attempt), whichever comes first. A newer attempt, a PURGE of its round, a newer
ITERATE or STOP cancel the sum under way (``summing`` then no longer names it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from .protocol import Message, Tag, assign_fields, iterate_fields
from .tree_messages import part_value

RECENT = 8  # messages a worker's SIGUSR1 line shows, the newest last


def _key(msg: Message) -> tuple[int, int, int]:
    return msg.job, msg.iteration, msg.epoch


def _order(key: tuple[int, int, int]) -> tuple[int, int, int]:
    """A round key in the order rounds are sent: by epoch (a re-code), then job, iteration."""
    job, iteration, epoch = key
    return epoch, job, iteration


class Inbox:
    """Reads messages with ``poll()`` (None when nothing is pending) and keeps what still matters.

    ``on_setup`` receives a SETUP's object at once (new data after a re-split or re-code; the
    iteration under way goes on). ``skipped`` counts the tasks of ITERATEs never started (this
    worker's: comm rank ``rank``).
    """

    def __init__(self, poll: Callable[[], Message | None], on_setup: Callable[[Any], None],
                 purge: bool = True, rank: int = 1,
                 on_skip: Callable[[Message, tuple[int, ...]], None] | None = None,
                 epoch: Callable[[], int] = lambda: 0,
                 on_relay: Callable[[Message], None] | None = None) -> None:
        self.poll, self.on_setup, self.purge, self.rank = poll, on_setup, purge, rank
        self.on_relay = on_relay  # told of each ITERATE taken, to forward it
        self.epoch = epoch  # the epoch of the set-up in force (``on_setup`` may change it)
        self.on_skip = on_skip  # told of each ITERATE skipped, and its tasks (the trace)
        self.waiting: deque[Message] = deque()  # ITERATEs not started (with purging: at most one)
        self.current: Message | None = None  # the ITERATE under way
        self.current_dropped = False
        self.stopped = False
        self.skipped = 0
        self.last: Message | None = None  # the ITERATE run last (an ASSIGN may resume it)
        self.last_dropped = False
        self.assigned: tuple[int, ...] | None = None  # pieces ASSIGNed, not taken yet
        self.ahead: tuple[tuple[int, int, int], tuple[int, ...]] | None = None  # an ASSIGN
        # for an ITERATE not started yet: its key, and the list to start it with
        self.recent: deque[tuple[Message, bool]] = deque(maxlen=RECENT)  # the last messages
        # read, and whether each was ignored (an ASSIGN of nothing under way): SIGUSR1's line
        self.newest: tuple[int, int, int] | None = None  # the newest round read (its order)
        self.purged: tuple[int, int, int] | None = None  # the newest round purged (its order)
        self.early: tuple[tuple[int, int, int], tuple[int, ...]] | None = None  # an ASSIGN
        # of a round whose ITERATE has not come yet (relayed): its key and list
        self.reduce: Message | None = None  # a REDUCE not carried out yet
        self.summing: tuple[tuple[int, int, int], int] | None = None  # (round, attempt) under way
        self.parts: dict[tuple[tuple[int, int, int], int], list[np.ndarray]] = {}

    def read(self) -> None:
        """Take in every message that has arrived."""
        while (msg := self.poll()) is not None:
            self._take(msg)

    def _take(self, msg: Message) -> None:
        if msg.tag == Tag.SETUP:
            self.on_setup(msg.payload)
        elif msg.tag == Tag.ITERATE:
            order = _order(_key(msg))
            if self.purge and self.newest is not None and order <= self.newest:
                if order < self.newest:  # overtaken (relayed late): never started
                    self._skip(msg)
                self.recent.append((msg, True))  # else the same round again: a re-send
                return
            self.newest = order
            if self.purge and (self.stopped or (self.purged is not None
                                                and order <= self.purged)):
                self._skip(msg)  # purged, or stopped, before it came
                self.recent.append((msg, True))
                return
            if self.on_relay is not None:
                self.on_relay(msg)
            if self.purge:  # a newer iteration: whatever came before it is stale
                self._skip_waiting()
                self.current_dropped = self.current is not None
            self.waiting.append(msg)
            self.assigned = None  # pieces of an older iteration
            if self.early is not None and self.early[0] == _key(msg):
                self.ahead, self.early = self.early, None
            self._cancel_sums(before=order)
        elif msg.tag == Tag.REDUCE:
            if self._read_newer(_key(msg)):  # its round was summed without this worker
                self.recent.append((msg, True))
                return
            self._drop(_key(msg))
            self.reduce, self.summing = msg, None
            self.parts = {k: v for k, v in self.parts.items()
                          if k[0] == _key(msg) and k[1] >= msg.task}
        elif msg.tag == Tag.PART:
            self.parts.setdefault((_key(msg), msg.task), []).append(part_value(msg))
        elif msg.tag == Tag.ASSIGN:
            under_way = self.current if self.current is not None else self.last
            dropped = self.current_dropped if self.current is not None else self.last_dropped
            if (under_way is not None and _key(under_way) == _key(msg) and not dropped
                    and not self.waiting):
                self.assigned = assign_fields(msg)
            elif self.waiting and _key(self.waiting[-1]) == _key(msg):
                self.ahead = _key(msg), assign_fields(msg)
            elif self.newest is None or _order(_key(msg)) > self.newest:
                self.early = _key(msg), assign_fields(msg)  # its ITERATE is relayed: later
            else:
                self.recent.append((msg, True))
                return
        elif msg.tag == Tag.PURGE:
            if self.purge:
                self._drop(_key(msg))
                order = _order(_key(msg))
                self.purged = order if self.purged is None else max(self.purged, order)
            # else the purge is for an iteration already left behind: nothing to drop
            self._cancel_sums(key=_key(msg))
        elif msg.tag == Tag.STOP:
            self.stopped = True
            self.assigned = None
            if self.purge:
                self._skip_waiting()
                self.current_dropped = self.current is not None
            self._cancel_sums()
        else:
            raise ValueError(f"a worker got an unexpected {msg.tag.name} from the master")
        self.recent.append((msg, False))

    def _drop(self, key: tuple[int, int, int]) -> None:
        """What is left of round ``key`` is dropped: waiting, under way, or resumable."""
        if self.waiting and _key(self.waiting[-1]) == key:
            self._skip_waiting()
        if self.current is not None and _key(self.current) == key:
            self.current_dropped = True
        if self.last is not None and _key(self.last) == key:
            self.last_dropped = True
            if self.current is None:
                self.assigned = None

    def _read_newer(self, key: tuple[int, int, int]) -> bool:
        """Whether an ITERATE of a round after ``key`` has been read."""
        read = [m for m in (*self.waiting, self.current, self.last) if m is not None]
        return any(_order(_key(m)) > _order(key) for m in read)

    def _cancel_sums(self, key: tuple[int, int, int] | None = None,
                     before: tuple[int, int, int] | None = None) -> None:
        """Sums of round ``key`` (or of rounds sent ``before`` that order; every one if
        neither) are not to be carried out, or finished."""
        def cancelled(k: tuple[int, int, int]) -> bool:
            return (k == key if key is not None else
                    _order(k) < before if before is not None else True)

        if self.reduce is not None and cancelled(_key(self.reduce)):
            self.reduce = None
        if self.summing is not None and cancelled(self.summing[0]):
            self.summing = None

    def take_reduce(self) -> Message:
        """The REDUCE to carry out now; ``summing`` names it until it is cancelled."""
        msg = self.reduce
        assert msg is not None
        self.reduce, self.summing = None, (_key(msg), msg.task)
        return msg

    def parts_for(self, key: tuple[tuple[int, int, int], int]) -> list[np.ndarray]:
        """The PARTs come so far for (round, attempt) ``key``."""
        return self.parts.get(key, [])

    def said(self) -> str:
        """The last messages read, oldest first: tag, (job, iteration, epoch), an ASSIGN's
        pieces, and whether it was ignored."""
        out = []
        for msg, ignored in self.recent:
            words = [msg.tag.name]
            if msg.tag not in (Tag.SETUP, Tag.STOP):
                words.append(str(_key(msg)))
            if msg.tag == Tag.ASSIGN:
                words.append(str(assign_fields(msg)))
            out.append(" ".join(words) + (" ignored" if ignored else ""))
        return "; ".join(out) or "nothing"

    def _skip_waiting(self) -> None:
        while self.waiting:
            self._skip(self.waiting.popleft())

    def _skip(self, msg: Message) -> None:
        tasks = iterate_fields(msg, self.rank)[0]
        if self.ahead is not None and self.ahead[0] == _key(msg):  # its list, as ASSIGNed
            tasks, self.ahead = self.ahead[1], None
        self.skipped += len(tasks)
        if self.on_skip is not None:
            self.on_skip(msg, tasks)

    def close_current(self) -> None:
        """The iteration under way is over (its results sent, or dropped)."""
        if self.current is not None:
            self.last, self.last_dropped = self.current, self.current_dropped
            if self.current_dropped:
                self.assigned = None
        self.current, self.current_dropped = None, False

    def take_ahead(self, msg: Message) -> tuple[int, ...] | None:
        """The list ASSIGNed for ``msg`` before it was started (in place of its own), once; None
        if none came."""
        if self.ahead is None or self.ahead[0] != _key(msg):
            return None
        tasks, self.ahead = self.ahead[1], None
        return tasks

    def take_assigned(self) -> tuple[int, ...]:
        """The pieces ASSIGNed (partial work), once."""
        assert self.assigned is not None
        tasks, self.assigned = self.assigned, None
        return tasks

    def next_iteration(self) -> Message | None:
        """The ITERATE to start now (the previous one is over), or None when there is none yet;
        ``finished`` tells whether there will never be one. An ITERATE of an older epoch than
        the set-up's (queued before a re-code's SETUP, which replaced the tasks it names) is
        skipped: its results would be stale anyway; one of a newer epoch (relayed by another
        worker, ahead of the master's SETUP) waits for it. The epoch is asked after reading:
        a SETUP read now, and the ITERATE behind it, are of the new one."""
        self.read()
        epoch = self.epoch()
        self.close_current()
        if self.assigned is not None and not self.waiting:  # resume it with the new pieces,
            assert self.last is not None  # (ASSIGN is taken only for the one run last)
            if self.last.epoch == epoch:
                self.current = self.last
                return self.current
            self.assigned = None  # unless a re-code's SETUP replaced the pieces they name
        while self.waiting:
            if self.waiting[0].epoch > epoch:  # relayed ahead of its re-code's SETUP
                break
            msg = self.waiting.popleft()
            if msg.epoch == epoch:
                self.current = msg
                break
            self._skip(msg)
        return self.current

    @property
    def pending(self) -> bool:
        """Something read already is still to be acted on: an ITERATE waiting, STOP, pieces
        ASSIGNed (read while a delay was served, say, after the last piece of a list) or a
        REDUCE: the worker must act although nothing new has arrived."""
        return (bool(self.waiting) or self.stopped or self.assigned is not None
                or self.reduce is not None)

    @property
    def finished(self) -> bool:
        """STOP has arrived and nothing is left to run."""
        return self.stopped and not self.waiting

    def dropped(self) -> bool:
        """Read what arrived; True if the iteration under way must be abandoned."""
        self.read()
        return self.current_dropped
