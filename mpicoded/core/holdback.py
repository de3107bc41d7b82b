"""Which of the master's sends to a worker wait, and which are dropped, while an ITERATE to it
is still on the wire (pure: no MPI).

The executor sends an ITERATE synchronously: it completes only once the worker has taken it
in. A worker held to 1.5% of a core read every ITERATE still queued for it, each costing a
quota period or more, before it could read the STOP behind them. With purging a worker only
ever starts the newest iteration, so the master keeps at most one ITERATE a worker on the
wire: a newer one waits here and replaces any that waited before it. The messages of the
waiting iteration (its ASSIGNs) wait with it; a PURGE of it, or a STOP, drops it unsent.
Messages about the iteration on the wire (its PURGE, its ASSIGNs) go at once: MPI keeps them
behind it. Its PURGE is sent here if nobody did (the master's state machine sends none to a
worker that gets the next ITERATE, which would supersede it): a worker that takes the stale
ITERATE in then reads the PURGE with it and skips it, instead of computing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .protocol import Tag

Key = tuple[int, int, int]  # (job, iteration, epoch)
STALE_ON = (Tag.ITERATE, Tag.STOP)  # each makes whatever a worker was sent before it stale
SUPERSEDED = (Tag.ITERATE, Tag.PURGE, Tag.ASSIGN)  # ... namely these


@dataclass(frozen=True)
class Held:
    """A send that waits: its tag, its (job, iteration, epoch) if it has one, its buffer."""

    tag: Tag
    key: Key | None
    payload: Any


class Offer(NamedTuple):
    """What to do with a send: make it ``now`` (else it waits, or is dropped: a PURGE of the
    waiting iteration); the waiting sends it made ``stale``, which never go; the iteration
    on the wire to ``purge`` first (its key), if any."""

    now: bool
    stale: list[Held]
    purge: Key | None = None


@dataclass
class HoldBack:
    """Each worker's sends waiting behind its ITERATE on the wire, in the order sent."""

    queues: dict[int, list[Held]] = field(default_factory=dict)
    waiting: dict[int, Key] = field(default_factory=dict)  # the ITERATE held, by worker
    unpurged: dict[int, Key] = field(default_factory=dict)  # the last one sent, if not purged

    def posted(self, dest: int, held: Held) -> None:
        """A send to ``dest`` went: the last ITERATE sent, and whether it was purged since."""
        if held.tag == Tag.ITERATE:
            self.unpurged[dest] = held.key  # type: ignore[assignment]  # ITERATEs have one
        elif held.tag == Tag.STOP or (held.tag == Tag.PURGE
                                      and held.key == self.unpurged.get(dest)):
            self.unpurged.pop(dest, None)

    def offer(self, dest: int, held: Held, on_the_wire: bool) -> Offer:
        """A send to ``dest``. ``on_the_wire``: an ITERATE to ``dest`` is not complete yet."""
        if held.tag == Tag.ITERATE and on_the_wire and held.key == self.unpurged.get(dest):
            return Offer(False, [])  # θ sent again (relayed late): the copy on the wire will do
        queue = self.queues.get(dest, [])
        stale: list[Held] = []
        purges_waiting = held.tag == Tag.PURGE and held.key == self.waiting.get(dest)
        if held.tag in STALE_ON or purges_waiting:
            stale = [h for h in queue if h.tag in SUPERSEDED]
            queue = [h for h in queue if h.tag not in SUPERSEDED]
            self.waiting.pop(dest, None)
            if purges_waiting:  # its ITERATE never left: nothing to purge
                self._set(dest, queue)
                return Offer(False, stale)
        if held.tag in (Tag.PURGE, Tag.ASSIGN):  # of the waiting iteration, or an older one
            wait = held.key == self.waiting.get(dest) or any(h.key == held.key for h in queue)
        else:  # in order behind what waits (a set-up); an ITERATE behind the one on the wire
            wait = bool(queue) or (held.tag == Tag.ITERATE and on_the_wire)
        purge = None
        if wait:
            queue.append(held)
            if held.tag == Tag.ITERATE:
                self.waiting[dest] = held.key  # type: ignore[assignment]  # ITERATEs have one
                purge = self.unpurged.pop(dest, None) if on_the_wire else None
        self._set(dest, queue)
        return Offer(not wait, stale, purge)

    def release(self, dest: int) -> list[Held]:
        """``dest``'s ITERATE on the wire is complete: the sends to make now, in order, up to
        and with the next ITERATE (which is on the wire then) and the ASSIGNs of its
        iteration that follow it."""
        queue = self.queues.get(dest, [])
        out: list[Held] = []
        while queue:
            out.append(queue.pop(0))
            if out[-1].tag == Tag.ITERATE:
                key = self.waiting.pop(dest, None)
                while queue and queue[0].tag == Tag.ASSIGN and queue[0].key == key:
                    out.append(queue.pop(0))
                break
        self._set(dest, queue)
        return out

    def forget(self, dest: int) -> list[Held]:
        """``dest`` is dead or hung: the ITERATEs, ASSIGNs and PURGEs that waited for it,
        dropped (the rest dropped too)."""
        self.waiting.pop(dest, None)
        self.unpurged.pop(dest, None)
        return [h for h in self.queues.pop(dest, []) if h.tag in SUPERSEDED]

    def _set(self, dest: int, queue: list[Held]) -> None:
        if queue:
            self.queues[dest] = queue
        else:
            self.queues.pop(dest, None)
