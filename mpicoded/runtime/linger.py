"""Rank 0's part of a run that ended without a slow rank's acknowledgement (``Linger``): that
rank's last messages are read and it is released after the run has returned, before the next
run starts or at the program's exit, so the caller has its result without waiting for it."""

from __future__ import annotations

import atexit
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.protocol import Tag, pack_control
from .outbox import Outbox
from .transport import WorkerError, receive
from .waits import Backoff

if TYPE_CHECKING:
    from mpi4py import MPI


@dataclass
class Lingering:
    """Ranks of ``comm`` sent STOP whose acknowledgement is still to come; ``free``: the
    communicator is the run's own duplicate, freed once they are released."""

    comm: MPI.Intracomm
    outbox: Outbox
    ranks: set[int] = field(default_factory=set)
    free: bool = False

    def complete(self) -> None:
        """Read what the ranks still send (results, traces, errors of stale iterations:
        nobody needs them now) until each acknowledges, and release each."""
        backoff = Backoff()
        while self.ranks:
            self.outbox.prune()  # a STOP held behind an ITERATE the rank has not read yet
            if not any([self._read(rank) for rank in sorted(self.ranks)]):
                backoff.wait()
        self.outbox.drain()
        if self.free:
            self.comm.Free()

    def _read(self, rank: int) -> bool:
        """One message from ``rank`` if any (only its: the program's own may be on ``comm``
        too); its acknowledgement releases it. Whether one was read."""
        try:
            got = receive(self.comm, rank)
        except WorkerError:  # a stale iteration failed: the rank acknowledges all the same
            return True
        if got is not None and got[0].tag == Tag.STOP_ACK:
            self.ranks.discard(rank)
            self.outbox.send(pack_control(), rank, Tag.RELEASE)
        return got is not None


_pending: list[Lingering] = []


def linger(lingering: Lingering) -> None:
    """Complete ``lingering`` later: before the next run, or at exit (before MPI_Finalize)."""
    if not _pending:
        atexit.register(complete_lingering)
    _pending.append(lingering)


def complete_lingering() -> None:
    """Complete every run that ended without a slow rank's acknowledgement (none left to
    complete once the program has finalized MPI itself)."""
    from mpi4py import MPI

    if MPI.Is_finalized():
        _pending.clear()
    while _pending:
        _pending.pop(0).complete()
    atexit.unregister(complete_lingering)


def free_later(comm: MPI.Intracomm) -> bool:
    """Free ``comm`` once its run's lingering ranks are released; False if none linger."""
    for lingering in _pending:
        if lingering.comm == comm:
            lingering.free = True
            return True
    return False
