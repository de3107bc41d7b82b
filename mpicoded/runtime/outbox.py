"""Sends that own their buffers: every Isend's buffer is kept until its request completes, the
master's held back behind an ITERATE still on the wire (``core/holdback.py``), a rank found
dead named once (``ProcessesFailed``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from typing import TypeVar

import numpy as np
from mpi4py import MPI

from ..core.holdback import SUPERSEDED, Held, HoldBack
from ..core.protocol import Tag, header_key, pack_control
from ..plan import ft_enabled
from .transport import (
    DETECTION_MARGIN,
    Buffer,
    ProcessesFailed,
    detector_timeout,
    failed_ranks,
    is_process_failure,
)
from .waits import Backoff


class Outbox:
    """Non-blocking sends; each request keeps its buffer until it completes. A send to a rank
    that has died raises ProcessesFailed (under ULFM), and its requests are dropped.

    ``hold_back`` (the master, with purging): at most one ITERATE a worker on the wire, the
    rest held or dropped as ``HoldBack`` decides; ``on_withheld(dest, messages)`` is told of
    the (buffer, tag) pairs dropped unsent, in the order they were sent.

    ``synchronous`` (the master under ULFM): every send but RELEASE completes only once its
    peer has matched it. Open MPI aborts the process when a standard send it has completed
    already (eager: copied, not yet carried) fails on a link that went down later; RELEASE,
    the last word to a rank that has acknowledged everything, is left standard, so that the
    end never waits on a rank that stopped listening.
    """

    def __init__(self, comm: MPI.Comm, hold_back: bool = False,
                 on_withheld: Callable[[int, list[tuple[Buffer, Tag]]], None] | None = None,
                 synchronous: bool = False) -> None:
        self.comm = comm
        self.pending: list[MPI.Request] = []
        self.buffers: list[Buffer] = []
        self.dests: list[int] = []
        # sends given up on (to a rank found dead or timed out), buffer and request: a hung rank
        # may still take one in, so MPI may still read it, and a request freed while active
        # aborts the process when it completes in error (seen with a synchronous ITERATE)
        self.orphans: list[tuple[Buffer, MPI.Request]] = []
        self.holdback = HoldBack() if hold_back else None
        self.on_withheld = on_withheld
        self.iterates: dict[int, MPI.Request] = {}  # hold_back: each dest's last ITERATE
        self.synchronous = synchronous
        self.sent_bytes = 0  # every send posted

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
            # under hold-back an ITERATE is synchronous: complete once the worker has read it,
            # so that a small θ is held back as a large one is
            synchronous = ((self.synchronous and tag != Tag.RELEASE)
                           or (self.holdback is not None and tag == Tag.ITERATE))
            post = self.comm.Issend if synchronous else self.comm.Isend
            request = post([buf, kind], dest=dest, tag=int(tag))
        except MPI.Exception as exc:
            if not is_process_failure(exc):
                raise
            raise ProcessesFailed(failed_ranks(self.comm) | {dest}) from None
        self.pending.append(request)
        self.buffers.append(buf)
        self.dests.append(dest)
        self.sent_bytes += buf.nbytes if isinstance(buf, np.ndarray | memoryview) else len(buf)
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
        self.orphans += [(buf, req) for buf, d, req in zip(self.buffers, self.dests, self.pending,
                                                           strict=True) if d in dead]
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

    def drain(self, but: Collection[int] = ()) -> None:
        """Wait for every send (but those to ``but``, held ones too) without hot-spinning."""
        backoff = Backoff()
        while True:
            self.prune()
            queues = () if self.holdback is None else self.holdback.queues
            if all(d in but for d in self.dests) and all(d in but for d in queues):
                return
            backoff.wait()


T = TypeVar("T")


def each(send: Callable[[T], object], targets: Iterable[T]) -> None:
    """``send(target)`` for every target, then ProcessesFailed naming every rank found dead."""
    dead: set[int] = set()
    for target in targets:
        try:
            send(target)
        except ProcessesFailed as exc:
            dead |= exc.ranks
    if dead:
        raise ProcessesFailed(dead)
