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
from mpicoded.core.pace import ROUNDS, SILENT, SLACK, SLOW, Paces
from mpicoded.core.pieces import AHEAD


def test_a_pace_is_seconds_a_row_over_the_last_rounds():
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
    paces.reported(0, [0], 20.5)  # faster now: its pace is its last rounds'
    assert paces.pace(0) == pytest.approx(0.012) and paces.current(0) == pytest.approx(0.005)
    paces.open(30.0)
    paces.reported(0, [0], 31.5)  # slower this round than over its last ones: this round's
    assert paces.pace(0) == pytest.approx(0.015)
    for start in range(ROUNDS):  # rounds it sent in: the slow ones leave its last ROUNDS
        paces.open(40.0 + start)
        paces.reported(0, [0], 40.5 + start)
    paces.open(50.0)
    assert paces.pace(0) == pytest.approx(0.005)
    assert paces.pace(1) == pytest.approx(0.01)  # one with no result since keeps its own


def test_a_worker_fast_in_bursts_is_as_slow_as_its_time_over_its_rows():
    """A capped rank at a third of the others' share: full speed in two rounds of three, then
    held back by its quota through a round; the median of its paces says it is fast, its time
    over its rows that it is twice as slow, and that is its pace. One round four times as
    slow in five does not make a worker twice as slow."""
    paces = Paces([100] * 4)
    for start, took in enumerate([1.0, 1.0, 10.0, 1.0, 1.0]):  # 4 pieces a round
        paces.open(10.0 * start)
        paces.reported(0, [0, 1, 2, 3], 10.0 * start + took)
        paces.reported(1, [0, 1, 2, 3], 10.0 * start + 1.0)
    paces.open(60.0)
    assert paces.pace(0) == pytest.approx(14.0 / 2000) and paces.pace(1) == pytest.approx(0.0025)
    assert paces.faster(1, 0)
    steady = Paces([100] * 4)
    for start, took in enumerate([1.0, 1.0, 4.0, 1.0, 1.0]):
        steady.open(10.0 * start)
        steady.reported(0, [0, 1, 2, 3], 10.0 * start + took)
    steady.open(50.0)
    assert steady.pace(0) == pytest.approx(8.0 / 2000) and steady.pace(0) < 2 * 0.0025


def test_a_holder_is_overdue_once_silent_for_longer_than_the_typical_silence():
    """Workers that send a result every 2 s (a capped rank's quota period, say) in a round 10 s
    long: before any silence is measured a holder is overdue SLACK times its expected time past
    its end; after, once silent SILENT times the median worker's longest silence (2 s: one
    silent for 10 s, a stalled one, does not make it longer), but not before its expected
    end, nor later than SLACK past it."""
    paces = Paces([100] * 5 + [25])
    paces.open(0.0)
    for w in range(2):
        for k in range(5):
            paces.reported(w, [k], 2.0 * (k + 1))  # 0.02 s a row
    paces.reported(2, [0, 1, 2, 3, 4], 10.0)
    assert paces.due(0, [0]) == pytest.approx(12.0 + SLACK * 12.0)
    paces.open(20.0)
    paces.reported(0, [0], 22.0)
    assert paces.due(0, [1]) == pytest.approx(22.0 + SILENT * 2.0)  # its end is 24
    assert paces.due(0, [1, 2, 3]) == pytest.approx(28.0)  # silent that long before its end
    assert paces.due(1, [5]) == pytest.approx(20.5 + SLACK * 0.5)  # SLACK past it is sooner


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


def test_a_worker_is_sooner_with_the_far_half_only_if_done_before_the_holder_with_all():
    paces = Paces([100] * 8)
    paces.open(0.0)
    paces.reported(0, [0], 1.0)  # 0.01 s a row
    paces.reported(2, [7], 1.0)
    paces.reported(1, [1], 2.0)  # 0.02 s a row
    owed = [2, 3, 4, 5]
    assert paces.sooner(0, 1, owed, 2.0)  # 2 + 200 * 0.01 = 4 against 2 + 400 * 0.02 = 10
    assert not paces.sooner(1, 0, owed, 2.0)  # 2 + 200 * 0.02 = 6 against 1 + 4 = 5
    assert paces.sooner(0, 2, owed, 1.5)  # as fast, the holder not far in: 3.5 against 5
    assert not paces.sooner(0, 2, owed, 4.5)  # the holder nearly done: 6.5 against 5
    assert not Paces([100]).sooner(0, 1, [0], 0.0)  # no pace known at all


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
    for w in (3, 2, 5, 4, 0):  # each partner of a slower holder (3, 5) once that is done
        share = list(part.schedule[w])
        out = d.result(w, share, vals[share], 2.1, iteration=1)
        assert not of(out, ev.Assign)
    assert of(out, ev.Decoded)


def test_a_holder_twice_as_slow_is_taken_from_at_once_whatever_it_owes():
    """Round 1: worker 3 (at three times worker 2's pace in round 0, not slow) owes its whole
    share when worker 2 is done: worker 2 takes the far half at once, and once done with it,
    the far half of what worker 3 still owes, its last piece but one (not told again: it has
    not reported since)."""
    part, vals, d = frc_after_a_round()
    paces = d.session.piecework.paces
    assert paces.pace(3) == pytest.approx(3 * paces.pace(2)) and not paces.slow(3)
    share, owed = list(part.schedule[2]), list(part.schedule[3])
    out = d.result(2, share, vals[share], 1.5, iteration=1)
    assert out == [ev.Assign(3, 0, 1, 0, (owed[3], owed[2])), ev.Assign(4, 0, 1, 0, tuple(owed[:2]))]
    out = d.result(2, [owed[3], owed[2]], vals[[owed[3], owed[2]]], 1.6, iteration=1)
    assert out == [ev.Assign(3, 0, 1, 0, (owed[1],))]


@pytest.mark.parametrize("sent", [5, 3])
def test_an_idle_worker_takes_from_the_holder_done_last(sent):
    """Partial frc s=2 (workers 0, 1, 2 hold the same partitions), 16 pieces a share, paces
    equal after three rounds. Round 3: worker 0 sends 4 pieces at three times the pace; worker
    1, done, takes the far half of its 12 (twice as fast). Worker 0 sends 5 more: worker 2,
    done, takes at once from worker 1, which would be done last, though not twice as slow: it
    took pieces over and owes AHEAD, and worker 2 would be done with the far half sooner than
    worker 1 with all. Worker 0 sends 3 more: it would be done last (3 pieces at three times
    the pace), and worker 2 takes from it, not from worker 1, which owes more."""
    code = make_code("frc", 6, stragglers=2)
    part = partial_code(code, [800] * code.n_partitions, 50)
    vals = np.random.default_rng(0).standard_normal((part.n_tasks, 3))
    d = Driver(part, work=Decodes(part))
    d.open(0.0)
    for iteration in range(3):
        play(d, vals, {w: list(part.schedule[w]) for w in range(6)}, iteration + 1.0, iteration)
    own = {w: list(part.schedule[w]) for w in range(3)}
    assert not d.result(0, own[0][:4], vals[own[0][:4]], 3.75, iteration=3)
    out = d.result(1, own[1], vals[own[1]], 4.0, iteration=3)
    taken = own[0][10:][::-1]
    assert len(taken) >= AHEAD
    assert out == [ev.Assign(2, 0, 3, 0, tuple(taken)), ev.Assign(1, 0, 3, 0, tuple(own[0][4:10]))]
    assert not d.result(0, own[0][4:4 + sent], vals[own[0][4:4 + sent]], 4.1, iteration=3)
    out = d.result(2, own[2], vals[own[2]], 4.1, iteration=3)
    if sent == 3:
        left = own[0][7:10]
        assert out == [ev.Assign(3, 0, 3, 0, tuple(left[1:][::-1])),
                       ev.Assign(1, 0, 3, 0, tuple(left[:1]))]
        return
    assert out == [ev.Assign(3, 0, 3, 0, tuple(taken[3:][::-1])),
                   ev.Assign(2, 0, 3, 0, tuple(taken[:3]))]


def silent(part, vals, d, iteration):
    """Round ``iteration`` with worker 0 silent and the others done a second in: at the wake
    worker 1 takes the far half of worker 0's share (not before: asked again), and so on to
    the decode."""
    at = d.session.round.started + 1.0
    wakes = []
    for w in range(1, 6):
        share = list(part.schedule[w])
        wakes += of(d.result(w, share, vals[share], at, iteration=iteration), ev.WakeAt)
    at = wakes[-1].at  # the last asked for replaces the others
    assert d.handle(ev.Tick(at - 1e-9)) == [ev.WakeAt(at)]  # not yet: asked again
    out: list[ev.Instruction] = []
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


def test_a_holder_overdue_is_taken_over_from_at_the_wake_and_slower_after():
    """Worker 0 silent in rounds 1 and 2: taken over from once overdue (``silent``). After one
    slow round it is not twice as slow as its partner (its time over its rows counts round 0);
    after two it is (not slow: four times the typical). Silent two rounds, it is left out of
    round 3, its share dealt to its partner from the start."""
    part, vals, d = frc_after_a_round()
    paces = d.session.piecework.paces
    silent(part, vals, d, 1)
    assert not paces.faster(1, 0)
    silent(part, vals, d, 2)
    assert paces.faster(1, 0) and not paces.slow(0)
    rnd = d.session.round
    assert rnd.iteration == 3 and 0 not in rnd.sent
    assert rnd.lists[1] == [*part.schedule[1], *part.schedule[0]]


def test_a_worker_robbed_of_its_last_piece_takes_over_only_as_late_again():
    """Round 1 (started at 1; in round 0 worker 0 did 600 rows a second, worker 1 200): worker
    0 sends three of its four pieces at 1.5, worker 1 its share at 1.6, and takes worker 0's
    last piece once that is overdue (SLACK past its end). Worker 0, robbed of it and silent
    since, is likely still computing it: it may take it back from worker 1 not once worker 1
    is overdue (silent SILENT times a round of round 0, 1 s) but as late again past the
    round's start; a stale result of its meanwhile changes nothing."""
    part, vals, d = frc_after_a_round()
    own = [list(part.schedule[w]) for w in range(6)]
    last = own[0][3]
    assert not d.result(0, own[0][:3], vals[own[0][:3]], 1.5, iteration=1)
    for w in range(2, 6):
        d.result(w, own[w], vals[own[w]], 1.6, iteration=1)
    [wake] = d.result(1, own[1], vals[own[1]], 1.6, iteration=1)
    end = 1.5 + 100 / 600
    assert wake.at == pytest.approx(end + SLACK * (end - 1.0))
    out = d.handle(ev.Tick(wake.at))
    due = wake.at + SILENT * 1.0
    assert out[:2] == [ev.Assign(2, 0, 1, 0, (last,)), ev.Assign(1, 0, 1, 0, ())]
    assert len(out) == 3 and out[2].at == pytest.approx(2 * due - 1.0)
    stale = own[0][:1]  # a result of round 0 does not end the wait: no hand-over follows it
    assert d.result(0, stale, vals[stale], due - 0.5, iteration=0) == []
    work = d.session.piecework
    assert 0 in work.cut_short and not work.unwatched(d.session.round, d.session.live, due - 0.5)
    assert d.handle(ev.Tick(due)) == [out[2]]
    assert of(d.result(1, [last], vals[[last]], due + 0.1, iteration=1), ev.Decoded)


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
