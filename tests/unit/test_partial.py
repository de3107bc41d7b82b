"""Partial work (no MPI): a binary code re-cut into pieces of row ranges, replica orders that
split a partition between its holders, a decode that counts every row once."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sessions import Decodes, Driver, after_silence, left_out, lists, of

from mpicoded.codes import make_code
from mpicoded.codes.partial import holders, partial_code, piece_cost
from mpicoded.core import events as ev
from mpicoded.core.pace import SILENT
from mpicoded.core.pieces import QUIET_ROUNDS
from mpicoded.core.shape import Shape
from mpicoded.delays import DelayModel
from mpicoded.sim import Simulator

CODES = [("uncoded", {}), ("frc", {"stragglers": 1}), ("frc", {"stragglers": 2}),
         ("gfrc", {"stragglers": 1}), ("gfrc", {"stragglers": 2}), ("gfrc", {"stragglers": 5}),
         ("ucmmc", {"load": 2}), ("cpgc", {"load": 2}), ("uncoded", {"partitions": 9})]
ROWS = [1000, 1001, 998, 1000, 1003, 999, 1000, 1000, 1002]


def cut(name, params, chunk=90):
    code = make_code(name, 6, **params)
    return code, partial_code(code, ROWS[: code.n_partitions], chunk)


@pytest.mark.parametrize(("name", "params"), CODES)
def test_the_pieces_tile_every_partition_and_the_shares_split_them(name, params):
    """Every partition is cut into pieces that tile its rows; the workers' lists (their primary
    shares) hold every piece exactly once, each of a partition the worker holds: with no
    straggler every row is computed once, as uncoded. For frc and gfrc the shares are even to
    one piece."""
    code, part = cut(name, params)
    pieces = part.params["pieces"]
    for j, n in enumerate(ROWS[: code.n_partitions]):
        mine = sorted((p.start, p.stop) for p in pieces if p.key == j)
        assert mine[0][0] == 0 and mine[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:], strict=False))
    flat = [t for order in part.schedule for t in order]
    assert sorted(flat) == list(range(part.n_tasks))
    held = holders(code)
    assert part.params["holds"] == tuple(frozenset(j for j, h in enumerate(held) if w in h)
                                         for w in range(code.n_workers))
    for w, order in enumerate(part.schedule):
        assert all(pieces[t].key in part.params["holds"][w] for t in order)
        for j in part.params["holds"][w]:  # ascending: a helper comes from the far end
            starts = [pieces[t].start for t in order if pieces[t].key == j]
            assert starts == sorted(starts)
    if name in ("frc", "gfrc"):
        loads = [len(order) for order in part.schedule]
        assert max(loads) - min(loads) <= 1, loads


def values_of(part, rng):
    """A made-up value for every piece, and the exact sum and per-partition sums."""
    vals = rng.standard_normal((part.n_tasks, 4))
    each = np.zeros((part.n_partitions, 4))
    for t, p in enumerate(part.params["pieces"]):
        each[p.key] += vals[t]
    return vals, each


def test_the_piece_decode_counts_every_row_once():
    code, part = cut("gfrc", {"stragglers": 2})
    vals, each = values_of(part, np.random.default_rng(1))
    dec = part.decoder()
    order = np.random.default_rng(2).permutation(part.n_tasks)
    for i, t in enumerate(order):
        dec.add(int(t), vals[t])
        if i < 10:  # a piece two workers finished: counted once
            dec.add(int(t), vals[t])
        assert dec.ready == (i == part.n_tasks - 1)
    assert np.allclose(dec.result(), each.sum(axis=0), rtol=1e-12)
    assert dec.results_used == part.n_tasks and len(dec.missing_partitions) == 0


def test_a_run_counts_its_rows_once_and_supersedes_pieces_sent_alone():
    """A holder's run (its own share's pieces, one value for all) and a helper's pieces of the
    same rows: whichever comes first, each row counts once; the sum is the exact one, nothing
    subtracted. A run overlapping another is a bug and refused; one spanning partitions is
    decoded exactly, and refused under a tolerance (a partition left out could not be taken
    out of its value)."""
    code, part = cut("frc", {"stragglers": 1})
    vals, each = values_of(part, np.random.default_rng(4))
    pieces = part.params["pieces"]
    share = [t for t in part.schedule[0] if pieces[t].key == pieces[part.schedule[0][0]].key]
    assert len(share) >= 4
    run = share[:4]
    dec, ids = part.decoder(), part.decoder()  # with the values, and from ids alone
    for d in (dec, ids):
        keep = d is dec
        d.add(run[3], vals[run[3]] if keep else None)  # a helper's piece of the far end, first
        d.add_run(run, vals[run].sum(axis=0) if keep else None)  # then the holder's run over it
        d.add(run[1], vals[run[1]] if keep else None)  # a piece the run has already: dropped
        for t in range(part.n_tasks):
            if t not in run:
                d.add(t, vals[t] if keep else None)
    assert dec.ready and ids.ready
    np.testing.assert_allclose(dec.result(), each.sum(axis=0), rtol=1e-12)
    coef = ids.combination()  # the run's value once (at its first piece), the helper's not
    assert coef == dec.combination() and run[0] in coef and run[3] not in coef
    assert set(coef.values()) == {1.0} and not set(run[1:]) & set(coef)
    again = part.decoder()
    again.add_run(run[:2], vals[run[:2]].sum(axis=0))
    with pytest.raises(ValueError, match="overlap"):
        again.add_run(run[1:3], vals[run[1:3]].sum(axis=0))
    other = next(t for t in range(part.n_tasks) if pieces[t].key != pieces[run[0]].key)
    with pytest.raises(ValueError, match="spans partitions under a tolerance"):
        part.decoder(tolerance=1).add_run([run[0], other], vals[run[0]])
    across = part.decoder()  # an exact decode: one value for pieces of two partitions
    across.add_run([run[0], other], vals[[run[0], other]].sum(axis=0))
    for t in range(part.n_tasks):
        if t not in (run[0], other):
            across.add(t, vals[t])
    np.testing.assert_allclose(across.result(), each.sum(axis=0), rtol=1e-12)


def test_each_target_and_a_tolerance_leave_incomplete_partitions_out():
    code = make_code("cpgc", 6, load=2)
    part = partial_code(code, ROWS[:6], 250)
    vals, each = values_of(part, np.random.default_rng(3))
    dec = part.decoder(tolerance=1)
    skipped = [t for t, p in enumerate(part.params["pieces"]) if p.key == 4][-1:]
    for t in range(part.n_tasks):
        if t not in skipped:
            dec.add(t, vals[t])
    assert dec.ready and list(dec.missing_partitions) == [4]
    got = dec.result()
    assert np.isnan(got[4]).all() and np.allclose(np.delete(got, 4, 0), np.delete(each, 4, 0))
    assert dec.results_used == part.n_tasks - sum(
        p.key == 4 for p in part.params["pieces"])


@pytest.mark.parametrize(("name", "params"), [("cyclic", {"stragglers": 1}),
                                              ("mds", {"stragglers": 2})])
def test_a_code_with_real_coefficients_is_refused(name, params):
    with pytest.raises(ValueError, match="partial work needs a binary code"):
        partial_code(make_code(name, 6, **params), ROWS[:6], 100)


def on(part):
    """A session on ``part`` (job 0 not arrived yet) and its job, which keeps every decode."""
    work = Decodes(part)
    return Driver(part, work=work), work


def send(d, vals, worker, tasks, now, it=0):
    """``worker``'s results of ``tasks`` of job 0's iteration ``it``: what the session does."""
    return d.result(worker, list(tasks), vals[list(tasks)], now, iteration=it)


def assigned(out):
    """The ASSIGNs in ``out``, by code worker."""
    return {a.rank - 1: a.tasks for a in of(out, ev.Assign)}


def lost(rank, left):
    """What the loss of ``rank`` says when ``left`` workers remain and the round goes on."""
    return [ev.Forget(rank), ev.Log("warning", f"worker rank(s) [{rank}] failed; {left} workers left"),
            ev.Record({"record": "failure", "ranks": [rank], "workers_left": left})]


def as_built(part, code):
    """``part`` named and parametrised as ``code`` (the session re-builds its code from them,
    and the Driver gives it the pieced code as its code)."""
    return dataclasses.replace(part, name=code.name, built_with=dict(code.built_with))


def test_idle_holders_take_over_a_stragglers_share_from_its_far_end():
    """The session on partial frc (workers 0 and 1 hold partitions 0 and 1): worker 0 sends
    two pieces of its share and nothing more. Worker 1, done with its own at over twice
    worker 0's pace, is handed at once the far half (rounded up) of what worker 0 still owes,
    far end first, and worker 0 is told the rest is its list, once: silent since, it is not
    told again (it would only have more to read); then half of that, at once, and so on, to
    the last piece: the decode never waits for the slow one, uses its two pieces and counts
    every row once."""
    code, part = cut("frc", {"stragglers": 1}, chunk=100)
    vals, each = values_of(part, np.random.default_rng(4))
    d, work = on(part)
    d.open()
    share = list(part.schedule[0])
    assert send(d, vals, 0, share[:2], 1.0) == []
    taken = {}  # rank -> pieces of its share the partner took
    for w in (3, 2, 5, 4):  # pairs: the first done takes half of its partner's share; the
        done = send(d, vals, w, part.schedule[w], 2.0)  # partner sends its whole share:
        assert of(done, ev.Assign) == done  # the thief is spared
        assert sorted(a.rank - 1 for a in done) == ([w + 1] if w in (2, 4) else [w - 1, w])
        if w in (3, 5):
            taken[w] = len(assigned(done)[w])
    out = send(d, vals, 1, part.schedule[1], 2.0)
    owed, handed, told, now = share[2:], [], [], 2.0
    while not of(out, ev.Decoded):
        # robbed of its last piece, worker 0 waits on worker 1 in turn
        assert of(out, ev.Assign) == [i for i in out if not isinstance(i, ev.WakeAt)]
        given = assigned(out)
        k = len(owed) // 2
        assert list(given[1]) == owed[k:][::-1]
        if 0 in given:
            assert list(given[0]) == owed[:k]
            told.append(k)
        assert set(given) <= {0, 1}
        handed.append(len(given[1]))
        owed = owed[:k]
        now += 0.1
        out = send(d, vals, 1, given[1], now)
    assert handed == [5, 2, 1, 1] and owed == [] and told == [4]
    # by rank, what each gave away: worker 0 its nine, workers 2 and 4 what their partners took
    assert d.session.handed == {1: 9, **taken} and min(taken.values()) > 0
    decoded = out[0]
    assert isinstance(decoded, ev.Decoded) and (decoded.job, decoded.iteration) == (0, 0)
    assert np.allclose(work.decoded[-1][0], each.sum(axis=0), rtol=1e-12)
    assert set(share[:2]) <= decoded.used


def test_the_session_decodes_a_run_exactly_after_a_helpers_piece_of_it():
    """frc s=1: worker 1 sends a piece of its partner's share on its own (taken over), then
    worker 0, which had it under way, its run of the first three pieces of that share, one
    value for all: the decode counts every row once, with nothing subtracted."""
    code, part = cut("frc", {"stragglers": 1}, chunk=100)
    vals, each = values_of(part, np.random.default_rng(5))
    d, work = on(part)
    d.open()
    pieces = part.params["pieces"]
    share = [t for t in part.schedule[0] if pieces[t].key == pieces[part.schedule[0][0]].key]
    run = share[:3]
    spared = send(d, vals, 1, [run[2]], 1.0)  # worker 0 is told its list without it,
    assert [a.tasks for a in of(spared, ev.Assign)] == [tuple(t for t in part.schedule[0]
                                                              if t != run[2])]
    d.handle(ev.ResultArrived(1, 0, 0, 0, run, vals[run].sum(axis=0, keepdims=True), 1.5,
                              runs=(3,)))  # but has it under way in its run
    out: list[ev.Instruction] = []
    for w in range(part.n_workers):
        rest = [t for t in part.schedule[w] if t not in run]
        out += send(d, vals, w, rest, 2.0)
    assert len(of(out, ev.Decoded)) == 1
    np.testing.assert_allclose(work.decoded[-1][0], each.sum(axis=0), rtol=1e-12)


def test_a_dead_holders_pieces_are_handed_to_an_idle_one():
    code, part = cut("frc", {"stragglers": 1}, chunk=100)
    vals, _ = values_of(part, np.random.default_rng(5))
    d, _ = on(part)
    d.open()
    for w in (3, 2, 5, 4, 1):
        done = send(d, vals, w, part.schedule[w], 1.0)
    far = next(a for a in done if a.rank == 2)  # worker 1 takes the far half of 0's share
    assert d.lose(0, 1.5) == lost(1, 5)  # worker 1 is busy: the rest waits for it
    (rest,) = send(d, vals, 1, far.tasks, 2.0)
    assert isinstance(rest, ev.Assign) and rest.rank == 2
    assert sorted(far.tasks + rest.tasks) == sorted(part.schedule[0])
    decoded = send(d, vals, 1, rest.tasks, 3.0)
    assert isinstance(decoded[0], ev.Decoded) and decoded[0].iteration == 0


def test_losing_every_holder_of_a_partition_asks_for_a_recode():
    """The round cannot decode without partitions 0 and 1: it is abandoned (every living
    worker on it purged), the code re-built for the four left and the round sent again."""
    code, part = cut("frc", {"stragglers": 1}, chunk=100)
    d = Driver(as_built(part, code), work=Shape(part, rows=ROWS[:6]), chunk_rows=100)
    d.open()
    assert d.lose(0) == lost(1, 5)  # worker 1 still holds partitions 0 and 1
    out = d.lose(1)
    s = d.session
    assert (s.epoch, s.code.name, s.code.n_workers, s.recodes) == (1, "frc", 4, 1)
    assert out == [
        *lost(2, 4), *(ev.Purge(rank, 0, 0, 0) for rank in (3, 4, 5, 6)),
        ev.Log("info", "workers died: re-coded for 4 workers: frc stragglers=1, tolerance 0 "
                       "(epoch 1)"),
        ev.Record({"record": "recode", "reason": "workers died", "epoch": 1, "workers": 4,
                   "code": "frc"}),
        ev.Place(1, tuple(ev.Target(w + 3, w + 3, w, s.code.schedule[w]) for w in range(4)),
                 s.code, s.pieces, s.work, 100),
        ev.Iterate(0, 0, 1, tuple((w + 3, s.pieces.schedule[w]) for w in range(4)), s.stream.theta)]


def test_the_simulator_pays_no_redundancy_without_a_straggler():
    """Persistent delays: partial gfrc s=2 runs in uncoded's time with nobody slow, where the
    static code computes three partitions a worker; with a 20x straggler it beats static."""
    code = make_code("gfrc", 6, stragglers=2)
    part = partial_code(code, [40000] * 6, 2500)
    cost = piece_cost(part)
    none = DelayModel("persistent", seed=0, task_time=1.0)
    slow = DelayModel("persistent", seed=0, task_time=1.0, slow=frozenset({1}), slow_factor=20)
    assert Simulator(part, none, cost).run(5).mean("wall_s") == pytest.approx(1.0)
    assert Simulator(code, none).run(5).mean("wall_s") == pytest.approx(3.0)
    assert Simulator(part, slow, cost).run(5).mean("wall_s") < Simulator(code, slow).run(5).mean(
        "wall_s")


def test_spread_pays_a_straggler_only_its_share():
    """Persistent delays, one worker 20x slow: under partial gfrc s=1 its one group mate does
    its rows too (1.5x or more the no-straggler time); under partial spread s=1 every other
    worker shares them, within 1.25x (the limit n/(n - 1 + 1/20) is 1.19)."""
    slow = DelayModel("persistent", seed=0, task_time=1.0, slow=frozenset({1}), slow_factor=20)
    walls = {}
    for name in ("gfrc", "spread"):
        code = make_code(name, 6, stragglers=1)
        rows = [240000 // code.n_partitions] * code.n_partitions
        part = partial_code(code, rows, 400)
        cost = piece_cost(part)
        walls[name] = Simulator(part, slow, cost).run(5).mean("wall_s")
    assert walls["gfrc"] >= 1.5 and walls["spread"] <= 1.25, walls


def frc_with_2_to_5_done(seed):
    """Partial frc s=1 (workers 0 and 1 hold partitions 0 and 1), an iteration open, workers 2
    to 5 done with their shares: the code, made-up values, their sums, the session and its
    job."""
    _, part = cut("frc", {"stragglers": 1}, chunk=100)
    vals, each = values_of(part, np.random.default_rng(seed))
    d, work = on(part)
    d.open()
    for w in (2, 3, 4, 5):
        send(d, vals, w, part.schedule[w], 1.0)
    return part, vals, each, d, work


def test_a_slow_holder_is_told_its_shortened_list_again_once_it_reports():
    """frc: worker 0 silent, worker 1 takes half of its share twice; 0 is told once. Then 0
    reports a piece, and the next handover tells it again."""
    part, vals, _, d, _ = frc_with_2_to_5_done(6)

    def worker_1_done(tasks):
        return assigned(send(d, vals, 1, tasks, 2.0))

    first = worker_1_done(part.schedule[1])
    assert set(first) == {0, 1}
    second = worker_1_done(first[1])
    assert set(second) == {1}  # 0 has not read the first notice, as far as the master knows
    own = first[0][0]
    send(d, vals, 0, [own], 2.5)
    third = worker_1_done(second[1])
    assert set(third) == {0, 1} and own not in third[0]


def play_round(d, vals, silent, opened):
    """The round ``opened`` sent out, with every worker but ``silent`` computing at once what
    it is sent (its share, then what is handed to it): the workers sent its ITERATE, the
    decoded sum and what the decode sent out (the next round)."""
    (iterate,) = of(opened, ev.Iterate)
    it = iterate.iteration
    work = [(rank - 1, tasks) for rank, tasks in iterate.lists]
    sent = {w for w, _ in work}
    while work:
        w, tasks = work.pop(0)
        if w == silent:
            continue
        out = send(d, vals, w, tasks, it + 0.5, it)
        if of(out, ev.Decoded):
            return sent, d.session.work.decoded[-1][0], out
        work += assigned(out).items()
    raise AssertionError("the round did not decode")


def test_a_worker_silent_for_two_rounds_is_left_out_until_it_sends():
    """Partial spread s=1, worker 1 never answers: it is sent rounds 1-3, left out of the
    fourth and fifth (its share orphaned: the others decode every row once without it), and
    back in the round after a (stale) result of its own (the next round is sent with a
    decode, so the result comes while the fifth is open)."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, each = values_of(part, np.random.default_rng(7))
    d, _ = on(part)
    opened = d.open()
    rounds = []
    for it in range(5):
        if it == 4:  # stale: of the first round
            assert send(d, vals, 1, [part.schedule[1][0]], 5.0, it=0) == []
        sent, total, opened = play_round(d, vals, 1, opened)
        assert np.allclose(total, each.sum(axis=0), rtol=1e-12)
        rounds.append(1 in sent)
    assert rounds == [True] * (QUIET_ROUNDS + 1) + [False] * (4 - QUIET_ROUNDS)
    sent, _, _ = play_round(d, vals, 1, opened)
    assert 1 in sent


def test_a_quiet_worker_is_kept_where_its_partitions_would_have_no_holder():
    """Partial spread s=1, workers 1 and 4 both silent for long: partition {1, 4} has no other
    holder, so only one of them (the later, 4) is left out and 1 is still sent the round."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    d = after_silence(part, (1, 4))
    out = d.open()
    assert left_out(d, out) == {4}
    assert of(out, ev.Iterate) == out and sorted(lists(out)) == [0, 1, 2, 3, 5]


def test_a_quiet_holder_is_sent_the_round_when_the_others_holding_its_partition_die():
    """Partial spread s=1, worker 4 quiet: partition {1, 4}'s pieces are worker 1's alone.
    Worker 1 dies: the round can still decode, so worker 4 is sent an ITERATE at once (not an
    ASSIGN: it has no round under way) with the pieces only it can take now, those of
    partition {1, 4}; the others do the rest and the round decodes."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, each = values_of(part, np.random.default_rng(8))
    d = after_silence(part, (4,), Decodes(part))
    assert left_out(d, d.open()) == {4}
    rnd = d.session.round
    out = d.lose(1)
    assert isinstance(out[-1], ev.Iterate) and len(out[-1].lists) == 1
    ((rank, tasks),) = out[-1].lists
    assert out == [*lost(2, 5), ev.Iterate(0, 0, 0, ((5, tasks),), d.session.stream.theta)]
    shared = part.params["subsets"].index((1, 4))
    assert {part.params["pieces"][t].key for t in tasks} == {shared}
    work = [(w, part.schedule[w]) for w in (0, 2, 3, 5)] + [(4, tasks)]
    decoded, now, wake = None, 1.0, None
    while decoded is None:
        if work:
            w, tasks = work.pop(0)
            out = send(d, vals, w, tasks, now)
        else:  # everyone idle: those waiting take over once a holder is overdue
            assert wake is not None
            now = max(now, wake)
            out, wake = d.handle(ev.Tick(now)), None
        now += 0.01
        wakes = of(out, ev.WakeAt)
        wake = wakes[-1].at if wakes else wake
        out = [i for i in out if i not in wakes]
        if of(out, ev.Decoded):
            decoded = out[0]
        else:
            assert of(out, ev.Assign) == out  # 4 is in the round now: ASSIGNs from here
            work += assigned(out).items()
    assert isinstance(decoded, ev.Decoded) and decoded.iteration == 0
    assert np.allclose(d.session.work.decoded[-1][0], each.sum(axis=0), rtol=1e-12)
    assert 4 in rnd.sent


def test_a_thief_is_spared_the_pieces_its_victim_sent_before_reading_the_notice():
    """frc: worker 1 done first takes the far half of worker 0's share, far end first. Worker 0,
    not slow, had computed all but the last piece of its share before the notice came and
    sends them: worker 1 is told its list without those pieces (it would compute them again),
    the last one alone; the round decodes, each piece once."""
    part, vals, each, d, work = frc_with_2_to_5_done(9)
    first = send(d, vals, 1, part.schedule[1], 2.0)
    taken = next(a.tasks for a in first if a.rank == 2)
    share = list(part.schedule[0])
    done_first = share[: len(share) - 1]  # all but its last: the decode is not complete yet
    spared = send(d, vals, 0, done_first, 2.5)
    notice = next(a for a in spared if a.rank == 2)
    assert isinstance(notice, ev.Assign)
    assert set(notice.tasks) == set(taken) - set(done_first) == {share[-1]}
    decoded = send(d, vals, 1, notice.tasks, 3.0)
    assert isinstance(decoded[0], ev.Decoded) and decoded[0].iteration == 0
    assert np.allclose(work.decoded[-1][0], each.sum(axis=0), rtol=1e-12)


def test_a_quiet_workers_share_is_dealt_out_with_the_round():
    """Partial spread s=1, worker 1 quiet: its share goes out in the round's ITERATEs, each
    piece to another holder of its partition (the one partner each partition has), appended to
    the lists; the lists stay even, and the round decodes every row once without worker 1."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, each = values_of(part, np.random.default_rng(10))
    d = after_silence(part, (1,), Decodes(part))
    out = d.open()
    assert left_out(d, out) == {1} and of(out, ev.Iterate) == out
    given = lists(out)
    pieces, holds = part.params["pieces"], part.params["holds"]
    for w, tasks in given.items():
        own = len(part.schedule[w])
        assert tasks[:own] == part.schedule[w]  # its own share first, then what it was dealt
        assert all(pieces[t].key in holds[w] for t in tasks)
    dealt = [t for w, tasks in given.items() for t in tasks[len(part.schedule[w]):]]
    assert sorted(dealt) == sorted(part.schedule[1])
    assert max(map(len, given.values())) - min(map(len, given.values())) <= 1
    work = list(given.items())
    while work:
        w, tasks = work.pop(0)
        out = send(d, vals, w, tasks, 1.0)
        if of(out, ev.Decoded):
            assert np.allclose(d.session.work.decoded[-1][0], each.sum(axis=0), rtol=1e-12)
            assert d.session.handed[2] == len(part.schedule[1])  # rank 2 gave all its share
            return
        work += assigned(out).items()
    raise AssertionError("the round did not decode")


def test_describe_names_the_pieces_still_needed_and_whom_they_wait_on():
    """SIGUSR1's line under partial work: not every piece ever received, but those the decode
    still needs, by the worker that owns each now (a hung run's culprit at a glance)."""
    code, part = cut("frc", {"stragglers": 1}, chunk=100)
    vals, _ = values_of(part, np.random.default_rng(6))
    d = Driver(part, resume=(0, 2, np.zeros(1)))  # job 0 resumed at iteration 2
    assert of(d.open(), ev.Iterate)[0].iteration == 2
    share = list(part.schedule[0])
    send(d, vals, 0, share[:2], 1.0, it=2)
    for w in (2, 3, 4, 5):  # two partitions' holders both done: nothing needed from them
        send(d, vals, w, part.schedule[w], 1.0, it=2)
    needed = {0: share[2:], 1: list(part.schedule[1])}
    assert d.session.describe() == (
        f"epoch 0, job 0 iteration 2 open: {2 + sum(len(part.schedule[w]) for w in (2, 3, 4, 5))}"
        f" pieces in, still needed by owner {needed} (-1: nobody's); lost workers []")


def test_a_holder_robbed_of_its_last_piece_takes_it_back_once_its_robber_is_overdue():
    """ucmmc load 2 (worker w holds partitions w and w + 1): worker 0 slow. Worker 5, done,
    takes at once worker 0's next piece of partition 0 (worker 0, over twice as slow, would be
    done last), which nobody else can compute, and worker 0 is told what is left. Done with it,
    worker 5 takes the far half of worker 4's share of partition 5; worker 4, done with the
    rest, waits (worker 5 is due to finish that piece first), then, worker 5 overdue, takes
    that piece back (the last piece a holder owes goes to the idle one), and worker 5 is told
    its list is empty."""
    code = make_code("ucmmc", 6, load=2)
    part = partial_code(code, [1000] * 6, 250)
    vals, each = values_of(part, np.random.default_rng(5))
    key = [p.key for p in part.params["pieces"]]
    d, work = on(part)
    d.open()

    def to(w, tasks):
        return ev.Assign(w + 1, 0, 0, 0, tuple(tasks))

    s0, s4, s5 = (list(part.schedule[w]) for w in (0, 4, 5))
    assert [key[t] for t in s0] == [0, 0, 1, 1] and [key[t] for t in s5] == [0, 0, 5, 5]
    assert send(d, vals, 0, s0[:1], 1.0) == []  # worker 0 sends one piece of partition 0
    send(d, vals, 3, part.schedule[3], 1.0)  # it takes a piece of partition 3 from worker 2
    assert send(d, vals, 5, s5, 1.1) == [to(5, s0[1:2]), to(0, s0[2:])]
    mine = [t for t in s4 if key[t] == 5]
    far = mine[-1]
    assert send(d, vals, 5, s0[1:2], 1.2) == [to(5, [far]), to(4, s4[:-1])]
    wait = send(d, vals, 4, s4[:-1], 1.3)
    assert len(wait) == 1 and isinstance(wait[0], ev.WakeAt) and wait[0].at > 1.3
    first = d.handle(ev.Tick(wait[0].at))
    assert first[:2] == [to(4, [far]), to(5, [])]
    out = send(d, vals, 4, [far], 8.1)
    for w in (1, 2):
        out += send(d, vals, w, part.schedule[w], 8.2)
    while not of(out, ev.Decoded):  # and so on, to the decode
        given, wakes = [a for a in of(out, ev.Assign) if a.rank != 1], of(out, ev.WakeAt)
        assert given or wakes
        out = [b for a in given for b in send(d, vals, a.rank - 1, a.tasks, 8.3)] or (
            d.handle(ev.Tick(max(w.at for w in wakes))) if wakes else [])
    assert np.allclose(work.decoded[-1][0], each, rtol=1e-12)  # ucmmc's target: each partition


def test_a_silent_worker_is_sent_one_round_in_three():
    """Partial spread s=1, worker 1 never answers at all: sent the first three rounds, then
    one round in QUIET_ROUNDS + 1 (a retry: it may have been purged before it could send)."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, _ = values_of(part, np.random.default_rng(7))
    d, _ = on(part)
    opened = d.open()
    rounds = []
    for _ in range(12):
        sent, _, opened = play_round(d, vals, 1, opened)
        rounds.append(1 in sent)
    assert rounds == [True] * 3 + [False, False, True] * 3


@pytest.mark.parametrize("linger", [True, False])
def test_the_end_does_not_wait_for_a_worker_with_nothing_in_the_last_round(linger):
    """Partial spread s=1, worker 1 silent: the last round decodes without it, every other
    rank acknowledges STOP, and the run ends then with rank 2 lingering (its acknowledgement
    taken after the run) under ``linger``; without, the end waits for it."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, _ = values_of(part, np.random.default_rng(3))
    d = Driver(part, work=Decodes(part), iterations=1, linger=linger)
    _, _, out = play_round(d, vals, 1, d.open())
    assert of(out, ev.Stop) == [ev.Stop(r) for r in range(1, 7)]
    d.handle(ev.LossComputed(0, 0, None, 1.0))  # the job is done: the end is waited for
    fast = [d.handle(ev.StopAcknowledged(r)) for r in (1, 3, 4, 5, 6)]
    assert fast[:-1] == [[]] * 4
    releases = [ev.Release(r) for r in (1, 3, 4, 5, 6)]
    if linger:
        assert fast[-1][:-1] == [*releases, ev.Linger(2)]
        assert isinstance(fast[-1][-1], ev.Finish)
        assert d.handle(ev.StopAcknowledged(2)) == []  # after the end: the executor's
    else:
        assert fast[-1] == []
        last = d.handle(ev.StopAcknowledged(2))
        assert last[:-1] == [ev.Release(r) for r in range(1, 7)]
        assert isinstance(last[-1], ev.Finish)


def test_a_worker_with_a_live_result_in_the_last_round_is_waited_for():
    """Every worker sent a live piece in the round: the end waits for each acknowledgement."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, _ = values_of(part, np.random.default_rng(3))
    d = Driver(part, work=Decodes(part), iterations=1, linger=True)
    play_round(d, vals, -1, d.open())
    d.handle(ev.LossComputed(0, 0, None, 1.0))
    assert [i for r in range(1, 6) for i in d.handle(ev.StopAcknowledged(r))] == []
    last = d.handle(ev.StopAcknowledged(6))
    assert last[:-1] == [ev.Release(r) for r in range(1, 7)]


def test_an_unanswered_stop_is_waited_for_only_as_long_as_no_worker_on_time_is_silent():
    """Three rounds, every worker sending what it is sent at once, its longest silence a
    round (1 s): the end waits for the acknowledgements only until SILENT times that past
    the final loss (not past STOP: the master read no answer while it computed the loss),
    then ends with rank 6 lingering, though it sent a live result in the last round
    (stalled since, it would hold the end for its scheduling periods)."""
    code = make_code("spread", 6, stragglers=1)
    part = partial_code(code, [1000] * code.n_partitions, 250)
    vals, _ = values_of(part, np.random.default_rng(3))
    d = Driver(part, work=Decodes(part), iterations=3, linger=True)
    opened = d.open()
    for _ in range(3):
        _, _, opened = play_round(d, vals, -1, opened)
    assert of(opened, ev.Stop) == [ev.Stop(r) for r in range(1, 7)]  # at 2.5
    patience = 4.0 + SILENT * 1.0  # the loss took 1.5 s, as long as the patience
    assert of(d.handle(ev.LossComputed(0, 2, None, 4.0)), ev.WakeAt) == [ev.WakeAt(patience)]
    assert [i for r in range(1, 6) for i in d.handle(ev.StopAcknowledged(r))] == []
    assert d.handle(ev.Tick(patience - 0.01)) == []
    end = d.handle(ev.Tick(patience))
    assert end[:-1] == [*(ev.Release(r) for r in range(1, 6)), ev.Linger(6)]
    assert isinstance(end[-1], ev.Finish)


def test_handed_counts_pieces_another_owns_not_those_nobody_took():
    """A round's share of each piece against its owner at the decode: taken over (worker 1's
    piece 2, now worker 0's) and stood in for (RELEASED) count for the share's worker; a piece
    nobody took (owner -1: a dead or quiet worker's, left to the hand-over) does not."""
    from mpicoded.core.pieces import RELEASED
    from mpicoded.core.round import Round

    rnd = Round(0, 0, 0, 0.0, None, {})  # type: ignore[arg-type]  # no decoder needed here
    rnd.share = {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2}
    rnd.owner = {0: 0, 1: 0, 2: 0, 3: RELEASED, 4: -1, 5: 2}
    assert rnd.handed() == {1: 2}

