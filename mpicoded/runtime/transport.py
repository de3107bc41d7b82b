"""MPI plumbing shared by master and worker: polling with backoff, and sends that own their buffers.

21 ranks share 2 cores, so nobody blocks in a busy-polling MPI wait: receivers Iprobe and wait
between empty polls as ``set_wait`` chose, senders Isend and keep each buffer alive until its
request is done. The few blocking calls (a worker's receipt of its set-up, a refusal instead of
one, error reports, failover) run with Open MPI's own yield on (``blocking_mpi``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import pickle
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from mpi4py import MPI

from ..core.holdback import SUPERSEDED, Held, HoldBack
from ..core.protocol import Message, Tag, header_key, pack_control, unpack
from ..host import affinity
from ..plan import ft_enabled

WAIT_MODES = ("auto", "spin", "yield", "sleep")
_wait = "sleep"  # how this process waits between empty polls: set once a run starts


def node_load(comm: MPI.Comm) -> tuple[int, int]:
    """(ranks of ``comm`` on this node, cores they may run on between them), from the ranks
    that share memory with this one and their affinities: what any MPI library, mpirun or
    srun, and a cpuset give, where launcher variables (Open MPI's local size) and
    ``os.cpu_count()`` (the whole machine) do not. Collective over ``comm``."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        cores = set().union(*node.allgather(sorted(affinity())))
        return node.Get_size(), len(cores)
    finally:
        node.Free()


def set_wait(mode: str, comm: MPI.Comm | None = None) -> str:
    """Choose how this rank waits between empty polls, and return the choice. ``spin`` polls
    without pause (an idle rank then costs a core, as MPI's own waits do); ``yield`` gives the
    core away and polls again when scheduled, sleeping once idle for long; ``sleep`` backs off
    (see Backoff). ``auto`` spins when this node's ranks of ``comm`` (COMM_WORLD if None) do
    not outnumber its cores, else yields (measured faster than sleeping when 21 ranks share 2
    cores: see docs/benchmarks.md); it is then collective over ``comm``."""
    global _wait, _mpi_yield_before
    if mode not in WAIT_MODES:
        raise ValueError(f"wait={mode!r} is not one of {list(WAIT_MODES)}")
    if mode == "auto":
        local, cores = node_load(MPI.COMM_WORLD if comm is None else comm)
        mode = "spin" if local <= cores else "yield"
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


class Outbox:
    """Non-blocking sends; each request keeps its buffer until it completes. A send to a rank
    that has died raises ProcessesFailed (under ULFM), and its requests are dropped.

    ``hold_back`` (the master, with purging): at most one ITERATE a worker on the wire, the
    rest held or dropped as ``HoldBack`` decides; ``on_withheld(dest, messages)`` is told of
    the (buffer, tag) pairs dropped unsent, in the order they were sent.
    """

    def __init__(self, comm: MPI.Comm, hold_back: bool = False,
                 on_withheld: Callable[[int, list[tuple[Buffer, Tag]]], None] | None = None
                 ) -> None:
        self.comm = comm
        self.pending: list[MPI.Request] = []
        self.buffers: list[Buffer] = []
        self.dests: list[int] = []
        # buffers of sends given up on (to a rank found dead or timed out): a hung rank may
        # still take one in, so MPI may still read it
        self.orphans: list[Buffer] = []
        self.holdback = HoldBack() if hold_back else None
        self.on_withheld = on_withheld
        self.iterates: dict[int, MPI.Request] = {}  # hold_back: each dest's last ITERATE

    def send(self, buf: Buffer, dest: int, tag: Tag) -> None:
        """Post a send of doubles, or of bytes (a pickled set-up and its arrays' bytes); under
        ``hold_back``, maybe later, or never (stale before it left)."""
        if self.holdback is None:
            self._post(buf, dest, tag)
            return
        held = Held(tag, header_key(buf) if tag in SUPERSEDED else None, buf)
        offer = self.holdback.offer(dest, held, tag == Tag.ITERATE and self._on_the_wire(dest))
        if offer.stale and self.on_withheld is not None:
            self.on_withheld(dest, [(h.payload, h.tag) for h in offer.stale])
        if offer.purge is not None:
            job, iteration, epoch = offer.purge
            self._post_held(Held(Tag.PURGE, offer.purge,
                                 pack_control(job, iteration, epoch=epoch)), dest)
        if offer.now:
            self._post_held(held, dest)

    def _post_held(self, held: Held, dest: int) -> None:
        assert self.holdback is not None
        self.holdback.posted(dest, held)
        self._post(held.payload, dest, held.tag)

    def _on_the_wire(self, dest: int) -> bool:
        """An ITERATE to ``dest`` not complete yet (tested now: the last Testsome may be old)."""
        request = self.iterates.get(dest)
        if request is None or request == MPI.REQUEST_NULL:
            return False
        try:
            return not request.Test()
        except MPI.Exception:  # a failure: the next prune names it
            return True

    def _post(self, buf: Buffer, dest: int, tag: Tag) -> None:
        try:
            kind = MPI.DOUBLE if isinstance(buf, np.ndarray) else MPI.BYTE
            request = self.comm.Isend([buf, kind], dest=dest, tag=int(tag))
        except MPI.Exception as exc:
            if not is_process_failure(exc):
                raise
            raise ProcessesFailed(failed_ranks(self.comm) | {dest}) from None
        self.pending.append(request)
        self.buffers.append(buf)
        self.dests.append(dest)
        if self.holdback is not None and tag == Tag.ITERATE:
            self.iterates[dest] = request

    def _release(self) -> None:
        """Post what waited for each dest whose ITERATE is complete, up to its next one."""
        assert self.holdback is not None
        for dest in [d for d in self.holdback.queues if not self._on_the_wire(d)]:
            for held in self.holdback.release(dest):
                self._post_held(held, dest)

    def prune(self) -> None:
        """Forget completed sends (one Testsome call over all of them); post what they held."""
        if self.pending:
            self._test()
        if self.holdback is not None and self.holdback.queues:
            self._release()

    def _test(self) -> None:
        try:
            done = self.testsome(self.pending)
        except MPI.Exception as exc:
            in_status = exc.Get_error_class() == MPI.ERR_IN_STATUS
            if not (is_process_failure(exc) or in_status):
                raise
            dead = self._failed()
            if not dead and in_status and ft_enabled():  # a death the detector has not named yet
                dead = self._detected()
            if not dead:  # not a peer's death after all
                raise
            self.forget(dead)
            raise ProcessesFailed(dead) from None
        if done is None or done:  # None: every request was done already (after a failure)
            self._keep([i for i, req in enumerate(self.pending) if req != MPI.REQUEST_NULL])

    testsome = staticmethod(MPI.Request.Testsome)

    def reported_failed(self) -> set[int]:
        """The ranks ULFM has reported failed so far (acknowledged)."""
        return failed_ranks(self.comm)

    def _failed(self) -> set[int]:
        """The ranks whose sends failed. Testsome may say only ERR_IN_STATUS (seen under ULFM
        with a rank dead): each request tested alone names its own error. Another error on a
        request (not a death) is left for ``_detected`` to tell apart."""
        dead = set()
        for request, dest in zip(self.pending, self.dests, strict=True):
            try:
                request.Test()
            except MPI.Exception as exc:
                if is_process_failure(exc):
                    dead.add(dest)
        return dead | self.reported_failed()

    def _detected(self) -> set[int]:
        """An error in status with no death reported yet is a death still being detected (seen
        on a rank killed during start-up, before the heartbeat had missed it): wait for ULFM
        to name it, at most DETECTION_MARGIN times the detector's timeout; empty if it never
        does (the error is then a real one)."""
        deadline = time.monotonic() + DETECTION_MARGIN * detector_timeout() + 1.0
        backoff = Backoff(cap=0.05, idle_cap=0.05)
        while time.monotonic() < deadline:
            dead = self.reported_failed()
            if dead:
                return dead
            backoff.wait()
        return set()

    def forget(self, dead: set[int]) -> None:
        """Stop waiting for the sends to dead (or hung) ranks: they may never complete. Sends
        found done meanwhile go too."""
        self.orphans += [buf for buf, d in zip(self.buffers, self.dests, strict=True)
                         if d in dead]
        if self.holdback is not None:
            for dest in dead:
                self.iterates.pop(dest, None)
                stale = self.holdback.forget(dest)
                if stale and self.on_withheld is not None:
                    self.on_withheld(dest, [(h.payload, h.tag) for h in stale])
        self._keep([i for i, (d, req) in enumerate(zip(self.dests, self.pending, strict=True))
                    if d not in dead and req != MPI.REQUEST_NULL])

    def _keep(self, keep: list[int]) -> None:
        self.pending = [self.pending[i] for i in keep]
        self.buffers = [self.buffers[i] for i in keep]
        self.dests = [self.dests[i] for i in keep]

    def drain(self) -> None:
        """Wait for every send without hot-spinning."""
        backoff = Backoff()
        while self.pending or (self.holdback is not None and self.holdback.queues):
            self.prune()
            if self.pending:
                backoff.wait()


class WorkerError(RuntimeError):
    """An exception raised on a worker, carried back to the master with its rank."""

    def __init__(self, rank: int, text: str) -> None:
        super().__init__(f"worker rank {rank} failed:\n{text}")
        self.rank = rank


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


def wait_buffer(comm: MPI.Comm, source: int, tag: Tag, timeout: float) -> np.ndarray | None:
    """The payload of the next ``tag`` message from ``source`` (set-up only: a clock's ping),
    waited for as ``wait_object`` does, or None after ``timeout`` seconds; ProcessesFailed if
    ``source`` is dead."""
    with failures_raised(comm):
        status = _wait_probe(comm, source, tag, time.monotonic() + timeout)
        if status is None:
            return None
        buf = np.empty(status.Get_count(MPI.DOUBLE), dtype=np.float64)
        with blocking_mpi():
            comm.Recv([buf, MPI.DOUBLE], source=source, tag=int(tag))
    return unpack(tag, buf).payload


def _wait_probe(comm: MPI.Comm, source: int, tag: Tag,
                deadline: float = float("inf")) -> MPI.Status | None:
    backoff = Backoff(cap=5e-3)
    status = MPI.Status()
    while not comm.Iprobe(source=source, tag=int(tag), status=status):
        if time.monotonic() > deadline:
            return None
        backoff.wait()
    return status


_STATUS = MPI.Status()  # reused: receive() runs on every poll of the hot loops


def receive(comm: MPI.Comm, source: int = MPI.ANY_SOURCE) -> tuple[Message, int] | None:
    """One pending message (and its source rank) if any, else None. ERROR raises WorkerError; a
    dead rank (under ULFM) raises ProcessesFailed; SETUP carries a pickled object."""
    try:  # not failures_raised: this runs on every poll, and a with block costs a microsecond
        return _receive(comm, source)
    except MPI.Exception as exc:
        raise as_failure(comm, exc) from None


def _receive(comm: MPI.Comm, source: int) -> tuple[Message, int] | None:
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
    buf = np.empty(status.Get_count(MPI.DOUBLE), dtype=np.float64)
    # Irecv + Test with backoff, not Recv: a message past the eager limit (about 4 KiB here)
    # completes only when its sender next enters MPI, and a blocking Recv would spin until then.
    request = comm.Irecv([buf, MPI.DOUBLE], source=src, tag=tag)
    if not request.Test():  # most often done at once: the payload was in with the probe
        backoff = Backoff()
        while not request.Test():
            backoff.wait()
    return unpack(tag, buf), src
