"""The master's hold-back of sends behind an ITERATE still on the wire (pure: no MPI): at most
one ITERATE a worker in flight, a newer one replacing the one waiting, a PURGE or STOP
dropping it unsent, and the messages of the iteration on the wire never held (a worker that
took it in must read its PURGE with it, not start it)."""

from __future__ import annotations

from mpicoded.core.holdback import Held, HoldBack, Offer
from mpicoded.core.protocol import Tag


def held(tag: Tag, iteration: int | None = None) -> Held:
    return Held(tag, None if iteration is None else (0, iteration, 0), f"{tag.name} {iteration}")


def names(sends: list[Held]) -> list[str]:
    return [h.payload for h in sends]


def test_an_iterate_goes_at_once_unless_one_is_on_the_wire():
    box = HoldBack()
    assert box.offer(1, held(Tag.ITERATE, 0), on_the_wire=False) == Offer(True, [])
    assert box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True) == Offer(False, [])
    assert box.offer(2, held(Tag.ITERATE, 1), on_the_wire=False) == Offer(True, [])  # per worker
    assert box.waiting == {1: (0, 1, 0)} and list(box.queues) == [1]


def test_a_newer_iterate_replaces_the_waiting_one_and_its_assigns():
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    assert box.offer(1, held(Tag.ASSIGN, 1), on_the_wire=False) == Offer(False, [])  # with it
    now, stale, _ = box.offer(1, held(Tag.ITERATE, 2), on_the_wire=True)
    assert not now and names(stale) == ["ITERATE 1", "ASSIGN 1"]
    assert names(box.release(1)) == ["ITERATE 2"] and not box.queues and not box.waiting


def test_the_iteration_on_the_wire_is_purged_and_assigned_at_once():
    """Its PURGE must follow it now: a worker that took it in reads the purge and skips it."""
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)  # 0 is on the wire, 1 waits
    assert box.offer(1, held(Tag.PURGE, 0), on_the_wire=True) == Offer(True, [])
    assert box.offer(1, held(Tag.ASSIGN, 0), on_the_wire=True) == Offer(True, [])
    assert names(box.queues[1]) == ["ITERATE 1"]


def test_a_purge_of_the_waiting_iteration_drops_it_and_is_not_sent():
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    box.offer(1, held(Tag.ASSIGN, 1), on_the_wire=True)
    now, stale, _ = box.offer(1, held(Tag.PURGE, 1), on_the_wire=True)
    assert not now and names(stale) == ["ITERATE 1", "ASSIGN 1"]
    assert not box.queues and not box.waiting and box.release(1) == []


def test_stop_drops_the_waiting_iteration_and_goes_at_once():
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    now, stale, _ = box.offer(1, held(Tag.STOP), on_the_wire=True)
    assert now and names(stale) == ["ITERATE 1"] and not box.queues


def test_a_setup_keeps_its_place_behind_what_waits():
    """A re-code's SETUP sent while an ITERATE waits goes after it, is never dropped, and what
    follows it (even a STOP) waits behind it: the worker reads them in the order sent."""
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    assert box.offer(1, held(Tag.SETUP), on_the_wire=True) == Offer(False, [])
    now, stale, _ = box.offer(1, held(Tag.ITERATE, 2), on_the_wire=True)
    assert not now and names(stale) == ["ITERATE 1"]
    now, stale, _ = box.offer(1, held(Tag.STOP), on_the_wire=True)
    assert not now and names(stale) == ["ITERATE 2"]
    assert names(box.release(1)) == ["SETUP None", "STOP None"] and not box.queues


def test_release_stops_after_the_next_iterate_and_its_assigns():
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    box.offer(1, held(Tag.ASSIGN, 1), on_the_wire=True)
    box.offer(1, held(Tag.SETUP), on_the_wire=True)
    box.offer(1, held(Tag.ITERATE, 2), on_the_wire=True)
    assert names(box.release(1)) == ["SETUP None", "ITERATE 2"]  # 1 was superseded
    box.offer(1, held(Tag.ITERATE, 3), on_the_wire=True)
    box.offer(1, held(Tag.ASSIGN, 3), on_the_wire=True)
    box.offer(1, held(Tag.ASSIGN, 3), on_the_wire=True)
    box.offer(1, held(Tag.SETUP), on_the_wire=True)
    assert names(box.release(1)) == ["ITERATE 3", "ASSIGN 3", "ASSIGN 3"]  # 3 on the wire
    assert names(box.release(1)) == ["SETUP None"] and not box.queues


def test_forget_drops_a_dead_workers_sends():
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    assert names(box.forget(1)) == ["ITERATE 1"] and not box.queues and not box.waiting
    assert box.forget(1) == []


def test_the_iteration_on_the_wire_is_purged_once_a_newer_one_waits():
    """The state machine purges no worker that gets the next ITERATE (it supersedes the
    purge); held back, it does not yet, so the stale one on the wire is purged here, once."""
    box = HoldBack()
    box.posted(1, held(Tag.ITERATE, 0))
    assert box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True).purge == (0, 0, 0)
    box.posted(1, held(Tag.PURGE, 0))
    offer = box.offer(1, held(Tag.ITERATE, 2), on_the_wire=True)
    assert names(offer.stale) == ["ITERATE 1"] and offer.purge is None  # purged already
    box.posted(1, held(Tag.ITERATE, 5))  # released later; purged by the master itself:
    box.posted(1, held(Tag.PURGE, 5))
    assert box.offer(1, held(Tag.ITERATE, 6), on_the_wire=True).purge is None
    box.posted(2, held(Tag.ITERATE, 0))  # complete already: the next goes, nothing purged
    assert box.offer(2, held(Tag.ITERATE, 1), on_the_wire=False) == Offer(True, [])


def test_an_assign_never_overtakes_one_of_its_iteration_still_waiting():
    """An ASSIGN queued behind a set-up stays there once its ITERATE goes; a later ASSIGN of
    the same iteration waits behind it, so the worker ends with the newest list."""
    box = HoldBack()
    box.offer(1, held(Tag.ITERATE, 1), on_the_wire=True)
    box.offer(1, held(Tag.SETUP), on_the_wire=True)
    box.offer(1, Held(Tag.ASSIGN, (0, 1, 0), "A"), on_the_wire=True)
    assert names(box.release(1)) == ["ITERATE 1"]
    assert box.offer(1, Held(Tag.ASSIGN, (0, 1, 0), "B"), on_the_wire=True) == Offer(False, [])
    assert names(box.release(1)) == ["SETUP None", "A", "B"] and not box.queues


def test_an_iterate_sent_again_while_its_copy_is_on_the_wire_is_dropped():
    """θ re-sent directly (a relay overdue) to a rank whose copy of that round is still on the
    wire: dropped, not a purge of the copy it will read."""
    box = HoldBack()
    first = Held(Tag.ITERATE, (0, 2, 0), "it2")
    assert box.offer(3, first, on_the_wire=False).now
    box.posted(3, first)
    again = box.offer(3, Held(Tag.ITERATE, (0, 2, 0), "it2 again"), on_the_wire=True)
    assert again == (False, [], None) and not box.queues
