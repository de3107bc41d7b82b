"""MPI plumbing shared by master and worker: receiving without a busy wait (receivers Iprobe and
wait between empty polls as ``waits.set_wait`` chose), objects in frames, and dead ranks named
(``ProcessesFailed``) under ULFM. The few blocking calls (a worker's receipt of its set-up, a
refusal instead of one, error reports, failover) run with Open MPI's own yield on."""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from mpi4py import MPI

from ..core.protocol import Message, Tag, unpack
from .buffers import Buffers
from .waits import Backoff, blocking_mpi


class ProcessesFailed(RuntimeError):
    """Ranks found dead (Open MPI ULFM, ``mpirun --with-ft ulfm``); acknowledged already."""

    def __init__(self, ranks: set[int]) -> None:
        super().__init__(f"ranks {sorted(ranks)} failed")
        self.ranks = ranks


_FAILURE_CLASSES = {getattr(MPI, name) for name in
                    ("ERR_PROC_FAILED", "ERR_PROC_FAILED_PENDING", "ERR_REVOKED")
                    if hasattr(MPI, name)}


def is_process_failure(exc: MPI.Exception) -> bool:
    return exc.Get_error_class() in _FAILURE_CLASSES


@contextmanager
def failures_raised(comm: MPI.Comm) -> Iterator[None]:
    """An MPI error from a dead peer or a revoked communicator, raised as ProcessesFailed."""
    try:
        yield
    except MPI.Exception as exc:
        raise as_failure(comm, exc) from None


def as_failure(comm: MPI.Comm, exc: MPI.Exception) -> Exception:
    """What to raise for an MPI error: ProcessesFailed for a dead peer or a revoked
    communicator, else the error itself."""
    if not is_process_failure(exc):
        return exc
    try:
        ranks = failed_ranks(comm)
    except MPI.Exception:  # a revoked communicator may not say whom
        ranks = set()
    return ProcessesFailed(ranks)


def failed_ranks(comm: MPI.Comm) -> set[int]:
    """Acknowledge the failures this rank knows of (so receives from any source work again) and
    name the failed ranks."""
    comm.Ack_failed()
    group = comm.Get_failed()
    try:
        return set(MPI.Group.Translate_ranks(group, list(range(group.Get_size())),
                                             comm.Get_group()))
    finally:
        group.Free()


DETECTION_MARGIN = 2.0  # how many detector timeouts an error in status may wait to be named


def detector_timeout() -> float:
    """The heartbeat detector's timeout in seconds (Open MPI's default, 10, unless set)."""
    try:
        return float(os.environ.get("OMPI_MCA_mpi_ft_detector_timeout", "10"))
    except ValueError:
        return 10.0


Buffer = np.ndarray | bytes | memoryview


class WorkerError(RuntimeError):
    """An exception raised on a worker, carried back to the master with its rank."""

    def __init__(self, rank: int, text: str) -> None:
        super().__init__(f"worker rank {rank} failed:\n{text}")
        self.rank, self.text = rank, text


def object_frames(obj: object) -> tuple[bytes, list[memoryview]]:
    """``obj`` as the messages of a SETUP: its pickle, with each contiguous array's bytes left
    out of it (pickle protocol 5), then those bytes, one a frame (SETUP_DATA). The receiver
    takes each into a buffer of its own that the array then uses as it is: one copy of the
    data on its side instead of three (zeroed, received, unpickled), which a slow worker
    (1.5% of a core) pays for at its own speed."""
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return head, [b.raw() for b in buffers]


def send_object(comm: MPI.Comm, obj: object, dest: int, tag: Tag) -> None:
    """Send ``obj`` pickled, as bytes, and wait (before the run: a refusal sent in place of a
    set-up; set-ups themselves go through an Outbox)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    with blocking_mpi():
        comm.Send([data, MPI.BYTE], dest=dest, tag=int(tag))


def _recv_object(comm: MPI.Comm, status: MPI.Status) -> Any:
    """The object ``send_object`` or ``object_frames`` sent, whose probe filled ``status``:
    the pickle, then as many SETUP_DATA frames as it left out, each received into the buffer
    its array keeps."""
    source = status.Get_source()
    head = bytearray(status.Get_count(MPI.BYTE))  # the pickle alone: small
    with blocking_mpi():
        comm.Recv([head, MPI.BYTE], source=source, tag=status.Get_tag())

    def frames() -> Iterator[np.ndarray]:
        frame = MPI.Status()
        while True:
            with blocking_mpi():
                comm.Probe(source=source, tag=int(Tag.SETUP_DATA), status=frame)
                buf = np.empty(frame.Get_count(MPI.BYTE), dtype=np.uint8)  # not zeroed
                comm.Recv([buf, MPI.BYTE], source=source, tag=int(Tag.SETUP_DATA))
            yield buf

    return pickle.loads(head, buffers=frames())


def wait_object(comm: MPI.Comm, source: int, tag: Tag) -> object:
    """A ``send_object`` message (start-up only), waited for with backoff rather than a busy MPI
    wait."""
    status = _wait_probe(comm, source, tag)
    assert status is not None  # no deadline
    return _recv_object(comm, status)


def wait_buffer(comm: MPI.Comm, source: int, tag: Tag, timeout: float,
                drop: tuple[Tag, ...] = ()) -> np.ndarray | None:
    """The payload of the next ``tag`` message from ``source`` (set-up only: a clock's ping;
    a worker's RELEASE), waited for as ``wait_object`` does, or None after ``timeout``
    seconds; ProcessesFailed if ``source`` is dead. ``drop``: messages of these tags from any
    rank are read and dropped meanwhile (other workers', which must not wait on this one)."""
    with failures_raised(comm):
        status = _wait_probe(comm, source, tag, time.monotonic() + timeout,
                             lambda: any([drop_pending(comm, t) for t in drop]))
        if status is None:
            return None
        buf = np.empty(status.Get_count(MPI.DOUBLE), dtype=np.float64)
        with blocking_mpi():
            comm.Recv([buf, MPI.DOUBLE], source=source, tag=int(tag))
    return unpack(tag, buf).payload


def _wait_probe(comm: MPI.Comm, source: int, tag: Tag, deadline: float = float("inf"),
                meanwhile: Callable[[], bool] = lambda: False) -> MPI.Status | None:
    """The status of a ``tag`` message from ``source`` once one is there (None past
    ``deadline``); ``meanwhile()`` between probes, which says whether it did anything."""
    backoff = Backoff(cap=5e-3)
    status = MPI.Status()
    while not comm.Iprobe(source=source, tag=int(tag), status=status):
        if time.monotonic() > deadline:
            return None
        if meanwhile():
            backoff.reset()
        else:
            backoff.wait()
    return status


def drop_pending(comm: MPI.Comm, tag: Tag) -> bool:
    """Read and drop one ``tag`` message from any rank, if there is one; whether there was
    (or a rank's death was acknowledged, after which a receive from any source works again)."""
    status = MPI.Status()
    try:
        if not comm.Iprobe(source=MPI.ANY_SOURCE, tag=int(tag), status=status):
            return False
    except MPI.Exception as exc:
        if not is_process_failure(exc):
            raise
        failed_ranks(comm)
        return True
    buf = np.empty(status.Get_count(MPI.DOUBLE))
    comm.Recv([buf, MPI.DOUBLE], source=status.Get_source(), tag=int(tag))
    return True


_STATUS = MPI.Status()  # reused: receive() runs on every poll of the hot loops


def receive(comm: MPI.Comm, source: int = MPI.ANY_SOURCE,
            buffers: Buffers | None = None) -> tuple[Message, int] | None:
    """One pending message (and its source rank) if any, else None, into a buffer of
    ``buffers`` if given. ERROR raises WorkerError; a dead rank (under ULFM) raises
    ProcessesFailed; SETUP carries a pickled object."""
    try:  # not failures_raised: this runs on every poll, and a with block costs a microsecond
        return _receive(comm, source, buffers)
    except MPI.Exception as exc:
        raise as_failure(comm, exc) from None


def _receive(comm: MPI.Comm, source: int, buffers: Buffers | None) -> tuple[Message, int] | None:
    status = _STATUS
    if not comm.Iprobe(source=source, tag=MPI.ANY_TAG, status=status):
        return None
    src, tag = status.Get_source(), status.Get_tag()
    if tag == Tag.ERROR:
        with blocking_mpi():
            text = comm.recv(source=src, tag=tag)
        raise WorkerError(src, text)
    if tag == Tag.SETUP:
        return Message(Tag.SETUP, -1, -1, -1, -1, -1, 0, _recv_object(comm, status)), src
    count = status.Get_count(MPI.DOUBLE)
    buf = np.empty(count) if buffers is None else buffers.take(count)
    # Irecv + Test with backoff, not Recv: a message past the eager limit (about 4 KiB here)
    # completes only when its sender next enters MPI, and a blocking Recv would spin until then.
    request = comm.Irecv([buf, MPI.DOUBLE], source=src, tag=tag)
    if not request.Test():  # most often done at once: the payload was in with the probe
        backoff = Backoff()
        while not request.Test():
            backoff.wait()
    return unpack(tag, buf), src
