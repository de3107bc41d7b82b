"""What a rank knows of its host without MPI (pure of mpirun and mpi4py): the cores it may run
on, and the start mark the launcher's start-up watch waits for. The runtime and the launcher
both use it; neither imports the other."""

from __future__ import annotations

import os
from pathlib import Path

STARTED_ENV = "MPICODED_STARTED"  # a directory in which each rank marks that MPI is up on it


def affinity() -> set[int]:
    """The cores this process may run on (its binding, a Slurm or taskset cpuset)."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def cores() -> int:
    """How many cores this process may run on (a Slurm or taskset cpuset, not the machine's)."""
    return len(affinity())


def mark_started(rank: int) -> None:
    """Tell the launcher's start-up watch that MPI is up on this rank (once; a no-op outside
    a watched launch)."""
    where = os.environ.pop(STARTED_ENV, None)
    if where:
        try:
            Path(where, str(rank)).touch()
        except OSError:  # a rank on another host (the variable passed on): not watched there
            pass
