"""A worker's clock against the master's (``--trace``: task records on the master's clock, so
hosts line up), learnt by pings."""

from __future__ import annotations

from collections.abc import Callable

from mpi4py import MPI

from ..core.protocol import Tag, pack_control
from ..core.session import Session
from ..core.trace import TaskTrace
from .outbox import Outbox
from .transport import ProcessesFailed, wait_buffer


def ping(comm: MPI.Comm, outbox: Outbox, rank: int, clock: Callable[[], float],
         pings: int = 3, patience: float = 2.0) -> tuple[float, float, float] | None:
    """The master's clock before, the worker's between, the master's after: of ``pings`` the
    one with the shortest round trip; None if ``rank`` is silent for ``patience`` seconds.
    ProcessesFailed if it is dead."""
    best = None
    for _ in range(pings):
        sent = clock()
        outbox.send(pack_control(), rank, Tag.PING)
        reply = wait_buffer(comm, rank, Tag.PING, patience)
        if reply is None:
            break
        back = clock()
        outbox.prune()  # the ping was received: its send is done
        if best is None or back - sent < best[2] - best[0]:
            best = (sent, float(reply[-1]), back)
    return best


def sync(comm: MPI.Comm, outbox: Outbox, session: Session, trace: TaskTrace,
         clock: Callable[[], float]) -> set[int]:
    """Each living worker's clock offset into ``trace``; the ranks found dead meanwhile. A
    worker that does not answer (hung, maybe: --iteration-timeout tells) keeps the default
    offset (one host's)."""
    dead: set[int] = set()
    for rank in sorted(session.ranks.rank(w) for w in session.live):
        try:
            offset = ping(comm, outbox, rank, clock)
        except ProcessesFailed as exc:
            dead |= exc.ranks
            continue
        if offset is not None:
            trace.set_offset(session.ranks.world(rank) - 1, *offset)
    return dead
