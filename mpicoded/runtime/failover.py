"""Master failover under ULFM: when rank 0 dies, the survivors shrink the communicator and the
lowest living rank becomes the master. Every survivor tells it what it holds (its set-up's epoch
and the newest ITERATE it started, with its theta); the new master goes on from the newest
iteration anyone holds theta for.

Only a majority may elect a master: ranks cut off from the master by a network partition see it
"die" too, and a minority electing its own would make two masters writing one run's files (seen
with a host's link cut). And nobody revokes the communicator: every survivor notices the
master's death by itself (it polls the master), and a revoke from a cut-off host would reach the
living master's side once the link heals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
from mpi4py import MPI

from .waits import blocking_mpi
from .worker import Worker


@dataclass
class Held:
    """What one survivor brings to the failover."""

    world_rank: int  # its rank in the run's first communicator (its identity)
    epoch: int  # its set-up's epoch, -1 without a set-up
    latest: tuple[int, int, int] | None  # (epoch, job, iteration) of the newest ITERATE started
    theta: np.ndarray | None


@dataclass
class Failover:
    """The outcome, on every survivor: the new communicator and everyone's holdings, by new
    rank (0 is the new master)."""

    comm: MPI.Intracomm
    held: list[Held]
    world_size: int

    @property
    def minority(self) -> bool:
        """Whether these survivors are at most half the run's ranks: cut off, not in charge."""
        return 2 * self.comm.Get_size() <= self.world_size

    @property
    def is_master(self) -> bool:
        return self.comm.Get_rank() == 0 and not self.minority

    def resume_point(self) -> tuple[tuple[int, int, int], np.ndarray] | None:
        """The newest (epoch, job, iteration) someone started, and the theta it started from
        (float64: a worker holds it as it travelled)."""
        known = [h for h in self.held if h.latest is not None and h.theta is not None]
        if not known:
            return None
        best = max(known, key=lambda h: h.latest or (-1, -1, -1))
        assert best.latest is not None and best.theta is not None
        return best.latest, np.asarray(best.theta, dtype=np.float64)


def fail_over(comm: MPI.Intracomm, world_rank: int, worker: Worker | None, size: int) -> Failover:
    """Collective over the survivors of ``comm`` (the run's ranks were ``size``): shrink it and
    share what each one holds.
    Blocking collectives wait inside MPI: Open MPI's own yield is on meanwhile."""
    latest, theta = (None, None) if worker is None or worker.latest is None else worker.latest
    mine = Held(world_rank, worker.setup.epoch if worker is not None else -1, latest, theta)
    with blocking_mpi():
        new = cast(MPI.Intracomm, comm.Shrink())  # the stubs say Comm; it is comm's class
        return Failover(new, new.allgather(mine), size)
