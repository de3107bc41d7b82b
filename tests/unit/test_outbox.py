"""The Outbox's failure handling on fake requests (MPI loaded, no peers): an error in status with
no death reported yet waits for ULFM to name the dead rank; an error that is no death is
raised at once."""

from __future__ import annotations

import numpy as np
import pytest

MPI = pytest.importorskip("mpi4py.MPI")
outbox = pytest.importorskip("mpicoded.runtime.outbox")
transport = pytest.importorskip("mpicoded.runtime.transport")


class Pending:
    """A send that never completes (Test says not done)."""

    def Test(self) -> bool:  # noqa: N802 - mpi4py's name
        return False


class FakeOutbox(outbox.Outbox):
    """Testsome fails with ``error``; ULFM names ``dead`` from its ``report_after``-th query."""

    def __init__(self, error: int, dead: set[int], report_after: int) -> None:
        super().__init__(MPI.COMM_SELF)
        self.error, self.dead, self.report_after = error, dead, report_after
        self.queries = 0
        for dest in (2, 3):
            self.pending.append(Pending())
            self.buffers.append(np.zeros(1))
            self.dests.append(dest)

    def testsome(self, requests):  # type: ignore[override]
        raise MPI.Exception(self.error)

    def reported_failed(self) -> set[int]:
        self.queries += 1
        return self.dead if self.queries > self.report_after else set()


@pytest.fixture
def ulfm(monkeypatch):
    monkeypatch.setenv("OMPI_MCA_mpi_ft_enable", "1")
    monkeypatch.setenv("OMPI_MCA_mpi_ft_detector_timeout", "0.2")


def test_an_error_in_status_waits_for_the_death_to_be_reported(ulfm):
    box = FakeOutbox(MPI.ERR_IN_STATUS, {3}, report_after=5)
    with pytest.raises(transport.ProcessesFailed) as caught:
        box.prune()
    assert caught.value.ranks == {3} and box.queries == 6
    assert box.dests == [2] and len(box.pending) == 1 and len(box.orphans) == 1


def test_an_error_in_status_never_named_is_raised_after_the_bound(ulfm):
    box = FakeOutbox(MPI.ERR_IN_STATUS, {3}, report_after=10**9)
    with pytest.raises(MPI.Exception) as caught:
        box.prune()
    assert caught.value.Get_error_class() == MPI.ERR_IN_STATUS and box.queries > 2
    assert box.dests == [2, 3]  # nothing forgotten


def test_without_ulfm_an_error_in_status_is_raised_at_once(monkeypatch):
    monkeypatch.delenv("OMPI_MCA_mpi_ft_enable", raising=False)
    box = FakeOutbox(MPI.ERR_IN_STATUS, {3}, report_after=1)
    with pytest.raises(MPI.Exception):
        box.prune()
    assert box.queries == 1  # the one query of _failed, no wait


def test_an_error_that_is_no_death_is_raised_without_waiting(ulfm):
    box = FakeOutbox(MPI.ERR_BUFFER, {3}, report_after=0)
    with pytest.raises(MPI.Exception) as caught:
        box.prune()
    assert caught.value.Get_error_class() == MPI.ERR_BUFFER and box.queries == 0


@pytest.mark.timeout(60)  # a send never taken in would leave drain() waiting
@pytest.mark.parametrize("size", [100, 1_000_000])  # under and past MPI's eager limit
def test_hold_back_keeps_one_iterate_on_the_wire(size: int):
    """On COMM_SELF (a send to itself): an ITERATE, small or large, stays incomplete until it
    is received (a synchronous send); a newer one waits behind it (the one on the wire purged
    at once) and replaces the one waiting, STOP drops it, and what was dropped is reported.
    The receiver then reads the first ITERATE, its PURGE and STOP."""
    protocol = pytest.importorskip("mpicoded.core.protocol")
    tag = protocol.Tag
    withheld: list[list[str]] = []
    box = outbox.Outbox(MPI.COMM_SELF, hold_back=True,
                           on_withheld=lambda dest, sent: withheld.append(
                               [t.name for _, t in sent]))

    def iterate(it: int) -> np.ndarray:
        return protocol.pack_iterate(0, it, np.zeros(size), {0: (0, 1)})

    box.send(iterate(0), 0, tag.ITERATE)
    box.send(iterate(1), 0, tag.ITERATE)
    box.send(protocol.pack_assign(0, 1, (1,)), 0, tag.ASSIGN)
    box.send(iterate(2), 0, tag.ITERATE)
    assert withheld == [["ITERATE", "ASSIGN"]] and len(box.pending) == 2  # and its PURGE
    box.send(protocol.pack_control(), 0, tag.STOP)
    assert withheld[-1] == ["ITERATE"] and not box.holdback.queues
    got = []
    status = MPI.Status()
    while MPI.COMM_SELF.Iprobe(source=0, status=status):
        buf = np.empty(status.Get_count(MPI.DOUBLE))
        MPI.COMM_SELF.Recv(buf, source=0, tag=status.Get_tag())
        got.append((status.Get_tag(), int(buf[1])))
    assert got == [(tag.ITERATE, 0), (tag.PURGE, 0), (tag.STOP, -1)]
    box.drain()
    assert not box.pending


def test_a_synchronous_outbox_completes_a_send_only_once_received():
    """On COMM_SELF, rank 0's outbox under ULFM (``synchronous``): a small PURGE stays on the
    wire until the receiver has it, then completes; RELEASE, the last word, is left standard
    (a self-send of Open MPI's completes at once, copied)."""
    protocol = pytest.importorskip("mpicoded.core.protocol")
    tag = protocol.Tag
    box = outbox.Outbox(MPI.COMM_SELF, synchronous=True)
    box.send(protocol.pack_control(0, 3), 0, tag.PURGE)
    box.prune()
    assert len(box.pending) == 1
    got = np.empty(protocol.pack_control(0, 3).size)
    MPI.COMM_SELF.Recv(got, source=0, tag=int(tag.PURGE))
    box.drain()
    assert not box.pending and int(got[1]) == 3
    box.send(protocol.pack_control(), 0, tag.RELEASE)
    box.prune()
    assert not box.pending
    MPI.COMM_SELF.Recv(got[:protocol.pack_control().size], source=0, tag=int(tag.RELEASE))
