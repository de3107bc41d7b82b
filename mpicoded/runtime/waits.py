"""How a rank waits between empty polls (21 ranks share 2 cores: nobody busy-polls): spin, yield
or sleep with a backoff, chosen once a run starts; blocking MPI calls with Open MPI's own yield.
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from mpi4py import MPI

from ..host import affinity
from ..throttle.controller import held_to_quota

WAIT_MODES = ("auto", "spin", "yield", "sleep")
_wait = "sleep"  # how this process waits between empty polls: set once a run starts


def node_load(comm: MPI.Comm) -> tuple[int, int, bool]:
    """(ranks of ``comm`` on this node, cores they may run on between them, whether any of
    them is held to a CPU quota), from the ranks that share memory with this one: what any MPI
    library, mpirun or srun, and a cpuset give, where launcher variables (Open MPI's local
    size) and ``os.cpu_count()`` (the whole machine) do not. Collective over ``comm``."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        mine = affinity()  # a quota below what this node's ranks could use at most holds
        each = node.allgather((sorted(mine), held_to_quota(cores=min(len(mine), node.Get_size()))))
        cores = set().union(*(set(mine) for mine, _ in each))
        return node.Get_size(), len(cores), any(held for _, held in each)
    finally:
        node.Free()


def nodes(comm: MPI.Intracomm) -> tuple[int, ...]:
    """Each rank's node, as the lowest rank of ``comm`` on it (rank 0's: 0; a rank on another
    node's messages to rank 0 cross a network, not memory). Collective over ``comm``, waiting
    inside MPI with its own yield on (ranks spinning in a collective on shared cores starve the
    late ones: under ULFM, past the heartbeat's deadline)."""
    with blocking_mpi():
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            lowest = node.allreduce(comm.Get_rank(), op=MPI.MIN)
        finally:
            node.Free()
        return tuple(comm.allgather(lowest))


def set_wait(mode: str, comm: MPI.Comm | None = None) -> str:
    """Choose how this rank waits between empty polls, and return the choice. ``spin`` polls
    without pause (an idle rank then costs a core, as MPI's own waits do); ``yield`` gives the
    core away and polls again when scheduled, sleeping once idle for long; ``sleep`` backs off
    (see Backoff). ``auto`` spins when this node's ranks of ``comm`` (COMM_WORLD if None) do
    not outnumber its cores, else yields (measured faster than sleeping when 21 ranks share 2
    cores: see docs/benchmarks.md), and sleeps on a node where a rank is held to a CPU quota;
    it is then collective over ``comm``."""
    global _wait, _mpi_yield_before
    if mode not in WAIT_MODES:
        raise ValueError(f"wait={mode!r} is not one of {list(WAIT_MODES)}")
    if mode == "auto":
        local, cores, held = node_load(MPI.COMM_WORLD if comm is None else comm)
        # a rank held to a quota would pay for its polls out of it, and one that polls beside
        # it takes the cycles its quota counts on
        mode = "sleep" if held else "spin" if local <= cores else "yield"
    _wait = mode
    previous = mpi_yield(False)
    if _mpi_yield_before is None:
        _mpi_yield_before = previous
    return mode


_mpi_yield_before: bool | None = None  # Open MPI's own yield before set_wait turned it off


def end_waits() -> None:
    """Give Open MPI its own yield back (as it was before ``set_wait``): MPI's shutdown, the
    fence of MPI_Finalize and MPI_Abort, waits inside MPI, where only that yield lets the
    other ranks, and mpirun, have the cores."""
    global _mpi_yield_before
    if _mpi_yield_before is not None:
        mpi_yield(_mpi_yield_before)
        _mpi_yield_before = None


@functools.cache
def _yield_switch() -> Callable[[bool], bool] | None:
    """Open MPI's ``opal_progress_set_yield_when_idle``, typed (None under another MPI)."""
    pal = _open_pal()
    if pal is None or not hasattr(pal, "opal_progress_set_yield_when_idle"):
        return None
    switch = pal.opal_progress_set_yield_when_idle
    switch.argtypes, switch.restype = [ctypes.c_bool], ctypes.c_bool
    return switch


@functools.cache
def _open_pal() -> ctypes.CDLL | None:
    """Open MPI's libopen-pal as loaded in this process (None under another MPI)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "libopen-pal.so" in line}
    except OSError:  # not Linux
        return None
    return ctypes.CDLL(min(paths)) if paths else None


def mpi_yield(on: bool) -> bool | None:
    """Set whether Open MPI gives the core away inside any MPI call that finds nothing to do (it
    does whenever ranks outnumber cores), and return the previous setting; None where there is
    no such switch (another MPI). mpicoded turns it off once its own waits are chosen: with it
    on, every probe for a purge between two chunks of a task, and every poll of the master,
    hands the core to another rank (measured: 260 µs a probe, not 0.2, with 4 ranks on 2 cores).
    """
    switch = _yield_switch()
    return None if switch is None else bool(switch(on))


@contextmanager
def blocking_mpi() -> Iterator[None]:
    """A blocking MPI call waits inside MPI: Open MPI's own yield is on meanwhile (as it was
    before ``set_wait``), so that it does not spin a shared core away."""
    before = mpi_yield(True) if _mpi_yield_before else None
    try:
        yield
    finally:
        if before is not None:
            mpi_yield(before)


def waiting() -> str:
    """How this rank waits (``set_wait``'s choice)."""
    return _wait


class Backoff:
    """How a rank waits between empty polls, by ``set_wait``'s mode.

    ``sleep``: sleeps that double from ``first`` up to ``cap``; after ``patience`` seconds of
    nothing the cap rises to ``idle_cap``: a rank that is about to get work answers within
    ``cap``, a rank idle for long costs the shared cores almost nothing. ``yield``: gives the
    core away and polls again as soon as it is scheduled, for ``patience`` seconds, then sleeps
    as above (a rank idle for long, or held to a CPU quota, must not spend it polling).
    ``spin``: never pauses.
    """

    def __init__(self, first: float = 2e-5, cap: float = 2.5e-4, patience: float = 0.05,
                 idle_cap: float = 2e-3) -> None:
        self.first, self.cap, self.patience, self.idle_cap = first, cap, patience, idle_cap
        self.reset()

    def reset(self) -> None:
        self.delay = self.first
        self.slept = 0.0
        self.since = time.monotonic()

    def wait(self) -> None:
        if _wait == "spin":
            return
        if _wait == "yield" and time.monotonic() - self.since < self.patience:
            os.sched_yield()
            return
        time.sleep(self.delay)
        self.slept += self.delay
        cap = self.cap if self.slept < self.patience else self.idle_cap
        self.delay = min(cap, self.delay * 2)
