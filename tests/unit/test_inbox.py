"""The worker's message handling on a fake transport (no MPI): stale work is never started, a
purge already queued is honoured, STOP interrupts, and --no-purge runs everything in order."""

from __future__ import annotations

from collections import deque
from types import SimpleNamespace

import numpy as np
import pytest

from mpicoded.core.inbox import Inbox
from mpicoded.core.protocol import Message, Tag, pack_assign, pack_control, pack_iterate, unpack


class FakeMaster:
    """Messages the master 'sent', handed out one per poll, like Iprobe + receive would."""

    def __init__(self) -> None:
        self.sent: deque = deque()
        self.setups: list[object] = []

    def iterate(self, iteration: int, tasks=(0, 1), job: int = 0, epoch: int = 0) -> None:
        self.sent.append(unpack(Tag.ITERATE, pack_iterate(job, iteration, np.zeros(2),
                                                          {1: tasks}, epoch)))

    def purge(self, iteration: int, job: int = 0, epoch: int = 0) -> None:
        self.sent.append(unpack(Tag.PURGE, pack_control(job, iteration, epoch=epoch)))

    def setup(self, epoch: int) -> None:
        self.sent.append(Message(Tag.SETUP, -1, -1, -1, -1, -1, 0, SimpleNamespace(epoch=epoch)))

    def stop(self) -> None:
        self.sent.append(unpack(Tag.STOP, pack_control()))

    def assign(self, iteration: int, tasks, job: int = 0, epoch: int = 0) -> None:
        self.sent.append(unpack(Tag.ASSIGN, pack_assign(job, iteration, tasks, epoch)))

    def poll(self):
        return self.sent.popleft() if self.sent else None

    def inbox(self, purge: bool = True) -> Inbox:
        """The worker's Inbox; its epoch is the newest SETUP's, as the worker's is."""
        return Inbox(self.poll, self.setups.append, purge=purge,
                     epoch=lambda: self.setups[-1].epoch if self.setups else 0)


def test_superseded_iterations_are_skipped_unread():
    master = FakeMaster()
    inbox = master.inbox()
    for it in range(3):
        master.iterate(it, tasks=(0, 1, 2))
        if it < 2:
            master.purge(it)
    msg = inbox.next_iteration()
    assert msg.iteration == 2
    assert inbox.skipped == 6  # two iterations of three tasks, never started
    assert inbox.next_iteration() is None and not inbox.finished


def test_a_queued_purge_is_honoured_before_starting():
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0)
    master.purge(0)
    assert inbox.next_iteration() is None
    assert inbox.skipped == 2


def test_purge_of_another_iteration_or_epoch_leaves_the_current_one():
    master = FakeMaster()
    inbox = master.inbox()
    master.setup(epoch=1)
    master.iterate(4, epoch=1)
    assert inbox.next_iteration().iteration == 4
    master.purge(3, epoch=1)
    master.purge(4, epoch=0)
    assert not inbox.dropped()
    master.purge(4, epoch=1)
    assert inbox.dropped()


def test_newer_iterate_interrupts_the_current_one_and_runs_next():
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0)
    assert inbox.next_iteration().iteration == 0
    assert not inbox.dropped()
    master.iterate(1)
    assert inbox.dropped()
    assert inbox.next_iteration().iteration == 1
    assert not inbox.dropped()


def test_stop_interrupts_and_drops_what_waits():
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0)
    inbox.next_iteration()
    master.iterate(1, tasks=(5,))
    master.stop()
    assert inbox.dropped()
    assert inbox.finished
    assert inbox.next_iteration() is None
    assert inbox.skipped == 1


def test_setup_is_applied_at_once_and_the_work_goes_on():
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0)
    inbox.next_iteration()
    master.setup(epoch=0)
    assert not inbox.dropped()
    assert len(master.setups) == 1


def test_without_purging_every_iterate_runs_in_order_then_stop():
    master = FakeMaster()
    inbox = master.inbox(purge=False)
    for it in range(3):
        master.iterate(it)
    master.stop()
    seen = []
    while (msg := inbox.next_iteration()) is not None:
        assert not inbox.dropped()
        seen.append(msg.iteration)
    assert seen == [0, 1, 2] and inbox.finished and inbox.skipped == 0


def test_iterations_of_an_old_epoch_are_skipped_after_a_recode():
    """Without purging, ITERATEs queued before a re-code's SETUP name the old code's tasks."""
    master = FakeMaster()
    inbox = master.inbox(purge=False)
    master.iterate(1, tasks=(0, 1))
    master.iterate(2, tasks=(0, 1))
    master.setup(epoch=1)
    master.iterate(2, tasks=(3,), epoch=1)  # read in the same poll as the SETUP before it
    msg = inbox.next_iteration()
    assert (msg.iteration, msg.epoch) == (2, 1) and inbox.skipped == 4


def test_unexpected_message_is_an_error():
    master = FakeMaster()
    master.sent.append(unpack(Tag.RESULT, np.zeros(6)))
    with pytest.raises(ValueError, match="unexpected RESULT"):
        master.inbox().next_iteration()


def test_skipped_iterations_are_told_with_their_tasks():
    master = FakeMaster()
    skipped = []
    inbox = Inbox(master.poll, master.setups.append, on_skip=lambda m, t: skipped.append(
        (m.iteration, t)))
    master.iterate(0, tasks=(4, 5))
    master.iterate(1, tasks=(6,))
    master.purge(1)
    assert inbox.next_iteration() is None
    assert skipped == [(0, (4, 5)), (1, (6,))] and inbox.skipped == 3


def test_pieces_assigned_during_an_iteration_are_taken_between_pieces():
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0, tasks=(0, 1, 2))
    assert inbox.next_iteration().iteration == 0
    master.assign(0, (9, 8))
    assert not inbox.dropped() and inbox.take_assigned() == (9, 8)
    assert inbox.assigned is None
    master.assign(1, (7,))  # of an iteration not under way: ignored
    assert not inbox.dropped() and inbox.assigned is None


def test_pieces_assigned_once_idle_resume_the_last_iteration():
    """The worker finished iteration 0 and went idle; the master hands it pieces of that
    iteration: next_iteration gives iteration 0 again, with the assigned pieces to take."""
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0, tasks=(0, 1))
    msg = inbox.next_iteration()
    inbox.close_current()
    master.assign(0, (5, 4))
    again = inbox.next_iteration()
    assert again is msg and inbox.take_assigned() == (5, 4)
    inbox.close_current()
    assert inbox.next_iteration() is None  # taken once


def test_pieces_read_during_the_last_pieces_delay_are_still_pending():
    """The master hands pieces to a worker serving the injected delay of its list's last
    piece: the delay's poll reads the ASSIGN, the list ends, and nothing new arrives after.
    The inbox still says something is pending, so the idle worker resumes the iteration (it
    used to wait for a new message, and the master for those pieces, for ever: a CI hang)."""
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0, tasks=(0, 1))
    msg = inbox.next_iteration()
    assert not inbox.pending
    master.assign(0, (5, 4))
    assert not inbox.dropped()  # the poll between delay slices reads it
    inbox.close_current()  # the list is done, its results sent
    assert not master.sent and inbox.pending
    assert inbox.next_iteration() is msg and inbox.take_assigned() == (5, 4)
    inbox.close_current()
    assert not inbox.pending and inbox.next_iteration() is None


def assigned_once_idle() -> tuple[FakeMaster, Inbox]:
    """A worker that ran iteration 0 and is idle, with pieces of it ASSIGNed, not read yet."""
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0, tasks=(0, 1))
    inbox.next_iteration()
    inbox.close_current()
    master.assign(0, (5, 4))
    return master, inbox


def test_no_resume_of_pieces_a_recodes_setup_replaced():
    """Pieces assigned to an idle worker, then a re-code's SETUP (a new epoch, new pieces)
    before any ITERATE: the old iteration is not resumed, the pieces it names being gone."""
    master, inbox = assigned_once_idle()
    master.setup(epoch=1)
    assert inbox.next_iteration() is None and inbox.assigned is None and not inbox.pending


@pytest.mark.parametrize("after", ["purge", "iterate", "stop"])
def test_no_resume_once_the_iteration_is_purged_superseded_or_stopped(after):
    master, inbox = assigned_once_idle()
    {"purge": lambda: master.purge(0), "iterate": lambda: master.iterate(1),
     "stop": master.stop}[after]()
    msg = inbox.next_iteration()
    assert inbox.assigned is None
    assert (msg.iteration if msg else None) == (1 if after == "iterate" else None)


@pytest.mark.parametrize("busy", [True, False])
def test_pieces_assigned_before_the_iterate_is_started_replace_its_list(busy):
    """The master may ASSIGN pieces of an iteration to a worker that has not started it (a
    straggler still on the last one, or idle but not polled yet): its ITERATE and the ASSIGN
    are read together. The ASSIGNed list is the one run, as the master counts on it (dropped
    unread, the master waited for ever for the pieces it had handed over: a CI hang)."""
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(0, tasks=(0, 1))
    inbox.next_iteration()
    if not busy:
        inbox.close_current()
    master.iterate(1, tasks=(0, 1))
    master.assign(1, (7, 6))
    assert inbox.dropped() is busy  # the newer ITERATE interrupts the one under way
    msg = inbox.next_iteration()
    assert msg.iteration == 1 and inbox.assigned is None
    assert inbox.take_ahead(msg) == (7, 6) and inbox.take_ahead(msg) is None


def test_an_assign_for_a_waiting_iterate_goes_with_it_when_skipped():
    """Purged, superseded or stopped before it began: the ASSIGNed list is skipped with it
    (and told as skipped), never carried to the next ITERATE."""
    master = FakeMaster()
    skipped: list[tuple[int, tuple[int, ...]]] = []
    inbox = Inbox(master.poll, master.setups.append,
                  on_skip=lambda msg, tasks: skipped.append((msg.iteration, tasks)))
    master.iterate(0, tasks=(0, 1))
    master.assign(0, (7,))
    master.iterate(1, tasks=(2, 3))
    msg = inbox.next_iteration()
    assert msg.iteration == 1 and skipped == [(0, (7,))] and inbox.skipped == 1
    assert inbox.take_ahead(msg) is None


def test_the_last_messages_read_are_kept_and_an_ignored_assign_says_so():
    """For a worker's SIGUSR1 line: the newest eight messages read, an ASSIGN of an iteration
    it has left behind marked ignored; the first ITERATE has fallen off."""
    master = FakeMaster()
    inbox = master.inbox()
    master.iterate(1)
    master.assign(0, (3,))
    assert inbox.next_iteration().iteration == 1
    master.assign(1, (1,))
    for it in range(2, 8):
        master.purge(it)
    inbox.read()
    assert inbox.said().split("; ") == ["ASSIGN (0, 0, 0) (3,) ignored", "ASSIGN (0, 1, 0) (1,)",
                                        *(f"PURGE (0, {it}, 0)" for it in range(2, 8))]


def test_a_relayed_iterate_is_forwarded_once_and_what_came_before_it_is_kept():
    """θ relayed: the master's ASSIGN and PURGE of a round may come before its ITERATE, and a
    re-send may bring it twice. The ITERATE is forwarded once, as it is taken; an ASSIGN
    that came first is its list; a PURGE that came first skips it; one overtaken by a newer
    round is skipped, unforwarded; after STOP nothing starts."""
    master, forwarded = FakeMaster(), []
    inbox = Inbox(master.poll, master.setups.append, on_relay=lambda m: forwarded.append(
        m.iteration))
    master.assign(0, (5, 6))  # a hand-over read before the round's ITERATE came
    master.iterate(0)
    master.iterate(0)  # re-sent directly: its relay died, say
    msg = inbox.next_iteration()
    assert msg.iteration == 0 and inbox.take_ahead(msg) == (5, 6) and forwarded == [0]
    master.purge(1)  # the round after was decoded before its ITERATE reached this worker
    master.iterate(1)
    master.iterate(3)
    master.iterate(2)  # overtaken by round 3
    assert inbox.next_iteration().iteration == 3 and forwarded == [0, 3]
    assert inbox.skipped == 2 + 2  # rounds 1 and 2, two tasks each
    master.stop()
    master.iterate(4)
    assert inbox.next_iteration() is None and inbox.finished and forwarded == [0, 3]
