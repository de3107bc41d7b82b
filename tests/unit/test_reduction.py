"""Sums formed by the workers (``--reduce on``), fed by hand: the Session decodes from ids
alone, names each value's coefficient and the tree they are added along, takes in two PARTs,
and re-plans a sum a death or a late rank holds up."""

from __future__ import annotations

import numpy as np
import pytest
from sessions import Decodes, Driver, of

from mpicoded.codes import make_code
from mpicoded.codes.partial import cut_rows
from mpicoded.core import events as ev


def reducing(code, **settings):
    """A session whose workers add up the sum, job 0 arrived."""
    d = Driver(code, work=Decodes(code), reduce=True, **settings)
    d.open()
    return d


def test_a_decode_from_ids_asks_the_holders_for_their_terms_along_a_tree():
    """Uncoded on 6 workers, results in (ids alone) in the order 3, 0, 5, 1, 4, 2: the decode
    names every worker's value once, the first to finish nearest rank 0; nothing steps until
    rank 0's two PARTs are in, and their sum is the decoded result."""
    code = make_code("uncoded", 6)
    d = reducing(code)
    out = []
    for now, w in enumerate([3, 0, 5, 1, 4, 2]):
        out = d.result(w, [w], None, now=float(now))
    assert [type(i) for i in out] == [ev.Decoded, ev.Reduce, ev.Reduce, ev.Reduce, ev.Reduce,
                                      ev.Reduce, ev.Reduce, ev.WakeAt]
    plan = {i.rank: (i.parent, i.children, i.terms) for i in of(out, ev.Reduce)}
    assert plan == {4: (0, (6, 2), ((3, 1.0),)), 1: (0, (5, 3), ((0, 1.0),)),
                    6: (4, (), ((5, 1.0),)), 2: (4, (), ((1, 1.0),)),
                    5: (1, (), ((4, 1.0),)), 3: (1, (), ((2, 1.0),))}
    assert {i.attempt for i in of(out, ev.Reduce)} == {1}
    assert d.handle(ev.PartArrived(4, 0, 0, 0, 1, np.full(3, 2.0), 6.0)) == []
    assert d.handle(ev.PartArrived(6, 0, 0, 0, 1, np.ones(3), 6.0)) == []  # not rank 0's child
    out = d.handle(ev.PartArrived(1, 0, 0, 0, 1, np.full(3, 0.5, dtype=np.float32), 7.0))
    assert of(out, ev.Iterate)[0].iteration == 1
    decoded, missing = d.session.work.decoded[-1]
    np.testing.assert_array_equal(decoded, np.full(3, 2.5)) and len(missing) == 0
    assert d.session.stream.records[-1].wall_s == 7.0 if d.session.stream.records else True


def test_a_run_and_a_helpers_piece_of_it_are_each_named_once_by_their_senders_keys():
    """Partial work: a holder's run is named by its own first piece (what its RESULT named),
    even where the decoder keeps it at a later one, and a helper's piece the run covers is
    left out of the sum."""
    base = make_code("frc", 4, stragglers=1)
    part = cut_rows(base, [12, 12, 12, 12], 3)
    d = reducing(part)
    pieces = part.params["pieces"]
    share = [t for t in part.schedule[0] if pieces[t].key == pieces[part.schedule[0][0]].key]
    run, helper = share[:2], 1
    d.handle(ev.ResultArrived(helper + 1, 0, 0, 0, [run[0]], None, 0.0))  # the helper first
    d.handle(ev.ResultArrived(1, 0, 0, 0, run, None, 1.0, runs=(len(run),)))
    rest = [t for t in range(part.n_tasks) if t not in run]
    owner = {t: next(w for w in range(4) if t in part.schedule[w]) for t in rest}
    out = []
    for t in rest:
        out = d.handle(ev.ResultArrived(owner[t] + 1, 0, 0, 0, [t], None, 2.0))
        if of(out, ev.Reduce):
            break
    terms = {i.rank: dict(i.terms) for i in of(out, ev.Reduce)}
    assert terms[1][run[0]] == 1.0  # the run, by the key its RESULT named
    assert run[0] not in terms.get(helper + 1, {})  # the helper's copy of its first piece
    named = sorted(k for t in terms.values() for k in t)
    assert len(named) == len(set(named))


def test_a_death_during_the_sum_re_plans_it_from_the_livings_values_as_a_star():
    """frc s=1 on 4 workers: workers 0 and 1 hold the same partitions. A decode that used
    worker 0's value re-plans without it once it dies, from worker 1's (every contributor
    straight to rank 0 now), and drops what a PART of the first attempt says."""
    code = make_code("frc", 4, stragglers=1)
    d = reducing(code)
    for now, w in enumerate([0, 2, 1, 3]):
        out = d.result(w, list(code.schedule[w]), None, now=float(now))
        if of(out, ev.Reduce):
            break
    first = {i.rank for i in of(out, ev.Reduce)}
    assert 1 in first  # worker 0 (rank 1) is summed
    for w in range(4):  # the rest come in late: results of a decoded round
        if w + 1 not in first:
            d.result(w, list(code.schedule[w]), None, now=5.0)
    out = d.lose(0, now=6.0)
    again = of(out, ev.Reduce)
    assert again and {i.attempt for i in again} == {2} and {i.parent for i in again} == {0}
    assert 1 not in {i.rank for i in again} and all(i.children == () for i in again)
    assert d.handle(ev.PartArrived(3, 0, 0, 0, 1, np.ones(2), 7.0)) == []  # attempt 1: stale
    for i in again[:-1]:
        assert d.handle(ev.PartArrived(i.rank, 0, 0, 0, 2, np.ones(2), 7.0)) == []
    out = d.handle(ev.PartArrived(again[-1].rank, 0, 0, 0, 2, np.ones(2), 8.0))
    assert of(out, ev.Iterate)[0].iteration == 1


def test_a_death_whose_values_nobody_else_has_re_codes():
    code = make_code("uncoded", 3)
    d = reducing(code)
    for w in range(3):
        d.result(w, [w], None, now=1.0)
    out = d.lose(1, now=2.0)
    assert of(out, ev.Place) and of(out, ev.Iterate)[0].epoch == 1
    assert {p.rank for p in of(out, ev.Purge)} == {1, 3}  # the sum's others drop it


def test_a_sum_overdue_is_asked_of_each_directly_then_done_without_a_late_one():
    """gfrc s=1 on 4 workers. Past the deadline the sum goes as a star; a contributor still
    late after that is left out where the others' values decode without it (and told to drop
    its share), and waited for where they do not."""
    code = make_code("frc", 4, stragglers=1)
    d = reducing(code)
    for w in range(4):
        out = d.result(w, list(code.schedule[w]), None, now=1.0 + w)
    out = []
    for w in range(4):
        out = d.result(w, list(code.schedule[w]), None, now=1.0 + w) or out
    rnd = d.session.round
    red = rnd.reducing
    deadline = of(d.session.reduction.plan(rnd, 5.0), ev.WakeAt)[0].at  # a fresh attempt
    assert d.handle(ev.Tick(deadline - 0.5)) == [ev.WakeAt(deadline)]
    star = of(d.handle(ev.Tick(deadline)), ev.Reduce)
    assert star and all(i.parent == 0 and not i.children for i in star)
    late = star[0].rank
    for i in star[1:]:
        d.handle(ev.PartArrived(i.rank, 0, 0, 0, red.attempt, np.ones(2), deadline + 1))
    out = d.handle(ev.Tick(d.session.reduction.deadline(rnd)))
    if of(out, ev.Reduce):  # the others decode without it: it is told to drop its share
        assert ev.Purge(late, 0, 0, 0) in out and late not in {i.rank for i in of(out, ev.Reduce)}
    else:
        assert out == [] and d.session.round.reducing.waiting == {late}


@pytest.mark.parametrize("name", ["gfrc", "cyclic"])
def test_a_replayed_log_of_a_sum_gives_the_same_instructions(name, tmp_path):
    """The event log keeps the reduce: a session fed the logged events (values left out)
    gives the same instructions."""
    import io
    import json

    from mpicoded.core.eventlog import EventLog, replay, settings_line

    code = make_code(name, 4, stragglers=1)
    d = Driver(code, reduce=True)
    lines = io.StringIO()
    log = EventLog(lines.write, d.session.settings, {})
    log(ev.JobArrived(0, 0.0), d.open())
    for w in range(4):
        event = ev.ResultArrived(w + 1, 0, 0, 0, list(code.schedule[w]), None, float(w))
        log(event, d.handle(event))
    red = d.session.round.reducing
    for rank in sorted(red.waiting):
        event = ev.PartArrived(rank, 0, 0, 0, red.attempt, None, 9.0)
        log(event, d.handle(event))
    text = lines.getvalue().splitlines()
    assert json.loads(text[0])["session"]["reduce"] is True
    assert settings_line  # the settings line the log starts with
    assert len(list(replay(text))) == len(text) - 1
