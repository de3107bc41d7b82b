"""MPI plumbing shared by master and worker: polling with backoff, and sends that own their buffers.

21 ranks share 2 cores, so nobody blocks in a busy-polling MPI wait: receivers Iprobe and sleep
a little longer each empty poll, senders Isend and keep each buffer alive until its request is done.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from .protocol import Message, Tag, unpack


class Backoff:
    """Sleeps that double from ``first`` up to ``cap`` seconds while nothing happens."""

    def __init__(self, first: float = 2e-5, cap: float = 1e-3) -> None:
        self.first, self.cap = first, cap
        self.delay = first

    def reset(self) -> None:
        self.delay = self.first

    def wait(self) -> None:
        time.sleep(self.delay)
        self.delay = min(self.cap, self.delay * 2)


class Outbox:
    """Non-blocking sends; each request keeps its buffer until it completes."""

    def __init__(self, comm: MPI.Comm) -> None:
        self.comm = comm
        self.pending: list[tuple[MPI.Request, np.ndarray]] = []

    def send(self, buf: np.ndarray, dest: int, tag: Tag) -> None:
        self.pending.append((self.comm.Isend([buf, MPI.DOUBLE], dest=dest, tag=int(tag)), buf))
        if len(self.pending) > 64:
            self.prune()

    def prune(self) -> None:
        """Forget completed sends."""
        self.pending = [(req, buf) for req, buf in self.pending if not req.Test()]

    def drain(self) -> None:
        """Wait for every send without hot-spinning."""
        backoff = Backoff()
        while self.pending:
            self.prune()
            if self.pending:
                backoff.wait()


class WorkerError(RuntimeError):
    """An exception raised on a worker, carried back to the master with its rank."""

    def __init__(self, rank: int, text: str) -> None:
        super().__init__(f"worker rank {rank} failed:\n{text}")
        self.rank = rank


def wait_object(comm: MPI.Comm, source: int, tag: Tag) -> object:
    """A pickled message (start-up only), waited for with backoff rather than a busy MPI wait."""
    backoff = Backoff(cap=5e-3)
    while not comm.Iprobe(source=source, tag=int(tag)):
        backoff.wait()
    return comm.recv(source=source, tag=int(tag))


def receive(comm: MPI.Comm, source: int = MPI.ANY_SOURCE) -> tuple[Message, int] | None:
    """One pending message (and its source rank) if any, else None; ERROR raises WorkerError."""
    status = MPI.Status()
    if not comm.Iprobe(source=source, tag=MPI.ANY_TAG, status=status):
        return None
    src, tag = status.Get_source(), status.Get_tag()
    if tag == Tag.ERROR:
        raise WorkerError(src, comm.recv(source=src, tag=tag))
    buf = np.empty(status.Get_count(MPI.DOUBLE), dtype=np.float64)
    comm.Recv([buf, MPI.DOUBLE], source=src, tag=tag)
    return unpack(tag, buf), src
