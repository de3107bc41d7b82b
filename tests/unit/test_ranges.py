"""Partial work on a job coded on its data (no MPI): coded blocks cut on one grid of row ranges,
each range decoded on its own, holders' shares spread round the grid, idle workers standing in
for a straggler's ranges with their own blocks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sessions import Decodes, Driver, after_silence, left_out, lists, of, opened

from mpicoded.codes import make_code
from mpicoded.codes.partial import RangeDecoder, grid_step, piece_cost, range_code
from mpicoded.core import events as ev
from mpicoded.core.pieces import RELEASED
from mpicoded.core.shape import Shape
from mpicoded.delays import DelayModel
from mpicoded.sim import Simulator

HEIGHT = 60  # rows of every coded block


def blocks_of(code, rng):
    """Made-up partitions Y_j (HEIGHT x 3 values each: a product's rows) and every coded
    block's value B[t] @ Y, range by range as a worker computes it."""
    Y = rng.standard_normal((code.n_partitions, HEIGHT, 3))
    coded = np.einsum("tj,jrc->trc", code.B, Y)
    return Y, coded


def piece_values(part, coded):
    """Each piece's value: its block's rows, padded to the code's value size."""
    size = part.params["value_size"]
    vals = np.zeros((part.n_tasks, size, 3))
    for t, p in enumerate(part.params["pieces"]):
        vals[t, : p.stop - p.start] = coded[p.key, p.start: p.stop]
    return vals


@pytest.mark.parametrize(("name", "params", "ranges"), [
    ("mds", {"stragglers": 1}, 6), ("mds", {"stragglers": 2}, 12), ("mds", {"stragglers": 1}, 7),
    ("uncoded", {"target": "each"}, 6), ("cpgc", {"load": 2}, 6)])
def test_the_shares_cover_every_range_as_often_as_the_code_needs(name, params, ranges):
    """The pieces tile every coded block; a worker's share is of its own blocks only; every
    range is in as many shares as the code has partitions (at least; exactly where the ranges
    are a multiple of the tasks), so with no straggler the work is that of uncoded."""
    code = make_code(name, 6, **params)
    part = range_code(code, HEIGHT, ranges)
    grid = part.params["ranges"]
    assert grid[0][0] == 0 and grid[-1][1] == HEIGHT
    assert all(a[1] == b[0] for a, b in zip(grid, grid[1:], strict=False))
    pieces = part.params["pieces"]
    assert part.n_tasks == code.n_tasks * ranges
    for w, share in enumerate(part.schedule):
        assert all(pieces[t].key in code.schedule[w] for t in share)
    cover = np.bincount([t % ranges for share in part.schedule for t in share], minlength=ranges)
    assert cover.min() >= code.n_partitions
    if ranges % code.n_tasks == 0:
        assert (cover == code.n_partitions).all(), cover
    assert piece_cost(part).reshape(code.n_tasks, ranges).sum(axis=1) == pytest.approx(1.0)


@pytest.mark.parametrize(("stragglers", "multiple"), [(1, 1), (1, 3), (2, 1), (2, 2)])
def test_a_repetition_codes_holders_split_each_block_once(stragglers, multiple):
    """spread with target each (a matrix-vector job's blocks held as they are by s+1 workers):
    the grid is a multiple of the s+1 holders, and the holders of a block split its ranges in
    runs, so with no straggler every row of every block is computed exactly once."""
    code = make_code("spread", 6, stragglers=stragglers, target="each")
    assert grid_step(code) == stragglers + 1
    ranges = multiple * grid_step(code)
    part = range_code(code, HEIGHT, ranges)
    shares = [t for share in part.schedule for t in share]
    assert sorted(shares) == list(range(part.n_tasks))  # every piece once, none twice
    pieces = part.params["pieces"]
    for w, share in enumerate(part.schedule):
        assert all(pieces[t].key in code.schedule[w] for t in share)
        assert len(share) == len(code.schedule[w]) * multiple


def test_the_grid_step_is_the_tasks_but_for_a_repetitions_holders():
    for name, params in (("mds", {"stragglers": 1}), ("cpgc", {"load": 2}),
                         ("uncoded", {"target": "each"})):
        code = make_code(name, 6, **params)
        assert grid_step(code) == (1 if name == "uncoded" else code.n_tasks), name


def test_a_sum_target_and_a_tolerance_are_refused():
    with pytest.raises(ValueError, match="target is 'each'"):
        range_code(make_code("gfrc", 6, stragglers=1), HEIGHT, 6)
    part = range_code(make_code("mds", 6, stragglers=1), HEIGHT, 6)
    with pytest.raises(ValueError, match="decodes every row range exactly"):
        part.decoder(tolerance=1)


@pytest.mark.parametrize("seed", range(5))
def test_a_range_decode_recovers_every_block_exactly_from_any_sufficient_pieces(seed):
    """mds s=2 on 6 workers: pieces arrive in a random order, some twice; the decoder is ready
    exactly when every range has 4 distinct tasks in, and gives every partition's rows."""
    rng = np.random.default_rng(seed)
    code = make_code("mds", 6, stragglers=2)
    part = range_code(code, HEIGHT, 6)
    Y, coded = blocks_of(code, rng)
    vals = piece_values(part, coded)
    dec = part.decoder()
    assert isinstance(dec, RangeDecoder)
    per_range = np.zeros(6, dtype=int)
    for t in rng.permutation(part.n_tasks):
        ready = dec.add(int(t), vals[t])
        dec.add(int(t), vals[t])  # a duplicate counts once
        per_range[t % 6] = min(per_range[t % 6] + 1, code.n_partitions)
        assert ready == (per_range == code.n_partitions).all()
        if ready:
            break
    got = dec.result()
    assert got.shape == Y.shape
    assert np.allclose(got.reshape(Y.shape), Y, rtol=1e-10, atol=1e-12)
    assert len(dec.missing_partitions) == 0
    assert dec.results_used == 6 * code.n_partitions and all(not dec.needs(t)
                                                             for t in range(part.n_tasks))


def run_round(d, opened, vals, silent=(), die=None):
    """The round ``opened`` sent out: every worker but ``silent`` computes at once what it is
    sent; ``die`` (worker, after how many of its results) dies then. The round's DECODED, its
    result and what was handed to whom."""
    (iterate,) = of(opened, ev.Iterate)
    it = iterate.iteration
    work = [(rank - 1, tasks) for rank, tasks in iterate.lists]
    assigned: list[tuple[int, tuple[int, ...]]] = []
    results = 0
    while work:
        w, tasks = work.pop(0)
        if w in silent or not tasks:
            continue
        new = d.result(w, list(tasks), vals[list(tasks)], it + 0.5, iteration=it)
        results += 1
        if die is not None and results == die[1]:
            new += d.lose(die[0], it + 0.5)
            silent = (*silent, die[0])
        for a in new:
            if isinstance(a, ev.Decoded):
                return a, d.session.work.decoded[-1][0], assigned
            if isinstance(a, ev.Record) and a.row["record"] == "recode":
                raise AssertionError(f"re-code: {a.row['reason']}")
            if isinstance(a, ev.Assign | ev.Iterate):
                given = lists([a])
                assigned += given.items()
                work += given.items()
    raise AssertionError("the round did not decode")


def test_idle_workers_stand_in_for_a_stragglers_ranges_with_their_own_blocks():
    """mds s=1 on 6 workers, 12 ranges, worker 2 silent: a worker done with its share (10
    ranges) is handed pieces of its own block on ranges it has not computed, each once, in
    place of the far half of the largest share still owed; worker 2 is told its shortened list
    once; the decode is exact without a single piece of worker 2's."""
    code = make_code("mds", 6, stragglers=1)
    part = range_code(code, HEIGHT, 12)
    Y, coded = blocks_of(code, np.random.default_rng(1))
    vals = piece_values(part, coded)
    decoded, result, assigned = run_round(*opened(part), vals, silent=(2,))
    pieces = part.params["pieces"]
    for w in (0, 1, 3, 4, 5):
        given = [set(tasks) for v, tasks in assigned if v == w]
        share = set(part.schedule[w])
        notices = [got for got in given if got <= share]  # shortened: a thief took some
        extra = [t for got in given if not got <= share for t in got]
        assert all(pieces[t].key == w for t in extra)  # mds: worker w holds block w
        assert len(set(extra)) == len(extra) and not set(extra) & share
        assert len(notices) + len(extra) >= 1
    assert sum(v == 2 for v, _ in assigned) == 1  # told once, silent since
    assert not any(pieces[t].key == 2 for t in decoded.used)
    assert np.allclose(result.reshape(Y.shape), Y, rtol=1e-10, atol=1e-12)


def test_a_stragglers_ranges_go_to_the_other_holders_of_its_blocks():
    """spread s=2, target each, on 6 workers, worker 2 silent: every piece of its share is
    handed to another holder of the same block (repetition: no block stands in for another)
    and used, and the decode is every partition's rows exactly."""
    code = make_code("spread", 6, stragglers=2, target="each")
    part = range_code(code, HEIGHT, 2 * grid_step(code))
    Y, coded = blocks_of(code, np.random.default_rng(4))
    vals = piece_values(part, coded)
    d, first = opened(part)
    rnd = d.session.round
    decoded, result, assigned = run_round(d, first, vals, silent=(2,))
    pieces = part.params["pieces"]
    handed = {t for w, tasks in assigned if w != 2 for t in tasks}
    assert set(part.schedule[2]) <= handed & decoded.used
    assert RELEASED not in rnd.owner.values()  # no block stood in for another
    for w, tasks in assigned:
        assert all(pieces[t].key in code.schedule[w] for t in tasks)
    assert np.allclose(result.reshape(Y.shape), Y, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("quiet", [(1,), (1, 4)])
def test_a_repetition_codes_quiet_workers_shares_go_to_holders_of_the_same_blocks(quiet):
    """spread s=2, target each, workers left out of the round (quiet for rounds): their
    shares are dealt to the other holders of the same blocks, never stood in for with another
    block's piece of the range (under repetition that piece is needed as well, and the one it
    replaced would be left to nobody: the round hung so on PageRank with two stragglers)."""
    code = make_code("spread", 6, stragglers=2, target="each")
    part = range_code(code, HEIGHT, grid_step(code))
    Y, coded = blocks_of(code, np.random.default_rng(5))
    vals = piece_values(part, coded)
    d = after_silence(part, quiet)
    out = d.open()
    assert left_out(d, out) == set(quiet) and of(out, ev.Iterate) == out
    pieces = part.params["pieces"]
    for w, tasks in lists(out).items():
        assert all(pieces[t].key in code.schedule[w] for t in tasks)
    owners = d.session.round.owner
    assert all(owners[t] not in quiet and owners[t] >= 0 for t in range(part.n_tasks)), {
        t: w for t, w in owners.items() if w in quiet or w < 0}  # every piece someone's
    d = after_silence(part, quiet, Decodes(part))
    _, result, assigned = run_round(d, d.open(), vals, silent=quiet)
    for w, tasks in assigned:
        assert all(pieces[t].key in code.schedule[w] for t in tasks)
    assert np.allclose(result.reshape(Y.shape), Y, rtol=1e-10, atol=1e-12)


def lost(rank, left):
    """What the loss of ``rank`` says when ``left`` workers remain and the round goes on."""
    return [ev.Forget(rank), ev.Log("warning", f"worker rank(s) [{rank}] failed; {left} workers left"),
            ev.Record({"record": "failure", "ranks": [rank], "workers_left": left})]


def test_a_dead_workers_ranges_are_stood_in_for_and_too_many_deaths_re_code():
    code = make_code("mds", 6, stragglers=1)
    part = range_code(code, HEIGHT, 6)
    Y, coded = blocks_of(code, np.random.default_rng(2))
    vals = piece_values(part, coded)
    _, result, _ = run_round(*opened(part), vals, die=(3, 2))
    assert np.allclose(result.reshape(Y.shape), Y, rtol=1e-10, atol=1e-12)
    # the session re-builds its code from the code's family (the Driver's code is the pieces)
    # and cuts the job's blocks again: ranges of HEIGHT // 6 rows
    d = Driver(dataclasses.replace(part, name=code.name, built_with=dict(code.built_with)),
               work=Shape(part, rows=[HEIGHT] * code.n_partitions, height=HEIGHT,
                          data_coded=True), chunk_rows=HEIGHT // 6)
    d.open()
    assert d.lose(0) == lost(1, 5)  # the other five blocks decode every range
    out = d.lose(1)
    s = d.session
    assert (s.epoch, s.code.name, s.code.n_workers, s.recodes) == (1, "mds", 4, 1)
    assert out == [
        *lost(2, 4), *(ev.Purge(rank, 0, 0, 0) for rank in (3, 4, 5, 6)),
        ev.Log("info", "workers died: re-coded for 4 workers: mds stragglers=1, tolerance 0 "
                       "(epoch 1)"),
        ev.Record({"record": "recode", "reason": "workers died", "epoch": 1, "workers": 4,
                   "code": "mds"}),
        ev.Place(1, tuple(ev.Target(w + 3, w + 3, w, s.code.schedule[w]) for w in range(4)),
                 s.code, s.pieces, s.work, HEIGHT // 6),
        ev.Iterate(0, 0, 1, tuple((w + 3, s.pieces.schedule[w]) for w in range(4)), s.stream.theta)]


def test_where_stand_ins_cannot_decode_every_worker_covers_what_is_still_needed():
    """cpgc load 2 is not MDS: a range does not decode from any six tasks, so with worker 4
    silent the stand-ins are not enough. Once nothing is owed and a range is still not
    decoded, every worker of the round is handed every piece of its blocks still needed that
    nobody has, and the decode is exact."""
    code = make_code("cpgc", 6, load=2)
    part = range_code(code, HEIGHT, 6)
    Y, coded = blocks_of(code, np.random.default_rng(3))
    vals = piece_values(part, coded)
    d, first = opened(part)
    pw = d.session.piecework
    covers = []
    cover = pw._cover

    def spy(rnd, live, now):
        covers.append(cover(rnd, live, now))
        return covers[-1]

    pw._cover = spy
    _, result, _ = run_round(d, first, vals, silent=(0,))
    assert any(covers), "the stand-ins alone decoded: this case no longer tests the cover"
    assert np.allclose(result.reshape(Y.shape), Y, rtol=1e-10, atol=1e-12)


def test_a_silent_worker_goes_quiet_only_where_the_others_blocks_decode():
    """mds s=1: a worker silent for rounds is left out (five blocks decode every range); with
    uncoded (each block needed) it never is."""
    for name, params, quiet in (("mds", {"stragglers": 1}, {2}),
                                ("uncoded", {"target": "each"}, set())):
        code = make_code(name, 6, **params)
        part = range_code(code, HEIGHT, 6)
        d = after_silence(part, (2,))
        assert left_out(d, d.open()) == quiet, name


def test_the_simulator_runs_a_range_code_near_the_no_straggler_time():
    """Persistent delays, mds s=1 on 6 workers: the static code pays its whole block a worker
    (6/5 the data) every iteration and the straggler's time when it is slow; cut in ranges,
    nobody slow costs the data once (1.0), one 20x straggler about a share more."""
    code = make_code("mds", 6, stragglers=1)
    part = range_code(code, 600, 30)
    cost = piece_cost(part)
    none = DelayModel("persistent", seed=0, task_time=1.0)
    slow = DelayModel("persistent", seed=0, task_time=1.0, slow=frozenset({1}), slow_factor=20)
    share = 5 / 6  # of a block: a worker's share
    assert Simulator(part, none, cost).run(5).mean("wall_s") == pytest.approx(share)
    assert Simulator(code, none, np.ones(6)).run(5).mean("wall_s") == pytest.approx(1.0)
    with_straggler = Simulator(part, slow, cost).run(5).mean("wall_s")
    assert share < with_straggler <= 1.0 and with_straggler < Simulator(
        code, slow, np.ones(6)).run(5).mean("wall_s")


def test_the_simulator_runs_spread_ranges_at_the_no_straggler_time():
    """spread s=1, target each, 6 workers, persistent delays: cut in ranges, nobody slow
    costs the data once (15 blocks of one unit over 6 workers: 2.5 each), less than the static
    code, whose holders repeat each other; one 20x straggler costs about its share spread
    over the five others."""
    code = make_code("spread", 6, stragglers=1, target="each")
    part = range_code(code, 600, 2 * grid_step(code))
    cost = piece_cost(part)
    none = DelayModel("persistent", seed=0, task_time=1.0)
    slow = DelayModel("persistent", seed=0, task_time=1.0, slow=frozenset({1}), slow_factor=20)
    ranged = Simulator(part, none, cost).run(5).mean("wall_s")
    assert ranged == pytest.approx(code.n_partitions / code.n_workers)
    assert ranged < Simulator(code, none, np.ones(code.n_tasks)).run(5).mean("wall_s")
    with_straggler = Simulator(part, slow, cost).run(5).mean("wall_s")
    assert ranged < with_straggler <= 1.3 * ranged
