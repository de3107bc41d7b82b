"""What a rank knows of its host without MPI (pure of mpirun and mpi4py): the cores it may run
on, its rank as the launcher numbered it, and the start mark the launcher's start-up watch
waits for. The runtime and the launcher
both use it; neither imports the other."""

from __future__ import annotations

import os
from pathlib import Path

STARTED_ENV = "MPICODED_STARTED"  # a directory in which each rank marks that MPI is up on it
RANK_ENVS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")  # launchers' own


def affinity() -> set[int]:
    """The cores this process may run on (its binding, a Slurm or taskset cpuset)."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def cores() -> int:
    """How many cores this process may run on (a Slurm or taskset cpuset, not the machine's)."""
    return len(affinity())


def launched_rank() -> int:
    """This process's rank as its launcher (mpirun, mpiexec, srun) numbered it, before MPI is
    up; 0 where none did (a process started alone)."""
    for name in RANK_ENVS:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def mark_started(rank: int) -> None:
    """Tell the launcher's start-up watch that MPI is up on this rank (once; a no-op outside
    a watched launch)."""
    where = os.environ.pop(STARTED_ENV, None)
    if where:
        try:
            Path(where, str(rank)).touch()
        except OSError:  # a rank on another host (the variable passed on): not watched there
            pass
