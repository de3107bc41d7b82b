"""Paces and the hand-over that asks them (pure): a holder a little behind keeps its share, a
slow one (this round or in its last ones) is taken over from at once, one silent past its due
time is taken as slow; a result never passes over pieces its worker still owes."""

from __future__ import annotations

import numpy as np
import pytest
from sessions import Decodes, Driver, of

from mpicoded.codes import make_code
from mpicoded.codes.partial import partial_code
from mpicoded.core import events as ev
from mpicoded.core.pace import ROUNDS, SLACK, SLOW, Paces
from mpicoded.core.pieces import AHEAD


def test_a_pace_is_seconds_a_row_and_the_median_of_the_last_rounds():
    paces = Paces([100, 100, 50])
    paces.open(10.0)
    assert paces.pace(0) is None and paces.typical() is None and paces.due(0, [0]) is None
    paces.reported(0, [0, 1], 12.0)  # 200 rows in 2 s
    paces.reported(1, [2], 10.5)  # 50 rows in 0.5 s
    assert paces.pace(0) == pytest.approx(0.01) and paces.pace(1) == pytest.approx(0.01)
    paces.reported(0, [2], 13.0)  # 250 rows in 3 s
    assert paces.pace(0) == pytest.approx(0.012)
    assert paces.due(0, [0]) == pytest.approx(13.0 + 1.2 + SLACK * (13.0 + 1.2 - 10.0))
    paces.open(20.0)
    paces.reported(0, [0], 20.5)  # faster now: its pace is its last rounds' median
    assert paces.pace(0) == pytest.approx(0.012) and paces.current[0] == pytest.approx(0.005)
    paces.open(30.0)
    paces.reported(0, [0], 31.5)  # slower this round than its median: this round's
    assert paces.pace(0) == pytest.approx(0.015)
    for start in range(ROUNDS):  # rounds it sent in: the slow ones are outvoted, forgotten
        paces.open(40.0 + start)
        paces.reported(0, [0], 40.5 + start)
    paces.open(50.0)
    assert paces.pace(0) == pytest.approx(0.005)
    assert paces.pace(1) == pytest.approx(0.01)  # one with no result since keeps its own


def test_a_worker_behind_at_the_decode_is_at_least_that_slow_and_may_be_slow():
    paces = Paces([100] * 4)
    paces.open(0.0)
    for w in range(3):
        paces.reported(w, [w], 1.0)
    paces.behind(3, 100, 1.0)  # nothing sent: its first piece not done in 1 s
    paces.behind(0, 100, 1.0)  # a pace already measured slower is kept
    assert paces.pace(3) == pytest.approx(0.01) and paces.pace(0) == pytest.approx(0.01)
    assert not paces.slow(3)
    paces.behind(3, 100, SLOW * 1.5)
    assert paces.slow(3) and not paces.slow(0) and paces.typical() == pytest.approx(0.01)


def test_only_a_worker_twice_as_fast_takes_at_once_from_a_slow_one():
    """Slow holders hand to faster workers only, so pieces never go round among slow ones (a
    cycle of three slow workers robbing each other was found by the model checks); one of no
    pace yet counts as typical."""
    paces = Paces([100] * 5)
    paces.open(0.0)
    for w, at in enumerate([1.0, 1.0, 1.0, 9.0]):  # worker 3 nine times slower
        paces.reported(w, [w], at)
    paces.behind(2, 100, 2.5)  # worker 2 at 2.5: slower, not twice
    assert paces.faster(0, 3) and paces.faster(4, 3) and not paces.faster(3, 0)
    assert paces.faster(2, 3) and not paces.faster(0, 2) and not paces.faster(3, 3)


def play(d, vals, lists, now, iteration):
    """Each worker's list in ``lists`` sent at ``now``, then what ASSIGNs give the workers,
    until the round decodes or nobody has anything left: the last instructions."""
    queue, out = sorted(lists), []
    while queue:
        w = queue.pop(0)
        tasks = lists.pop(w, [])
        if tasks:
            out = d.result(w, tasks, vals[tasks], now, iteration=iteration)
            if of(out, ev.Decoded):
                return out
            for a in of(out, ev.Assign):
                lists[a.rank - 1] = list(a.tasks)
                queue.append(a.rank - 1)
    return out


def waiting(d):
    """The idle workers of the open round that could take pieces over from a holder, if a
    wake is set for them to look again."""
    rnd, work, live = d.session.round, d.session.piecework, d.session.live
    idle = {w for w in rnd.sent & live if not work._owed(rnd, w)
            and any(work._stand_ins(rnd, work._owed(rnd, o), w, live) for o in live)}
    return idle if rnd.wake is not None else set()


def frc_after_a_round(**settings):
    """Partial frc s=1 (workers 0 and 1 hold partitions 0 and 1): round 0 decoded with every
    worker done at time 1 (paces known), round 1 open since."""
    code = make_code("frc", 6, stragglers=1)
    part = partial_code(code, [400] * code.n_partitions, 100)
    vals = np.random.default_rng(0).standard_normal((part.n_tasks, 3))
    d = Driver(part, work=Decodes(part), **settings)
    d.open(0.0)
    assert of(play(d, vals, {w: list(part.schedule[w]) for w in range(6)}, 1.0, 0), ev.Decoded)
    assert d.session.round.iteration == 1 and d.session.round.started == 1.0
    return part, vals, d


def test_a_holder_a_little_behind_keeps_its_share_and_the_idle_one_waits():
    """Round 1: worker 1 is done, worker 0 (as fast in round 0) has sent nothing yet: worker 1
    waits until worker 0 would be overdue (no ASSIGN, no rows computed twice); the others'
    shares come, and the round decodes."""
    part, vals, d = frc_after_a_round()
    share = list(part.schedule[1])
    out = d.result(1, share, vals[share], 2.0, iteration=1)
    assert len(out) == 1 and isinstance(out[0], ev.WakeAt) and out[0].at > 2.0
    assert waiting(d) == {1}
    for w in (2, 3, 4, 5, 0):
        share = list(part.schedule[w])
        out = d.result(w, share, vals[share], 2.1, iteration=1)
        assert not of(out, ev.Assign)
    assert of(out, ev.Decoded)


def silent(part, vals, d, iteration, slower=False):
    """Round ``iteration`` with worker 0 silent and the others done a second in: worker 1
    takes the far half of worker 0's share at once if worker 0 is ``slower`` (twice its
    pace, owing AHEAD pieces or more), else at the wake (not before: asked again); and so on
    to the decode."""
    at = d.session.round.started + 1.0
    wakes, out = [], []
    for w in range(1, 6):
        share = list(part.schedule[w])
        got = d.result(w, share, vals[share], at, iteration=iteration)
        wakes += of(got, ev.WakeAt)
        out = got if w == 1 else out
    if not slower:
        at = wakes[-1].at  # the last asked for replaces the others
        assert d.handle(ev.Tick(at - 1e-9)) == [ev.WakeAt(at)]  # not yet: asked again
        while not of(out, ev.Assign):
            out = d.handle(ev.Tick(at))
            at = max([at, *(w.at for w in of(out, ev.WakeAt))])
    owed = list(part.schedule[0])
    half = len(owed) // 2
    assert out == [ev.Assign(2, 0, iteration, 0, tuple(owed[half:][::-1])),
                   ev.Assign(1, 0, iteration, 0, tuple(owed[:half]))]
    assert waiting(d) == set() and d.session.round.wake is None
    while not of(out, ev.Decoded):
        given = [a for a in of(out, ev.Assign) if a.rank == 2]  # worker 1's
        if given:
            out = d.result(1, list(given[-1].tasks), vals[list(given[-1].tasks)], at + 0.1,
                           iteration=iteration)
        else:  # worker 0 keeps what it was told, overdue at the next wake
            at = of(out, ev.WakeAt)[-1].at
            out = d.handle(ev.Tick(at))


def test_a_holder_overdue_is_taken_over_from_at_the_wake_and_at_once_when_slower():
    """Worker 0 silent in rounds 1 and 2: taken over from once overdue in round 1; in round
    2, twice as slow as worker 1 by its pace with its whole share owed, at once. Slow in one
    of its last rounds it is not slow (a capped worker's pace comes in bursts); in two of
    three it is (the median). Silent two rounds, it is left out of round 3, its share dealt
    to its partner from the start."""
    part, vals, d = frc_after_a_round()
    silent(part, vals, d, 1)
    assert not d.session.piecework.paces.slow(0)
    assert len(part.schedule[0]) >= AHEAD and d.session.piecework.paces.faster(1, 0)
    silent(part, vals, d, 2, slower=True)
    assert d.session.piecework.paces.slow(0)
    rnd = d.session.round
    assert rnd.iteration == 3 and 0 not in rnd.sent
    assert rnd.lists[1] == [*part.schedule[1], *part.schedule[0]]


def test_a_worker_that_waited_is_not_timed_out_for_it():
    """--iteration-timeout 1.5: worker 1 done at 2.0 waits on worker 0 (due at 3), which is
    lost for its silence at 2.5; worker 1 takes its pieces over then, and its own silence
    counts from then (4.0 is its deadline), not from its last result (3.5)."""
    part, vals, d = frc_after_a_round(iteration_timeout=1.5)
    for w in range(1, 6):
        share = list(part.schedule[w])
        d.result(w, share, vals[share], 2.0, iteration=1)
    assert waiting(d) == {1}
    out = d.handle(ev.Tick(2.5))
    assert of(out, ev.Forget) == [ev.Forget(1)]
    assert [a.rank for a in of(out, ev.Assign)] == [2] and of(out, ev.WakeAt) == [ev.WakeAt(4.0)]
    assert d.handle(ev.Tick(3.6)) == [ev.WakeAt(4.0)]


def test_a_result_never_passes_over_pieces_still_owed():
    """A worker handed a new order of its pieces (a list it was told after one it had begun)
    may send a piece of the old order first: the pieces before it in the new list stay owed,
    so an idle holder can still take them over and the round cannot hang on them."""
    code = make_code("frc", 6, stragglers=1)
    part = partial_code(code, [400] * code.n_partitions, 100)
    vals = np.random.default_rng(1).standard_normal((part.n_tasks, 3))
    d = Driver(part, work=Decodes(part))
    d.open(0.0)
    rnd = d.session.round
    work = d.session.piecework
    rnd.lists[0] = rnd.lists[0][::-1]  # what the master last told it
    first = rnd.lists[0][-1]  # what it computed first, by the list it had before
    d.result(0, [first], vals[[first]], 0.5)
    assert work._owed(rnd, 0) == rnd.lists[0][:-1]


def test_with_no_pace_known_a_piece_is_not_handed_to_and_fro():
    """First round, frc s=2 (workers 0, 1 and 2 share partition 0): worker 2 does its share and
    takes over what workers 0 and 1 owe (no pace of theirs is known) until it has nothing
    more, then dies, the only worker with a pace. The piece worker 0 took from worker 1 is
    not handed back and forth on every Tick (a review found it was): the one who took pieces
    over keeps them as long again as the round had taken by then, so each Tick comes later
    than the last, and the round still decodes."""
    code = make_code("frc", 6, stragglers=2)
    part = partial_code(code, [300] * code.n_partitions, 100)
    vals = np.random.default_rng(2).standard_normal((part.n_tasks, 3))
    d = Driver(part, work=Decodes(part))
    d.open(0.0)
    tasks, now = list(part.schedule[2]), 1.0
    while tasks:
        out = d.result(2, tasks, vals[tasks], now)
        given = [a for a in of(out, ev.Assign) if a.rank == 3]
        tasks, now = (list(given[-1].tasks) if given else []), now + 1.0
    out = d.lose(2, now)
    rnd = d.session.round
    assert d.session.piecework.paces.typical() is None and rnd.wake is not None
    at, gaps = now, []
    for _ in range(3):  # neither reports: the piece changes hands ever more slowly
        wake = of(out, ev.WakeAt)[-1].at
        gaps.append(wake - at)
        at = wake
        out = d.handle(ev.Tick(at))
        assert len(of(out, ev.Assign)) == 1
    assert gaps[0] > 0 and gaps[1] >= gaps[0] and gaps[2] >= gaps[1]
    for w in (0, 1, 3, 4, 5):  # each sends what it was first told: the round decodes
        share = list(part.schedule[w])
        out = d.result(w, share, vals[share], at + 1.0)
    assert of(out, ev.Decoded)
